"""Keras 2's optimizer arguments that Keras programs pass: lr= (the old name of learning_rate),
decay= (Keras up to 2.10: lr_t = lr / (1 + decay * iterations), the learning rate of step t) and
clipvalue= (each gradient value clipped to [-clipvalue, clipvalue] before the update).
Checked on one weight w of a Dense(1) without bias, x = 1, y = 0, mean squared error: the SGD step
is w <- w - lr_t * 2w, so w after the steps is w0 * prod(1 - 2 lr_t)."""
import numpy as np
import pytest


def _steps(tnt, opt, steps, w0=1.0):
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Dense(1, use_bias=False, input_shape=(1,))])
    m.set_weights([np.array([[w0]], np.float32)])
    m.compile(opt, "mse")
    m.fit(np.ones((steps, 1), np.float32), np.zeros((steps, 1), np.float32), batch_size=1, epochs=1,
          shuffle=False, verbose=0)
    return float(m.get_weights()[0][0, 0])


def test_lr_is_learning_rate(tnt):
    o = tnt.keras.optimizers
    assert o.RMSprop(lr=0.0004).learning_rate == pytest.approx(0.0004)
    assert o.Adam(lr=0.02, beta_1=0.5).get_config()["learning_rate"] == pytest.approx(0.02)
    assert o.RMSprop().learning_rate == pytest.approx(0.001)  # the default stays
    assert o.SGD(0.5).learning_rate == pytest.approx(0.5)
    assert _steps(tnt, o.SGD(lr=0.1), 1) == pytest.approx(0.8, rel=1e-6)


def test_decay_is_keras2_time_decay(tnt):
    o = tnt.keras.optimizers
    lrs = [0.1 / (1 + 0.5 * t) for t in range(3)]
    assert _steps(tnt, o.SGD(lr=0.1, decay=0.5), 3) == pytest.approx(np.prod([1 - 2 * r for r in lrs]), rel=1e-6)
    assert _steps(tnt, o.SGD(learning_rate=0.1, decay=0.0), 2) == pytest.approx(0.8 * 0.8, rel=1e-6)
    with pytest.raises(ValueError, match="decay"):
        o.SGD(learning_rate=o.schedules.ExponentialDecay(0.1, 10, 0.5), decay=0.1)


def test_clipvalue(tnt):
    o = tnt.keras.optimizers
    assert _steps(tnt, o.SGD(learning_rate=0.1, clipvalue=0.5), 1) == pytest.approx(1 - 0.1 * 0.5, rel=1e-6)
    assert _steps(tnt, o.SGD(learning_rate=0.1, clipvalue=0.5), 1, w0=-1.0) == pytest.approx(-1 + 0.1 * 0.5, rel=1e-6)
    assert _steps(tnt, o.SGD(learning_rate=0.1, clipvalue=0.5), 1, w0=0.1) == pytest.approx(0.1 - 0.1 * 0.2, rel=1e-6)
    # RMSprop's first step from v = 0: w - lr g / sqrt((1 - rho) g^2 + eps), g the clipped gradient
    g, lr, rho = 0.25, 0.01, 0.9
    want = 1 - lr * g / (np.sqrt((1 - rho) * g * g) + 1e-7)
    assert _steps(tnt, o.RMSprop(lr=lr, clipvalue=g), 1) == pytest.approx(want, rel=1e-5)
    assert o.Adam(clipvalue=1.0).get_config()["clipvalue"] == 1.0
    with pytest.raises(Exception, match="clipvalue"):
        _steps(tnt, o.SGD(clipvalue=-1.0), 1)
    with pytest.raises(NotImplementedError, match="clipnorm"):
        o.SGD(clipnorm=1.0)


def test_clipvalue_saved_and_loaded(tnt, tmp_path):
    """clipvalue goes into the file's training_config and comes back: the loaded model's next
    step clips as the saved one's would."""
    import h5py
    import json
    o = tnt.keras.optimizers
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Dense(1, use_bias=False, input_shape=(1,))])
    m.set_weights([np.array([[1.0]], np.float32)])
    m.compile(o.SGD(learning_rate=0.1, clipvalue=0.5), "mse")
    path = str(tmp_path / "clip.h5")
    m.save(path)
    with h5py.File(path, "r") as f:
        tc = json.loads(f.attrs["training_config"])
    assert tc["optimizer_config"]["config"]["clipvalue"] == pytest.approx(0.5)
    again = k.models.load_model(path)
    again.fit(np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32), batch_size=1, verbose=0)
    assert float(again.get_weights()[0][0, 0]) == pytest.approx(1 - 0.1 * 0.5, rel=1e-6)
