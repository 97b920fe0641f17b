"""tnt.keras.datasets: every Keras data set's load_data(). Fashion-MNIST from Debian's
dataset-fashion-mnist; the others (and Fashion-MNIST too) from Keras's cache folder
~/.keras/datasets when a user has put Keras's file there; no downloads."""
from tarantella.keras.datasets import fashion_mnist, mnist, cifar10, cifar100, imdb, reuters  # noqa: F401
from tarantella.keras.datasets import boston_housing, california_housing  # noqa: F401
