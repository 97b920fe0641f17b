"""GPU precision options from Python on the emulated device (TNT_GPU_EMULATE=1): TensorFlow's
tf.config.experimental.enable_tensor_float_32_execution reaches the library (off by default here,
unlike TensorFlow), and a mixed_bfloat16 Keras model trains on the device close to its float32
twin, with float32 weights."""
import os

os.environ.setdefault("TNT_GPU_EMULATE", "1")  # before the library reads its settings
os.environ["TNT_DEVICE"] = "gpu"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tarantella as tnt  # noqa: E402
import tarantella.tensorflow as tf  # noqa: E402
from tarantella import keras  # noqa: E402


@pytest.fixture(autouse=True)
def defaults_after():
    yield
    keras.mixed_precision.set_global_policy("float32")
    tf.config.experimental.enable_tensor_float_32_execution(False)


def test_tf32_setting_reaches_the_library():
    tnt.init()
    assert tnt.gpu_status().startswith("gpu 0: emulated device")
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False
    tf.config.experimental.enable_tensor_float_32_execution(True)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is True
    tf.config.experimental.enable_tensor_float_32_execution(0)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False


def mlp():
    inputs = keras.Input((20,))
    x = keras.layers.Dense(32, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seed=3))(inputs)
    outputs = keras.layers.Dense(4, kernel_initializer=keras.initializers.GlorotUniform(seed=4))(x)
    return keras.Model(inputs, outputs)


def fit(policy, tf32=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 20)).astype(np.float32)
    y = (x[:, :4] * 2.0).argmax(axis=1).astype(np.float32)
    keras.mixed_precision.set_global_policy(policy)
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    model = mlp()
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    assert all(w.dtype == np.float32 for w in model.get_weights())
    return hist.history["loss"], model.predict(x, batch_size=64)


@pytest.mark.parametrize("policy, tf32", [("mixed_bfloat16", False), ("float32", True)])
def test_reduced_precision_on_the_device_follows_float32(policy, tf32):
    l32, p32 = fit("float32")
    lo, po = fit(policy, tf32)
    assert lo[-1] < lo[0]                                 # it trains
    assert np.allclose(l32, lo, rtol=5e-2, atol=1e-2)     # and follows float32
    assert np.abs(p32 - po).max() < 0.1 * np.abs(p32).max()
    assert not np.array_equal(p32, po)                    # in bf16 / TF32, not float32
