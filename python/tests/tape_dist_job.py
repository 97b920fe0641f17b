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
out = {"size": size, "losses": losses, "weights": [w.tolist() for w in model.get_weights()],
       "iterations": int(opt.iterations)}
with open(os.path.join(sys.argv[1], f"rank_{rank}.json"), "w") as f:
    json.dump(out, f)
