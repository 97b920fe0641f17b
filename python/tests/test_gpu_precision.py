"""GPU precision options from Python on the emulated device (TNT_GPU_EMULATE=1): TensorFlow's
tf.config.experimental.enable_tensor_float_32_execution reaches the library (off by default here,
unlike TensorFlow), and a mixed_bfloat16 or TF32 Keras model trains on the device close to its
float32 twin, with float32 weights. The device is chosen once per process (tnt.init reads
TNT_DEVICE), so the checks run in a child process of their own: a pytest run of several files in
one process keeps its CPU device."""
import os
import subprocess
import sys

import numpy as np


def check_tf32_setting_reaches_the_library(tnt, tf):
    tnt.init()
    assert tnt.gpu_status().startswith("gpu 0: emulated device"), tnt.gpu_status()
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False
    tf.config.experimental.enable_tensor_float_32_execution(True)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is True
    tf.config.experimental.enable_tensor_float_32_execution(0)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is False


def fit(keras, tf, policy, tf32=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 20)).astype(np.float32)
    y = (x[:, :4] * 2.0).argmax(axis=1).astype(np.float32)
    keras.mixed_precision.set_global_policy(policy)
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    inputs = keras.Input((20,))
    h = keras.layers.Dense(32, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seed=3))(inputs)
    outputs = keras.layers.Dense(4, kernel_initializer=keras.initializers.GlorotUniform(seed=4))(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    assert all(w.dtype == np.float32 for w in model.get_weights())
    keras.mixed_precision.set_global_policy("float32")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    return hist.history["loss"], model.predict(x, batch_size=64)


def check_reduced_precision_follows_float32(keras, tf):
    l32, p32 = fit(keras, tf, "float32")
    for policy, tf32 in (("mixed_bfloat16", False), ("float32", True)):
        lo, po = fit(keras, tf, policy, tf32)
        assert lo[-1] < lo[0], (policy, tf32, lo)                      # it trains
        assert np.allclose(l32, lo, rtol=5e-2, atol=1e-2), (l32, lo)    # and follows float32
        assert np.abs(p32 - po).max() < 0.1 * np.abs(p32).max()
        assert not np.array_equal(p32, po), (policy, tf32)              # in bf16 / TF32, not float32


def test_precision_on_the_emulated_device():
    env = dict(os.environ, TNT_GPU_EMULATE="1", TNT_DEVICE="gpu")
    r = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "checks passed" in r.stdout, r.stdout + r.stderr


if __name__ == "__main__":  # the child
    import tarantella as tnt
    import tarantella.tensorflow as tf
    from tarantella import keras
    check_tf32_setting_reaches_the_library(tnt, tf)
    check_reduced_precision_follows_float32(keras, tf)
    print("checks passed")
