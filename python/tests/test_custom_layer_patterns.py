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


def test_eager_calls_and_masks(k):
    """Layers called on data run at once (a model of the one call), with Keras's _keras_mask:
    Embedding(mask_zero) and Masking make one, a custom compute_mask splits it; in a functional
    model a custom call(inputs, mask=None) receives the mask of its input."""
    from tarantella.keras import layers, ops
    ids = np.array([[3, 1, 0, 0], [2, 0, 4, 0]])
    emb = layers.Embedding(input_dim=5, output_dim=3, mask_zero=True)
    out = emb(ids)
    np.testing.assert_array_equal(out._keras_mask, ids != 0)
    np.testing.assert_allclose(out, emb.get_weights()[0][ids], rtol=1e-6)
    again = emb(ids)  # the layer keeps its weights across calls
    np.testing.assert_allclose(again, out)
    x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    x[0, 2:] = 0.0
    masked = layers.Masking()(x)
    np.testing.assert_array_equal(masked._keras_mask, [[True, True, False, False], [True] * 4])
    np.testing.assert_allclose(masked, x)

    class TemporalSplit(layers.Layer):
        def call(self, inputs):
            return ops.split(inputs, 2, axis=1)

        def compute_mask(self, inputs, mask=None):
            return None if mask is None else ops.split(mask, 2, axis=1)

    a, b = TemporalSplit()(masked)
    np.testing.assert_allclose(a, x[:, :2])
    np.testing.assert_array_equal(b._keras_mask, [[False, False], [True, True]])

    class TemporalSoftmax(layers.Layer):
        def call(self, inputs, mask=None):
            m = ops.expand_dims(ops.cast(mask, "float32"), -1)
            e = ops.exp(inputs) * m
            return e / ops.sum(e * m, axis=-1, keepdims=True)

    inp = k.Input(shape=(4,))
    h = layers.Dense(2)(layers.Embedding(input_dim=5, output_dim=3, mask_zero=True)(inp))
    assert h._keras_mask is not None
    model = k.Model(inp, TemporalSoftmax()(h))
    w_e, w_d, b_d = model.get_weights()
    hv = w_e[ids] @ w_d + b_d
    e = np.exp(hv) * (ids != 0)[..., None]
    with np.errstate(invalid="ignore"):
        want = e / e.sum(-1, keepdims=True)
    got = model.predict(ids.astype(np.float32), verbose=0)
    np.testing.assert_allclose(got[ids != 0], want[ids != 0], rtol=1e-5)
    assert not np.isfinite(got[ids == 0]).any()  # 0 / 0 where masked, as in Keras


def test_fit_on_a_torch_dataloader(k):
    """Keras 3 fits on a PyTorch DataLoader: its batches each epoch (reshuffled by the loader), the
    same training as the arrays in the loader's order (shuffle=False)."""
    import torch
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((40, 5)).astype(np.float32), rng.standard_normal((40, 2)).astype(np.float32)

    class Pairs(torch.utils.data.Dataset):
        def __len__(self):
            return len(x)

        def __getitem__(self, i):
            return x[i], y[i]

    def model():
        inp = k.Input(shape=(5,))
        m = k.Model(inp, k.layers.Dense(2)(inp))
        m.set_weights([np.full((5, 2), 0.1, np.float32), np.zeros(2, np.float32)])
        m.compile(k.optimizers.SGD(0.1), "mse")
        return m

    a, b = model(), model()
    ha = a.fit(torch.utils.data.DataLoader(Pairs(), batch_size=8, shuffle=False), epochs=2, verbose=0)
    hb = b.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6)


def test_dataset_of_x_y_sample_weight(k, tnt):
    """Dataset elements (x, y, sample_weight), as Keras takes them: the same training and
    evaluation as arrays with sample_weight."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((40, 5)).astype(np.float32), rng.standard_normal((40, 2)).astype(np.float32)
    w = rng.uniform(0.1, 2.0, 40).astype(np.float32)

    def model():
        inp = k.Input(shape=(5,))
        m = k.Model(inp, k.layers.Dense(2)(inp))
        m.set_weights([np.full((5, 2), 0.1, np.float32), np.zeros(2, np.float32)])
        m.compile(k.optimizers.SGD(0.1), "mse")
        return m

    ds = tnt.data.Dataset.from_tensor_slices((x, y, w)).batch(8)
    a, b = model(), model()
    ha = a.fit(ds, epochs=2, verbose=0, validation_data=ds)
    hb = b.fit(x, y, sample_weight=w, batch_size=8, epochs=2, verbose=0, shuffle=False,
               validation_data=(x, y, w))
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(ha.history[key], hb.history[key], rtol=1e-6)
    np.testing.assert_allclose(a.evaluate(ds, verbose=0), b.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0),
                               rtol=1e-6)
