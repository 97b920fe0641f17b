"""tnt.keras: the Keras API of the package (what `from tensorflow import keras` gives)."""
from tarantella.keras import layers, activations, initializers, regularizers, constraints  # noqa: F401
from tarantella.keras import optimizers, losses, metrics, callbacks, datasets, mixed_precision  # noqa: F401
from tarantella.keras.engine import Model, Sequential  # noqa: F401
from tarantella.keras.layers import Input, InputLayer  # noqa: F401
from tarantella.keras import models  # noqa: F401
from tarantella.keras import utils, backend, config, preprocessing  # noqa: F401

__version__ = "2.11.0"  # the Keras whose behaviour the library follows
