"""tnt.data.Dataset: the tf.data ops, Python map functions (also on the prefetch thread and
inside fit), and their errors."""
import numpy as np
import pytest


def arrays(n=20):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.float32)
    return x, y


def test_slices_batch_take_skip_repeat(tnt):
    D = tnt.data.Dataset
    x, y = arrays()
    ds = D.from_tensor_slices((x, y))
    assert ds.cardinality() == 20 and len(ds) == 20
    assert ds.element_spec == ((3,), ())
    first = next(iter(ds))
    np.testing.assert_array_equal(first[0], x[0])
    b = ds.batch(6)
    assert b.cardinality() == 4 and b.element_spec == ((None, 3), (None,))
    got = list(b)
    assert [len(bx) for bx, _ in got] == [6, 6, 6, 2]
    np.testing.assert_array_equal(np.concatenate([bx for bx, _ in got]), x)
    assert ds.batch(6, drop_remainder=True).cardinality() == 3
    assert [float(v) for _, v in ds.skip(5).take(3)] == [5, 6, 7]
    assert ds.repeat(2).cardinality() == 40 and ds.repeat().cardinality() == -1
    assert D.range(5).cardinality() == 5 and [float(v) for v in D.range(2, 5)] == [2, 3, 4]
    xs = D.from_tensor_slices(x)
    assert xs.element_spec == (3,) and not xs.has_labels
    # the dataset is unchanged by the ops made from it
    assert ds.cardinality() == 20


def test_shuffle_is_seeded(tnt):
    D = tnt.data.Dataset
    x, y = arrays(50)
    a = [float(v) for _, v in D.from_tensor_slices((x, y)).shuffle(50, seed=3)]
    b = [float(v) for _, v in D.from_tensor_slices((x, y)).shuffle(50, seed=3)]
    c = [float(v) for _, v in D.from_tensor_slices((x, y)).shuffle(50, seed=4)]
    assert a == b and a != c and sorted(a) == list(range(50))


def test_map_python_function(tnt):
    D = tnt.data.Dataset
    x, y = arrays()
    calls = []

    def fn(a, b):
        calls.append(a.shape)
        return a * 2, b + 1
    m = D.from_tensor_slices((x, y)).map(fn)
    got = list(m.batch(5))
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), x * 2)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y + 1)
    assert calls[0] == (3,)
    # new shapes: (3,) -> (3, 1) and a one-hot label
    r = D.from_tensor_slices((x, y)).map(lambda a, b: (a.reshape(3, 1), np.eye(20, dtype=np.float32)[int(b)]))
    assert r.element_spec == ((3, 1), (20,))
    # after batch: each sample as a batch of one, so batch-wise code works
    nb = D.from_tensor_slices((x, y)).batch(4).map(lambda a, b: (a[:, ::-1], b))
    assert nb.element_spec == ((None, 3), (None,))
    np.testing.assert_array_equal(next(iter(nb))[0], x[:4, ::-1])
    # x-only datasets map x alone, on the prefetch thread too
    p = D.from_tensor_slices(x).map(lambda a: a - 1).batch(7).prefetch(2)
    np.testing.assert_array_equal(np.concatenate(list(p)), x - 1)


def test_map_errors(tnt):
    D = tnt.data.Dataset
    x, y = arrays()

    def bad(a, b):
        if b[()] == 13:
            raise KeyError("sample thirteen")
        return a, b
    ds = D.from_tensor_slices((x, y)).map(bad).batch(4).prefetch(2)
    with pytest.raises(KeyError, match="thirteen") as e:
        list(ds)
    assert any("map" in n for n in getattr(e.value, "__notes__", []))  # the library's view, as a note
    with pytest.raises(ValueError, match="values"):
        list(D.from_tensor_slices((x, y)).map(lambda a, b: (a[:2] if b > 3 else a, b)))
    # a function that changes the form ((x, y) to x, x to (x, x)) runs in Python, as tf.data allows
    np.testing.assert_array_equal(np.stack(list(D.from_tensor_slices((x, y)).map(lambda a, b: a))), x)
    pairs = list(D.from_tensor_slices(x).map(lambda a: (a, a * 2)))
    np.testing.assert_array_equal(pairs[3][1], x[3] * 2)
    with pytest.raises(TypeError):
        D.from_tensor_slices((x, y)).map(42)
    # a model trained on a failing map raises the function's exception and stays usable
    m = tnt.keras.Sequential([tnt.keras.layers.Dense(2, input_shape=(3,))])
    m.compile("sgd", "mse")
    with pytest.raises(KeyError):
        m.fit(D.from_tensor_slices((x, np.zeros((20, 2), np.float32))).map(
            lambda a, b: (a, b) if a[0] < 30 else {}["boom"]).batch(5), epochs=1, verbose=0)
    m.fit(x, np.zeros((20, 2), np.float32), batch_size=5, epochs=1, verbose=0)


def test_fit_with_map_equals_premapped_arrays(tnt):
    D, k = tnt.data.Dataset, tnt.keras
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (64, 4, 4)).astype(np.uint8)
    y = (raw.mean(axis=(1, 2)) > 127).astype(np.float32)
    scale = np.float32(1) / np.float32(255)

    def model():
        m = k.Sequential([k.layers.Flatten(input_shape=(4, 4, 1)), k.layers.Dense(2, activation="softmax")])
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
        return m
    a, b = model(), model()
    mapped = D.from_tensor_slices((raw, y)).map(lambda im, lab: (im.reshape(4, 4, 1) * scale, lab))
    ha = a.fit(mapped.shuffle(64, seed=1).batch(8).prefetch(2), epochs=2, verbose=0)
    pre = (raw.reshape(-1, 4, 4, 1).astype(np.float32) * scale)
    hb = b.fit(D.from_tensor_slices((pre, y)).shuffle(64, seed=1).batch(8), epochs=2, verbose=0)
    assert ha.history == hb.history
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(u, v)


def test_file_sources(tnt, tmp_path):
    D = tnt.data.Dataset
    x = np.arange(12, dtype=np.int16).reshape(4, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(4, dtype=np.uint8))
    ds = D.from_npy(tmp_path / "x.npy", tmp_path / "y.npy")
    got = list(ds.batch(4))
    np.testing.assert_array_equal(got[0][0], x.astype(np.float32))
    with pytest.raises(FileNotFoundError):
        D.from_npy(tmp_path / "absent.npy").cardinality()
