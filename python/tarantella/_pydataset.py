"""tnt.data's Python datasets: _PyDataset (elements from a generator function of the epoch, the
ops in Python from tarantella/_pydata.py) and its lowering to the C pipeline for fit."""
import itertools
import os

import numpy as np

from tarantella import _padded
from tarantella import _pydata as P
from tarantella import _random
from tarantella._dtypes import as_dtype
from tarantella._tensor import eager
from tarantella.data import AUTOTUNE, Count, Dataset, TensorSpec, _flatten_inputs, _spec_of

_C_OPS = ("shuffle", "batch", "map", "repeat", "take", "skip", "prefetch")


class _PyDataset(Dataset):
    """A dataset whose elements a Python generator function of the epoch yields. parent/op record
    how it was made from another one, so that the ops the C pipeline has can be lowered to it."""

    def __init__(self, gen, cardinality, batched, parent=None, op=None, spec=None, c_dataset=None):
        super().__init__(None)
        self._gen_fn = gen
        self._card = int(cardinality)
        self._batched = bool(batched)
        self._parent, self._op = parent, op
        self._spec = spec
        self._c = c_dataset  # the C dataset this one iterates, if it is just that
        self._lowered = None
        self._iterations = 0
        self._first_cache = None

    def _gen(self, epoch):
        return self._gen_fn(epoch)

    def _as_py(self):
        return self

    def _derive(self, gen, cardinality, batched=None, op=None, spec=None):
        return _PyDataset(gen, cardinality, self._batched if batched is None else batched, parent=self, op=op,
                          spec=spec)

    def _first(self):
        if self._first_cache is None:
            e = next(iter(self._gen(0)), P._END)
            if e is P._END:
                return None
            self._first_cache = (e,)
        return self._first_cache[0]

    # ---- inspection and iteration ----
    def cardinality(self):
        return Count(self._card)

    @property
    def element_spec(self):
        if self._spec is not None:
            return self._spec
        e = self._first()
        if e is None:
            raise ValueError("element_spec: the dataset is empty")
        return _spec_of(e, self._batched)

    @property
    def is_batched(self):
        return self._batched

    @property
    def has_labels(self):
        e = self._first()
        return isinstance(e, tuple) and len(e) == 2

    def __iter__(self):
        epoch = self._iterations  # a new iteration reshuffles, as in tf.data
        self._iterations += 1
        return (P.map_structure(eager, e) for e in self._gen(epoch))

    def __repr__(self):
        return f"<tnt.data.Dataset (Python) cardinality={self._card}>"

    # ---- ops the C pipeline also has ----
    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None, name=None):
        buffer_size = int(buffer_size)
        if buffer_size == -1:
            buffer_size = max(1, self._card)
        if buffer_size <= 0:
            raise ValueError(f"shuffle: buffer_size must be positive (or -1: the whole dataset), got {buffer_size}")
        seed = _random.global_seed() if seed is None else seed
        seed = int(seed or 0) or 42
        reshuffle = reshuffle_each_iteration is not False
        return self._derive(lambda epoch: P.shuffled(self._gen(epoch), buffer_size, seed, epoch if reshuffle else 0),
                            self._card, op=("shuffle", buffer_size, seed) if reshuffle else None)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        batch_size = int(batch_size)
        if batch_size <= 0:
            raise ValueError(f"batch: batch_size must be positive, got {batch_size}")
        card = self._card
        if card >= 0:
            card = card // batch_size if drop_remainder else -(-card // batch_size)
        return self._derive(lambda epoch: P.batched(self._gen(epoch), batch_size, drop_remainder), card, True,
                            op=("batch", batch_size, bool(drop_remainder)))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        batch_size = int(batch_size)
        if batch_size <= 0:
            raise ValueError(f"padded_batch: batch_size must be positive, got {batch_size}")
        card = self._card
        if card >= 0:
            card = card // batch_size if drop_remainder else -(-card // batch_size)
        padded = (padded_shapes, padding_values)
        return self._derive(lambda epoch: P.batched(self._gen(epoch), batch_size, drop_remainder, padded), card, True,
                            op=("padded_batch", batch_size, padded_shapes, padding_values, bool(drop_remainder)))

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        if not callable(map_func):
            raise TypeError("map: map_func is not callable")
        return self._derive(lambda epoch: (P.normalize(P.call(map_func, e)) for e in self._gen(epoch)), self._card,
                            op=("map", map_func))

    def repeat(self, count=None, name=None):
        count = -1 if count is None else int(count)

        def gen(epoch):
            r = 0
            while count < 0 or r < count:
                empty = True
                for e in self._gen(epoch * 100003 + r):
                    empty = False
                    yield e
                if empty:
                    return
                r += 1
        card = self._card
        if count < 0:
            card = P.INFINITE if card != 0 else 0
        elif card >= 0:
            card *= count
        return self._derive(gen, card, op=("repeat", count))

    def take(self, count, name=None):
        count = int(count)

        def gen(epoch):
            if count == 0:
                return
            for i, e in enumerate(self._gen(epoch)):
                yield e
                if count >= 0 and i + 1 >= count:
                    return
        card = self._card if count < 0 else (min(self._card, count) if self._card >= 0 else
                                              (count if self._card == P.INFINITE else P.UNKNOWN))
        return self._derive(gen, card, op=("take", count))

    def skip(self, count, name=None):
        count = int(count)

        def gen(epoch):
            if count < 0:  # tf.data: skip(-1) skips everything
                return
            for i, e in enumerate(self._gen(epoch)):
                if i >= count:
                    yield e
        card = self._card if self._card < 0 else (0 if count < 0 else max(0, self._card - count))
        return self._derive(gen, card, op=("skip", count))

    def prefetch(self, buffer_size, name=None):
        return self._derive(self._gen, self._card, op=("prefetch", int(buffer_size)))

    def cache(self, filename="", name=None):
        """The elements of the first complete iteration, kept in memory for the next ones."""
        store = {}

        def gen(epoch):
            if "elements" in store:
                yield from store["elements"]
                return
            seen = []
            for e in self._gen(epoch):
                seen.append(e)
                yield e
            store["elements"] = seen
        return self._derive(gen, self._card)

    # ---- ops only Python has ----
    def filter(self, predicate, name=None):
        if not callable(predicate):
            raise TypeError("filter: predicate is not callable")
        return self._derive(lambda epoch: (e for e in self._gen(epoch) if bool(np.asarray(P.call(predicate, e)))),
                            P.UNKNOWN if self._card >= 0 else self._card)

    def unbatch(self, name=None):
        if not self._batched and self._first() is not None and not all(
                np.ndim(v) for v in P.leaves(self._first())):
            raise ValueError("unbatch: the elements have no batch axis (scalars)")
        return self._derive(lambda epoch: (s for e in self._gen(epoch) for s in P.unstack(e)), P.UNKNOWN, False)

    def flat_map(self, map_func, name=None):
        return self._derive(lambda epoch: (s for e in self._gen(epoch) for s in _elements(P.call(map_func, e))),
                            P.UNKNOWN, False)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        cycle = os.cpu_count() or 1 if cycle_length in (None, AUTOTUNE) else int(cycle_length)
        block = 1 if block_length is None else int(block_length)
        if cycle <= 0 or block <= 0:
            raise ValueError(f"interleave: cycle_length and block_length must be positive, got {cycle}, {block}")
        return self._derive(lambda epoch: P.interleaved(self._gen(epoch), lambda *a: _elements(map_func(*a)),
                                                        cycle, block), P.UNKNOWN, False)

    def concatenate(self, dataset, name=None):
        other = dataset._as_py()

        def gen(epoch):
            yield from self._gen(epoch)
            yield from other._gen(epoch)
        a, b = self._card, other.cardinality()
        card = P.INFINITE if P.INFINITE in (a, b) else (P.UNKNOWN if P.UNKNOWN in (a, b) else a + b)
        return self._derive(gen, card)

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """Datasets of size elements (every stride-th), starting every shift elements; a tuple
        element gives a tuple of datasets, as in tf.data."""
        size, stride = int(size), int(stride)
        shift = size if shift is None else int(shift)
        if min(size, shift, stride) <= 0:
            raise ValueError(f"window: size, shift and stride must be positive, got {size}, {shift}, {stride}")

        def as_dataset(elements):
            return _PyDataset(lambda epoch: iter(elements), len(elements), False)

        def gen(epoch):
            elements = list(self._gen(epoch))
            for start in range(0, len(elements), shift):
                part = elements[start:start + (size - 1) * stride + 1:stride]
                if len(part) < size and (drop_remainder or not part):
                    continue
                if isinstance(part[0], tuple):
                    yield tuple(as_dataset([e[k] for e in part]) for k in range(len(part[0])))
                else:
                    yield as_dataset(part)
        return self._derive(gen, P.UNKNOWN, False)

    def shard(self, num_shards, index, name=None):
        """Every num_shards-th element from index on."""
        num_shards, index = int(num_shards), int(index)
        if not 0 <= index < num_shards:
            raise ValueError(f"shard: index must be in [0, {num_shards}), got {index}")
        card = self._card if self._card < 0 else max(0, -(-(self._card - index) // num_shards))
        return self._derive(lambda epoch: (e for i, e in enumerate(self._gen(epoch)) if i % num_shards == index), card)

    def take_while(self, predicate, name=None):
        def gen(epoch):
            for e in self._gen(epoch):
                if not bool(np.asarray(P.call(predicate, e))):
                    return
                yield e
        return self._derive(gen, P.UNKNOWN if self._card >= 0 else self._card)

    def unique(self, name=None):
        """Each value once, in order of first appearance (elements of one number or string)."""
        def gen(epoch):
            seen = set()
            for e in self._gen(epoch):
                key = e if isinstance(e, str) else np.asarray(e)
                if not isinstance(key, str) and key.ndim:
                    raise TypeError(f"unique: elements must be scalars, got shape {key.shape}")
                key = key if isinstance(key, str) else key.item()
                if key not in seen:
                    seen.add(key)
                    yield e
        return self._derive(gen, P.UNKNOWN if self._card >= 0 else self._card)

    def get_single_element(self, name=None):
        elements = list(itertools.islice(self._gen(0), 2))
        if len(elements) != 1:
            raise ValueError(f"get_single_element: the dataset has {'no' if not elements else 'more than one'} "
                             f"element")
        return P.map_structure(eager, elements[0])

    def enumerate(self, start=0, name=None):
        return self._derive(lambda epoch: ((np.int64(start + i), e) for i, e in enumerate(self._gen(epoch))),
                            self._card)

    # ---- to the C pipeline ----
    def _lower(self):
        """The C dataset that trains like this one."""
        if self._lowered is None:
            if self._c is not None:
                self._lowered = self._c
            elif self._op is not None and self._op[0] == "padded_batch" and (padded := _padded.lower(self)) is not None:
                self._lowered = padded
            elif self._op is not None and self._op[0] in _C_OPS and self._parent._lowerable_op(self._op):
                name, args = self._op[0], self._op[1:]
                self._lowered = getattr(self._parent._lower(), name)(*args)
            else:
                self._lowered = _materialize(self)
        return self._lowered

    def _lowerable_op(self, op):
        """A map can run in the C pipeline when the elements are x or (x, y) of single arrays
        (the C pipeline's calling convention)."""
        if op[0] == "take":  # the take bounds a source that may not end: it is materialized with it
            return self._card >= 0
        if op[0] != "map":
            return True
        if _after_padded_batch(self):
            return False  # the C map keeps one shape; padded batches have their own: mapped in Python
        e = self._first()
        if e is None:
            return False
        plain = lambda v: isinstance(v, np.ndarray) and v.dtype.kind in "biuf"  # noqa: E731
        pair = lambda v: isinstance(v, tuple) and len(v) == 2 and all(map(plain, v))  # noqa: E731
        out = P.normalize(P.call(op[1], e))  # the C map keeps the form: x to x, (x, y) to (x, y)
        return (plain(e) and plain(out)) or (pair(e) and pair(out))

    def _handle(self):
        return self._lower()._handle()

    def _meta(self):
        return self._lower()._meta()


def _after_padded_batch(ds):
    while isinstance(ds, _PyDataset):
        if ds._op is not None and ds._op[0] == "padded_batch":
            return True
        ds = ds._parent
    return False


def _elements(ds):
    if not isinstance(ds, Dataset):
        raise TypeError(f"flat_map/interleave: the function must return a Dataset, got {type(ds).__name__}")
    return iter(ds._as_py()._gen(0))


def _materialize(ds):
    """A C dataset of the Python dataset's elements (one iteration, kept): samples stacked, padded
    to a common shape where padded batches differ; a batched dataset is batched again in C with
    its batch size, so the batches are the same."""
    what = "a model's dataset"
    if ds.cardinality() == P.INFINITE:
        raise ValueError(f"{what}: an infinite Python dataset (a repeat() before a Python-only op) cannot be "
                         f"materialized; repeat after the Python-only ops, or take() a part")
    xs_list, ys_list, sizes = [], [], []
    for e in ds._gen(0):
        xs, ys = P.split_xy(e, what)
        if ds.is_batched:
            n = xs[0].shape[0] if xs[0].ndim else None
            if n is None:
                raise ValueError(f"{what}: a batched element without a batch axis")
            sizes.append(n)
            for i in range(n):
                xs_list.append([x[i] for x in xs])
                ys_list.append([y[i] for y in ys] if ys is not None else None)
        else:
            xs_list.append(xs)
            ys_list.append(ys)
    if not xs_list:
        raise ValueError(f"{what} is empty")
    if any(y is None for y in ys_list) and not all(y is None for y in ys_list):
        raise ValueError(f"{what}: some elements have labels and some do not")

    def columns(rows):
        return [P.pad_to_common([np.asarray(r[k], dtype=np.float32) for r in rows], what)
                for k in range(len(rows[0]))]
    x_columns = columns(xs_list)
    x = _flatten_inputs(x_columns, what)
    y = None if ys_list[0] is None else _flatten_inputs(columns(ys_list), what)
    out = Dataset(("arrays", x, y))
    out._x_parts = [c.shape[1:] for c in x_columns]
    if ds.is_batched:
        size = sizes[0]
        if any(s != size for s in sizes[:-1]) or sizes[-1] > size:
            raise ValueError(f"{what}: batches of different sizes {sorted(set(sizes))} before the last one; the "
                             f"library batches by a fixed size (batch after filtering instead)")
        return _padded.batch_materialized(out, size, xs_list, ys_list)  # padded batches keep their shapes
    return _padded.source_extents(out, xs_list, ys_list)


def _numeric_slices(tensors):
    """Whether from_tensor_slices can take tensors into the C pipeline: x, (x,), (x, y), with x and
    y arrays or lists of arrays of numbers."""
    def numeric(v):
        if isinstance(v, (list, tuple)):
            return False
        a = np.asarray(v)
        return a.dtype.kind in "biuf" and a.ndim >= 1
    if isinstance(tensors, tuple):
        if len(tensors) not in (1, 2):
            return False
        return all(all(numeric(p) for p in t) if isinstance(t, list) else numeric(t) for t in tensors)
    if isinstance(tensors, list):
        return all(numeric(p) for p in tensors)
    return numeric(tensors)


def _to_arrays(v):
    """Tuples and dicts are structures; a list is one tensor, as in TensorFlow."""
    if isinstance(v, dict):
        return {k: _to_arrays(p) for k, p in v.items()}
    if isinstance(v, tuple):
        return tuple(_to_arrays(p) for p in v)
    return v if isinstance(v, str) else np.asarray(v)


def _py_slices(tensors):
    structure = _to_arrays(tensors)
    counts = {v.shape[0] if v.ndim else None for v in P.leaves(structure)}
    if len(counts) != 1 or None in counts:
        raise ValueError(f"from_tensor_slices: every part needs the same number of samples (first axis), got "
                         f"{sorted(counts, key=str)}")
    n = counts.pop()

    def gen(epoch):
        for i in range(n):
            yield P.map_structure(lambda v: v[i], structure)
    return _PyDataset(gen, n, False)


def _cast_to(element, signature):
    def cast(v, spec):
        dtype = spec.dtype if isinstance(spec, TensorSpec) else as_dtype(spec)
        if dtype.name == "string":
            return v if isinstance(v, str) else (v.decode() if isinstance(v, bytes) else str(np.asarray(v)))
        if isinstance(spec, TensorSpec):
            a = np.asarray(v, dtype=dtype.dtype)
            if len(spec) and (a.ndim != len(spec) or any(d is not None and d != s for d, s in zip(spec, a.shape))):
                raise ValueError(f"from_generator: an element of shape {a.shape} does not match {tuple(spec)}")
            return a
        return np.asarray(v, dtype=as_dtype(spec).dtype)
    return _zip_spec(cast, element, signature)


def _zip_spec(fn, element, spec):
    if isinstance(spec, dict):
        return {k: _zip_spec(fn, element[k], spec[k]) for k in spec}
    if isinstance(spec, (tuple, list)) and not isinstance(spec, TensorSpec):
        if not isinstance(element, (tuple, list)) or len(element) != len(spec):
            raise ValueError(f"from_generator: an element does not have the structure of {spec}")
        return tuple(_zip_spec(fn, e, s) for e, s in zip(element, spec))
    return fn(element, spec)


def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False, rerandomize_each_iteration=None):
    """Each element from one of the datasets, picked at random with the weights (equal by default);
    an exhausted dataset drops out (or ends it all with stop_on_empty_dataset)."""
    pys = [d._as_py() for d in datasets]
    if not pys:
        raise ValueError("sample_from_datasets: no datasets given")
    w = np.full(len(pys), 1.0 / len(pys)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (len(pys),) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"sample_from_datasets: expected {len(pys)} non-negative weights, got {weights!r}")
    seed = _random.global_seed() if seed is None else seed
    seed = int(seed or 0) or 42

    def gen(epoch):
        rng = np.random.default_rng([seed, epoch if rerandomize_each_iteration is not False else 0])
        its, live = [iter(d._gen(epoch)) for d in pys], w.copy()
        while live.sum() > 0:
            k = int(rng.choice(len(its), p=live / live.sum()))
            e = next(its[k], P._END)
            if e is P._END:
                if stop_on_empty_dataset:
                    return
                live[k] = 0
                continue
            yield e
    return _PyDataset(gen, P.UNKNOWN, all(d.is_batched for d in pys))


def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
    """Element i from datasets[choice i] (the next one of that dataset)."""
    pys = [d._as_py() for d in datasets]
    choices = choice_dataset._as_py()

    def gen(epoch):
        its = [iter(d._gen(epoch)) for d in pys]
        for c in choices._gen(epoch):
            c = int(np.asarray(c))
            if not 0 <= c < len(its):
                raise ValueError(f"choose_from_datasets: choice {c} is not one of the {len(its)} datasets")
            e = next(its[c], P._END)
            if e is P._END:
                if stop_on_empty_dataset:
                    return
                continue
            yield e
    return _PyDataset(gen, P.UNKNOWN, all(d.is_batched for d in pys))
