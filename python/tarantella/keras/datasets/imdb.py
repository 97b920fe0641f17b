"""keras.datasets.imdb from Keras's cache folder (imdb.npz, imdb_word_index.json)."""
import numpy as np

from tarantella.keras.datasets._cache import cached
from tarantella.keras.datasets._words import shift, filter_long, vocabulary, as_object_array, word_index


def load_data(path="imdb.npz", num_words=None, skip_top=0, maxlen=None, seed=113, start_char=1, oov_char=2,
              index_from=3, **kwargs):
    with np.load(cached(path, ), allow_pickle=True) as f:
        x_train, labels_train, x_test, labels_test = f["x_train"], f["y_train"], f["x_test"], f["y_test"]
    rng = np.random.RandomState(seed)  # one generator for both parts, as Keras
    for_train = np.arange(len(x_train))
    rng.shuffle(for_train)
    for_test = np.arange(len(x_test))
    rng.shuffle(for_test)
    x_train, labels_train = shift(x_train[for_train], start_char, index_from), list(labels_train[for_train])
    x_test, labels_test = shift(x_test[for_test], start_char, index_from), list(labels_test[for_test])
    x_train, labels_train = filter_long(maxlen, x_train, labels_train, "imdb")
    x_test, labels_test = filter_long(maxlen, x_test, labels_test, "imdb")
    xs = vocabulary(x_train + x_test, num_words, skip_top, oov_char)
    labels = np.concatenate([np.asarray(labels_train), np.asarray(labels_test)])
    n = len(x_train)
    return (as_object_array(xs[:n]), labels[:n]), (as_object_array(xs[n:]), labels[n:])


def get_word_index(path="imdb_word_index.json"):
    return word_index(path)
