"""Models and layers shared between models hold one set of weights, as in Keras: a model used as a
layer (a GAN's generator and discriminator, a siamese net's base called on two inputs) trains
through the outer model, its own get_weights/predict show the trained values, and a model frozen
with `trainable = False` before the combined model is built stays frozen there but trains in its
own fit (Keras 2's rule: trainable is read when a model is compiled; keras.io's GAN examples).
Expected values: NumPy forward passes on the weights the models report."""
import io
import zipfile

import h5py
import numpy as np

import tarantella.tensorflow as tf
from tarantella import keras

L = keras.layers


def dense_forward(x, weights, activations):
    for (w, b), act in zip(zip(weights[::2], weights[1::2]), activations):
        x = x @ w + b
        x = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             None: lambda v: v}[act](x)
    return x


def gan_models():
    tf.random.set_seed(11)
    gi = keras.Input((3,))
    g = keras.Model(gi, L.Dense(4, name="g_out")(L.Dense(5, activation="tanh", name="g_h")(gi)), name="generator")
    di = keras.Input((4,))
    d = keras.Model(di, L.Dense(1, activation="sigmoid", name="d_out")(L.Dense(6, activation="relu", name="d_h")(di)),
                    name="discriminator")
    d.compile(keras.optimizers.SGD(0.2), "binary_crossentropy")
    d.trainable = False  # frozen in the combined model only
    z = keras.Input((3,))
    gan = keras.Model(z, d(g(z)), name="gan")
    gan.compile(keras.optimizers.SGD(0.2), "binary_crossentropy")
    return g, d, gan


def same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def changed(before, after):
    return max(float(np.abs(a - b).max()) for a, b in zip(before, after))


def test_gan_trains_generator_through_frozen_discriminator(tnt, tmp_path):
    g, d, gan = gan_models()
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((16, 3)).astype(np.float32)
    real = rng.standard_normal((16, 4)).astype(np.float32) + 2
    for step in range(3):  # keras.io's loop: the discriminator on real and fake, then the generator
        fake = g.predict(noise, verbose=0)
        d_before = d.get_weights()
        d.train_on_batch(np.concatenate([real, fake]), np.concatenate([np.ones((16, 1)), np.zeros((16, 1))]))
        assert changed(d_before, d.get_weights()) > 1e-5  # the discriminator trains in its own fit
        g_before, d_before = g.get_weights(), d.get_weights()
        gan.train_on_batch(noise, np.ones((16, 1), np.float32))
        assert changed(g_before, g.get_weights()) > 1e-5  # the generator trains through the combined model
        assert changed(d_before, d.get_weights()) == 0.0  # frozen there
        same(gan.get_weights()[:4], g.get_weights())  # one set of weights
        same(gan.get_weights()[4:], d.get_weights())
    expected = dense_forward(dense_forward(noise, g.get_weights(), ["tanh", None]), d.get_weights(), ["relu", "sigmoid"])
    np.testing.assert_allclose(gan.predict(noise, verbose=0), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.predict(noise, verbose=0), dense_forward(noise, g.get_weights(), ["tanh", None]),
                               rtol=1e-5, atol=1e-6)

    path = str(tmp_path / "gan.h5")
    gan.save(path)
    with h5py.File(path, "r") as f:  # each weight once: the nested models' groups
        names = []
        f["model_weights"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    assert len(names) == len(gan.get_weights()) == 8
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(noise, verbose=0), expected, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "gan.keras")
    gan.save(path)
    with zipfile.ZipFile(path) as z, h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as f:
        names = []
        f["layers"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    assert len(names) == 8
    np.testing.assert_allclose(keras.models.load_model(path).predict(noise, verbose=0), expected, rtol=1e-5, atol=1e-6)


def test_siamese_base_called_twice_trains_once(tnt):
    tf.random.set_seed(5)
    bi = keras.Input((4,))
    base = keras.Model(bi, L.Dense(3, activation="tanh", name="embed")(bi), name="base")
    a, b = keras.Input((4,)), keras.Input((4,))
    shared_head = L.Dense(2, name="head")  # one layer object called on two inputs
    merged = L.Concatenate()([shared_head(base(a)), shared_head(base(b))])
    outer = keras.Model([a, b], L.Dense(1, activation="sigmoid", name="out")(merged))
    outer.compile(keras.optimizers.SGD(0.3), "binary_crossentropy")
    assert len(outer.get_weights()) == 6  # base, head and out: each once
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((32, 4)).astype(np.float32), rng.standard_normal((32, 4)).astype(np.float32)
    y = (x1[:, 0] > x2[:, 0]).astype(np.float32).reshape(-1, 1)
    before = base.get_weights()
    outer.fit([x1, x2], y, batch_size=8, epochs=2, verbose=0)
    assert changed(before, base.get_weights()) > 1e-4
    same(outer.get_weights()[:2], base.get_weights())
    np.testing.assert_allclose(base.predict(x1, verbose=0), dense_forward(x1, base.get_weights(), ["tanh"]),
                               rtol=1e-5, atol=1e-6)
    w = outer.get_weights()
    e1, e2 = (dense_forward(v, w[:4], ["tanh", None]) for v in (x1, x2))
    expected = dense_forward(np.concatenate([e1, e2], axis=1), w[4:], ["sigmoid"])
    np.testing.assert_allclose(outer.predict([x1, x2], verbose=0), expected, rtol=1e-5, atol=1e-6)


def test_encoder_shares_layers_with_autoencoder(tnt):
    tf.random.set_seed(2)
    inp = keras.Input((6,))
    code = L.Dense(2, activation="tanh", name="code")(inp)
    encoder = keras.Model(inp, code)
    autoencoder = keras.Model(inp, L.Dense(6, name="decode")(code))
    autoencoder.compile(keras.optimizers.SGD(0.1), "mse")
    x = np.random.default_rng(3).standard_normal((40, 6)).astype(np.float32)
    before = encoder.get_weights()
    autoencoder.fit(x, x, batch_size=10, epochs=2, verbose=0)
    assert changed(before, encoder.get_weights()) > 1e-4
    same(encoder.get_weights(), autoencoder.get_weights()[:2])
    np.testing.assert_allclose(encoder.predict(x, verbose=0), dense_forward(x, autoencoder.get_weights()[:2], ["tanh"]),
                               rtol=1e-5, atol=1e-6)
    encoder.set_weights([w * 0.5 for w in encoder.get_weights()])  # and back: the autoencoder sees it
    np.testing.assert_array_equal(autoencoder.get_weights()[0], encoder.get_weights()[0])


def test_fine_tuning_unfreezes_at_the_next_compile(tnt):
    """keras.io's transfer-learning guide: a frozen base model inside a new model, trained; then
    base_model.trainable = True and compile again: the base trains from then on."""
    tf.random.set_seed(8)
    bi = keras.Input((4,))
    base = keras.Model(bi, L.Dense(3, activation="tanh", name="ft_base")(bi), name="ft_base_model")
    base.trainable = False
    inp = keras.Input((4,))
    model = keras.Model(inp, L.Dense(1, name="ft_head")(base(inp)))
    model.compile(keras.optimizers.SGD(0.1), "mse")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = x[:, :1] * 2 - x[:, 1:2]
    b0, head0 = base.get_weights(), model.get_weights()[2:]
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert changed(b0, base.get_weights()) == 0.0 and changed(head0, model.get_weights()[2:]) > 1e-5
    base.trainable = True
    model.compile(keras.optimizers.SGD(0.01), "mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert changed(b0, base.get_weights()) > 1e-5
    head = model.get_layer("ft_head")  # and a single layer frozen after the model was built
    head.trainable = False
    model.compile(keras.optimizers.SGD(0.01), "mse")
    head1, b1 = head.get_weights(), base.get_weights()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert changed(head1, head.get_weights()) == 0.0 and changed(b1, base.get_weights()) > 1e-5
