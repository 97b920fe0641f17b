"""Fashion-MNIST from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), or from
Keras's cache folder (~/.keras/datasets/fashion-mnist, its four .gz files)."""
import os

from tarantella.keras.datasets._idx import load
from tarantella.keras.utils._files import keras_cache_dir


def load_data(path=None):
    """((x_train, y_train), (x_test, y_test)): uint8 images (n, 28, 28) and labels (n,), as Keras's."""
    return load([path, os.environ.get("TNT_FASHION_MNIST_DIR"), "/usr/share/datasets/fashion-mnist",
                 keras_cache_dir(cache_subdir=os.path.join("datasets", "fashion-mnist"))],
                "dataset-fashion-mnist", "fashion_mnist")
