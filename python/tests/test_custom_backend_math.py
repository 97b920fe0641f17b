"""keras.backend / tf math added for custom code (issue 22), each against its documented formula,
and the serialize/deserialize/get of initializers, regularizers and constraints."""
import numpy as np
import pytest


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _run(k, fn, x, batch_size=None):
    inp = k.Input(shape=x.shape[1:])
    return k.Model(inp, k.layers.Lambda(fn)(inp)).predict(x, verbose=0, batch_size=batch_size)


def test_l2_normalize_formula(k):
    """tf.math.l2_normalize: x / sqrt(max(sum(x^2, axis), epsilon)), epsilon 1e-12."""
    import tarantella.tensorflow as tf
    from tarantella.keras import backend as K
    x = np.random.default_rng(0).standard_normal((6, 4, 3)).astype(np.float32)
    x[0] = 0  # the epsilon branch: zeros stay zeros
    for axis in (1, -1):
        want = x / np.sqrt(np.maximum((x ** 2).sum(axis, keepdims=True), 1e-12))
        np.testing.assert_allclose(_run(k, lambda t: K.l2_normalize(t, axis=axis), x), want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(_run(k, lambda t: tf.math.l2_normalize(t, axis=axis), x), want, rtol=1e-5,
                                   atol=1e-7)


def test_backend_elementwise_formulas(k):
    from tarantella.keras import backend as K
    x = np.random.default_rng(1).uniform(-2, 2, (5, 4)).astype(np.float32)
    cases = [(lambda t: K.hard_sigmoid(t), np.clip(0.2 * x + 0.5, 0, 1)),  # Keras 2's hard_sigmoid
             (lambda t: K.softplus(t), np.log1p(np.exp(x))),
             (lambda t: K.softsign(t), x / (1 + np.abs(x))),
             (lambda t: K.elu(t, 0.5), np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
             (lambda t: K.batch_flatten(K.repeat_elements(t, 2, axis=1)), np.repeat(x, 2, axis=1)),
             (lambda t: K.cumsum(t, axis=1), np.cumsum(x, axis=1)),
             (lambda t: K.cast(K.not_equal(t, 0.5), "float32"), (x != 0.5).astype(np.float32))]
    for fn, want in cases:
        np.testing.assert_allclose(_run(k, fn, x), want, rtol=1e-5, atol=1e-6)


def test_shape_and_random_normal_keyed_on_the_batch(k):
    """The reparameterization of variational_autoencoder: K.random_normal(shape=(K.shape(z)[0], dim)),
    standard normal draws shaped by the batch of the data, new ones in every batch of predict."""
    from tarantella.keras import backend as K
    x = np.zeros((4000, 3), np.float32)

    def sample(t):
        batch, dim = K.shape(t)[0], K.int_shape(t)[1]
        return t + 2.0 * K.random_normal(shape=(batch, dim))

    for batch_size in (4000, 32):  # every batch draws its own values
        out = _run(k, sample, x, batch_size=batch_size)
        assert out.shape == (4000, 3)
        assert abs(out.mean()) < 0.1 and abs(out.std() - 2.0) < 0.1
        assert abs(np.corrcoef(out[:, 0], out[:, 1])[0, 1]) < 0.1
        assert abs(np.corrcoef(out[:-32].ravel(), out[32:].ravel())[0, 1]) < 0.1
    with pytest.raises(NotImplementedError, match="batch size"):
        _run(k, lambda t: t + K.random_normal(shape=(4, 3)), x[:4])


def test_initializer_regularizer_constraint_serialization(k):
    from tarantella.keras import constraints, initializers, regularizers
    cfg = initializers.serialize(initializers.RandomNormal(stddev=0.2, seed=3))
    assert cfg == {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 0.2, "seed": 3}}
    back = initializers.deserialize(cfg)
    assert isinstance(back, initializers.RandomNormal) and back.get_config() == cfg["config"]
    assert isinstance(initializers.get("glorot_uniform"), initializers.GlorotUniform)
    assert isinstance(initializers.get("GlorotUniform"), initializers.GlorotUniform)
    assert initializers.get(None) is None
    assert regularizers.get("l2").get_config() == {"l2": 0.01}
    assert regularizers.serialize(regularizers.L1L2(l1=0.5)) == {"class_name": "L1L2",
                                                                   "config": {"l1": 0.5, "l2": 0.0}}
    c = constraints.get({"class_name": "MaxNorm", "config": {"max_value": 3, "axis": 0}})
    assert isinstance(c, constraints.MaxNorm) and constraints.serialize(c)["config"]["max_value"] == 3
    with pytest.raises(ValueError, match="unknown initializer 'nope'"):
        initializers.get("nope")


def test_one_hot_on_data_and_dict_outputs(k):
    from tarantella.keras import ops
    y = np.array([0, 2, 1, 5])
    np.testing.assert_array_equal(ops.one_hot(y, 3), np.eye(3, dtype=np.float32)[[0, 2, 1]].tolist() + [[0, 0, 0]])
    inp = k.Input(shape=(3,), name="feats")
    m = k.Model({"feats": inp}, {"a": k.layers.Dense(2, name="a")(inp), "b": k.layers.Dense(1, name="b")(inp)})
    x = np.ones((5, 3), np.float32)
    out = m.predict({"feats": x}, verbose=0)
    assert set(out) == {"a", "b"} and out["a"].shape == (5, 2) and out["b"].shape == (5, 1)
    w = m.get_weights()
    np.testing.assert_allclose(out["a"], x @ w[0] + w[1], rtol=1e-5)


def test_ops_on_data_run_at_once(k):
    """Keras 3's ops take NumPy data: the shape and reduction operations compute at once (a
    PatchEncoder's positions = ops.expand_dims(ops.arange(n), 0)); operations that exist only in
    the others run once on the C engine."""
    from tarantella.keras import ops
    np.testing.assert_array_equal(ops.expand_dims(ops.arange(0, 4), axis=0), [[0, 1, 2, 3]])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(ops.sum(x, axis=1), [3, 12])
    np.testing.assert_allclose(ops.mean(x), 2.5)
    np.testing.assert_array_equal(ops.tile(ops.expand_dims(x, -1), [1, 1, 2]).shape, (2, 3, 2))
    np.testing.assert_allclose(ops.matmul(x, x.T), x @ x.T)
    np.testing.assert_array_equal(ops.argmax(x, axis=-1), [2, 2])
    # the others run once on the C engine (keras/_tape.py): Keras's approximate gelu
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(ops.gelu(x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.softmax(x, axis=1), np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-5)


def test_backend_crossentropies_in_a_loss(k):
    """K.binary_crossentropy (elementwise) and K.categorical_crossentropy in a loss function,
    against Keras 2's backend formulas (clipped to [1e-7, 1 - 1e-7])."""
    from tarantella.keras import backend as K
    rng = np.random.default_rng(4)
    x = rng.standard_normal((12, 5)).astype(np.float32)
    t = rng.uniform(0, 1, (12, 3)).astype(np.float32)
    for act, loss, ref in (
            ("sigmoid", lambda y, p: K.mean(K.binary_crossentropy(y, p), axis=-1),
             lambda y, p: (-(y * np.log(np.clip(p, 1e-7, 1 - 1e-7) + 1e-7) +
                             (1 - y) * np.log(1 - np.clip(p, 1e-7, 1 - 1e-7) + 1e-7))).mean(-1)),
            ("softmax", lambda y, p: K.categorical_crossentropy(y, p),
             lambda y, p: -(y * np.log(np.clip(p / p.sum(-1, keepdims=True), 1e-7, 1 - 1e-7))).sum(-1))):
        inp = k.Input(shape=(5,))
        m = k.Model(inp, k.layers.Dense(3, activation=act)(inp))
        m.compile("sgd", loss=loss)
        w, b = m.get_weights()
        z = x @ w + b
        p = 1 / (1 + np.exp(-z)) if act == "sigmoid" else np.exp(z) / np.exp(z).sum(-1, keepdims=True)
        np.testing.assert_allclose(m.evaluate(x, t, batch_size=12, verbose=0), ref(t, p).mean(), rtol=1e-5)
