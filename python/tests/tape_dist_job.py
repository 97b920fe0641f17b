"""A job of test_gradient_tape_distributed.py under the launcher: tape_dist_job.py OUT_DIR. A custom
training loop (GradientTape, SGD with momentum) over each rank's contiguous shard of every global batch of a
tnt.Model with Dropout; each rank writes OUT_DIR/rank_<r>.json with its losses and weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt
import tarantella.tensorflow as tf

tnt.init()
k = tnt.keras
rank, size = tnt.get_rank(), tnt.get_size()

rng = np.random.default_rng(5)
X = rng.normal(size=(48, 6)).astype(np.float32)
Y = rng.integers(0, 3, size=(48,))
B = 12  # the global batch

k.utils.set_random_seed(4)
inp = k.Input(shape=(6,))
h = k.layers.Dense(16, activation="relu")(inp)
h = k.layers.Dropout(0.3, seed=2)(h)
model = tnt.Model(k.Model(inp, k.layers.Dense(3)(h)))
opt = k.optimizers.SGD(0.1, momentum=0.9)  # scale-sensitive: an average, not a sum
loss_fn = k.losses.SparseCategoricalCrossentropy(from_logits=True)
acc = k.metrics.SparseCategoricalAccuracy()
losses = []
for step in range(4):
    lo = step * B + rank * (B // size)  # this rank's shard of the global batch
    xb, yb = X[lo:lo + B // size], Y[lo:lo + B // size]
    with tnt.DistributedGradientTape(tf.GradientTape()) as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb, logits)
    grads = tape.gradient(loss, model.trainable_weights)
    opt.apply_gradients(zip(grads, model.trainable_weights))
    acc.update_state(yb, logits)
    losses.append(float(loss))


class StepModel(k.Model):  # fit with a train_step of the user's: each rank steps on its share
    def train_step(self, data):
        x, y = data
        self.__dict__.setdefault("seen", []).append(int(np.shape(x)[0]))  # the rank's share
        with tf.GradientTape() as tape:
            loss = self.compiled_loss(y, self(x, training=True))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}


k.utils.set_random_seed(6)
inp = k.Input(shape=(6,))
step_model = tnt.Model(StepModel(inp, k.layers.Dense(3)(k.layers.Dense(8, activation="tanh")(inp))))
step_model.compile(optimizer=k.optimizers.SGD(0.2, momentum=0.5), loss=loss_fn)
step_model.fit(X, Y, batch_size=B, epochs=2, shuffle=False, verbose=0)
out = {"size": size, "losses": losses, "weights": [w.tolist() for w in model.get_weights()],
       "iterations": int(opt.iterations), "step_weights": [w.tolist() for w in step_model.get_weights()],
       "seen": step_model.model.seen}
with open(os.path.join(sys.argv[1], f"rank_{rank}.json"), "w") as f:
    json.dump(out, f)
