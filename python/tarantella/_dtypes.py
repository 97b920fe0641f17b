"""TensorFlow's dtype objects (tf.float32, ...) over NumPy's: each has TensorFlow's name and
attributes and a `.dtype` (a NumPy dtype), so NumPy accepts it wherever it takes a dtype."""
import numpy as np


class DType:
    def __init__(self, name, np_dtype):
        self.name = name
        self.dtype = np.dtype(np_dtype)  # what NumPy reads when given this object as a dtype

    @property
    def as_numpy_dtype(self):
        return self.dtype.type

    @property
    def is_floating(self):
        return self.dtype.kind == "f"

    @property
    def is_integer(self):
        return self.dtype.kind in "iu"

    @property
    def is_bool(self):
        return self.dtype.kind == "b"

    @property
    def size(self):
        return self.dtype.itemsize

    @property
    def min(self):
        return (np.finfo if self.is_floating else np.iinfo)(self.dtype).min

    @property
    def max(self):
        return (np.finfo if self.is_floating else np.iinfo)(self.dtype).max

    def __eq__(self, other):
        try:
            return self.name == as_dtype(other).name
        except (TypeError, ValueError):
            return False

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"tf.{self.name}"


_NAMES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool", "complex64", "complex128"]
DTYPES = {n: DType(n, n) for n in _NAMES}
DTYPES["string"] = DType("string", object)  # text elements are Python str (bytes in TensorFlow)
DTYPES["bfloat16"] = DType("bfloat16", np.float32)  # computed as float32 in NumPy


def as_dtype(value):
    """A DType from a DType, a name ('float32'), a NumPy dtype or type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in DTYPES:
        return DTYPES[value]
    try:
        d = np.dtype(value)
    except TypeError:
        raise TypeError(f"as_dtype: {value!r} is not a dtype (expected a name such as 'float32', a NumPy "
                        f"dtype or tf.float32)") from None
    if d.kind in "OUS":
        return DTYPES["string"]
    if d.name not in DTYPES:
        raise ValueError(f"as_dtype: unsupported dtype {d.name}")
    return DTYPES[d.name]


def numpy_dtype(value):
    """The NumPy dtype of a DType, name or NumPy dtype (None stays None)."""
    return None if value is None else as_dtype(value).dtype
