"""compile's settings come back with a saved model, as Keras restores them from the file's
training_config (.h5) or compile_config (.keras): weighted_metrics (weighted by the sample weights
again, logged "weighted_<name>" where a plain metric has the name, and written under the names
compile was given, as Keras writes them), metrics per output, and Tarantella's compile seed.
Expected values: NumPy, Keras's formulas (a weighted metric is sum(w v) / sum(w); the loss
sum(w l) / n)."""
import json
import zipfile

import h5py
import numpy as np
import pytest

from tarantella import keras


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 4)).astype(np.float32)
    y = (x[:, 0] + 0.3 * x[:, 1] > 0).astype(np.float32)
    return x, y, np.linspace(0.1, 2.0, 20).astype(np.float32)


def model():
    inp = keras.Input((4,))
    m = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(inp))
    m.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"],
              weighted_metrics=["accuracy", "sparse_categorical_crossentropy"], seed=7)
    return m


@pytest.mark.parametrize("suffix", [".h5", ".keras"])
def test_weighted_metrics_and_seed_restored(tnt, tmp_path, suffix):
    x, y, w = data()
    m = model()
    p = m.predict(x, verbose=0)
    correct = (p.argmax(1) == y).astype(np.float64)
    ce = -np.log(p[np.arange(len(y)), y.astype(int)].astype(np.float64))
    expected = {"loss": (w * ce).sum() / len(y), "accuracy": correct.mean(),
                "weighted_accuracy": (w * correct).sum() / w.sum(),
                "sparse_categorical_crossentropy": (w * ce).sum() / w.sum()}
    before = m.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    assert set(before) == set(expected)
    for k in expected:
        np.testing.assert_allclose(before[k], expected[k], rtol=1e-5, err_msg=k)
    path = str(tmp_path / f"m{suffix}")
    m.save(path)
    if suffix == ".h5":
        with h5py.File(path, "r") as f:
            config = json.loads(f.attrs["training_config"])
    else:
        config = json.loads(zipfile.ZipFile(path).read("config.json"))["compile_config"]
        assert "tnt_seed" not in config  # Keras 3 compiles with every key of it: the seed is in metadata.json
    assert config["weighted_metrics"] == ["accuracy", "sparse_categorical_crossentropy"]  # as Keras writes them
    loaded = keras.models.load_model(path)
    after = loaded.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    assert list(after) == list(before)
    for k in expected:
        np.testing.assert_allclose(after[k], expected[k], rtol=1e-5, err_msg=k)
    assert loaded._handle().compile_info()["seed"] == 7


def test_weighted_metrics_per_output_restored(tnt, tmp_path):
    inp = keras.Input((4,))
    m = keras.Model(inp, [keras.layers.Dense(1, name="a")(inp), keras.layers.Dense(2, name="b")(inp)])
    m.compile("sgd", ["mse", "mae"], metrics={"a": ["mae"]}, weighted_metrics={"a": ["mae"], "b": ["mse"]})
    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 4)).astype(np.float32)
    ys = [rng.standard_normal((10, 1)).astype(np.float32), rng.standard_normal((10, 2)).astype(np.float32)]
    w = np.arange(1, 11, dtype=np.float32)
    before = m.evaluate(x, ys, sample_weight=w, verbose=0, return_dict=True)
    pa, pb = m.predict(x, verbose=0)
    mae_a = np.abs(pa - ys[0]).mean(axis=1)
    np.testing.assert_allclose(before["a_weighted_mae"], (w * mae_a).sum() / w.sum(), rtol=1e-5)
    np.testing.assert_allclose(before["a_mae"], mae_a.mean(), rtol=1e-5)
    np.testing.assert_allclose(before["b_mse"], (w * ((pb - ys[1]) ** 2).mean(axis=1)).sum() / w.sum(), rtol=1e-5)
    path = str(tmp_path / "two.h5")
    m.save(path)
    after = keras.models.load_model(path).evaluate(x, ys, sample_weight=w, verbose=0, return_dict=True)
    assert set(after) == set(before)
    for k in before:
        np.testing.assert_allclose(after[k], before[k], rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("suffix", [".h5", ".keras"])
def test_metric_objects_with_names_and_parameters_restored(tnt, tmp_path, suffix):
    """Keras writes a metric object as {"class_name", "config"}: its name and parameters come back."""
    x, y, _ = data()
    inp = keras.Input((4,))
    m = keras.Model(inp, keras.layers.Dense(1, activation="sigmoid")(inp))
    M = keras.metrics
    m.compile("adam", "binary_crossentropy", metrics=[M.AUC(name="my_auc", num_thresholds=50), M.Precision(thresholds=0.3),
                                                       M.RecallAtPrecision(0.6), "acc"])
    p = m.predict(x, verbose=0).reshape(-1)
    before = m.evaluate(x, y, verbose=0, return_dict=True)
    assert list(before) == ["loss", "my_auc", "precision", "recall_at_precision", "acc"]
    positive = p > 0.3
    np.testing.assert_allclose(before["precision"], (positive & (y > 0)).sum() / positive.sum(), rtol=1e-6)
    path = str(tmp_path / f"m{suffix}")
    m.save(path)
    after = keras.models.load_model(path).evaluate(x, y, verbose=0, return_dict=True)
    assert list(after) == list(before)
    for k in before:
        np.testing.assert_allclose(after[k], before[k], rtol=1e-6, err_msg=k)
    if suffix == ".h5":  # as Keras writes a Precision(thresholds=0.3), and reads back Keras's own list form
        with h5py.File(path, "r+") as f:
            config = json.loads(f.attrs["training_config"])
            assert config["metrics"][1]["class_name"] == "Precision"
            assert config["metrics"][1]["config"]["thresholds"] == pytest.approx(0.3)
            config["metrics"][1]["config"]["thresholds"] = [0.3]
            f.attrs["training_config"] = json.dumps(config)
        again = keras.models.load_model(path).evaluate(x, y, verbose=0, return_dict=True)
        np.testing.assert_allclose(again["precision"], before["precision"], rtol=1e-6)


def test_keras_written_loss_objects_per_output(tnt, tmp_path):
    """Keras writes the losses compile was given as objects ({"class_name", "config"}) per output;
    loss_weights come back too. Expected: NumPy's MSE and cross-entropy, weighted 0.3 and 2."""
    inp = keras.Input((4,))
    m = keras.Model(inp, [keras.layers.Dense(1, name="a")(inp), keras.layers.Dense(2, activation="softmax", name="b")(inp)])
    m.compile("adam", loss=["mse", "categorical_crossentropy"], loss_weights=[0.3, 2.0])
    x = np.random.default_rng(5).standard_normal((20, 4)).astype(np.float32)
    ys = [x[:, :1] * 2, np.eye(2, dtype=np.float32)[(x[:, 0] > 0).astype(int)]]
    path = str(tmp_path / "two.h5")
    m.save(path)
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["training_config"])
        config["loss"] = [{"class_name": "MeanSquaredError", "config": {"reduction": "auto", "name": "mean_squared_error"}},
                          {"class_name": "CategoricalCrossentropy",
                           "config": {"reduction": "auto", "name": "categorical_crossentropy", "from_logits": False,
                                      "label_smoothing": 0.0, "axis": -1}}]
        f.attrs["training_config"] = json.dumps(config)
    loaded = keras.models.load_model(path)
    pa, pb = loaded.predict(x, verbose=0)
    a = ((pa - ys[0]) ** 2).mean()
    b = -(ys[1] * np.log(np.clip(pb, 1e-7, 1))).sum(axis=1).mean()
    got = loaded.evaluate(x, ys, verbose=0, return_dict=True)
    np.testing.assert_allclose([got["a_loss"], got["b_loss"], got["loss"]], [a, b, 0.3 * a + 2 * b], rtol=1e-5)
