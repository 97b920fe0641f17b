"""IMDB and Reuters as Keras encodes them: reviews as word indices shifted by index_from, a
start_char first, words outside [skip_top, num_words) as oov_char (or dropped), sequences of
maxlen words or more left out."""
import json

import numpy as np

from tarantella.keras.datasets._cache import cached


def remove_long(maxlen, xs, labels):
    keep = [(x, y) for x, y in zip(xs, labels) if len(x) < maxlen]
    return [x for x, _ in keep], [y for _, y in keep]


def shift(xs, start_char, index_from):
    if start_char is not None:
        return [[start_char] + [w + index_from for w in x] for x in xs]
    if index_from:
        return [[w + index_from for w in x] for x in xs]
    return [list(x) for x in xs]


def filter_long(maxlen, xs, labels, what):
    if not maxlen:
        return xs, labels
    xs, labels = remove_long(maxlen, xs, labels)
    if not xs:
        raise ValueError(f"{what}: after filtering for sequences shorter than maxlen={maxlen}, no sequence was kept; "
                         f"increase maxlen")
    return xs, labels


def vocabulary(xs, num_words, skip_top, oov_char):
    if not num_words:
        num_words = max(max(x) for x in xs if x)
    if oov_char is not None:
        return [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    return [[w for w in x if skip_top <= w < num_words] for x in xs]


def as_object_array(seqs):
    out = np.empty(len(seqs), dtype=object)
    out[:] = [list(s) for s in seqs]
    return out


def word_index(fname):
    with open(cached(fname)) as f:
        return json.load(f)
