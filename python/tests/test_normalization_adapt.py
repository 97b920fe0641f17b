"""keras.layers.Normalization.adapt, against Keras's documented result: the layer then maps x to
(x - mean) / sqrt(variance) with the statistics of the adapted data over every axis but `axis`."""
import numpy as np
import pytest


def _data():
    rng = np.random.default_rng(3)
    return (rng.normal(size=(200, 4)) * np.array([1.0, 5.0, 0.5, 2.0]) + np.array([3.0, -1.0, 0.0, 10.0])).astype(
        np.float32)


def test_adapt_before_the_model(tnt):
    k = tnt.keras
    x = _data()
    norm = k.layers.Normalization()
    norm.adapt(x)
    inp = k.Input(shape=(4,))
    m = k.Model(inp, norm(inp))
    want = (x - x.astype(np.float64).mean(0)) / x.astype(np.float64).std(0)
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-4, atol=1e-4)
    cfg = norm.get_config()
    np.testing.assert_allclose(cfg["mean"], x.astype(np.float64).mean(0), rtol=1e-6)


def test_adapt_axis_none_and_a_dataset(tnt):
    k = tnt.keras
    x = _data()
    norm = k.layers.Normalization(axis=None)
    norm.adapt(tnt.data.Dataset.from_tensor_slices(x).batch(32))
    inp = k.Input(shape=(4,))
    m = k.Model(inp, norm(inp))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(m.predict(x, verbose=0), (x64 - x64.mean()) / x64.std(), rtol=1e-4, atol=1e-4)


def test_adapt_in_a_built_model_sets_its_weights(tnt):
    k = tnt.keras
    x = _data()
    norm = k.layers.Normalization()
    inp = k.Input(shape=(4,))
    m = k.Model(inp, norm(inp))
    m.compile("sgd", "mse")
    norm.adapt(x)
    mean, var = norm.get_weights()[:2]
    np.testing.assert_allclose(mean.ravel(), x.astype(np.float64).mean(0), rtol=1e-5)
    np.testing.assert_allclose(var.ravel(), x.astype(np.float64).var(0), rtol=1e-5)
    out = m.predict(x, verbose=0)
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(out.std(0), 1, atol=1e-3)


def test_adapt_refuses_the_batch_axis(tnt):
    norm = tnt.keras.layers.Normalization(axis=0)
    with pytest.raises(ValueError, match="axis 0"):
        norm.adapt(_data())
