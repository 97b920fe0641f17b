"""keras.wrappers.scikit_learn (Keras 2 up to 2.11): KerasClassifier and KerasRegressor as
scikit-learn estimators, checked against Keras's documented behaviour with NumPy and
scikit-learn (python3-sklearn) as the references."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0)


def _builder(k, out=1, act="sigmoid", loss="binary_crossentropy"):
    def build(units=4):
        m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(units, activation="tanh"),
                          k.layers.Dense(out, activation=act)])
        m.compile("adam", loss, metrics=["accuracy"])
        return m
    return build


def test_parameters_go_to_build_fn_or_fit_and_typos_are_refused(k):
    from tarantella.keras.wrappers.scikit_learn import KerasClassifier
    build = _builder(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        est = KerasClassifier(build_fn=build, units=5, epochs=2, batch_size=8, verbose=0)
        with pytest.raises(ValueError, match="epohcs is not a legal parameter"):
            KerasClassifier(build_fn=build, epohcs=2)
        twin = clone(est)
    assert est.get_params() == {"build_fn": build, "units": 5, "epochs": 2, "batch_size": 8, "verbose": 0}
    assert twin.get_params() == est.get_params() and twin is not est
    x, y = _data()
    history = est.fit(x, y)
    assert len(history.history["loss"]) == 2  # epochs=2 reached fit
    assert est.model.get_weights()[0].shape == (3, 5)  # units=5 reached build_fn
    assert est.set_params(units=3) is est and est.sk_params["units"] == 3


def test_classifier_labels_probabilities_and_score(k):
    """classes_ are the sorted labels; predict maps the model's outputs back to them (argmax, or
    p > 0.5 for one sigmoid), predict_proba gives [1 - p, p], score is evaluate's accuracy."""
    from tarantella.keras.wrappers.scikit_learn import KerasClassifier
    x, yb = _data()
    labels = np.where(yb, "spam", "ham")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        est = KerasClassifier(build_fn=_builder(k), epochs=1, verbose=0)
    est.fit(x, labels)
    assert list(est.classes_) == ["ham", "spam"] and est.n_classes_ == 2
    p = est.model.predict(x, verbose=0)
    np.testing.assert_allclose(est.predict_proba(x, verbose=0), np.hstack([1 - p, p]), rtol=1e-6)
    np.testing.assert_array_equal(est.predict(x, verbose=0), np.array(["ham", "spam"])[(p > 0.5).astype(int)])
    acc = np.mean((p[:, 0] > 0.5) == yb)
    assert est.score(x, labels) == pytest.approx(acc, abs=1e-6)

    three = np.arange(40) % 3  # integer labels, softmax and categorical cross-entropy: one-hot for fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        est = KerasClassifier(build_fn=_builder(k, 3, "softmax", "categorical_crossentropy"), epochs=1, verbose=0)
    est.fit(x, three + 10)
    assert list(est.classes_) == [10, 11, 12]
    q = est.model.predict(x, verbose=0)
    np.testing.assert_array_equal(est.predict(x, verbose=0), q.argmax(-1) + 10)
    assert est.score(x, three + 10) == pytest.approx(np.mean(q.argmax(-1) == three), abs=1e-6)


def test_regressor_and_scikit_learn_model_selection(k):
    """KerasRegressor: predict squeezes the outputs, score is minus the loss (mse here); both
    estimators run in cross_val_score and GridSearchCV (clone, set_params, fit, score)."""
    from tarantella.keras.wrappers.scikit_learn import KerasClassifier, KerasRegressor
    x, yb = _data()
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)

    def build(units=4):
        m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(units, activation="tanh"), k.layers.Dense(1)])
        m.compile("adam", "mse")
        return m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        reg = KerasRegressor(build_fn=build, epochs=1, batch_size=8, verbose=0)
        reg.fit(x, y)
        pred = reg.predict(x)
        assert pred.shape == (40,)
        assert reg.score(x, y) == pytest.approx(-np.mean((pred - y) ** 2), rel=1e-5)
        scores = cross_val_score(reg, x, y, cv=KFold(4))
        assert scores.shape == (4,) and np.all(scores < 0)
        clf = KerasClassifier(build_fn=_builder(k), epochs=1, batch_size=8, verbose=0)
        search = GridSearchCV(clf, {"units": [2, 3]}, cv=KFold(2)).fit(x, yb)
    assert search.best_params_["units"] in (2, 3)
    assert np.all((search.cv_results_["mean_test_score"] >= 0) & (search.cv_results_["mean_test_score"] <= 1))
