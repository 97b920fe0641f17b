"""Keras files in Python: files written by Keras itself (tests/fixtures/keras_real) load and
predict as an independent PyTorch rebuild does, and examples/python/keras_file.py trains one
data-parallel and saves it, the same on 1 and 2 ranks."""
import os
import struct

import numpy as np
import pytest

from conftest import REPO, launch, python, run

REAL = os.path.join(REPO, "tests", "fixtures", "keras_real")
EXAMPLE = os.path.join(REPO, "examples", "python", "keras_file.py")
FILES = {"cnn_batch_norm.h5": "cnn_batch_norm", "optimizers_adam.h5": "optimizers_adam",
         "lstm_functional.h5": "lstm_functional", "tfkeras_rnn_135.h5": "tfkeras_rnn_135",
         "masking_two_lstm.h5": "masking_two_lstm", "conv1d_l2_regularized.h5": "conv1d_l2_regularized",
         "tfkeras_misc_0.h5": "tfkeras_misc_0", "flownet_final.keras": "flownet_final"}


def load_bin(path):
    """The fixtures' tensors: "TNTF", int32 ndim, int64 dims, float32 data."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b"TNTF"
    nd = struct.unpack_from("<i", raw, 4)[0]
    dims = struct.unpack_from(f"<{nd}q", raw, 8)
    return np.frombuffer(raw, "<f4", offset=8 + 8 * nd).reshape(dims)


@pytest.mark.parametrize("name", sorted(FILES))
def test_real_keras_files_predict(tnt, name):
    m = tnt.keras.models.load_model(os.path.join(REAL, name), compile=True)
    x, y = load_bin(os.path.join(REAL, FILES[name] + "_x.bin")), load_bin(os.path.join(REAL, FILES[name] + "_y.bin"))
    np.testing.assert_allclose(m.predict_on_batch(x), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict(x, verbose=0), y, rtol=1e-5, atol=1e-6)


def test_keras_file_example_one_and_two_ranks(tnt, tmp_path):
    src = os.path.join(REAL, "optimizers_adam.h5")
    args = [EXAMPLE, src, "--epochs", "2", "--batch_size", "32", "--samples", "128", "--verbose", "0"]
    run(python(args + ["--save", str(tmp_path / "one.keras")]), env={"OMP_NUM_THREADS": "1"})
    out = launch(2, python(args + ["--save", str(tmp_path / "two.h5")])).stdout
    assert "saved" in out and out.count("history:") == 1  # the master prints
    one = tnt.keras.models.load_model(tmp_path / "one.keras")
    two = tnt.keras.models.load_model(tmp_path / "two.h5")
    base = tnt.keras.models.load_model(src)
    assert one.optimizer.iterations == two.optimizer.iterations == base.optimizer.iterations + 2 * 4
    for a, b, c in zip(one.get_weights(), two.get_weights(), base.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert not np.array_equal(a, c)


def test_keras3_object_names(tnt, tmp_path):
    """Initializers and regularizers with parameters, under Keras's names: Identity(gain) draws
    gain * eye, a .keras file names them as Keras 3.3 does (IdentityInitializer, module objects),
    and OrthogonalRegularizer adds Keras's penalty to the loss (formula in NumPy)."""
    import json
    import zipfile
    keras = tnt.keras
    init, reg = keras.initializers, keras.regularizers
    m = keras.Sequential([keras.Input((6,)),
                          keras.layers.Dense(5, kernel_initializer=init.IdentityInitializer(gain=2.0),
                                             bias_initializer=init.Constant(0.5),
                                             kernel_regularizer=reg.OrthogonalRegularizer(0.1, "columns")),
                          keras.layers.Dense(2, kernel_initializer=init.TruncatedNormal(stddev=0.02))])
    k, b = m.get_weights()[:2]
    np.testing.assert_array_equal(k, 2.0 * np.eye(6, 5))
    np.testing.assert_array_equal(b, np.full(5, 0.5))
    assert np.all(np.abs(m.get_weights()[2]) <= 0.04 + 1e-7)
    path = str(tmp_path / "m.keras")
    m.save(path)
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read("config.json"))
    dense = cfg["config"]["layers"][1]["config"]
    assert dense["kernel_initializer"] == {"module": "keras.initializers", "class_name": "IdentityInitializer",
                                           "config": {"gain": 2}, "registered_name": None}
    assert dense["kernel_regularizer"]["module"] == "keras.regularizers"
    assert dense["kernel_regularizer"]["config"] == {"factor": 0.1, "mode": "columns"}
    m.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((4, 6), np.float32), np.zeros((4, 2), np.float32)
    w = np.random.default_rng(1).uniform(-1, 1, (6, 5)).astype(np.float32)
    m.set_weights([w] + m.get_weights()[1:])
    n = w / np.sqrt(np.maximum((w.astype(np.float64) ** 2).sum(axis=0, keepdims=True), 1e-12))
    g = n.T @ n * (1 - np.eye(5))
    penalty = 0.1 * 0.5 * np.abs(g).sum() / (5 * 4 / 2)
    pred = m.predict(x)
    data = float(np.mean((pred - y) ** 2))
    assert abs(m.evaluate(x, y, verbose=0) - (data + penalty)) < 1e-5


def test_integer_ids(tnt):
    """A Keras file whose InputLayer is int32 predicts from an int32 array as the NumPy rebuild of
    gen_keras_int_ids.py; integers float32 cannot hold exactly (beyond 2^24) are refused."""
    fix = os.path.join(REPO, "tests", "fixtures")
    m = tnt.keras.models.load_model(os.path.join(fix, "int_ids_functional.h5"), compile=False)
    ids = load_bin(os.path.join(fix, "int_ids_functional_x.bin")).astype(np.int32)
    want = load_bin(os.path.join(fix, "int_ids_functional_y.bin"))
    np.testing.assert_allclose(m.predict(ids, verbose=0), want, rtol=1e-5, atol=1e-5)
    big = ids.astype(np.int64)
    big[0, 0] = (1 << 24) + 1
    with pytest.raises(ValueError, match="2\\^24"):
        m.predict(big, verbose=0)
