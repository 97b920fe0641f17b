"""keras.backend, keras.config and keras.datasets (loaders on files put in Keras's cache folder,
checked against Keras's shuffles and encodings written out here)."""
import json
import pickle

import numpy as np
import pytest


def test_backend_settings(tnt):
    K = tnt.keras.backend
    assert K.backend() == "tensorflow" and K.epsilon() == 1e-7 and K.floatx() == "float32"
    K.set_image_data_format("channels_first")
    try:
        assert K.image_data_format() == "channels_first" and tnt.keras.config.image_data_format() == "channels_first"
        assert tnt.keras.utils.img_to_array(np.zeros((2, 3, 1))).shape == (1, 2, 3)
    finally:
        K.set_image_data_format("channels_last")
    with pytest.raises(ValueError, match="channels"):
        K.set_image_data_format("nhwc")
    K.set_epsilon(1e-5)
    assert K.epsilon() == 1e-5
    K.set_epsilon(1e-7)
    with pytest.raises(NotImplementedError, match="float32"):
        K.set_floatx("float64")
    assert K.cast_to_floatx([1, 2]).dtype == np.float32


def test_backend_values_and_shapes(tnt):
    K, k = tnt.keras.backend, tnt.keras
    x = k.Input((5, 3))
    assert K.int_shape(x) == (None, 5, 3) and K.ndim(x) == 3 and K.is_keras_tensor(x)
    assert not K.is_keras_tensor(np.zeros(2))
    model = k.Sequential([k.layers.Dense(4, input_shape=(3,))])
    kernel = model.weights[0]
    assert K.int_shape(kernel) == (3, 4) and K.count_params(kernel) == 12
    K.set_value(kernel, np.ones((3, 4)))
    np.testing.assert_array_equal(K.get_value(kernel), np.ones((3, 4), np.float32))
    model.compile(k.optimizers.SGD(0.1), "mse")
    model.fit(np.zeros((4, 3)), np.zeros((4, 4)), epochs=1, verbose=0)
    assert K.get_value(model.optimizer.learning_rate) == pytest.approx(0.1)
    K.set_value(model.optimizer.lr, 0.025)  # Keras 2 programs change the rate so, in callbacks
    assert model.optimizer.learning_rate == pytest.approx(0.025)
    a = np.zeros(3)
    K.set_value(a, 2)
    assert a.tolist() == [2, 2, 2] and K.dtype(a) == "float64"
    with pytest.raises(TypeError, match="cannot write"):
        K.set_value(3.0, 1)
    assert K.get_uid("x") == 1 and K.get_uid("x") == 2


def test_clear_session_resets_names(tnt):
    k = tnt.keras
    k.backend.clear_session()
    assert k.layers.Dense(1).name == "dense"
    assert k.layers.Dense(1).name == "dense_1"
    k.backend.clear_session()
    assert k.layers.Dense(1).name == "dense"


def test_config(tnt):
    c = tnt.keras.config
    assert c.backend() == "tensorflow" and c.floatx() == "float32" and c.epsilon() == 1e-7
    c.disable_traceback_filtering()
    assert not c.is_traceback_filtering_enabled()
    c.enable_traceback_filtering()
    c.set_random_seed(3)
    a = np.random.random()
    c.set_random_seed(3)
    assert np.random.random() == a


# ---- keras.datasets ----

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    d = tmp_path / "datasets"
    d.mkdir()
    return d


def test_every_dataset_name_and_missing_files(tnt, cache):
    D = tnt.keras.datasets
    for name in ("mnist", "cifar10", "cifar100", "imdb", "reuters", "boston_housing", "california_housing"):
        with pytest.raises(FileNotFoundError) as e:
            getattr(D, name).load_data()
        assert str(cache) in str(e.value), name
    (x, y), (xt, yt) = D.fashion_mnist.load_data()  # Debian's dataset-fashion-mnist
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8 and yt.shape == (10000,) and y.max() == 9


def test_npz_loaders_follow_keras(tnt, cache):
    D = tnt.keras.datasets
    rng = np.random.default_rng(0)
    mx = rng.integers(0, 256, (5, 28, 28)).astype(np.uint8)
    np.savez(cache / "mnist.npz", x_train=mx, y_train=np.arange(5), x_test=mx[:2], y_test=np.arange(2))
    (x, y), (xt, yt) = D.mnist.load_data()
    np.testing.assert_array_equal(x, mx)
    assert yt.tolist() == [0, 1]
    bx, by = rng.random((10, 13)), np.arange(10.0)
    np.savez(cache / "boston_housing.npz", x=bx, y=by)
    (x, y), (xt, yt) = D.boston_housing.load_data(test_split=0.2, seed=113)
    order = np.arange(10)
    np.random.RandomState(113).shuffle(order)
    assert y.tolist() == by[order[:8]].tolist() and yt.tolist() == by[order[8:]].tolist()
    np.savez(cache / "california_housing.npz", x=rng.random((700, 8)), y=np.arange(700.0))
    (x, y), (xt, yt) = D.california_housing.load_data(version="small")
    assert len(x) == 480 and len(xt) == 120 and max(y.max(), yt.max()) < 600


def _ragged(seqs):
    a = np.empty(len(seqs), dtype=object)
    a[:] = seqs
    return a


def test_imdb_and_reuters_encoding(tnt, cache):
    D = tnt.keras.datasets
    train = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    test = [[2, 2], [9]]
    np.savez(cache / "imdb.npz", x_train=_ragged(train), y_train=np.array([0, 1, 1]), x_test=_ragged(test),
             y_test=np.array([1, 0]))
    (x, y), (xt, yt) = D.imdb.load_data(num_words=10, seed=113)
    rng = np.random.RandomState(113)  # one generator shuffles train, then test
    o_train, o_test = np.arange(3), np.arange(2)
    rng.shuffle(o_train)
    rng.shuffle(o_test)

    def enc(s):  # start_char 1, indices + 3, >= num_words (10) -> oov 2
        return [1] + [w + 3 if w + 3 < 10 else 2 for w in s]
    assert [list(s) for s in x] == [enc(train[i]) for i in o_train]
    assert y.tolist() == [[0, 1, 1][i] for i in o_train]
    assert [list(s) for s in xt] == [enc(test[i]) for i in o_test]
    (x, _), _ = D.imdb.load_data(maxlen=4)  # sequences of maxlen words or more are left out
    assert [list(s) for s in x] == [[1, 7, 8]]  # [1, 4, 5, 6] and [1, 9, 10, 11, 12] are too long
    (x, _), _ = D.imdb.load_data(skip_top=5, oov_char=None, start_char=None)
    assert all(w >= 5 for s in x for w in s)
    with open(cache / "imdb_word_index.json", "w") as f:
        json.dump({"film": 1}, f)
    assert D.imdb.get_word_index() == {"film": 1}
    np.savez(cache / "reuters.npz", x=_ragged(train + test), y=np.arange(5))
    (x, y), (xt, yt) = D.reuters.load_data(test_split=0.2)
    order = np.arange(5)
    np.random.RandomState(113).shuffle(order)
    assert y.tolist() == order[:4].tolist() and yt.tolist() == order[4:].tolist()
    # num_words defaults to the largest index (12), and Keras keeps only w < num_words: 12 becomes oov 2
    assert [list(s) for s in xt] == [[1] + [w + 3 if w + 3 < 12 else 2 for w in (train + test)[order[4]]]]


def test_cifar_from_the_extracted_folder(tnt, cache):
    D = tnt.keras.datasets
    rng = np.random.default_rng(1)
    folder = cache / "cifar-10-batches-py"
    folder.mkdir()
    batches = []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (10000, 3072)).astype(np.uint8)
        labels = list(rng.integers(0, 10, 10000))
        batches.append((data, labels))
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": labels}, f)
    (x, y), (xt, yt) = D.cifar10.load_data()
    assert x.shape == (50000, 32, 32, 3) and y.shape == (50000, 1) and xt.shape == (10000, 32, 32, 3)
    np.testing.assert_array_equal(x[10000], batches[1][0][0].reshape(3, 32, 32).transpose(1, 2, 0))
    assert yt[:5, 0].tolist() == batches[5][1][:5]
