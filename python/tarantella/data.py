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

The ops the C pipeline does not have (zip, filter, padded_batch, unbatch, flat_map, interleave,
concatenate, enumerate, shuffle without reshuffling, from_tensors, from_generator, range,
list_files, TextLineDataset, elements with text or dicts) run in Python (tarantella/_pydata.py);
such a dataset is lowered to the C pipeline when a model trains on it.
"""
import glob as _glob
import os

import numpy as np

from tarantella import _pydata as P
from tarantella import _random
from tarantella._core import C, ensure_init
from tarantella._dtypes import as_dtype, numpy_dtype
from tarantella._tensor import eager

AUTOTUNE = -1
INFINITE_CARDINALITY = P.INFINITE
UNKNOWN_CARDINALITY = P.UNKNOWN


class experimental:  # tf.data.experimental.AUTOTUNE, cardinality constants, samplers
    AUTOTUNE = AUTOTUNE
    INFINITE_CARDINALITY = P.INFINITE
    UNKNOWN_CARDINALITY = P.UNKNOWN

    @staticmethod
    def cardinality(dataset):
        return dataset.cardinality()

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False):
        return sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        return choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


class Count(int):
    """A count that programs may read as TensorFlow's scalar tensor (.numpy())."""

    def numpy(self):
        return int(self)


class Options:
    """tf.data.Options: accepted (with_options), with the attributes programs set; the library's
    pipeline has its own threading and sharding."""

    class _Group:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def __init__(self):
        self.experimental_distribute = Options._Group(auto_shard_policy=None)
        self.experimental_optimization = Options._Group()
        self.threading = Options._Group(private_threadpool_size=None, max_intra_op_parallelism=None)
        self.experimental_deterministic = None
        self.deterministic = None


class AutoShardPolicy:
    AUTO, FILE, DATA, HINT, OFF = 0, 1, 2, 3, -1


class TensorSpec(tuple):
    """tf.TensorSpec: the shape (this tuple's values, None for a free dimension) and the dtype."""

    def __new__(cls, shape, dtype=None, name=None):
        t = super().__new__(cls, tuple(None if d is None else int(d) for d in (shape or ())))
        t.dtype = as_dtype(dtype if dtype is not None else "float32")
        t.name = name
        return t

    @property
    def shape(self):
        return tuple(self)

    def __repr__(self):
        return f"TensorSpec(shape={tuple(self)}, dtype={self.dtype!r}, name={self.name!r})"


def _spec_of(element, batched):
    def leaf(v):
        if isinstance(v, (str, bytes)):
            return TensorSpec((), "string")
        a = np.asarray(v)
        shape = ((None,) + a.shape[1:]) if batched and a.ndim else a.shape
        return TensorSpec(shape, as_dtype(a.dtype) if a.dtype.kind not in "US" else "string")
    return P.map_structure(leaf, element)


class _FormChange(Exception):
    """A map function changes the elements' form, which the C pipeline's map keeps."""


def _dtype_of(parts):
    """The dtype of a single part (several parts are fed as float32 values one after the other)."""
    return np.asarray(parts[0]).dtype if len(parts) == 1 else None


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

    def __init__(self, source, ops=(), info=None, dtypes=(None, None)):
        self._source = source  # ("arrays", x, y) | ("npy", xpath, ypath) | ("idx", images, labels)
        self._ops = tuple(ops)
        self._handle_ = None
        self._info = info
        # the integer dtypes of x and y at the source (or of a map's values): the pipeline holds
        # float32 (exact to 2^24), Python sees the integers again, as TensorFlow gives them
        self._dtypes = tuple(d if d is not None and np.dtype(d).kind in "biu" else None for d in dtypes)

    # ---- sources ----
    @staticmethod
    def from_tensor_slices(tensors, name=None):
        """tensors: an array (x), a pair (x, y), or lists of arrays for several inputs/outputs:
        ([x1, x2], y). Samples are the first axis."""
        if not _numeric_slices(tensors):  # text, dicts, nests: sliced in Python
            return _py_slices(tensors)
        if isinstance(tensors, tuple):
            if len(tensors) == 1:
                tensors = tensors[0]
            elif len(tensors) == 2:
                x, y = tensors
                xs = list(x) if isinstance(x, (list, tuple)) else [x]
                ys = list(y) if isinstance(y, (list, tuple)) else [y]
                out = Dataset(("arrays", _flatten_inputs(xs, "from_tensor_slices x"),
                               _flatten_inputs(ys, "from_tensor_slices y")), dtypes=(_dtype_of(xs), _dtype_of(ys)))
                out._x_parts = [np.shape(v)[1:] for v in xs]
                return out
            else:
                raise NotImplementedError("from_tensor_slices: elements of 1 or 2 parts (x or (x, y)) only")
        xs = list(tensors) if isinstance(tensors, list) else [tensors]
        out = Dataset(("arrays", _flatten_inputs(xs, "from_tensor_slices"), None), dtypes=(_dtype_of(xs), None))
        out._x_parts = [np.shape(v)[1:] for v in xs]
        return out

    @staticmethod
    def range(*args, output_type=None, name=None):
        """Dataset.range(stop) / (start, stop[, step]): int64 scalars (float32 in the C pipeline)."""
        values = np.arange(*args, dtype=numpy_dtype(output_type) or np.int64)
        return _PyDataset(lambda epoch: iter(values), len(values), False)

    @staticmethod
    def from_npy(x_path, y_path=None):
        """NPY files (samples first; any numeric dtype), mapped rather than read."""
        return Dataset(("npy", x_path, y_path))

    @staticmethod
    def from_idx(images_path, labels_path=None):
        """MNIST-style IDX files (plain or .gz): images (rows, cols, 1), raw 0..255."""
        return Dataset(("idx", images_path, labels_path))

    # ---- ops (each returns a new Dataset) ----
    # the sample shapes of the inputs packed in x (several inputs), when known: a model with None
    # input dimensions takes its input shapes from them
    _x_parts = None

    # each sample's extents (arrays (n, ndim) for x and y, or None) when the source arrays hold
    # samples of different shapes padded to a common one: a padded_batch cuts each batch to its own
    _extents = None

    def _then(self, op, dtypes=None):
        out = Dataset(self._source, self._ops + (op,), dtypes=self._dtypes if dtypes is None else dtypes)
        out._x_parts = self._x_parts if op[0] != "map" else None
        out._extents = self._extents
        return out

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        buffer_size = int(buffer_size)
        if buffer_size == -1:  # tf.data: the whole dataset
            buffer_size = max(1, self.cardinality())
        if buffer_size <= 0:
            raise ValueError(f"shuffle: buffer_size must be positive (or -1: the whole dataset), got {buffer_size}")
        if seed is None:
            seed = _random.global_seed()
        if reshuffle_each_iteration is False:  # one order for every epoch: shuffled once, in Python
            return self._as_py().shuffle(buffer_size, seed, False)
        return self._then(("shuffle", buffer_size, int(seed or 0)))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        return self._then(("batch", int(batch_size), bool(drop_remainder)))

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        if not callable(map_func):
            raise TypeError("map: map_func is not callable")
        original = map_func
        xd, yd = self._dtypes
        if xd is not None or yd is not None:  # the function sees the source's integers
            fn = map_func

            def map_func(x, y=None, _fn=fn):
                x = x.astype(xd) if xd is not None else x
                if y is None:
                    return _fn(x)
                return _fn(x, y.astype(yd) if yd is not None else y)
        try:
            (xs, ys), dtypes = self._trace(map_func)
        except _FormChange:  # x to (x, y), (x, y) to x, nests: the elements change form, in Python
            return self._as_py().map(original)
        return self._then(("map", map_func, xs, ys), dtypes)

    def prefetch(self, buffer_size, name=None):
        buffer_size = int(buffer_size)
        return self._then(("prefetch", 2 if buffer_size <= 0 else buffer_size))

    def repeat(self, count=None, name=None):
        return self._then(("repeat", -1 if count is None else int(count)))

    def take(self, count, name=None):
        return self._then(("take", int(count)))

    def skip(self, count, name=None):
        return self._then(("skip", int(count)))

    def cache(self, filename="", name=None):
        return self  # elements are recomputed from the source; a cache changes nothing here

    def _as_py(self):
        """This dataset as a Python one (for the ops the C pipeline lacks)."""
        return _PyDataset(self._elements, self.cardinality(), self.is_batched, c_dataset=self)

    # ---- the ops that run in Python (see tarantella/_pydata.py) ----
    def filter(self, predicate):
        return self._as_py().filter(predicate)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        return self._as_py().padded_batch(batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self, name=None):
        return self._as_py().unbatch()

    def flat_map(self, map_func, name=None):
        return self._as_py().flat_map(map_func)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        return self._as_py().interleave(map_func, cycle_length, block_length)

    def concatenate(self, dataset, name=None):
        return self._as_py().concatenate(dataset)

    def enumerate(self, start=0, name=None):
        return self._as_py().enumerate(start)

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        return self._as_py().window(size, shift, stride, drop_remainder)

    def shard(self, num_shards, index, name=None):
        return self._as_py().shard(num_shards, index)

    def take_while(self, predicate, name=None):
        return self._as_py().take_while(predicate)

    def unique(self, name=None):
        return self._as_py().unique()

    def get_single_element(self, name=None):
        return self._as_py().get_single_element()

    @staticmethod
    def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                             rerandomize_each_iteration=None):
        return sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration)

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        return choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)

    def apply(self, transformation_func):
        return transformation_func(self)

    def with_options(self, options, name=None):
        return self

    def options(self):
        return Options()

    def reduce(self, initial_state, reduce_func, name=None):
        state = initial_state
        for e in self:
            state = reduce_func(state, e)
        return state

    # ---- Python sources ----
    @staticmethod
    def from_tensors(tensors, name=None):
        """One element: tensors as they are."""
        element = _to_arrays(tensors)
        return _PyDataset(lambda epoch: iter([element]), 1, False)

    @staticmethod
    def zip(*datasets, name=None):
        """Elements of the datasets side by side (a tuple, or the structure given), as long as the
        shortest."""
        structure = datasets[0] if len(datasets) == 1 and isinstance(datasets[0], (tuple, list, dict)) else datasets
        parts = P.leaves(structure)
        for d in parts:
            if not isinstance(d, Dataset):
                raise TypeError(f"zip: expected Datasets, got {type(d).__name__}")
        if not parts:
            raise ValueError("zip: no datasets given")
        pys = [d._as_py() for d in parts]

        def gen(epoch):
            its = [d._gen(epoch) for d in pys]
            for values in zip(*its):
                it = iter(values)
                yield P.map_structure(lambda _: next(it), structure)
        card = P.INFINITE  # TensorFlow's rule: an unknown input makes it unknown, else the shortest
        for c in (d.cardinality() for d in pys):
            if c == P.UNKNOWN:
                card = P.UNKNOWN
                break
            if c != P.INFINITE:
                card = c if card == P.INFINITE else min(card, c)
        return _PyDataset(gen, card, all(d.is_batched for d in pys))

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None,
                       name=None):
        """Elements from generator(*args), called anew at every iteration; output_signature (or
        output_types) casts them."""
        if not callable(generator):
            raise TypeError("from_generator: generator must be callable (a function returning an iterator)")
        signature, spec = output_signature, output_signature
        if signature is None and output_types is not None:
            if output_shapes is not None:  # dtypes and shapes: the element_spec, checked
                signature = spec = P.map_structure(lambda t, s: TensorSpec(s, t), output_types, output_shapes)
            else:  # dtypes only: cast, shapes from the values
                signature = P.map_structure(as_dtype, output_types)

        def cast(element):
            element = P.normalize(element)
            if signature is None:
                return element
            return _cast_to(element, signature)

        def gen(epoch):
            for e in generator(*(args or ())):
                yield cast(e)
        return _PyDataset(gen, P.UNKNOWN, False, spec=spec)

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None):
        """The files matching the pattern(s), shuffled unless shuffle=False (sorted then)."""
        patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
        files = sorted({f for p in patterns for f in _glob.glob(os.fsdecode(p))})
        if not files:
            raise FileNotFoundError(f"list_files: no files match {file_pattern!r}")
        ds = _PyDataset(lambda epoch: iter(np.array(files, dtype=object)), len(files), False)
        if shuffle is None or shuffle:
            ds = ds.shuffle(len(files), seed=seed)
        return ds

    # ---- the C pipeline ----
    def _handle(self):
        if self._handle_ is None:
            ensure_init()
            kind, a, b = self._source
            if kind == "arrays":
                h = C.dataset_from_arrays(a, b)
                if self._x_parts is not None and len(self._x_parts) > 1:  # several inputs, packed
                    h.set_x_parts([tuple(int(d) for d in p) for p in self._x_parts])
                if self._extents is not None:
                    h.set_extents(*self._extents)
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
            return (info["x_shape"], info["y_shape"] if info["has_labels"] else None), (None, None)
        finally:
            del it
        if not info["batched"]:
            x = x[0]
            y = y[0] if y is not None else None
        else:  # one sample, as a batch of one
            x = x[:1]
            y = y[:1] if y is not None else None
        out = fn(x, y) if info["has_labels"] else fn(x)
        pair = isinstance(out, tuple) and len(out) == 2 and not any(isinstance(o, (tuple, list, dict)) for o in out)
        if (info["has_labels"] and not pair) or (not info["has_labels"] and isinstance(out, (tuple, list, dict))):
            raise _FormChange()
        if info["has_labels"]:
            ox, oy = (np.asarray(o) for o in out)
        else:
            ox, oy = np.asarray(out), None
        dtypes = (ox.dtype, oy.dtype if oy is not None else None)
        if info["batched"]:
            for o, what in ((ox, "x"), (oy, "y")):
                if o is not None and (o.ndim == 0 or o.shape[0] != 1):
                    raise ValueError(f"map after batch: the function's {what} must keep the batch axis of "
                                     f"the sample it is given (shape (1, ...)), got {o.shape}")
            ox = ox[0]
            oy = oy[0] if oy is not None else None
        return (tuple(ox.shape), (tuple(oy.shape) if oy is not None else None)), dtypes

    # ---- inspection and iteration ----
    def cardinality(self):
        """Elements per iteration; -1 when infinite (tf.data.INFINITE_CARDINALITY)."""
        return Count(self._meta()["cardinality"])

    def __len__(self):
        n = self.cardinality()
        if n == P.INFINITE:
            raise TypeError("the dataset length is infinite")
        if n < 0:
            raise TypeError("the dataset length is unknown")
        return n

    @property
    def element_spec(self):
        info = self._meta()
        lead = (None,) if info["batched"] else ()
        xd, yd = self._dtypes
        xs = TensorSpec(lead + tuple(info["x_shape"]), xd)
        return (xs, TensorSpec(lead + tuple(info["y_shape"]), yd)) if info["has_labels"] else xs

    @property
    def is_batched(self):
        return self._meta()["batched"]

    @property
    def has_labels(self):
        return self._meta()["has_labels"]

    def __iter__(self):
        return self._elements(0)

    def _elements(self, epoch):
        info = self._meta()
        xd, yd = self._dtypes
        for x, y in self._handle().iterate(epoch):
            if not info["batched"]:
                x = x[0]
                y = y[0] if y is not None else None
            x = eager(x.astype(xd) if xd is not None else x)
            if not info["has_labels"]:
                yield x
                continue
            yield x, eager(y.astype(yd) if yd is not None else y)

    def as_numpy_iterator(self):
        return iter(self)

    def __repr__(self):
        return f"<tnt.data.Dataset element_spec={self.element_spec}>"


# ---- Python datasets (tarantella/_pydataset.py) ----------------------------------------------

from tarantella._pydataset import _PyDataset, _numeric_slices, _py_slices, _cast_to, _to_arrays  # noqa: E402,F401
from tarantella._pydataset import sample_from_datasets, choose_from_datasets  # noqa: E402,F401


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None):
    """The lines of the text files, one element each (str, without the line end), file after file."""
    if compression_type not in (None, ""):
        raise NotImplementedError(f"TextLineDataset: compression_type {compression_type!r} is not supported")
    if isinstance(filenames, Dataset):
        names = [str(f) for f in filenames]
    else:
        names = [filenames] if isinstance(filenames, (str, bytes, os.PathLike)) else list(filenames)
        names = [os.fsdecode(f) for f in names]
    for f in names:
        P.check_file(f, "TextLineDataset")
    return _PyDataset(lambda epoch: P.text_lines(names), P.UNKNOWN, False)


def TFRecordDataset(filenames, *args, **kwargs):
    raise NotImplementedError("TFRecordDataset: TFRecord files are not supported; use TextLineDataset, NPY files "
                              "(Dataset.from_npy) or arrays")
