"""MNIST from a folder of its IDX files (path=..., $TNT_MNIST_DIR, or /usr/share/datasets/mnist)."""
import os

from tarantella.keras.datasets._idx import load


def load_data(path=None):
    """((x_train, y_train), (x_test, y_test)): uint8 images (n, 28, 28) and labels (n,), as Keras's."""
    if path is not None and os.path.isfile(path):
        path = os.path.dirname(path)
    return load([path, os.environ.get("TNT_MNIST_DIR"), "/usr/share/datasets/mnist"], "dataset-mnist", "mnist")
