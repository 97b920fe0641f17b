"""Losses and metrics of the user's own (issue 22): Python functions of (y_true, y_pred) and
keras.losses.Loss subclasses, traced into operation graphs that the library differentiates;
metric functions averaged as Keras averages them; the same figures on 1, 2 and 3 ranks."""
import json
import os

import numpy as np
import pytest

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "custom_objectives_job.py")


@pytest.fixture(scope="module")
def k(tnt):
    return tnt.keras


def _model(k, out=3, act=None, seed=1):
    inp = k.Input(shape=(5,))
    h = k.layers.Dense(7, activation="tanh")(inp)
    m = k.Model(inp, k.layers.Dense(out, activation=act)(h))
    rng = np.random.default_rng(seed)
    m.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in m.get_weights()])
    return m


def _forward(m, x, act=None):
    w1, b1, w2, b2 = m.get_weights()
    z = np.tanh(x @ w1 + b1) @ w2 + b2
    if act == "softmax":
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return z


def _data(n=48, out=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 5)).astype(np.float32), rng.standard_normal((n, out)).astype(np.float32)


def _train(m, loss, x, y, metrics=None, sample_weight=None, epochs=2):
    from tarantella import keras
    m.compile(keras.optimizers.SGD(0.1), loss=loss, metrics=metrics)
    return m.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=False, sample_weight=sample_weight)


def test_loss_function_trains_as_the_builtin_loss(k):
    from tarantella.keras import backend as K
    x, y = _data()

    def my_mse(y_true, y_pred):
        return K.mean(K.square(y_pred - y_true), axis=-1)

    a, b = _model(k), _model(k)
    ha, hb = _train(a, "mse", x, y), _train(b, my_mse, x, y)
    np.testing.assert_allclose(hb.history["loss"], ha.history["loss"], rtol=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wb, wa, rtol=1e-6, atol=1e-7)


def test_sparse_loss_function_with_integer_labels(k):
    """Labels of another shape than the output (class indices): y_true traced with the labels'."""
    from tarantella.keras import ops
    x, _ = _data()
    labels = np.random.default_rng(2).integers(0, 3, size=(48,)).astype(np.float32)

    def sparse_ce(y_true, y_pred):
        onehot = ops.one_hot(ops.cast(y_true, "int32"), 3)
        return -ops.sum(onehot * ops.log(ops.clip(y_pred, 1e-7, 1.0 - 1e-7)), axis=-1)

    a, b = _model(k, act="softmax"), _model(k, act="softmax")
    ha = _train(a, "sparse_categorical_crossentropy", x, labels)
    hb = _train(b, sparse_ce, x, labels)
    np.testing.assert_allclose(hb.history["loss"], ha.history["loss"], rtol=1e-5)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wb, wa, rtol=1e-4, atol=1e-6)
    # the value after training against NumPy's formula on the final weights
    p = _forward(b, x, "softmax")
    want = np.mean(-np.log(np.clip(p[np.arange(48), labels.astype(int)], 1e-7, 1 - 1e-7)))
    np.testing.assert_allclose(b.evaluate(x, labels, verbose=0), want, rtol=1e-5)


def test_loss_subclass_with_sample_weights(k):
    """A keras.losses.Loss subclass (call) with sample weights: sum_i w_i loss_i / batch size."""
    from tarantella.keras import ops
    x, y = _data()

    class ScaledMAE(k.losses.Loss):
        def __init__(self, factor, **kw):
            super().__init__(**kw)
            self.factor = factor

        def call(self, y_true, y_pred):
            return self.factor * ops.mean(ops.abs(y_pred - y_true), axis=-1)

    w = np.linspace(0.1, 2.0, 48).astype(np.float32)
    a, b = _model(k), _model(k)
    ha = _train(a, "mae", x, y, sample_weight=w)
    hb = _train(b, ScaledMAE(1.0), x, y, sample_weight=w)
    np.testing.assert_allclose(hb.history["loss"], ha.history["loss"], rtol=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wb, wa, rtol=1e-6, atol=1e-7)
    m = _model(k)
    m.compile("sgd", loss=ScaledMAE(3.0))
    p = _forward(m, x)
    want = np.sum(w * 3.0 * np.abs(p - y).mean(-1)) / 48
    np.testing.assert_allclose(m.evaluate(x, y, sample_weight=w, batch_size=48, verbose=0), want, rtol=1e-5)


def test_scalar_loss_is_the_batch_mean(k):
    """A loss that returns K.mean over everything (a scalar, as mnist_siamese's contrastive loss)
    trains as the per-sample form of the same mean."""
    from tarantella.keras import backend as K
    x, y = _data()
    margin = 1.0

    def contrastive_scalar(y_true, y_pred):
        return K.mean(y_true * K.square(y_pred) + (1 - y_true) * K.square(K.maximum(margin - y_pred, 0)))

    def contrastive_per_sample(y_true, y_pred):
        return K.mean(y_true * K.square(y_pred) + (1 - y_true) * K.square(K.maximum(margin - y_pred, 0)), axis=-1)

    a, b = _model(k), _model(k)
    ha, hb = _train(a, contrastive_per_sample, x, y), _train(b, contrastive_scalar, x, y)
    np.testing.assert_allclose(hb.history["loss"], ha.history["loss"], rtol=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wb, wa, rtol=1e-5, atol=1e-7)
    p = _forward(b, x)
    want = np.mean(y * p ** 2 + (1 - y) * np.maximum(margin - p, 0) ** 2)
    np.testing.assert_allclose(b.evaluate(x, y, batch_size=48, verbose=0), want, rtol=1e-5)


def test_metric_functions_are_averaged_as_keras(k):
    """Keras's MeanMetricWrapper: the mean over all samples seen of fn's per-sample values (the
    mean over the other axes first), logged under the function's name."""
    from tarantella.keras import ops
    x, y = _data()

    def top(y_true, y_pred):
        return ops.max(y_pred, axis=-1)

    def sq_err(y_true, y_pred):  # (batch, 3): the mean over all values
        return ops.square(y_pred - y_true)

    m = _model(k)
    m.compile("sgd", loss="mse", metrics=["mae", top, sq_err])
    logs = m.evaluate(x, y, batch_size=20, verbose=0, return_dict=True)
    p = _forward(m, x)
    np.testing.assert_allclose(logs["top"], p.max(-1).mean(), rtol=1e-5)
    np.testing.assert_allclose(logs["sq_err"], ((p - y) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], ((p - y) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(logs["mae"], np.abs(p - y).mean(), rtol=1e-5)
    h = m.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert set(h.history) == {"loss", "mae", "top", "sq_err"}


def test_errors_name_the_users_line(k):
    from tarantella.keras import ops
    from tarantella.keras._trace import TraceError
    x, y = _data()

    def branchy(y_true, y_pred):
        if ops.mean(y_pred) > 0:  # a value-dependent branch: not traceable
            return ops.square(y_pred - y_true)
        return ops.abs(y_pred - y_true)

    m = _model(k)
    with pytest.raises(TraceError, match=r"test_custom_objectives\.py:\d+: a Python `if`"):
        m.compile("sgd", loss=branchy)
        m.fit(x, y, verbose=0)

    def not_a_tensor(y_true, y_pred):
        return 1.0

    with pytest.raises(TraceError, match="not_a_tensor.*returned float"):
        m.compile("sgd", loss=not_a_tensor)

    def bad_shapes(y_true, y_pred):
        return y_pred[:, :2] - y_true

    with pytest.raises(TraceError, match=r"test_custom_objectives\.py:\d+: subtract on shapes"):
        m.compile("sgd", loss=bad_shapes)
        m.fit(x, y, verbose=0)


def test_metric_subclass_with_state(k):
    """A keras.metrics.Metric subclass: add_weight state, update_state with assign_add, result on
    the state; its value is the result on the state summed over every batch."""
    from tarantella.keras import ops
    x, _ = _data(n=50)
    labels = np.random.default_rng(4).integers(0, 3, size=(50, 1)).astype(np.float32)

    class Hits(k.metrics.Metric):
        def __init__(self, name="hit_rate", **kw):
            super().__init__(name=name, **kw)
            self.hits = self.add_weight(name="hits", initializer="zeros")
            self.seen = self.add_variable(shape=(), initializer="zeros", name="seen")
            self.per_class = self.add_variable(shape=(3,), initializer="zeros", name="per_class")

        def update_state(self, y_true, y_pred, sample_weight=None):
            pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
            values = ops.cast(ops.cast(y_true, "int32") == ops.cast(pred, "int32"), "float32")
            self.hits.assign_add(ops.sum(values))
            self.seen.assign_add(ops.shape(y_pred)[0])
            self.per_class.assign_add(ops.sum(y_pred, axis=0))

        def result(self):
            return self.hits / self.seen + 0.0 * ops.sum(self.per_class)

        def reset_state(self):
            self.hits.assign(0.0)

    m = _model(k, act="softmax")
    m.compile("sgd", loss="sparse_categorical_crossentropy", metrics=[Hits(), "sparse_categorical_accuracy"])
    logs = m.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
    p = _forward(m, x, "softmax")
    want = np.mean(p.argmax(-1) == labels[:, 0])
    np.testing.assert_allclose(logs["hit_rate"], want, rtol=1e-6)
    np.testing.assert_allclose(logs["hit_rate"], logs["sparse_categorical_accuracy"], rtol=1e-6)
    h = m.fit(x, labels, batch_size=16, epochs=2, verbose=0)
    np.testing.assert_allclose(h.history["hit_rate"], h.history["sparse_categorical_accuracy"], rtol=1e-6)

    class Resetting(Hits):
        def update_state(self, y_true, y_pred, sample_weight=None):
            self.hits.assign(ops.sum(y_pred))

    from tarantella.keras._trace import TraceError
    with pytest.raises(TraceError, match="assign_add"):
        m.compile("sgd", loss="sparse_categorical_crossentropy", metrics=[Resetting()])


def job(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=240)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_custom_loss_and_metrics_on_1_2_3_ranks_equal_serial(tmp_path):
    (one,) = job(tmp_path, 1)
    assert one["history"]["loss"][-1] < one["history"]["loss"][0]
    # the weighted Metric class (accuracy by the sample weights) differs from the unweighted one
    assert abs(one["evaluate"]["cls_w_hits"] - one["evaluate"]["cls_tp_rate"]) > 1e-3
    for n in (2, 3):
        for r in job(tmp_path, n):
            assert r["size"] == n
            for key, v in one["history"].items():
                np.testing.assert_allclose(r["history"][key], v, rtol=1e-5, atol=1e-6, err_msg=key)
            for key, v in one["evaluate"].items():
                np.testing.assert_allclose(r["evaluate"][key], v, rtol=1e-5, atol=1e-6, err_msg=key)
            for a, b in zip(r["weights"], one["weights"]):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_a_loss_without_gradient_names_the_operation(k):
    """An argmax (or a comparison, an integer cast) between y_pred and the loss cuts the gradient:
    Keras fails with "No gradients provided"; here the trace names the operation's line."""
    from tarantella.keras import ops
    from tarantella.keras._trace import TraceError
    x, y = _data()

    def argmax_loss(y_true, y_pred):
        hit = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), ops.argmax(y_true, axis=-1)), "float32")
        return 1.0 - hit

    def constant_loss(y_true, y_pred):
        return ops.mean(ops.square(y_true), axis=-1)

    m = _model(k)
    with pytest.raises(TraceError, match=r"no gradient with respect to y_pred: the operation at "
                                         r".*test_custom_objectives\.py:\d+ \(argmax\)"):
        m.compile("sgd", loss=argmax_loss)
    with pytest.raises(TraceError, match="does not depend on y_pred"):
        m.compile("sgd", loss=constant_loss)
    m.compile("sgd", loss="mse", metrics=[argmax_loss])  # as a metric it needs no gradient
    assert np.isfinite(m.evaluate(x, y, verbose=0, return_dict=True)["argmax_loss"])


def test_layer_add_loss_joins_the_loss_and_its_gradient(k):
    """Layer.add_loss in call: the total loss is the compiled loss plus the added loss (a batch's
    value), reported by evaluate and differentiated by fit (one SGD step against NumPy)."""
    from tarantella.keras import ops
    c, lr = 0.01, 0.1

    class Penalized(k.layers.Layer):
        def call(self, inputs):
            self.add_loss(c * ops.sum(ops.square(inputs)))
            return inputs

    x, t = _data(n=12)
    inp = k.Input(shape=(5,))
    y = Penalized()(k.layers.Dense(3)(inp))
    m = k.Model(inp, y)
    rng = np.random.default_rng(6)
    w0, b0 = rng.uniform(-0.5, 0.5, (5, 3)).astype(np.float32), rng.uniform(-0.5, 0.5, 3).astype(np.float32)
    m.set_weights([w0, b0])
    m.compile(k.optimizers.SGD(lr), loss="mse")
    yv = x @ w0 + b0
    want = np.mean((yv - t) ** 2) + c * np.sum(yv ** 2)
    np.testing.assert_allclose(m.evaluate(x, t, batch_size=12, verbose=0), want, rtol=1e-5)
    h = m.fit(x, t, batch_size=12, epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(h.history["loss"][0], want, rtol=1e-5)
    dy = 2 * (yv - t) / yv.size + 2 * c * yv
    w1, b1 = m.get_weights()
    np.testing.assert_allclose(w1, w0 - lr * x.T @ dy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b1, b0 - lr * dy.sum(0), rtol=1e-5, atol=1e-6)


def test_extra_positional_tensor_arguments(k):
    """A custom layer called as layer(x, y): both tensors are its inputs."""
    from tarantella.keras import ops

    class Gate(k.layers.Layer):
        def call(self, x, gate):
            return x * ops.sigmoid(gate)

    a, b = k.Input(shape=(4,)), k.Input(shape=(4,))
    m = k.Model([a, b], Gate()(a, b))
    xa, xb = _data(n=6, out=4)[1], _data(n=6, out=4, seed=1)[1]
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), xa / (1 + np.exp(-xb)), rtol=1e-5)


def test_endpoint_layer_with_builtin_loss_and_no_compiled_loss(k):
    """The endpoint pattern: a layer takes (logits, targets), adds a built-in loss object's value
    (BinaryCrossentropy(from_logits=True), Keras's formula on traced values) with add_loss; the
    model compiles without a loss and fits on x alone (a dict by input name)."""
    import warnings
    from tarantella.keras import ops

    class Endpoint(k.layers.Layer):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.loss_fn = k.losses.BinaryCrossentropy(from_logits=True)
            self.acc = k.metrics.BinaryAccuracy()

        def call(self, logits, targets=None):
            self.add_loss(self.loss_fn(targets, logits))
            self.acc.update_state(targets, logits)
            return ops.sigmoid(logits)

    rng = np.random.default_rng(8)
    x = rng.standard_normal((40, 5)).astype(np.float32)
    t = rng.integers(0, 2, (40, 2)).astype(np.float32)
    inp, tgt = k.Input(shape=(5,), name="inputs"), k.Input(shape=(2,), name="targets")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = Endpoint()(k.layers.Dense(2)(inp), tgt)
    assert any("not logged" in str(w.message) for w in caught)
    m = k.Model([inp, tgt], out)
    m.compile(k.optimizers.SGD(0.1))
    w, b = m.get_weights()
    z = x @ w + b
    want = np.mean(np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z))))
    np.testing.assert_allclose(m.evaluate({"inputs": x, "targets": t}, batch_size=40, verbose=0), want, rtol=1e-5)
    h = m.fit({"inputs": x, "targets": t}, batch_size=10, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    with pytest.raises(ValueError, match="no loss given"):
        _model(k).compile("sgd")


def test_keyword_tensor_arguments_and_first_argument_by_name(k):
    """layer(logits=a, targets=b): the first call parameter is the input, the other tensors more inputs."""
    from tarantella.keras import ops

    class Mix(k.layers.Layer):
        def call(self, logits, targets=None, scale=2.0):
            return logits * scale + targets

    a, b = k.Input(shape=(3,)), k.Input(shape=(3,))
    m = k.Model([a, b], Mix()(logits=a, targets=b, scale=3.0))
    xa, xb = _data(n=4)[1], _data(n=4, seed=2)[1]
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), 3.0 * xa + xb, rtol=1e-6)


def test_model_add_loss_of_model_tensors(k):
    _vae_like(k)


def _vae_like(k):
    """model.add_loss(a tensor of the model's): the VAE pattern, with a built-in loss function on the
    model's tensors; compiled without a loss, trained on x alone; evaluate against NumPy."""
    from tarantella.keras import backend as K
    from tarantella.keras import losses
    rng = np.random.default_rng(9)
    x = rng.uniform(0.05, 0.95, (24, 6)).astype(np.float32)
    inp = k.Input(shape=(6,))
    h = k.layers.Dense(3, name="enc")(inp)
    out = k.layers.Dense(6, activation="sigmoid", name="dec")(h)
    m = k.Model(inp, out)
    rec = losses.binary_crossentropy(inp, out) * 6.0
    m.add_loss(K.mean(rec + 0.1 * K.sum(K.square(h), axis=-1)))
    m.compile(k.optimizers.SGD(0.05))
    w1, b1, w2, b2 = m.get_weights()
    hv = x @ w1 + b1
    p = np.clip(1 / (1 + np.exp(-(hv @ w2 + b2))), 1e-7, 1 - 1e-7)
    bce = -(x * np.log(p + 1e-7) + (1 - x) * np.log(1 - p + 1e-7)).mean(-1)
    want = np.mean(bce * 6.0 + 0.1 * (hv ** 2).sum(-1))
    np.testing.assert_allclose(m.evaluate(x, batch_size=24, verbose=0), want, rtol=1e-5)
    np.testing.assert_allclose(m.predict(x, verbose=0), p, rtol=1e-4, atol=1e-6)  # the output passes through
    hist = m.fit(x, batch_size=8, epochs=3, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    return m, x


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_added_losses_survive_a_file(k, tmp_path, ext):
    """The added loss travels in the traced layer's config (tnt_losses): a reloaded model reports it."""
    from tarantella.keras import models
    m, x = _vae_like(k)
    path = str(tmp_path / f"m{ext}")
    m.save(path)
    back = models.load_model(path)
    back.compile(k.optimizers.SGD(0.05))
    np.testing.assert_allclose(back.evaluate(x, batch_size=24, verbose=0), m.evaluate(x, batch_size=24, verbose=0),
                               rtol=1e-6)


@pytest.mark.parametrize("ext", [".h5", ".keras"])
def test_custom_loss_in_a_file_trains_in_tnt_train(k, tmp_path, ext):
    """A model compiled with a loss function: the file names the loss as Keras does and carries its
    graph (tnt_loss_graphs) where Keras does not look, so load_model compiles with it and tnt-train
    resumes training with it, without Python, as fit does."""
    import os
    from conftest import BIN, run
    from tarantella.keras import ops

    def weighted_sparse_ce(y_true, y_pred):
        onehot = ops.one_hot(ops.cast(y_true, "int32"), 3)
        return -ops.sum(onehot * ops.log(ops.clip(y_pred, 1e-7, 1.0)) * np.array([1.0, 2.0, 0.5]), axis=-1)

    x, _ = _data(n=48)
    labels = np.random.default_rng(3).integers(0, 3, size=(48,)).astype(np.float32)
    m = _model(k, act="softmax")
    m.compile(k.optimizers.SGD(0.05), loss=weighted_sparse_ce)
    m.fit(x, labels, batch_size=16, epochs=1, verbose=0)
    path = str(tmp_path / f"m{ext}")
    m.save(path)
    if ext == ".h5":
        import h5py
        with h5py.File(path, "r") as f:
            tc = json.loads(f.attrs["training_config"])
    else:
        import zipfile
        with zipfile.ZipFile(path) as z:
            tc = json.loads(z.read("config.json"))["compile_config"]
    assert tc["loss"] == "weighted_sparse_ce" and tc["tnt_loss_graphs"][0]["format"] == "tnt_ops"
    back = k.models.load_model(path)
    np.testing.assert_allclose(back.evaluate(x, labels, verbose=0), m.evaluate(x, labels, verbose=0), rtol=1e-6)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    run([os.path.join(BIN, "tnt-train"), path, "--data", f"npy:{tmp_path / 'x.npy'},{tmp_path / 'y.npy'}",
         "--epochs", "1", "--batch_size", "16", "--verbose", "0", "--save", str(tmp_path / f"c{ext}")],
        env={"OMP_NUM_THREADS": "1"})
    back.fit(x, labels, batch_size=16, epochs=1, verbose=0)  # shuffled with the same default seed, 42
    c = k.models.load_model(str(tmp_path / f"c{ext}"))
    for a, b in zip(back.get_weights(), c.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_outputs_without_a_loss(k):
    """loss=[None, ...] or a dict without some outputs (Keras): those outputs have no loss and no
    labels; y holds the labels of the others."""
    rng = np.random.default_rng(11)
    x, t = rng.standard_normal((16, 5)).astype(np.float32), rng.standard_normal((16, 2)).astype(np.float32)
    inp = k.Input(shape=(5,))
    a = k.layers.Dense(3, name="a")(inp)
    b = k.layers.Dense(2, name="b")(inp)
    for loss in ([None, "mse"], {"b": "mse"}):
        m = k.Model(inp, [a, b])
        m.compile("sgd", loss=loss)
        wa, ba, wb, bb = m.get_weights()
        want = np.mean((x @ wb + bb - t) ** 2)
        np.testing.assert_allclose(m.evaluate(x, [t], batch_size=16, verbose=0)[0], want, rtol=1e-5)
    with pytest.raises(ValueError, match="every output's loss is None"):
        k.Model(inp, [a, b]).compile("sgd", loss=[None, None])
