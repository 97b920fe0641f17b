"""Model semantics Keras programs rely on (issue 21), against NumPy written from Keras's documented
behaviour: inputs with None dimensions take the data's shapes (several inputs too), Keras 2's
implicit (None,) input of an Embedding, a nested model called on other shapes (Keras warns and
runs its layers on them), per-output sample weights, and stateful recurrent layers (states carried
from batch to batch, reset_states)."""
import os
import json
import warnings

import numpy as np
import pytest

from conftest import HERE, launch, python


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm_ref(x, kernel, rec, bias, h=None, c=None):
    """Keras's LSTM (gates i, f, c, o; sigmoid and tanh): the final h and c."""
    n, T, _ = x.shape
    U = rec.shape[0]
    h = np.zeros((n, U)) if h is None else h
    c = np.zeros((n, U)) if c is None else c
    for t in range(T):
        z = x[:, t] @ kernel + h @ rec + bias
        i, f, g, o = sigmoid(z[:, :U]), sigmoid(z[:, U:2 * U]), np.tanh(z[:, 2 * U:3 * U]), sigmoid(z[:, 3 * U:])
        c = f * c + i * g
        h = o * np.tanh(c)
    return h, c


# ---- None dimensions ---------------------------------------------------------------------------

def two_input_model(k):
    a, b = k.Input(shape=(None, 3)), k.Input(shape=(None, 3))
    pa, pb = k.layers.GlobalAveragePooling1D()(a), k.layers.GlobalAveragePooling1D()(b)
    y = k.layers.Dense(2)(k.layers.Add()([pa, pb]))
    return k.Model([a, b], y)


def two_input_ref(m, xa, xb):
    w, bias = m.get_weights()
    return (xa.mean(axis=1) + xb.mean(axis=1)) @ w + bias


def test_two_inputs_with_none_dimensions_take_the_data_shapes(tnt):
    k = tnt.keras
    m = two_input_model(k)
    m.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    xa, xb = rng.standard_normal((6, 5, 3)).astype(np.float32), rng.standard_normal((6, 7, 3)).astype(np.float32)
    y = rng.standard_normal((6, 2)).astype(np.float32)
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), two_input_ref(m, xa, xb), rtol=1e-5, atol=1e-6)
    loss = m.evaluate([xa, xb], y, verbose=0)
    np.testing.assert_allclose(loss, np.mean((two_input_ref(m, xa, xb) - y) ** 2), rtol=1e-5)
    m.fit([xa, xb], y, batch_size=3, epochs=1, verbose=0)
    # other lengths in a later call: the model is made again for them, as Keras retraces
    xa2, xb2 = xa[:, :2], np.concatenate([xb, xb], axis=1)
    np.testing.assert_allclose(m.predict([xa2, xb2], verbose=0), two_input_ref(m, xa2, xb2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict_on_batch([xa, xb]), two_input_ref(m, xa, xb), rtol=1e-5, atol=1e-6)
    # a tnt.data dataset of the two inputs
    ds = tnt.data.Dataset.from_tensor_slices(([xa, xb], y)).batch(3)
    np.testing.assert_allclose(m.evaluate(ds, verbose=0), np.mean((two_input_ref(m, xa, xb) - y) ** 2), rtol=1e-5)
    # validation data of other lengths than the training data's, every epoch
    m.compile("sgd", "mse")  # lr 0.01
    h = m.fit([xa, xb], y, batch_size=6, epochs=2, verbose=0, validation_data=([xa2, xb2], y))
    np.testing.assert_allclose(h.history["val_loss"][-1], np.mean((two_input_ref(m, xa2, xb2) - y) ** 2), rtol=1e-5)
    assert h.history["loss"][1] < h.history["loss"][0]


def test_predict_on_other_lengths_inside_fit_leaves_fit_its_shapes(tnt):
    k = tnt.keras
    m = two_input_model(k)
    m.compile("sgd", "mse")
    rng = np.random.default_rng(8)
    xa, xb = rng.standard_normal((6, 5, 3)).astype(np.float32), rng.standard_normal((6, 7, 3)).astype(np.float32)
    seen = []

    class PredictShort(k.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            short = [xa[:2, :2], xb[:2, :3]]
            seen.append(np.allclose(self.model.predict(short, verbose=0), two_input_ref(self.model, *short),
                                    rtol=1e-5, atol=1e-6))

    h = m.fit([xa, xb], np.zeros((6, 2), np.float32), batch_size=3, epochs=3, verbose=0, callbacks=[PredictShort()])
    assert seen == [True] * 3 and len(h.history["loss"]) == 3
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0), two_input_ref(m, xa, xb), rtol=1e-5, atol=1e-6)


def test_several_outputs_with_none_dimensions_are_split_by_the_data_lengths(tnt):
    k = tnt.keras
    a = k.Input(shape=(None, 2))
    seq = k.layers.Dense(3)(a)
    pooled = k.layers.GlobalMaxPooling1D()(seq)
    m = k.Model(a, [seq, pooled])
    x = np.random.default_rng(1).standard_normal((4, 6, 2)).astype(np.float32)
    s, p = m.predict(x, verbose=0)
    w, b = m.get_weights()
    assert s.shape == (4, 6, 3) and p.shape == (4, 3)
    np.testing.assert_allclose(s, x @ w + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p, (x @ w + b).max(axis=1), rtol=1e-5, atol=1e-6)


# ---- Embedding's implicit input shape ------------------------------------------------------------

def test_embedding_without_input_length_gives_a_sequential_its_input_shape(tnt):
    k = tnt.keras
    m = k.Sequential()
    m.add(k.layers.Embedding(10, 4))
    m.add(k.layers.SimpleRNN(3))
    assert m.input_shape == (None, None)  # Keras 2: Embedding's input_shape (None,)
    m.summary(print_fn=lambda s: None)
    seq = k.Sequential([k.layers.Embedding(input_dim=10, output_dim=4)])
    ids = np.array([[1, 2, 3, 0, 9], [4, 4, 5, 6, 7]])
    table = seq.get_weights()[0]
    np.testing.assert_allclose(seq.predict(ids, verbose=0), table[ids], rtol=0, atol=0)
    # nested in a functional model with a fixed length: it takes that length
    inp = k.Input((5,))
    out = seq(inp)
    outer = k.Model(inp, out)
    assert outer.output_shape == (None, 5, 4)
    np.testing.assert_allclose(outer.predict(ids, verbose=0), table[ids], rtol=0, atol=0)
    np.testing.assert_allclose(seq.predict(ids[:, :3], verbose=0), table[ids[:, :3]], rtol=0, atol=0)


# ---- a nested model called on other shapes ------------------------------------------------------

def test_nested_model_called_on_another_shape_runs_its_layers_on_it(tnt, capfd):
    k = tnt.keras
    inner = k.Sequential([k.layers.Dense(3, input_shape=(4,))])
    inp = k.Input((2, 4))
    outer = k.Model(inp, inner(inp))  # Keras: a warning, then Dense on the last axis
    assert "incompatible shape" in capfd.readouterr().err
    assert outer.output_shape == (None, 2, 3)
    w, b = inner.get_weights()
    x = np.random.default_rng(2).standard_normal((5, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(outer.predict(x, verbose=0), x @ w + b, rtol=1e-5, atol=1e-6)
    # the inner model keeps its own shape
    np.testing.assert_allclose(inner.predict(x[:, 0], verbose=0), x[:, 0] @ w + b, rtol=1e-5, atol=1e-6)
    outer.compile(k.optimizers.SGD(0.1), "mse")
    outer.fit(x, np.ones((5, 2, 3), np.float32), batch_size=5, epochs=1, verbose=0)
    w2, b2 = outer.get_weights()
    assert not np.allclose(w2, w)
    np.testing.assert_allclose(outer.predict(x, verbose=0), x @ w2 + b2, rtol=1e-5, atol=1e-6)
    # one set of weights (Keras): the inner model predicts with the trained ones
    np.testing.assert_allclose(inner.predict(x[:, 1], verbose=0), x[:, 1] @ w2 + b2, rtol=1e-5, atol=1e-6)


# ---- per-output sample weights -----------------------------------------------------------------

def test_sample_weight_per_output(tnt):
    """Keras: output k's loss is sum_i w_k[i] l_k[i] / n; the total adds the outputs' losses."""
    k = tnt.keras
    inp = k.Input((3,))
    m = k.Model(inp, [k.layers.Dense(1)(inp), k.layers.Dense(2)(inp)])
    m.compile("sgd", ["mse", "mae"])
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y1, y2 = rng.standard_normal((8, 1)).astype(np.float32), rng.standard_normal((8, 2)).astype(np.float32)
    w1, w2 = rng.uniform(0, 2, 8), np.r_[np.ones(4), np.zeros(4)]
    p1, p2 = m.predict(x, verbose=0)
    l1 = np.sum(w1 * np.mean((p1 - y1) ** 2, axis=1)) / 8
    l2 = np.sum(w2 * np.mean(np.abs(p2 - y2), axis=1)) / 8
    logs = m.evaluate(x, [y1, y2], sample_weight=[w1, w2], batch_size=8, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["loss"], l1 + l2, rtol=1e-5)
    m.train_on_batch(x, [y1, y2], sample_weight=[w1, w2])  # mnist_acgan's call


# ---- stateful recurrent layers -----------------------------------------------------------------

def stateful_lstm(k, stateful=True, batch=2, steps=3):
    m = k.Sequential([k.layers.LSTM(4, batch_input_shape=(batch, steps, 2), stateful=stateful)])
    m.compile(k.optimizers.SGD(0.5), "mse")
    return m


def test_stateful_lstm_carries_its_states_from_batch_to_batch(tnt):
    k = tnt.keras
    m = stateful_lstm(k)
    assert m.stateful and not stateful_lstm(k, stateful=False).stateful
    kernel, rec, bias = m.get_weights()
    rng = np.random.default_rng(4)
    x1, x2 = rng.standard_normal((2, 3, 2)).astype(np.float32), rng.standard_normal((2, 3, 2)).astype(np.float32)
    y1 = m.predict(x1, batch_size=2, verbose=0)
    y2 = m.predict(x2, batch_size=2, verbose=0)
    h1, c1 = lstm_ref(x1, kernel, rec, bias)
    np.testing.assert_allclose(y1, h1, rtol=1e-5, atol=1e-6)
    # the second batch starts where the first ended: the LSTM over both sequences one after the other
    h12, _ = lstm_ref(np.concatenate([x1, x2], axis=1), kernel, rec, bias)
    np.testing.assert_allclose(y2, h12, rtol=1e-5, atol=1e-6)
    # a batch of 4 = two batches of 2 in a row: row i continues row i of the batch before
    m.reset_states()
    both = m.predict(np.concatenate([x1, x2]), batch_size=2, verbose=0)
    np.testing.assert_allclose(both, np.concatenate([h1, h12]), rtol=1e-5, atol=1e-6)
    m.reset_states()
    np.testing.assert_allclose(m.predict(x2, batch_size=2, verbose=0), lstm_ref(x2, kernel, rec, bias)[0], rtol=1e-5,
                               atol=1e-6)
    m.layers[0].reset_states()
    np.testing.assert_allclose(m.predict(x1, batch_size=2, verbose=0), h1, rtol=1e-5, atol=1e-6)


def test_stateful_training_step_starts_from_the_carried_states(tnt):
    """Keras: a stateful batch's gradient takes the carried states as constants; the same step as an
    LSTM given those states as initial_state inputs."""
    k = tnt.keras
    rng = np.random.default_rng(5)
    x1, x2 = rng.standard_normal((2, 3, 2)).astype(np.float32), rng.standard_normal((2, 3, 2)).astype(np.float32)
    y = rng.standard_normal((2, 4)).astype(np.float32)
    m = stateful_lstm(k)
    start = m.get_weights()
    h, c = lstm_ref(x1, *start)
    m.predict(x1, batch_size=2, verbose=0)
    m.fit(x2, y, batch_size=2, epochs=1, shuffle=False, verbose=0)

    seq, hi, ci = k.Input((3, 2)), k.Input((4,)), k.Input((4,))
    ref = k.Model([seq, hi, ci], k.layers.LSTM(4)(seq, initial_state=[hi, ci]))
    ref.compile(k.optimizers.SGD(0.5), "mse")
    ref.set_weights(start)
    ref.fit([x2, h.astype(np.float32), c.astype(np.float32)], y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(m.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_stateful_gru_and_config(tnt):
    k = tnt.keras
    m = k.Sequential([k.layers.GRU(3, batch_input_shape=(1, 2, 2), stateful=True)])
    cfg = json.loads(m.to_json())["config"]["layers"][-1]["config"]
    assert cfg["stateful"] is True
    x = np.ones((1, 2, 2), np.float32)
    a = m.predict(x, verbose=0)
    b = m.predict(x, verbose=0)
    assert not np.allclose(a, b)  # the second call starts from the first one's state
    m.reset_states()
    np.testing.assert_allclose(m.predict(x, verbose=0), a, rtol=1e-6, atol=1e-7)
    clone = k.models.model_from_json(m.to_json())
    assert clone.stateful


def test_stateful_and_per_output_weights_on_two_ranks_equal_serial(tmp_path):
    """A global batch of 4 on 2 ranks: each rank carries its 2 rows of a stateful LSTM; the
    predictions are the serial ones. Per-output sample weights give the serial figures too."""
    job = os.path.join(HERE, "semantics_dist_job.py")
    outs = []
    for n in (1, 2):
        d = tmp_path / f"r{n}"
        d.mkdir()
        launch(n, python([job, str(d)]), timeout=240)
        outs.append([json.load(open(d / f"rank_{i}.json")) for i in range(n)])
    (one,), (r0, r1) = outs
    assert r0["predict"] == r1["predict"]
    np.testing.assert_allclose(r0["predict"], one["predict"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r0["weights"], one["weights"], rtol=1e-5, atol=1e-6)
    assert r0["sw_evaluate"] == r1["sw_evaluate"] and r0["sw_history"] == r1["sw_history"]
    for key in one["sw_evaluate"]:
        np.testing.assert_allclose(r0["sw_evaluate"][key], one["sw_evaluate"][key], rtol=1e-6, err_msg=key)
    for key in one["sw_history"]:
        np.testing.assert_allclose(r0["sw_history"][key], one["sw_history"][key], rtol=1e-6, err_msg=key)
    np.testing.assert_allclose(r0["sw_weights"], one["sw_weights"], rtol=1e-6, atol=1e-7)


def test_model_called_on_a_dict_of_inputs(tnt):
    """Keras: model({name: array}) and train_on_batch({name: array}, y) take the inputs by name."""
    k = tnt.keras
    a, b = k.Input((2,), name="a"), k.Input((3,), name="b")
    m = k.Model([a, b], k.layers.Dense(1)(k.layers.Concatenate()([a, b])))
    m.compile("sgd", "mse")
    rng = np.random.default_rng(6)
    xa, xb = rng.standard_normal((4, 2)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    w, bias = m.get_weights()
    np.testing.assert_allclose(np.asarray(m({"b": xb, "a": xa})), np.concatenate([xa, xb], 1) @ w + bias, rtol=1e-5,
                               atol=1e-6)
    y = np.zeros((4, 1), np.float32)
    loss = m.test_on_batch({"a": xa, "b": xb}, y)
    np.testing.assert_allclose(loss, np.mean((np.concatenate([xa, xb], 1) @ w + bias) ** 2), rtol=1e-5)
    m.train_on_batch({"a": xa, "b": xb}, y)


def _seeded_run(tnt, seed, read_first):
    """keras.utils.set_random_seed, a functional model with dropout, fit; read_first: get_weights
    before compile and fit (Keras draws the weights once, when the layers are built)."""
    k = tnt.keras
    k.utils.set_random_seed(seed)
    inp = k.Input(shape=(8,))
    h = k.layers.Dense(16, activation="relu")(inp)
    h = k.layers.Dropout(0.3)(h)
    m = k.Model(inp, k.layers.Dense(3, activation="softmax")(h))
    first = m.get_weights() if read_first else None
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    initial = m.get_weights()
    x, y = np.random.default_rng(1).standard_normal((48, 8)).astype(np.float32), np.arange(48) % 3
    hist = m.fit(x, y.astype(np.float32), batch_size=16, epochs=2, verbose=0)
    return first, initial, m.get_weights(), hist.history


def test_set_random_seed_gives_the_same_weights_whatever_reads_them_first(tnt):
    _, init_a, end_a, hist_a = _seeded_run(tnt, 7, read_first=False)
    first_b, init_b, end_b, hist_b = _seeded_run(tnt, 7, read_first=True)
    for a, b, f in zip(init_a, init_b, first_b):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(f, b)  # compile draws nothing again
    for a, b in zip(end_a, end_b):
        np.testing.assert_array_equal(a, b)
    assert hist_a == hist_b
    _, init_c, _, _ = _seeded_run(tnt, 8, read_first=False)  # another seed: other weights
    assert not np.array_equal(init_a[0], init_c[0])
    k = tnt.keras  # two models built one after the other draw different weights, as Keras's layers
    k.utils.set_random_seed(7)
    one, two = [k.Sequential([k.layers.Dense(4, input_shape=(3,))]).get_weights()[0] for _ in range(2)]
    assert not np.array_equal(one, two)
