"""Round trips between Python and the C programs: a model built and trained in Python, saved,
predicts the same in tnt-predict; tnt-train trains it as fit does in Python; the model tnt-train
saves loads in Python, predicts as tnt-predict does and resumes training as tnt-train does."""
import os

import numpy as np
import pytest

from conftest import BIN, run


def build(tnt):
    k, L = tnt.keras, tnt.keras.layers
    inp = k.Input(shape=(8, 8, 1), name="image")
    x = L.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = L.MaxPooling2D()(x)
    x = L.Flatten()(x)
    x = L.Dropout(0.25)(x)
    out = L.Dense(3, activation="softmax")(x)
    return k.Model(inp, out, name="small_cnn")


def data(n=96):
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (n, 8, 8, 1)).astype(np.float32)
    y = (x[:, :4].mean(axis=(1, 2, 3)) * 6).astype(np.int64) % 3
    return x, y.astype(np.float32)


def c_predict(model, x_path, tmp_path, *extra):
    out = tmp_path / "c_out.npy"
    run([os.path.join(BIN, "tnt-predict"), str(model), str(x_path), str(out)] + list(extra),
        env={"OMP_NUM_THREADS": "1"})
    return np.load(out)


def test_python_model_in_c_and_back(tnt, tmp_path):
    x, y = data()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    m = build(tnt)
    m.compile(tnt.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(x, y, batch_size=16, epochs=2, verbose=0)
    p = m.predict(x, batch_size=32, verbose=0)
    for name in ("m.h5", "m.keras"):
        m.save(tmp_path / name)
        np.testing.assert_array_equal(c_predict(tmp_path / name, tmp_path / "x.npy", tmp_path), p)
    (tmp_path / "m.json").write_text(m.to_json())
    m.save_weights(tmp_path / "w.h5")
    np.testing.assert_array_equal(
        c_predict(tmp_path / "m.json", tmp_path / "x.npy", tmp_path, "--weights", str(tmp_path / "w.h5")), p)

    # tnt-train on the JSON model and weights = fit in Python from the same start
    train = [os.path.join(BIN, "tnt-train"), str(tmp_path / "m.json"), "--weights", str(tmp_path / "w.h5"),
             "--data", f"npy:{tmp_path / 'x.npy'},{tmp_path / 'y.npy'}", "--epochs", "2", "--batch_size", "16",
             "--loss", "sparse_categorical_crossentropy", "--optimizer", "adam", "--learning_rate", "1e-3",
             "--metrics", "accuracy", "--verbose", "0", "--save", str(tmp_path / "c.h5")]
    run(train, env={"OMP_NUM_THREADS": "1"})
    py = tnt.keras.models.model_from_json((tmp_path / "m.json").read_text())
    py.load_weights(tmp_path / "w.h5")
    py.compile(tnt.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    py.fit(x, y, batch_size=16, epochs=2, verbose=0)  # shuffled with the same default seed, 42
    c = tnt.keras.models.load_model(tmp_path / "c.h5")
    for a, b in zip(py.get_weights(), c.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert c.optimizer.iterations == py.optimizer.iterations == 2 * 6

    # the C-trained model in Python predicts as tnt-predict does
    pc = c.predict(x, verbose=0)
    np.testing.assert_array_equal(c_predict(tmp_path / "c.h5", tmp_path / "x.npy", tmp_path), pc)

    # and resumes training (optimizer state from the file) as tnt-train resumes it
    resume = [os.path.join(BIN, "tnt-train"), str(tmp_path / "c.h5"), "--data",
              f"npy:{tmp_path / 'x.npy'},{tmp_path / 'y.npy'}", "--epochs", "1", "--batch_size", "16",
              "--verbose", "0", "--save", str(tmp_path / "c2.keras")]
    run(resume, env={"OMP_NUM_THREADS": "1"})
    c.fit(x, y, batch_size=16, epochs=1, verbose=0)
    c2 = tnt.keras.models.load_model(tmp_path / "c2.keras")
    for a, b in zip(c.get_weights(), c2.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
