"""tnt.keras.ops: Keras 3's operations on symbolic tensors, recorded into the operation graph that
the C library runs and differentiates (keras/_trace.py). Called inside a traced function (a custom
Layer's call, a Lambda) they record into its graph; called on a model's tensors (tnt.keras.Input,
a layer's output) each becomes a layer of its own in the functional model."""
import builtins as _builtins
import functools

import numpy as np

from tarantella.keras import _trace
from tarantella.keras._trace import SymTensor, TraceError

def _is_keras_tensor(v):
    from tarantella.keras.layers import KerasTensor
    return isinstance(v, KerasTensor)


def _has_keras_tensor(v):
    if isinstance(v, (list, tuple)):
        return _builtins.any(_has_keras_tensor(x) for x in v)
    return _is_keras_tensor(v)


def _lifted(fn):
    """On a functional model's tensors, the operation becomes a traced layer (one per call)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _builtins.any(_has_keras_tensor(a) for a in args) or \
                _builtins.any(_has_keras_tensor(v) for v in kwargs.values()):
            from tarantella.keras._custom import functional_op
            return functional_op(fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapper


def _graph_of(*xs):
    for x in xs:
        if isinstance(x, SymTensor):
            return x.graph
        if isinstance(x, (list, tuple)):
            g = _graph_of(*x)
            if g is not None:
                return g
    return None


def _t(x, g, like=None):
    """x as a tensor of graph g (numbers and arrays become constants of like's float-ness)."""
    if isinstance(x, SymTensor):
        return x
    if g is None:  # plain data: the operation runs at once where it can (_trace.EAGER)
        if isinstance(x, (list, tuple)) and x and not _builtins.all(isinstance(v, (int, float, bool, np.generic))
                                                                    for v in np.ravel(np.asarray(x, object))):
            raise TypeError(f"expected a symbolic tensor, got {type(x).__name__} (tnt.keras.ops run on traced "
                            f"tensors)")
        return np.asarray(x)
    a = np.asarray(x)
    dt = None
    if like is not None and like.dtype == "float32" and a.dtype != np.bool_:
        dt = "float32"
    return _trace.constant(g, a, dt)


# On plain numbers and arrays (a scale such as ops.sqrt(ops.cast(dim, "float32"))) the operations
# compute at once with NumPy
_EAGER = {"rsqrt": lambda a: 1 / np.sqrt(a), "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
          "relu": lambda a: np.maximum(a, 0), "logical_not": np.logical_not, "identity": lambda a: a,
          "stop_gradient": lambda a: a, "squared_difference": lambda a, b: (a - b) ** 2,
          "mod": np.mod, "floor_divide": np.floor_divide}


def _eager(name, *xs):
    fn = _EAGER.get(name) or getattr(np, name, None)
    if fn is None:
        raise TypeError(f"{name}: expected a symbolic tensor (tnt.keras.ops on plain values cover the NumPy "
                        f"functions only), got {', '.join(type(x).__name__ for x in xs)}")
    r = np.asarray(fn(*[np.asarray(x) for x in xs]))
    return r.astype(np.float32) if r.dtype == np.float64 else r


def _unary(name, **fixed):
    def op(x, **kw):
        if _graph_of(x) is None and not kw and (name in _EAGER or hasattr(np, name)):
            return _eager(name, x)
        return _trace.record(name, [_t(x, _graph_of(x))], {**fixed, **kw}, lambda a: a.astype(np.float32)
                             if name not in ("logical_not",) else a == 0)
    op.__name__ = name
    return _lifted(op)


def _binary(name, np_fn):
    def op(x1, x2):
        g = _graph_of(x1, x2)
        if g is None and (name in _EAGER or hasattr(np, name)):
            return _eager(name, x1, x2)
        like = x1 if isinstance(x1, SymTensor) else x2
        return _trace.record(name, [_t(x1, g, like), _t(x2, g, like)], {}, np_fn)
    op.__name__ = name
    return _lifted(op)


def _axis(axis):
    if isinstance(axis, (list, tuple)):
        return [int(a) for a in axis]
    return None if axis is None else int(axis)


def _np_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _reduce(name, np_fn):
    def op(x, axis=None, keepdims=False):
        ax = _axis(axis)
        return _trace.record(name, [_t(x, _graph_of(x))], {"axis": ax, "keepdims": bool(keepdims)},
                             lambda a: np.asarray(np_fn(a, axis=_np_axis(ax), keepdims=keepdims)))
    op.__name__ = name
    return _lifted(op)


negative = _unary("negative")
abs = _unary("abs")  # noqa: A001
sign = _unary("sign")
exp = _unary("exp")
log = _unary("log")
log1p = _unary("log1p")
expm1 = _unary("expm1")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
square = _unary("square")
reciprocal = _unary("reciprocal")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
relu6 = _unary("relu6")
softplus = _unary("softplus")
softsign = _unary("softsign")
silu = _unary("silu")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001
logical_not = _unary("logical_not")
stop_gradient = _unary("stop_gradient")
absolute = abs
swish = silu
identity = _unary("identity")


@_lifted
def gelu(x, approximate=True):
    return _trace.record("gelu", [_t(x, _graph_of(x))], {"approximate": bool(approximate)}, lambda a: a)


@_lifted
def elu(x, alpha=1.0):
    return _trace.record("elu", [_t(x, _graph_of(x))], {"alpha": float(alpha)}, lambda a: a)


@_lifted
def leaky_relu(x, negative_slope=0.2):
    return _trace.record("leaky_relu", [_t(x, _graph_of(x))], {"negative_slope": float(negative_slope)},
                         lambda a: a)


@_lifted
def clip(x, x_min, x_max):
    return _trace.record("clip", [_t(x, _graph_of(x))], {"x_min": float(x_min), "x_max": float(x_max)},
                         lambda a: a)


def _arith(a, b):
    return np.zeros(np.broadcast_shapes(a.shape, b.shape),
                    np.float32 if np.float32 in (a.dtype, b.dtype) else np.int32)


def _div(a, b):
    return np.zeros(np.broadcast_shapes(a.shape, b.shape), np.float32)


def _cmp(a, b):
    return np.zeros(np.broadcast_shapes(a.shape, b.shape), np.bool_)


add = _binary("add", _arith)
subtract = _binary("subtract", _arith)
multiply = _binary("multiply", _arith)
maximum = _binary("maximum", _arith)
minimum = _binary("minimum", _arith)
squared_difference = _binary("squared_difference", _arith)
floor_divide = _binary("floor_divide", _arith)
mod = _binary("mod", _arith)
divide = _binary("divide", _div)
power = _binary("power", _div)
equal = _binary("equal", _cmp)
not_equal = _binary("not_equal", _cmp)
less = _binary("less", _cmp)
less_equal = _binary("less_equal", _cmp)
greater = _binary("greater", _cmp)
greater_equal = _binary("greater_equal", _cmp)
logical_and = _binary("logical_and", _cmp)
logical_or = _binary("logical_or", _cmp)
true_divide = divide


@_lifted
def where(condition, x1, x2):
    g = _graph_of(condition, x1, x2)
    like = x1 if isinstance(x1, SymTensor) else x2 if isinstance(x2, SymTensor) else None
    return _trace.record("where", [_t(condition, g), _t(x1, g, like), _t(x2, g, like)], {},
                         lambda c, a, b: np.zeros(np.broadcast_shapes(c.shape, a.shape, b.shape),
                                                  np.float32 if np.float32 in (a.dtype, b.dtype) else a.dtype))


sum = _reduce("sum", np.sum)  # noqa: A001
mean = _reduce("mean", np.mean)
max = _reduce("max", np.max)  # noqa: A001
min = _reduce("min", np.min)  # noqa: A001
prod = _reduce("prod", np.prod)
var = _reduce("var", np.var)
std = _reduce("std", np.std)
logsumexp = _reduce("logsumexp", np.sum)
any = _reduce("any", np.any)  # noqa: A001
all = _reduce("all", np.all)  # noqa: A001
amax, amin = max, min


def _argreduce(name, np_fn):
    def op(x, axis=None, keepdims=False):
        if keepdims:
            raise NotImplementedError(f"{name}: keepdims=True is not supported")
        return _trace.record(name, [_t(x, _graph_of(x))], {"axis": _axis(axis)},
                             lambda a: np.asarray(np_fn(a, axis=axis)).astype(np.int32))
    op.__name__ = name
    return _lifted(op)


argmax = _argreduce("argmax", np.argmax)
argmin = _argreduce("argmin", np.argmin)


@_lifted
def matmul(x1, x2):
    g = _graph_of(x1, x2)
    return _trace.record("matmul", [_t(x1, g), _t(x2, g)], {},
                         lambda a, b: np.matmul(a.astype(np.float32), b.astype(np.float32)))


@_lifted
def einsum(subscripts, *operands):
    g = _graph_of(*operands)
    return _trace.record("einsum", [_t(x, g) for x in operands], {"equation": subscripts},
                         lambda *a: np.einsum(subscripts, *a).astype(np.float32))


def _shape_list(shape):
    out = []
    for d in shape:
        if d is None:
            out.append(-1)
        else:
            out.append(int(d))
    if out.count(-1) > 1:
        raise TraceError(f"{_trace._user_line()}: reshape to {tuple(shape)}: at most one unknown (-1 or None) "
                         f"dimension")
    return out


def _resolve_batch_reshape(x, shape):
    """reshape(x, (batch, -1, h, d)) with batch = ops.shape(x)[0] (None while tracing): the batch
    stays axis 0 and the other -1 is known from x's other dimensions."""
    shape = list(shape)
    xs = x.shape if isinstance(x, SymTensor) else None
    free = [i for i, d in enumerate(shape) if d is None or (not isinstance(d, SymTensor) and int(d) == -1)]
    if xs and len(free) == 2 and free[0] == 0 and shape[0] is None and xs[0] is None and \
            None not in xs[1:] and None not in shape[1:]:
        known = int(np.prod([int(d) for i, d in enumerate(shape) if i not in free]))
        total = int(np.prod(xs[1:]))
        if known and total % known == 0:
            shape[free[1]] = total // known
    return shape


@_lifted
def reshape(x, newshape):
    newshape = newshape if isinstance(newshape, (list, tuple)) else [newshape]
    newshape = [None if hasattr(d, "like") else d for d in newshape]  # K.shape(x)[0]: the batch
    s = _shape_list(_resolve_batch_reshape(x, newshape))
    return _trace.record("reshape", [_t(x, _graph_of(x))], {"shape": s}, lambda a: a.reshape(s))


@_lifted
def transpose(x, axes=None):
    ax = None if axes is None else [int(a) for a in axes]
    return _trace.record("transpose", [_t(x, _graph_of(x))], {"axes": ax}, lambda a: np.transpose(a, ax))


@_lifted
def expand_dims(x, axis):
    return _trace.record("expand_dims", [_t(x, _graph_of(x))], {"axis": _axis(axis)},
                         lambda a: np.expand_dims(a, _np_axis(_axis(axis))))


@_lifted
def squeeze(x, axis=None):
    return _trace.record("squeeze", [_t(x, _graph_of(x))], {"axis": _axis(axis)},
                         lambda a: np.squeeze(a, _np_axis(_axis(axis))))


@_lifted
def broadcast_to(x, shape):
    if _builtins.any(d is None or hasattr(d, "like") for d in shape):  # to (batch, ...): add batch zeros
        return x + _batch_full(shape, 0.0, "float32", graph=_graph_of(x))
    s = [int(d) for d in shape]
    return _trace.record("broadcast_to", [_t(x, _graph_of(x))], {"shape": s}, lambda a: np.broadcast_to(a, s))


@_lifted
def concatenate(xs, axis=0):
    g = _graph_of(xs)
    return _trace.record("concatenate", [_t(x, g) for x in xs], {"axis": int(axis)},
                         lambda *a: np.concatenate(a, axis=axis))


@_lifted
def stack(x, axis=0):
    g = _graph_of(x)
    return _trace.record("stack", [_t(v, g) for v in x], {"axis": int(axis)}, lambda *a: np.stack(a, axis=axis))


@_lifted
def split(x, indices_or_sections, axis=0):
    ios = indices_or_sections if isinstance(indices_or_sections, int) else [int(i) for i in indices_or_sections]
    n = ios if isinstance(ios, int) else len(ios) + 1
    return _trace.record("split", [_t(x, _graph_of(x))], {"indices_or_sections": ios, "axis": int(axis)},
                         lambda a: np.split(a, ios, axis=axis), n_out=n)


@_lifted
def tile(x, repeats):
    r = [int(v) for v in (repeats if isinstance(repeats, (list, tuple)) else [repeats])]
    return _trace.record("tile", [_t(x, _graph_of(x))], {"repeats": r}, lambda a: np.tile(a, r))


@_lifted
def repeat(x, repeats, axis=None):
    return _trace.record("repeat", [_t(x, _graph_of(x))], {"repeats": int(repeats), "axis": _axis(axis)},
                         lambda a: np.repeat(a, repeats, axis=axis))


@_lifted
def pad(x, pad_width, mode="constant", constant_values=None):
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} (only 'constant' is supported)")
    pw = [[int(p[0]), int(p[1])] for p in pad_width]
    return _trace.record("pad", [_t(x, _graph_of(x))], {"pad_width": pw, "constant_values": constant_values},
                         lambda a: np.pad(a, pw))


@_lifted
def take(x, indices, axis=None):
    g = _graph_of(x, indices)
    return _trace.record("take", [_t(x, g), _t(indices, g)], {"axis": _axis(axis)},
                         lambda a, i: np.take(a, i.astype(np.int64), axis=axis))


gather = take


@_lifted
def one_hot(x, num_classes, axis=-1, dtype=None):
    def fn(i):
        z = np.zeros(i.shape + (int(num_classes),), np.float32)
        return np.moveaxis(z, -1, axis)
    if _graph_of(x) is None:  # on data: at once (Keras 3's ops take NumPy arrays too)
        i = np.asarray(x).astype(np.int64)
        eye = np.eye(int(num_classes), dtype=np.float32)
        out = np.where(((i >= 0) & (i < int(num_classes)))[..., None], eye[np.clip(i, 0, int(num_classes) - 1)], 0)
        return np.moveaxis(out.astype(np.float32), -1, axis)
    return _trace.record("one_hot", [_t(x, _graph_of(x))], {"num_classes": int(num_classes), "axis": int(axis)}, fn)


def _dtype_name(dtype):
    name = getattr(dtype, "name", dtype)
    name = str(np.dtype(name)) if not isinstance(name, str) else name
    if name not in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                    "uint16", "uint32", "bool"):
        raise TypeError(f"cast: dtype {dtype!r} (expected a float, int or bool dtype)")
    return name


@_lifted
def cast(x, dtype):
    d = _dtype_name(dtype)
    if _graph_of(x) is None:
        return np.asarray(x).astype(np.dtype(d) if d != "bfloat16" else np.float32)
    target = _trace._NP[{"bool": "bool"}.get(d, "int32" if ("int" in d) else "float32")]
    return _trace.record("cast", [_t(x, _graph_of(x))], {"dtype": d}, lambda a: a.astype(target))


@_lifted
def cumsum(x, axis=None):
    return _trace.record("cumsum", [_t(x, _graph_of(x))], {"axis": _axis(axis)},
                         lambda a: np.cumsum(a, axis=axis))


@_lifted
def softmax(x, axis=-1):
    return _trace.record("softmax", [_t(x, _graph_of(x))], {"axis": _axis(axis)}, lambda a: a.astype(np.float32))


@_lifted
def log_softmax(x, axis=-1):
    return _trace.record("log_softmax", [_t(x, _graph_of(x))], {"axis": _axis(axis)},
                         lambda a: a.astype(np.float32))


def _like(name):
    def op(x, dtype=None):
        return _trace.record(name, [_t(x, _graph_of(x))], {}, lambda a: a)
    op.__name__ = name
    return _lifted(op)


zeros_like = _like("zeros_like")
ones_like = _like("ones_like")


@_lifted
def full_like(x, fill_value, dtype=None):
    return _trace.record("full_like", [_t(x, _graph_of(x))], {"fill_value": float(fill_value)}, lambda a: a)


# Constants made from shapes are NumPy arrays: combined with a traced tensor they become constant
# nodes (float32 unless integers), on a model's tensors part of the operation's layer.
def arange(start, stop=None, step=1, dtype=None):
    a = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return a.astype(dtype or (np.int32 if np.issubdtype(a.dtype, np.integer) else np.float32))


def _has_batch(shape):
    return isinstance(shape, (tuple, list)) and _builtins.any(d is None or hasattr(d, "like") for d in shape)


def _batch_full(shape, fill_value, dtype, graph=None):
    """A constant of shape (batch, ...) inside a traced call (Keras code writes
    ops.zeros((inputs.shape[0], units)) for an RNN's initial state): fill_value broadcast along the
    batch of the call's first batched input."""
    from tarantella.keras import _custom
    like = next((d.like for d in shape if hasattr(d, "like")), None)  # K.shape(x)[0] (BatchDim): x's batch
    shape = tuple(None if hasattr(d, "like") else d for d in shape)
    if shape[0] is not None or None in shape[1:]:
        raise TraceError(f"{_trace._user_line()}: a constant of shape {shape}: only its first axis may be the batch "
                         f"(None)")
    graph = graph or (_custom._TRACING[-1] if _custom._TRACING else None)
    if like is not None:
        ref = like
    elif graph is not None:  # a traced call (or the operation's own graph): its inputs
        ref = next((t for s, t in graph.inputs if s and s[0] is None), None)
    else:  # a layer of built-in layers whose call runs on the model's tensors
        ref = next(iter(_custom._FUNCTIONAL_INPUTS[-1]), None) if _custom._FUNCTIONAL_INPUTS else None
    if ref is None:
        raise TraceError(f"{_trace._user_line()}: a constant of shape {shape} outside a traced call on batched "
                         f"tensors (its batch size is unknown)")
    column = ref[(_builtins.slice(None),) + (_builtins.slice(0, 1),) * (len(ref.shape) - 1)]
    column = full_like(reshape(column, (-1,) + (1,) * (len(shape) - 1)), fill_value)
    out = column + np.zeros(shape[1:], np.float32)
    return out if dtype in (None, "float32", np.float32) else cast(out, dtype)


def zeros(shape, dtype="float32"):
    if _has_batch(shape):
        return _batch_full(shape, 0.0, dtype)
    return np.zeros(shape, dtype)


def ones(shape, dtype="float32"):
    if _has_batch(shape):
        return _batch_full(shape, 1.0, dtype)
    return np.ones(shape, dtype)


def full(shape, fill_value, dtype=None):
    if _has_batch(shape):
        return _batch_full(shape, fill_value, dtype)
    return np.full(shape, fill_value, dtype or np.float32)


def eye(N, M=None, k=0, dtype="float32"):  # noqa: N803 (Keras's names)
    return np.eye(N, M, k, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    return np.linspace(start, stop, num, endpoint=endpoint).astype(dtype or np.float32)


def _tri_mask(x, k, lower):
    if not isinstance(x, SymTensor) and not _is_keras_tensor(x):
        a = np.asarray(x)
        return np.tril(a, k) if lower else np.triu(a, k)
    n, m = x.shape[-2:]
    if n is None or m is None:
        raise TraceError(f"{_trace._user_line()}: {'tril' if lower else 'triu'} of a tensor whose last two axes "
                         f"include the batch")
    keep = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    return where(keep, x, 0.0)


def tril(x, k=0):
    return _tri_mask(x, k, True)


def triu(x, k=0):
    return _tri_mask(x, k, False)


def convert_to_tensor(x, dtype=None):
    return x


def shape(x):
    """The shape; a traced value's batch axis is the batch size of the data it will run on
    (_compat_math.BatchDim: for reshape targets, random draws and a metric's sample count)."""
    if isinstance(x, SymTensor):
        from tarantella.keras._compat_math import k_shape
        return k_shape(x)
    return x.shape


def ndim(x):
    return len(x.shape)


def dot(x1, x2):
    return matmul(x1, x2)


# ---- Python operators and slicing on SymTensor (and KerasTensor: each one a layer) -------------

def _slice_item(k):
    if k is None or k is Ellipsis:
        return None if k is None else "..."
    if isinstance(k, _builtins.slice):
        return [k.start, k.stop, k.step]
    if isinstance(k, (int, np.integer)):
        return int(k)
    raise TraceError(f"{_trace._user_line()}: slicing with {type(k).__name__} {k!r} is not supported (ints, slices, "
                     f"None and ... are; use ops.take for tensor indices)")


@_lifted
def _getitem(x, key):
    key = key if isinstance(key, tuple) else (key,)
    spec = [_slice_item(k) for k in key]
    return _trace.record("slice", [x], {"spec": spec}, lambda a: a[key])


@_lifted
def slice(inputs, start_indices, shape):  # noqa: A001 (Keras's name)
    """Keras 3's ops.slice: shape[i] elements from start_indices[i] on each axis (-1, None or the
    batch size: to the end, as tf.slice's -1)."""
    if len(start_indices) != len(inputs.shape) or len(shape) != len(inputs.shape):
        raise ValueError(f"slice: start_indices {tuple(start_indices)} and shape {tuple(shape)} must have one entry "
                         f"per axis of the input's shape {tuple(inputs.shape)}")
    key = []
    for b, n in zip(start_indices, shape):
        b = int(b)
        end = None if n is None or hasattr(n, "like") or int(n) == -1 else b + int(n)
        key.append(_builtins.slice(b, end))
    return inputs[tuple(key)]


def _rev(fn):
    return lambda self, other: fn(other, self)


_OPERATORS = {
    "__add__": add, "__radd__": _rev(add), "__sub__": subtract, "__rsub__": _rev(subtract),
    "__mul__": multiply, "__rmul__": _rev(multiply), "__truediv__": divide,
    "__rtruediv__": _rev(divide), "__pow__": power, "__rpow__": _rev(power),
    "__matmul__": matmul, "__rmatmul__": _rev(matmul), "__floordiv__": floor_divide,
    "__mod__": mod, "__lt__": less, "__le__": less_equal, "__gt__": greater,
    "__ge__": greater_equal, "__and__": logical_and, "__or__": logical_or,
    "__neg__": negative, "__abs__": abs, "__invert__": logical_not,
    "__getitem__": _getitem, "__pos__": lambda x: x,
}


def _install(cls):
    for name, fn in _OPERATORS.items():
        setattr(cls, name, lambda *a, _f=fn: _f(*a))


_install(SymTensor)
# elementwise == and != as on backend tensors (values of a trace only: a model's KerasTensors stay
# comparable by identity, as layers keep them in lists); still hashable by identity
SymTensor.__eq__ = lambda self, other: equal(self, other)
SymTensor.__ne__ = lambda self, other: not_equal(self, other)
SymTensor.__hash__ = object.__hash__


def _keras_tensor_iter(self):
    raise TypeError(f"{_trace._user_line()}: iterating over a model's symbolic tensor is not supported (its batch "
                    f"size is unknown); use ops.split or slicing")


def _install_keras_tensor():
    from tarantella.keras.layers import KerasTensor
    _install(KerasTensor)
    KerasTensor.__iter__ = _keras_tensor_iter  # __getitem__ must not make it iterable by index


_install_keras_tensor()

# keras.ops.image and the Fourier transforms (their own files; they build on the operations above)
from tarantella.keras import _ops_image as image  # noqa: E402
from tarantella.keras._ops_fft import fft, fft2  # noqa: E402,F401
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".image"] = image  # from keras.ops import image; import keras.ops.image
