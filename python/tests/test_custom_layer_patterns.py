"""Custom-layer patterns of the keras.io examples (issue 22), against NumPy: a token-and-position
embedding (built-in Embedding layers inside a custom layer, one of them on ops.arange positions)."""
import numpy as np
import pytest


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def test_token_and_position_embedding(k):
    from tarantella.keras import layers, ops

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim):
            super().__init__()
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = ops.shape(x)[-1]
            positions = self.pos_emb(ops.arange(start=0, stop=maxlen, step=1))
            return self.token_emb(x) + positions

    maxlen, vocab, dim = 7, 30, 4
    inp = layers.Input(shape=(maxlen,))
    m = k.Model(inp, TokenAndPositionEmbedding(maxlen, vocab, dim)(inp))
    ids = np.random.default_rng(0).integers(0, vocab, (5, maxlen))
    out = m.predict(ids.astype(np.float32), verbose=0)
    ws = m.get_weights()
    tok_w = next(w for w in ws if w.shape == (vocab, dim))
    pos_w = next(w for w in ws if w.shape == (maxlen, dim))
    np.testing.assert_allclose(out, tok_w[ids] + pos_w[np.arange(maxlen)][None], rtol=1e-6)
    m.compile("adam", "mse")
    h = m.fit(ids.astype(np.float32), np.zeros((5, maxlen, dim), np.float32), epochs=2, verbose=0)
    assert h.history["loss"][1] < h.history["loss"][0]


def test_add_weight_regularizer_adds_its_penalty(k):
    """add_weight(regularizer=L2(c)): the loss is the data loss plus c * sum(w^2), and one SGD step
    follows that gradient (NumPy)."""
    from tarantella.keras import layers, ops, regularizers
    c, lr = 0.05, 0.1

    class MyDense(layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="glorot_uniform",
                                     regularizer=regularizers.L2(c), name="w")
            self.b = self.add_weight(shape=(2,), initializer="zeros", regularizer="l1", name="b")

        def call(self, x):
            return ops.matmul(x, self.w) + self.b

    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)
    inp = layers.Input(shape=(3,))
    m = k.Model(inp, MyDense()(inp))
    w0 = rng.uniform(-0.5, 0.5, (3, 2)).astype(np.float32)
    b0 = rng.uniform(-0.5, 0.5, 2).astype(np.float32)
    m.set_weights([w0, b0])
    m.compile(k.optimizers.SGD(lr), "mse")
    y = x @ w0 + b0
    want = np.mean((y - t) ** 2) + c * np.sum(w0 ** 2) + 0.01 * np.sum(np.abs(b0))
    np.testing.assert_allclose(m.evaluate(x, t, batch_size=8, verbose=0), want, rtol=1e-5)
    m.fit(x, t, batch_size=8, epochs=1, verbose=0)
    dy = 2 * (y - t) / y.size
    w1, b1 = m.get_weights()
    np.testing.assert_allclose(w1, w0 - lr * (x.T @ dy + 2 * c * w0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b1, b0 - lr * (dy.sum(0) + 0.01 * np.sign(b0)), rtol=1e-5, atol=1e-6)
