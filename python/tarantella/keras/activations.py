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
