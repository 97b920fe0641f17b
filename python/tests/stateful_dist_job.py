"""A stateful LSTM trained and run data-parallel, for test_model_semantics.py: stateful_dist_job.py
OUT_DIR. A global batch of 4 (on 2 ranks: 2 rows each, whose states each rank carries); each rank
writes OUT_DIR/rank_<r>.json with its predictions and weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt

tnt.init()
out = sys.argv[1]
k = tnt.keras
rng = np.random.default_rng(7)
x = rng.standard_normal((12, 3, 2)).astype(np.float32)
y = rng.standard_normal((12, 4)).astype(np.float32)
k.utils.set_random_seed(3)
base = k.Sequential([k.layers.LSTM(4, batch_input_shape=(4, 3, 2), stateful=True)])
base.set_weights([np.full(w.shape, 0.1 * (i + 1), np.float32) * np.sin(np.arange(w.size)).reshape(w.shape)
                  for i, w in enumerate(base.get_weights())])
m = tnt.Model(base)
m.compile(k.optimizers.SGD(0.5), "mse")
m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)  # 3 batches carried, twice
m.reset_states()
first = m.predict(x[:8], batch_size=4, verbose=0)   # two batches: the second continues the first
second = m.predict(x[8:], batch_size=4, verbose=0)  # continues again
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump({"predict": np.concatenate([first, second]).tolist(),
               "weights": np.concatenate([w.ravel() for w in m.get_weights()]).tolist()}, f)
