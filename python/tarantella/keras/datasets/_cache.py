"""Keras's data set files from Keras's cache folder (~/.keras/datasets, or $KERAS_HOME/datasets),
where keras.datasets would have downloaded them; Tarantella does not download: a missing file
raises FileNotFoundError naming it, its address and where it goes."""
import numpy as np

from tarantella.keras.utils._files import get_file

ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def cached(fname, origin=None, untar=False, cache_subdir="datasets"):
    return get_file(fname, origin=origin or ORIGIN + fname, untar=untar, cache_subdir=cache_subdir)


def shuffled(seed, *arrays):
    """The arrays in the order of RandomState(seed).shuffle(arange(n)), as Keras's loaders do."""
    indices = np.arange(len(arrays[0]))
    np.random.RandomState(seed).shuffle(indices)
    return [a[indices] for a in arrays]


def split(x, y, test_split):
    if not 0 <= test_split < 1:
        raise ValueError(f"test_split must be in [0, 1), got {test_split}")
    cut = int(len(x) * (1 - test_split))
    return (np.array(x[:cut]), np.array(y[:cut])), (np.array(x[cut:]), np.array(y[cut:]))
