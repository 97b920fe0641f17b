"""Keras 2's optimizer arguments that Keras programs pass: lr= (the old name of learning_rate) and
decay= (Keras up to 2.10: lr_t = lr / (1 + decay * iterations), the learning rate of step t).
Checked on one weight w of a Dense(1) without bias, x = 1, y = 0, mean squared error: the SGD step
is w <- w - lr_t * 2w, so w after the steps is w0 * prod(1 - 2 lr_t)."""
import numpy as np
import pytest


def _steps(tnt, opt, steps):
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Dense(1, use_bias=False, input_shape=(1,))])
    m.set_weights([np.array([[1.0]], np.float32)])
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
