"""keras.utils against Keras's documented behaviour: the expected values come from Keras's
docstrings and formulas (TensorFlow is not installed)."""
import os

import numpy as np
import pytest


@pytest.fixture(scope="module")
def U(tnt):
    return tnt.keras.utils


def test_to_categorical_and_normalize(U):
    np.testing.assert_array_equal(U.to_categorical([0, 1, 2, 3], num_classes=4), np.eye(4, dtype=np.float32))
    y = U.to_categorical(np.array([[1], [0]]))  # a trailing axis of 1 is dropped
    assert y.shape == (2, 2) and y.dtype == np.float32 and y.tolist() == [[0, 1], [1, 0]]
    assert U.to_categorical([[0, 2], [1, 1]], 3).shape == (2, 2, 3)
    assert U.to_categorical([1, 0], dtype="int32").dtype == np.int32
    with pytest.raises(ValueError, match="0, 3"):
        U.to_categorical([0, 3], num_classes=3)
    np.testing.assert_allclose(U.normalize(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(U.normalize(np.array([[3.0, 4.0]]), order=1), [[3 / 7, 4 / 7]])
    np.testing.assert_allclose(U.normalize(np.array([[3.0], [4.0]]), axis=0), [[0.6], [0.8]])
    np.testing.assert_array_equal(U.to_ordinal([0, 1, 2, 3]), [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]])


def test_pad_sequences_docstring(U):
    seqs = [[1], [2, 3], [4, 5, 6]]
    assert U.pad_sequences(seqs).tolist() == [[0, 0, 1], [0, 2, 3], [4, 5, 6]]
    assert U.pad_sequences(seqs, value=-1).tolist() == [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]]
    assert U.pad_sequences(seqs, padding="post").tolist() == [[1, 0, 0], [2, 3, 0], [4, 5, 6]]
    assert U.pad_sequences(seqs, maxlen=2).tolist() == [[0, 1], [2, 3], [5, 6]]
    assert U.pad_sequences(seqs, maxlen=2, truncating="post").tolist() == [[0, 1], [2, 3], [4, 5]]
    assert U.pad_sequences(seqs).dtype == np.int32
    assert U.pad_sequences([[], [1.5]], dtype="float32").tolist() == [[0.0], [1.5]]
    assert U.pad_sequences([["a"], ["b", "c"]], dtype=object, value="").tolist() == [["", "a"], ["b", "c"]]
    with pytest.raises(ValueError, match="padding"):
        U.pad_sequences(seqs, padding="middle")
    with pytest.raises(ValueError, match="object"):
        U.pad_sequences(seqs, value="x")


def test_custom_objects(U):
    class Scale:
        def __init__(self, f=2):
            self.f = f

        def get_config(self):
            return {"f": self.f}

    U.register_keras_serializable(package="Test")(Scale)
    assert U.get_custom_objects()["Test>Scale"] is Scale and U.get_registered_name(Scale) == "Test>Scale"
    assert U.serialize_keras_object(Scale(3)) == {"class_name": "Test>Scale", "config": {"f": 3}}
    assert U.deserialize_keras_object({"class_name": "Test>Scale", "config": {"f": 5}}).f == 5
    with pytest.raises(ValueError, match="already"):
        U.register_keras_serializable(package="Test")(Scale)

    def swish2(x):
        return x
    with U.custom_object_scope({"swish2": swish2}):
        assert U.get_custom_objects()["swish2"] is swish2 and U.get_registered_object("swish2") is swish2
    assert "swish2" not in U.get_custom_objects()
    del U.get_custom_objects()["Test>Scale"]


def test_progbar_averages(U, capsys):
    """Keras's rule: a value is weighted by the steps since the last update; stateful ones are
    shown as given."""
    bar = U.Progbar(10, verbose=0, stateful_metrics=["acc"])
    bar.update(2, [("loss", 1.0), ("acc", 0.5)])
    bar.update(6, [("loss", 4.0), ("acc", 0.75)])
    assert bar._values["loss"] == [1.0 * 2 + 4.0 * 4, 6] and bar._values["acc"] == [0.75, 1]
    bar.add(4, [("loss", 0.0)])
    assert bar._seen_so_far == 10 and bar._values["loss"] == [18.0, 10]
    shown = U.Progbar(4, verbose=1)
    shown.update(4, [("loss", 0.25)])
    out = capsys.readouterr().out
    assert "4/4" in out and "loss: 0.2500" in out


def test_get_file_offline(U, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError) as e:
        U.get_file("data.csv", origin="https://example.org/data.csv")
    assert "https://example.org/data.csv" in str(e.value) and str(tmp_path / "datasets" / "data.csv") in str(e.value)
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "data.csv").write_text("a,b\n")
    assert U.get_file(origin="https://example.org/data.csv") == str(tmp_path / "datasets" / "data.csv")
    import hashlib
    md5 = hashlib.md5(b"a,b\n").hexdigest()
    assert U.get_file("data.csv", file_hash=md5).endswith("data.csv")
    with pytest.raises(ValueError, match="expected"):
        U.get_file("data.csv", file_hash="0" * 32)
    import tarfile
    folder = tmp_path / "src" / "pack"
    folder.mkdir(parents=True)
    (folder / "inside.txt").write_text("x")
    with tarfile.open(tmp_path / "datasets" / "pack.tar.gz", "w:gz") as t:
        t.add(folder, arcname="pack")
    path = U.get_file("pack", origin="https://example.org/pack.tar.gz", untar=True)
    assert path == str(tmp_path / "datasets" / "pack") and os.path.isfile(os.path.join(path, "inside.txt"))
    custom = U.get_file("data.csv", cache_dir=str(tmp_path), cache_subdir="datasets")
    assert custom == str(tmp_path / "datasets" / "data.csv")


def test_image_helpers(U, tmp_path):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (5, 7, 3)).astype(np.float32)
    pil = U.array_to_img(img, scale=False)
    assert pil.size == (7, 5) and pil.mode == "RGB"
    U.save_img(tmp_path / "a.png", img, scale=False)
    back = U.img_to_array(U.load_img(tmp_path / "a.png"))
    np.testing.assert_array_equal(back, img)  # PNG is lossless
    assert back.dtype == np.float32 and U.img_to_array(pil, data_format="channels_first").shape == (3, 5, 7)
    gray = U.img_to_array(U.load_img(tmp_path / "a.png", color_mode="grayscale"))
    assert gray.shape == (5, 7, 1)
    assert U.load_img(tmp_path / "a.png", target_size=(3, 4)).size == (4, 3)
    scaled = U.img_to_array(U.array_to_img(np.array([[[0.0], [0.5]], [[1.0], [0.25]]])))
    np.testing.assert_array_equal(scaled[..., 0], [[0, 127], [255, 63]])  # (x - min) / max * 255, truncated
    with pytest.raises(FileNotFoundError):
        U.load_img(tmp_path / "absent.png")


def test_plot_model_writes_a_png(tnt, U, tmp_path):
    k = tnt.keras
    a, b = k.Input((4,), name="a"), k.Input((4,), name="b")
    out = k.layers.Dense(2, activation="relu", name="out")(k.layers.Concatenate(name="cat")([a, b]))
    model = k.Model([a, b], out)
    dot = U.model_to_dot(model, show_shapes=True, show_layer_activations=True)
    edges = sorted((e.get_source().strip('"'), e.get_destination().strip('"')) for e in dot.get_edges())
    assert edges == [("a", "cat"), ("b", "cat"), ("cat", "out")]
    labels = {n.get_name().strip('"'): n.get("label") for n in dot.get_nodes() if n.get("label")}
    assert labels["out"].startswith("out: Dense|relu") and "2" in labels["out"]
    U.plot_model(model, to_file=str(tmp_path / "model.png"), show_shapes=True)
    with open(tmp_path / "model.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    seq = k.Sequential([k.layers.Dense(3, input_shape=(4,), name="d1"), k.layers.Dense(1, name="d2")])
    U.plot_model(seq, to_file=str(tmp_path / "seq.png"))
    assert os.path.getsize(tmp_path / "seq.png") > 100
    # a layer name longer than the summary's column still gets its shape
    long = k.Sequential([k.layers.Embedding(10, 3, input_length=4), k.layers.GlobalAveragePooling1D()])
    labels = {n.get_name().strip('"'): n.get("label") for n in U.model_to_dot(long, show_shapes=True).get_nodes()
              if n.get("label")}
    pooled = [v for name, v in labels.items() if name.startswith("global_average_pooling1d")]
    assert pooled and pooled[0].endswith("output: \\(None, 3\\)")


def test_timeseries_dataset_docstring(U):
    """Keras's docstring: indices 0..98, sequence_length=10, sampling_rate=2, sequence_stride=3:
    [0 2 .. 18], [3 5 .. 21], [6 8 .. 24], ..., the last [78 80 .. 96]."""
    data = np.arange(100, dtype=np.float32)
    ds = U.timeseries_dataset_from_array(data[:99], None, sequence_length=10, sampling_rate=2, sequence_stride=3,
                                         batch_size=128)
    (windows,) = [w for w in ds]
    assert windows.shape == (27, 10)
    np.testing.assert_array_equal(windows[0], np.arange(0, 20, 2))
    np.testing.assert_array_equal(windows[1], np.arange(3, 23, 2))
    np.testing.assert_array_equal(windows[-1], np.arange(78, 98, 2))
    # the second docstring example: targets 10 steps ahead
    ds = U.timeseries_dataset_from_array(data[:-10], data[10:], sequence_length=10, batch_size=16)
    x, y = next(iter(ds))
    np.testing.assert_array_equal(x[0], np.arange(10))
    np.testing.assert_array_equal(y[:3], [10, 11, 12])
    assert ds.cardinality() == -(-81 // 16)
    # start_index offsets the windows and the targets alike
    x, y = next(iter(U.timeseries_dataset_from_array(data, data * 10, 3, start_index=5, end_index=20,
                                                     batch_size=None)))
    np.testing.assert_array_equal(x, [5, 6, 7])
    assert float(y) == 50
    with pytest.raises(ValueError, match="sequence_length"):
        U.timeseries_dataset_from_array(data, None, 0)


def _write_tree(root, files):
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            p.write_text(content)
        else:
            from PIL import Image
            Image.fromarray(content).save(p)


def test_text_dataset_from_directory(U, tmp_path):
    _write_tree(tmp_path, {"neg/b.txt": "bad film", "neg/a.txt": "awful", "pos/c.txt": "great", "pos/x.md": "no"})
    ds = U.text_dataset_from_directory(tmp_path, batch_size=None, shuffle=False)
    assert ds.class_names == ["neg", "pos"]
    assert [(str(t), int(v)) for t, v in ds] == [("awful", 0), ("bad film", 0), ("great", 1)]
    cat = U.text_dataset_from_directory(tmp_path, label_mode="categorical", batch_size=2, shuffle=False,
                                        max_length=3)
    texts, labels = next(iter(cat))
    assert list(texts) == ["awf", "bad"] and labels.tolist() == [[1, 0], [1, 0]]
    assert texts.numpy()[1] == "bad"  # as tutorials print text_batch.numpy()[i]
    binary = U.text_dataset_from_directory(tmp_path, label_mode="binary", batch_size=None, shuffle=False)
    assert [v.tolist() for _, v in binary] == [[0.0], [0.0], [1.0]]
    # the training/validation split takes the last files for validation, after the seeded shuffle
    train = U.text_dataset_from_directory(tmp_path, batch_size=None, seed=1, validation_split=0.34, subset="training")
    val = U.text_dataset_from_directory(tmp_path, batch_size=None, seed=1, validation_split=0.34, subset="validation")
    paths = [os.path.join(tmp_path, p) for p in ("neg/a.txt", "neg/b.txt", "pos/c.txt")]
    np.random.RandomState(1).shuffle(paths)
    assert train.file_paths == paths[:2] and val.file_paths == paths[2:]
    with pytest.raises(ValueError, match="seed"):
        U.text_dataset_from_directory(tmp_path, validation_split=0.5, subset="training")
    with pytest.raises(ValueError, match="binary"):
        _write_tree(tmp_path, {"third/d.txt": "meh"})
        U.text_dataset_from_directory(tmp_path, label_mode="binary")


def test_image_dataset_from_directory_resizes_as_tensorflow(U, tmp_path):
    rng = np.random.default_rng(1)
    red = rng.integers(0, 256, (4, 6, 3)).astype(np.uint8)
    blue = rng.integers(0, 256, (4, 6, 3)).astype(np.uint8)
    _write_tree(tmp_path, {"red/1.png": red, "blue/2.png": blue})
    ds = U.image_dataset_from_directory(tmp_path, image_size=(2, 3), batch_size=2, shuffle=False)
    assert ds.class_names == ["blue", "red"] and ds.element_spec[0].shape == (None, 2, 3, 3)
    images, labels = next(iter(ds))
    # tf.image.resize bilinear (half-pixel centres): halving takes the mean of each 2x2 block
    expect = blue.astype(np.float32).reshape(2, 2, 3, 2, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(images[0], expect, rtol=1e-6)
    assert labels.tolist() == [0, 1]
    same = U.image_dataset_from_directory(tmp_path, image_size=(4, 6), batch_size=None, shuffle=False,
                                          color_mode="grayscale", label_mode=None)
    first = next(iter(same))
    assert first.shape == (4, 6, 1)


def test_split_dataset(U):
    data = np.random.default_rng(0).random((1000, 4))
    left, right = U.split_dataset(data, left_size=0.8)
    assert left.cardinality() == 800 and right.cardinality() == 200
    x, y = np.arange(10), np.arange(10) * 10
    a, b = U.split_dataset((x, y), left_size=6, right_size=3, shuffle=True, seed=3)
    samples = list(zip(x, y))
    import random
    random.Random(3).shuffle(samples)
    assert [(int(p), int(q)) for p, q in a] == [(int(p), int(q)) for p, q in samples[:6]]
    assert [(int(p), int(q)) for p, q in b] == [(int(p), int(q)) for p, q in samples[-3:]]
    with pytest.raises(ValueError, match="left_size or right_size"):
        U.split_dataset(data)
    with pytest.raises(ValueError):
        U.split_dataset(data, left_size=0.7, right_size=0.5)


def test_sequence_trains_as_its_arrays(tnt, U):
    """fit on a Sequence (or a generator) gives the same history and weights as fit on the arrays
    it slices (the same batches, in order), and on_epoch_end is called between epochs."""
    k = tnt.keras
    rng = np.random.default_rng(2)
    x = rng.standard_normal((50, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)

    class Data(U.Sequence):
        ends = 0

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]

        def on_epoch_end(self):
            Data.ends += 1

    def model():
        tnt.keras.utils.set_random_seed(5)
        m = k.Sequential([k.layers.Dense(4, activation="tanh", input_shape=(5,)), k.layers.Dense(2, activation="softmax")])
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
        return m
    a, b = model(), model()
    ha = a.fit(Data(), epochs=3, shuffle=False, verbose=0)
    hb = b.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    assert ha.history == hb.history
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(u, v)
    assert Data.ends == 2
    np.testing.assert_allclose(a.predict(Data(), verbose=0), a.predict(x, verbose=0), rtol=1e-6)
    assert a.evaluate(Data(), verbose=0) == pytest.approx(a.evaluate(x, y, batch_size=16, verbose=0), rel=1e-6)

    # shuffle (fit's default): Keras 2 visits a Sequence's batches in a new order every epoch; the
    # smaller last batch stays last here. Trained as the arrays in the orders it visited.
    class Visited(Data):
        calls = []

        def __getitem__(self, i):
            Visited.calls.append(i)
            return super().__getitem__(i)
    shuffled = model().fit(Visited(), epochs=3, verbose=0).history
    orders = [Visited.calls[3 + 4 * e:3 + 4 * (e + 1)] for e in range(3)]  # after 2 probes and the trace
    assert all(sorted(o) == [0, 1, 2, 3] and o[-1] == 3 for o in orders) and len(Visited.calls) == 15
    assert len({tuple(o) for o in orders}) > 1
    again = model()
    for e, o in enumerate(orders):
        rows = np.concatenate([np.arange(i * 16, min((i + 1) * 16, 50)) for i in o])
        h = again.fit(x[rows], y[rows], batch_size=16, epochs=1, shuffle=False, verbose=0).history
        assert h["loss"][0] == shuffled["loss"][e]

    def batches():  # Keras 2's fit on an endless generator, with steps_per_epoch
        while True:
            for i in range(3):
                yield x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]
    c, d = model(), model()
    hc = c.fit(batches(), steps_per_epoch=3, epochs=3, verbose=0)
    hd = d.fit(x[:48], y[:48], batch_size=16, epochs=3, shuffle=False, verbose=0)
    assert hc.history == hd.history
    for u, v in zip(c.get_weights(), d.get_weights()):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(c.predict((b for b, _ in batches()), steps=2, verbose=0),
                               c.predict(x[:32], verbose=0), rtol=1e-6)

    class Uneven(U.PyDataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return x[:10 + i], y[:10 + i]
    with pytest.raises(ValueError, match="same size"):
        a.fit(Uneven(), epochs=1, verbose=0)
