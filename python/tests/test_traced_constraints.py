"""Constraints on a custom layer's weights (issue 22: add_weight(..., constraint=...)): the library
projects each after every optimizer update, as Keras's optimizer does and as it does for a
built-in layer's kernel_constraint; the references are the built-in Dense with the same
constraints and NumPy's norms."""
import json

import numpy as np
import pytest

from tarantella import keras
from tarantella.keras import constraints, ops

RNG = np.random.default_rng(11)


@keras.utils.register_keras_serializable(package="ConstraintTest")
class ConstrainedDense(keras.layers.Layer):
    def __init__(self, units, activation=None, kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.units, self.activation = units, activation
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.bias_constraint = constraints.get(bias_constraint)

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units),
                                      initializer="glorot_uniform", constraint=self.kernel_constraint)
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros",
                                    constraint=self.bias_constraint)

    def call(self, inputs):
        y = ops.matmul(inputs, self.kernel) + self.bias
        return ops.relu(y) if self.activation == "relu" else y

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": self.activation,
                "kernel_constraint": constraints.serialize(self.kernel_constraint),
                "bias_constraint": constraints.serialize(self.bias_constraint)}


# (first layer's kernel, its bias, second layer's kernel) constraints
CASES = {
    "maxnorm_nonneg": (constraints.MaxNorm(1.0), constraints.NonNeg(), None),
    "unitnorm_minmax": ("unit_norm", None, constraints.MinMaxNorm(0.5, 0.9, rate=0.5, axis=[0, 1])),
    "maxnorm_axis1": (constraints.MaxNorm(0.7, axis=1), "non_neg", {"class_name": "MaxNorm",
                                                                    "config": {"max_value": 0.5}}),
}


def _models(case):
    k1, b1, k2 = CASES[case]
    inp = keras.Input(shape=(6,))
    h = keras.layers.Dense(5, activation="relu", kernel_constraint=k1, bias_constraint=b1)(inp)
    ref = keras.Model(inp, keras.layers.Dense(2, kernel_constraint=k2)(h))
    inp2 = keras.Input(shape=(6,))
    h2 = ConstrainedDense(5, activation="relu", kernel_constraint=k1, bias_constraint=b1)(inp2)
    mine = keras.Model(inp2, ConstrainedDense(2, kernel_constraint=k2)(h2))
    # large weights and a negative bias: every constraint bites from the first step
    w0 = [w * 3.0 - (0.2 if w.ndim == 1 else 0.0) for w in ref.get_weights()]
    ref.set_weights(w0)
    mine.set_weights(w0)
    return ref, mine, w0


def _fit(model, x, y, epochs=2):
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


X = RNG.normal(size=(32, 6)).astype(np.float32)
Y = RNG.normal(size=(32, 2)).astype(np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_constrained_custom_dense_trains_equal_to_builtin_dense(case):
    ref, mine, w0 = _models(case)
    w_ref, w_mine = _fit(ref, X, Y), _fit(mine, X, Y)
    assert max(np.abs(a - b).max() for a, b in zip(w_ref, w0)) > 1e-2  # training (and projection) moved them
    for a, b in zip(w_ref, w_mine):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_constraints_hold_against_numpy_norms():
    _, mine, w0 = _models("maxnorm_nonneg")
    k1, b1, k2, b2 = _fit(mine, X, Y, epochs=1)
    col = np.sqrt((k1.astype(np.float64) ** 2).sum(0))
    assert col.max() <= 1.0 + 1e-6 and np.isclose(col.max(), 1.0, atol=1e-5)  # MaxNorm(1.0) over axis 0
    assert (b1 >= 0).all() and (b1 == 0).any()  # NonNeg clipped the negative bias
    assert np.sqrt((k2.astype(np.float64) ** 2).sum(0)).max() > 1.5  # the unconstrained kernel is not touched

    _, mine, _ = _models("unitnorm_minmax")
    k1, _, k2, _ = _fit(mine, X, Y, epochs=1)
    np.testing.assert_allclose(np.sqrt((k1.astype(np.float64) ** 2).sum(0)), 1.0, atol=1e-5)  # UnitNorm
    # MinMaxNorm over axes (0, 1): one norm, moved half way (rate 0.5) into [0.5, 0.9] at every step
    assert np.sqrt((k2.astype(np.float64) ** 2).sum()) < np.sqrt((w0[2].astype(np.float64) ** 2).sum())


def test_constraints_are_kept_in_the_file(tmp_path):
    _, mine, _ = _models("maxnorm_nonneg")
    cfg = json.loads(mine.to_json())["config"]["layers"][1]["config"]
    assert cfg["tnt_constraints"] == {"kernel": {"class_name": "MaxNorm", "config": {"max_value": 1.0, "axis": 0}},
                                      "bias": {"class_name": "NonNeg", "config": {}}}
    for ext in (".keras", ".h5"):
        _, mine, _ = _models("maxnorm_nonneg")
        path = str(tmp_path / ("m" + ext))
        mine.save(path)
        back = keras.models.load_model(path, custom_objects={"ConstraintTest>ConstrainedDense": ConstrainedDense})
        assert back.layers[1].get_config()["tnt_constraints"] == cfg["tnt_constraints"]
        for a, b in zip(_fit(back, X, Y), _fit(mine, X, Y)):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_non_trainable_weight_is_not_constrained():
    class Frozen(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=(input_shape[-1],), initializer="ones", trainable=False,
                                     constraint=constraints.NonNeg())

        def call(self, x):
            return x * self.w

    inp = keras.Input(shape=(6,))
    m = keras.Model(inp, keras.layers.Dense(2)(Frozen()(inp)))
    ws = m.get_weights()
    ws[0] = -np.ones(6, np.float32)  # Keras's optimizer neither updates nor projects it
    m.set_weights(ws)
    np.testing.assert_array_equal(_fit(m, X, Y)[0], -np.ones(6, np.float32))


def _layer_with(constraint, shape=(6, 3)):
    class C(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=shape, constraint=constraint)

        def call(self, x):
            return ops.matmul(x, self.w)

    inp = keras.Input(shape=(6,))
    return keras.Model(inp, C()(inp))


@pytest.mark.parametrize("constraint, error, text", [
    ("no_such_constraint", ValueError, "no_such_constraint"),
    (lambda w: w, NotImplementedError, "MaxNorm, NonNeg, UnitNorm or MinMaxNorm"),
    (constraints.MaxNorm(1.0, axis=2), ValueError, "axis 2 for a weight of shape (6, 3)"),
])
def test_bad_constraints_are_clear_errors(constraint, error, text):
    with pytest.raises(error) as e:
        _layer_with(constraint)
    assert text in str(e.value) and "add_weight('w')" in str(e.value)


@keras.utils.register_keras_serializable(package="ConstraintTest")
class RegularizedDense(keras.layers.Layer):
    """Its get_config names its regularizer as a built-in layer's does: the penalty still counts once."""

    def __init__(self, units, kernel_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.units, self.kernel_regularizer = units, keras.regularizers.get(kernel_regularizer)

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units),
                                      regularizer=self.kernel_regularizer)

    def call(self, inputs):
        return ops.matmul(inputs, self.kernel)

    def get_config(self):
        return {**super().get_config(), "units": self.units,
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer)}


def test_regularizer_named_in_get_config_counts_once():
    inp = keras.Input(shape=(6,))
    ref = keras.Model(inp, keras.layers.Dense(2, use_bias=False, kernel_regularizer=keras.regularizers.L2(0.1))(inp))
    inp2 = keras.Input(shape=(6,))
    mine = keras.Model(inp2, RegularizedDense(2, kernel_regularizer=keras.regularizers.L2(0.1))(inp2))
    mine.set_weights(ref.get_weights())
    k = ref.get_weights()[0]
    for m in (ref, mine):
        m.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    expected = np.mean((X @ k - Y) ** 2) + 0.1 * np.sum(k.astype(np.float64) ** 2)  # Keras's L2 on the loss
    for m in (ref, mine):
        np.testing.assert_allclose(m.evaluate(X, Y, batch_size=32, verbose=0), expected, rtol=1e-5)
