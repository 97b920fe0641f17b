"""Sequential and Functional models built in Python: every layer class of the library, Keras's
argument names, to_json round trips, graphs with several inputs and outputs, shared layers,
attention, nested models."""
import json
import os
import re

import numpy as np
import pytest

from conftest import REPO

# class -> (positional args, keyword args, input shape); the smallest sensible use of each
CASES = {
    "Dense": ((4,), {"activation": "relu"}, (6,)),
    "Conv2D": ((3, 3), {"padding": "same", "strides": 1}, (8, 8, 2)),
    "Conv1D": ((3, 2), {"padding": "causal"}, (10, 4)),
    "DepthwiseConv2D": ((3,), {"depth_multiplier": 2}, (8, 8, 2)),
    "SeparableConv2D": ((4, 3), {}, (8, 8, 2)),
    "Conv2DTranspose": ((3, 3), {"strides": 2}, (4, 4, 2)),
    "Conv1DTranspose": ((3, 3), {"strides": 2}, (5, 2)),
    "Conv3DTranspose": ((2, 2), {"strides": 2, "padding": "same"}, (2, 3, 3, 2)),
    "LocallyConnected1D": ((3, 2), {"activation": "softsign"}, (6, 2)),
    "LocallyConnected2D": ((2, 3), {"implementation": 2, "padding": "same", "activation": "mish"}, (4, 5, 2)),
    "MaxPooling2D": ((), {}, (8, 8, 2)),
    "AveragePooling2D": ((), {"pool_size": 3, "strides": 1, "padding": "same"}, (8, 8, 2)),
    "MaxPooling1D": ((), {}, (8, 3)),
    "AveragePooling1D": ((), {"pool_size": 3}, (8, 3)),
    "GlobalAveragePooling2D": ((), {}, (4, 4, 3)),
    "GlobalMaxPooling2D": ((), {}, (4, 4, 3)),
    "GlobalAveragePooling1D": ((), {}, (5, 3)),
    "GlobalMaxPooling1D": ((), {}, (5, 3)),
    "GlobalAveragePooling3D": ((), {}, (2, 3, 3, 2)),
    "GlobalMaxPooling3D": ((), {}, (2, 3, 3, 2)),
    "ZeroPadding2D": ((((1, 0), (2, 1)),), {}, (4, 4, 1)),
    "Cropping2D": ((1,), {}, (5, 5, 1)),
    "UpSampling2D": ((), {"size": (2, 3)}, (3, 3, 1)),
    "ZeroPadding1D": ((2,), {}, (4, 2)),
    "Cropping1D": (((1, 2),), {}, (6, 2)),
    "UpSampling1D": ((3,), {}, (4, 2)),
    "Flatten": ((), {}, (3, 4)),
    "Reshape": (((2, 6),), {}, (3, 4)),
    "Permute": (((2, 1),), {}, (3, 4)),
    "RepeatVector": ((3,), {}, (4,)),
    "Dropout": ((0.5,), {}, (6,)),
    "SpatialDropout1D": ((0.3,), {}, (5, 3)),
    "SpatialDropout2D": ((0.3,), {}, (4, 4, 3)),
    "GaussianNoise": ((0.1,), {}, (6,)),
    "GaussianDropout": ((0.2,), {}, (6,)),
    "AlphaDropout": ((0.2,), {}, (6,)),
    "ActivityRegularization": ((), {"l1": 0.01}, (6,)),
    "Activation": (("tanh",), {}, (6,)),
    "ReLU": ((), {"max_value": 6.0}, (6,)),
    "LeakyReLU": ((), {"alpha": 0.1}, (6,)),
    "ELU": ((), {}, (6,)),
    "ThresholdedReLU": ((), {"theta": 0.5}, (6,)),
    "PReLU": ((), {"shared_axes": [1]}, (3, 4)),
    "Softmax": ((), {}, (6,)),
    "BatchNormalization": ((), {"momentum": 0.9}, (4, 4, 3)),
    "SyncBatchNormalization": ((), {}, (4, 4, 3)),
    "LayerNormalization": ((), {"epsilon": 1e-5}, (5, 3)),
    "Embedding": ((10, 4), {}, (5,)),
    "Masking": ((), {"mask_value": 0.0}, (5, 3)),
    "Rescaling": ((1 / 255.0,), {}, (6,)),
    "LSTM": ((4,), {"return_sequences": True}, (5, 3)),
    "GRU": ((4,), {}, (5, 3)),
    "SimpleRNN": ((4,), {"go_backwards": True}, (5, 3)),
    "CuDNNLSTM": ((4,), {}, (5, 3)),
    "CuDNNGRU": ((4,), {}, (5, 3)),
}
MERGE = ["Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate"]


def registry_classes():
    with open(os.path.join(REPO, "src", "layers", "registry.c")) as f:
        return re.findall(r'X\("(\w+)", tnt__\w+_ops\)', f.read())


def test_every_registered_class_has_a_python_class(tnt):
    classes = registry_classes()
    assert len(classes) > 60
    missing = [c for c in classes if not hasattr(tnt.keras.layers, c)]
    assert not missing, missing
    for c in classes:
        assert getattr(tnt.keras.layers, c).class_name in classes


@pytest.mark.parametrize("cls", sorted(CASES))
def test_layer_builds_and_round_trips(tnt, cls):
    k = tnt.keras
    args, kwargs, shape = CASES[cls]
    layer = getattr(k.layers, cls)(*args, **kwargs)
    m = k.Sequential([k.Input(shape=shape), layer])
    js = m.to_json()
    back = k.models.model_from_json(js)
    assert back.to_json() == js
    assert back.layers[-1].class_name == cls
    cfg = layer.get_config()
    assert cfg["name"] == layer.name
    x = np.random.default_rng(0).uniform(0, 1, (2,) + shape).astype(np.float32)
    if cls == "Embedding":
        x = np.floor(x * 10)
    y = m.predict(x, verbose=0)
    assert y.shape[0] == 2 and np.all(np.isfinite(y))
    np.testing.assert_array_equal(back.predict(x, verbose=0).shape, y.shape)


def test_wrappers_and_merges(tnt):
    k, L = tnt.keras, tnt.keras.layers
    inp = k.Input(shape=(5, 3))
    a = L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="sum")(inp)
    b = L.TimeDistributed(L.Dense(4))(inp)
    outs = [getattr(L, c)()([a, b]) for c in MERGE]
    m = k.Model(inp, outs)
    assert [o.shape for o in outs][:6] == [(None, 5, 4)] * 6 and outs[6].shape == (None, 5, 8)
    assert m.output_shape[-1] == (None, 5, 8)
    p = m.predict(np.ones((3, 5, 3), np.float32), verbose=0)
    assert isinstance(p, list) and len(p) == 7 and p[6].shape == (3, 5, 8)
    np.testing.assert_allclose(p[0], p[5] + p[4], rtol=1e-5, atol=1e-6)  # a + b = min + max
    assert k.models.model_from_json(m.to_json()).to_json() == m.to_json()


def test_seq2seq_return_state_initial_state(tnt):
    """Keras's encoder-decoder: the encoder's states start the decoder (initial_state), the
    outputs of return_state and merge_mode=None are lists, tensor_index survives to_json."""
    k, L = tnt.keras, tnt.keras.layers
    enc_in, dec_in = k.Input(shape=(6, 3)), k.Input(shape=(4, 2))
    enc_out, h, c = L.LSTM(5, return_state=True, name="enc")(enc_in)
    assert h.shape == (None, 5) and c.shape == (None, 5)
    dec, _, _ = L.LSTM(5, return_sequences=True, return_state=True, name="dec")(dec_in, initial_state=[h, c])
    fw, bw = L.Bidirectional(L.GRU(3), merge_mode=None)(enc_in)
    assert fw.shape == bw.shape == (None, 3)
    out = L.Dense(2, activation="softmax")(dec)
    m = k.Model([enc_in, dec_in], [out, L.Concatenate()([fw, bw])])
    js = json.loads(m.to_json())
    dec_entry = [e for e in js["config"]["layers"] if e["name"] == "dec"][0]
    assert [r[:3] for r in dec_entry["inbound_nodes"][0]][1:] == [["enc", 0, 1], ["enc", 0, 2]]
    assert k.models.model_from_json(m.to_json()).to_json() == m.to_json()
    m.compile("adam", "mse")
    rng = np.random.default_rng(1)
    xe, xd = rng.standard_normal((16, 6, 3)), rng.standard_normal((16, 4, 2))
    y = np.stack([xd[..., 0] > 0, xd[..., 0] <= 0], -1).astype(np.float32)
    h = m.fit([xe, xd], [y, np.zeros((16, 6), np.float32)], batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    p = m.predict([xe, xd], verbose=0)
    assert p[0].shape == (16, 4, 2) and p[1].shape == (16, 6)


def test_functional_two_inputs_shared_layer_attention(tnt):
    k, L = tnt.keras, tnt.keras.layers
    q_in = k.Input(shape=(4, 8), name="query")
    v_in = k.Input(shape=(4, 8), name="value")  # a shared layer sees one input shape
    shared = L.Dense(8, name="shared")
    q, v = shared(q_in), shared(v_in)  # one layer, two calls: one set of weights
    att = L.MultiHeadAttention(num_heads=2, key_dim=4)(q, v)
    out = L.Dense(2, activation="softmax")(L.GlobalAveragePooling1D()(att))
    m = k.Model([q_in, v_in], out, name="two_inputs")
    assert [w.shape for w in m.get_layer("shared").weights] == [(8, 8), (8,)]
    js = json.loads(m.to_json())
    shared_entry = [e for e in js["config"]["layers"] if e["name"] == "shared"][0]
    assert len(shared_entry["inbound_nodes"]) == 2
    m.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    xq, xv = rng.standard_normal((32, 4, 8)), rng.standard_normal((32, 4, 8))
    y = (xq.mean(axis=(1, 2)) > 0).astype(np.float32)
    h = m.fit([xq, xv], y, batch_size=8, epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2
    p = m.predict([xq, xv], verbose=0)
    assert p.shape == (32, 2)
    np.testing.assert_allclose(m.predict_on_batch([xq[:4], xv[:4]]), p[:4], rtol=1e-5, atol=1e-6)


def test_nested_model_and_shapes(tnt):
    k, L = tnt.keras, tnt.keras.layers
    block = k.Sequential([L.Dense(6, activation="relu", input_shape=(4,)), L.Dense(6)], name="block")
    inp = k.Input(shape=(4,))
    x = block(inp)
    assert x.shape == (None, 6)
    out = L.Dense(1)(L.Concatenate()([x, inp]))
    m = k.Model(inp, out)
    assert m.output_shape == (None, 1)
    assert m.count_params() == 4 * 6 + 6 + 6 * 6 + 6 + 10 * 1 + 1
    with pytest.raises(ValueError, match="disconnected"):
        other = k.Input(shape=(4,))
        k.Model(inp, L.Add()([inp, other]))
    d = L.Dense(3)  # on data a layer runs at once, as Keras's eager call (issue 22)
    np.testing.assert_allclose(d(np.ones((2, 4))), np.ones((2, 4)) @ d.get_weights()[0] + d.get_weights()[1],
                               rtol=1e-6)


def test_sequential_forms(tnt):
    k, L = tnt.keras, tnt.keras.layers
    a = k.Sequential(name="by_add")
    a.add(L.Dense(5, input_shape=(3,)))
    a.add(L.Dense(2))
    b = k.Sequential([k.Input(shape=(3,)), L.Dense(5), L.Dense(2)])
    assert a.count_params() == b.count_params() == 3 * 5 + 5 + 5 * 2 + 2
    c = k.Sequential([L.Dense(5), L.Dense(2)])  # built from the data, as Keras does
    assert not c.built
    c.compile("sgd", "mse")
    c.fit(np.ones((8, 3)), np.zeros((8, 2)), batch_size=4, epochs=1, verbose=0)
    assert c.built and c.input_shape == (None, 3)
    a.compile("sgd", "mse")
    w = a.get_weights()
    a.add(L.Dense(1))  # the trained layers keep their weights
    for u, v in zip(a.get_weights()[:4], w):
        np.testing.assert_array_equal(u, v)
    a.pop()
    assert len(a.layers) == 2
    with pytest.raises(ValueError):
        k.Sequential([L.Flatten(input_shape=(3,)), L.Reshape((4,))])  # 3 values into 4


def test_keras_objects_in_configs(tnt):
    k, L = tnt.keras, tnt.keras.layers
    d = L.Dense(3, activation=k.activations.relu, kernel_initializer=k.initializers.HeNormal(),
                kernel_regularizer=k.regularizers.L2(1e-3), kernel_constraint=k.constraints.MaxNorm(2.0),
                input_shape=(4,))
    m = k.Sequential([d])
    cfg = [e for e in json.loads(m.to_json())["config"]["layers"] if e["class_name"] == "Dense"][0]["config"]
    assert cfg["activation"] == "relu"
    assert cfg["kernel_initializer"]["class_name"] == "HeNormal"
    assert cfg["kernel_regularizer"]["class_name"] in ("L2", "L1L2")
    assert cfg["kernel_constraint"]["class_name"] == "MaxNorm"
    defaults = L.Conv2D(4, 3).get_config()
    assert defaults["strides"] == [1, 1] and defaults["padding"] == "valid" and defaults["use_bias"] is True


def test_sequential_and_functional_agree(tnt):
    k, L = tnt.keras, tnt.keras.layers

    def layers():
        return [L.Conv2D(4, 3, padding="same", activation="relu"), L.MaxPooling2D(), L.Flatten(), L.Dense(3)]
    s = k.Sequential([k.Input(shape=(6, 6, 1))] + layers())
    x = inp = k.Input(shape=(6, 6, 1))
    for layer in layers():
        x = layer(x)
    f = k.Model(inp, x)
    for a, b in zip(s.get_weights(), f.get_weights()):
        np.testing.assert_array_equal(a, b)  # the same initialization: by position, not by name


def test_keras2_layer_submodules(tnt):
    """Keras 2 programs import layers from keras.layers' submodules (keras.layers.embeddings,
    keras.layers.recurrent, ...): the same classes under those names."""
    from tarantella.keras.layers.embeddings import Embedding
    from tarantella.keras.layers.advanced_activations import LeakyReLU
    from tarantella.keras.layers import recurrent
    import tarantella.keras.layers.convolutional as conv
    L = tnt.keras.layers
    assert Embedding is L.Embedding and LeakyReLU is L.LeakyReLU
    assert recurrent.LSTM is L.LSTM and conv.Conv2D is L.Conv2D


def test_identity_initializer(tnt):
    """Keras's Identity initializer (keras.initializers.Identity / "identity"): tf.eye(rows, cols),
    also rectangular; the config round-trips."""
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Dense(5, input_shape=(3,), kernel_initializer="identity"),
                      L.Dense(5, kernel_initializer=k.initializers.Identity(), bias_initializer="ones")])
    np.testing.assert_array_equal(m.get_weights()[0], np.eye(3, 5, dtype=np.float32))
    np.testing.assert_array_equal(m.get_weights()[2], np.eye(5, dtype=np.float32))
    np.testing.assert_allclose(m.predict(np.array([[1.0, 2.0, 3.0]]), verbose=0), [[2, 3, 4, 1, 1]])
    cfg = json.loads(m.to_json())["config"]["layers"]
    dense = [c for c in cfg if c["class_name"] == "Dense"][0]["config"]
    assert dense["kernel_initializer"]["class_name"] == "Identity"


def test_embedding_initializer(tnt):
    """Embedding's embeddings_initializer as Keras takes it (any initializer the library has), kept in
    the config; the default stays Keras's RandomUniform(-0.05, 0.05)."""
    k, L = tnt.keras, tnt.keras.layers
    m = k.Sequential([L.Embedding(6, 6, input_length=3, embeddings_initializer="identity"),
                      L.Embedding(6, 2, input_length=3, embeddings_initializer=k.initializers.Ones()),
                      L.Embedding(50, 8, input_length=3)])
    w = m.get_weights()
    np.testing.assert_array_equal(w[0], np.eye(6, dtype=np.float32))
    np.testing.assert_array_equal(w[1], np.ones((6, 2), np.float32))
    assert np.abs(w[2]).max() <= 0.05 and w[2].std() > 0.01
    cfg = [c["config"] for c in json.loads(m.to_json())["config"]["layers"] if c["class_name"] == "Embedding"]
    assert [c["embeddings_initializer"]["class_name"] for c in cfg] == ["Identity", "Ones", "RandomUniform"]
    x = np.array([[0, 2, 5]], np.float32)  # the identity table gives the one-hot rows
    np.testing.assert_array_equal(k.Sequential([m.layers[0]]).predict(x, verbose=0)[0], np.eye(6)[[0, 2, 5]])
