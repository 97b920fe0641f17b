"""keras.ops.image (Keras 3): extract_patches, resize, rgb_to_grayscale, on traced tensors (inside
a custom layer's call), on a model's tensors (each call a traced layer) and on arrays. Each is a
composition of the traced operations (slicing, reshape, transpose, pad, einsum with a constant
interpolation matrix), so the C engine runs and differentiates it with no operation of its own.
Shapes and sampling follow Keras 3 on TensorFlow (tf.image.extract_patches, tf.image.resize with
half-pixel centers)."""
import numpy as np

from tarantella.keras import backend as _K
from tarantella.keras import ops as _ops
from tarantella.keras._trace import SymTensor


def _pair(v, what):
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return int(v[0]), int(v[1])
    raise ValueError(f"{what}: expected an int or a pair of ints, got {v!r}")


def _data_format(data_format):
    data_format = data_format or _K.image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"data_format: expected 'channels_last' or 'channels_first', got {data_format!r}")
    return data_format


def _as_images(images, data_format, who):
    """(images as a batch in channels_last, whether a batch axis was added, whether it was
    channels_first). Arrays of ints are read as float32, as Keras's image ops do."""
    if not isinstance(images, SymTensor):
        images = np.asarray(images)
        if not np.issubdtype(images.dtype, np.floating):
            images = images.astype(np.float32)
    rank = len(images.shape)
    if rank not in (3, 4):
        raise ValueError(f"{who}: expected images of rank 3 (one image) or 4 (a batch), got shape "
                         f"{tuple(images.shape)}")
    first = data_format == "channels_first"
    if rank == 3:
        if isinstance(images, SymTensor):
            raise ValueError(f"{who}: a traced tensor of rank 3 {tuple(images.shape)}: its first axis is the batch; "
                             f"expected (batch, height, width, channels)")
        images = images[None]
    if first:
        images = _ops.transpose(images, (0, 2, 3, 1))
    return images, rank == 3, first


def _from_last(x, unbatched, first):
    if first:
        x = _ops.transpose(x, (0, 3, 1, 2))
    return x[0] if unbatched else x


def _pad(x, pads):
    return _ops.pad(x, pads) if isinstance(x, SymTensor) else np.pad(x, pads)


@_ops._lifted
def extract_patches(images, size, strides=None, dilation_rate=1, padding="valid", data_format=None):
    """Keras's ops.image.extract_patches: every size[0] x size[1] window (strides apart, its pixels
    dilation_rate apart) as one vector of its pixels in row order, channels innermost, as
    tf.image.extract_patches. (batch, rows, cols, size[0] * size[1] * channels) in channels_last;
    padding "same" pads as TensorFlow does (the extra row or column at the end)."""
    ph, pw = _pair(size, "extract_patches: size")
    sh, sw = _pair(strides if strides is not None else (ph, pw), "extract_patches: strides")
    dh, dw = _pair(dilation_rate, "extract_patches: dilation_rate")
    if min(ph, pw, sh, sw, dh, dw) < 1:
        raise ValueError(f"extract_patches: size {size}, strides {strides} and dilation_rate {dilation_rate} must "
                         f"be positive")
    padding = str(padding).lower()
    if padding not in ("valid", "same"):
        raise ValueError(f"extract_patches: padding {padding!r} (expected 'valid' or 'same')")
    x, unbatched, first = _as_images(images, _data_format(data_format), "extract_patches")
    _, h, w, c = x.shape
    if h is None or w is None or c is None:
        raise ValueError(f"extract_patches: images of shape {tuple(x.shape)}: height, width and channels must be "
                         f"known")
    eh, ew = (ph - 1) * dh + 1, (pw - 1) * dw + 1  # the window's extent
    if padding == "same":
        rows, cols = -(-h // sh), -(-w // sw)
        th, tw = max((rows - 1) * sh + eh - h, 0), max((cols - 1) * sw + ew - w, 0)
        x = _pad(x, [[0, 0], [th // 2, th - th // 2], [tw // 2, tw - tw // 2], [0, 0]])
        h, w = h + th, w + tw
    rows, cols = (h - eh) // sh + 1, (w - ew) // sw + 1
    if rows < 1 or cols < 1:
        raise ValueError(f"extract_patches: a {ph}x{pw} window (dilation {dilation_rate}) does not fit images of "
                         f"{h}x{w} with padding 'valid'")
    if (sh, sw) == (ph, pw) and (dh, dw) == (1, 1):  # tiles: one reshape and transpose
        x = x[:, :rows * ph, :cols * pw, :]
        x = _ops.reshape(x, (-1, rows, ph, cols, pw, c))
        x = _ops.transpose(x, (0, 1, 3, 2, 4, 5))
    else:  # each window position (i, j): a strided slice of the image
        parts = [x[:, i * dh:i * dh + (rows - 1) * sh + 1:sh, j * dw:j * dw + (cols - 1) * sw + 1:sw, :]
                 for i in range(ph) for j in range(pw)]
        x = _ops.stack(parts, axis=3)
    x = _ops.reshape(x, (-1, rows, cols, ph * pw * c))
    return _from_last(x, unbatched, first)


def _interpolation_matrix(out_size, in_size, interpolation):
    """The (out_size, in_size) matrix that resamples one axis, half-pixel centers as
    tf.image.resize: bilinear weights of the two nearest inputs (clamped at the edges), or the
    nearest input floor((o + 0.5) * in / out)."""
    scale = in_size / out_size
    m = np.zeros((out_size, in_size), np.float32)
    o = np.arange(out_size)
    if interpolation == "nearest":
        m[o, np.minimum(np.floor((o + 0.5) * scale).astype(np.int64), in_size - 1)] = 1.0
        return m
    src = (o + 0.5) * scale - 0.5
    low = np.floor(src)
    frac = (src - low).astype(np.float32)
    lo = np.clip(low, 0, in_size - 1).astype(np.int64)
    hi = np.clip(low + 1, 0, in_size - 1).astype(np.int64)
    np.add.at(m, (o, lo), 1.0 - frac)
    np.add.at(m, (o, hi), frac)
    return m


_INTERPOLATIONS = ("bilinear", "nearest")


@_ops._lifted
def resize(images, size, interpolation="bilinear", antialias=False, crop_to_aspect_ratio=False,
           pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, data_format=None):
    """Keras's ops.image.resize to size (height, width): bilinear or nearest with half-pixel
    centers (tf.image.resize), optionally after the centered crop of the target's aspect ratio.
    Each axis is a product with a constant interpolation matrix, so the gradient is its transpose."""
    oh, ow = _pair(size, "resize: size")
    if oh < 1 or ow < 1:
        raise ValueError(f"resize: size {size} must be positive")
    if interpolation not in _INTERPOLATIONS:
        raise NotImplementedError(f"resize: interpolation {interpolation!r} is not supported (supported: "
                                  f"{', '.join(_INTERPOLATIONS)})")
    if pad_to_aspect_ratio:
        if crop_to_aspect_ratio:
            raise ValueError("resize: only one of crop_to_aspect_ratio and pad_to_aspect_ratio can be True")
        raise NotImplementedError("resize: pad_to_aspect_ratio is not supported (crop_to_aspect_ratio is)")
    x, unbatched, first = _as_images(images, _data_format(data_format), "resize")
    h, w = x.shape[1], x.shape[2]
    if h is None or w is None:
        raise ValueError(f"resize: images of shape {tuple(x.shape)}: height and width must be known")
    if crop_to_aspect_ratio:  # Keras's centered crop of the target's aspect ratio
        ch = max(min(h, int(float(w * oh) / ow)), 1)
        cw = max(min(w, int(float(h * ow) / oh)), 1)
        top, left = int(float(h - ch) / 2), int(float(w - cw) / 2)
        x = x[:, top:top + ch, left:left + cw, :]
        h, w = ch, cw
    if antialias and (oh < h or ow < w):
        raise NotImplementedError("resize: antialias=True when downsampling is not supported (it changes nothing "
                                  "when upsampling)")
    rows = _interpolation_matrix(oh, h, interpolation)
    cols = _interpolation_matrix(ow, w, interpolation)
    x = _ops.einsum("ph,bhwc->bpwc", rows, x)
    x = _ops.einsum("qw,bpwc->bpqc", cols, x)
    return _from_last(x, unbatched, first)


@_ops._lifted
def rgb_to_grayscale(images, data_format=None):
    """Keras's ops.image.rgb_to_grayscale: 0.2989 R + 0.587 G + 0.114 B, one channel kept."""
    x, unbatched, first = _as_images(images, _data_format(data_format), "rgb_to_grayscale")
    if x.shape[3] != 3:
        raise ValueError(f"rgb_to_grayscale: expected 3 channels, got images of shape {tuple(x.shape)}")
    weights = np.array([[0.2989], [0.5870], [0.1140]], np.float32)
    x = _ops.einsum("bhwc,ck->bhwk", x, weights)
    return _from_last(x, unbatched, first)
