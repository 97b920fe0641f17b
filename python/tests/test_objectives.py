"""Every loss and metric on outputs of rank 3 and 4 against Keras's formulas (objectives_ref.py,
NumPy): the loss and metric values of evaluate, the logs' names, the loss gradient against
finite differences, and on 1, 2 and 3 ranks (batches smaller than the ranks included) the same
figures as serial."""
import json
import os

import numpy as np
import pytest

import objectives_ref as R
from conftest import HERE, launch, python
from objectives_cases import CASES, data, metrics, model

JOB = os.path.join(HERE, "objectives_job.py")


def expected_metric(spec, loss, y, p):
    """Keras's value of one metric of CASES, from the predictions p."""
    name, kw = (spec if isinstance(spec, tuple) else (spec, {}))
    kind = CASES[loss][1]
    if name in ("accuracy", "acc"):
        name = "binary_accuracy" if p.shape[-1] == 1 else ("sparse_categorical_accuracy" if kind == "sparse"
                                                           else "categorical_accuracy")
    t = kw.get("thresholds") or 0.5
    cm = R.confusion(y, p, t[0] if isinstance(t, list) else t) if p.shape == y.shape else None
    div_no_nan = lambda a, b: a / b if b else 0.0  # noqa: E731
    table = {
        "categorical_accuracy": lambda: R.categorical_accuracy(y, p),
        "sparse_categorical_accuracy": lambda: R.sparse_categorical_accuracy(y, p),
        "binary_accuracy": lambda: R.binary_accuracy(y, p),
        "BinaryAccuracy": lambda: R.binary_accuracy(y, p, kw["threshold"]),
        "TopKCategoricalAccuracy": lambda: R.top_k(y, p, kw["k"]),
        "SparseTopKCategoricalAccuracy": lambda: R.top_k(np.eye(p.shape[-1])[y.astype(int)], p, kw["k"]),
        "Precision": lambda: div_no_nan(cm["tp"], cm["tp"] + cm["fp"]),
        "Recall": lambda: div_no_nan(cm["tp"], cm["tp"] + cm["fn"]),
        "TruePositives": lambda: cm["tp"], "FalsePositives": lambda: cm["fp"],
        "TrueNegatives": lambda: cm["tn"], "FalseNegatives": lambda: cm["fn"],
        "RootMeanSquaredError": lambda: np.sqrt(R.mean_squared_error(y, p).mean()),
        "cosine_similarity": lambda: -R.cosine_similarity(y, p).mean(),
        "AUC": lambda: R.auc(y, p, kw.get("num_thresholds", 200), kw.get("curve", "ROC")),
    }
    if name.endswith(("AtRecall", "AtPrecision", "AtSpecificity", "AtSensitivity")):
        return R.at_target(y, p, name, list(kw.values())[0])
    aliases = {"mae": "mean_absolute_error", "mse": "mean_squared_error", "kld": "kl_divergence",
               "logcosh": "log_cosh", "mape": "mean_absolute_percentage_error",
               "msle": "mean_squared_logarithmic_error"}
    if name in table:
        return float(table[name]())
    return float(R.LOSSES[aliases.get(name, name)](y, p).mean())


def log_name(spec):
    if not isinstance(spec, tuple):
        return spec
    name, kw = spec
    if "name" in kw:
        return kw["name"]
    import re
    if name == "AUC":
        return "auc"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("loss", sorted(CASES))
def test_loss_and_metrics_match_keras_formulas(tnt, loss, rank):
    k = tnt.keras
    x, y = data(loss, rank)
    m = model(k, loss, rank)
    m.compile(k.optimizers.SGD(0.1), loss=loss, metrics=metrics(k, loss))
    p = m.predict(x, batch_size=8, verbose=0).astype(np.float64)
    assert p.shape == y.shape or (CASES[loss][1] == "sparse" and p.shape[:-1] == y.shape)
    logs = m.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    want = {"loss": float(R.LOSSES[loss](y.astype(np.float64), p).mean())}
    for spec in CASES[loss][2]:
        want[log_name(spec)] = expected_metric(spec, loss, y.astype(np.float64), p)
    assert set(logs) == set(want), (sorted(logs), sorted(want))
    for key, v in want.items():
        assert logs[key] == pytest.approx(v, rel=2e-5, abs=2e-6), (key, logs[key], v)


def test_categorical_crossentropy_per_time_step_is_keras(tnt):
    """The issue's case: a softmax per time step with one-hot targets (batch, steps, classes)."""
    k = tnt.keras
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 10, 8)).astype(np.float32)
    y = np.eye(12, dtype=np.float32)[rng.integers(0, 12, (64, 10))]
    inp = k.Input((10, 8))
    m = k.Model(inp, k.layers.Dense(12, activation="softmax")(inp))
    m.compile("adam", "categorical_crossentropy", metrics=["accuracy"])
    p = m.predict(x, verbose=0).astype(np.float64)
    logs = m.evaluate(x, y, verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(R.categorical_crossentropy(y, p).mean(), rel=1e-5)
    assert logs["loss"] < 4  # log(12) = 2.48 for a near-uniform softmax, not 15
    assert logs["accuracy"] == pytest.approx(R.categorical_accuracy(y, p), abs=1e-7)


@pytest.mark.parametrize("loss", ["categorical_crossentropy", "kl_divergence", "hinge", "categorical_hinge",
                                  "huber", "log_cosh", "poisson", "mean_absolute_percentage_error",
                                  "mean_squared_logarithmic_error", "cosine_similarity", "squared_hinge"])
def test_loss_gradient_matches_finite_differences(tnt, loss):
    """One SGD step (lr 1) moves the output bias by minus the loss gradient; central differences of
    the loss that evaluate reports give the same."""
    k = tnt.keras
    x, y = data(loss, 3)
    m = model(k, loss, 3)
    m.compile(k.optimizers.SGD(1.0), loss=loss)
    w0 = m.get_weights()
    bias = len(w0) - 1
    fd = np.zeros(w0[bias].shape)
    h = 1e-3
    for j in range(fd.size):
        vals = []
        for sgn in (1, -1):
            w = [a.copy() for a in w0]
            w[bias][j] += sgn * h
            m.set_weights(w)
            vals.append(m.evaluate(x, y, batch_size=N_ALL, verbose=0))
        fd[j] = (vals[0] - vals[1]) / (2 * h)
    m.set_weights(w0)
    m.fit(x, y, batch_size=N_ALL, epochs=1, shuffle=False, verbose=0)
    grad = w0[bias] - m.get_weights()[bias]
    np.testing.assert_allclose(grad, fd, rtol=2e-2, atol=2e-3)


N_ALL = 22


def test_metric_names_are_keras_log_names(tnt):
    k = tnt.keras
    x, y = data("mean_squared_error", 3)
    m = model(k, "mean_squared_error", 3)
    m.compile("sgd", "mse", metrics=["mae", "mse", k.metrics.MeanAbsoluteError(),
                                     k.metrics.RootMeanSquaredError(name="rmse")])
    h = m.fit(x, y, validation_data=(x, y), epochs=1, verbose=0)
    assert sorted(h.history) == sorted(["loss", "mae", "mse", "mean_absolute_error", "rmse", "val_loss", "val_mae",
                                        "val_mse", "val_mean_absolute_error", "val_rmse"])
    assert m.metrics_names == ["loss", "mae", "mse", "mean_absolute_error", "rmse"]


def test_unsupported_options_are_named(tnt):
    k = tnt.keras
    with pytest.raises(NotImplementedError, match="top_k"):
        k.metrics.Precision(top_k=2)
    with pytest.raises(NotImplementedError, match="MeanIoU"):
        k.metrics.MeanIoU(3)
    with pytest.raises(NotImplementedError, match="multi_label"):
        k.metrics.AUC(multi_label=True)
    with pytest.raises(ValueError, match="delta"):
        k.losses.Huber(delta=0)


def job(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=400)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_distributed_equals_serial(tmp_path):
    """fit (2 epochs, batches of 8 with a last batch of 6; and batches of 2 and 1, smaller than the
    ranks, where some ranks have no sample) and evaluate of every loss with its metrics, on 1, 2 and
    3 ranks: the same figures on every rank, equal to one rank's."""
    (one,) = job(tmp_path, 1)
    for ranks in (2, 3):
        res = job(tmp_path, ranks)
        for r in res[1:]:
            assert r["figures"] == res[0]["figures"]
        for case, figs in one["figures"].items():
            got = res[0]["figures"][case]
            assert set(got) == set(figs), case
            for key in figs:
                # figures within 1e-6; float32 weights differ by the gradient sums' rounding order
                tol = 1e-5 if key == "weights" else 1e-6
                np.testing.assert_allclose(got[key], figs[key], rtol=tol, atol=tol / 10,
                                           err_msg=f"{case} {key} on {ranks} ranks")


def test_metric_constructors_take_keras_positional_arguments(tnt):
    M = tnt.keras.metrics
    assert M.TopKCategoricalAccuracy(3)._c_name() == "top_k_categorical_accuracy=top_k_categorical_accuracy:3"
    assert M.SparseTopKCategoricalAccuracy(2, name="top2")._c_name() == "top2=sparse_top_k_categorical_accuracy:2"
    assert M.Precision(0.3).thresholds == 0.3 and M.Recall(name="r").name == "r"
    assert M.TruePositives(0.7)._c_name() == "true_positives=true_positives:0.7"
    assert M.BinaryAccuracy("ba", None, 0.2)._c_name() == "ba=binary_accuracy:0.2"
    assert M.AUC(50, "PR")._c_name() == "auc=pr_auc:50"
    with pytest.raises(TypeError, match="multiple values"):
        M.TopKCategoricalAccuracy(3, k=4)


def test_loss_and_metric_objects_outside_fit(tnt):
    """Keras's objects used directly: loss(y_true, y_pred[, sample_weight]) is the weighted mean
    (sum w l / n); a metric accumulates update_state over batches until reset_state; the loss
    functions give the per-sample values."""
    k = tnt.keras
    x, y = data("binary_crossentropy", 3)
    p = 1 / (1 + np.exp(-np.random.default_rng(1).standard_normal(y.shape)))
    w = np.linspace(0, 1, len(y))
    per = R.binary_crossentropy(y, p)
    assert float(k.losses.BinaryCrossentropy()(y, p)) == pytest.approx(per.mean(), rel=1e-5)
    assert k.losses.BinaryCrossentropy()(y, p, sample_weight=w).numpy() == pytest.approx(np.sum(w * per) / len(y),
                                                                                       rel=1e-5)
    np.testing.assert_allclose(k.losses.binary_crossentropy(y, p), per, rtol=1e-5)
    assert k.losses.mse == "mean_squared_error"  # still the name compile reads
    auc = k.metrics.AUC()
    auc.update_state(y[:10], p[:10])
    auc.update_state(y[10:], p[10:])
    assert float(auc.result()) == pytest.approx(R.auc(y, p), rel=1e-6)
    auc.reset_state()
    assert float(auc(y[:5], p[:5])) == pytest.approx(R.auc(y[:5], p[:5]), rel=1e-6)
    acc = k.metrics.SparseCategoricalAccuracy()
    yl = np.array([0, 2, 1, 1], np.float32)
    pl = np.eye(3, dtype=np.float32)[[0, 1, 1, 2]]
    assert acc(yl, pl, sample_weight=[1, 1, 2, 0]).numpy() == pytest.approx(3 / 4)
    prec = k.metrics.Precision(thresholds=0.4)
    prec.update_state(y, p)
    cm = R.confusion(y, p, 0.4)
    assert float(prec.result()) == pytest.approx(cm["tp"] / (cm["tp"] + cm["fp"]), rel=1e-6)
