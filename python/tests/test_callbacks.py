"""Callbacks: Python subclasses of tnt.keras.callbacks.Callback (hooks, logs, self.model, errors,
stop_training), LambdaCallback, Tarantella's wrapper, and the library's built-in callbacks."""
import csv
import os

import numpy as np
import pytest

from conftest import small_mlp, toy_data


class Recorder:  # deliberately not a Callback subclass at first: duck-typed objects work too
    pass


def compiled(tnt, **kw):
    m = small_mlp(tnt)
    m.compile(tnt.keras.optimizers.SGD(0.05), "sparse_categorical_crossentropy", metrics=["accuracy"], **kw)
    return m


def test_python_callback_hooks_and_logs(tnt):
    cb_base = tnt.keras.callbacks.Callback
    events = []

    class Rec(cb_base):
        def on_train_begin(self, logs=None):
            events.append(("train_begin", dict(logs)))

        def on_epoch_begin(self, epoch, logs=None):
            events.append(("epoch_begin", epoch))

        def on_batch_end(self, batch, logs=None):  # Keras's alias of on_train_batch_end
            events.append(("batch_end", batch, dict(logs)))

        def on_epoch_end(self, epoch, logs=None):
            assert self.model is not None and self.params["epochs"] == 3
            events.append(("epoch_end", epoch, dict(logs)))

        def on_train_end(self, logs=None):
            events.append(("train_end", dict(logs)))

    x, y = toy_data(40)
    m = compiled(tnt)
    h = m.fit(x, y, batch_size=10, epochs=3, validation_data=(x, y), verbose=0, callbacks=[Rec()])
    kinds = [e[0] for e in events]
    assert kinds[0] == "train_begin" and kinds[-1] == "train_end"
    assert kinds.count("epoch_begin") == 3 and kinds.count("epoch_end") == 3 and kinds.count("batch_end") == 12
    ends = [e for e in events if e[0] == "epoch_end"]
    for epoch, (_, i, logs) in enumerate(ends):
        assert i == epoch
        for k, v in logs.items():
            assert h.history[k][epoch] == v  # the callback sees exactly what History keeps
    assert set(ends[0][2]) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert [e[1] for e in events if e[0] == "batch_end"][:4] == [0, 1, 2, 3]


def test_stop_training_exceptions_lambda_wrapper(tnt):
    CB = tnt.keras.callbacks
    x, y = toy_data(40)
    m = compiled(tnt)

    class Stop(CB.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                self.model.stop_training = True
    assert len(m.fit(x, y, batch_size=10, epochs=10, verbose=0, callbacks=[Stop()]).history["loss"]) == 2

    class Boom(CB.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise ZeroDivisionError("in a callback")
    with pytest.raises(ZeroDivisionError, match="in a callback") as e:
        m.fit(x, y, batch_size=10, epochs=2, verbose=0, callbacks=[Boom()])
    assert any("Boom" in n for n in e.value.__notes__)
    seen = []
    lam = CB.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append((epoch, logs["loss"])),
                            on_train_begin=lambda logs: seen.append("begin"))
    m.fit(x, y, batch_size=10, epochs=2, verbose=0, callbacks=[lam])
    assert seen[0] == "begin" and [s[0] for s in seen[1:]] == [0, 1]
    # Tarantella's wrapper around any Keras-style callback object; one rank: the flags change nothing
    duck = Recorder()
    duck.epochs = []
    duck.on_epoch_end = lambda epoch, logs=None: duck.epochs.append(epoch)
    wrapped = CB.Callback(duck, aggregate_logs=False, run_on_all_ranks=False)
    m.fit(x, y, batch_size=10, epochs=2, verbose=0, callbacks=[wrapped])
    assert duck.epochs == [0, 1]
    m.evaluate(x, y, verbose=0, callbacks=[CB.LambdaCallback(on_test_end=lambda logs: seen.append(("test", logs)))])
    assert seen[-1][0] == "test" and "loss" in seen[-1][1]


def test_print_order(tnt, capfd):
    CB = tnt.keras.callbacks
    x, y = toy_data(20)
    m = compiled(tnt)
    m.fit(x, y, batch_size=10, epochs=2, verbose=2,
          callbacks=[CB.LambdaCallback(on_epoch_end=lambda e, logs: print(f"PY epoch {e}"))])
    out = capfd.readouterr().out
    assert out.index("Epoch 1/2") < out.index("PY epoch 0") < out.index("Epoch 2/2") < out.index("PY epoch 1")


def test_builtin_callbacks(tnt, tmp_path):
    CB = tnt.keras.callbacks
    x, y = toy_data(60)
    m = compiled(tnt)
    es = CB.EarlyStopping(monitor="loss", patience=0, min_delta=10.0)  # nothing improves by 10
    h = m.fit(x, y, batch_size=20, epochs=8, verbose=0, callbacks=[es])
    assert len(h.history["loss"]) == 2 and es.stopped_epoch == 1
    csv_path = tmp_path / "log.csv"
    ck = tmp_path / "ck-{epoch:02d}.h5"
    rates = []
    sched = CB.LearningRateScheduler(lambda epoch, lr: rates.append(lr) or 0.1 / (epoch + 1))
    h = m.fit(x, y, batch_size=20, epochs=3, verbose=0,
              callbacks=[CB.CSVLogger(csv_path), CB.ModelCheckpoint(str(ck), save_weights_only=True,
                                                                   monitor="loss"),
                         sched, CB.TerminateOnNaN(), CB.ReduceLROnPlateau(monitor="loss"), CB.History()])
    rows = list(csv.reader(open(csv_path)))
    assert rows[0] == ["epoch", "accuracy", "loss"] and len(rows) == 4
    assert float(rows[3][2]) == pytest.approx(h.history["loss"][2])
    assert sorted(os.listdir(tmp_path)) == ["ck-01.h5", "ck-02.h5", "ck-03.h5", "log.csv"]
    assert m.optimizer.learning_rate == pytest.approx(0.1 / 3)
    assert rates[0] == pytest.approx(0.05)
    with pytest.raises(ValueError):
        CB.CSVLogger("")
    with pytest.raises(ValueError, match="mode"):
        CB.EarlyStopping(mode="sideways")

    def broken(epoch, lr):
        raise RuntimeError("schedule broke")
    with pytest.raises(RuntimeError, match="schedule broke"):
        m.fit(x, y, batch_size=20, epochs=1, verbose=0, callbacks=[CB.LearningRateScheduler(broken)])


def test_ctrl_c_ends_fit_at_the_epoch_end(tnt):
    import signal
    import threading
    x, y = toy_data(64)
    m = compiled(tnt)
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))  # no Python runs in this fit
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, batch_size=8, epochs=100000, verbose=0)
    timer.join()
    assert 0 < m.optimizer.iterations < 100000 * 8 and m.optimizer.iterations % 8 == 0  # whole epochs
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)  # still usable
