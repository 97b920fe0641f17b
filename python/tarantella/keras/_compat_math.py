"""The tensor math that Keras 2 code calls, under TensorFlow's names (tf.reduce_mean, tf.matmul,
tf.nn.relu, tf.concat, ...) and keras.backend's (K.mean, K.sum, K.square, ...): thin wrappers of
tnt.keras.ops on the same symbolic tensors (keras/_trace.py)."""
import types

from tarantella.keras import ops


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """tf.math.l2_normalize / K.l2_normalize: x / sqrt(max(sum(x^2 over axis), epsilon))."""
    axis = dim if axis is None and dim is not None else axis
    return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=axis, keepdims=True), epsilon))


class BatchDim:
    """K.shape(x)[0] of a symbolic tensor: the batch size, known only when the model runs (enough
    for K.random_normal(shape=(K.shape(x)[0], dim)) and reshape targets)."""

    def __init__(self, like):
        self.like = like

    def __repr__(self):
        return "<batch size>"


def k_shape(x):
    """K.shape / tf.shape: the shape, the batch axis of a symbolic tensor as BatchDim."""
    from tarantella.keras._trace import SymTensor
    if isinstance(x, SymTensor):
        return tuple(BatchDim(x) if d is None else d for d in x.shape)
    return tuple(ops.shape(x))


def _random(op_name, a, b, shape, dtype, seed):
    """A random draw of shape (BatchDim first) on the trace of the tensor the batch comes from."""
    import numpy as np
    from tarantella.keras import _trace
    shape = tuple(shape)
    like = next((d.like for d in shape if isinstance(d, BatchDim)), None)
    if like is None:
        raise NotImplementedError(f"{op_name}: a shape without the batch size (K.shape(x)[0]) is not supported in "
                                  f"traced code")
    if not isinstance(shape[0], BatchDim) or any(isinstance(d, BatchDim) for d in shape[1:]):
        raise NotImplementedError(f"{op_name}: the batch size must be the first dimension of shape {shape}")
    rest = tuple(int(d) for d in shape[1:])
    flat = ops.reshape(like, (-1, int(np.prod([d for d in like.shape[1:]], dtype=np.int64))))
    base = ops.zeros_like(flat[:, :1])  # (batch, 1)
    base = ops.reshape(base, (-1,) + (1,) * len(rest)) + ops.zeros(rest) if rest else ops.reshape(base, (-1,))
    attrs = {"seed": None if seed is None else int(seed)}
    attrs.update({"mean": float(a), "stddev": float(b)} if op_name == "random_normal" else
                 {"minval": float(a), "maxval": float(b)})
    return _trace.record(op_name, [base], attrs, lambda z: z.astype(np.float32))


def random_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    return _random("random_normal", mean, stddev, shape, dtype, seed)


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    return _random("random_uniform", minval, maxval, shape, dtype, seed)


def _reduce(op):
    def f(input_tensor, axis=None, keepdims=False, name=None):
        return op(input_tensor, axis=axis, keepdims=keepdims)
    return f


def tf_matmul(a, b, transpose_a=False, transpose_b=False, name=None, **kwargs):
    if kwargs.get("adjoint_a") or kwargs.get("adjoint_b"):
        transpose_a = transpose_a or kwargs.get("adjoint_a", False)
        transpose_b = transpose_b or kwargs.get("adjoint_b", False)

    def t(x):
        n = len(x.shape)
        return ops.transpose(x, list(range(n - 2)) + [n - 1, n - 2])
    return ops.matmul(t(a) if transpose_a else a, t(b) if transpose_b else b)


def _unary(op):
    return lambda x, name=None: op(x)


def _binary(op):
    return lambda x, y, name=None: op(x, y)


def _softmax(x, axis=-1, name=None):
    return ops.softmax(x, axis=axis)


def _reshape(tensor, shape, name=None):
    return ops.reshape(tensor, shape)


def _transpose(a, perm=None, conjugate=False, name=None):
    return ops.transpose(a, perm)


def _expand_dims(input, axis, name=None):  # noqa: A002 (TensorFlow's name)
    return ops.expand_dims(input, axis)


def _squeeze(input, axis=None, name=None):  # noqa: A002
    return ops.squeeze(input, axis)


def _gather(params, indices, axis=None, batch_dims=0, name=None):
    if batch_dims:
        raise NotImplementedError("tf.gather: batch_dims is not supported")
    return ops.take(params, indices, axis=0 if axis is None else axis)


def _one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    if on_value is not None or off_value is not None:
        raise NotImplementedError("tf.one_hot: on_value/off_value are not supported")
    return ops.one_hot(indices, depth, axis=-1 if axis is None else axis)


def _clip(t, clip_value_min, clip_value_max, name=None):
    return ops.clip(t, clip_value_min, clip_value_max)


def _cast(x, dtype, name=None):
    return ops.cast(x, dtype)


def _where(condition, x=None, y=None, name=None):
    if x is None or y is None:
        raise NotImplementedError("tf.where(condition): the indices form is not supported; give x and y")
    return ops.where(condition, x, y)


# tf.* (installed into tarantella.tensorflow)
TF = {
    "reduce_mean": _reduce(ops.mean), "reduce_sum": _reduce(ops.sum), "reduce_max": _reduce(ops.max),
    "reduce_min": _reduce(ops.min), "reduce_prod": _reduce(ops.prod), "reduce_logsumexp": _reduce(ops.logsumexp),
    "reduce_any": _reduce(ops.any), "reduce_all": _reduce(ops.all), "matmul": tf_matmul,
    "concat": lambda values, axis, name=None: ops.concatenate(values, axis=axis),
    "stack": lambda values, axis=0, name=None: ops.stack(values, axis=axis),
    "reshape": _reshape, "transpose": _transpose, "expand_dims": _expand_dims, "squeeze": _squeeze,
    "gather": _gather, "one_hot": _one_hot, "clip_by_value": _clip, "cast": _cast, "where": _where,
    "einsum": lambda equation, *inputs, **kw: ops.einsum(equation, *inputs),
    "tile": lambda input, multiples, name=None: ops.tile(input, multiples),
    "stop_gradient": _unary(ops.stop_gradient), "zeros_like": lambda x, dtype=None, name=None: ops.zeros_like(x),
    "ones_like": lambda x, dtype=None, name=None: ops.ones_like(x),
    # the static shape, None for the batch: enough for tf.reshape(x, (tf.shape(x)[0], -1, ...))
    "shape": lambda input, out_type=None, name=None: tuple(input.shape),  # noqa: A006
}
for _n in ("square", "exp", "sqrt", "tanh", "sigmoid", "abs", "sign", "negative", "floor", "ceil", "round"):
    TF[_n] = _unary(getattr(ops, _n))
TF["log"] = _unary(ops.log)
TF["rsqrt"] = _unary(ops.rsqrt)
for _n in ("add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
           "greater", "greater_equal", "squared_difference", "pow"):
    TF[_n] = _binary(getattr(ops, "power" if _n == "pow" else _n))
TF["divide"] = TF["truediv"] = _binary(ops.divide)

TF_RANDOM = dict(normal=lambda shape, mean=0.0, stddev=1.0, dtype=None, seed=None, name=None:
                                     random_normal(shape, mean, stddev, dtype, seed),
                                     uniform=lambda shape, minval=0, maxval=None, dtype=None, seed=None, name=None:
                                     random_uniform(shape, minval, 1.0 if maxval is None else maxval, dtype, seed))
TF["shape"] = lambda input, out_type=None, name=None: k_shape(input)  # noqa: A006


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


TF_NN = types.SimpleNamespace(
    relu=_unary(ops.relu), relu6=_unary(ops.relu6), sigmoid=_unary(ops.sigmoid), tanh=_unary(ops.tanh),
    softplus=_unary(ops.softplus), softsign=_unary(ops.softsign), silu=_unary(ops.silu), swish=_unary(ops.silu),
    elu=_unary(ops.elu), gelu=lambda features, approximate=False, name=None: ops.gelu(features, approximate),
    leaky_relu=lambda features, alpha=0.2, name=None: ops.leaky_relu(features, alpha),
    softmax=_softmax, log_softmax=lambda logits, axis=-1, name=None: ops.log_softmax(logits, axis=axis),
    l2_normalize=l2_normalize)

TF_MATH = types.SimpleNamespace(**{k: v for k, v in TF.items() if k not in ("concat", "stack", "reshape")},
                                log1p=_unary(ops.log1p), erf=_unary(ops.erf), sin=_unary(ops.sin),
                                cos=_unary(ops.cos), reciprocal=_unary(ops.reciprocal), softplus=_unary(ops.softplus),
                                l2_normalize=l2_normalize)


def k_binary_crossentropy(target, output, from_logits=False):
    """K.binary_crossentropy (Keras 2's backend): elementwise, output clipped to [eps, 1 - eps]."""
    if from_logits:
        return ops.relu(output) - output * target + ops.log1p(ops.exp(-ops.abs(output)))
    eps = 1e-7
    p = ops.clip(output, eps, 1.0 - eps)
    return -(target * ops.log(p + eps) + (1.0 - target) * ops.log(1.0 - p + eps))


def k_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """K.categorical_crossentropy: -sum(target log(output / sum(output))) over axis, clipped."""
    if from_logits:
        return -ops.sum(target * ops.log_softmax(output, axis=axis), axis=axis)
    p = ops.clip(output / ops.sum(output, axis=axis, keepdims=True), 1e-7, 1.0 - 1e-7)
    return -ops.sum(target * ops.log(p), axis=axis)


def k_sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    classes = int(output.shape[axis])
    t = ops.cast(target, "int32")
    if len(t.shape) == len(output.shape):
        t = ops.squeeze(t, axis=-1)
    return k_categorical_crossentropy(ops.one_hot(t, classes, axis=axis), output, from_logits, axis)


def _gradients(loss, variables):
    raise NotImplementedError("K.gradients / tf.gradients: gradients inside a model's own computation are not "
                              "supported (the library differentiates the loss only)")


# keras.backend (K.*)
def _k_reduce(op):
    return lambda x, axis=None, keepdims=False: op(x, axis=axis, keepdims=keepdims)


K = {
    "mean": _k_reduce(ops.mean), "sum": _k_reduce(ops.sum), "max": _k_reduce(ops.max), "min": _k_reduce(ops.min),
    "prod": _k_reduce(ops.prod), "var": _k_reduce(ops.var), "std": _k_reduce(ops.std),
    "logsumexp": _k_reduce(ops.logsumexp), "square": ops.square, "sqrt": ops.sqrt, "exp": ops.exp, "log": ops.log,
    "abs": ops.abs, "tanh": ops.tanh, "sigmoid": ops.sigmoid, "relu": lambda x, alpha=0.0, max_value=None,
    threshold=0.0: ops.relu(x), "softmax": lambda x, axis=-1: ops.softmax(x, axis=axis),
    "dot": ops.matmul, "batch_dot": lambda x, y, axes=None: ops.matmul(x, y),
    "concatenate": lambda tensors, axis=-1: ops.concatenate(tensors, axis=axis), "stack": ops.stack,
    "reshape": ops.reshape, "permute_dimensions": lambda x, pattern: ops.transpose(x, pattern),
    "expand_dims": lambda x, axis=-1: ops.expand_dims(x, axis), "squeeze": ops.squeeze,
    "maximum": ops.maximum, "minimum": ops.minimum, "clip": ops.clip, "cast": ops.cast,
    "switch": lambda condition, then_expression, else_expression: ops.where(condition, then_expression,
                                                                            else_expression),
    "pow": ops.power, "argmax": lambda x, axis=-1: ops.argmax(x, axis), "one_hot": ops.one_hot,
    "stop_gradient": ops.stop_gradient, "zeros_like": ops.zeros_like, "ones_like": ops.ones_like,
    "equal": ops.equal, "greater": ops.greater, "less": ops.less, "sign": ops.sign,
    "l2_normalize": lambda x, axis=None: l2_normalize(x, axis=axis), "shape": k_shape,
    "random_normal": random_normal, "random_uniform": random_uniform, "log1p": ops.log1p,
    "softplus": ops.softplus, "softsign": ops.softsign, "elu": lambda x, alpha=1.0: ops.elu(x, alpha),
    "not_equal": ops.not_equal, "greater_equal": ops.greater_equal, "less_equal": ops.less_equal,
    "round": ops.round, "cos": ops.cos, "sin": ops.sin, "transpose": ops.transpose, "tile": ops.tile,
    "repeat_elements": lambda x, rep, axis: ops.repeat(x, rep, axis=axis), "argmin": lambda x, axis=-1: ops.argmin(x, axis), "flatten":
    lambda x: ops.reshape(x, (-1,)), "batch_flatten": lambda x: ops.reshape(x, (-1, int(_numel(x.shape[1:])))),
    "cumsum": lambda x, axis=0: ops.cumsum(x, axis=axis), "gather": lambda reference, indices:
    ops.take(reference, indices, axis=0), "hard_sigmoid": lambda x: ops.clip(0.2 * x + 0.5, 0.0, 1.0),
    "categorical_crossentropy": k_categorical_crossentropy, "binary_crossentropy": k_binary_crossentropy,
    "sparse_categorical_crossentropy": k_sparse_categorical_crossentropy, "gradients": _gradients,
}
