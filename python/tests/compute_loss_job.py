"""A job of test_compute_loss.py under the launcher: compute_loss_job.py OUT_DIR. A Distiller (a
compute_loss override calling a frozen teacher) trains data-parallel (tnt.Model); each rank writes
OUT_DIR/rank_<r>.json with its history, evaluation and weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt

tnt.init()
k = tnt.keras
ops = k.ops


class Distiller(k.Model):
    def __init__(self, student, teacher):
        super().__init__()
        self.teacher, self.student = teacher, student

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        teacher_pred = self.teacher(x, training=False)
        hard = k.losses.SparseCategoricalCrossentropy(from_logits=True)(y, y_pred)
        soft = k.losses.KLDivergence()(ops.softmax(teacher_pred / 2.0, axis=1), ops.softmax(y_pred / 2.0, axis=1))
        return 0.5 * hard + 0.5 * 4.0 * soft

    def call(self, x):
        return self.student(x)


k.utils.set_random_seed(7)
teacher = k.Sequential([k.Input(shape=(6,)), k.layers.Dense(8, activation="relu"), k.layers.Dense(3)])
student = k.Sequential([k.Input(shape=(6,)), k.layers.Dense(3)])
rng = np.random.default_rng(0)
x = rng.normal(size=(60, 6)).astype(np.float32)
y = rng.integers(0, 3, 60)
model = tnt.Model(Distiller(student, teacher))
model.compile(optimizer=k.optimizers.SGD(0.2), metrics=[k.metrics.SparseCategoricalAccuracy()])
hist = model.fit(x, y, batch_size=20, epochs=3, shuffle=False, verbose=0)
loss, acc = model.evaluate(x, y, batch_size=20, verbose=0)
out = {"size": tnt.get_size(), "history": hist.history, "evaluate": {"loss": loss, "acc": acc},
       "weights": [w.tolist() for w in model.get_weights()]}
with open(os.path.join(sys.argv[1], f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump(out, f)
