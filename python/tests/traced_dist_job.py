"""A job of test_traced_distributed.py under the launcher: traced_dist_job.py OUT_DIR. A model
with a custom layer (add_weight with constraints, keras.ops, Dropout keyed on the global sample) and symbolic
arithmetic trains data-parallel; each rank writes OUT_DIR/rank_<r>.json with its weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt
from tarantella.keras import ops

tnt.init()
k = tnt.keras


class Gated(k.layers.Layer):
    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units = units
        self.drop = k.layers.Dropout(0.25, seed=11)

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1], 2 * self.units), initializer="glorot_uniform",
                                 constraint=k.constraints.MaxNorm(0.8))
        self.b = self.add_weight(name="b", shape=(2 * self.units,), initializer="zeros", constraint="non_neg")

    def call(self, x, training=None):
        h = ops.matmul(x, self.w) + self.b
        a, g = h[:, :self.units], h[:, self.units:]
        return self.drop(ops.tanh(a) * ops.sigmoid(g), training=training)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


rng = np.random.default_rng(3)
x = rng.standard_normal((96, 6)).astype(np.float32)
y = rng.standard_normal((96, 2)).astype(np.float32)
inp = k.Input(shape=(6,))
h = Gated(8)(inp)
out = k.layers.Dense(2)(h) * 0.5 + ops.mean(inp, axis=-1, keepdims=True)
base = k.Model(inp, out)
base.set_weights([np.linspace(-0.5, 0.5, w.size, dtype=np.float32).reshape(w.shape) for w in base.get_weights()])
model = tnt.Model(base)
model.compile(k.optimizers.SGD(0.1), "mse")
train = tnt.data.Dataset.from_tensor_slices((x, y)).batch(24)
hist = model.fit(train, epochs=3, verbose=0, shuffle=False)
with open(os.path.join(sys.argv[1], f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump({"size": tnt.get_size(), "loss": hist.history["loss"],
               "weights": [w.tolist() for w in model.get_weights()]}, f)
