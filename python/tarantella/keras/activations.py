"""tnt.keras.activations: the activations of the library, by Keras name. Each function also runs
on NumPy arrays; given to a layer (activation=tnt.keras.activations.relu) it stands for its name."""
import math

import numpy as np


def linear(x):
    return np.asarray(x)


def relu(x, alpha=0.0, max_value=None, threshold=0.0):
    x = np.asarray(x, dtype=np.float32)
    y = np.where(x > threshold, x, alpha * (x - threshold) if alpha else 0.0)
    return np.minimum(y, max_value) if max_value is not None else y


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float32)))


def tanh(x):
    return np.tanh(np.asarray(x, dtype=np.float32))


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def elu(x, alpha=1.0):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > 0, x, alpha * (np.exp(x) - 1))


def selu(x):
    return 1.0507009873554805 * elu(x, 1.6732632423543772)


def gelu(x, approximate=False):
    x = np.asarray(x, dtype=np.float32)
    erf = np.vectorize(math.erf, otypes=[np.float32])
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def swish(x):
    x = np.asarray(x, dtype=np.float32)
    return x * sigmoid(x)


silu = swish


def softplus(x):
    return np.log1p(np.exp(np.asarray(x, dtype=np.float32)))


def leaky_relu(x, alpha=0.2):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > 0, x, alpha * x)


def softsign(x):
    x = np.asarray(x, dtype=np.float32)
    return x / (1 + np.abs(x))


def hard_sigmoid(x):
    """Keras 2's: clip(0.2 x + 0.5, 0, 1) (a Keras 3 file's hard_sigmoid is hard_sigmoid_v3)."""
    return np.clip(0.2 * np.asarray(x, dtype=np.float32) + 0.5, 0.0, 1.0)


def hard_sigmoid_v3(x):
    return np.clip(np.asarray(x, dtype=np.float32) + 3.0, 0.0, 6.0) / 6.0


def hard_silu(x):
    x = np.asarray(x, dtype=np.float32)
    return x * hard_sigmoid_v3(x)


hard_swish = hard_silu


def exponential(x):
    return np.exp(np.asarray(x, dtype=np.float32))


def relu6(x):
    return np.clip(np.asarray(x, dtype=np.float32), 0.0, 6.0)


def mish(x):
    x = np.asarray(x, dtype=np.float32)
    return x * np.tanh(np.logaddexp(0.0, x))


def log_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def celu(x, alpha=1.0):
    x = np.asarray(x, dtype=np.float32)
    return np.maximum(x, 0) + alpha * np.expm1(np.minimum(x, 0) / alpha)


def hard_tanh(x):
    return np.clip(np.asarray(x, dtype=np.float32), -1.0, 1.0)


def tanh_shrink(x):
    x = np.asarray(x, dtype=np.float32)
    return x - np.tanh(x)


def soft_shrink(x, threshold=0.5):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x > threshold, x - threshold, np.where(x < -threshold, x + threshold, 0.0))


def hard_shrink(x, threshold=0.5):
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.abs(x) > threshold, x, 0.0)


def squareplus(x, b=4):
    x = np.asarray(x, dtype=np.float32)
    return (x + np.sqrt(x * x + b)) / 2


def log_sigmoid(x):
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float32))


def sparse_plus(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x <= -1, 0.0, np.where(x < 1, 0.25 * (x + 1) ** 2, x))


def sparse_sigmoid(x):
    x = np.asarray(x, dtype=np.float32)
    return np.where(x <= -1, 0.0, np.where(x >= 1, 1.0, 0.5 * (x + 1)))


def sparsemax(x, axis=-1):
    x = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    z = -np.sort(-x, axis=-1)
    k = np.arange(1, x.shape[-1] + 1, dtype=np.float32)
    cum = np.cumsum(z, axis=-1)
    support = z - (cum - 1) / k > 0
    kz = support.sum(axis=-1, keepdims=True)
    tau = (np.take_along_axis(cum, kz - 1, axis=-1) - 1) / kz
    return np.moveaxis(np.maximum(x - tau, 0.0), -1, axis)


def get(identifier):
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    fn = globals().get(identifier)
    if fn is None or not callable(fn):
        raise ValueError(f"unknown activation {identifier!r}")
    return fn


def serialize(fn):
    return fn.__name__
