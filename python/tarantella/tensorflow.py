"""tarantella.tensorflow: the TensorFlow names a Keras program calls around its model, so that
`import tensorflow as tf` becomes `import tarantella.tensorflow as tf`.

    tf.keras, tf.data (Datasets, AUTOTUNE), tf.random.set_seed, tf.constant, tf.convert_to_tensor,
    tf.TensorSpec, the dtypes (tf.float32, ...), tf.__version__, tf.config.list_physical_devices,
    tf.get_logger, tf.executing_eagerly, tf.image.{extract_patches, resize, rgb_to_grayscale}.

Values are NumPy arrays (the model runs in libtarantella, not in TensorFlow). The tensor math
(tf.reduce_mean, tf.matmul, tf.nn.relu, tf.concat, ...) records operations on symbolic tensors, in a
custom layer's call, a Lambda or a functional model (keras/_compat_math.py).
"""
import logging
import sys
import types

import numpy as np

from tarantella import data, keras  # noqa: F401  (tf.data, tf.keras)
from tarantella import _random
from tarantella._dtypes import DType, DTYPES, as_dtype, numpy_dtype
from tarantella.data import TensorSpec  # noqa: F401

__version__ = keras.__version__  # the TensorFlow/Keras whose behaviour the package follows
VERSION = __version__

float16, float32, float64 = DTYPES["float16"], DTYPES["float32"], DTYPES["float64"]
bfloat16 = DTYPES["bfloat16"]
int8, int16, int32, int64 = DTYPES["int8"], DTYPES["int16"], DTYPES["int32"], DTYPES["int64"]
uint8, uint16, uint32, uint64 = DTYPES["uint8"], DTYPES["uint16"], DTYPES["uint32"], DTYPES["uint64"]
bool = DTYPES["bool"]  # noqa: A001  (TensorFlow's name)
string = DTYPES["string"]
complex64, complex128 = DTYPES["complex64"], DTYPES["complex128"]
half, double = float16, float64
dtypes = types.SimpleNamespace(DType=DType, as_dtype=as_dtype, **DTYPES)

random = types.SimpleNamespace(set_seed=_random.set_seed)

from tarantella.keras._tape import GradientTape  # noqa: E402,F401  (custom training loops, on the C engine)
UnconnectedGradients = types.SimpleNamespace(NONE="none", ZERO="zero")


def function(func=None, input_signature=None, autograph=True, jit_compile=None, reduce_retracing=False, **kwargs):
    """tf.function: the function runs as written, eagerly (a custom training loop's step records its
    model calls and operations under its GradientTape each time, and runs them in C)."""
    if func is None:
        return lambda f: f
    return func


class TensorShape(tuple):
    """tf.TensorShape: the dimensions (None where free), as a tuple."""

    def __new__(cls, dims=None):
        if dims is None:
            dims = ()
        elif isinstance(dims, (int, np.integer)) or dims is None:
            dims = (dims,)
        return super().__new__(cls, tuple(None if d is None else int(d) for d in dims))

    def as_list(self):
        return list(self)

    @property
    def rank(self):
        return len(self)


def constant(value, dtype=None, shape=None, name=None):
    """tf.constant: an array of value (a scalar fills the whole shape; otherwise shape reshapes,
    keeping the number of elements)."""
    a = np.array(value, dtype=numpy_dtype(dtype))
    if dtype is None and a.dtype == np.float64:
        a = a.astype(np.float32)  # TensorFlow makes Python floats float32
    if shape is not None:
        shape = tuple(int(s) for s in shape)
        if a.size == 1:
            a = np.full(shape, a.reshape(()), dtype=a.dtype)
        elif a.size == int(np.prod(shape)):
            a = a.reshape(shape)
        else:
            raise TypeError(f"constant: {a.size} values cannot take the shape {shape} (expected 1 value or "
                            f"{int(np.prod(shape))})")
    return a


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None):
    """tf.convert_to_tensor: value as an array (of dtype; else dtype_hint for Python values)."""
    if dtype is not None:
        return np.asarray(value, dtype=numpy_dtype(dtype))
    if isinstance(value, np.ndarray):
        return value
    a = np.asarray(value)
    if dtype_hint is not None:
        return a.astype(numpy_dtype(dtype_hint))
    return a.astype(np.float32) if a.dtype == np.float64 else a


def executing_eagerly():
    return True


def get_logger():
    return logging.getLogger("tensorflow")


class _PhysicalDevice(tuple):
    @property
    def name(self):
        return self[0]

    @property
    def device_type(self):
        return self[1]


def _list_physical_devices(device_type=None):
    """The CPU only: the model runs on the CPU in libtarantella (no GPU list)."""
    cpu = _PhysicalDevice(("/physical_device:CPU:0", "CPU"))
    return [cpu] if device_type in (None, "CPU") else []


def _is_gpu_available(cuda_only=False, min_cuda_compute_capability=None):
    return len(_list_physical_devices("GPU")) > 0  # (bool is tf.bool here)


# tf.test's device queries that notebooks print first (as tf.config lists the devices)
test = types.SimpleNamespace(is_gpu_available=_is_gpu_available, is_built_with_cuda=lambda: False,
                             gpu_device_name=lambda: "/device:GPU:0" if _is_gpu_available() else "")


def _accepted(*args, **kwargs):
    """Device settings that do not apply to libtarantella: accepted, nothing changes."""
    return None


def _enable_tensor_float_32_execution(enabled):
    """tf.config.experimental.enable_tensor_float_32_execution: TF32 tensor cores for float32 matrix
    products and convolutions on the GPU (tnt_gpu_set_tf32). Off unless enabled here or by
    TNT_GPU_TF32=1 (TensorFlow turns it on by default; here float32 stays exact by default)."""
    from tarantella._core import C, ensure_init
    ensure_init()
    C.gpu_set_tf32(enabled)  # truth-tested there (this module's `bool` is tf.bool)


def _tensor_float_32_execution_enabled():
    """tf.config.experimental.tensor_float_32_execution_enabled."""
    from tarantella._core import C, ensure_init
    ensure_init()
    return C.gpu_tf32_enabled()


config = types.SimpleNamespace(
    list_physical_devices=_list_physical_devices, list_logical_devices=_list_physical_devices,
    set_visible_devices=_accepted, run_functions_eagerly=_accepted,
    experimental=types.SimpleNamespace(list_physical_devices=_list_physical_devices, set_memory_growth=_accepted,
                                       set_visible_devices=_accepted,
                                       enable_tensor_float_32_execution=_enable_tensor_float_32_execution,
                                       tensor_float_32_execution_enabled=_tensor_float_32_execution_enabled),
    threading=types.SimpleNamespace(set_inter_op_parallelism_threads=_accepted,
                                    set_intra_op_parallelism_threads=_accepted))


def _image_extract_patches(images, sizes, strides, rates, padding, name=None):
    """tf.image.extract_patches: sizes, strides and rates as [1, rows, cols, 1]."""
    for what, v in (("sizes", sizes), ("strides", strides), ("rates", rates)):
        if len(v) != 4 or v[0] != 1 or v[3] != 1:
            raise ValueError(f"tf.image.extract_patches: {what} {list(v)} (expected [1, rows, cols, 1])")
    return keras.ops.image.extract_patches(images, (sizes[1], sizes[2]), strides=(strides[1], strides[2]),
                                           dilation_rate=(rates[1], rates[2]), padding=str(padding).lower())


def _image_resize(images, size, method="bilinear", preserve_aspect_ratio=False, antialias=False, name=None):
    """tf.image.resize (half-pixel centers), bilinear or nearest."""
    if preserve_aspect_ratio:
        raise NotImplementedError("tf.image.resize: preserve_aspect_ratio=True is not supported")
    return keras.ops.image.resize(images, size, interpolation=str(method), antialias=antialias)


from tarantella.keras import _text_vectorization as _tv  # noqa: E402

# tf.strings on NumPy arrays of text (a TextVectorization's standardize function, a dataset's map)
strings = types.SimpleNamespace(lower=_tv.lower, upper=_tv.upper, strip=_tv.strip, regex_replace=_tv.regex_replace,
                                length=_tv.length, split=_tv.split, join=_tv.join, reduce_join=_tv.reduce_join)

image = types.SimpleNamespace(extract_patches=_image_extract_patches, resize=_image_resize,
                              rgb_to_grayscale=lambda images, name=None: keras.ops.image.rgb_to_grayscale(images))


# ---- tf.compat.v1: the TensorFlow 1 boilerplate Keras programs keep (device and session settings,
# logging, seeds); there is no TensorFlow graph or session to configure, so they change nothing.
# A session's run (a TensorFlow 1 graph) is refused.

class _GPUOptions:
    def __init__(self, **kwargs):
        self.allow_growth, self.per_process_gpu_memory_fraction, self.visible_device_list = False, 1.0, ""
        self.__dict__.update(kwargs)


class _ConfigProto:
    def __init__(self, **kwargs):
        self.gpu_options = kwargs.pop("gpu_options", None) or _GPUOptions()
        self.log_device_placement, self.allow_soft_placement = False, False
        self.intra_op_parallelism_threads = self.inter_op_parallelism_threads = 0
        self.__dict__.update(kwargs)


class _Session:
    def __init__(self, target="", graph=None, config=None):
        self.config = config

    def run(self, *args, **kwargs):
        raise NotImplementedError("tf.compat.v1.Session.run: TensorFlow 1 graphs do not run here (the models run in "
                                  "libtarantella); use the Keras API (fit, predict) instead")

    def as_default(self):
        return self

    def close(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _placeholder(*args, **kwargs):
    raise NotImplementedError("tf.compat.v1.placeholder: TensorFlow 1 graphs are not supported; use keras.Input")


def _compat():
    kbackend = types.SimpleNamespace(**{k: getattr(keras.backend, k) for k in dir(keras.backend) if not k.startswith("_")})
    kbackend.set_session, kbackend.get_session = _accepted, _Session
    v1 = types.SimpleNamespace(
        config=config, ConfigProto=_ConfigProto, GPUOptions=_GPUOptions, Session=_Session,
        InteractiveSession=_Session, placeholder=_placeholder,
        disable_eager_execution=_accepted, enable_eager_execution=_accepted, disable_v2_behavior=_accepted,
        enable_v2_behavior=_accepted, executing_eagerly=executing_eagerly, reset_default_graph=_accepted,
        set_random_seed=_random.set_seed, random=random, data=data, dtypes=dtypes, float32=float32,
        logging=types.SimpleNamespace(set_verbosity=_accepted, DEBUG=10, INFO=20, WARN=30, ERROR=40, FATAL=50),
        keras=types.SimpleNamespace(**{k: getattr(keras, k) for k in dir(keras) if not k.startswith("_")}))
    v1.keras.backend = kbackend
    return types.SimpleNamespace(v1=v1, v2=None)


compat = _compat()


def _install_math():
    from tarantella.keras import _compat_math
    g = globals()
    for k, v in _compat_math.TF.items():
        g.setdefault(k, v)
    g.setdefault("nn", _compat_math.TF_NN)
    for k, v in _compat_math.TF_RANDOM.items():  # tf.random.normal/uniform in traced code
        setattr(random, k, v)
    g.setdefault("math", _compat_math.TF_MATH)


_install_math()
compat.v2 = sys.modules[__name__]  # tf.compat.v2 is TensorFlow 2 itself
