"""keras.datasets.reuters from Keras's cache folder (reuters.npz, reuters_word_index.json)."""
import numpy as np

from tarantella.keras.datasets._cache import cached
from tarantella.keras.datasets._words import shift, filter_long, vocabulary, as_object_array, word_index


def load_data(path="reuters.npz", num_words=None, skip_top=0, maxlen=None, test_split=0.2, seed=113, start_char=1,
              oov_char=2, index_from=3, **kwargs):
    with np.load(cached(path), allow_pickle=True) as f:
        xs, labels = f["x"], f["y"]
    indices = np.arange(len(xs))
    np.random.RandomState(seed).shuffle(indices)
    xs, labels = shift(xs[indices], start_char, index_from), list(labels[indices])
    xs, labels = filter_long(maxlen, xs, labels, "reuters")
    xs = vocabulary(xs, num_words, skip_top, oov_char)
    cut = int(len(xs) * (1 - test_split))
    return ((as_object_array(xs[:cut]), np.array(labels[:cut])), (as_object_array(xs[cut:]), np.array(labels[cut:])))


def get_word_index(path="reuters_word_index.json"):
    return word_index(path)
