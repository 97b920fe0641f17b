"""tnt.keras.mixed_precision: Keras's global and per-layer dtype policies reach the library through
the model's config, and a mixed_bfloat16 model trains close to its float32 twin."""
import json
import os

import numpy as np
import pytest

import tarantella as tnt
from tarantella import keras


@pytest.fixture(autouse=True)
def float32_after():
    yield
    keras.mixed_precision.set_global_policy("float32")


def mlp(seed=3):
    inputs = keras.Input((20,))
    x = keras.layers.Dense(64, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seed=seed))(inputs)
    outputs = keras.layers.Dense(4, kernel_initializer=keras.initializers.GlorotUniform(seed=seed + 1))(x)
    return keras.Model(inputs, outputs)


def layer_policies(model):
    return {l["config"]["name"]: l["config"].get("dtype") for l in json.loads(model.to_json())["config"]["layers"]}


def test_policy_objects_and_errors():
    assert keras.mixed_precision.global_policy().name == "float32"
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    p = keras.mixed_precision.global_policy()
    assert (p.name, p.compute_dtype, p.variable_dtype) == ("mixed_bfloat16", "bfloat16", "float32")
    with pytest.raises(ValueError, match="mixed_float16"):
        keras.mixed_precision.set_global_policy("mixed_float16")
    with pytest.raises(ValueError, match="'float64'"):
        keras.layers.Dense(3, dtype="float64")


def test_global_policy_reaches_the_library_and_trains():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 20)).astype(np.float32)
    y = (x[:, :4] * 2.0).argmax(axis=1).astype(np.float32)
    results = {}
    for policy in ("float32", "mixed_bfloat16"):
        keras.mixed_precision.set_global_policy(policy)
        model = mlp()
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        pols = layer_policies(model)
        assert [v for k, v in pols.items() if k.startswith("dense")] == [policy, policy]
        assert model.layers[1].dtype_policy.name == policy and model.layers[1].dtype == "float32"
        start = model.evaluate(x, y, batch_size=32, verbose=0)
        hist = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
        results[policy] = (start, hist.history["loss"], model.predict(x, batch_size=64))
        assert all(w.dtype == np.float32 for w in model.get_weights())
    (s32, l32, p32), (s16, l16, p16) = results["float32"], results["mixed_bfloat16"]
    assert abs(s32 - s16) < 2e-2 * max(1.0, abs(s32))   # bf16 products: ~3 significant digits
    assert l16[-1] < s16 * 0.8                          # it trains
    assert np.allclose(l32, l16, rtol=5e-2, atol=1e-2)  # and follows float32
    assert np.abs(p32 - p16).max() < 0.1 * np.abs(p32).max()
    if keras.mixed_precision.native_bfloat16():
        assert not np.array_equal(p32, p16)            # the bf16 engine ran
    else:                                              # float32 engines, bit for bit
        assert np.array_equal(p32, p16) and l32 == l16 and s32 == s16


def test_per_layer_dtype_and_round_trip(tmp_path):
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, dtype="mixed_bfloat16", name="mixed")(inputs)
    out = keras.layers.Dense(2, name="plain")(h)
    model = keras.Model(inputs, out)
    assert layer_policies(model)["mixed"] == "mixed_bfloat16"
    assert layer_policies(model)["plain"] in (None, "float32")
    path = str(tmp_path / "m.keras")
    model.save(path)
    back = keras.models.load_model(path)
    pols = layer_policies(back)
    assert pols["mixed"] == "mixed_bfloat16" and pols["plain"] in (None, "float32")
    x = np.ones((4, 8), np.float32)
    assert np.allclose(model.predict(x, verbose=0), back.predict(x, verbose=0), atol=0)


def cpu_computes_bf16():
    """What the CPU and the ISA caps allow, read independently of the library."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    has = "avx512_bf16" in flags or "amx_bf16" in flags
    caps = [os.environ.get("ONEDNN_MAX_CPU_ISA", ""), os.environ.get("TNT_MAX_CPU_ISA", "")]
    below = {"avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni", "sse41", "avx", "avx512_mic", "avx512_mic_4ops"}
    return has and not any(c.lower() in below for c in caps)


def test_native_bfloat16_follows_the_cpu_and_the_caps():
    assert keras.mixed_precision.native_bfloat16() == cpu_computes_bf16()
