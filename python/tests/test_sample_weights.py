"""sample_weight and class_weight in fit and evaluate, against Keras's documented reduction: the
loss is sum_i w_i loss_i / batch size (SUM_OVER_BATCH_SIZE), the gradient that of the weighted
loss; Keras 2.4+ (compile_utils.MetricsContainer): compile's weighted_metrics are weighted means,
its metrics unweighted; class_weight weighs each sample by its class; on 2 and 3 ranks the same
as on one (test_objectives' job)."""
import numpy as np
import pytest

import objectives_ref as R
from conftest import small_mlp, toy_data
from objectives_cases import data, model


def test_evaluate_with_sample_weight_on_a_sequence_output(tnt):
    """The weights reach the loss and weighted_metrics only; a weighted metric whose name a plain
    metric has is logged as weighted_<name> (Keras's MetricsContainer._set_metric_names)."""
    k = tnt.keras
    x, y = data("categorical_crossentropy", 3)
    m = model(k, "categorical_crossentropy", 3)
    m.compile("sgd", "categorical_crossentropy", metrics=["categorical_accuracy", "mae"],
              weighted_metrics=["mae", "mse", k.metrics.CategoricalAccuracy(name="wacc")])
    w = np.linspace(0.0, 2.0, len(x)).astype(np.float32)
    p = m.predict(x, verbose=0).astype(np.float64)
    logs = m.evaluate(x, y, sample_weight=w, batch_size=len(x), verbose=0, return_dict=True)
    assert list(logs) == ["loss", "categorical_accuracy", "mae", "weighted_mae", "mse", "wacc"]
    per = R.categorical_crossentropy(y, p)
    assert logs["loss"] == pytest.approx(np.sum(w * per) / len(x), rel=1e-5)
    hits = (p.argmax(-1) == y.argmax(-1)).mean(axis=1)  # per sample, over its positions
    assert logs["categorical_accuracy"] == pytest.approx(hits.mean(), rel=1e-6)
    assert logs["wacc"] == pytest.approx(np.sum(w * hits) / np.sum(w), rel=1e-6)
    mae = np.abs(p - y).reshape(len(x), -1).mean(axis=1)
    assert logs["mae"] == pytest.approx(mae.mean(), rel=1e-5)
    assert logs["weighted_mae"] == pytest.approx(np.sum(w * mae) / np.sum(w), rel=1e-5)
    mse = ((p - y) ** 2).reshape(len(x), -1).mean(axis=1)
    assert logs["mse"] == pytest.approx(np.sum(w * mse) / np.sum(w), rel=1e-5)
    assert abs(logs["weighted_mae"] - logs["mae"]) > 1e-3  # the weights matter here
    # batches: the loss stays sum w l / n over the whole data set
    logs8 = m.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0, return_dict=True)
    assert logs8 == pytest.approx(logs, rel=1e-6)
    # without weights the weighted metrics are the plain ones
    plain = m.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    assert plain["weighted_mae"] == pytest.approx(plain["mae"], rel=1e-6)
    assert plain["wacc"] == pytest.approx(plain["categorical_accuracy"], rel=1e-6)


def test_weighted_metrics_in_fit_history_and_per_output(tnt):
    """fit's History and validation: weighted metrics as evaluate gives them; class_weight weighs
    them too. Several outputs: Keras's names <output>_<name>, <output>_weighted_<name> on a clash."""
    k = tnt.keras
    x, y = toy_data(24)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.0), "sparse_categorical_crossentropy", metrics=["accuracy"],
              weighted_metrics=["accuracy"])
    cw = {0: 1.0, 1: 3.0, 2: 0.5}
    h = m.fit(x, y, class_weight=cw, validation_data=(x, y), batch_size=8, epochs=1, verbose=0)
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss", "val_weighted_accuracy",
                                 "weighted_accuracy"]
    hits = (m.predict(x, verbose=0).argmax(-1) == y).astype(np.float64)
    cwv = np.array([cw[int(c)] for c in y])
    assert h.history["accuracy"][0] == pytest.approx(hits.mean(), rel=1e-6)
    assert h.history["weighted_accuracy"][0] == pytest.approx(np.sum(cwv * hits) / np.sum(cwv), rel=1e-6)
    assert h.history["val_weighted_accuracy"][0] == pytest.approx(hits.mean(), rel=1e-6)  # no weights given
    inp = k.Input((4,))
    m2 = k.Model(inp, [k.layers.Dense(2, name="a")(inp), k.layers.Dense(2, name="b")(inp)])
    m2.compile("sgd", "mse", metrics={"a": "mae"}, weighted_metrics=["mae"])
    xs = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    ya, yb = np.ones((10, 2), np.float32), np.zeros((10, 2), np.float32)
    w = np.arange(10, dtype=np.float32)
    logs = m2.evaluate(xs, [ya, yb], sample_weight=w, verbose=0, return_dict=True)
    assert list(logs) == ["loss", "a_loss", "b_loss", "a_mae", "a_weighted_mae", "b_mae"]
    pa, pb = m2.predict(xs, verbose=0)
    mae_a, mae_b = np.abs(pa - ya).mean(axis=1), np.abs(pb - yb).mean(axis=1)
    assert logs["a_mae"] == pytest.approx(mae_a.mean(), rel=1e-5)
    assert logs["a_weighted_mae"] == pytest.approx(np.sum(w * mae_a) / w.sum(), rel=1e-5)
    assert logs["b_mae"] == pytest.approx(np.sum(w * mae_b) / w.sum(), rel=1e-5)


def test_fit_with_sample_weight_follows_the_weighted_gradient(tnt):
    """Weights 0 drop samples: one SGD step on (x, w) equals the step on the weighted samples alone
    scaled by their share of the batch; weights 2 on every sample double the step."""
    k = tnt.keras
    x, y = toy_data(16)
    w = np.r_[np.ones(8), np.zeros(8)].astype(np.float32)
    steps = []
    for xs, ys, ws in ((x, y, w), (x[:8], y[:8], None), (x, y, np.full(16, 2.0, np.float32)), (x, y, None)):
        m = small_mlp(tnt)
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        w0 = m.get_weights()
        m.fit(xs, ys, sample_weight=ws, batch_size=len(xs), epochs=1, shuffle=False, verbose=0)
        steps.append([a - b for a, b in zip(m.get_weights(), w0)])
    for a, b in zip(steps[0], steps[1]):  # half the batch weighted: half the step of those 8 alone
        np.testing.assert_allclose(a, 0.5 * b, rtol=1e-4, atol=1e-7)
    for a, b in zip(steps[2], steps[3]):
        np.testing.assert_allclose(a, 2.0 * b, rtol=1e-4, atol=1e-7)


def test_class_weight(tnt):
    k = tnt.keras
    x, y = toy_data(24)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    cw = {0: 1.0, 1: 3.0, 2: 0.5}
    w0 = m.get_weights()
    h = m.fit(x, y, class_weight=cw, batch_size=24, epochs=1, shuffle=False, verbose=0)
    by_class = m.get_weights()
    m.set_weights(w0)
    h2 = m.fit(x, y, sample_weight=np.array([cw[int(c)] for c in y], np.float32), batch_size=24, epochs=1,
               shuffle=False, verbose=0)
    assert h.history == pytest.approx(h2.history)
    for a, b in zip(by_class, m.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    onehot = np.eye(3, dtype=np.float32)[y.astype(int)]
    m.compile(k.optimizers.SGD(0.1), "categorical_crossentropy")
    m.fit(x, onehot, class_weight=cw, epochs=1, verbose=0)  # one-hot labels: the class is the argmax
    with pytest.raises(ValueError, match="class_weight has no weight for classes \\[2\\]"):
        m.fit(x, onehot, class_weight={0: 1.0, 1: 2.0}, verbose=0)
    with pytest.raises(ValueError, match="sample_weight of shape"):
        m.fit(x, onehot, sample_weight=np.ones(5), verbose=0)


def test_validation_weights(tnt):
    k = tnt.keras
    x, y = toy_data(30)
    w = np.linspace(0.5, 1.5, 30).astype(np.float32)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.0), "sparse_categorical_crossentropy")  # lr 0: the weights stay
    h = m.fit(x[:20], y[:20], validation_data=(x[20:], y[20:], w[20:]), epochs=1, verbose=0)
    assert h.history["val_loss"][0] == pytest.approx(m.evaluate(x[20:], y[20:], sample_weight=w[20:], verbose=0),
                                                     rel=1e-6)
    h = m.fit(x, y, sample_weight=w, validation_split=1 / 3, epochs=1, verbose=0)  # Keras splits the weights
    assert h.history["val_loss"][0] == pytest.approx(m.evaluate(x[20:], y[20:], sample_weight=w[20:], verbose=0),
                                                     rel=1e-6)


def test_weighted_metric_functions_of_the_user(tnt):
    """A metric function (traced) in metrics is unweighted, in weighted_metrics weighted, as is a
    Metric class."""
    k = tnt.keras
    from tarantella.keras import ops

    def abs_err(y_true, y_pred):
        return ops.mean(ops.abs(y_pred - y_true), axis=-1)

    inp = k.Input((4,))
    m = k.Model(inp, k.layers.Dense(2)(inp))
    m.compile("sgd", "mse", metrics=[abs_err], weighted_metrics=[abs_err, "mae"])
    x = np.random.default_rng(4).standard_normal((12, 4)).astype(np.float32)
    y = np.ones((12, 2), np.float32)
    w = np.linspace(0.0, 3.0, 12).astype(np.float32)
    logs = m.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0, return_dict=True)
    per = np.abs(m.predict(x, verbose=0) - y).mean(axis=1)
    assert logs["abs_err"] == pytest.approx(per.mean(), rel=1e-5)
    assert logs["weighted_abs_err"] == pytest.approx(np.sum(w * per) / w.sum(), rel=1e-5)
    assert logs["mae"] == pytest.approx(np.sum(w * per) / w.sum(), rel=1e-5)

    class Total(k.metrics.Metric):
        def __init__(self, name="total", **kw):
            super().__init__(name=name, **kw)
            self.t = self.add_weight(name="t", initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            per = ops.sum(y_pred, axis=-1)
            self.t.assign_add(ops.sum(per if sample_weight is None else per * sample_weight))

        def result(self):
            return self.t

    # a Metric class in weighted_metrics gets the sample weights in update_state (test_metric_sample_weights)
    m.compile("sgd", "mse", weighted_metrics=[Total()])
    logs = m.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0, return_dict=True)
    assert logs["total"] == pytest.approx(np.sum(w * m.predict(x, verbose=0).sum(axis=1)), rel=1e-5)
