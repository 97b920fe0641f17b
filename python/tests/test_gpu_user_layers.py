"""Keras users' layers that used to put the whole model on the CPU now train on the device (the
emulated one here, TNT_GPU_EMULATE=1, TNT_DEVICE=auto): a Lambda and a custom Layer with add_loss
(their traced graphs run through the host), LeakyReLU, Conv1D, Multiply with a broadcast input,
UpSampling2D, Conv2DTranspose, TimeDistributed, under Adadelta. Each model's loss history on the
device equals the CPU engine's (TNT_DEVICE=cpu), and the device run logs no model falling back to
the CPU. The device is chosen once per process, so each side runs in a child of its own."""
import json
import os
import subprocess
import sys

import numpy as np


def models(keras, ops):
    class Endpoint(keras.layers.Layer):  # adds a loss, as the Keras guide's LogisticEndpoint
        def call(self, x):
            self.add_loss(0.01 * ops.mean(ops.square(x)))
            return x

    rng = np.random.default_rng(0)
    seq = rng.standard_normal((64, 12, 3)).astype(np.float32)
    img = rng.standard_normal((64, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 4, 64).astype(np.float32)
    init = lambda s: keras.initializers.GlorotUniform(seed=s)

    def text():
        x_in = keras.Input((12, 3))
        h = keras.layers.Conv1D(8, 3, padding="causal", kernel_initializer=init(1))(x_in)
        h = keras.layers.LeakyReLU(0.2)(h)
        h = keras.layers.TimeDistributed(keras.layers.Dense(6, kernel_initializer=init(2)))(h)
        h = keras.layers.Lambda(lambda t: t * 0.5 + 1.0)(h)
        gate = keras.layers.Dense(6, activation="sigmoid", kernel_initializer=init(3))(keras.layers.GlobalAveragePooling1D()(h))
        h = keras.layers.Multiply()([h, keras.layers.Reshape((1, 6))(gate)])  # broadcast over the steps
        h = Endpoint()(keras.layers.GlobalMaxPooling1D()(h))
        return keras.Model(x_in, keras.layers.Dense(4, kernel_initializer=init(4))(h)), seq

    def image():
        x_in = keras.Input((8, 8, 1))
        h = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu", kernel_initializer=init(5))(x_in)
        h = keras.layers.UpSampling2D(2)(h)
        h = keras.layers.Conv2DTranspose(3, 3, strides=2, padding="same", kernel_initializer=init(6))(h)
        h = keras.layers.GlobalAveragePooling2D()(h)
        return keras.Model(x_in, keras.layers.Dense(4, kernel_initializer=init(7))(h)), img

    out = {}
    for name, make in (("text", text), ("image", image)):
        model, x = make()
        model.compile(optimizer=keras.optimizers.Adadelta(learning_rate=1.0),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        out[name] = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0).history["loss"]
    return out


def child(device):
    env = dict(os.environ, TNT_DEVICE=device, TNT_GPU_EMULATE="1", TNT_LOG_LEVEL="INFO")
    r = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_user_layers_train_on_the_device():
    dev, log = child("auto")
    cpu, _ = child("cpu")
    assert "trains on the CPU" not in log, log  # every model on the device
    assert "runs its own host code" in log, log  # the Lambda and the custom layer through the host
    for name in cpu:
        assert dev[name][-1] < dev[name][0], (name, dev[name])  # it trains
        assert np.allclose(dev[name], cpu[name], rtol=1e-5, atol=1e-6), (name, dev[name], cpu[name])


if __name__ == "__main__":  # the child
    import tarantella as tnt
    from tarantella import keras
    from tarantella.keras import ops
    tnt.init()
    print(json.dumps(models(keras, ops)))
