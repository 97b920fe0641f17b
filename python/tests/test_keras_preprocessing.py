"""keras.preprocessing: Tokenizer, sequence helpers and ImageDataGenerator against Keras's rules
and formulas (the expected values are worked out here from them)."""
import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def P(tnt):
    return tnt.keras.preprocessing


TEXTS = ["The cat sat.", "The dog sat on the mat!", "A cat"]


def test_tokenizer_indices_and_sequences(P):
    T = P.text
    assert T.text_to_word_sequence("Hello, World! hello") == ["hello", "world", "hello"]
    tok = T.Tokenizer()
    tok.fit_on_texts(TEXTS)
    # counts: the 3, cat 2, sat 2, dog 1, on 1, mat 1, a 1; ties keep the order of first appearance
    assert tok.word_index == {"the": 1, "cat": 2, "sat": 3, "dog": 4, "on": 5, "mat": 6, "a": 7}
    assert tok.word_counts["the"] == 3 and tok.word_docs["the"] == 2 and tok.document_count == 3
    assert tok.index_docs[2] == 2 and tok.index_word[4] == "dog"
    assert tok.texts_to_sequences(["the cat on a log"]) == [[1, 2, 5, 7]]
    assert tok.sequences_to_texts([[1, 2, 5]]) == ["the cat on"]
    limited = T.Tokenizer(num_words=3, oov_token="<OOV>")
    limited.fit_on_texts(TEXTS)
    assert limited.word_index["<OOV>"] == 1 and limited.word_index["the"] == 2
    # indices >= num_words and unknown words become the oov index
    assert limited.texts_to_sequences(["the cat zebra"]) == [[2, 1, 1]]
    chars = T.Tokenizer(char_level=True)
    chars.fit_on_texts(["abca"])
    assert chars.word_index == {"a": 1, "b": 2, "c": 3}


def test_tokenizer_matrix_modes(P):
    tok = P.text.Tokenizer()
    tok.fit_on_texts(TEXTS)
    seqs = [[1, 2, 1], [4]]
    binary = tok.sequences_to_matrix(seqs, mode="binary")
    assert binary.shape == (2, 8) and binary[0].tolist() == [0, 1, 1, 0, 0, 0, 0, 0]
    assert tok.sequences_to_matrix(seqs, mode="count")[0, 1] == 2
    assert tok.sequences_to_matrix(seqs, mode="freq")[0, 1] == pytest.approx(2 / 3)
    tfidf = tok.sequences_to_matrix(seqs, mode="tfidf")
    # (1 + log count) * log(1 + documents / (1 + documents with the word)): "the" is in 2 of 3
    assert tfidf[0, 1] == pytest.approx((1 + np.log(2)) * np.log(1 + 3 / 3))
    assert tfidf[1, 4] == pytest.approx(1 * np.log(1 + 3 / 2))
    np.testing.assert_array_equal(tok.texts_to_matrix(["the the cat"], mode="count")[0, :3], [0, 2, 1])
    with pytest.raises(ValueError, match="mode"):
        tok.sequences_to_matrix(seqs, mode="bm25")
    with pytest.raises(ValueError, match="num_words"):
        P.text.Tokenizer().texts_to_matrix(["x"])


def test_tokenizer_json_round_trip(P):
    tok = P.text.Tokenizer(num_words=5, oov_token="?")
    tok.fit_on_texts(TEXTS)
    s = tok.to_json()
    assert json.loads(s)["class_name"] == "Tokenizer"
    back = P.text.tokenizer_from_json(s)
    assert back.word_index == tok.word_index and back.index_word == tok.index_word
    assert back.index_docs == tok.index_docs and back.num_words == 5 and back.oov_token == "?"
    assert back.texts_to_sequences(TEXTS) == tok.texts_to_sequences(TEXTS)


def test_hashing_trick_md5(P):
    import hashlib
    got = P.text.hashing_trick("a b a", 10, hash_function="md5")
    want = [int(hashlib.md5(w.encode()).hexdigest(), 16) % 9 + 1 for w in ("a", "b", "a")]
    assert got == want and got[0] == got[2]


def test_sequence_module(P):
    assert P.sequence.pad_sequences([[1, 2, 3]], maxlen=2).tolist() == [[2, 3]]
    data = np.arange(20).reshape(10, 2)
    targets = np.arange(10) * 10
    gen = P.sequence.TimeseriesGenerator(data, targets, length=3, sampling_rate=1, batch_size=2)
    # rows 3 .. 9: windows data[row - 3 : row], targets[row]; (9 - 3 + 2) // 2 = 4 batches
    assert len(gen) == 4
    x, y = gen[0]
    np.testing.assert_array_equal(x[0], data[0:3])
    np.testing.assert_array_equal(x[1], data[1:4])
    assert y.tolist() == [30, 40]
    x, y = gen[3]
    assert len(x) == 1 and y.tolist() == [90]
    strided = P.sequence.TimeseriesGenerator(data, targets, length=4, sampling_rate=2, stride=3, batch_size=5)
    x, y = strided[0]
    np.testing.assert_array_equal(x[0], data[0:4:2])
    assert y.tolist() == [40, 70]


def test_affine_transforms_as_keras_composes_them(P):
    """Keras composes the matrix in (x, y) order and swaps it to (row, column) (M' = PMP), so tx
    moves along columns and zx zooms them (Keras's known quirk: height_shift_range, which it turns
    into tx, shifts horizontally; keras-team/keras#17398)."""
    I = P.image
    axes = dict(row_axis=0, col_axis=1, channel_axis=2)
    ramp = np.add.outer(np.zeros(6), np.arange(6.0))[..., None]  # value = column
    # 90 degrees: out[i, j] = in[j, n - 1 - i] (np.rot90)
    img = np.arange(25.0).reshape(5, 5, 1)
    np.testing.assert_allclose(I.apply_affine_transform(img, theta=90, **axes), np.rot90(img), atol=1e-9)
    # a shift tx: out[:, j] = in[:, j + tx], the edge repeated (fill_mode nearest)
    np.testing.assert_array_equal(I.apply_affine_transform(ramp, tx=2, **axes)[0, :, 0], [2, 3, 4, 5, 5, 5])
    constant = I.apply_affine_transform(ramp, tx=2, fill_mode="constant", cval=-1, **axes)
    np.testing.assert_array_equal(constant[0, :, 0], [2, 3, 4, 5, -1, -1])
    np.testing.assert_array_equal(I.apply_affine_transform(ramp, ty=2, **axes), ramp)  # ty moves rows: a no-op here
    # zoom zx about the centre c = 2.5: out[:, j] = in[:, c + zx (j - c)], linear between columns
    zoomed = I.apply_affine_transform(ramp, zx=0.5, zy=1, **axes)
    np.testing.assert_allclose(zoomed[3, :, 0], 2.5 + 0.5 * (np.arange(6) - 2.5))
    reflect = I.apply_affine_transform(ramp, tx=-2, fill_mode="reflect", **axes)
    np.testing.assert_array_equal(reflect[0, :, 0], [1, 0, 0, 1, 2, 3])


def test_image_data_generator_flow(tnt, P):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (10, 4, 5, 3)).astype(np.float32)
    y = np.arange(10)
    gen = P.image.ImageDataGenerator(rescale=1 / 255.0, horizontal_flip=True)
    it = gen.flow(x, y, batch_size=4, shuffle=False)
    assert len(it) == 3
    np.random.seed(11)
    draws = np.random.random(8)  # get_random_transform draws twice per sample: horizontal, then vertical flip
    flips = [draws[2 * i] < 0.5 for i in range(4)]
    np.random.seed(11)
    bx, by = it[0]
    assert by.tolist() == [0, 1, 2, 3]
    for i in range(4):
        want = x[i][:, ::-1] if flips[i] else x[i]
        np.testing.assert_allclose(bx[i], want / 255.0, rtol=1e-6)
    # shuffle: a permutation, the same for the same seed and epoch
    a = P.image.ImageDataGenerator().flow(x, y, batch_size=5, seed=3)
    b = P.image.ImageDataGenerator().flow(x, y, batch_size=5, seed=3)
    order = np.concatenate([a[0][1], a[1][1]])
    assert sorted(order.tolist()) == list(range(10)) and order.tolist() != list(range(10))
    assert np.concatenate([b[0][1], b[1][1]]).tolist() == order.tolist()
    a.on_epoch_end()
    assert np.concatenate([a[0][1], a[1][1]]).tolist() != order.tolist()
    # next() runs on endlessly, batch after batch
    batches = [next(b)[0].shape[0] for _ in range(3)]
    assert batches == [5, 5, 5]
    # validation_split: the first part is the validation subset
    split = P.image.ImageDataGenerator(validation_split=0.2)
    assert split.flow(x, y, subset="validation", shuffle=False, batch_size=10, ignore_class_split=True)[0][1].tolist() \
        == [0, 1]
    with pytest.raises(ValueError, match="classes"):  # Keras refuses a split that loses classes
        split.flow(x, y, subset="validation")
    assert split.flow(x, y, subset="training", shuffle=False, batch_size=10, ignore_class_split=True)[0][1].tolist() \
        == list(range(2, 10))
    with pytest.raises(ValueError, match="rank 4"):
        gen.flow(x[0], y[:4])


def test_image_data_generator_fit_and_standardize(P):
    rng = np.random.default_rng(1)
    x = rng.random((8, 3, 3, 2)).astype(np.float32)
    gen = P.image.ImageDataGenerator(featurewise_center=True, featurewise_std_normalization=True, rescale=2.0)
    gen.fit(x)
    np.testing.assert_allclose(gen.mean.ravel(), (2 * x).mean(axis=(0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(gen.std.ravel(), (2 * x - gen.mean).std(axis=(0, 1, 2)), rtol=1e-5)
    out = gen.standardize(x[0].copy())
    np.testing.assert_allclose(out, (2 * x[0] - gen.mean) / (gen.std + 1e-6), rtol=1e-5)
    sample = P.image.ImageDataGenerator(samplewise_center=True, samplewise_std_normalization=True)
    s = sample.standardize(x[1].copy())
    np.testing.assert_allclose(s, (x[1] - x[1].mean()) / (x[1].std() + 1e-6), rtol=1e-5)


def test_flow_trains_and_flow_from_directory(tnt, P, tmp_path):
    from PIL import Image
    k = tnt.keras
    rng = np.random.default_rng(2)
    for cls in ("cats", "dogs"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (6, 6, 3)).astype(np.uint8)).save(tmp_path / cls / f"{i}.png")
    gen = P.image.ImageDataGenerator(rescale=1 / 255.0, validation_split=1 / 3)
    train = gen.flow_from_directory(tmp_path, target_size=(4, 4), batch_size=2, subset="training", seed=1)
    assert train.samples == 4 and train.class_indices == {"cats": 0, "dogs": 1}
    assert train.filenames == ["cats/1.png", "cats/2.png", "dogs/1.png", "dogs/2.png"]
    bx, by = train[0]
    assert bx.shape == (2, 4, 4, 3) and by.shape == (2, 2) and bx.max() <= 1.0
    sparse = gen.flow_from_directory(tmp_path, target_size=(4, 4), class_mode="sparse", shuffle=False, subset="validation")
    assert sparse[0][1].tolist() == [0, 1]
    model = k.Sequential([k.layers.Flatten(input_shape=(4, 4, 3)), k.layers.Dense(2, activation="softmax")])
    model.compile("adam", "categorical_crossentropy")
    h = model.fit(train, epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2 and all(np.isfinite(h.history["loss"]))
