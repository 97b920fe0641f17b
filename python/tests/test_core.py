"""The extension and the basics: rank API, files, weights, compile/fit/evaluate/predict on NumPy
arrays, errors as exceptions with the library's messages."""
import json
import os

import numpy as np
import pytest

from conftest import small_mlp, toy_data


def test_rank_api(tnt):
    assert tnt.get_rank() == 0 and tnt.get_size() == 1
    assert tnt.is_master_rank() and tnt.get_master_rank() == 0
    tnt.init()  # idempotent
    assert tnt.__version__ == tnt._C.version()


def _device_in_child(env):
    """tnt.gpu_status() and gpu_device_count() in a fresh process with these settings (the
    device is chosen once per process, at init), or the exception init raised."""
    import subprocess
    import sys
    code = ("import tarantella as tnt\n"
            "try:\n    print(tnt.gpu_status()); print(tnt.gpu_device_count())\n"
            "except Exception as e:\n    print(type(e).__name__ + ': ' + str(e)); print(-1)\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("TNT_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    status, count = out.stdout.strip().splitlines()[-2:]
    return status, int(count)


def test_gpu_status(tnt):
    if not os.environ.get("TNT_DEVICE"):
        assert tnt.gpu_status() == "cpu: TNT_DEVICE=cpu"
    assert _device_in_child({"TNT_DEVICE": "auto", "TNT_GPU_EMULATE": "2"}) == ("gpu 0: emulated device", 2)
    assert _device_in_child({"TNT_DEVICE": "auto", "TNT_CUDA_LIBDIR": "/nonexistent/cuda"}) == \
        ("cpu: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder", 0)
    status, _ = _device_in_child({"TNT_DEVICE": "gpu", "TNT_CUDA_LIBDIR": "/nonexistent/cuda"})
    assert "TNT_DEVICE=gpu: no usable GPU: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder" in status
    assert status.split(":")[0].endswith("Error")


def test_fit_evaluate_predict_arrays(tnt):
    x, y = toy_data(128)
    m = small_mlp(tnt)
    m.compile(optimizer=tnt.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    h = m.fit(x, y, batch_size=16, epochs=4, verbose=0)
    assert sorted(h.history) == ["accuracy", "loss"]
    assert len(h.history["loss"]) == 4 and h.epoch == [0, 1, 2, 3]
    assert h.history["loss"][-1] < h.history["loss"][0]
    loss, acc = m.evaluate(x, y, batch_size=32, verbose=0)
    assert 0 <= acc <= 1 and loss > 0
    d = m.evaluate(x, y, verbose=0, return_dict=True)
    assert set(d) == {"loss", "accuracy"} and d["loss"] == pytest.approx(loss, rel=1e-6)
    p = m.predict(x, batch_size=50, verbose=0)
    assert p.shape == (128, 3) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(m.predict_on_batch(x[:7]), p[:7], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m(x[:3]), p[:3], rtol=1e-5, atol=1e-6)
    assert m.optimizer.iterations == 4 * 8
    assert m.optimizer.learning_rate == pytest.approx(0.01)
    m.optimizer.learning_rate = 0.005
    assert m.optimizer.learning_rate == pytest.approx(0.005)


def test_validation_split_and_data(tnt):
    x, y = toy_data(100)
    m = small_mlp(tnt)
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"])
    h = m.fit(x, y, batch_size=10, epochs=2, validation_split=0.2, verbose=0)
    assert set(h.history) == {"loss", "sparse_categorical_accuracy", "val_loss", "val_sparse_categorical_accuracy"}
    h2 = m.fit(x[:80], y[:80], batch_size=10, epochs=1, validation_data=(x[80:], y[80:]), verbose=0,
               shuffle=False)
    assert "val_loss" in h2.history


def test_weights_keras_order_and_set(tnt):
    m = small_mlp(tnt)
    w = m.get_weights()
    assert [a.shape for a in w] == [(8, 16), (16,), (16, 3), (3,)]
    assert np.all(w[1] == 0) and np.any(w[0] != 0)  # glorot kernel, zero bias
    new = [np.full(a.shape, i + 1, np.float32) for i, a in enumerate(w)]
    m.set_weights(new)
    for a, b in zip(m.get_weights(), new):
        np.testing.assert_array_equal(a, b)
    assert [wt.name for wt in m.weights] == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"] \
        or all(":0" in wt.name for wt in m.weights)
    layer = m.layers[1]
    kb = layer.get_weights()
    assert [a.shape for a in kb] == [(16, 3), (3,)]
    layer.set_weights([np.zeros((16, 3)), np.ones(3)])
    np.testing.assert_array_equal(m.get_weights()[3], np.ones(3, np.float32))


def test_save_load_h5_keras_json(tnt, tmp_path):
    x, y = toy_data(64)
    m = small_mlp(tnt)
    m.compile(tnt.keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
    m.fit(x, y, batch_size=16, epochs=2, verbose=0)
    p = m.predict(x, verbose=0)
    for name in ("m.h5", "m.keras"):
        path = tmp_path / name
        m.save(path)
        back = tnt.keras.models.load_model(path)
        np.testing.assert_array_equal(back.predict(x, verbose=0), p)
        assert back.optimizer is not None and back.optimizer.iterations == m.optimizer.iterations
        # compiled as saved: training resumes exactly
        h1 = m.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        h2 = back.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        assert h1.history["loss"] == h2.history["loss"]
        p = m.predict(x, verbose=0)
        np.testing.assert_array_equal(back.predict(x, verbose=0), p)
    m.save_weights(tmp_path / "w.h5")
    fresh = tnt.keras.models.model_from_json(m.to_json())
    assert any(not np.array_equal(a, b) for a, b in zip(fresh.get_weights(), m.get_weights()))
    fresh.load_weights(tmp_path / "w.h5")
    for a, b in zip(fresh.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert fresh.to_json() == m.to_json()
    assert json.loads(m.to_json())["class_name"] == "Sequential"
    uncompiled = tnt.keras.models.load_model(tmp_path / "m.h5", compile=False)
    assert uncompiled.optimizer is None


def test_errors_carry_the_library_message(tnt, tmp_path):
    k = tnt.keras
    with pytest.raises(FileNotFoundError, match="No such file"):
        k.models.load_model(tmp_path / "absent.h5")
    (tmp_path / "junk.h5").write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="junk.h5"):
        k.models.load_model(tmp_path / "junk.h5")
    with pytest.raises(ValueError, match="JSON syntax error at line 1"):
        k.models.model_from_json("{")
    with pytest.raises(NotImplementedError, match="unsupported layer class"):
        k.models.model_from_json(json.dumps({"class_name": "Sequential", "config": {"layers": [
            {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 3], "name": "i"}},
            {"class_name": "NoSuchLayer", "config": {"name": "x"}}]}}))
    with pytest.raises(ValueError, match="units"):
        k.Sequential([k.layers.Dense(-3, input_shape=(4,))])
    m = small_mlp(tnt)
    with pytest.raises(ValueError, match="shape"):
        m.set_weights([np.zeros((2, 2))] + m.get_weights()[1:])
    with pytest.raises(ValueError, match="4 weights"):
        m.set_weights(m.get_weights()[:2])
    x, y = toy_data(16)
    with pytest.raises(RuntimeError, match="compile"):
        m.fit(x, y, epochs=1, verbose=0)
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError):
        m.fit(x[:, :5], y, epochs=1, verbose=0)  # wrong input shape: the library names both
    with pytest.raises(ValueError, match="unknown optimizer"):
        m.compile("nosuch", "mse")
    with pytest.raises(ValueError, match="unknown loss"):
        m.compile("adam", "nosuch_loss")
    with pytest.raises(TypeError):
        k.layers.Dense()  # units is required, as in Keras
    with pytest.raises(TypeError):
        k.layers.Dense(3, nosuch_argument=1)
    with pytest.raises(TypeError):
        tnt._C.model_from_json(12)
    with pytest.raises(TypeError):
        m._handle().fit("not a dataset")
    with pytest.raises(ValueError):
        tnt._C.dataset_from_arrays(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(NotImplementedError, match="Ftrl"):
        k.optimizers.Ftrl()
    # the model is still usable after all of that
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_summary_and_json_roundtrip(tnt, capsys):
    m = small_mlp(tnt, name="mlp")
    m.summary()
    out = capsys.readouterr().out
    assert 'Model: "mlp"' in out and "Total params: 195" in out
    lines = []
    m.summary(print_fn=lines.append)
    assert "Dense" in lines[0]
    back = tnt.keras.models.model_from_json(m.to_json())
    assert back.to_json() == m.to_json() and back.count_params() == 195
    assert [type(l).__name__ for l in back.layers[-2:]] == ["Dense", "Dense"]
    assert m.input_shape == (None, 8) and m.output_shape == (None, 3)


def test_compile_objects(tnt):
    k = tnt.keras
    x = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
    y1 = np.eye(3, dtype=np.float32)[np.arange(32) % 3]
    m = small_mlp(tnt)
    m.compile(k.optimizers.RMSprop(learning_rate=1e-3), k.losses.CategoricalCrossentropy(label_smoothing=0.1),
              metrics=[k.metrics.CategoricalAccuracy(), "mse"])
    h = m.fit(x, y1, batch_size=8, epochs=1, verbose=0)
    assert set(h.history) >= {"loss", "categorical_accuracy"}
    sched = k.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    assert sched(0) == pytest.approx(0.1) and sched(2) == pytest.approx(0.05)
    m.compile(k.optimizers.SGD(learning_rate=sched), "categorical_crossentropy")
    m.fit(x, y1, batch_size=8, epochs=1, verbose=0)  # 4 steps
    assert m.optimizer.learning_rate == pytest.approx(0.1 * 0.5 ** 2)


def test_fit_releases_the_gil(tnt):
    import threading
    import time
    x, y = toy_data(256)
    m = small_mlp(tnt)
    m.compile("sgd", "sparse_categorical_crossentropy")
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    before = count[0]
    start = time.perf_counter()
    m.fit(x, y, batch_size=8, epochs=20, verbose=0)  # no Python callback: all of it in C
    seconds = time.perf_counter() - start
    during = count[0] - before
    stop.set()
    t.join()
    # with the GIL held for the whole fit the other thread could not count at all
    assert during > 1000 * seconds, (during, seconds)


def test_initial_epoch_and_steps(tnt):
    x, y = toy_data(64)
    m = small_mlp(tnt)
    m.compile("sgd", "sparse_categorical_crossentropy")
    h = m.fit(x, y, batch_size=8, epochs=5, initial_epoch=3, verbose=0)
    assert h.epoch == [3, 4] and len(h.history["loss"]) == 2
    m.fit(x, y, batch_size=8, epochs=1, steps_per_epoch=3, verbose=0)
    assert m.optimizer.iterations == 2 * 8 + 3
