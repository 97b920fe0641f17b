"""KerasHub's PositionEmbedding from Python (tarantella.keras_hub.layers, also keras.layers): the
embeddings broadcast over the batch against NumPy, one SGD step of its gradient, the Keras JSON."""
import json
import zipfile

import numpy as np


def test_position_embedding(tnt, tmp_path):
    k = tnt.keras
    assert tnt.keras_hub.layers.PositionEmbedding is k.layers.PositionEmbedding
    inp = k.Input((6, 4))
    out = k.layers.Add()([inp, tnt.keras_hub.layers.PositionEmbedding(sequence_length=9, name="pos")(inp)])
    m = k.Model(inp, out)
    (w,) = m.get_weights()
    assert w.shape == (9, 4)
    limit = np.sqrt(6.0 / (9 + 4))  # glorot_uniform, KerasHub's default
    assert 0 < np.abs(w).max() <= limit
    x = np.random.default_rng(3).normal(size=(5, 6, 4)).astype(np.float32)
    y = m.predict(x, verbose=0)
    np.testing.assert_array_equal(y, x + w[:6])
    # one SGD step on the mean squared error to zeros: dL/dP[:6] = sum over the batch of 2 y / (5 * 6 * 4)
    m.compile(optimizer=k.optimizers.SGD(learning_rate=0.5), loss="mse")
    m.fit(x, np.zeros_like(x), batch_size=5, epochs=1, shuffle=False, verbose=0)
    want = w.astype(np.float64).copy()
    want[:6] -= 0.5 * (2.0 * (x + w[:6]).astype(np.float64) / (5 * 6 * 4)).sum(axis=0)
    np.testing.assert_allclose(m.get_weights()[0], want, rtol=1e-5, atol=1e-6)
    # the Keras config, and a model read back from it
    cfg = json.loads(m.to_json())
    (layer,) = [e for e in cfg["config"]["layers"] if e["class_name"] == "PositionEmbedding"]
    assert layer["config"]["sequence_length"] == 9
    back = k.models.model_from_json(m.to_json())
    back.set_weights(m.get_weights())
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    # a .keras file: KerasHub's module and registered name on the entry, Keras 3's initializer object
    path = str(tmp_path / "posemb.keras")
    m.save(path)
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read("config.json"))
    (layer,) = [e for e in cfg["config"]["layers"] if e["class_name"] == "PositionEmbedding"]
    assert layer["module"] == "keras_hub.src.layers.modeling.position_embedding"
    assert layer["registered_name"] == "keras_hub>PositionEmbedding"
    init = layer["config"]["initializer"]
    assert (init["module"], init["class_name"], init["registered_name"]) == ("keras.initializers", "GlorotUniform", None)
    loaded = k.models.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))
