"""tf.data's padded_batch as the model sees it in fit: each batch padded to its own longest element
(padded_shapes None dimensions) or to the padded_shapes given, with padding_values (tf.data's
documented rule), also when the elements come from a Python generator and are shuffled first.
The reference is NumPy: each batch padded by hand and trained with train_on_batch."""
import numpy as np
import pytest

import tarantella as tnt
import tarantella.tensorflow as tf
from tarantella import keras

D = tf.data.Dataset
LENGTHS = [3, 7, 2, 5, 4, 6, 1, 8, 2, 3, 5]


def sequences(seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.integers(1, 9, size=(n, 2)).astype(np.float32) for n in LENGTHS]  # values >= 1: 0 is padding
    ys = np.array([float(x[:, 0].mean() > 4.5) for x in xs], np.float32)
    return xs, ys


def pad(batch, length, value=0.0):
    out = np.full((len(batch), length) + batch[0].shape[1:], value, np.float32)
    for i, s in enumerate(batch):
        out[i, :len(s)] = s
    return out


def generator_dataset(xs, ys):
    return D.from_generator(lambda: zip(xs, ys), output_signature=(tf.TensorSpec((None, 2), tf.float32),
                                                                   tf.TensorSpec((), tf.float32)))


def batches_seen(ds):
    """The batches the C pipeline gives fit (the dataset lowered for training)."""
    return [(np.array(x), np.array(y)) for x, y in ds._lower()]


def test_each_batch_is_padded_to_its_own_longest(tnt):
    xs, ys = sequences()
    seen = batches_seen(generator_dataset(xs, ys).padded_batch(4))
    assert [b[0].shape for b in seen] == [(4, 7, 2), (4, 8, 2), (3, 5, 2)]
    for k, (x, y) in enumerate(seen):
        np.testing.assert_array_equal(x, pad(xs[4 * k:4 * k + 4], x.shape[1]))
        np.testing.assert_array_equal(y, ys[4 * k:4 * k + 4])


def test_padded_shapes_and_padding_values(tnt):
    xs, ys = sequences()
    ds = generator_dataset(xs, ys).padded_batch(5, padded_shapes=([10, None], []), padding_values=(-1.0, 0.0),
                                                drop_remainder=True)
    seen = batches_seen(ds)
    assert len(seen) == 2
    for k, (x, _) in enumerate(seen):
        np.testing.assert_array_equal(x, pad(xs[5 * k:5 * k + 5], 10, -1.0))
    assert [b[0].shape for b in seen] == [b[0].shape for b in ds]  # as the Python iteration has them
    with pytest.raises(ValueError, match="more than the padded shape"):
        batches_seen(generator_dataset(xs, ys).padded_batch(4, padded_shapes=([6, None], [])))


def test_labels_padded_per_batch_and_shuffle_before(tnt):
    rng = np.random.default_rng(1)
    xs = [rng.integers(1, 9, size=n).astype(np.float32) for n in LENGTHS]
    ds = D.from_generator(lambda: ((x, x * 2) for x in xs), output_signature=(
        tf.TensorSpec((None,), tf.float32), tf.TensorSpec((None,), tf.float32)))
    seen = batches_seen(ds.shuffle(11, seed=3).padded_batch(3))
    assert sum(len(x) for x, _ in seen) == len(xs)
    for x, y in seen:
        lengths = (x > 0).sum(axis=1)
        assert x.shape[1] == lengths.max() and y.shape == x.shape  # each batch its own longest
        np.testing.assert_array_equal(y, 2 * x)


def length_sensitive_model(seed):
    """Global average pooling without a mask: the outputs depend on how far a batch is padded."""
    tf.random.set_seed(seed)
    inp = keras.Input(shape=(None, 2))
    h = keras.layers.Dense(5, activation="tanh")(inp)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.GlobalAveragePooling1D()(h))
    m = keras.Model(inp, out)
    m.compile(keras.optimizers.SGD(0.5), "binary_crossentropy")
    return m


def test_fit_equals_training_on_each_batch_padded_by_hand(tnt):
    xs, ys = sequences()
    model, reference = length_sensitive_model(4), length_sensitive_model(4)
    np.testing.assert_array_equal(model.get_weights()[0], reference.get_weights()[0])
    model.fit(generator_dataset(xs, ys).padded_batch(4), epochs=1, verbose=0, shuffle=False)
    for k in range(0, len(xs), 4):
        part = xs[k:k + 4]
        reference.train_on_batch(pad(part, max(len(s) for s in part)), ys[k:k + 4].reshape(-1, 1))
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    globally = length_sensitive_model(4)  # the old rule (every batch as long as the longest of all) differs
    for k in range(0, len(xs), 4):
        globally.train_on_batch(pad(xs[k:k + 4], max(LENGTHS)), ys[k:k + 4].reshape(-1, 1))
    assert np.abs(globally.get_weights()[0] - model.get_weights()[0]).max() > 1e-4


def test_predict_and_evaluate_on_padded_batches(tnt):
    xs, ys = sequences()
    model = length_sensitive_model(6)
    ds = generator_dataset(xs, ys).padded_batch(4)
    expected = np.concatenate([model.predict_on_batch(pad(xs[k:k + 4], max(len(s) for s in xs[k:k + 4])))
                               for k in range(0, len(xs), 4)])
    np.testing.assert_allclose(model.predict(ds, verbose=0), expected, rtol=1e-5, atol=1e-6)
    p = expected.reshape(-1).astype(np.float64)
    bce = -(ys * np.log(p) + (1 - ys) * np.log(1 - p))
    np.testing.assert_allclose(model.evaluate(ds, verbose=0), bce.mean(), rtol=1e-5)
    tf.random.set_seed(6)  # outputs per time step: one array cannot hold batches of other lengths
    inp = keras.Input(shape=(None, 2))
    per_step = keras.Model(inp, keras.layers.Dense(1)(inp))
    with pytest.raises(ValueError, match="gives outputs of shape"):
        per_step.predict(ds, verbose=0)


def test_map_after_padded_batch_and_arrays_padded_to_a_fixed_size(tnt):
    xs, ys = sequences()
    seen = batches_seen(generator_dataset(xs, ys).padded_batch(4).map(lambda x, y: (x * 2, y)).prefetch(2))
    assert [b[0].shape for b in seen] == [(4, 7, 2), (4, 8, 2), (3, 5, 2)]
    np.testing.assert_array_equal(seen[1][0], 2 * pad(xs[4:8], 8))
    arrays = D.from_tensor_slices((np.ones((6, 5, 2), np.float32), np.arange(6, dtype=np.float32)))
    seen = batches_seen(arrays.padded_batch(4, padded_shapes=([8, None], []), padding_values=(-3.0, 0.0)))
    assert [b[0].shape for b in seen] == [(4, 8, 2), (2, 8, 2)]
    np.testing.assert_array_equal(seen[0][0][:, 5:], -3.0)
    np.testing.assert_array_equal(seen[1][1], [4, 5])


def test_model_of_fixed_length_takes_batches_padded_to_it(tnt):
    """A model declared for sequences of one length (Keras 2 would run its layers on each batch's
    length after a warning): the padded batches come at the model's length."""
    xs, ys = sequences()

    def fixed(seed):
        tf.random.set_seed(seed)
        m = keras.Sequential([keras.layers.Masking(input_shape=(10, 2)), keras.layers.GRU(3),
                              keras.layers.Dense(1, activation="sigmoid")])
        m.compile(keras.optimizers.SGD(0.5), "binary_crossentropy")
        return m
    model, reference = fixed(9), fixed(9)
    h = model.fit(generator_dataset(xs, ys).padded_batch(4), epochs=1, verbose=0,
                  validation_data=generator_dataset(xs, ys).padded_batch(3))
    assert np.isfinite(h.history["val_loss"][0])
    for k in range(0, len(xs), 4):
        reference.train_on_batch(pad(xs[k:k + 4], 10), ys[k:k + 4].reshape(-1, 1))
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
