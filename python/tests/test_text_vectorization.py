"""keras.layers.TextVectorization (Keras 2.11) on the data side, and the tf.strings functions a
standardize function uses: Keras's documented examples, and the other modes from their
definitions worked out here."""
import math
import re
import string

import numpy as np
import pytest


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def test_keras_docstring_examples(k):
    """The two examples of Keras's docstring: ties in count ordered by the token, descending (foo,
    baz, bar at 2, 3, 4), 1 for out-of-vocabulary, 0 padding to output_sequence_length; a given
    vocabulary after '' and '[UNK]'."""
    from tarantella import data
    layer = k.layers.TextVectorization(max_tokens=5000, output_mode="int", output_sequence_length=4)
    layer.adapt(data.Dataset.from_tensor_slices(["foo", "bar", "baz"]).batch(64))
    np.testing.assert_array_equal(layer([["foo qux bar"], ["qux baz"]]), [[2, 1, 4, 0], [1, 3, 0, 0]])
    given = k.layers.TextVectorization(max_tokens=5000, output_sequence_length=4,
                                       vocabulary=["earth", "wind", "and", "fire"])
    assert given.get_vocabulary() == ["", "[UNK]", "earth", "wind", "and", "fire"]
    np.testing.assert_array_equal(given(["Earth, wind and also FIRE!"]), [[2, 3, 4, 1]])
    assert given.vocabulary_size() == 6
    assert k.layers.experimental.preprocessing.TextVectorization is k.layers.TextVectorization


def test_adapt_counts_max_tokens_and_the_vector_modes(k):
    """The most frequent tokens are kept (max_tokens counts the special ones); multi_hot and count
    vectors start with OOV at 0; TF-IDF weighs counts by log(1 + docs / (1 + docs with the token)),
    OOV by the mean weight; bigrams with ngrams=2; no output_sequence_length pads to the longest."""
    docs = ["a a a b", "b c", "a d d", "e"]
    layer = k.layers.TextVectorization(max_tokens=5)  # '', [UNK] and 3 tokens: a (4), d (2), b (2)
    layer.adapt(docs)
    assert layer.get_vocabulary() == ["", "[UNK]", "a", "d", "b"]
    np.testing.assert_array_equal(layer(["b a x", "d"]), [[4, 2, 1], [3, 0, 0]])
    hot = k.layers.TextVectorization(output_mode="multi_hot", vocabulary=["a", "b"])
    cnt = k.layers.TextVectorization(output_mode="count", vocabulary=["a", "b"])
    np.testing.assert_array_equal(hot(["a a z", "b"]), [[1, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(cnt(["a a z", "b"]), [[1, 2, 0], [0, 0, 1]])
    tfidf = k.layers.TextVectorization(output_mode="tf_idf")
    tfidf.adapt(docs)
    vocab = tfidf.get_vocabulary()
    assert vocab[0] == "[UNK]" and vocab[1] == "a"
    df = {t: sum(t in d.split() for d in docs) for t in vocab[1:]}
    idf = {t: math.log(1 + 4 / (1 + df[t])) for t in df}
    out = np.asarray(tfidf(["a a b q"]))[0]
    assert out[vocab.index("a")] == pytest.approx(2 * idf["a"], rel=1e-6)
    assert out[vocab.index("b")] == pytest.approx(idf["b"], rel=1e-6)
    assert out[0] == pytest.approx(np.mean(list(idf.values())), rel=1e-6)
    bi = k.layers.TextVectorization(ngrams=2, vocabulary=["x", "y", "x y"])
    np.testing.assert_array_equal(bi(["x y"]), [[2, 3, 4]])


def test_custom_standardize_with_tf_strings_in_a_dataset_map_that_trains(k):
    """TensorFlow's text classification tutorial: a standardize function of tf.strings.lower and
    regex_replace, the layer mapped over a (text, label) dataset, and a model trained on the result."""
    import tarantella.tensorflow as tf

    def standardize(x):
        x = tf.strings.regex_replace(tf.strings.lower(x), "<br />", " ")
        return tf.strings.regex_replace(x, "[%s]" % re.escape(string.punctuation), "")

    assert list(standardize(np.array(["Hi<br />THERE, you!"]))) == ["hi there you"]
    layer = k.layers.TextVectorization(standardize=standardize, max_tokens=20, output_sequence_length=6)
    texts = np.array(["Good film!", "BAD film.", "good<br />good", "bad, bad"] * 4)
    labels = np.array([1, 0, 1, 0] * 4, np.float32)
    ds = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(4)
    layer.adapt(ds.map(lambda x, y: x))
    assert layer.get_vocabulary()[:2] == ["", "[UNK]"] and set(layer.get_vocabulary()[2:]) == {"good", "bad", "film"}
    vec = ds.map(lambda x, y: (layer(tf.expand_dims(x, -1)), y))
    model = k.Sequential([k.layers.Embedding(21, 4), k.layers.GlobalAveragePooling1D(), k.layers.Dense(1)])
    model.compile("adam", k.losses.BinaryCrossentropy(from_logits=True))
    h = model.fit(vec, epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2 and np.all(np.isfinite(h.history["loss"]))
    direct = np.asarray(layer(texts[:, None]))
    np.testing.assert_allclose(model.predict(direct, verbose=0), model.predict(vec.map(lambda x, y: x), verbose=0),
                               rtol=1e-6)
    with pytest.raises(NotImplementedError, match="vectorize the data"):
        layer(k.Input(shape=(1,)))
