"""Run by test_objectives.py under the launcher: objectives_job.py OUT_DIR. For every loss of
objectives_cases.py (outputs of rank 3 and 4) a data-parallel model is trained for 2 epochs and
evaluated; also with global batches of 2 and 1 (smaller than the ranks), and with sample and class
weights. Each rank writes
OUT_DIR/rank_<r>.json with the History, the evaluation and a checksum of the weights."""
import json
import os
import sys

import numpy as np

import tarantella as tnt
from objectives_cases import CASES, data, metrics, model

tnt.init()
out = sys.argv[1]
k = tnt.keras
figures = {}
for loss in sorted(CASES):
    for rank, batch in ((3, 8), (4, 8), (3, 2), (3, 1)):
        if batch < 8 and loss not in ("categorical_crossentropy", "huber"):
            continue
        x, y = data(loss, rank)
        m = tnt.Model(model(k, loss, rank))
        m.compile(k.optimizers.SGD(0.05, momentum=0.5), loss=loss, metrics=metrics(k, loss))
        h = m.fit(x, y, batch_size=batch, epochs=2, shuffle=False, verbose=0)
        ev = m.evaluate(x, y, batch_size=batch, verbose=0, return_dict=True)
        w = m.get_weights()
        f = {f"fit_{key}": [float(v) for v in vals] for key, vals in h.history.items()}
        f.update({f"eval_{key}": float(v) for key, v in ev.items()})
        f["weights"] = [float(a.astype(np.float64).sum()) for a in w] + [float(w[0].ravel()[0])]
        figures[f"{loss}/rank{rank}/batch{batch}"] = f
# sample weights (metrics unweighted, weighted_metrics weighted) and class weights, also with batches smaller than the ranks
for loss, batch in (("categorical_crossentropy", 8), ("categorical_crossentropy", 2), ("mean_squared_error", 8)):
    x, y = data(loss, 3)
    w = np.linspace(0.0, 2.0, len(x)).astype(np.float32)
    m = tnt.Model(model(k, loss, 3))
    weighted = metrics(k, loss)  # a few of them weighted too (the logs hold 16 figures)
    weighted = [weighted[i] for i in ((0, -1) if loss == "categorical_crossentropy" else (0, 2, -1))]
    m.compile(k.optimizers.SGD(0.05), loss=loss, metrics=metrics(k, loss), weighted_metrics=weighted)
    h = m.fit(x, y, sample_weight=w, batch_size=batch, epochs=2, shuffle=False, verbose=0,
              validation_data=(x, y, w[::-1].copy()))
    ev = m.evaluate(x, y, sample_weight=w, batch_size=batch, verbose=0, return_dict=True)
    f = {f"fit_{key}": [float(v) for v in vals] for key, vals in h.history.items()}
    f.update({f"eval_{key}": float(v) for key, v in ev.items()})
    f["weights"] = [float(a.astype(np.float64).sum()) for a in m.get_weights()]
    figures[f"weighted/{loss}/batch{batch}"] = f
x = np.random.default_rng(5).standard_normal((30, 6)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.float32) + (x[:, 1] > 0.5)
m = tnt.Model(k.Sequential([k.layers.Dense(5, activation="tanh", input_shape=(6,)),
                            k.layers.Dense(3, activation="softmax")]))
m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
h = m.fit(x, y, class_weight={0: 1.0, 1: 2.5, 2: 0.5}, batch_size=4, epochs=2, shuffle=False, verbose=0)
figures["class_weight"] = {f"fit_{key}": [float(v) for v in vals] for key, vals in h.history.items()}
figures["class_weight"]["weights"] = [float(a.astype(np.float64).sum()) for a in m.get_weights()]
# a loss per output (a softmax sequence and a regression), per-output metrics and loss weights
inp = k.Input((4, 3))
h = k.layers.Dense(6, activation="tanh")(inp)
m = tnt.Model(k.Model(inp, [k.layers.Dense(5, activation="softmax", name="seq")(h), k.layers.Dense(2, name="reg")(h)]))
m.compile(k.optimizers.SGD(0.05), loss={"seq": "categorical_crossentropy", "reg": "huber"}, loss_weights=[1.0, 0.3],
          metrics={"seq": ["accuracy", k.metrics.Precision(thresholds=0.3)], "reg": "mae"})
xs, ys = data("categorical_crossentropy", 3)
yr = np.random.default_rng(9).standard_normal((len(xs), 4, 2)).astype(np.float32)
h = m.fit(xs, [ys, yr], batch_size=4, epochs=2, shuffle=False, verbose=0)
figures["per_output"] = {f"fit_{key}": [float(v) for v in vals] for key, vals in h.history.items()}
figures["per_output"]["weights"] = [float(a.astype(np.float64).sum()) for a in m.get_weights()]
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as fh:
    json.dump({"rank": tnt.get_rank(), "figures": figures}, fh)
