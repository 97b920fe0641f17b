"""A GAN loop data-parallel, for test_shared_models_dist.py: shared_dist_job.py OUT_DIR. The
generator and the discriminator (frozen in the combined model) are tnt.Models trained with
train_on_batch in turns, as keras.io's GAN loop; each global batch of 12 is split 6 + 6 on 2 ranks.
Each rank writes OUT_DIR/rank_<r>.json with the losses and the final weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt

tnt.init()
out = sys.argv[1]
k, L = tnt.keras, tnt.keras.layers
k.utils.set_random_seed(4)
gi = k.Input((3,))
g = k.Model(gi, L.Dense(4, name="g_out")(L.Dense(5, activation="tanh", name="g_h")(gi)), name="generator")
di = k.Input((4,))
d = k.Model(di, L.Dense(1, activation="sigmoid", name="d_out")(L.Dense(6, activation="relu", name="d_h")(di)),
            name="discriminator")
d = tnt.Model(d)
d.compile(k.optimizers.Adam(0.01), "binary_crossentropy")
d.trainable = False
z = k.Input((3,))
gan = tnt.Model(k.Model(z, d(g(z)), name="gan"))
gan.compile(k.optimizers.Adam(0.01), "binary_crossentropy")
rng = np.random.default_rng(0)
real = rng.standard_normal((12, 4)).astype(np.float32) + 1.5
losses = []
for step in range(4):
    noise = rng.standard_normal((12, 3)).astype(np.float32)
    fake = g.predict(noise, verbose=0)
    d_loss = d.train_on_batch(np.concatenate([real, fake]), np.r_[np.ones(12), np.zeros(12)].reshape(-1, 1))
    g_loss = gan.train_on_batch(noise, np.ones((12, 1), np.float32))
    losses.append([float(d_loss), float(g_loss)])
result = {"rank": tnt.get_rank(), "size": tnt.get_size(), "losses": losses,
          "g": [w.tolist() for w in g.get_weights()], "d": [w.tolist() for w in d.get_weights()]}
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump(result, f)
