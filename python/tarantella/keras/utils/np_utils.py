"""keras.utils.np_utils (Keras 2's module name)."""
from tarantella.keras.utils._arrays import to_categorical, normalize  # noqa: F401
