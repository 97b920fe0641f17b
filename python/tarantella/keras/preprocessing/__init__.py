"""keras.preprocessing: sequence, text and image (Keras 2's modules, with their formulas); the
dataset builders of keras.utils under their old names too."""
from tarantella.keras.preprocessing import sequence, text, image  # noqa: F401
from tarantella.keras.utils import (  # noqa: F401
    timeseries_dataset_from_array, text_dataset_from_directory, image_dataset_from_directory)
