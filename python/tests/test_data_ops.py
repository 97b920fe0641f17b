"""Issue 21, item 3: the tf.data.Dataset methods Keras programs use, with the values of
TensorFlow's docstrings; Python-only ops lowered to the C pipeline train as their arrays do."""
import itertools

import numpy as np
import pytest


@pytest.fixture(scope="module")
def D(tnt):
    return tnt.data.Dataset


def plain(v):
    if isinstance(v, tuple):
        return tuple(plain(p) for p in v)
    return v.tolist() if isinstance(v, np.ndarray) and v.ndim else int(v)


def ints(ds):
    return [plain(v) for v in ds.as_numpy_iterator()]


def test_sources(D, tnt):
    assert ints(D.range(5)) == [0, 1, 2, 3, 4] and ints(D.range(2, 5)) == [2, 3, 4]
    assert ints(D.range(1, 5, 2)) == [1, 3] and ints(D.range(1, 5, -2)) == [] and ints(D.range(5, 1, -2)) == [5, 3]
    assert D.range(5).element_spec.dtype == tnt.tensorflow.int64
    assert ints(D.from_tensors([1, 2, 3])) == [[1, 2, 3]]
    (arr, text), = list(D.from_tensors(([1, 2, 3], "A")))
    assert arr.tolist() == [1, 2, 3] and text == "A"
    spec = D.from_tensor_slices((np.zeros((4, 3), np.float32), np.array(["a", "b", "c", "d"]))).element_spec
    assert spec[0].shape == (3,) and spec[1].dtype == tnt.tensorflow.string
    d = list(D.from_tensor_slices({"a": [1, 2], "b": [[3, 4], [5, 6]]}))
    assert d[1]["a"] == 2 and d[1]["b"].tolist() == [5, 6]

    def gen():
        for i in itertools.count(1):
            yield (i, [1] * i)
    import tarantella.tensorflow as tf
    g = D.from_generator(gen, (tf.int64, tf.int64), (tf.TensorShape([]), tf.TensorShape([None])))
    got = list(g.take(3).as_numpy_iterator())
    assert [(int(a), b.tolist()) for a, b in got] == [(1, [1]), (2, [1, 1]), (3, [1, 1, 1])]
    assert got[0][1].dtype == np.int64 and g.cardinality() == tnt.data.UNKNOWN_CARDINALITY
    sig = D.from_generator(lambda: iter([(np.ones(2), 1)]),
                           output_signature=(tf.TensorSpec((2,), tf.float32), tf.TensorSpec((), tf.int32)))
    assert sig.element_spec[0].shape == (2,) and next(iter(sig))[1].dtype == np.int32
    with pytest.raises(ValueError, match="shape"):
        list(D.from_generator(lambda: iter([np.ones(3)]), output_signature=tf.TensorSpec((2,), tf.float32)))
    typed = D.from_generator(lambda: iter([(np.ones(3), "a")]), output_types=(tf.float16, tf.string))
    assert typed.element_spec[0].shape == (3,) and typed.element_spec[0].dtype == tf.float16
    v, t = next(iter(typed))
    assert v.dtype == np.float16 and t == "a"


def test_zip_concatenate_enumerate(D):
    a, b = D.range(1, 4), D.range(4, 7)
    assert ints(D.zip((a, b))) == [(1, 4), (2, 5), (3, 6)]
    assert ints(D.zip(a, b)) == [(1, 4), (2, 5), (3, 6)]  # Keras 3 style: datasets as arguments
    assert ints(D.zip((a, D.range(13, 15)))) == [(1, 13), (2, 14)] and D.zip((a, D.range(13, 15))).cardinality() == 2
    nested = list(D.zip({"x": a, "y": (b, a)}))
    assert int(nested[0]["x"]) == 1 and [int(v) for v in nested[0]["y"]] == [4, 1]
    assert D.zip((a, D.range(3).repeat())).cardinality() == 3
    assert ints(a.concatenate(D.range(4, 8))) == [1, 2, 3, 4, 5, 6, 7]
    assert a.concatenate(D.range(4, 8)).cardinality() == 7
    assert ints(D.from_tensor_slices(np.array([1, 2, 3])).enumerate(start=5)) == [(5, 1), (6, 2), (7, 3)]


def test_filter_map_flat_map_interleave(D, tnt):
    assert ints(D.from_tensor_slices([1, 2, 3]).filter(lambda x: x < 3)) == [1, 2]
    assert D.range(10).filter(lambda x: x % 2 == 0).cardinality() == tnt.data.UNKNOWN_CARDINALITY
    assert ints(D.range(4).map(lambda x: x * 2, num_parallel_calls=tnt.data.AUTOTUNE)) == [0, 2, 4, 6]
    assert ints(D.from_tensor_slices([[1, 2, 3], [4, 5, 6], [7, 8, 9]]).flat_map(D.from_tensor_slices)) == \
        list(range(1, 10))
    got = ints(D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4))
    assert got == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    xy = D.from_tensor_slices((np.arange(6.0), np.arange(6.0) * 10)).filter(lambda x, y: y > 20)
    assert [(float(x), float(y)) for x, y in xy] == [(3, 30), (4, 40), (5, 50)]


def test_batching(D):
    A = D.range(1, 5).map(lambda x: np.full([x], x))
    assert ints(A.padded_batch(2)) == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert ints(A.padded_batch(2, padded_shapes=5)) == [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0]],
                                                        [[3, 3, 3, 0, 0], [4, 4, 4, 4, 0]]]
    assert ints(A.padded_batch(2, padded_shapes=5, padding_values=-1))[0] == [[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]]
    import tarantella.tensorflow as tf
    elements = [([1, 2, 3], [10]), ([4, 5], [11, 12])]
    nested = D.from_generator(lambda: iter(elements), (tf.int32, tf.int32))
    (first, second), = list(nested.padded_batch(2, padded_shapes=([4], [None]), padding_values=(-1, 100)))
    assert first.tolist() == [[1, 2, 3, -1], [4, 5, -1, -1]] and second.tolist() == [[10, 100], [11, 12]]
    assert first.dtype == np.int32
    (first, second), = list(nested.padded_batch(2, padding_values=-7))  # one value pads every part
    assert first.tolist() == [[1, 2, 3], [4, 5, -7]] and second.tolist() == [[10, -7], [11, 12]]
    with pytest.raises(ValueError, match="padded shape"):
        list(A.padded_batch(2, padded_shapes=3))
    assert ints(D.from_tensor_slices(np.array([[1, 2, 3], [4, 5, 6]])).unbatch()) == [1, 2, 3, 4, 5, 6]
    assert ints(D.range(7).batch(3).unbatch()) == list(range(7))
    assert D.range(7).batch(3).cardinality() == 3 and D.range(7).batch(3, drop_remainder=True).cardinality() == 2
    assert D.range(7).batch(3).element_spec.shape == (None,)


def test_shuffle_cache_and_inspection(D, tnt):
    fixed = D.range(10).shuffle(10, seed=1, reshuffle_each_iteration=False)
    first = ints(fixed)
    assert sorted(first) == list(range(10)) and ints(fixed) == first and first != list(range(10))
    moving = D.range(10).shuffle(10, seed=1)
    assert ints(moving) != ints(moving)
    c = D.from_tensor_slices((np.arange(8.0), np.arange(8.0))).shuffle(8, seed=3, reshuffle_each_iteration=False)
    assert [float(v) for _, v in c] == [float(v) for _, v in c]
    calls = []
    cached = D.range(3).map(lambda x: calls.append(int(x)) or x).cache()
    assert ints(cached) == [0, 1, 2] and ints(cached) == [0, 1, 2] and calls == [0, 1, 2]
    assert D.range(42).cardinality() == 42 and D.range(42).repeat().cardinality() == tnt.data.INFINITE_CARDINALITY
    assert len(D.range(3)) == 3
    with pytest.raises(TypeError, match="unknown"):
        len(D.range(3).filter(lambda x: True))
    assert D.range(3).apply(lambda ds: ds.take(2)).cardinality() == 2
    assert D.range(4).reduce(0, lambda s, x: s + x) == 6
    assert D.range(3).with_options(tnt.data.Options()).cardinality() == 3


def test_files(D, tnt, tmp_path):
    (tmp_path / "b.txt").write_text("three\nfour\n")
    (tmp_path / "a.txt").write_text("one\r\ntwo")
    files = D.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert [str(f) for f in files] == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert sorted(str(f) for f in D.list_files(str(tmp_path / "*.txt"), seed=4)) == [str(f) for f in files]
    lines = tnt.data.TextLineDataset([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])
    assert list(lines) == ["one", "two", "three", "four"]
    assert [str(x) for x in files.interleave(tnt.data.TextLineDataset, cycle_length=2)] == ["one", "three", "two", "four"]
    with pytest.raises(FileNotFoundError, match="no files"):
        D.list_files(str(tmp_path / "*.csv"))
    with pytest.raises(FileNotFoundError):
        tnt.data.TextLineDataset(str(tmp_path / "absent.txt"))


def test_lowered_pipelines_train_as_arrays(D, tnt):
    """zip + filter + a shuffle done once, then C batches; padded_batch; a map after a Python op:
    each trains exactly as the arrays it yields."""
    k = tnt.keras
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)

    def model():
        tnt.keras.utils.set_random_seed(1)
        m = k.Sequential([k.layers.Dense(2, activation="softmax", input_shape=(3,))])
        m.compile(k.optimizers.SGD(0.2), "sparse_categorical_crossentropy", metrics=["accuracy"])
        return m
    pipeline = (D.zip((D.from_tensor_slices(x), D.from_tensor_slices(y))).filter(lambda a, b: a[1] > -1.0)
                .shuffle(40, seed=2, reshuffle_each_iteration=False).map(lambda a, b: (a * 2, b)).batch(8))
    keep = x[:, 1] > -1.0
    order = [int(i) for i in D.from_tensor_slices(np.arange(40.0)[keep]).shuffle(
        40, seed=2, reshuffle_each_iteration=False).as_numpy_iterator()]
    xs, ys = x[order] * 2, y[order]
    a, b = model(), model()
    ha = a.fit(pipeline, epochs=2, verbose=0)
    hb = b.fit(xs, ys, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-6)
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
    # sequences of different lengths, padded per batch, then globally for the C pipeline
    seqs = [np.full((n, 2), n, np.float32) for n in (1, 3, 2, 3)]
    labels = np.array([0, 1, 0, 1], np.float32)
    padded = D.zip((D.from_generator(lambda: iter(seqs), tnt.tensorflow.float32), D.from_tensor_slices(labels)))
    padded = padded.padded_batch(2)
    pooled = k.Sequential([k.layers.GlobalAveragePooling1D(input_shape=(3, 2)), k.layers.Dense(2, activation="softmax")])
    pooled.compile("sgd", "sparse_categorical_crossentropy")
    pooled.fit(padded, epochs=1, verbose=0)
    full = np.zeros((4, 3, 2), np.float32)
    for i, s in enumerate(seqs):
        full[i, :len(s)] = s
    np.testing.assert_allclose(pooled.predict(padded.map(lambda a, b: a), verbose=0), pooled.predict(full, verbose=0),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="numbers"):
        a.fit(D.from_tensor_slices((np.array(["a", "b"]), np.zeros(2))).batch(2), epochs=1, verbose=0)


def test_endless_sources_need_a_bound(D, tnt):
    import itertools
    k = tnt.keras
    m = k.Sequential([k.layers.Dense(1, input_shape=(2,))])
    m.compile("sgd", "mse")
    endless = D.from_generator(lambda: ((np.ones(2, np.float32), np.float32(1)) for _ in itertools.count()),
                               (tnt.tensorflow.float32, tnt.tensorflow.float32))
    h = m.fit(endless.take(6).batch(3), epochs=2, verbose=0)  # the take bounds the generator
    assert len(h.history["loss"]) == 2
    with pytest.raises(ValueError, match="infinite"):
        m.fit(D.range(4).map(lambda i: (np.ones(2) * i, i)).repeat().filter(lambda a, b: True).batch(2),
              epochs=1, steps_per_epoch=2, verbose=0)
    with pytest.raises(ValueError, match="ran out"):
        m.fit((b for b in [(np.ones((2, 2)), np.ones(2))]), epochs=1, steps_per_epoch=2, verbose=0)


def test_window_shard_and_counts(D, tnt):
    windows = D.range(7).window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(3))
    assert ints(windows) == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    assert [ints(w) for w in D.range(5).window(2)] == [[0, 1], [2, 3], [4]]
    assert [ints(w) for w in D.range(7).window(3, shift=1, stride=2, drop_remainder=True)] == \
        [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    pairs = list(D.zip((D.range(4), D.range(10, 14))).window(2))
    assert [(ints(a), ints(b)) for a, b in pairs] == [([0, 1], [10, 11]), ([2, 3], [12, 13])]
    assert ints(D.range(10).shard(3, 1)) == [1, 4, 7] and D.range(10).shard(3, 1).cardinality() == 3
    assert D.range(10).cardinality().numpy() == 10
    assert tnt.tensorflow.data.experimental.cardinality(D.from_tensor_slices(np.zeros((4, 2)))).numpy() == 4


def test_values_keep_integer_dtypes_and_answer_numpy(D, tnt):
    """The pipeline holds float32; Python sees the source's integers again (TensorFlow's dtypes),
    map functions get them too, and values answer .numpy()."""
    images = np.arange(24, dtype=np.uint8).reshape(4, 3, 2)
    labels = np.array([2, 0, 1, 2])
    ds = D.from_tensor_slices((images, labels))
    x, y = next(iter(ds))
    assert x.dtype == np.uint8 and y.dtype == labels.dtype and y.numpy() == 2
    assert ds.element_spec[1].dtype == tnt.tensorflow.as_dtype(labels.dtype)
    names = ["cat", "dog", "fish"]
    bx, by = next(iter(ds.batch(4)))
    assert [names[by[i]] for i in range(4)] == ["fish", "cat", "dog", "fish"]
    assert isinstance(bx.numpy(), np.ndarray) and type(bx.numpy()) is np.ndarray
    onehot = ds.map(lambda a, b: (a / 255, np.eye(3, dtype=np.float32)[b])).batch(4)
    _, oy = next(iter(onehot))
    np.testing.assert_array_equal(oy, np.eye(3)[labels])
    assert oy.dtype == np.float32
    k = tnt.keras
    m = k.Sequential([k.layers.Flatten(input_shape=(3, 2)), k.layers.Dense(3, activation="softmax")])
    m.compile("sgd", "categorical_crossentropy")
    assert np.isfinite(m.fit(onehot, epochs=1, verbose=0).history["loss"][0])
    assert next(iter(D.range(3))).numpy() == 0 and list(D.range(3).batch(2))[0].numpy().tolist() == [0, 1]


def test_autoencoder_map_x_to_pairs_trains(D, tnt):
    """x-only data mapped to (x, x), as autoencoder programs do, trains as the arrays (x, x)."""
    k = tnt.keras
    x = np.random.default_rng(5).random((24, 4)).astype(np.float32)

    def model():
        tnt.keras.utils.set_random_seed(2)
        m = k.Sequential([k.layers.Dense(2, input_shape=(4,)), k.layers.Dense(4)])
        m.compile("sgd", "mse")
        return m
    a, b = model(), model()
    ha = a.fit(D.from_tensor_slices(x).map(lambda v: (v, v)).batch(8), epochs=2, verbose=0)
    hb = b.fit(x, x, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert ha.history == hb.history


def test_samplers_and_small_ops(D, tnt):
    a, b = D.range(0, 5), D.range(100, 103)
    choice = D.from_tensor_slices(np.array([0, 1, 0, 1, 1, 0]))
    assert ints(D.choose_from_datasets([a, b], choice)) == [0, 100, 1, 101, 102, 2]
    assert ints(D.choose_from_datasets([a, b], D.from_tensor_slices(np.array([1, 1, 1, 1, 0])))) == [100, 101, 102]
    mixed = D.sample_from_datasets([a, b], weights=[0.5, 0.5], seed=3)
    got = ints(mixed)
    # every element of both, each dataset's in its own order (the exhausted one drops out)
    assert sorted(got) == [0, 1, 2, 3, 4, 100, 101, 102]
    assert [v for v in got if v < 100] == [0, 1, 2, 3, 4] and [v for v in got if v >= 100] == [100, 101, 102]
    assert ints(D.sample_from_datasets([a, b], seed=3)) == got  # equal weights by default, seeded
    only_a = ints(D.sample_from_datasets([a, b], weights=[1.0, 0.0]))
    assert only_a == [0, 1, 2, 3, 4]
    both = [D.range(1), D.range(10, 20)]
    full = ints(tnt.data.experimental.sample_from_datasets(both, seed=1))
    stopped = ints(tnt.data.experimental.sample_from_datasets(both, seed=1, stop_on_empty_dataset=True))
    assert sorted(full) == [0] + list(range(10, 20))
    # stopping at the first pick of the exhausted dataset: a prefix of the same draws
    assert 0 in stopped and stopped == full[:len(stopped)] and len(stopped) <= len(full)
    assert ints(D.range(10).take_while(lambda x: x < 4)) == [0, 1, 2, 3]
    assert ints(D.from_tensor_slices(np.array([1, 1, 2, 3, 2, 1])).unique()) == [1, 2, 3]
    assert int(D.range(1).get_single_element()) == 0
    with pytest.raises(ValueError, match="more than one"):
        D.range(2).get_single_element()


def test_inputs_and_targets_by_name(D, tnt):
    """Dicts keyed by the Input and output layer names (arrays, or dataset elements) train as the
    lists in the model's order; unknown keys are ignored with a warning, a missing one refused."""
    k = tnt.keras
    rng = np.random.default_rng(6)
    age, score = rng.random((24, 1)).astype(np.float32), rng.random((24, 3)).astype(np.float32)
    target = rng.random((24, 1)).astype(np.float32)

    def model():
        tnt.keras.utils.set_random_seed(4)
        a, s = k.Input((1,), name="age"), k.Input((3,), name="score")
        out = k.layers.Dense(1, name="price")(k.layers.Concatenate()([s, a]))
        m = k.Model([a, s], out)
        m.compile("sgd", "mse")
        return m
    want = model().fit([age, score], target, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    got = model().fit({"score": score, "age": age}, {"price": target}, batch_size=8, epochs=2, shuffle=False,
                      verbose=0).history
    assert got == want
    ds = D.from_tensor_slices(({"score": score, "age": age, "id": np.arange(24)}, target)).batch(8)
    with pytest.warns(UserWarning, match="id"):
        assert model().fit(ds, epochs=2, verbose=0).history == want
    with pytest.raises(ValueError, match="age"):
        model().fit({"score": score}, target, epochs=1, verbose=0)
