"""keras.layers.TextVectorization (Keras 2.11) and the tf.strings functions a standardize callable
uses, for the data side of a program: the layer turns strings into token indices (or multi-hot,
count or TF-IDF vectors) in NumPy, in a dataset's map or on arrays. The library's models take
numbers, so the layer is not a layer of a model (called on a model's tensor it says so).

Keras's rules: standardize ("lower_and_strip_punctuation", "lower", "strip_punctuation", None or a
function of a batch of strings), split ("whitespace", "character", None or a function), ngrams
(N: 1- to N-grams; a tuple: those sizes), a vocabulary learnt by adapt sorted by count then by the
token (both descending) and cut to max_tokens, index 0 the mask ("") and 1 the OOV "[UNK]" in "int"
mode, OOV at 0 in the other modes."""
import math
import re

import numpy as np

_STRIP = r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'  # Keras's DEFAULT_STRIP_REGEX
_MODES = ("int", "multi_hot", "count", "tf_idf")
_OOV, _MASK = "[UNK]", ""


# ---- tf.strings on NumPy arrays of text ----------------------------------------------------------

def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _elementwise(fn, x):
    """fn on every string of x (a str, bytes, list or array), keeping x's shape."""
    if isinstance(x, (str, bytes)):
        return fn(_text(x))
    a = np.asarray(x, dtype=object)
    out = np.empty(a.shape, dtype=object)
    for i, v in np.ndenumerate(a):
        out[i] = fn(_text(v))
    return out.astype(str) if out.size else np.asarray(out, dtype=str)


def lower(input, encoding="", name=None):  # noqa: A002  (TensorFlow's names)
    return _elementwise(str.lower, input)


def upper(input, encoding="", name=None):  # noqa: A002
    return _elementwise(str.upper, input)


def strip(input, name=None):  # noqa: A002
    return _elementwise(str.strip, input)


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    rx = re.compile(pattern)
    return _elementwise(lambda s: rx.sub(rewrite, s, count=0 if replace_global else 1), input)


def length(input, unit="BYTE", name=None):  # noqa: A002
    n = (lambda s: len(s.encode("utf-8"))) if unit == "BYTE" else len
    if isinstance(input, (str, bytes)):
        return n(_text(input))
    a = np.asarray(input, dtype=object)
    return np.vectorize(lambda v: n(_text(v)), otypes=[np.int32])(a) if a.size else np.zeros(a.shape, np.int32)


def split(input, sep=None, maxsplit=-1, name=None):  # noqa: A002
    """A list of token lists (TensorFlow: a RaggedTensor); a single string gives its tokens."""
    def one(s):
        return s.split(sep, maxsplit) if sep is not None else s.split(None, maxsplit)
    if isinstance(input, (str, bytes)):
        return one(_text(input))
    return [split(v, sep, maxsplit) if np.ndim(v) else one(_text(v)) for v in np.asarray(input, dtype=object)]


def join(inputs, separator="", name=None):
    """Elementwise concatenation of a list of string arrays."""
    parts = [np.asarray(p, dtype=object) for p in inputs]
    shape = np.broadcast_shapes(*(p.shape for p in parts))
    b = [np.broadcast_to(p, shape) for p in parts]
    out = np.empty(shape, dtype=object)
    for i in np.ndindex(shape):
        out[i] = separator.join(_text(p[i]) for p in b)
    return out.astype(str)


def reduce_join(inputs, axis=None, keepdims=False, separator="", name=None):
    a = np.asarray(inputs, dtype=object)
    if axis is None:
        return separator.join(_text(v) for v in a.reshape(-1))
    out = np.apply_along_axis(lambda r: separator.join(_text(v) for v in r), int(axis), a)
    return np.expand_dims(out, int(axis)) if keepdims else out


# ---- the layer --------------------------------------------------------------------------------

class TextVectorization:
    """Keras's TextVectorization (see the module's docstring)."""

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation", split="whitespace", ngrams=None,
                 output_mode="int", output_sequence_length=None, pad_to_max_tokens=False, vocabulary=None,
                 idf_weights=None, sparse=False, ragged=False, encoding="utf-8", name=None, **kwargs):
        kwargs.pop("dtype", None)
        kwargs.pop("trainable", None)
        if kwargs:
            raise TypeError(f"TextVectorization: unexpected arguments {sorted(kwargs)}")
        if output_mode not in _MODES:
            raise ValueError(f"TextVectorization: output_mode {output_mode!r} (expected one of {_MODES})")
        if not (standardize is None or callable(standardize) or
                standardize in ("lower_and_strip_punctuation", "lower", "strip_punctuation")):
            raise ValueError(f"TextVectorization: standardize {standardize!r} (expected None, a function, "
                             f"'lower_and_strip_punctuation', 'lower' or 'strip_punctuation')")
        if not (split is None or callable(split) or split in ("whitespace", "character")):
            raise ValueError(f"TextVectorization: split {split!r} (expected None, a function, 'whitespace' or "
                             f"'character')")
        if output_sequence_length is not None and output_mode != "int":
            raise ValueError("TextVectorization: output_sequence_length is for output_mode 'int' only (as Keras)")
        if max_tokens is not None and int(max_tokens) < 1:
            raise ValueError(f"TextVectorization: max_tokens {max_tokens} (expected None or >= 1)")
        if sparse or ragged:
            raise NotImplementedError("TextVectorization: sparse and ragged outputs are not supported (dense "
                                      "arrays, padded with 0)")
        if isinstance(ngrams, int):
            ngrams = tuple(range(1, ngrams + 1))
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.standardize, self.split, self.ngrams = standardize, split, ngrams
        self.output_mode, self.output_sequence_length = output_mode, output_sequence_length
        self.pad_to_max_tokens, self.encoding = bool(pad_to_max_tokens), encoding
        self.name = name or "text_vectorization"
        self._vocab, self._index, self._idf = None, None, None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)

    # ---- strings to tokens ----
    def _standardized(self, batch):
        if self.standardize is None:
            return batch
        if callable(self.standardize):
            return np.asarray(self.standardize(batch), dtype=object)
        out = batch
        if self.standardize in ("lower_and_strip_punctuation", "lower"):
            out = lower(out)
        if self.standardize in ("lower_and_strip_punctuation", "strip_punctuation"):
            out = regex_replace(out, _STRIP, "")
        return np.asarray(out, dtype=object)

    def _tokens(self, inputs):
        """(token lists, one per string, batch shape): standardize, split, ngrams."""
        a = np.asarray(inputs, dtype=object)
        if a.ndim == 0:
            a = a.reshape(1)
        if self.split is not None and a.ndim > 1:
            if a.shape[-1] != 1:
                raise ValueError(f"TextVectorization: strings of shape {a.shape}: to split them the last axis must "
                                 f"be 1 (as Keras)")
            a = a[..., 0]
        if a.ndim != 1:
            raise ValueError(f"TextVectorization: strings of shape {a.shape}: expected (batch,) or (batch, 1)")
        std = self._standardized(a)
        if self.split is None:
            toks = [[_text(s)] for s in std]
        elif callable(self.split):
            toks = [[_text(t) for t in row] for row in self.split(std)]
        elif self.split == "whitespace":
            toks = [_text(s).split() for s in std]
        else:
            toks = [list(_text(s)) for s in std]
        if self.ngrams:
            toks = [[" ".join(row[i:i + n]) for n in self.ngrams for i in range(len(row) - n + 1)] for row in toks]
        return toks

    # ---- the vocabulary ----
    def _start(self):
        return 2 if self.output_mode == "int" else 1  # mask and OOV, or OOV

    def adapt(self, data, batch_size=None, steps=None):
        """Learns the vocabulary (and TF-IDF's document frequencies) from strings: an array or list,
        or a dataset of batches of them."""
        counts, docs, n_docs = {}, {}, 0
        for batch in self._batches(data, steps):
            for row in self._tokens(batch):
                n_docs += 1
                for t in row:
                    counts[t] = counts.get(t, 0) + 1
                for t in set(row):
                    docs[t] = docs.get(t, 0) + 1
        counts.pop(_MASK, None)
        counts.pop(_OOV, None)
        order = sorted(counts, key=lambda t: (counts[t], t.encode("utf-8")), reverse=True)
        if self.max_tokens is not None:
            order = order[:max(self.max_tokens - self._start(), 0)]
        idf = None
        if self.output_mode == "tf_idf":  # Keras's log(1 + documents / (1 + documents with the token))
            idf = [math.log(1 + n_docs / (1 + docs[t])) for t in order]
        self._set(order, idf)

    @staticmethod
    def _batches(data, steps):
        if isinstance(data, (str, bytes)):
            yield [data]
            return
        if isinstance(data, (list, tuple, np.ndarray)):
            yield np.asarray(data, dtype=object).reshape(-1)
            return
        for i, element in enumerate(data):  # a dataset: its elements (batches or single strings)
            if steps is not None and i >= steps:
                break
            if isinstance(element, tuple):
                raise ValueError("TextVectorization.adapt: the dataset yields tuples (text, label): map it to the "
                                 "text first, ds.map(lambda x, y: x)")
            yield np.asarray(element, dtype=object).reshape(-1)

    def _set(self, tokens, idf):
        special = [_MASK, _OOV] if self.output_mode == "int" else [_OOV]
        self._vocab = special + list(tokens)
        self._index = {t: i for i, t in enumerate(self._vocab)}
        if idf is not None:
            idf = [float(np.mean(idf)) if idf else 0.0] * (len(special)) + list(idf)  # OOV: the mean, as Keras
            self._idf = np.asarray(idf, np.float32)

    def set_vocabulary(self, vocabulary, idf_weights=None):
        vocab = [_text(t) for t in (np.asarray(vocabulary, dtype=object).reshape(-1) if not isinstance(vocabulary, str)
                                    else open(vocabulary, encoding="utf-8").read().splitlines())]
        if self.output_mode == "int" and vocab[:2] == [_MASK, _OOV]:
            vocab = vocab[2:]
        elif vocab[:1] == [_OOV]:
            vocab = vocab[1:]
        if len(set(vocab)) != len(vocab):
            raise ValueError("TextVectorization: the vocabulary has repeated tokens")
        if self.output_mode == "tf_idf" and idf_weights is None:
            raise ValueError("TextVectorization: output_mode 'tf_idf' with a vocabulary needs idf_weights")
        self._set(vocab, None)
        if idf_weights is not None:
            w = np.asarray(idf_weights, np.float32).reshape(-1)
            if len(w) == len(vocab):
                w = np.concatenate([np.full(self._start() - 1, w.mean(), np.float32), w])
            self._idf = w

    def get_vocabulary(self, include_special_tokens=True):
        self._need_vocab("get_vocabulary")
        return list(self._vocab) if include_special_tokens else self._vocab[self._start():]

    def vocabulary_size(self):
        self._need_vocab("vocabulary_size")
        return len(self._vocab)

    def _need_vocab(self, what):
        if self._vocab is None:
            raise ValueError(f"TextVectorization.{what}: no vocabulary yet; call adapt(data) or give vocabulary=")

    # ---- calling ----
    def __call__(self, inputs, *args, **kwargs):
        from tarantella.keras import _custom
        from tarantella.keras.model_api import as_tensor
        if _custom._is_kt(inputs) or any(_custom._is_kt(v) for v in _custom._flat(inputs)):
            raise NotImplementedError("TextVectorization in a model is not supported (the library's models take "
                                      "numbers): vectorize the data instead, ds.map(lambda x, y: (layer(x), y)), "
                                      "or call the layer on the array of strings")
        self._need_vocab("__call__")
        scalar = np.ndim(inputs) == 0
        rows = [[self._index.get(t, 1 if self.output_mode == "int" else 0) for t in row]
                for row in self._tokens(inputs)]
        if self.output_mode == "int":
            width = self.output_sequence_length or max([len(r) for r in rows] + [0])
            out = np.zeros((len(rows), width), np.int64)
            for i, r in enumerate(rows):
                out[i, :min(len(r), width)] = r[:width]
        else:
            size = self.max_tokens if self.pad_to_max_tokens and self.max_tokens else len(self._vocab)
            out = np.zeros((len(rows), size), np.float32)
            for i, r in enumerate(rows):
                np.add.at(out[i], r, 1.0)
            if self.output_mode == "multi_hot":
                out = np.minimum(out, 1.0)
            elif self.output_mode == "tf_idf":
                out[:, :len(self._idf)] *= self._idf
        return as_tensor(out[0] if scalar else out)

    def get_config(self):
        return {"name": self.name, "max_tokens": self.max_tokens,
                "standardize": self.standardize if not callable(self.standardize) else None,
                "split": self.split if not callable(self.split) else None, "ngrams": self.ngrams,
                "output_mode": self.output_mode, "output_sequence_length": self.output_sequence_length,
                "pad_to_max_tokens": self.pad_to_max_tokens, "vocabulary": None, "idf_weights": None,
                "sparse": False, "ragged": False, "encoding": self.encoding}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
