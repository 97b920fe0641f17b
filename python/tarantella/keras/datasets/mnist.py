"""MNIST: Keras's mnist.npz in Keras's cache folder, or a folder of its IDX files (path=...,
$TNT_MNIST_DIR, or /usr/share/datasets/mnist)."""
import os

import numpy as np

from tarantella.keras.datasets._idx import load
from tarantella.keras.utils._files import keras_cache_dir


def load_data(path="mnist.npz"):
    """((x_train, y_train), (x_test, y_test)): uint8 images (n, 28, 28) and labels (n,), as Keras's."""
    if path is not None and os.path.isfile(path):
        if str(path).endswith(".npz"):
            return _npz(path)
        path = os.path.dirname(path)
    npz = os.path.join(keras_cache_dir(), os.path.basename(path or "mnist.npz"))
    if os.path.isfile(npz) and npz.endswith(".npz"):
        return _npz(npz)
    folder = path if path is not None and os.path.isdir(path) else None
    try:
        return load([folder, os.environ.get("TNT_MNIST_DIR"), "/usr/share/datasets/mnist"], "dataset-mnist", "mnist")
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e}; or put Keras's mnist.npz (https://storage.googleapis.com/tensorflow/"
                                f"tf-keras-datasets/mnist.npz) at {npz}") from None


def _npz(path):
    with np.load(path, allow_pickle=True) as f:
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
