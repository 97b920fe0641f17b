"""keras.datasets.california_housing from Keras's cache folder (california_housing.npz)."""
import numpy as np

from tarantella.keras.datasets._cache import cached, shuffled, split


def load_data(version="large", path="california_housing.npz", test_split=0.2, seed=113):
    if version not in ("large", "small"):
        raise ValueError(f'version must be "large" or "small", got {version!r}')
    with np.load(cached(path), allow_pickle=True) as f:
        x, y = f["x"], f["y"]
    if version == "small":  # Keras: the first 600 samples
        x, y = x[:600], y[:600]
    return split(*shuffled(seed, x, y), test_split)
