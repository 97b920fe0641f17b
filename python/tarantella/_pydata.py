"""The tf.data ops that libtarantella's pipeline does not have (zip, filter, padded_batch, unbatch,
flat_map, interleave, concatenate, from_generator, text files, ...), run in Python over elements
that are nests (tuples, lists, dicts) of NumPy arrays, numbers and strings.

A Python dataset is a function of the epoch that yields elements. fit, evaluate and predict need
the C pipeline: a Python dataset is lowered to one. The C ops that follow the last Python-only op
(shuffle, batch, map, repeat, take, skip, prefetch) stay C ops, so a global batch is still split
exactly into the ranks' shares; what comes before is materialized once, on first use (as cache()
would keep it), into arrays: its elements must be x or (x, y) of numbers then.
"""
import os

import numpy as np

UNKNOWN = -2  # tf.data.UNKNOWN_CARDINALITY
INFINITE = -1  # tf.data.INFINITE_CARDINALITY


# ---- nests --------------------------------------------------------------------------------------

def map_structure(fn, *nests):
    first = nests[0]
    if isinstance(first, dict):
        return {k: map_structure(fn, *(n[k] for n in nests)) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(n) != len(first) for n in nests):
            raise ValueError(f"elements of different structures: {[type(n).__name__ for n in nests]}")
        return type(first)(map_structure(fn, *parts) for parts in zip(*nests))
    return fn(*nests)


def leaves(nest):
    if isinstance(nest, dict):
        return [v for k in nest for v in leaves(nest[k])]
    if isinstance(nest, (tuple, list)):
        return [v for p in nest for v in leaves(p)]
    return [nest]


def as_leaf(v):
    """An element's leaf as an array (text as a 0-d str array) or a Python str."""
    if isinstance(v, (str, bytes)):
        return v
    a = np.asarray(v)
    return a


def call(fn, element):
    """tf.data's calling convention: a tuple element is spread over the arguments."""
    return fn(*element) if isinstance(element, tuple) else fn(element)


def normalize(element):
    """The element a map or generator returns, with lists kept as tuples of leaves (as TensorFlow
    turns a returned list into a tuple) and every leaf an array or a str."""
    if isinstance(element, list):
        element = tuple(element)
    if isinstance(element, dict):
        return {k: normalize(v) for k, v in element.items()}
    if isinstance(element, tuple):
        return tuple(normalize(v) for v in element)
    return as_leaf(element)


def stack(elements):
    return map_structure(lambda *vs: np.stack([np.asarray(v) for v in vs]), *elements)


def pad_stack(elements, padded_shapes, padding_values):
    """Elements stacked, each leaf padded to padded_shapes (None dims: the largest of the batch)."""
    def pad(shape, value, *vs):
        vs = [np.asarray(v) for v in vs]
        rank = vs[0].ndim
        if isinstance(shape, (int, np.integer)):  # padded_shapes=5 for vectors
            shape = [int(shape)]
        want = [None] * rank if shape is None else list(shape)
        if len(want) != rank:
            raise ValueError(f"padded_batch: padded shape {shape} has {len(want)} dimensions, the elements {rank}")
        dims = []
        for k in range(rank):
            big = max(v.shape[k] for v in vs)
            if want[k] is None or want[k] == -1:
                dims.append(big)
            elif big > want[k]:
                raise ValueError(f"padded_batch: an element has {big} values in dimension {k}, more than the "
                                 f"padded shape's {want[k]}")
            else:
                dims.append(int(want[k]))
        kind = vs[0].dtype
        fill = value if value is not None else ("" if kind.kind in "US" or kind == object else 0)
        out = np.full([len(vs)] + dims, fill, dtype=kind if kind.kind not in "US" else object)
        for i, v in enumerate(vs):
            out[(i,) + tuple(slice(0, s) for s in v.shape)] = v
        return out

    first = elements[0]
    shapes = padded_shapes if padded_shapes is not None else map_structure(lambda v: None, first)
    values = padding_values if padding_values is not None else map_structure(lambda v: None, first)
    return _zip_structure(pad, first, shapes, values, elements)


def _zip_structure(fn, first, shapes, values, elements):
    if isinstance(first, dict):
        return {k: _zip_structure(fn, first[k], _part(shapes, k), _part(values, k), [e[k] for e in elements])
                for k in first}
    if isinstance(first, (tuple, list)):
        return type(first)(_zip_structure(fn, first[i], _part(shapes, i), _part(values, i),
                                          [e[i] for e in elements]) for i in range(len(first)))
    return fn(shapes, values, *elements)


def _part(nest, key):
    """The padded shape (or value) of a part: padded_shapes follows the element's structure, with a
    shape at each of its leaves; one padding value serves every part (tf.data broadcasts it)."""
    if nest is None or not isinstance(nest, (tuple, list, dict)):
        return nest
    return nest[key]


def unstack(batch):
    lead = [np.asarray(v).shape[0] if np.ndim(v) else None for v in leaves(batch)]
    if any(n is None for n in lead) or len(set(lead)) != 1:
        raise ValueError(f"unbatch: every part of an element needs the same batch axis, got {lead}")
    return [map_structure(lambda v, i=i: np.asarray(v)[i], batch) for i in range(lead[0])]


# ---- the ops, over element iterators ------------------------------------------------------------

def shuffled(elements, buffer_size, seed, epoch):
    """tf.data's shuffle buffer: fill it, then give a random one and put the next in its place."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    buf = []
    for e in elements:
        if len(buf) < buffer_size:
            buf.append(e)
            continue
        i = int(rng.integers(len(buf)))
        yield buf[i]
        buf[i] = e
    while buf:
        i = int(rng.integers(len(buf)))
        buf[i], buf[-1] = buf[-1], buf[i]
        yield buf.pop()


def batched(elements, size, drop_remainder, padded=None):
    group = []
    for e in elements:
        group.append(e)
        if len(group) == size:
            yield stack(group) if padded is None else pad_stack(group, *padded)
            group = []
    if group and not drop_remainder:
        yield stack(group) if padded is None else pad_stack(group, *padded)


def interleaved(elements, fn, cycle_length, block_length):
    """TensorFlow's interleave: cycle_length slots visited in turn, block_length elements from each;
    an empty slot takes the next input element's dataset when its turn comes, an exhausted one is
    emptied and the turn moves on (InterleaveDatasetOp's loop)."""
    source = iter(elements)
    slots = [None] * cycle_length
    end_of_input, open_count, index, block = False, 0, 0, 0
    while not end_of_input or open_count > 0:
        if slots[index] is not None:
            try:
                value = next(slots[index])
            except StopIteration:
                slots[index] = None
                open_count -= 1
                index, block = (index + 1) % cycle_length, 0
                continue
            block += 1
            if block == block_length:
                index, block = (index + 1) % cycle_length, 0
            yield value
        elif not end_of_input:
            e = next(source, _END)
            if e is _END:
                end_of_input = True
            else:
                slots[index] = iter(call(fn, e))
                open_count += 1
        else:
            index, block = (index + 1) % cycle_length, 0


_END = object()


def text_lines(filenames):
    for name in filenames:
        name = name.decode() if isinstance(name, bytes) else str(name)
        with open(name, "r", encoding="utf-8", newline="") as f:
            for line in f:
                yield line.rstrip("\r\n")


def check_file(path, what):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what}: no such file {path!r}")
    return path


# ---- to the C pipeline ---------------------------------------------------------------------------

def _numeric(v, what):
    a = np.asarray(v)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: the model takes numbers, got {a.dtype} values (map text to numbers first, "
                        f"e.g. with a Tokenizer)")
    return a


def split_xy(element, what):
    """(xs, ys) of an element given to a model: x, (x,), (x, y), with x and y an array or a tuple
    or list of arrays (several inputs or outputs)."""
    if isinstance(element, dict):
        raise NotImplementedError(f"{what}: dict elements are not supported; give (x, y) with the inputs in a "
                                  f"list in the model's order")
    if isinstance(element, tuple):
        if len(element) == 1:
            element = element[0]
        elif len(element) == 2:
            x, y = element
            return _parts(x, what), _parts(y, what)
        else:
            raise NotImplementedError(f"{what}: elements of {len(element)} parts (x, y, sample_weight) are not "
                                      f"supported; give (x, y)")
    return _parts(element, what), None


def _parts(v, what):
    if isinstance(v, dict):
        raise NotImplementedError(f"{what}: dicts of inputs are not supported; pass a list in the model's order")
    vs = list(v) if isinstance(v, (tuple, list)) else [v]
    return [_numeric(p, what) for p in vs]


def pad_to_common(arrays, what):
    """Arrays of one leaf across samples, padded with zeros to the largest shape (padded batches
    of different lengths become one array)."""
    shapes = {a.shape for a in arrays}
    if len(shapes) == 1:
        return np.stack(arrays)
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise ValueError(f"{what}: elements of different ranks {sorted(shapes)}")
    big = tuple(max(s[k] for s in shapes) for k in range(ranks.pop()))
    out = np.zeros((len(arrays),) + big, dtype=np.float32)
    for i, a in enumerate(arrays):
        out[(i,) + tuple(slice(0, s) for s in a.shape)] = a
    return out
