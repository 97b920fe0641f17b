"""keras.ops.fft and fft2 (Keras 3: x a pair (real, imaginary), the result one too): the discrete
Fourier transform as products with constant cosine and sine matrices, so that traced code (FNet's
mixing layer) runs and is differentiated in C by the einsum path."""
import numpy as np

from tarantella.keras import ops as _ops
from tarantella.keras._trace import SymTensor

_LETTERS = "abcdefghij"


def _parts(x, who):
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError(f"{who}: expected a pair (real, imaginary) of tensors of the same shape, got "
                         f"{type(x).__name__}")
    real, imag = x
    if not isinstance(real, SymTensor):
        real = np.asarray(real, np.float32)
    if not isinstance(imag, SymTensor):
        imag = np.asarray(imag, np.float32)
    if tuple(real.shape) != tuple(imag.shape):
        raise ValueError(f"{who}: the real part's shape {tuple(real.shape)} and the imaginary part's "
                         f"{tuple(imag.shape)} differ")
    return real, imag


def _dft_axis(real, imag, axis):
    """One axis of the DFT: F_k = sum_m x_m (cos(2 pi k m / n) - i sin(2 pi k m / n))."""
    rank = len(real.shape)
    axis = axis % rank
    n = real.shape[axis]
    if n is None:
        raise ValueError(f"fft: the transformed axis {axis} is the batch (its length is unknown while tracing)")
    km = np.outer(np.arange(n), np.arange(n)) % n  # exact angles for large k * m
    cos = np.cos(2 * np.pi * km / n).astype(np.float32)
    sin = np.sin(2 * np.pi * km / n).astype(np.float32)
    sub = _LETTERS[:rank]
    eq = f"z{sub[axis]},{sub}->{sub[:axis]}z{sub[axis + 1:]}"
    re = _ops.einsum(eq, cos, real) + _ops.einsum(eq, sin, imag)
    im = _ops.einsum(eq, cos, imag) - _ops.einsum(eq, sin, real)
    return re, im


@_ops._lifted
def fft(x):
    """The DFT along the last axis of (real, imaginary); returns (real, imaginary)."""
    real, imag = _parts(x, "fft")
    return _dft_axis(real, imag, -1)


@_ops._lifted
def fft2(x):
    """The DFT along the last two axes of (real, imaginary); returns (real, imaginary)."""
    real, imag = _parts(x, "fft2")
    if len(real.shape) < 2:
        raise ValueError(f"fft2: expected at least 2 axes, got shape {tuple(real.shape)}")
    real, imag = _dft_axis(real, imag, -1)
    return _dft_axis(real, imag, -2)
