"""Keras 2.11 semantics that the held-out corpus programs (tests/keras_programs, group "heldout")
needed, each against Keras's documented behaviour with NumPy as the reference."""
import numpy as np
import pytest


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _bce(y, p, eps=1e-7):
    p = np.clip(p, eps, 1 - eps)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(axis=-1)


def test_metrics_module_loss_functions_are_the_losses(k):
    """keras.metrics re-exports the loss functions (keras.metrics.binary_crossentropy is
    keras.losses.binary_crossentropy): called on arrays they give Keras's per-sample losses, and
    they stay names where compile takes one."""
    rng = np.random.default_rng(0)
    y = (rng.random((6, 4)) > 0.5).astype(np.float32)
    p = rng.uniform(0.05, 0.95, (6, 4)).astype(np.float32)
    np.testing.assert_allclose(k.metrics.binary_crossentropy(y, p), _bce(y, p), rtol=1e-5)
    np.testing.assert_allclose(k.metrics.mse(y, p), ((y - p) ** 2).mean(-1), rtol=1e-5)
    np.testing.assert_allclose(k.metrics.mean_absolute_error(y, p), np.abs(y - p).mean(-1), rtol=1e-5)
    t, q = y * 0.8 + 0.1, p
    np.testing.assert_allclose(k.metrics.kl_divergence(t, q), (t * np.log(t / q)).sum(-1), rtol=1e-5)
    assert k.metrics.binary_crossentropy == k.losses.binary_crossentropy == "binary_crossentropy"
    x = rng.standard_normal((16, 3)).astype(np.float32)
    m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(4, activation="sigmoid")])
    m.compile("sgd", loss=k.losses.binary_crossentropy, metrics=[k.metrics.binary_crossentropy])
    h = m.fit(x, y[:1].repeat(16, 0), batch_size=16, epochs=1, verbose=0)
    assert sorted(h.history) == ["binary_crossentropy", "loss"]
    assert h.history["binary_crossentropy"][0] == pytest.approx(h.history["loss"][0], rel=1e-5)


def test_metrics_loss_function_inside_a_custom_layer(k):
    """A VAE's loss layer: K.mean(keras.metrics.binary_crossentropy(K.flatten(x), K.flatten(x_hat)))
    added with add_loss; evaluate reports it as NumPy computes it (bce over every value of the batch)."""
    from tarantella.keras import backend as K

    class ReconstructionLoss(k.layers.Layer):
        def call(self, inputs):
            x, x_hat = inputs
            self.add_loss(K.mean(k.metrics.binary_crossentropy(K.flatten(x), K.flatten(x_hat))))
            return x

    rng = np.random.default_rng(1)
    x = rng.random((8, 5)).astype(np.float32)
    inp = k.Input(shape=(5,))
    x_hat = k.layers.Dense(5, activation="sigmoid")(inp)
    m = k.Model(inp, ReconstructionLoss()([inp, x_hat]))
    w = rng.uniform(-0.5, 0.5, (5, 5)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, 5).astype(np.float32)
    m.set_weights([w, b])
    m.compile("adam", loss=None)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    want = _bce(x.reshape(-1), p.reshape(-1))
    assert m.evaluate(x, None, batch_size=8, verbose=0) == pytest.approx(float(want), rel=1e-5)


def _softmax_model(k, lr=0.5, loss="categorical_crossentropy"):
    m = k.Sequential([k.Input(shape=(4,)), k.layers.Dense(3, activation="softmax")])
    w = (np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 20
    m.set_weights([w, np.zeros(3, np.float32)])
    m.compile(k.optimizers.SGD(lr), loss)
    return m, w


def test_class_weight_with_a_sequence_and_a_generator(k):
    """fit(Sequence or generator, class_weight=...): Keras weighs each sample's loss by its class's
    weight (argmax of a one-hot label, or the integer label), as with arrays: a batch's loss (before
    its update) is sum(w_i ce_i) / n, and trained, the weights equal the arrays' run."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((24, 4)).astype(np.float32)
    labels = np.arange(24) % 3
    onehot = np.eye(3, dtype=np.float32)[labels]
    cw = {0: 1.0, 1: 3.0, 2: 0.5}

    class Batches(k.utils.Sequence):
        def __init__(self, y, size):
            self.y, self.size = y, size

        def __len__(self):
            return 24 // self.size

        def __getitem__(self, i):
            return x[i * self.size:(i + 1) * self.size], self.y[i * self.size:(i + 1) * self.size]

    def generator():
        while True:
            yield x, labels[:, None].astype(np.float32)

    m, w = _softmax_model(k)
    z = x @ w
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = np.sum(np.array([cw[c] for c in labels]) * -np.log(p[np.arange(24), labels])) / 24
    h = m.fit(Batches(onehot, 24), epochs=1, shuffle=False, class_weight=cw, verbose=0)
    assert h.history["loss"][0] == pytest.approx(want, rel=1e-5)
    m, _ = _softmax_model(k, loss="sparse_categorical_crossentropy")
    h = m.fit(generator(), steps_per_epoch=1, epochs=1, class_weight=cw, verbose=0)
    assert h.history["loss"][0] == pytest.approx(want, rel=1e-5)

    a, _ = _softmax_model(k)
    a.fit(x, onehot, batch_size=8, epochs=2, shuffle=False, class_weight=cw, verbose=0)
    b, _ = _softmax_model(k)
    b.fit(Batches(onehot, 8), batch_size=8, epochs=2, shuffle=False, class_weight=cw, verbose=0)
    np.testing.assert_allclose(b.get_weights()[0], a.get_weights()[0], rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="no weight for classes"):
        b.fit(Batches(onehot, 8), epochs=1, class_weight={0: 1.0, 1: 2.0}, verbose=0)


def test_custom_layer_using_a_model_tensor_it_was_not_given(k):
    """A custom layer whose call reads a model tensor from outside (a closure over z_mean, as old
    VAE tutorials wrote) is refused as Keras 2.4+ refuses it, with the way out: pass the tensor as
    an input. Passed as an input, the same loss trains."""
    from tarantella.keras import backend as K
    inp = k.Input(shape=(4,))
    z = k.layers.Dense(2)(inp)

    class Closure(k.layers.Layer):
        def call(self, inputs):
            self.add_loss(K.mean(K.square(z)))
            return inputs

    with pytest.raises(TypeError, match="not one of the layer's inputs.*one more input"):
        Closure()(inp)

    class Given(k.layers.Layer):
        def call(self, inputs):
            x, zz = inputs
            self.add_loss(K.mean(K.square(zz)))
            return x

    m = k.Model(inp, Given()([inp, z]))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    m.set_weights([w, np.zeros(2, np.float32)])
    m.compile("sgd", loss=None)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    assert m.evaluate(x, None, batch_size=8, verbose=0) == pytest.approx(float(np.mean((x @ w) ** 2)), rel=1e-5)


def test_inputs_given_as_python_lists_of_rows(k):
    """x = [rows as a Python list, an array] for a two-input model: each input is converted on its own
    (as Keras 2.0-2.3 did; Keras 2.11's list adapter fails on the mixed nesting); the same training
    as with arrays."""
    rng = np.random.default_rng(4)
    a = rng.integers(0, 5, (12, 3))
    b = rng.standard_normal((12, 2)).astype(np.float32)
    y = rng.standard_normal((12, 1)).astype(np.float32)

    def model():
        i1, i2 = k.Input(shape=(3,)), k.Input(shape=(2,))
        m = k.Model([i1, i2], k.layers.Dense(1)(k.layers.Concatenate()([i1, i2])))
        m.set_weights([np.linspace(-1, 1, 5, dtype=np.float32).reshape(5, 1), np.zeros(1, np.float32)])
        m.compile(k.optimizers.SGD(0.01), "mse")
        return m
    m1, m2 = model(), model()
    h1 = m1.fit([a.tolist(), b], y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    h2 = m2.fit([a.astype(np.float32), b], y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert h1.history["loss"] == pytest.approx(h2.history["loss"], rel=1e-6)
    np.testing.assert_allclose(m1.get_weights()[0], m2.get_weights()[0], rtol=1e-6)


def test_tensorboard_histogram_freq_writes_the_weights_histograms(k, tmp_path):
    """TensorBoard(histogram_freq=1), as TensorFlow's TensorBoard tutorial sets it: each epoch, a
    histogram of every weight under Keras's tags in the train file (read by the independent reader
    of tests/tools); the counts are the weights' sizes."""
    import glob
    import os
    import subprocess
    reader = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "tools", "tfevents_read.py")
    m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(4, name="hidden"), k.layers.Dense(1, name="out")])
    m.compile("sgd", "mse")
    x = np.random.default_rng(5).standard_normal((8, 3)).astype(np.float32)
    m.fit(x, x[:, :1], epochs=2, verbose=0, callbacks=[k.callbacks.TensorBoard(str(tmp_path), histogram_freq=1)])
    (path,) = glob.glob(str(tmp_path / "train" / "events.out.tfevents.*"))
    out = subprocess.run(["/usr/bin/python3", reader, path], capture_output=True, text=True, check=True).stdout
    for epoch in (0, 1):
        for tag, count in (("hidden/kernel_0", 12), ("hidden/bias_0", 4), ("out/kernel_0", 4), ("out/bias_0", 1)):
            assert f"histogram {epoch} {tag}/histogram histograms class=2 " in out
            line = next(ln for ln in out.splitlines() if ln.startswith(f"histogram {epoch} {tag}/"))
            assert f" count={count} " in line + " "
    with pytest.raises(NotImplementedError, match="embeddings"):
        k.callbacks.TensorBoard(str(tmp_path), embeddings_freq=1)


def test_tf_compat_v1_boilerplate(k):
    """TensorFlow 1 boilerplate that Keras programs keep (GPU queries, ConfigProto with allow_growth, a
    Session given to the backend, logging verbosity, disable_eager_execution, set_random_seed) is
    accepted and changes nothing; running a TensorFlow 1 graph is refused with the way out."""
    import tarantella.tensorflow as tf
    assert tf.compat.v1.config.experimental.list_physical_devices("GPU") == []
    assert tf.test.is_gpu_available() is False and tf.test.gpu_device_name() == ""  # as tf.config lists them
    config = tf.compat.v1.ConfigProto()
    config.gpu_options.allow_growth = True
    sess = tf.compat.v1.Session(config=config)
    tf.compat.v1.keras.backend.set_session(sess)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    tf.compat.v1.disable_eager_execution()
    assert tf.compat.v2 is tf and tf.compat.v1.keras.backend.epsilon() == k.backend.epsilon()

    def weights():
        m = k.Sequential([k.Input(shape=(3,)), k.layers.Dense(2)])
        return m.get_weights()[0]
    tf.compat.v1.set_random_seed(7)
    a = weights()
    tf.random.set_seed(7)
    np.testing.assert_array_equal(a, weights())  # the same seed as tf.random.set_seed
    with pytest.raises(NotImplementedError, match="Keras API"):
        sess.run(None)
    with pytest.raises(NotImplementedError, match="keras.Input"):
        tf.compat.v1.placeholder("float32", (None, 3))


def test_metrics_in_compile_order(k):
    """Keras lists the metrics in compile's order, a Python metric function among the built-in ones:
    `loss, dice, acc = model.evaluate(...)` unpacks by it (evaluate's list, metrics_names, the
    History's keys, test_on_batch); the values are each metric's (NumPy references)."""
    from tarantella.keras import backend as K

    def mean_pred(y_true, y_pred):
        return K.mean(y_pred)

    rng = np.random.default_rng(6)
    x = rng.random((8, 3)).astype(np.float32)
    y = (x[:, :1] > 0.5).astype(np.float32)
    m = k.Sequential([k.Input((3,)), k.layers.Dense(1, activation="sigmoid")])
    m.compile("sgd", "binary_crossentropy", metrics=[mean_pred, "accuracy", "mse"])
    p = m.predict(x, verbose=0)
    loss, mp, acc, mse = m.evaluate(x, y, batch_size=8, verbose=0)
    assert mp == pytest.approx(float(p.mean()), rel=1e-5)
    assert acc == pytest.approx(float(np.mean((p > 0.5) == y)))
    assert mse == pytest.approx(float(np.mean((p - y) ** 2)), rel=1e-5)
    assert m.metrics_names == ["loss", "mean_pred", "accuracy", "mse"]
    h = m.fit(x, y, epochs=1, verbose=0, validation_split=0.25)
    assert list(h.history) == ["loss", "mean_pred", "accuracy", "mse", "val_loss", "val_mean_pred", "val_accuracy",
                               "val_mse"]
    assert list(m.test_on_batch(x, y, return_dict=True)) == ["loss", "mean_pred", "accuracy", "mse"]


def test_layer_attributes_and_shapes(k, tmp_path):
    """Keras's layer attributes that scripts print or read: output_shape/input_shape (batch axis
    None), the constructor arguments (Dense.units, Conv2D.filters, kernel_size and strides as
    tuples, activation as the function, Dropout.rate, LSTM.return_sequences, Reshape.target_shape),
    also on a model loaded from a file; an unknown name is still an AttributeError."""
    m = k.Sequential([k.layers.Conv2D(4, 3, input_shape=(8, 8, 1), activation="relu"), k.layers.Dropout(0.3),
                      k.layers.Flatten(), k.layers.Dense(3, activation="softmax"), k.layers.Reshape((3, 1)),
                      k.layers.LSTM(5, return_sequences=True)])
    conv, drop, _, dense, reshape, lstm = m.layers
    assert [layer.output_shape for layer in m.layers] == [(None, 6, 6, 4), (None, 6, 6, 4), (None, 144), (None, 3),
                                                          (None, 3, 1), (None, 3, 5)]
    assert conv.input_shape == (None, 8, 8, 1) and dense.input_shape == (None, 144)
    assert (conv.filters, conv.kernel_size, conv.strides, conv.padding) == (4, (3, 3), (1, 1), "valid")
    assert conv.activation is k.activations.relu and dense.activation is k.activations.softmax
    assert (dense.units, drop.rate, lstm.return_sequences, reshape.target_shape) == (3, 0.3, True, (3, 1))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        dense.nonexistent
    m.save(str(tmp_path / "m.h5"))
    loaded = k.models.load_model(str(tmp_path / "m.h5"))
    assert (loaded.layers[3].units, loaded.layers[0].kernel_size, loaded.layers[0].output_shape) == \
        (3, (3, 3), (None, 6, 6, 4))
    shared = k.layers.Dense(2)
    a, b = k.Input((4,)), k.Input((4,))
    k.Model([a, b], k.layers.Add()([shared(a), shared(b)]))
    assert shared.output_shape == (None, 2)  # two calls of the same shape


def test_sgd_learning_rate_zero_leaves_the_weights(k):
    """Keras: SGD(learning_rate=0.0) steps without moving the weights (the C options read 0 as the
    default, 0.01); the iterations still count, and a rate set later applies."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.integers(0, 3, size=16)
    m = k.Sequential([k.layers.Dense(3, input_shape=(4,))])
    opt = k.optimizers.SGD(learning_rate=0.0)
    m.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    before = [w.copy() for w in m.get_weights()]
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert opt.iterations == 2
    assert float(opt.learning_rate) == 0.0
    for a, b in zip(m.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    opt.learning_rate = 0.1
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert any(not np.array_equal(a, b) for a, b in zip(m.get_weights(), before))
