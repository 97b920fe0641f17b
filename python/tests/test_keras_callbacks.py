"""Callbacks called as Keras calls them (keras/callbacks.py, keras/engine/training.py of Keras
2.11): every hook in Keras's order with the logs Keras passes, evaluate and predict inside a
callback, the learning rate in the logs under ReduceLROnPlateau and LearningRateScheduler, and
model.stop_training."""
import numpy as np
import pytest

from conftest import small_mlp, toy_data


def compiled(tnt):
    m = small_mlp(tnt)
    m.compile(tnt.keras.optimizers.SGD(0.05), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


class Trace:
    """A Callback recording every hook with (a copy of) its logs."""

    def __init__(self, tnt):
        base = tnt.keras.callbacks.Callback
        events = self.events = []

        def hook(name, indexed):
            if indexed:
                return lambda self, i, logs=None: events.append((name, i, dict(logs or {})))
            return lambda self, logs=None: events.append((name, dict(logs or {})))

        names = {"on_train_begin": 0, "on_train_end": 0, "on_epoch_begin": 1, "on_epoch_end": 1,
                 "on_train_batch_begin": 1, "on_train_batch_end": 1, "on_test_begin": 0, "on_test_end": 0,
                 "on_test_batch_begin": 1, "on_test_batch_end": 1, "on_predict_begin": 0, "on_predict_end": 0,
                 "on_predict_batch_begin": 1, "on_predict_batch_end": 1}
        self.cb = type("T", (base,), {n: hook(n, i) for n, i in names.items()})()


def test_fit_hooks_in_keras_order_with_keras_logs(tnt):
    x, y = toy_data(48)
    m = compiled(tnt)
    t = Trace(tnt)
    m.fit(x, y, batch_size=16, epochs=2, validation_data=(x[:20], y[:20]), validation_batch_size=10,
          callbacks=[t.cb], verbose=0)
    names = [e[0] for e in t.events]
    epoch = (["on_epoch_begin"] + ["on_train_batch_begin", "on_train_batch_end"] * 3 +
             ["on_test_begin"] + ["on_test_batch_begin", "on_test_batch_end"] * 2 + ["on_test_end", "on_epoch_end"])
    assert names == ["on_train_begin"] + epoch * 2 + ["on_train_end"]
    # Keras passes no logs to the begin hooks: never the previous batch's
    for e in t.events:
        if e[0] in ("on_train_batch_begin", "on_test_batch_begin", "on_epoch_begin", "on_train_begin"):
            assert e[-1] == {}, e
    ends = [e for e in t.events if e[0] == "on_train_batch_end"]
    assert [e[1] for e in ends] == [0, 1, 2] * 2 and set(ends[0][2]) == {"loss", "accuracy"}
    tests = [e for e in t.events if e[0] == "on_test_batch_end"]
    assert [e[1] for e in tests] == [0, 1] * 2 and set(tests[0][2]) == {"loss", "accuracy"}
    # the last test batch's running figures are the validation figures of the epoch
    ep = [e for e in t.events if e[0] == "on_epoch_end"]
    assert tests[1][2]["loss"] == pytest.approx(ep[0][2]["val_loss"], rel=1e-6)
    assert set(ep[0][2]) == {"loss", "accuracy", "val_loss", "val_accuracy"}


def test_evaluate_and_predict_hooks(tnt):
    x, y = toy_data(30)
    m = compiled(tnt)
    t = Trace(tnt)
    logs = m.evaluate(x, y, batch_size=8, callbacks=[t.cb], verbose=0, return_dict=True)
    assert [e[0] for e in t.events] == (["on_test_begin"] + ["on_test_batch_begin", "on_test_batch_end"] * 4 +
                                        ["on_test_end"])
    assert t.events[-1][1] == pytest.approx(logs)
    t.events.clear()
    m.predict(x, batch_size=8, callbacks=[t.cb], verbose=0)
    assert [e[0] for e in t.events] == (["on_predict_begin"] +
                                        ["on_predict_batch_begin", "on_predict_batch_end"] * 4 + ["on_predict_end"])
    assert [e[1] for e in t.events if e[0] == "on_predict_batch_end"] == [0, 1, 2, 3]


def test_predict_batch_end_gets_the_batch_outputs(tnt):
    """Keras's predict passes on_predict_batch_end {'outputs': that batch's predictions} (a list for
    several outputs); begin hooks get empty logs; a predict inside the hook leaves them."""
    x, y = toy_data(30)
    m = compiled(tnt)
    t = Trace(tnt)
    p = m.predict(x, batch_size=8, callbacks=[t.cb], verbose=0)
    ends = [e for e in t.events if e[0] == "on_predict_batch_end"]
    assert [set(e[2]) for e in ends] == [{"outputs"}] * 4
    assert [e[2]["outputs"].shape for e in ends] == [(8, 3)] * 3 + [(6, 3)]
    np.testing.assert_array_equal(np.concatenate([e[2]["outputs"].numpy() for e in ends]), p)
    assert all(e[-1] == {} for e in t.events if e[0] == "on_predict_batch_begin")
    with pytest.raises(Exception, match="not in on_predict_batch_end"):  # only during the hook
        m._h.batch_outputs()
    k = tnt.keras
    inp = k.Input((8,))
    two = k.Model(inp, [k.layers.Dense(2)(inp), k.layers.Dense(1, activation="sigmoid")(inp)])
    seen = []

    class Nested:  # a plain object with Keras's hook, wrapped as Tarantella wraps Keras callbacks
        def on_predict_batch_end(self, batch, logs=None):
            if batch == 0:
                two.predict(x[:5], verbose=0)  # a predict of the same model inside the hook
            seen.append([np.array(o) for o in logs["outputs"]])

    p2 = two.predict(x, batch_size=16, callbacks=[tnt.keras.callbacks.Callback(Nested())], verbose=0)
    assert [len(s) for s in seen] == [2, 2] and seen[0][0].shape == (16, 2) and seen[1][1].shape == (14, 1)
    for i in range(2):
        np.testing.assert_array_equal(np.concatenate([s[i] for s in seen]), p2[i])


def test_evaluate_and_predict_inside_a_callback(tnt):
    x, y = toy_data(40)
    m = compiled(tnt)
    seen = []

    class Probe(tnt.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append((self.model.predict(x[:5], verbose=0), self.model.evaluate(x, y, verbose=0)))

        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                self.model.predict(x[:3], verbose=0)

    m.fit(x, y, batch_size=8, epochs=2, callbacks=[Probe()], verbose=0)
    assert len(seen) == 2 and seen[0][0].shape == (5, 3)
    # the figures inside the callback are the model's at that epoch's end
    np.testing.assert_allclose(seen[1][0], m.predict(x[:5], verbose=0), rtol=1e-6)
    assert seen[1][1][0] == pytest.approx(m.evaluate(x, y, verbose=0)[0], rel=1e-6)

    class Refit(tnt.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.fit(x, y, verbose=0)

    with pytest.raises(RuntimeError, match="fit"):
        m.fit(x, y, epochs=1, callbacks=[Refit()], verbose=0)


def test_learning_rate_in_logs(tnt):
    x, y = toy_data(32)
    k = tnt.keras
    m = compiled(tnt)
    h = m.fit(x, y, batch_size=8, epochs=3, verbose=0,
              callbacks=[k.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 / (epoch + 1))])
    assert h.history["lr"] == pytest.approx([0.1, 0.05, 0.1 / 3])
    assert h.history["learning_rate"] == h.history["lr"]
    m = compiled(tnt)
    # patience 0 and min_delta 1e9: every epoch is "no improvement", so the rate drops after each
    h = m.fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(x, y),
              callbacks=[k.callbacks.ReduceLROnPlateau(factor=0.5, patience=0, min_delta=1e9)])
    # Keras logs the rate the epoch trained with, before its own reduction
    assert h.history["lr"] == pytest.approx([0.05, 0.05, 0.025])
    h = compiled(tnt).fit(x, y, epochs=1, verbose=0)
    assert "lr" not in h.history
    # the callbacks before the scheduler see no rate, those after it do (Keras mutates one dict)
    seen = {}
    before = k.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.setdefault("before", set(logs)))
    after = k.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.setdefault("after", set(logs)))
    compiled(tnt).fit(x, y, epochs=1, verbose=0,
                      callbacks=[before, k.callbacks.LearningRateScheduler(lambda e, lr: lr), after])
    assert "lr" not in seen["before"] and {"lr", "learning_rate"} <= seen["after"]


def test_stop_training(tnt):
    x, y = toy_data(64)
    m = compiled(tnt)

    class StopAt(tnt.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.model.stop_training = True
                assert self.model.stop_training is True

    h = m.fit(x, y, batch_size=8, epochs=5, callbacks=[StopAt()], verbose=0)
    assert len(h.epoch) == 1 and m.optimizer.iterations == 3
    h = m.fit(x, y, batch_size=8, epochs=2, verbose=0)  # the flag is reset by the next fit
    assert len(h.epoch) == 2 and m.stop_training is False


def test_logs_hold_many_metrics_with_long_names(tnt):
    """A model with two named outputs and six metrics each logs every figure Keras would (31 keys
    with val_, past the 16 the logs once held), names of 60+ characters whole."""
    k = tnt.keras
    inp = k.Input(shape=(4,))
    h = k.layers.Dense(8, activation="relu")(inp)
    a = k.layers.Dense(1, name="a_rather_long_output_name_for_the_first_head")(h)
    b = k.layers.Dense(1, name="b_rather_long_output_name_for_the_second_head")(h)
    m = k.Model(inp, [a, b])
    mets = ["mae", "mse", "mape", "msle", "cosine_similarity", "logcosh"]
    m.compile("sgd", "mse", metrics=[mets, mets])
    rng = np.random.default_rng(0)
    x = rng.random((32, 4), dtype=np.float32)
    y = [rng.random((32, 1), dtype=np.float32), rng.random((32, 1), dtype=np.float32)]
    h = m.fit(x, y, validation_data=(x, y), epochs=1, batch_size=16, verbose=0)
    keys = set(h.history)
    assert len(keys) == 2 * (3 + 12), sorted(keys)
    longest = "val_b_rather_long_output_name_for_the_second_head_cosine_similarity"
    assert longest in keys
    assert all(np.isfinite(v[0]) for v in h.history.values())
