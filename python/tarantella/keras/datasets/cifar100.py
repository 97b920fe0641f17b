"""keras.datasets.cifar100 from Keras's cache folder (cifar-100-python, or its .tar.gz)."""
import os

import numpy as np

from tarantella.keras.datasets._cache import cached
from tarantella.keras.datasets._cifar import load_batch, channels


def load_data(label_mode="fine"):
    if label_mode not in ("fine", "coarse"):
        raise ValueError(f'label_mode must be "fine" or "coarse", got {label_mode!r}')
    path = cached("cifar-100-python", origin="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", untar=True)
    x_train, y_train = load_batch(os.path.join(path, "train"), label_key=label_mode + "_labels")
    x_test, y_test = load_batch(os.path.join(path, "test"), label_key=label_mode + "_labels")
    y_train = np.reshape(y_train, (len(y_train), 1))
    y_test = np.reshape(y_test, (len(y_test), 1))
    return (channels(x_train), y_train), (channels(x_test), y_test)
