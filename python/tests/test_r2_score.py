"""keras.metrics.R2Score (Keras 3, tf.keras 2.13+) and compile's metrics=["r2_score"]: the figures
of evaluate and of the metric on arrays against scikit-learn's r2_score (an independent reference),
for one and several output columns, both aggregations, sample weights and the adjusted R2."""
import numpy as np
import pytest
from sklearn.metrics import r2_score


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _model(k, outputs, metrics, weighted=None, seed=0):
    m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(outputs)])
    rng = np.random.default_rng(seed)
    m.set_weights([rng.standard_normal((3, outputs)).astype(np.float32), np.zeros(outputs, np.float32)])
    m.compile("sgd", "mse", metrics=metrics, weighted_metrics=weighted)
    return m


def test_r2_of_evaluate_and_fit_logs(k):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((48, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + rng.normal(0, 0.3, 48)).astype(np.float32)
    m = _model(k, 1, ["r2_score"])
    p = m.predict(x, verbose=0)[:, 0]
    logs = m.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)  # state summed over 3 batches
    assert logs["r2_score"] == pytest.approx(r2_score(y, p), rel=1e-5)
    h = m.fit(x, y, batch_size=48, epochs=1, verbose=0)  # one batch: the figure before its update
    assert h.history["r2_score"][0] == pytest.approx(r2_score(y, p), rel=1e-5)


def test_columns_aggregations_weights_and_adjusted(k):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 3)).astype(np.float32)
    y = (x @ rng.standard_normal((3, 2)) * np.array([1.0, 5.0]) + rng.normal(0, 1, (40, 2))).astype(np.float32)
    w = rng.uniform(0.1, 2.0, 40).astype(np.float32)
    uniform = k.metrics.R2Score()
    varw = k.metrics.R2Score(class_aggregation="variance_weighted_average", name="r2_var")
    m = _model(k, 2, [uniform, varw], weighted=[k.metrics.R2Score(name="r2_w")])
    p = m.predict(x, verbose=0)
    logs = m.evaluate(x, y, sample_weight=w, batch_size=8, verbose=0, return_dict=True)
    assert logs["r2_score"] == pytest.approx(r2_score(y, p), rel=1e-5)
    assert logs["r2_var"] == pytest.approx(r2_score(y, p, multioutput="variance_weighted"), rel=1e-5)
    assert logs["r2_w"] == pytest.approx(r2_score(y, p, sample_weight=w), rel=1e-5)
    per = k.metrics.R2Score(class_aggregation=None)
    per.update_state(y[:25], p[:25])
    per.update_state(y[25:], p[25:])
    np.testing.assert_allclose(per.result(), r2_score(y, p, multioutput="raw_values"), rtol=1e-5)
    adj = k.metrics.R2Score(num_regressors=3)
    adj.update_state(y[:, :1], p[:, :1])
    r2 = r2_score(y[:, 0], p[:, 0])
    assert float(adj.result()) == pytest.approx(1 - (1 - r2) * (40 - 1) / (40 - 3 - 1), rel=1e-5)
    with pytest.raises(ValueError, match="class_aggregation"):
        k.metrics.R2Score(class_aggregation="median")
