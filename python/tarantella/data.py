"""tnt.data: tf.data-like datasets on libtarantella's pipeline.

A Dataset is an immutable recipe (a source and a list of ops); the C pipeline is built from it
when the dataset is first used and kept for later uses. Elements are (x, y) pairs of float32
arrays, or x alone. Sources borrow their NumPy arrays (no copy when they are float32 and
C-contiguous already). Shuffling follows the seed and the epoch, identically on every rank (no
seed: Tarantella's fixed default, 42); a data-parallel fit splits every global batch into one
contiguous share per rank, and each rank materializes only its own samples.

map(fn) runs fn on each sample when it is materialized, with the GIL, possibly on the prefetch
thread; its output shapes come from one call on the first element. After batch(), fn still runs
per sample, given each as a batch of one ((1, ...) arrays), so batch-wise numpy code works.
"""
import numpy as np

from tarantella._core import C, ensure_init

AUTOTUNE = -1


class experimental:  # tf.data.experimental.AUTOTUNE
    AUTOTUNE = AUTOTUNE


def _as_f32(a, what):
    a = np.asarray(a)
    if a.dtype == object:
        raise TypeError(f"{what}: expected a numeric array, got dtype object")
    # integer ids travel as float32, which holds every integer up to 2^24 exactly
    if a.dtype.kind in "iu" and a.size and max(abs(int(a.max())), abs(int(a.min()))) > 1 << 24:
        raise ValueError(f"{what}: integer values up to {max(abs(int(a.max())), abs(int(a.min())))} (dtype {a.dtype}): "
                         f"inputs are float32 here, which holds integers exactly only up to 2^24 = {1 << 24}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _flatten_inputs(xs, what):
    """One array per sample of several inputs (or outputs), the values one after the other, as the
    library feeds multi-input models."""
    xs = [_as_f32(x, what) for x in xs]
    if len(xs) == 1:
        return xs[0]
    n = xs[0].shape[0] if xs[0].ndim else None
    for x in xs:
        if x.ndim == 0 or x.shape[0] != n:
            raise ValueError(f"{what}: all arrays need the same number of samples, got "
                             f"{[x.shape[0] if x.ndim else None for x in xs]}")
    return np.concatenate([x.reshape(n, -1) for x in xs], axis=1)


class Dataset:
    """tf.data.Dataset's shape: from_tensor_slices, shuffle, batch, map, prefetch, repeat, take,
    skip, iteration (numpy arrays)."""

    def __init__(self, source, ops=(), info=None):
        self._source = source  # ("arrays", x, y) | ("npy", xpath, ypath) | ("idx", images, labels)
        self._ops = tuple(ops)
        self._handle_ = None
        self._info = info

    # ---- sources ----
    @staticmethod
    def from_tensor_slices(tensors):
        """tensors: an array (x), a pair (x, y), or lists of arrays for several inputs/outputs:
        ([x1, x2], y). Samples are the first axis."""
        if isinstance(tensors, dict):
            raise NotImplementedError("from_tensor_slices: dict elements are not supported; pass (x, y)")
        if isinstance(tensors, tuple):
            if len(tensors) == 1:
                tensors = tensors[0]
            elif len(tensors) == 2:
                x, y = tensors
                xs = list(x) if isinstance(x, (list, tuple)) else [x]
                ys = list(y) if isinstance(y, (list, tuple)) else [y]
                return Dataset(("arrays", _flatten_inputs(xs, "from_tensor_slices x"),
                                _flatten_inputs(ys, "from_tensor_slices y")))
            else:
                raise NotImplementedError("from_tensor_slices: elements of 1 or 2 parts (x or (x, y)) only")
        xs = list(tensors) if isinstance(tensors, list) else [tensors]
        return Dataset(("arrays", _flatten_inputs(xs, "from_tensor_slices"), None))

    @staticmethod
    def range(*args):
        """Dataset.range(stop) / (start, stop[, step]): scalars as float32."""
        return Dataset(("arrays", np.arange(*args, dtype=np.float32), None))

    @staticmethod
    def from_npy(x_path, y_path=None):
        """NPY files (samples first; any numeric dtype), mapped rather than read."""
        return Dataset(("npy", x_path, y_path))

    @staticmethod
    def from_idx(images_path, labels_path=None):
        """MNIST-style IDX files (plain or .gz): images (rows, cols, 1), raw 0..255."""
        return Dataset(("idx", images_path, labels_path))

    # ---- ops (each returns a new Dataset) ----
    def _then(self, op):
        return Dataset(self._source, self._ops + (op,))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        if not reshuffle_each_iteration:
            raise NotImplementedError("shuffle: reshuffle_each_iteration=False is not supported")
        buffer_size = int(buffer_size)
        if buffer_size == -1:  # tf.data: the whole dataset
            buffer_size = max(1, self.cardinality())
        return self._then(("shuffle", buffer_size, int(seed or 0)))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None):
        return self._then(("batch", int(batch_size), bool(drop_remainder)))

    def map(self, map_func, num_parallel_calls=None, deterministic=None):
        if not callable(map_func):
            raise TypeError("map: map_func is not callable")
        xs, ys = self._trace(map_func)
        return self._then(("map", map_func, xs, ys))

    def prefetch(self, buffer_size):
        buffer_size = int(buffer_size)
        return self._then(("prefetch", 2 if buffer_size <= 0 else buffer_size))

    def repeat(self, count=None):
        return self._then(("repeat", -1 if count is None else int(count)))

    def take(self, count):
        return self._then(("take", int(count)))

    def skip(self, count):
        return self._then(("skip", int(count)))

    def cache(self, filename=""):
        return self  # elements are recomputed from the source; a cache changes nothing here

    # ---- the C pipeline ----
    def _handle(self):
        if self._handle_ is None:
            ensure_init()
            kind, a, b = self._source
            if kind == "arrays":
                h = C.dataset_from_arrays(a, b)
            elif kind == "npy":
                h = C.dataset_from_npy(a, b) if b is not None else C.dataset_from_npy(a)
            else:
                h = C.dataset_from_idx(a, b) if b is not None else C.dataset_from_idx(a)
            for op in self._ops:
                name, args = op[0], op[1:]
                if name == "map":
                    fn, xs, ys = args
                    h = h.map(fn, xs, ys)
                else:
                    h = getattr(h, name)(*args)
            self._handle_ = h
            self._info = h.info()
        return self._handle_

    def _meta(self):
        if self._info is None:
            self._handle()
        return self._info

    def _trace(self, fn):
        """Output shapes of fn on this dataset's first element (its sample shapes, without the
        batch axis)."""
        info = self._meta()
        it = iter(self._handle().iterate(0))
        try:
            x, y = next(it)
        except StopIteration:
            return info["x_shape"], info["y_shape"] if info["has_labels"] else None
        finally:
            del it
        if not info["batched"]:
            x = x[0]
            y = y[0] if y is not None else None
        else:  # one sample, as a batch of one
            x = x[:1]
            y = y[:1] if y is not None else None
        out = fn(x, y) if info["has_labels"] else fn(x)
        if info["has_labels"]:
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError("map: a function over (x, y) elements must return a pair (x, y)")
            ox, oy = (np.asarray(o, dtype=np.float32) for o in out)
        else:
            ox, oy = np.asarray(out, dtype=np.float32), None
        if info["batched"]:
            for o, what in ((ox, "x"), (oy, "y")):
                if o is not None and (o.ndim == 0 or o.shape[0] != 1):
                    raise ValueError(f"map after batch: the function's {what} must keep the batch axis of "
                                     f"the sample it is given (shape (1, ...)), got {o.shape}")
            ox = ox[0]
            oy = oy[0] if oy is not None else None
        return tuple(ox.shape), (tuple(oy.shape) if oy is not None else None)

    # ---- inspection and iteration ----
    def cardinality(self):
        """Elements per iteration; -1 when infinite (tf.data.INFINITE_CARDINALITY)."""
        return self._meta()["cardinality"]

    def __len__(self):
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset length is infinite")
        return n

    @property
    def element_spec(self):
        info = self._meta()
        lead = (None,) if info["batched"] else ()
        xs = lead + tuple(info["x_shape"])
        return (xs, lead + tuple(info["y_shape"])) if info["has_labels"] else xs

    @property
    def is_batched(self):
        return self._meta()["batched"]

    @property
    def has_labels(self):
        return self._meta()["has_labels"]

    def __iter__(self):
        info = self._meta()
        for x, y in self._handle().iterate(0):
            if not info["batched"]:
                x = x[0]
                y = y[0] if y is not None else None
            yield (x, y) if info["has_labels"] else x

    def as_numpy_iterator(self):
        return iter(self)

    def __repr__(self):
        return f"<tnt.data.Dataset element_spec={self.element_spec}>"
