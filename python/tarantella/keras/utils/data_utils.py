"""keras.utils.data_utils (Keras 2's module name)."""
from tarantella.keras.utils._files import get_file  # noqa: F401
from tarantella.keras.utils._sequence import Sequence  # noqa: F401
from tarantella.keras.utils._arrays import pad_sequences  # noqa: F401
