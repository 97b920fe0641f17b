"""Run by test_objectives.py under the launcher: objectives_job.py OUT_DIR. For every loss of
objectives_cases.py (outputs of rank 3 and 4) a data-parallel model is trained for 2 epochs and
evaluated; also with global batches of 2 and 1 (smaller than the ranks). Each rank writes
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
with open(os.path.join(out, f"rank_{tnt.get_rank()}.json"), "w") as fh:
    json.dump({"rank": tnt.get_rank(), "figures": figures}, fh)
