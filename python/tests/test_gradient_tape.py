"""Custom training loops (issues 21/22): tf.GradientTape around model calls, tape.gradient run by
the C engine's backward, optimizer.apply_gradients by the library's optimizer, the metric objects
used on data. References: fit on the same data and seed, PyTorch autograd with Keras's optimizer
formulas in NumPy, and NumPy for the metrics."""
import numpy as np
import pytest
import torch

import tarantella.tensorflow as tf
from tarantella import keras
from tarantella.keras import layers

RNG = np.random.default_rng(7)
X = RNG.normal(size=(40, 6)).astype(np.float32)
Y = RNG.integers(0, 3, size=(40,))
B = 8


def mlp(reg=None, bn=False, seed=3):
    keras.utils.set_random_seed(seed)
    inp = keras.Input(shape=(6,))
    h = layers.Dense(10, activation="tanh", kernel_regularizer=reg)(inp)
    if bn:
        h = layers.BatchNormalization()(h)
    out = layers.Dense(3)(h)
    return keras.Model(inp, out)


def optimizer(kind):
    return keras.optimizers.SGD(0.1) if kind == "sgd" else keras.optimizers.Adam(0.01)


def loop(model, opt, loss_fn, steps=5):
    losses = []
    for s in range(steps):
        xb, yb = X[s * B:(s + 1) * B], Y[s * B:(s + 1) * B]
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
            loss = loss + sum(model.losses)
        grads = tape.gradient(loss, model.trainable_weights)
        opt.apply_gradients(zip(grads, model.trainable_weights))
        losses.append(float(loss))
    return losses


def fit_weights(model, opt, loss, steps=5):
    model.compile(optimizer=opt, loss=loss)
    model.fit(X[:steps * B], Y[:steps * B], batch_size=B, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_loop_equals_fit(kind):
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    a = mlp()
    w0 = a.get_weights()
    opt = optimizer(kind)
    losses = loop(a, opt, ce)
    assert losses[-1] < losses[0] + 0.5 and all(np.isfinite(losses))
    assert int(opt.iterations) == 5
    b = mlp()
    b.set_weights(w0)
    wf = fit_weights(b, optimizer(kind), ce)
    for x, y in zip(a.get_weights(), wf):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def keras_update(kind, ws, gs, slots, t):
    """Keras's SGD and Adam (Keras 3 formulas) in NumPy."""
    out = []
    for i, (w, g) in enumerate(zip(ws, gs)):
        if kind == "sgd":
            out.append(w - 0.1 * g)
            continue
        m, v = slots.setdefault(i, (np.zeros_like(w), np.zeros_like(w)))
        m = m + (g - m) * (1 - 0.9)
        v = v + (g * g - v) * (1 - 0.999)
        slots[i] = (m, v)
        alpha = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        out.append(w - alpha * m / (np.sqrt(v) + 1e-7))
    return out


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_loop_equals_pytorch(kind):
    model = mlp()
    ws = [w.astype(np.float64) for w in model.get_weights()]  # kernel1, bias1, kernel2, bias2
    loop(model, optimizer(kind), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    slots = {}
    for s in range(5):
        xb = torch.tensor(X[s * B:(s + 1) * B], dtype=torch.float64)
        yb = torch.tensor(Y[s * B:(s + 1) * B], dtype=torch.long)
        params = [torch.tensor(w, requires_grad=True) for w in ws]
        logits = torch.tanh(xb @ params[0] + params[1]) @ params[2] + params[3]
        torch.nn.functional.cross_entropy(logits, yb).backward()
        ws = keras_update(kind, ws, [p.grad.numpy() for p in params], slots, s + 1)
    for got, want in zip(model.get_weights(), ws):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gradients_equal_pytorch_and_any_variable_order():
    model = mlp()
    ws = model.get_weights()
    xb, yb = X[:B], Y[:B]
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(yb, logits)
    tw = model.trainable_weights
    order = [tw[2], tw[0], tw[3], tw[1]]
    grads = tape.gradient(loss, order)
    params = [torch.tensor(w.astype(np.float64), requires_grad=True) for w in ws]
    lt = torch.tanh(torch.tensor(xb, dtype=torch.float64) @ params[0] + params[1]) @ params[2] + params[3]
    tl = torch.nn.functional.cross_entropy(lt, torch.tensor(yb))
    tl.backward()
    np.testing.assert_allclose(float(loss), tl.item(), rtol=1e-6)
    np.testing.assert_allclose(logits.numpy(), lt.detach().numpy(), rtol=1e-5, atol=1e-6)
    for g, k in zip(grads, [2, 0, 3, 1]):
        assert g.shape == ws[k].shape
        np.testing.assert_allclose(g.numpy(), params[k].grad.numpy(), rtol=1e-5, atol=1e-7)
    # the update in that order is the same as in Keras's order
    opt = keras.optimizers.SGD(0.5)
    opt.apply(grads, order)  # Keras 3's spelling of apply_gradients
    for k in range(4):
        np.testing.assert_allclose(model.get_weights()[k], ws[k] - 0.5 * params[k].grad.numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_ops_loss_with_regularization_equals_fit():
    """A loss written with TensorFlow math on the outputs, plus sum(model.losses) of an L2 kernel
    regularizer, trains as fit with loss="mse" and the same regularizer."""
    yoh = np.eye(3, dtype=np.float32)[Y]
    a = mlp(reg=keras.regularizers.L2(0.05))
    w0 = a.get_weights()
    opt = keras.optimizers.SGD(0.1)
    for s in range(5):
        xb, yb = X[s * B:(s + 1) * B], yoh[s * B:(s + 1) * B]
        with tf.GradientTape() as tape:
            pred = a(xb, training=True)
            assert len(a.losses) == 1
            loss = tf.reduce_mean(tf.square(yb - pred)) + sum(a.losses)
        grads = tape.gradient(loss, a.trainable_weights)
        opt.apply_gradients(zip(grads, a.trainable_weights))
    b = mlp(reg=keras.regularizers.L2(0.05))
    b.set_weights(w0)
    b.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    b.fit(X, yoh, batch_size=B, epochs=1, shuffle=False, verbose=0)
    for x, y in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_batch_normalization_in_training_mode():
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    a = mlp(bn=True)
    w0 = a.get_weights()
    names = [w.name for w in a.weights]
    assert len(a.trainable_weights) == 6 and len(a.non_trainable_weights) == 2  # moving mean and variance
    # one training call: the batch statistics, and the moving averages of Keras (momentum 0.99)
    h = np.tanh(X[:B] @ w0[0] + w0[1]).astype(np.float64)
    out = a(X[:B], training=True).numpy()
    gamma, beta = w0[2], w0[3]
    norm = (h - h.mean(0)) / np.sqrt(h.var(0) + 1e-3) * gamma + beta
    np.testing.assert_allclose(out, norm @ w0[-2] + w0[-1], rtol=1e-4, atol=1e-5)
    ws = a.get_weights()
    mm = ws[[i for i, n in enumerate(names) if "moving_mean" in n][0]]
    np.testing.assert_allclose(mm, 0.01 * h.mean(0), rtol=1e-4, atol=1e-6)
    a.set_weights(w0)
    loop(a, keras.optimizers.Adam(0.01), ce)
    b = mlp(bn=True)
    b.set_weights(w0)
    wf = fit_weights(b, keras.optimizers.Adam(0.01), ce)
    for x, y in zip(a.get_weights(), wf):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def test_dropout_in_training_mode():
    keras.utils.set_random_seed(1)
    inp = keras.Input(shape=(200,))
    m = keras.Model(inp, layers.Dropout(0.4)(inp))
    x = np.ones((50, 200), np.float32)
    np.testing.assert_array_equal(m(x).numpy(), x)  # inference: the identity
    y = m(x, training=True).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.6) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.6, rtol=1e-6)
    with tf.GradientTape():
        z = m(x, training=True).numpy()
    assert abs((z != 0).mean() - 0.6) < 0.02 and (kept != (z != 0)).any()  # a new draw per step


def test_metric_objects_against_numpy():
    logits = RNG.normal(size=(20, 4)).astype(np.float32)
    y = RNG.integers(0, 4, size=(20,))
    w = RNG.uniform(size=(20,)).astype(np.float32)
    sca = keras.metrics.SparseCategoricalAccuracy()
    ca = keras.metrics.CategoricalAccuracy()
    mean, total = keras.metrics.Mean(), keras.metrics.Sum()
    for lo, hi in ((0, 8), (8, 20)):
        sca.update_state(y[lo:hi], logits[lo:hi])
        ca.update_state(np.eye(4)[y[lo:hi]], logits[lo:hi], sample_weight=w[lo:hi])
        mean.update_state(logits[lo:hi, 0], sample_weight=w[lo:hi])
        total.update_state(logits[lo:hi])
    hit = (logits.argmax(1) == y).astype(np.float64)
    np.testing.assert_allclose(float(sca.result()), hit.mean(), rtol=1e-6)
    np.testing.assert_allclose(ca.result().numpy(), (hit * w).sum() / w.sum(), rtol=1e-6)
    np.testing.assert_allclose(float(mean.result()), (logits[:, 0] * w).sum() / w.sum(), rtol=1e-6)
    np.testing.assert_allclose(float(total.result()), logits.astype(np.float64).sum(), rtol=1e-5)
    m2 = keras.metrics.Mean(name="loss")
    m2.update_state(np.arange(6, dtype=np.float32).reshape(3, 2))  # rows averaged, then over rows
    assert float(m2.result()) == pytest.approx(2.5) and m2.name == "loss"
    for m in (sca, ca, mean, total):
        m.reset_state()
    assert float(sca.result()) == 0.0 and float(mean.result()) == 0.0 and float(total.result()) == 0.0
    with pytest.raises(NotImplementedError, match="Mean in compile"):
        mlp().compile(optimizer="sgd", loss="mse", metrics=[keras.metrics.Mean()])


def test_errors_name_what_cannot_be_done():
    model = mlp()
    with tf.GradientTape() as tape:
        logits = model(X[:B], training=True)
        loss = tf.reduce_mean(tf.square(logits))
    with pytest.raises(ValueError, match="cannot differentiate w.r.t. ndarray"):
        tape.gradient(loss, [X[:B]])
    with pytest.raises(ValueError, match="target is float32"):
        tape.gradient(np.float32(1.0), model.trainable_weights)
    g = tape.gradient(loss, logits)  # the outputs of a recorded call are sources too
    np.testing.assert_allclose(g.numpy(), 2 * logits.numpy() / logits.numpy().size, rtol=1e-5)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(loss, model.trainable_weights)
    with pytest.raises(NotImplementedError, match="persistent=True"):
        tf.GradientTape(persistent=True)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(X[:B], training=True))
    model.predict(X[B:2 * B], verbose=0)  # the same plan: the tape's forward is overwritten
    with pytest.raises(RuntimeError, match="called again after the tape's call"):
        tape.gradient(loss, model.trainable_weights)
    with tf.GradientTape() as tape:
        model(X[:B], training=True)
        loss = tf.reduce_mean(model(X[B:2 * B], training=True))
    with pytest.raises(NotImplementedError, match="called 2 times"):
        tape.gradient(loss, model.trainable_weights)


def test_mean_metric_wrapper_in_compile_and_standalone():
    def sq(y_true, y_pred):
        return keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)
    yoh = np.eye(3, dtype=np.float32)[Y]
    m = mlp()
    m.compile(optimizer="sgd", loss="mse", metrics=[keras.metrics.MeanMetricWrapper(sq, name="sq")])
    logs = m.evaluate(X, yoh, batch_size=8, verbose=0, return_dict=True)
    pred = m.predict(X, verbose=0)
    want = ((yoh - pred) ** 2).mean(-1).mean()
    np.testing.assert_allclose(logs["sq"], want, rtol=1e-5)
    w = keras.metrics.MeanMetricWrapper(lambda a, b: ((a - b) ** 2).mean(-1))
    w.update_state(yoh, pred)
    np.testing.assert_allclose(float(w.result()), want, rtol=1e-5)


def test_gradients_through_a_chain_of_model_calls_equal_pytorch():
    """A GAN's steps (keras.io's "writing a training loop from scratch"): the discriminator on the
    generator's output concatenated with real data; the generator's gradient comes back through the
    discriminator's backward and the concatenation."""
    keras.utils.set_random_seed(5)
    zi = keras.Input(shape=(3,))
    gen = keras.Model(zi, layers.Dense(4, activation="tanh")(zi))
    di = keras.Input(shape=(4,))
    disc = keras.Model(di, layers.Dense(1)(layers.Dense(5, activation="relu")(di)))
    z, real = X[:B, :3], X[B:2 * B, :4]
    labels = np.concatenate([np.ones((B, 1)), np.zeros((B, 1))]).astype(np.float32)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        fake = gen(z)
        pred = disc(tf.concat([fake, real], axis=0), training=True)
        loss = bce(labels, pred) + tf.reduce_mean(tf.square(fake))
    gw, dw = tape.gradient(loss, [gen.trainable_weights, disc.trainable_weights])
    tg = [torch.tensor(w.astype(np.float64), requires_grad=True) for w in gen.get_weights()]
    td = [torch.tensor(w.astype(np.float64), requires_grad=True) for w in disc.get_weights()]
    tf_fake = torch.tanh(torch.tensor(z, dtype=torch.float64) @ tg[0] + tg[1])
    h = torch.cat([tf_fake, torch.tensor(real, dtype=torch.float64)])
    logits = torch.relu(h @ td[0] + td[1]) @ td[2] + td[3]
    tl = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(labels, dtype=torch.float64)) + \
        (tf_fake ** 2).mean()
    tl.backward()
    np.testing.assert_allclose(float(loss), tl.item(), rtol=1e-6)
    for got, want in zip(list(gw) + list(dw), tg + td):
        np.testing.assert_allclose(got.numpy(), want.grad.numpy(), rtol=1e-5, atol=1e-7)
