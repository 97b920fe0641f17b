"""keras.backend (as K): the settings and helpers Keras programs call around their models. Values
are NumPy arrays; the tensor math (K.mean, ...) is not here."""
import numpy as np

from tarantella.keras import layers as _layers

_settings = {"image_data_format": "channels_last", "epsilon": 1e-7, "floatx": "float32"}
_uids = {}


def backend():
    return "tensorflow"  # the backend whose behaviour the library follows


def image_data_format():
    return _settings["image_data_format"]


def set_image_data_format(data_format):
    """'channels_last' or 'channels_first': the default of the image helpers and of the data sets
    loaded by keras.datasets (the layers take data_format per layer, as Keras's do)."""
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"set_image_data_format: expected 'channels_last' or 'channels_first', got {data_format!r}")
    _settings["image_data_format"] = str(data_format)


def epsilon():
    return _settings["epsilon"]


def set_epsilon(value):
    _settings["epsilon"] = float(value)


def floatx():
    return _settings["floatx"]


def set_floatx(value):
    """The library computes in float32 (mixed precision: keras.mixed_precision); float16 and float64
    are refused rather than silently ignored."""
    if value not in ("float16", "float32", "float64"):
        raise ValueError(f"set_floatx: unknown float type {value!r} (expected float16, float32 or float64)")
    if value != "float32":
        raise NotImplementedError(f"set_floatx({value!r}): the library computes in float32 (use "
                                  f"keras.mixed_precision for bfloat16)")
    _settings["floatx"] = value


def cast_to_floatx(x):
    return np.asarray(x, dtype=floatx())


def clear_session():
    """Forgets the automatic layer names (the next Dense is "dense" again) and the uids, as Keras's
    clear_session does; models made before keep working."""
    _layers._name_counts.clear()
    _uids.clear()


def reset_uids():
    _uids.clear()


def get_uid(prefix=""):
    """1 for the first call with a prefix, then 2, 3, ..."""
    _uids[prefix] = _uids.get(prefix, 0) + 1
    return _uids[prefix]


class BoundValue(float):
    """A number read from an object's attribute (an optimizer's learning_rate), so that
    K.set_value(optimizer.learning_rate, v) writes the attribute, as on a tf.Variable."""

    def __new__(cls, value, owner, attr):
        v = super().__new__(cls, value)
        v._owner, v._attr = owner, attr
        return v

    def assign(self, value):
        setattr(self._owner, self._attr, float(np.asarray(value)))

    def numpy(self):
        return float(self)


def get_value(x):
    """The value of a weight, bound value or array, as NumPy (a float for a bound scalar)."""
    if isinstance(x, BoundValue):
        return float(x)
    if hasattr(x, "numpy"):
        return x.numpy()
    return np.asarray(x)


def batch_get_value(tensors):
    return [get_value(x) for x in tensors]


def set_value(x, value):
    """Writes value into a weight (its assign), an optimizer's learning_rate read before, or a
    NumPy array in place."""
    if hasattr(x, "assign"):
        x.assign(value)
    elif isinstance(x, np.ndarray):
        x[...] = value
    else:
        raise TypeError(f"set_value: cannot write into {type(x).__name__} {x!r} (expected a weight, an optimizer's "
                        f"learning_rate or a NumPy array)")


def batch_set_value(tuples):
    for x, value in tuples:
        set_value(x, value)


def is_keras_tensor(x):
    return isinstance(x, _layers.KerasTensor)


def int_shape(x):
    """The shape as a tuple (None for a free dimension): of a Keras tensor, weight or array."""
    if isinstance(x, _layers.KerasTensor):
        return tuple(x.shape)
    if hasattr(x, "shape"):
        return tuple(x.shape)
    return np.shape(x)


def ndim(x):
    return len(int_shape(x))


def dtype(x):
    d = getattr(x, "dtype", None)
    if d is None:
        return np.asarray(x).dtype.name
    return d if isinstance(d, str) else getattr(d, "name", str(d))


def count_params(x):
    """The number of values of a weight or array."""
    shape = int_shape(x)
    if any(s is None for s in shape):
        raise ValueError(f"count_params: the shape {shape} has free dimensions")
    return int(np.prod(shape, dtype=np.int64))


def variable(value, dtype=None, name=None, constraint=None):
    return np.array(value, dtype=dtype or floatx())


def constant(value, dtype=None, shape=None, name=None):
    a = np.array(value, dtype=dtype or floatx())
    return np.full(shape, a, dtype=a.dtype) if shape is not None and a.size == 1 else (
        a.reshape(shape) if shape is not None else a)


def learning_phase():
    return 0


def set_learning_phase(value):
    """Accepted: fit trains and predict infers, whatever the phase (as in Keras 2.11, deprecated)."""
    if value not in (0, 1):
        raise ValueError(f"set_learning_phase: expected 0 or 1, got {value!r}")


def manual_variable_initialization(value):
    """Accepted: the library initializes the weights when the model is built."""
