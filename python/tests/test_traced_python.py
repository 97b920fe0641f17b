"""The user's own Keras code traced onto the C engine (issue 22, item 3): keras.ops and the
operators on symbolic tensors, a Layer subclass with add_weight, Lambda, symbolic arithmetic in a
functional model; references are NumPy and the built-in layers."""
import os

import numpy as np
import pytest
from conftest import BIN, run

import tarantella.tensorflow as tf
from tarantella import keras
from tarantella.keras import backend as K
from tarantella.keras import ops

RNG = np.random.default_rng(7)


@keras.utils.register_keras_serializable(package="TracedTest")
class MyDense(keras.layers.Layer):
    def __init__(self, units, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.units, self.activation = units, activation

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units),
                                      initializer="glorot_uniform", trainable=True)
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros", trainable=True)

    def call(self, inputs, training=None):
        y = ops.matmul(inputs, self.kernel) + self.bias
        return ops.relu(y) if self.activation == "relu" else y

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": self.activation}


def _fit(model, x, y):
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return model.get_weights()


def test_custom_dense_trains_equal_to_builtin_dense():
    x = RNG.normal(size=(32, 6)).astype(np.float32)
    y = RNG.normal(size=(32, 2)).astype(np.float32)

    inp = keras.Input(shape=(6,))
    ref = keras.Model(inp, keras.layers.Dense(2)(keras.layers.Dense(5, activation="relu")(inp)))
    inp2 = keras.Input(shape=(6,))
    mine = keras.Model(inp2, MyDense(2)(MyDense(5, activation="relu")(inp2)))
    assert [w.shape for w in mine.get_weights()] == [(6, 5), (5,), (5, 2), (2,)]
    mine.set_weights(ref.get_weights())
    np.testing.assert_allclose(mine.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    w0 = [w.copy() for w in ref.get_weights()]
    w_ref, w_mine = _fit(ref, x, y), _fit(mine, x, y)
    assert max(np.abs(a - b).max() for a, b in zip(w_ref, w0)) > 1e-3  # training moved the weights
    for a, b in zip(w_ref, w_mine):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    # the weights are the layer's, by the add_weight names
    assert [w.name for w in mine.layers[1].weights] == [f"{mine.layers[1].name}/kernel:0",
                                                        f"{mine.layers[1].name}/bias:0"]


def _lambda_and_arithmetic_model():
    inp = keras.Input(shape=(4, 3))
    x = keras.layers.Lambda(lambda t: ops.sum(t * t, axis=-1) - 1.0)(inp)  # (4,)
    x = x * 2 + 1
    x = keras.layers.Dense(2)(x)
    y = ops.concatenate([x, -x[:, ::-1]], axis=-1) / 3
    return keras.Model(inp, y)


def _lambda_reference(model, x):
    d = [layer for layer in model.layers if layer.class_name == "Dense"][0]
    k, b = d.get_weights()
    h = (np.sum(x * x, axis=-1) - 1.0) * 2 + 1
    h = h @ k + b
    return np.concatenate([h, -h[:, ::-1]], axis=-1) / 3


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_lambda_and_symbolic_arithmetic_round_trip(tmp_path, ext):
    m = _lambda_and_arithmetic_model()
    x = RNG.normal(size=(5, 4, 3)).astype(np.float32)
    # each chain of operations between layers is one traced layer
    assert [layer.class_name for layer in m.layers] == ["InputLayer", "Lambda", "TracedOps", "Dense", "TracedOps"]
    out = m.predict(x, verbose=0)
    np.testing.assert_allclose(out, _lambda_reference(m, x), rtol=1e-5, atol=1e-5)
    path = str(tmp_path / ("m" + ext))
    m.save(path)
    back = keras.models.load_model(path, custom_objects={})
    np.testing.assert_allclose(back.predict(x, verbose=0), out, rtol=1e-6, atol=1e-6)
    # the traced operations in the file run in C with no Python
    np.save(tmp_path / "x.npy", x)
    run([os.path.join(BIN, "tnt-predict"), path, str(tmp_path / "x.npy"), str(tmp_path / "c.npy")],
        env={"OMP_NUM_THREADS": "1"})
    np.testing.assert_allclose(np.load(tmp_path / "c.npy"), out, rtol=1e-5, atol=1e-6)
    assert [layer.class_name for layer in back.layers].count("Lambda") == 1


def test_custom_layer_round_trip_with_custom_objects(tmp_path):
    inp = keras.Input(shape=(3,))
    m = keras.Model(inp, MyDense(4, activation="relu")(inp))
    x = RNG.normal(size=(6, 3)).astype(np.float32)
    k, b = m.get_weights()
    np.testing.assert_allclose(m.predict(x, verbose=0), np.maximum(x @ k + b, 0), rtol=1e-6, atol=1e-6)
    for ext in (".keras", ".h5"):
        path = str(tmp_path / ("c" + ext))
        m.save(path)
        back = keras.models.load_model(path, custom_objects={"TracedTest>MyDense": MyDense})
        assert back.layers[-1].class_name == "TracedTest>MyDense"
        cfg = back.layers[-1].get_config()  # the layer's own config kept beside the graph
        assert cfg["units"] == 4 and cfg["activation"] == "relu"
        assert MyDense.from_config({k: v for k, v in cfg.items() if k != "tnt_ops"}).units == 4
        np.testing.assert_allclose(back.predict(x, verbose=0), m.predict(x, verbose=0), rtol=1e-6)


# (name, function of a symbolic tensor, the same in NumPy, input shape)
_X = (3, 4)
CASES = [
    ("add", lambda t: ops.add(t, 1.5), lambda a: a + 1.5),
    ("subtract", lambda t: 2.0 - t, lambda a: 2.0 - a),
    ("multiply", lambda t: ops.multiply(t, t[:, :1]), lambda a: a * a[:, :1]),
    ("divide", lambda t: t / 4, lambda a: a / 4),
    ("power", lambda t: ops.abs(t) ** 1.5, lambda a: np.abs(a) ** 1.5),
    ("negative", lambda t: -t, lambda a: -a),
    ("matmul", lambda t: t @ ops.transpose(t[:, :1, :], (0, 2, 1)), None),
    ("einsum", lambda t: ops.einsum("bij,bkj->bik", t, t), lambda a: np.einsum("bij,bkj->bik", a, a)),
    ("mean", lambda t: ops.mean(t, axis=-1), lambda a: a.mean(-1)),
    ("sum", lambda t: ops.sum(t, axis=(1, 2)), lambda a: a.sum((1, 2))),
    ("max", lambda t: ops.max(t, axis=1, keepdims=True), lambda a: a.max(1, keepdims=True)),
    ("min", lambda t: ops.min(t, axis=-1), lambda a: a.min(-1)),
    ("exp", lambda t: ops.exp(t), np.exp),
    ("log", lambda t: ops.log(ops.abs(t) + 1), lambda a: np.log(np.abs(a) + 1)),
    ("sqrt", lambda t: ops.sqrt(ops.square(t) + 1), lambda a: np.sqrt(a * a + 1)),
    ("tanh", lambda t: ops.tanh(t), np.tanh),
    ("sigmoid", lambda t: ops.sigmoid(t), lambda a: 1 / (1 + np.exp(-a))),
    ("relu", lambda t: ops.relu(t), lambda a: np.maximum(a, 0)),
    ("softmax", lambda t: ops.softmax(t, axis=-1), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    ("concatenate", lambda t: ops.concatenate([t, t * 2], axis=1), lambda a: np.concatenate([a, a * 2], 1)),
    ("stack", lambda t: ops.stack([t, -t], axis=-1), lambda a: np.stack([a, -a], -1)),
    ("reshape", lambda t: ops.reshape(t, (-1, 12)), lambda a: a.reshape(-1, 12)),
    ("transpose", lambda t: ops.transpose(t, (0, 2, 1)), lambda a: a.transpose(0, 2, 1)),
    ("expand_squeeze", lambda t: ops.squeeze(ops.expand_dims(t, 1), 1), lambda a: a),
    ("expand_dims", lambda t: ops.expand_dims(t, -1), lambda a: a[..., None]),
    ("slicing", lambda t: t[:, 1:, ::2], lambda a: a[:, 1:, ::2]),
    ("slicing_none_ellipsis", lambda t: t[..., None, 0], lambda a: a[..., None, 0]),
    ("take", lambda t: ops.take(t, np.array([2, 0]), axis=-1), lambda a: np.take(a, [2, 0], axis=-1)),
    ("one_hot", lambda t: ops.one_hot(ops.argmax(t, axis=-1), 4), lambda a: np.eye(4)[a.argmax(-1)]),
    ("cast", lambda t: ops.cast(t > 0, "float32"), lambda a: (a > 0).astype(np.float32)),
    ("where", lambda t: ops.where(t < 0, t * 0.1, t), lambda a: np.where(a < 0, a * 0.1, a)),
    ("maximum", lambda t: ops.maximum(t, 0.2), lambda a: np.maximum(a, 0.2)),
    ("minimum", lambda t: ops.minimum(t, t[:, ::-1]), lambda a: np.minimum(a, a[:, ::-1])),
    ("clip", lambda t: ops.clip(t, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    ("abs", lambda t: abs(t), np.abs),
    ("comparisons", lambda t: ops.cast(t >= 0.1, "float32") + ops.cast(t <= -0.1, "float32"),
     lambda a: (a >= 0.1).astype(np.float32) + (a <= -0.1)),
    # TensorFlow and keras.backend names, on the same tensors
    ("tf.reduce_mean", lambda t: tf.reduce_mean(t, axis=1, keepdims=True), lambda a: a.mean(1, keepdims=True)),
    ("tf.matmul", lambda t: tf.matmul(t, t, transpose_b=True), lambda a: a @ a.transpose(0, 2, 1)),
    ("tf.nn.relu", lambda t: tf.nn.relu(t), lambda a: np.maximum(a, 0)),
    ("tf.concat", lambda t: tf.concat([t, tf.square(t)], axis=-1), lambda a: np.concatenate([a, a * a], -1)),
    ("tf.nn.softmax", lambda t: tf.nn.softmax(t), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    ("K.mean", lambda t: K.mean(K.square(t), axis=-1), lambda a: (a * a).mean(-1)),
    ("K.sum", lambda t: K.sum(t, axis=1), lambda a: a.sum(1)),
    ("arange_triu", lambda t: ops.triu(t) + ops.cast(ops.arange(4), "float32") * ops.ones((3, 4)),
     lambda a: np.triu(a) + np.arange(4)),
    ("tril", lambda t: ops.tril(t, -1), lambda a: np.tril(a, -1)),
    ("eager_scale", lambda t: t / ops.sqrt(ops.cast(4, "float32")), lambda a: a / 2),
    ("tf.reshape_batch", lambda t: tf.reshape(t, (tf.shape(t)[0], -1, 2)), lambda a: a.reshape(a.shape[0], -1, 2)),
]


@pytest.mark.parametrize("name,fn,ref", CASES, ids=[c[0] for c in CASES])
def test_ops_forward_against_numpy(name, fn, ref):
    x = RNG.normal(size=(5,) + _X).astype(np.float32)
    inp = keras.Input(shape=_X)
    m = keras.Model(inp, keras.layers.Lambda(fn)(inp))
    if ref is None:
        ref = {"matmul": lambda a: a @ a[:, :1, :].transpose(0, 2, 1)}[name]
    np.testing.assert_allclose(m.predict(x, verbose=0), ref(x), rtol=1e-5, atol=1e-5)


def test_value_dependent_if_names_the_users_line():
    def branchy(t):
        if ops.sum(t) > 0:  # the line the error names
            return t
        return -t

    inp = keras.Input(shape=(3,))
    with pytest.raises(ValueError) as e:
        keras.layers.Lambda(branchy)(inp)
    assert "test_traced_python.py:" in str(e.value)
    line = branchy.__code__.co_firstlineno + 1
    assert f"test_traced_python.py:{line}" in str(e.value)
    assert "ops.where" in str(e.value)


def test_builtin_layer_inside_custom_layer_with_weights_is_a_clear_error():
    class Wrapper(keras.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = keras.layers.Dense(2)

        def build(self, input_shape):
            self.scale = self.add_weight(name="scale", shape=(2,), initializer="ones")

        def call(self, inputs):
            return self.inner(inputs) * self.scale

    with pytest.raises(NotImplementedError, match="Dense"):
        Wrapper()(keras.Input(shape=(3,)))
    with pytest.raises(NotImplementedError, match="Dense"):
        keras.layers.Lambda(lambda t: keras.layers.Dense(2)(t))(keras.Input(shape=(3,)))


class TransformerBlock(keras.layers.Layer):
    """keras-io's text classification Transformer block, as written there (Keras 2 style)."""

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.att = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([keras.layers.Dense(ff_dim, activation="relu"), keras.layers.Dense(embed_dim)])
        self.layernorm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = keras.layers.Dropout(rate)
        self.dropout2 = keras.layers.Dropout(rate)
        self.scale = MyDense(embed_dim)  # a custom layer with weights inside: its own traced layer

    def call(self, inputs, training=None):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + self.scale(ffn_output))


def test_custom_layer_made_of_builtin_layers_equals_the_same_layers_inline():
    x = RNG.normal(size=(6, 5, 8)).astype(np.float32)
    inp = keras.Input(shape=(5, 8))
    m = keras.Model(inp, ops.mean(TransformerBlock(8, 2, 16)(inp), axis=1))
    L = keras.layers
    inp2 = keras.Input(shape=(5, 8))
    a = L.Dropout(0.1)(L.MultiHeadAttention(num_heads=2, key_dim=8)(inp2, inp2))
    o1 = L.LayerNormalization(epsilon=1e-6)(inp2 + a)
    f = L.Dropout(0.1)(keras.Sequential([L.Dense(16, activation="relu"), L.Dense(8)])(o1))
    f = MyDense(8)(f)
    twin = keras.Model(inp2, ops.mean(L.LayerNormalization(epsilon=1e-6)(o1 + f), axis=1))
    assert [w.shape for w in m.get_weights()] == [w.shape for w in twin.get_weights()]
    twin.set_weights(m.get_weights())
    np.testing.assert_allclose(m.predict(x, verbose=0), twin.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    m.compile(optimizer="adam", loss="mse")
    h = m.fit(x, np.zeros((6, 8), np.float32), batch_size=3, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]


class TwoLayer(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(5, activation="relu")
        self.scale = MyDense(3)

    def call(self, inputs, training=None):
        h = self.hidden(inputs)
        return ops.tanh(self.scale(h)) * 0.5 + ops.mean(inputs, axis=-1, keepdims=True)


def test_subclassed_model_equals_its_functional_twin():
    x = RNG.normal(size=(24, 4)).astype(np.float32)
    y = RNG.normal(size=(24, 3)).astype(np.float32)
    sub = TwoLayer()
    sub.build((None, 4))
    inp = keras.Input(shape=(4,))
    h = keras.layers.Dense(5, activation="relu")(inp)
    twin = keras.Model(inp, ops.tanh(keras.layers.Dense(3)(h)) * 0.5 + ops.mean(inp, axis=-1, keepdims=True))
    sub.set_weights(twin.get_weights())
    np.testing.assert_allclose(sub.predict(x, verbose=0), twin.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    for a, b in zip(_fit(twin, x, y), _fit(sub, x, y)):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_subclassed_model_built_by_fit_and_predict_step_refused():
    x = RNG.normal(size=(16, 4)).astype(np.float32)
    m = TwoLayer()
    m.compile(optimizer="sgd", loss="mse")
    m.fit(x, np.zeros((16, 3), np.float32), batch_size=8, epochs=1, verbose=0)
    assert m.predict(x, verbose=0).shape == (16, 3)

    class Stepper(TwoLayer):  # train_step overrides run (test_custom_train_step.py); predict_step does not
        def predict_step(self, data):
            return {}

    with pytest.raises(NotImplementedError, match="predict_step"):
        Stepper()


def test_shape_that_does_not_broadcast_names_the_users_line():
    inp = keras.Input(shape=(3,))
    with pytest.raises(ValueError) as e:
        keras.layers.Lambda(lambda t: t + np.ones(4, np.float32))(inp)
    assert "test_traced_python.py:" in str(e.value) and "add" in str(e.value)


def test_keras3_add_weight_order_and_initializer_names():
    class Bias(keras.layers.Layer):
        def build(self, input_shape):
            self.b = self.add_weight((input_shape[-1],), "ones", name="b")

        def call(self, x):
            return x + self.b

    inp = keras.Input(shape=(2,))
    m = keras.Model(inp, Bias()(inp))
    np.testing.assert_array_equal(m.get_weights()[0], np.ones(2, np.float32))
    np.testing.assert_array_equal(m.predict(np.zeros((3, 2), np.float32), verbose=0), np.ones((3, 2)))


def test_dropout_and_activation_inside_a_custom_layer_with_weights():
    class Noisy(keras.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.drop = keras.layers.Dropout(0.5)
            self.act = keras.layers.Activation("tanh")

        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=(input_shape[-1],), initializer="ones")

        def call(self, x, training=None):
            return self.act(self.drop(x * self.w, training=training))

    inp = keras.Input(shape=(200,))
    m = keras.Model(inp, Noisy()(inp))
    x = np.full((4, 200), 0.5, np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), np.tanh(x), rtol=1e-6)  # no dropout outside training
    m.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    h = m.fit(x, np.zeros((4, 200), np.float32), batch_size=4, epochs=1, verbose=0)
    # in training half the values are dropped and the rest doubled: mse = 0.5 * tanh(1)^2, not tanh(0.5)^2
    assert abs(h.history["loss"][0] - 0.5 * np.tanh(1.0) ** 2) < 0.03


def test_model_tensor_is_not_iterable():
    with pytest.raises(TypeError, match="iterating"):
        list(keras.Input(shape=(3,)))


def test_sequential_with_custom_layers_and_lambda():
    m = keras.Sequential([MyDense(4, activation="relu", input_shape=(3,)),
                          keras.layers.Lambda(lambda t: t * 2), keras.layers.Dense(2)])
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    k1, b1, k2, b2 = m.get_weights()
    np.testing.assert_allclose(m.predict(x, verbose=0), (np.maximum(x @ k1 + b1, 0) * 2) @ k2 + b2,
                               rtol=1e-5, atol=1e-6)
    m2 = keras.Sequential([MyDense(4), keras.layers.Dense(2)])  # built on the data's shape by fit
    m2.compile(optimizer="sgd", loss="mse")
    m2.fit(x, np.zeros((5, 2), np.float32), epochs=1, verbose=0)
    assert [w.shape for w in m2.get_weights()] == [(3, 4), (4,), (4, 2), (2,)]


def test_initializer_objects_and_functions_give_the_initial_values():
    def halves(shape, dtype=None):
        return np.full(shape, 0.5, np.float32)

    class Inner(keras.layers.Layer):
        def build(self, input_shape):
            self.v = self.add_weight(name="v", shape=(input_shape[-1],), initializer=halves)

        def call(self, x):
            return x * self.v

    class Outer(keras.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = Inner()

        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=(input_shape[-1], 500),
                                     initializer=keras.initializers.RandomNormal(mean=1.0, stddev=0.01, seed=1))

        def call(self, x):
            return ops.matmul(self.inner(x), self.w)

    inp = keras.Input(shape=(2,))
    m = keras.Model(inp, Outer()(inp))
    w, v = m.get_weights()  # Keras's order: the layer's own weights, then its sub-layers'
    np.testing.assert_array_equal(v, [0.5, 0.5])
    assert abs(w.mean() - 1.0) < 0.005 and 0.008 < w.std() < 0.012
