"""A job of test_custom_objectives.py under the launcher: custom_objectives_job.py OUT_DIR. A model
trains data-parallel with a loss function of its own (sparse labels, keras.ops), a
keras.losses.Loss subclass on a second output, metric functions (one per-sample, one a scalar
mean), a Metric subclass, one in weighted_metrics (fit and evaluate with sample weights) and a
layer's add_loss (a batch mean); each rank writes OUT_DIR/rank_<r>.json with its history and weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt
from tarantella.keras import ops

tnt.init()
k = tnt.keras


def sparse_ce(y_true, y_pred):  # labels (batch,), probabilities (batch, 3)
    onehot = ops.one_hot(ops.cast(y_true, "int32"), 3)
    return -ops.sum(onehot * ops.log(ops.clip(y_pred, 1e-7, 1.0)), axis=-1)


class Scaled(k.losses.Loss):
    def __init__(self, factor=2.0, **kw):
        super().__init__(**kw)
        self.factor = factor

    def call(self, y_true, y_pred):
        return self.factor * ops.mean(ops.abs(y_pred - y_true), axis=-1)


def top_prob(y_true, y_pred):
    return ops.max(y_pred, axis=-1)


def mean_abs(y_true, y_pred):  # a scalar: the batch mean
    return ops.mean(ops.abs(y_pred - y_true))


class TruePositiveRate(k.metrics.Metric):  # state summed over ranks
    def __init__(self, name="tp_rate", **kw):
        super().__init__(name=name, **kw)
        self.hits = self.add_weight(name="hits", initializer="zeros")
        self.seen = self.add_variable(shape=(), initializer="zeros", name="seen")

    def update_state(self, y_true, y_pred, sample_weight=None):
        hit = ops.cast(ops.argmax(y_pred, axis=-1) == ops.cast(y_true, "int32"), "float32")
        self.hits.assign_add(ops.sum(hit))
        self.seen.assign_add(ops.shape(y_pred)[0])

    def result(self):
        return self.hits / self.seen


class WeightedHits(k.metrics.Metric):  # in weighted_metrics: update_state gets the sample weights
    def __init__(self, name="w_hits", **kw):
        super().__init__(name=name, **kw)
        self.total = self.add_weight(name="total", initializer="zeros")
        self.count = self.add_weight(name="count", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        hit = ops.cast(ops.argmax(y_pred, axis=-1) == ops.cast(y_true, "int32"), "float32")
        w = ops.ones_like(hit) if sample_weight is None else ops.reshape(sample_weight, (-1,))
        self.total.assign_add(ops.sum(hit * w))
        self.count.assign_add(ops.sum(w))

    def result(self):
        return self.total / self.count


class MeanPenalty(k.layers.Layer):  # a batch-mean added loss: each rank's weighted by its share
    def call(self, x):
        self.add_loss(0.05 * ops.mean(ops.square(x)))
        return x


rng = np.random.default_rng(5)
x = rng.standard_normal((96, 6)).astype(np.float32)
y_cls = rng.integers(0, 3, size=(96,)).astype(np.float32)
y_reg = rng.standard_normal((96, 2)).astype(np.float32)
inp = k.Input(shape=(6,))
h = MeanPenalty()(k.layers.Dense(8, activation="tanh")(inp))
probs = k.layers.Dense(3, activation="softmax", name="cls")(h)
reg = k.layers.Dense(2, name="reg")(h)
base = k.Model(inp, [probs, reg])
base.set_weights([np.linspace(-0.5, 0.5, w.size, dtype=np.float32).reshape(w.shape) for w in base.get_weights()])
model = tnt.Model(base)
model.compile(k.optimizers.SGD(0.1), loss=[sparse_ce, Scaled(1.5)],
              metrics={"cls": [top_prob, TruePositiveRate()], "reg": [mean_abs]},
              weighted_metrics={"cls": [WeightedHits()]})
sw = rng.uniform(0.0, 2.0, size=(96,)).astype(np.float32)
hist = model.fit(x, [y_cls, y_reg], sample_weight=sw, batch_size=24, epochs=3, verbose=0, shuffle=False)
ev = model.evaluate(x, [y_cls, y_reg], sample_weight=sw, batch_size=32, verbose=0, return_dict=True)
with open(os.path.join(sys.argv[1], f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump({"size": tnt.get_size(), "history": hist.history, "evaluate": ev,
               "weights": [w.tolist() for w in model.get_weights()]}, f)
