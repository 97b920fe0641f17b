"""Keras's image preprocessing layers (Resizing, CenterCrop, RandomCrop, RandomFlip,
RandomTranslation, RandomRotation, RandomZoom, RandomContrast, RandomBrightness) through the Keras API: a keras-io style data_augmentation Sequential
that fits, the identity at inference, Resizing against tf.image.resize's half-pixel bilinear
formula worked out here in NumPy, and configs that round-trip."""
import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def keras(tnt):
    return tnt.keras


def bilinear_half_pixel(x, th, tw):
    """tf.image.resize(method="bilinear", antialias=False) of x (n, h, w, c), from its formula"""
    def taps(n_in, n_out):
        src = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        lo = np.floor(src)
        frac = src - lo
        return (np.clip(lo, 0, n_in - 1).astype(int), np.clip(np.ceil(src), 0, n_in - 1).astype(int), frac)
    y0, y1, fy = taps(x.shape[1], th)
    x0, x1, fx = taps(x.shape[2], tw)
    fx = fx[None, None, :, None]
    top = x[:, y0][:, :, x0] * (1 - fx) + x[:, y0][:, :, x1] * fx
    bot = x[:, y1][:, :, x0] * (1 - fx) + x[:, y1][:, :, x1] * fx
    fy = fy[None, :, None, None]
    return top * (1 - fy) + bot * fy


def test_data_augmentation_model_fits(keras):
    layers = keras.layers
    rng = np.random.default_rng(0)
    data_augmentation = keras.Sequential([
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.1),
        layers.RandomZoom(0.1),
        layers.RandomTranslation(0.1, 0.1),
        layers.RandomContrast(0.2),
        layers.RandomBrightness(0.1),
    ])
    inputs = keras.Input(shape=(12, 12, 3))
    x = data_augmentation(inputs)
    x = layers.Rescaling(1.0 / 255)(x)
    x = layers.Conv2D(8, 3, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    # class 1: a bright image, class 0: a dark one (augmentation keeps the brightness)
    y = rng.integers(0, 2, 64)
    images = (rng.uniform(0, 100, (64, 12, 12, 3)) + 150 * y[:, None, None, None]).astype(np.float32)
    hist = model.fit(images, y.astype(np.float32), epochs=8, batch_size=16, verbose=0)
    losses = hist.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    # at inference the augmentation is the identity
    np.testing.assert_array_equal(data_augmentation.predict(images[:4], verbose=0), images[:4])
    # the architecture names Keras's classes and reads back
    arch = json.loads(model.to_json())
    assert "RandomZoom" in model.to_json() and arch["class_name"] in ("Functional", "Model")
    again = keras.models.model_from_json(model.to_json())
    assert again.predict(images[:2], verbose=0).shape == (2, 2)


def test_resizing_and_center_crop_values(keras):
    layers = keras.layers
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7, 9, 2)).astype(np.float32)
    m = keras.Sequential([keras.Input(shape=(7, 9, 2)), layers.Resizing(5, 4)])
    np.testing.assert_allclose(m.predict(x, verbose=0), bilinear_half_pixel(x.astype(np.float64), 5, 4),
                               rtol=1e-5, atol=1e-5)
    up = keras.Sequential([keras.Input(shape=(7, 9, 2)), layers.Resizing(10, 13)])
    np.testing.assert_allclose(up.predict(x, verbose=0), bilinear_half_pixel(x.astype(np.float64), 10, 13),
                               rtol=1e-5, atol=1e-5)
    crop = keras.Sequential([keras.Input(shape=(7, 9, 2)), layers.CenterCrop(3, 4)])
    np.testing.assert_array_equal(crop.predict(x, verbose=0), x[:, 2:5, 2:6, :])
    # RandomCrop at inference: the centered window of the target's aspect ratio (7 x 5 for 7 x 5
    # of 7 x 9: columns 2..6), resized
    rc = keras.Sequential([keras.Input(shape=(7, 9, 2)), layers.RandomCrop(4, 3, seed=1)])
    want = bilinear_half_pixel(x[:, :, 2:7, :].astype(np.float64), 4, 3)
    np.testing.assert_allclose(rc.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


def test_configs_and_bad_arguments(keras):
    layers = keras.layers
    zoom = layers.RandomZoom((-0.2, 0.3), fill_mode="constant", seed=5, name="z")
    cfg = zoom.get_config()
    assert cfg["fill_mode"] == "constant" and cfg["seed"] == 5 and cfg["width_factor"] is None
    assert layers.RandomZoom.from_config(cfg).get_config() == cfg
    m = keras.Sequential([keras.Input(shape=(6, 6, 1)), layers.RandomFlip("vertical"), layers.Resizing(3, 3)])
    assert m.output_shape == (None, 3, 3, 1)
    with pytest.raises(Exception, match="diagonal"):
        keras.Sequential([keras.Input(shape=(6, 6, 1)), layers.RandomFlip("diagonal")]).predict(
            np.zeros((1, 6, 6, 1), np.float32), verbose=0)
    with pytest.raises(Exception, match="expected"):
        keras.Sequential([keras.Input(shape=(6,)), layers.RandomRotation(0.1)]).predict(
            np.zeros((1, 6), np.float32), verbose=0)
