"""ops.zeros/ones/full with the batch (None) as first axis inside a custom layer's call (Keras code
writes ops.zeros((inputs.shape[0], units)) for an initial state), and a layer whose operations on
more tensors than a layer takes are not fused into one."""
import numpy as np
import pytest


def test_batch_zeros_in_a_custom_rnn(tnt):
    k = tnt.keras
    ops = k.ops
    units, steps = 4, 10  # ten steps: fusing the stack with its adds would take 20 inputs

    class TinyRNN(k.layers.Layer):
        def __init__(self):
            super().__init__()
            self.p1 = k.layers.Dense(units, activation="tanh")
            self.p2 = k.layers.Dense(units, activation="tanh")

        def call(self, inputs):
            state = ops.zeros(shape=(inputs.shape[0], units)) + ops.ones((inputs.shape[0], 1)) * 0.5
            outs = []
            for t in range(inputs.shape[1]):
                state = self.p1(inputs[:, t, :]) + self.p2(state)
                outs.append(state)
            return ops.stack(outs, axis=1)

    layer = TinyRNN()
    x = np.random.default_rng(0).normal(size=(3, steps, 5)).astype(np.float32)
    y = np.asarray(layer(x))
    (k1, b1), (k2, b2) = layer.p1.get_weights(), layer.p2.get_weights()
    state = np.full((3, units), 0.5, np.float32)
    want = []
    for t in range(steps):
        state = np.tanh(x[:, t] @ k1 + b1) + np.tanh(state @ k2 + b2)
        want.append(state)
    np.testing.assert_allclose(y, np.stack(want, 1), rtol=1e-5, atol=1e-5)


def test_batch_full_in_a_traced_layer(tnt):
    k = tnt.keras
    ops = k.ops

    class AddSeven(k.layers.Layer):
        def call(self, x):
            return x * ops.full((x.shape[0], 1, x.shape[2]), 7.0)

    inp = k.Input(shape=(2, 3))
    m = k.Model(inp, AddSeven()(inp))
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    np.testing.assert_allclose(m.predict(x, verbose=0), x * 7.0)


def test_batch_constant_errors(tnt):
    ops = tnt.keras.ops
    with pytest.raises(ValueError, match="batch size is unknown"):
        ops.zeros((None, 3))
    k = tnt.keras

    class Bad(k.layers.Layer):
        def call(self, x):
            return x + ops.zeros((x.shape[0], None))

    with pytest.raises(ValueError, match="only its first axis"):
        Bad()(k.Input(shape=(3,)))


def test_slice_and_broadcast_to_the_batch(tnt):
    """keras-io's PositionEmbedding: ops.slice of a weight, ops.broadcast_to(ops.shape(inputs))."""
    k = tnt.keras
    ops = k.ops

    class PositionEmbedding(k.layers.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(name="embeddings", shape=[6, input_shape[-1]])

        def call(self, inputs):
            shape = ops.shape(inputs)
            table = ops.slice(ops.convert_to_tensor(self.table), (1, 0), (shape[-2], shape[-1]))
            return inputs + ops.broadcast_to(table, shape)

    inp = k.Input(shape=(4, 3))
    layer = PositionEmbedding()
    m = k.Model(inp, layer(inp))
    x = np.random.default_rng(1).normal(size=(5, 4, 3)).astype(np.float32)
    table = layer.get_weights()[0]
    np.testing.assert_allclose(m.predict(x, verbose=0), x + table[1:5], rtol=1e-6)
    np.testing.assert_allclose(ops.slice(table, (2, 1), (3, -1)), table[2:5, 1:])
    with pytest.raises(ValueError, match="one entry per axis"):
        ops.slice(table, (0,), (2, 2))
