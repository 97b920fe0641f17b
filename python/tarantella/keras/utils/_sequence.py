"""keras.utils.Sequence and PyDataset (Keras 3), and how fit, evaluate and predict take them: as a
tnt.data.Dataset of sample indices whose map asks the Sequence for the batch holding the sample,
batched again with the Sequence's batch size. The pipeline stays the C one, so each rank
materializes only its share of every batch, and a global batch is the Sequence's batch.
on_epoch_end is called when a new pass over the batches begins, as Keras calls it between epochs."""
import random
import types

import numpy as np

from tarantella import _random


class PyDataset:
    """Keras 3's base class for Python data: __getitem__(index) -> a batch (x, y) or x, __len__
    (or num_batches), on_epoch_begin/on_epoch_end."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        self._workers = workers
        self._use_multiprocessing = use_multiprocessing
        self._max_queue_size = max_queue_size

    @property
    def workers(self):
        return getattr(self, "_workers", 1)

    @property
    def use_multiprocessing(self):
        return getattr(self, "_use_multiprocessing", False)

    @property
    def max_queue_size(self):
        return getattr(self, "_max_queue_size", 10)

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: define __getitem__(index), which returns a batch")

    @property
    def num_batches(self):
        if hasattr(type(self), "__len__") and type(self).__len__ is not PyDataset.__len__:
            return len(self)
        return None

    def __len__(self):
        n = self.num_batches
        if n is None:
            raise NotImplementedError(f"{type(self).__name__}: define __len__ (or num_batches)")
        return n

    def on_epoch_begin(self):
        pass

    def on_epoch_end(self):
        pass

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


class Sequence(PyDataset):
    """Keras 2's keras.utils.Sequence: __getitem__ and __len__ to define, on_epoch_end optional."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def _is_sequence(x):
    return isinstance(x, PyDataset) or (
        not isinstance(x, (np.ndarray, list, tuple, dict)) and hasattr(x, "__getitem__") and hasattr(x, "__len__")
        and hasattr(x, "on_epoch_end"))


def _split(batch, what):
    """(xs, ys) of a batch: x, (x,), (x, y); x and y arrays or lists of them."""
    if isinstance(batch, tuple) and len(batch) == 1:
        batch = batch[0]
    if isinstance(batch, tuple):
        if len(batch) != 2:
            raise NotImplementedError(f"{what}: batches of {len(batch)} parts (x, y, sample_weight) are not "
                                      f"supported; return (x, y)")
        x, y = batch
    else:
        x, y = batch, None
    if isinstance(x, dict) or isinstance(y, dict):
        raise NotImplementedError(f"{what}: dict batches are not supported; return lists in the model's order")
    xs = [np.asarray(v, dtype=np.float32) for v in (x if isinstance(x, (list, tuple)) else [x])]
    ys = None if y is None else [np.asarray(v, dtype=np.float32) for v in (y if isinstance(y, (list, tuple)) else [y])]
    return xs, ys


def _class_weighted(class_weight, what):
    """_split, with Keras's class weights of each batch appended to its labels (the library reads a
    sample's weight after its labels): the class is an integer label, or the argmax of a one-hot row."""
    if class_weight is None:
        return _split

    def split(batch, what_=what):
        from tarantella.keras.model_api import sample_weights
        xs, ys = _split(batch, what_)
        if ys is None:
            raise ValueError(f"{what_}: class_weight needs labels, and the batches have none (x only)")
        if len(ys) != 1:
            raise ValueError(f"{what_}: class_weight is only supported for models with a single output (as Keras)")
        return xs, ys + [sample_weights(ys[0], None, class_weight, what_)]
    return split


def _flat(parts, i):
    """Sample i of the parts, one array (several parts: the values one after the other, as the
    library feeds several inputs)."""
    if len(parts) == 1:
        return parts[0][i]
    return np.concatenate([p[i].reshape(-1) for p in parts])


class _TorchLoader:
    """A PyTorch DataLoader as a Sequence (Keras 3 fits on one): its batches of one pass, taken as
    NumPy when the pass starts, again (reshuffled by the loader) at each epoch's end."""

    def __init__(self, loader):
        self.loader, self._batches = loader, None

    def __len__(self):
        return len(self.loader)

    def __getitem__(self, i):
        if self._batches is None:
            self._batches = [self._numpy(b) for b in self.loader]
        return self._batches[i]

    def on_epoch_end(self):
        self._batches = None

    def _numpy(self, b):
        if isinstance(b, (list, tuple)):
            return tuple(self._numpy(v) for v in b)
        if isinstance(b, dict):
            return {k: self._numpy(v) for k, v in b.items()}
        return b.detach().cpu().numpy() if hasattr(b, "detach") else np.asarray(b)


def _is_torch_loader(x):
    return type(x).__module__.startswith("torch.utils.data") and hasattr(x, "__iter__") and hasattr(x, "__len__")


def as_dataset(x, what="fit", shuffle=False, class_weight=None):
    """x itself unless it is a Sequence/PyDataset (or a generator): then a tnt.data.Dataset that
    yields its batches. shuffle (fit's): the batches in a new order every epoch, as Keras 2
    shuffles a Sequence's batch indices; the order comes from the global seed and the epoch, the
    same on every rank, and a smaller last batch stays last (the pipeline batches by one size).
    class_weight (fit's): each batch's labels carry the weight of each sample's class after them,
    as Keras maps a class_weight onto the batches of any data it is given."""
    split = _class_weighted(class_weight, what)
    if _is_torch_loader(x):  # the loader orders its batches itself
        x, shuffle = _TorchLoader(x), False
    if isinstance(x, types.GeneratorType) or (hasattr(x, "__next__") and not _is_sequence(x)):
        return _from_generator(x, what, split)
    if not _is_sequence(x):
        if class_weight is not None:
            raise NotImplementedError(f"{what}: class_weight with a {type(x).__name__} is not supported (arrays, a "
                                      f"keras.utils.Sequence or a generator)")
        return x
    from tarantella import data as tnt_data
    n_batches = len(x)
    if n_batches <= 0:
        raise ValueError(f"{what}: the {type(x).__name__} has no batches (len {n_batches})")
    xs0, ys0 = split(x[0], what)
    size = xs0[0].shape[0]
    last = size if n_batches == 1 else split(x[n_batches - 1], what)[0][0].shape[0]
    n = size * (n_batches - 1) + last
    movable = n_batches if last == size else n_batches - 1

    def order_of(epoch):
        order = list(range(n_batches))
        if shuffle:
            head = order[:movable]
            random.Random((_random.global_seed() or 0) * 1000003 + epoch).shuffle(head)
            order = head + order[movable:]
        return order
    state = {"index": None, "batch": (xs0, ys0), "last_sample": -1, "epoch": 0, "order": order_of(0)}

    def batch_of(sample):
        s = int(sample)
        if s <= state["last_sample"]:  # a new pass over the batches: Keras's end of an epoch
            x.on_epoch_end()
            state["epoch"] += 1
            state["order"] = order_of(state["epoch"])
        state["last_sample"] = s
        slot = s // size
        b = state["order"][slot]
        if state["index"] != b:
            state["batch"] = split(x[b], what)
            state["index"] = b
            got = state["batch"][0][0].shape[0]
            if got != (size if b < n_batches - 1 else last):
                raise ValueError(f"{what}: batch {b} of the {type(x).__name__} has {got} samples, batch 0 has {size}; "
                                 f"every batch but the last must have the same size")
        return state["batch"], s - slot * size

    index = np.arange(n, dtype=np.float32)
    if ys0 is None:
        def sample_x(i):
            (bx, _), k = batch_of(i)
            return _flat(bx, k)
        ds = tnt_data.Dataset.from_tensor_slices(index).map(sample_x)
    else:
        def sample_xy(i, _):
            (bx, by), k = batch_of(i)
            return _flat(bx, k), _flat(by, k)
        ds = tnt_data.Dataset.from_tensor_slices((index, index)).map(sample_xy)
    state["index"] = None  # the trace of the map asked for one batch; the first epoch starts afresh
    state["last_sample"] = -1
    return ds.batch(size)


def _from_generator(gen, what, split=None):
    """An endless dataset of the generator's batches, in the order it yields them (Keras's fit on
    a generator, with steps_per_epoch): sample positions 0..B-1 of one batch, repeated; a rank
    asks for the next batch whenever the positions start over, so every rank takes every batch
    from its own generator, in the same order, and materializes its share of it."""
    from tarantella import data as tnt_data
    split = split or _split
    try:
        first = next(gen)
    except StopIteration:
        raise ValueError(f"{what}: the generator yields no batch") from None
    xs0, ys0 = split(first, what)
    size = xs0[0].shape[0]
    state = {"batch": (xs0, ys0), "last": None, "fresh": True}

    def batch_at(k):
        k = int(k)
        if state["last"] is not None and k <= state["last"]:  # positions start over: the next batch
            try:
                state["batch"] = split(next(gen), what)
            except StopIteration:
                raise ValueError(f"{what}: the generator ran out of batches; give steps_per_epoch (and "
                                 f"validation_steps) that it can serve, or make it endless") from None
            got = state["batch"][0][0].shape[0]
            if got != size:
                raise ValueError(f"{what}: the generator gave a batch of {got} samples after one of {size}; the "
                                 f"library needs batches of one size")
        state["last"] = k
        return state["batch"], k

    positions = np.arange(size, dtype=np.float32)
    if ys0 is None:
        def sample_x(k):
            (bx, _), i = batch_at(k)
            return _flat(bx, i)
        ds = tnt_data.Dataset.from_tensor_slices(positions).map(sample_x)
    else:
        def sample_xy(k, _):
            (bx, by), i = batch_at(k)
            return _flat(bx, i), _flat(by, i)
        ds = tnt_data.Dataset.from_tensor_slices((positions, positions)).map(sample_xy)
    state["last"] = None  # the trace of the map read position 0 of the first batch; it is served again
    return ds.repeat().batch(size)
