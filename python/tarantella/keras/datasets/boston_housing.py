"""keras.datasets.boston_housing from Keras's cache folder (boston_housing.npz)."""
import numpy as np

from tarantella.keras.datasets._cache import cached, shuffled, split


def load_data(path="boston_housing.npz", test_split=0.2, seed=113):
    if not 0 <= test_split < 1:
        raise ValueError(f"test_split must be in [0, 1), got {test_split}")
    with np.load(cached(path), allow_pickle=True) as f:
        x, y = f["x"], f["y"]
    return split(*shuffled(seed, x, y), test_split)
