"""Sample weights reaching a keras.metrics.Metric subclass's update_state (issue 22): as Keras 2.4+
does, a metric in weighted_metrics gets fit's and evaluate's sample_weight (and class_weight),
one in metrics gets sample_weight=None. References: NumPy, and the built-in
sparse_categorical_accuracy given in both lists."""
import numpy as np
import pytest

RNG = np.random.default_rng(21)


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _hits_class(k):
    from tarantella.keras import ops

    class Hits(k.metrics.Metric):
        """The accuracy of sparse labels, weighted as Keras's MeanMetricWrapper weighs."""

        def __init__(self, name="hits", **kw):
            super().__init__(name=name, **kw)
            self.total = self.add_weight(name="total", initializer="zeros")
            self.count = self.add_weight(name="count", initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            pred = ops.cast(ops.argmax(y_pred, axis=-1), "float32")
            hit = ops.cast(ops.equal(ops.reshape(y_true, (-1,)), pred), "float32")
            w = ops.ones_like(hit) if sample_weight is None else ops.reshape(ops.cast(sample_weight, "float32"), (-1,))
            self.total.assign_add(ops.sum(hit * w))
            self.count.assign_add(ops.sum(w))

        def result(self):
            return self.total / self.count

    return Hits


def _data(n=40):
    x = RNG.normal(size=(n, 5)).astype(np.float32)
    y = RNG.integers(0, 3, size=(n, 1)).astype(np.float32)
    sw = RNG.uniform(0.0, 2.0, size=(n,)).astype(np.float32)
    return x, y, sw


def _model(k):
    inp = k.Input(shape=(5,))
    m = k.Model(inp, k.layers.Dense(3, activation="softmax")(k.layers.Dense(6, activation="tanh")(inp)))
    m.set_weights([RNG.uniform(-0.8, 0.8, w.shape).astype(np.float32) for w in m.get_weights()])
    return m


def test_weighted_metric_class_against_numpy(k):
    Hits = _hits_class(k)
    x, y, sw = _data()
    m = _model(k)
    m.compile("sgd", loss="sparse_categorical_crossentropy", metrics=[Hits(name="plain_hits")],
              weighted_metrics=[Hits(name="w_hits")])
    hit = (m.predict(x, verbose=0).argmax(-1) == y[:, 0]).astype(np.float64)
    logs = m.evaluate(x, y, sample_weight=sw, batch_size=16, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["w_hits"], (hit * sw).sum() / sw.sum(), rtol=1e-6)
    np.testing.assert_allclose(logs["plain_hits"], hit.mean(), rtol=1e-6)  # Keras 2.4+: metrics unweighted
    assert abs(logs["w_hits"] - logs["plain_hits"]) > 1e-3
    logs = m.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)  # no weights: sample_weight=None
    np.testing.assert_allclose([logs["w_hits"], logs["plain_hits"]], [hit.mean()] * 2, rtol=1e-6)


def test_weighted_metric_class_equals_the_builtin_weighted_metric_in_fit(k):
    Hits = _hits_class(k)
    x, y, sw = _data()
    m = _model(k)
    acc = "sparse_categorical_accuracy"
    m.compile(k.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=[Hits(name="plain_hits"), acc],
              weighted_metrics=[Hits(name="w_hits"), acc])
    h = m.fit(x, y, sample_weight=sw, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["w_hits"], h["weighted_" + acc], rtol=1e-6)
    np.testing.assert_allclose(h["plain_hits"], h[acc], rtol=1e-6)
    h = m.fit(x, y, class_weight={0: 1.0, 1: 3.0, 2: 0.25}, batch_size=8, epochs=1, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["w_hits"], h["weighted_" + acc], rtol=1e-6)
    assert abs(h["w_hits"][0] - h["plain_hits"][0]) > 1e-4


def test_weighted_metric_class_without_sample_weight_argument_is_a_clear_error(k):
    from tarantella.keras import ops

    class NoWeights(k.metrics.Metric):
        def __init__(self, **kw):
            super().__init__(name="no_weights", **kw)
            self.total = self.add_weight(name="total", initializer="zeros")

        def update_state(self, y_true, y_pred):
            self.total.assign_add(ops.sum(y_pred))

        def result(self):
            return self.total

    m = _model(k)
    m.compile("sgd", loss="sparse_categorical_crossentropy", metrics=[NoWeights()])  # unweighted: fine
    with pytest.raises(TypeError, match="NoWeights.update_state takes no sample_weight"):
        m.compile("sgd", loss="sparse_categorical_crossentropy", weighted_metrics=[NoWeights()])


def test_each_output_gets_its_own_sample_weights(k):
    Hits = _hits_class(k)
    x, y, sw = _data()
    y2 = RNG.integers(0, 3, size=(len(x), 1)).astype(np.float32)
    sw2 = RNG.uniform(0.0, 2.0, size=(len(x),)).astype(np.float32)
    inp = k.Input(shape=(5,))
    h = k.layers.Dense(6, activation="tanh")(inp)
    m = k.Model(inp, [k.layers.Dense(3, activation="softmax", name="a")(h),
                      k.layers.Dense(3, activation="softmax", name="b")(h)])
    m.compile("sgd", loss="sparse_categorical_crossentropy", weighted_metrics=[Hits()])
    pa, pb = m.predict(x, verbose=0)
    logs = m.evaluate(x, [y, y2], sample_weight=[sw, sw2], batch_size=16, verbose=0, return_dict=True)
    for p, lab, w, name in ((pa, y, sw, "a_hits"), (pb, y2, sw2, "b_hits")):
        hit = (p.argmax(-1) == lab[:, 0]).astype(np.float64)
        np.testing.assert_allclose(logs[name], (hit * w).sum() / w.sum(), rtol=1e-6, err_msg=name)
