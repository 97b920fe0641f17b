"""keras.utils' array helpers, with Keras's formulas: to_categorical, normalize, pad_sequences."""
import numpy as np


def to_categorical(y, num_classes=None, dtype="float32"):
    """One-hot rows of the class indices y; a trailing axis of 1 is dropped first (Keras)."""
    y = np.array(y)
    if y.dtype.kind == "f" and np.any(y != np.floor(y)):
        raise ValueError("to_categorical: expected integer class indices, got fractional values")
    y = y.astype(np.int64)
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    y = y.ravel()
    if num_classes is None:
        num_classes = int(np.max(y)) + 1 if y.size else 0
    num_classes = int(num_classes)
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"to_categorical: class indices must lie in [0, {num_classes}), got values from "
                         f"{int(y.min())} to {int(y.max())}")
    out = np.zeros((y.shape[0], num_classes), dtype=dtype)
    out[np.arange(y.shape[0]), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2):
    """x divided by its order-norm along axis (norms of 0 leave the values as they are)."""
    x = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """Sequences of different lengths as one (n, maxlen, ...) array: padding and truncating
    'pre' (at the start) or 'post' (at the end), as Keras does."""
    if not hasattr(sequences, "__len__"):
        raise ValueError("pad_sequences: sequences must be iterable (a list of sequences)")
    if padding not in ("pre", "post"):
        raise ValueError(f'pad_sequences: padding "{padding}" not understood (expected "pre" or "post")')
    if truncating not in ("pre", "post"):
        raise ValueError(f'pad_sequences: truncating "{truncating}" not understood (expected "pre" or "post")')
    lengths, sample_shape, first = [], (), True
    for s in sequences:
        try:
            lengths.append(len(s))
            if first and len(s):
                sample_shape = np.asarray(s).shape[1:]
                first = False
        except TypeError as e:
            raise ValueError(f"pad_sequences: every sequence must be iterable, found {s!r}") from e
    if maxlen is None:
        maxlen = max(lengths) if lengths else 0
    maxlen = int(maxlen)
    is_text = np.issubdtype(np.dtype(dtype), np.str_) or np.dtype(dtype) == object
    if isinstance(value, str) and not is_text:
        raise ValueError(f"pad_sequences: dtype {dtype} cannot hold the padding value {value!r}; use dtype=object")
    x = np.full((len(lengths), maxlen) + tuple(sample_shape), value, dtype=dtype)
    for i, s in enumerate(sequences):
        if not len(s) or maxlen == 0:
            continue
        trunc = s[-maxlen:] if truncating == "pre" else s[:maxlen]
        trunc = np.asarray(trunc, dtype=dtype)
        if trunc.shape[1:] != tuple(sample_shape):
            raise ValueError(f"pad_sequences: sequence {i} has elements of shape {trunc.shape[1:]}, the first "
                             f"sequence's are {tuple(sample_shape)}")
        if padding == "post":
            x[i, :len(trunc)] = trunc
        else:
            x[i, -len(trunc):] = trunc
    return x
