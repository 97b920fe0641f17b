"""Reference counts and memory: fit (with a Python callback and a Python map) 1,000 times on a tiny
model, with evaluate, predict, weights and failing calls in between; the process's resident memory
and Python's object count stay flat, and the objects handed to the C library are released."""
import gc
import os
import sys

import numpy as np

os.environ["OMP_NUM_THREADS"] = "1"  # before the library starts: 1,000 fits of a tiny model, no barriers


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_fit_loop_does_not_leak(tnt):
    k = tnt.keras
    x = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    m = k.Sequential([k.layers.Dense(4, activation="relu", input_shape=(4,)), k.layers.Dense(2, activation="softmax")])
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])

    def fn(a, b):
        return a * 1.0, b
    seen = []

    class Cb(k.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(len(logs))

        def on_train_batch_end(self, batch, logs=None):
            pass

    class Boom(k.callbacks.Callback):
        def on_train_begin(self, logs=None):
            raise ValueError("boom")
    cb = Cb()
    refs = (sys.getrefcount(fn), sys.getrefcount(cb), sys.getrefcount(x))
    ds = tnt.data.Dataset.from_tensor_slices((x, y)).map(fn).batch(8).prefetch(2)

    def once(i):
        nonlocal ds
        m.fit(ds, epochs=1, verbose=0, callbacks=[cb, k.callbacks.EarlyStopping(monitor="loss")])
        if i % 10 == 0:
            ds = tnt.data.Dataset.from_tensor_slices((x, y)).map(fn).batch(8).prefetch(2)
            m.evaluate(x, y, verbose=0)
            m.predict(x, verbose=0)
            m.set_weights(m.get_weights())
            try:
                m.fit(ds, epochs=1, verbose=0, callbacks=[Boom()])
            except ValueError:
                pass
            try:
                k.models.model_from_json("{bad")
            except ValueError:
                pass
    for i in range(100):
        once(i)
    gc.collect()
    rss0, objs0 = rss_kb(), len(gc.get_objects())
    for i in range(100, 1000):
        once(i)
    gc.collect()
    rss1, objs1 = rss_kb(), len(gc.get_objects())
    del ds
    gc.collect()
    assert len(seen) == 1000
    assert (sys.getrefcount(fn), sys.getrefcount(cb), sys.getrefcount(x)) == refs
    assert objs1 - objs0 < 200, (objs0, objs1)
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine holds freed memory
        assert rss1 - rss0 < 4096, f"resident memory grew by {rss1 - rss0} KB over 900 fits"
    print(f"RSS {rss0} KB -> {rss1} KB over 900 fits; {objs0} -> {objs1} Python objects")
