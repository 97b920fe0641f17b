"""Models as Keras has them (Keras 2.11 documentation): model(x) as a tensor, isinstance of a
tnt.Model, train/test_on_batch, metrics, inputs/outputs of a Sequential (feature extractors),
compute_output_shape, input_spec, get_config/from_config/model_from_config/clone_model, Input with
None dimensions, layer keywords as Keras takes them, loss_weights, Keras 2's ignored arguments."""
import warnings

import numpy as np
import pytest

from conftest import small_mlp, toy_data


def test_call_returns_a_tensor(tnt):
    m = small_mlp(tnt)
    x, _ = toy_data(4)
    t = m(x)
    assert t.shape == (4, 3) and t.dtype == np.float32
    assert isinstance(t.numpy(), np.ndarray) and type(t.numpy()) is np.ndarray
    np.testing.assert_array_equal(np.asarray(t), m.predict(x, verbose=0))
    assert float(np.sum(t, axis=1)[0]) == pytest.approx(1.0, rel=1e-5)  # softmax rows, via NumPy
    assert (t * 2).numpy().shape == (4, 3)


def test_isinstance_of_a_parallel_model(tnt):
    k = tnt.keras
    m = small_mlp(tnt)
    p = tnt.Model(m)
    assert isinstance(p, k.Model) and isinstance(p, k.Sequential) and isinstance(p, tnt.Model)
    inp = k.Input((3,))
    f = tnt.Model(k.Model(inp, k.layers.Dense(2)(inp)))
    assert isinstance(f, k.Model) and not isinstance(f, k.Sequential)
    assert not isinstance(object(), k.Model)


def test_train_and_test_on_batch(tnt):
    k = tnt.keras
    x, y = toy_data(16)
    m = small_mlp(tnt)
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    before = m.evaluate(x, y, verbose=0)
    out = m.train_on_batch(x, y)
    assert len(out) == 2 and out[0] == pytest.approx(before[0], rel=1e-5)  # the loss before the step
    assert m.optimizer.iterations == 1
    logs = m.test_on_batch(x, y, return_dict=True)
    assert logs == pytest.approx(dict(zip(["loss", "accuracy"], m.evaluate(x, y, verbose=0))))
    assert [mt.name for mt in m.metrics] == ["loss", "accuracy"]
    assert m.metrics[0].result() == pytest.approx(logs["loss"])
    np.testing.assert_allclose(m.predict_on_batch(x), m.predict(x, verbose=0), rtol=1e-6)


def test_sequential_graph_makes_feature_extractors(tnt):
    k = tnt.keras
    m = k.Sequential([k.layers.Dense(5, activation="relu", input_shape=(4,), name="hidden"),
                      k.layers.Dense(2, name="head")])
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    assert m.input.shape == (None, 4) and m.output.shape == (None, 2)
    feat = k.Model(inputs=m.input, outputs=m.get_layer("hidden").output)
    w, b = m.get_layer("hidden").get_weights()
    np.testing.assert_allclose(feat.predict(x, verbose=0), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_shapes_specs_and_switches(tnt):
    k = tnt.keras
    m = small_mlp(tnt)
    assert m.compute_output_shape((7, 8)) == (7, 3)
    assert m.input_spec.shape == (None, 8)
    m.run_eagerly = False
    assert m.run_eagerly is False and m.stateful is False and m.reset_states() is None
    assert m.losses == []


def test_config_round_trips(tnt):
    k = tnt.keras
    inp = k.Input((6,), name="x_in")
    out = k.layers.Dense(2, name="d")(k.layers.Dense(4, activation="tanh", name="h")(inp))
    f = k.Model(inp, out, name="fm")
    for cfg in (f.get_config(), {"class_name": "Functional", "config": f.get_config()}):
        g = k.models.model_from_config(cfg)
        assert [l.name for l in g.layers] == [l.name for l in f.layers] and g.count_params() == f.count_params()
    g = k.Model.from_config(f.get_config())
    assert g.output_shape == (None, 2)
    s = small_mlp(tnt)
    s2 = k.Sequential.from_config(s.get_config())
    assert isinstance(s2, k.Sequential) and s2.count_params() == s.count_params()
    assert k.models.model_from_config(s.get_config()).count_params() == s.count_params()
    c = k.models.clone_model(f)
    assert c.count_params() == f.count_params()
    # an independent model: training the clone leaves the original as it was
    before = f.get_weights()
    c.compile("sgd", "mse")
    c.fit(np.ones((4, 6), np.float32), np.ones((4, 2), np.float32), verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, f.get_weights()))


def test_input_with_none_dimensions(tnt):
    k = tnt.keras
    inp = k.Input(shape=(None, 4))
    out = k.layers.Dense(3, activation="softmax")(k.layers.GRU(5, return_sequences=True)(inp))
    m = k.Model(inp, out)
    assert m.input_shape == (None, None, 4) and out.shape == (None, None, 3)
    m.compile("adam", "sparse_categorical_crossentropy", metrics=["acc"])
    rng = np.random.default_rng(1)
    h = m.fit(rng.standard_normal((8, 6, 4)).astype(np.float32), rng.integers(0, 3, (8, 6)).astype(np.float32),
              epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0]) and "acc" in h.history
    assert m.predict(rng.standard_normal((2, 9, 4)).astype(np.float32), verbose=0).shape == (2, 9, 3)
    assert m(rng.standard_normal((1, 3, 4)).astype(np.float32)).shape == (1, 3, 3)


def test_layer_keywords_as_keras_takes_them(tnt):
    k = tnt.keras
    e = k.layers.Embedding(input_dim=20, output_dim=4, input_length=5)
    m = k.Sequential([e, k.layers.Flatten(), k.layers.Dense(1)])
    assert m.input_shape == (None, 5) and e.get_weights()[0].shape == (20, 4)
    assert k.layers.Dense(3, input_dim=7).get_config()["batch_input_shape"] == [None, 7]
    assert k.layers.LeakyReLU(negative_slope=0.2).get_config()["alpha"] == 0.2  # Keras 3's name
    r = k.Sequential([k.Input((5, 3)), k.layers.LSTM(4, seed=3, use_cudnn=False), k.layers.Dense(1)])  # Keras 3
    assert r.output_shape == (None, 1)


def test_loss_weights_and_ignored_keras2_arguments(tnt):
    k = tnt.keras
    inp = k.Input((4,))
    h = k.layers.Dense(6, activation="tanh")(inp)
    a = k.layers.Dense(2, name="a")(h)
    b = k.layers.Dense(2, name="b")(h)
    m = k.Model(inp, [a, b])
    rng = np.random.default_rng(2)
    x = rng.standard_normal((10, 4)).astype(np.float32)
    ya, yb = rng.standard_normal((10, 2)).astype(np.float32), rng.standard_normal((10, 2)).astype(np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.compile("sgd", "mse", loss_weights={"a": 1.0, "b": 0.25}, experimental_run_tf_function=False)
        m.compile("sgd", ["mse", "mse"], loss_weights=[1.0, 0.25], experimental_run_tf_function=False)
    assert sum("experimental_run_tf_function" in str(x.message) for x in w) == 1  # one warning
    logs = m.evaluate(x, [ya, yb], verbose=0, return_dict=True)
    pa, pb = m.predict(x, verbose=0)
    la, lb = np.mean((pa - ya) ** 2), np.mean((pb - yb) ** 2)
    assert logs["a_loss"] == pytest.approx(la, rel=1e-5) and logs["b_loss"] == pytest.approx(lb, rel=1e-5)
    assert logs["loss"] == pytest.approx(la + 0.25 * lb, rel=1e-5)
    with pytest.raises(TypeError, match="no_such_argument"):
        m.compile("sgd", "mse", no_such_argument=1)
    with pytest.raises(ValueError, match="nope"):
        m.compile("sgd", "mse", loss_weights={"nope": 1.0})


def test_tarantella_api_as_documented(tnt, tmp_path):
    """Tarantella 0.9's documentation: tnt.ParallelStrategy, tnt.Model(model, parallel_strategy=),
    tnt.models.* giving tnt.Model objects, tnt.Model.from_config, to_yaml/model_from_yaml, the
    Callback wrapper's flags, predict on the master rank only (root_rank)."""
    k = tnt.keras
    x, y = toy_data(24)
    m = tnt.Model(small_mlp(tnt), parallel_strategy=tnt.ParallelStrategy.DATA)
    with pytest.raises(NotImplementedError, match="PIPELINING"):
        tnt.Model(small_mlp(tnt), parallel_strategy=tnt.ParallelStrategy.PIPELINING)
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    cb = k.callbacks.Callback(k.callbacks.History(), aggregate_logs=False, run_on_all_ranks=False)
    assert cb.aggregate_logs is False and cb.run_on_all_ranks is False
    m.fit(x, y, epochs=1, verbose=0, callbacks=[cb], tnt_micro_batch_size=4, tnt_distribute_dataset=True)
    path = str(tmp_path / "m.h5")
    tnt.models.save_model(m, path)
    for other in (tnt.models.load_model(path), tnt.models.model_from_json(m.to_json()),
                  tnt.models.model_from_config(m.get_config()), tnt.models.clone_model(m),
                  tnt.Model.from_config(m.get_config()), tnt.models.model_from_yaml(m.to_yaml())):
        assert isinstance(other, tnt.Model) and isinstance(other, k.Sequential)
        assert other.count_params() == m.count_params()
    np.testing.assert_allclose(tnt.models.load_model(path).predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)
    assert m.predict(x, verbose=0, root_rank=0).shape == (24, 3)  # one rank: the master has every row
    with pytest.raises(NotImplementedError, match="root_rank"):
        m.predict(x, root_rank=1)


def mixed_model(k):
    inp = k.Input((4,))
    h = k.layers.Dense(6, activation="tanh")(inp)
    cls = k.layers.Dense(3, activation="softmax", name="cls")(h)
    reg = k.layers.Dense(2, name="reg")(h)
    return k.Model(inp, [cls, reg])


def test_a_loss_per_output(tnt, tmp_path):
    import objectives_ref as R
    k = tnt.keras
    rng = np.random.default_rng(4)
    x = rng.standard_normal((12, 4)).astype(np.float32)
    yc, yr = rng.integers(0, 3, 12).astype(np.float32), rng.standard_normal((12, 2)).astype(np.float32)
    for loss in ({"reg": "mse", "cls": "sparse_categorical_crossentropy"},
                 ["sparse_categorical_crossentropy", k.losses.MeanAbsoluteError()]):
        m = mixed_model(k)
        metrics = {"reg": "mae"} if isinstance(loss, dict) else [[], ["mae"]]  # per output, as Keras takes them
        m.compile("sgd", loss=loss, loss_weights=[1.0, 0.5], metrics=metrics)
        pc, pr = (p.astype(np.float64) for p in m.predict(x, verbose=0))
        logs = m.evaluate(x, [yc, yr], verbose=0, return_dict=True)
        lc = R.sparse_categorical_crossentropy(yc, pc).mean()
        lr = (R.mean_squared_error if isinstance(loss, dict) else R.mean_absolute_error)(yr, pr).mean()
        assert logs["cls_loss"] == pytest.approx(lc, rel=1e-5) and logs["reg_loss"] == pytest.approx(lr, rel=1e-5)
        assert logs["loss"] == pytest.approx(lc + 0.5 * lr, rel=1e-5)
        assert logs["reg_mae"] == pytest.approx(np.abs(pr - yr).mean(), rel=1e-5) and "cls_mae" not in logs
        assert m.metrics_names == ["loss", "cls_loss", "reg_loss", "reg_mae"]
    h = m.fit(x, [yc, yr], epochs=2, verbose=0)
    assert np.all(np.isfinite(h.history["loss"]))
    path = str(tmp_path / "mixed.h5")
    m.save(path)
    back = k.models.load_model(path)
    assert back.evaluate(x, [yc, yr], verbose=0) == pytest.approx(m.evaluate(x, [yc, yr], verbose=0), rel=1e-6)
    with pytest.raises(ValueError, match="not outputs"):
        mixed_model(k).compile("sgd", loss={"nope": "mse", "cls": "mse", "reg": "mse"})


@pytest.mark.parametrize("shapes,axes", [(((5,), (5,)), 1), (((3, 5), (4, 5)), 2), (((5, 3), (5, 4)), 1),
                                         (((3, 5), (5, 4)), (2, 1)), (((3, 5), (5,)), (-1, -1)),
                                         (((5,), (4, 5)), (1, 2))])
@pytest.mark.parametrize("normalize", [False, True])
def test_dot_layer_matches_batch_dot(tnt, shapes, axes, normalize):
    """keras.layers.Dot against NumPy's batch_dot (with l2_normalize along the axes), and its
    gradient against central differences of the loss."""
    k = tnt.keras
    a_in, b_in = k.Input(shapes[0]), k.Input(shapes[1])
    pa = k.layers.Dense(shapes[0][-1], name="pa")(a_in)
    pb = k.layers.Dense(shapes[1][-1], name="pb")(b_in)
    out = k.layers.Dot(axes=axes, normalize=normalize)([pa, pb])
    m = k.Model([a_in, b_in], out)
    rng = np.random.default_rng(3)
    xa = rng.standard_normal((4,) + shapes[0]).astype(np.float32)
    xb = rng.standard_normal((4,) + shapes[1]).astype(np.float32)
    wa, ba = m.get_layer("pa").get_weights()
    wb, bb = m.get_layer("pb").get_weights()
    A, B = xa @ wa + ba, xb @ wb + bb
    ax = axes if isinstance(axes, tuple) else (axes, axes)
    ra, rb = [(x if x > 0 else len(s) + 1 + x) - 1 for x, s in zip(ax, shapes)]
    if normalize:
        A = A / np.sqrt(np.maximum((A * A).sum(axis=ra + 1, keepdims=True), 1e-12))
        B = B / np.sqrt(np.maximum((B * B).sum(axis=rb + 1, keepdims=True), 1e-12))
    want = np.stack([np.tensordot(A[i], B[i], axes=(ra, rb)) for i in range(4)]).reshape(4, -1)
    got = m.predict([xa, xb], verbose=0)
    np.testing.assert_allclose(got.reshape(4, -1), want, rtol=1e-5, atol=1e-6)
    assert m.output_shape == (None,) + (got.shape[1:])
    # gradient: one SGD step (lr 1) moves pb's bias by minus the gradient of the mse loss
    y = rng.standard_normal(got.shape).astype(np.float32)
    m.compile(k.optimizers.SGD(1.0), "mse")
    w0 = m.get_weights()
    idx = [i for i, (n, _) in enumerate(m._handle().weights_info()) if n.startswith("pb/") and "bias" in n][0]
    fd = np.zeros(w0[idx].shape)
    for j in range(fd.size):
        vals = []
        for sgn in (1, -1):
            w = [a.copy() for a in w0]
            w[idx].flat[j] += sgn * 1e-3
            m.set_weights(w)
            vals.append(m.evaluate([xa, xb], y, batch_size=4, verbose=0))
        fd.flat[j] = (vals[0] - vals[1]) / 2e-3
    m.set_weights(w0)
    m.fit([xa, xb], y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(w0[idx] - m.get_weights()[idx], fd, rtol=2e-2, atol=2e-3)


def test_feature_extractor_from_a_loaded_model(tnt, tmp_path):
    """A model read from a file has Keras's graph: Model(loaded.input, loaded.get_layer(...).output)
    computes the intermediate layer with the loaded weights (Sequential and Functional)."""
    k = tnt.keras
    inp = k.Input((6,), name="x")
    h = k.layers.Dense(5, activation="relu", name="h")(inp)
    a = k.layers.Dense(3, name="a")(h)
    b = k.layers.Dense(3, name="b")(h)
    f = k.Model(inp, k.layers.Add(name="sum")([a, b]))
    s = k.Sequential([k.layers.Dense(4, activation="tanh", input_shape=(6,), name="t"), k.layers.Dense(1, name="o")])
    x = np.random.default_rng(6).standard_normal((5, 6)).astype(np.float32)
    for model, layer in ((f, "h"), (s, "t")):
        path = str(tmp_path / f"{layer}.h5")
        model.save(path)
        loaded = k.models.load_model(path)
        assert loaded.input.shape == (None, 6)
        feat = k.Model(inputs=loaded.input, outputs=loaded.get_layer(layer).output)
        w, bias = model.get_layer(layer).get_weights()
        act = np.maximum if layer == "h" else (lambda v, _: np.tanh(v))
        np.testing.assert_allclose(feat.predict(x, verbose=0), act(x @ w + bias, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(k.Model(loaded.inputs, loaded.outputs).predict(x, verbose=0),
                                   model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
