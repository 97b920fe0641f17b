"""keras.datasets.cifar10 from Keras's cache folder (cifar-10-batches-py, or its .tar.gz)."""
import os

import numpy as np

from tarantella.keras.datasets._cache import cached
from tarantella.keras.datasets._cifar import load_batch, channels


def load_data():
    path = cached("cifar-10-batches-py", origin="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", untar=True)
    x_train = np.empty((50000, 3, 32, 32), dtype="uint8")
    y_train = np.empty((50000,), dtype="uint8")
    for i in range(1, 6):
        x_train[(i - 1) * 10000:i * 10000], y_train[(i - 1) * 10000:i * 10000] = load_batch(
            os.path.join(path, f"data_batch_{i}"))
    x_test, y_test = load_batch(os.path.join(path, "test_batch"))
    y_train = y_train.reshape(len(y_train), 1)
    y_test = np.reshape(y_test, (len(y_test), 1)).astype(y_train.dtype)
    return (channels(x_train), y_train), (channels(x_test).astype(x_train.dtype), y_test)
