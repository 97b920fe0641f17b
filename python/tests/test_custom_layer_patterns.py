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
