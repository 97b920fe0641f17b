"""Keras 2's fit_generator, evaluate_generator and predict_generator (deprecated, still in Keras
2.11 where they warn and call fit/evaluate/predict): the same weights, figures and outputs as
fit/evaluate/predict on the same generator."""
import numpy as np
import pytest


def _gen(x, y, batch):
    while True:
        for i in range(0, len(x), batch):
            yield x[i:i + batch], y[i:i + batch]


def _model(tnt):
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Dense(3, activation="relu", input_shape=(4,)), L.Dense(2, activation="softmax")])
    m.set_weights([np.full((4, 3), 0.1, np.float32), np.zeros(3, np.float32), np.full((3, 2), 0.2, np.float32),
                   np.array([0.1, -0.1], np.float32)])
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def test_generator_methods_equal_the_plain_ones(tnt):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)).astype(np.float32), (np.arange(16) % 2).astype(np.float32)
    a, b = _model(tnt), _model(tnt)
    with pytest.warns(UserWarning, match="fit_generator` is deprecated"):
        ha = a.fit_generator(_gen(x, y, 4), steps_per_epoch=4, epochs=2, verbose=0)
    hb = b.fit(_gen(x, y, 4), steps_per_epoch=4, epochs=2, verbose=0)
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(u, v)
    assert ha.history == hb.history
    with pytest.warns(UserWarning, match="evaluate_generator"):
        ea = a.evaluate_generator(_gen(x, y, 4), steps=4)
    assert ea == pytest.approx(b.evaluate(_gen(x, y, 4), steps=4, verbose=0))
    with pytest.warns(UserWarning, match="predict_generator"):
        pa = a.predict_generator((xb for xb, _ in _gen(x, y, 4)), steps=4)
    np.testing.assert_allclose(pa, b.predict(x, verbose=0), rtol=1e-6)
