"""keras.preprocessing.text: Tokenizer, text_to_word_sequence, one_hot, hashing_trick and
tokenizer_from_json, with Keras 2's rules (index 0 reserved, words ranked by count, ties in
order of first appearance, the oov_token at index 1)."""
import hashlib
import json
from collections import OrderedDict, defaultdict

import numpy as np

_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(input_text, filters=_FILTERS, lower=True, split=" "):
    if lower:
        input_text = input_text.lower()
    input_text = input_text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in input_text.split(split) if w]


def hashing_trick(text, n, hash_function=None, filters=_FILTERS, lower=True, split=" ", analyzer=None):
    """Word indices 1 .. n - 1 by a hash (md5 when hash_function='md5'; Python's hash otherwise,
    which varies between runs unless PYTHONHASHSEED is set, as in Keras)."""
    if hash_function is None:
        hash_function = hash
    elif hash_function == "md5":
        hash_function = lambda w: int(hashlib.md5(w.encode()).hexdigest(), 16)  # noqa: E731
    seq = analyzer(text) if analyzer is not None else text_to_word_sequence(text, filters, lower, split)
    return [(hash_function(w) % (n - 1) + 1) for w in seq]


def one_hot(input_text, n, filters=_FILTERS, lower=True, split=" ", analyzer=None):
    return hashing_trick(input_text, n, hash_function=hash, filters=filters, lower=lower, split=split,
                         analyzer=analyzer)


class Tokenizer:
    def __init__(self, num_words=None, filters=_FILTERS, lower=True, split=" ", char_level=False, oov_token=None,
                 analyzer=None, document_count=0, **kwargs):
        if "nb_words" in kwargs:  # Keras 1's name
            num_words = kwargs.pop("nb_words")
        if kwargs:
            raise TypeError(f"Tokenizer: unrecognized keyword arguments {sorted(kwargs)}")
        self.word_counts = OrderedDict()
        self.word_docs = defaultdict(int)
        self.filters, self.split, self.lower = filters, split, lower
        self.num_words = num_words
        self.document_count = document_count
        self.char_level = char_level
        self.oov_token = oov_token
        self.index_docs = defaultdict(int)
        self.word_index = {}
        self.index_word = {}
        self.analyzer = analyzer

    def _words(self, text):
        if self.char_level or isinstance(text, list):
            if self.lower:
                text = [t.lower() for t in text] if isinstance(text, list) else text.lower()
            return text
        if self.analyzer is not None:
            return self.analyzer(text)
        return text_to_word_sequence(text, self.filters, self.lower, self.split)

    def fit_on_texts(self, texts):
        for text in texts:
            self.document_count += 1
            seq = self._words(text)
            for w in seq:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
            for w in set(seq):
                self.word_docs[w] += 1
        counts = sorted(self.word_counts.items(), key=lambda wc: wc[1], reverse=True)  # stable: ties keep order
        vocabulary = ([] if self.oov_token is None else [self.oov_token]) + [w for w, _ in counts]
        self.word_index = dict(zip(vocabulary, range(1, len(vocabulary) + 1)))
        self.index_word = {i: w for w, i in self.word_index.items()}
        for w, c in list(self.word_docs.items()):
            self.index_docs[self.word_index[w]] = c

    def fit_on_sequences(self, sequences):
        self.document_count += len(sequences)
        for seq in sequences:
            for i in set(seq):
                self.index_docs[i] += 1

    def texts_to_sequences(self, texts):
        return list(self.texts_to_sequences_generator(texts))

    def texts_to_sequences_generator(self, texts):
        oov = self.word_index.get(self.oov_token)
        for text in texts:
            vect = []
            for w in self._words(text):
                i = self.word_index.get(w)
                if i is not None:
                    if self.num_words and i >= self.num_words:
                        if oov is not None:
                            vect.append(oov)
                    else:
                        vect.append(i)
                elif self.oov_token is not None:
                    vect.append(oov)
            yield vect

    def sequences_to_texts(self, sequences):
        return list(self.sequences_to_texts_generator(sequences))

    def sequences_to_texts_generator(self, sequences):
        oov = self.word_index.get(self.oov_token)
        for seq in sequences:
            vect = []
            for n in seq:
                word = self.index_word.get(n)
                if word is not None:
                    if self.num_words and n >= self.num_words:
                        if oov is not None:
                            vect.append(self.index_word[oov])
                    else:
                        vect.append(word)
                elif self.oov_token is not None:
                    vect.append(self.index_word[oov])
            yield " ".join(vect)

    def texts_to_matrix(self, texts, mode="binary"):
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences, mode="binary"):
        """(n, num_words) rows: 'binary' 1 where a word occurs, 'count', 'freq' (count / length),
        'tfidf' ((1 + log count) * log(1 + documents / (1 + documents with the word)))."""
        if not self.num_words:
            if not self.word_index:
                raise ValueError("Specify a dimension (`num_words` argument), or fit on some text data first.")
            num_words = len(self.word_index) + 1
        else:
            num_words = self.num_words
        if mode not in ("binary", "count", "freq", "tfidf"):
            raise ValueError(f"Unknown vectorization mode: {mode!r} (expected binary, count, freq or tfidf)")
        if mode == "tfidf" and not self.document_count:
            raise ValueError("Fit the Tokenizer on some data before using tfidf mode.")
        x = np.zeros((len(sequences), num_words))
        for i, seq in enumerate(sequences):
            if not seq:
                continue
            counts = defaultdict(int)
            for j in seq:
                if j < num_words:
                    counts[j] += 1
            for j, c in counts.items():
                if mode == "count":
                    x[i][j] = c
                elif mode == "freq":
                    x[i][j] = c / len(seq)
                elif mode == "binary":
                    x[i][j] = 1
                else:
                    x[i][j] = (1 + np.log(c)) * np.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
        return x

    def get_config(self):
        return {"num_words": self.num_words, "filters": self.filters, "lower": self.lower, "split": self.split,
                "char_level": self.char_level, "oov_token": self.oov_token, "document_count": self.document_count,
                "word_counts": json.dumps(self.word_counts), "word_docs": json.dumps(self.word_docs),
                "index_docs": json.dumps(self.index_docs), "index_word": json.dumps(self.index_word),
                "word_index": json.dumps(self.word_index)}

    def to_json(self, **kwargs):
        return json.dumps({"class_name": type(self).__name__, "config": self.get_config()}, **kwargs)


def tokenizer_from_json(json_string):
    config = dict(json.loads(json_string).get("config"))
    word_counts = json.loads(config.pop("word_counts"))
    word_docs = json.loads(config.pop("word_docs"))
    index_docs = {int(k): v for k, v in json.loads(config.pop("index_docs")).items()}
    index_word = {int(k): v for k, v in json.loads(config.pop("index_word")).items()}
    word_index = json.loads(config.pop("word_index"))
    t = Tokenizer(**config)
    t.word_counts = OrderedDict(word_counts)
    t.word_docs = defaultdict(int, word_docs)
    t.index_docs = defaultdict(int, index_docs)
    t.word_index = word_index
    t.index_word = index_word
    return t
