"""padded_batch for training: each batch padded to its own longest element (tf.data's rule), on
any number of ranks. The C pipeline holds the samples padded to a common shape plus each sample's
extents; its padded batch cuts every global batch to the largest extents in it (or to the padded
shapes given), so each rank's share has the shape of the whole batch, as in a serial run."""
import numpy as np


def _plain(v):
    return isinstance(v, np.ndarray) and v.dtype.kind in "biuf"


def _shape(spec, rank, what):
    """A padded shape for the C op: -1 where tf.data takes the batch's longest (None or -1)."""
    if spec is None:
        return None
    if isinstance(spec, (int, np.integer)):
        spec = [int(spec)]
    spec = list(getattr(spec, "shape", spec))
    if len(spec) != rank:
        raise ValueError(f"padded_batch: padded shape {tuple(spec)} of {what} has {len(spec)} dimensions, the "
                         f"elements {rank}")
    return [-1 if d is None else int(d) for d in spec]


def _fill(value):
    if value is None:
        return 0.0
    a = np.asarray(value)
    if a.ndim or a.dtype.kind not in "biuf":
        return None
    return float(a)


def lower(ds):
    """The C dataset for ds = parent.padded_batch(...) when the parent's elements are x or (x, y) of
    single arrays of numbers and it lowers without a map; else None (ds is materialized)."""
    _, size, shapes, values, drop = ds._op
    parent = ds._parent
    e = parent._first()
    pair = isinstance(e, tuple) and len(e) == 2 and all(map(_plain, e))
    if not (pair or _plain(e)):
        return None
    parts = e if pair else (e,)
    if pair:
        shapes = (None, None) if shapes is None else shapes
        values = (values, values) if not isinstance(values, (tuple, list)) else values
        if not isinstance(shapes, (tuple, list)) or len(shapes) != 2 or len(values) != 2:
            return None
    else:
        shapes, values = (shapes,), (values,)
    pads = [_shape(s, p.ndim, w) for s, p, w in zip(shapes, parts, ("x", "y"))]
    fills = [_fill(v) for v in values]
    if any(f is None for f in fills):
        return None
    c = parent._lower()
    if c.is_batched or any(op[0] == "map" for op in c._ops) or c._source[0] != "arrays":
        return None
    pads += [None] * (2 - len(pads))
    fills += [0.0] * (2 - len(fills))
    return c._then(("padded_batch", size, drop, pads[0], pads[1], fills[0], fills[1]))


def extents(rows, k):
    """The extents (n, ndim) of column k of the rows (one sample each) when its arrays' shapes differ;
    None when they are all alike (or of different ranks, which no padding joins)."""
    arrays = [np.asarray(r[k]) for r in rows]
    shapes = {a.shape for a in arrays}
    if len(shapes) == 1 or len({len(s) for s in shapes}) != 1:
        return None
    return np.array([a.shape for a in arrays], dtype=np.int32).reshape(len(arrays), -1)


def batch_materialized(out, size, xs_rows, ys_rows):
    """The materialized samples of a padded dataset's batches batched again in C: where the batches
    have shapes of their own (one x and at most one y each), each keeps its own shape."""
    xe = extents(xs_rows, 0) if len(xs_rows[0]) == 1 else None
    ye = extents(ys_rows, 0) if ys_rows[0] is not None and len(ys_rows[0]) == 1 else None
    varied_x = len(xs_rows[0]) > 1 and any(extents(xs_rows, k) is not None for k in range(len(xs_rows[0])))
    varied_y = ys_rows[0] is not None and len(ys_rows[0]) > 1 and any(
        extents(ys_rows, k) is not None for k in range(len(ys_rows[0])))
    if (xe is None and ye is None) or varied_x or varied_y:
        return out.batch(size)
    out._extents = (xe, ye)
    return out._then(("padded_batch", size, False, None, None, 0.0, 0.0))


def source_extents(out, xs_rows, ys_rows):
    """Unbatched samples of different shapes (one x, at most one y): their extents on the source, for
    a padded_batch after it."""
    if len(xs_rows[0]) != 1 or (ys_rows[0] is not None and len(ys_rows[0]) != 1):
        return out
    xe = extents(xs_rows, 0)
    ye = extents(ys_rows, 0) if ys_rows[0] is not None else None
    if xe is not None or ye is not None:
        out._extents = (xe, ye)
    return out


def fit_to_model(ds, input_shapes):
    """A model whose single input has fixed sizes where a padded batch pads to each batch's longest:
    the batches padded to the model's sizes instead (Keras 2 runs such a model's layers on each
    batch's length after a warning; a fixed model here takes its own shape). ds's lowering is
    replaced."""
    if not hasattr(ds, "_lowered"):  # not a Python dataset: no padded batch of this kind
        return
    low = ds._lower()
    ops = list(getattr(low, "_ops", ()))
    at = [i for i, op in enumerate(ops) if op[0] == "padded_batch"]
    if not at or len(input_shapes) != 1:
        return
    name, size, drop, xpad, ypad, xfill, yfill = ops[at[0]]
    want = input_shapes[0]
    rank = len(low._meta()["x_shape"])
    if len(want) != rank:
        return
    xpad = list(xpad) if xpad is not None else [-1] * rank
    new = [w if p == -1 and w is not None else p for p, w in zip(xpad, want)]
    if new == xpad:
        return
    ops[at[0]] = (name, size, drop, new, ypad, xfill, yfill)
    from tarantella.data import Dataset
    out = Dataset(low._source, ops, dtypes=low._dtypes)
    out._x_parts, out._extents = low._x_parts, low._extents
    ds._lowered = out
