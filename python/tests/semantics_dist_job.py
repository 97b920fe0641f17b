"""Model semantics data-parallel, for test_model_semantics.py: semantics_dist_job.py OUT_DIR.
A stateful LSTM with a global batch of 4 (on 2 ranks: 2 rows each, whose states each rank
carries), and a two-output model trained and evaluated with one sample-weight array per output.
Each rank writes OUT_DIR/rank_<r>.json with its predictions, weights and logs."""
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

# one sample-weight array per output (Keras 2's list), batches of 5 split 3 + 2
inp = k.Input((3,))
two = k.Model(inp, [k.layers.Dense(1, kernel_initializer="ones")(inp), k.layers.Dense(2, kernel_initializer="ones")(inp)])
two = tnt.Model(two)
two.compile(k.optimizers.SGD(0.05), ["mse", "mae"], metrics=["mae"])
xs = rng.standard_normal((10, 3)).astype(np.float32)
ys = [rng.standard_normal((10, 1)).astype(np.float32), rng.standard_normal((10, 2)).astype(np.float32)]
sw = [rng.uniform(0, 2, 10), np.r_[np.ones(5), np.zeros(5)]]
h = two.fit(xs, ys, sample_weight=sw, batch_size=5, epochs=2, shuffle=False, verbose=0)
ev = two.evaluate(xs, ys, sample_weight=sw, batch_size=5, verbose=0, return_dict=True)
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as f:
    json.dump({"predict": np.concatenate([first, second]).tolist(),
               "weights": np.concatenate([w.ravel() for w in m.get_weights()]).tolist(),
               "sw_history": {key: [float(v) for v in vals] for key, vals in h.history.items()},
               "sw_evaluate": {key: float(v) for key, v in ev.items()},
               "sw_weights": np.concatenate([w.ravel() for w in two.get_weights()]).tolist()}, f)
