"""keras.applications: parameter counts equal Keras's documented ones, the layer names and weight
arrays per layer are Keras's, ResNet50's forward equals an independent PyTorch rebuild, each
architecture predicts and trains on a small input, ImageNet weights come from Keras's cache
folder (and their absence names the file), preprocess_input's modes follow Keras's formulas."""
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F


# Keras's documented parameter counts (keras.io/api/applications, 1000 classes, default input)
DOCUMENTED = {"ResNet50": 25_636_712, "ResNet101": 44_707_176, "MobileNetV2": 3_538_984,
              "DenseNet121": 8_062_504, "EfficientNetB0": 5_330_571}


@pytest.mark.parametrize("arch", sorted(DOCUMENTED))
def test_documented_parameter_counts(tnt, arch):
    m = getattr(tnt.keras.applications, arch)(weights=None)
    assert m.count_params() == DOCUMENTED[arch]


def test_vgg16_parameter_count_and_layers(tnt):
    m = tnt.keras.applications.VGG16(weights=None)
    assert m.count_params() == 138_357_544
    names = [layer.name for layer in m.layers]
    assert names[:4] == ["input_1", "block1_conv1", "block1_conv2", "block1_pool"] or names[1:4] == [
        "block1_conv1", "block1_conv2", "block1_pool"]
    assert names[-4:] == ["flatten", "fc1", "fc2", "predictions"]
    assert m.get_layer("fc1").get_weights()[0].shape == (25088, 4096)


def test_keras_weight_arrays_per_layer(tnt):
    """Keras's ResNet50 has 320 weight arrays (53 convolutions with bias, 53 batch norms of four,
    the classifier's two) and MobileNetV2 262 (52 convolutions without bias, 52 batch norms, 2)."""
    apps = tnt.keras.applications
    r = apps.ResNet50(weights=None, input_shape=(32, 32, 3), include_top=False)
    assert len(r.weights) == 318
    bn = r.get_layer("conv2_block1_1_bn").weights
    assert [w.name.split("/")[-1].split(":")[0] for w in bn] == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert [w.shape for w in r.get_layer("conv4_block6_3_conv").weights] == [(1, 1, 256, 1024), (1024,)]
    assert r.layers[-1].name == "conv5_block3_out"
    m = apps.MobileNetV2(weights=None)
    assert len(m.weights) == 262
    assert [w.shape for w in m.get_layer("block_13_depthwise").weights] == [(3, 3, 576, 1)]
    assert m.get_layer("block_16_project").get_weights()[0].shape == (1, 1, 960, 320)
    assert m.name == "mobilenetv2_1.00_224"


def _torch_resnet50_notop(model, x):
    """ResNet50 v1 (no top) in PyTorch from the model's weights: Keras's 'same' 3x3 stride 1 is a
    symmetric pad of 1; batch norm in inference, epsilon 1.001e-5."""
    def conv(name, t, stride=1, pad=0):
        k, b = model.get_layer(name).get_weights()
        return F.conv2d(t, torch.tensor(k).permute(3, 2, 0, 1), torch.tensor(b), stride=stride, padding=pad)

    def bn(name, t):
        g, b, mean, var = (torch.tensor(a) for a in model.get_layer(name).get_weights())
        return F.batch_norm(t, mean, var, g, b, training=False, eps=1.001e-5)

    t = torch.tensor(x).permute(0, 3, 1, 2)
    t = F.relu(bn("conv1_bn", conv("conv1_conv", F.pad(t, (3, 3, 3, 3)), stride=2)))
    t = F.max_pool2d(F.pad(t, (1, 1, 1, 1)), 3, stride=2)
    for stage, (blocks, first_stride) in enumerate(((3, 1), (4, 2), (6, 2), (3, 2)), start=2):
        for b in range(1, blocks + 1):
            p, s = f"conv{stage}_block{b}", first_stride if b == 1 else 1
            short = bn(f"{p}_0_bn", conv(f"{p}_0_conv", t, stride=s)) if b == 1 else t
            y = F.relu(bn(f"{p}_1_bn", conv(f"{p}_1_conv", t, stride=s)))
            y = F.relu(bn(f"{p}_2_bn", conv(f"{p}_2_conv", y, pad=1)))
            t = F.relu(short + bn(f"{p}_3_bn", conv(f"{p}_3_conv", y)))
    return t.mean(dim=(2, 3)).numpy()


def test_resnet50_forward_equals_pytorch(tnt):
    m = tnt.keras.applications.ResNet50(weights=None, include_top=False, pooling="avg", input_shape=(48, 48, 3))
    rng = np.random.default_rng(0)
    ws = m.get_weights()  # batch norms with non-trivial statistics, so inference normalizes for real
    info = [w.name for w in m.weights]
    for i, name in enumerate(info):
        if "moving_mean" in name:
            ws[i] = rng.normal(0, 0.1, ws[i].shape).astype(np.float32)
        elif "moving_variance" in name:
            ws[i] = rng.uniform(0.5, 1.5, ws[i].shape).astype(np.float32)
    m.set_weights(ws)
    x = rng.uniform(0, 1, (2, 48, 48, 3)).astype(np.float32)
    got = m.predict(x, verbose=0)
    want = _torch_resnet50_notop(m, x)
    assert got.shape == (2, 2048)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("arch", ["ResNet50", "MobileNetV2", "VGG16", "DenseNet121", "EfficientNetB0"])
def test_small_input_predicts_and_trains(tnt, arch):
    k = tnt.keras
    m = getattr(k.applications, arch)(weights=None, input_shape=(32, 32, 3), classes=3)
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (16, 32, 32, 3)).astype(np.float32)
    y = k.utils.to_categorical(rng.integers(0, 3, 16), 3)
    p = m.predict(x, verbose=0)
    assert p.shape == (16, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    m.compile(optimizer=k.optimizers.SGD(0.01), loss="categorical_crossentropy")
    before = m.get_layer("predictions").get_weights()[0].copy()
    h = m.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    assert not np.array_equal(before, m.get_layer("predictions").get_weights()[0])


def test_input_tensor_and_pooling(tnt):
    k = tnt.keras
    inp = k.Input(shape=(48, 48, 3))
    base = k.applications.MobileNetV2(weights=None, include_top=False, input_tensor=inp, pooling="max")
    assert base.output_shape == (None, 1280)
    assert base.input_shape == (None, 48, 48, 3)
    base2 = k.applications.ResNet50(weights=None, include_top=False)  # any side, as Keras's (None, None, 3)
    assert base2.input_shape == (None, None, None, 3)
    assert base2.predict(np.zeros((1, 40, 40, 3), np.float32), verbose=0).shape == (1, 2, 2, 2048)


def test_argument_errors(tnt):
    apps = tnt.keras.applications
    with pytest.raises(ValueError, match="classes` should be 1000"):
        apps.ResNet50(weights="imagenet", classes=10)
    with pytest.raises(ValueError, match="weights"):
        apps.VGG16(weights="no/such/file.h5")
    with pytest.raises(ValueError, match="at least 32x32"):
        apps.ResNet50(weights=None, include_top=False, input_shape=(16, 16, 3))
    with pytest.raises(ValueError, match="static `input_shape`"):
        apps.VGG19(weights=None, input_shape=(None, None, 3))


def _write_keras_weights_h5(model, path, values):
    """A Keras 2 weights file (h5py): attributes layer_names, per layer weight_names, datasets
    named layer/weight:0, layers in the model's order (Keras loads by topology)."""
    import h5py
    by_layer = {}
    for w, v in zip(model.weights, values):
        layer = w.name.split("/")[0]
        by_layer.setdefault(layer, []).append((w.name if ":" in w.name else w.name + ":0", v))
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = np.array([layer.name.encode() for layer in model.layers])
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.11.0"
        for layer in model.layers:
            g = f.create_group(layer.name)
            entries = by_layer.get(layer.name, [])
            g.attrs["weight_names"] = np.array([n.encode() for n, _ in entries])
            for n, v in entries:
                g.create_dataset(n, data=v)


def test_imagenet_weights_from_the_cache_folder(tnt, tmp_path, monkeypatch):
    k = tnt.keras
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    file = "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_96.h5"
    with pytest.raises(FileNotFoundError, match=file) as e:
        k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35)
    assert os.path.join(str(tmp_path), "models", file) in str(e.value)
    ref = k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None)
    rng = np.random.default_rng(2)
    values = [rng.normal(0, 1, w.shape).astype(np.float32) for w in ref.get_weights()]
    os.makedirs(tmp_path / "models")
    _write_keras_weights_h5(ref, str(tmp_path / "models" / file), values)
    m = k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35)
    for got, want in zip(m.get_weights(), values):
        np.testing.assert_array_equal(got, want)
    path = str(tmp_path / "w.h5")
    _write_keras_weights_h5(ref, path, values)
    m2 = k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=path)  # a weights file
    np.testing.assert_array_equal(m2.get_weights()[5], values[5])


def test_preprocess_input_modes(tnt):
    apps = tnt.keras.applications
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 255, (2, 4, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(apps.mobilenet_v2.preprocess_input(x.copy()), x / 127.5 - 1, rtol=1e-6)
    caffe = x[..., ::-1] - np.array([103.939, 116.779, 123.68], np.float32)
    np.testing.assert_allclose(apps.resnet50.preprocess_input(x.copy()), caffe, rtol=1e-6)
    np.testing.assert_allclose(apps.vgg16.preprocess_input(x.copy()), caffe, rtol=1e-6)
    torch_mode = (x / 255 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(apps.densenet.preprocess_input(x.copy()), torch_mode, rtol=1e-5)
    first = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(apps.resnet.preprocess_input(first.copy(), data_format="channels_first"),
                               caffe.transpose(0, 3, 1, 2), rtol=1e-6)
    # inside a model, on symbolic tensors, the same numbers
    k = tnt.keras
    inp = k.Input(shape=(4, 4, 3))
    m = k.Model(inp, apps.resnet50.preprocess_input(inp))
    np.testing.assert_allclose(m.predict(x, verbose=0), caffe, rtol=1e-5, atol=1e-4)
    m = k.Model(inp, apps.mobilenet_v2.preprocess_input(inp))
    np.testing.assert_allclose(m.predict(x, verbose=0), x / 127.5 - 1, rtol=1e-5, atol=1e-6)


def test_decode_predictions(tnt, tmp_path, monkeypatch):
    import json
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    from tarantella.keras.applications import imagenet_utils
    monkeypatch.setattr(imagenet_utils, "_CLASS_INDEX", None)
    preds = np.zeros((2, 1000), np.float32)
    preds[0, [7, 3, 900]] = [0.5, 0.3, 0.2]
    preds[1, 42] = 1.0
    with pytest.raises(FileNotFoundError, match="imagenet_class_index.json"):
        tnt.keras.applications.vgg16.decode_predictions(preds)
    os.makedirs(tmp_path / "models")
    with open(tmp_path / "models" / "imagenet_class_index.json", "w") as f:
        json.dump({str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}, f)
    top = tnt.keras.applications.resnet50.decode_predictions(preds, top=3)
    assert [r[1] for r in top[0]] == ["class_7", "class_3", "class_900"]
    assert top[1][0][:2] == ("n00000042", "class_42") and top[1][0][2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        tnt.keras.applications.resnet50.decode_predictions(preds[:, :10])


def test_feature_extractor_of_every_layer(tnt):
    """The functional API guide's feature extraction: a model whose outputs are every layer's
    output (19 here: more than the 8 outputs models had before); each equals its layer's output."""
    k = tnt.keras
    vgg = k.applications.VGG16(weights=None, include_top=False, input_shape=(32, 32, 3))
    features = k.Model(inputs=vgg.input, outputs=[layer.output for layer in vgg.layers])
    x = np.random.default_rng(4).uniform(0, 1, (2, 32, 32, 3)).astype(np.float32)
    outs = features.predict(x, verbose=0)
    assert len(outs) == len(vgg.layers) == 19
    np.testing.assert_allclose(outs[0], x)
    np.testing.assert_allclose(outs[-1], vgg.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    k1, b1 = vgg.get_layer("block1_conv1").get_weights()
    first = F.relu(F.conv2d(torch.tensor(x).permute(0, 3, 1, 2), torch.tensor(k1).permute(3, 2, 0, 1),
                            torch.tensor(b1), padding=1)).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(outs[1], first, rtol=1e-4, atol=1e-5)
