"""A model with a traced custom layer (add_weight with MaxNorm and NonNeg constraints, keras.ops,
Dropout drawn by the global sample index) and symbolic arithmetic trains data-parallel on 1, 2 and
3 ranks to the same weights (issue 22)."""
import json
import os

import numpy as np

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "traced_dist_job.py")


def job(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=240)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_traced_model_on_1_2_3_ranks_equals_serial(tmp_path):
    (one,) = job(tmp_path, 1)
    assert one["loss"][-1] < one["loss"][0]
    w, b = (np.asarray(v) for v in one["weights"][:2])  # the custom layer's constrained weights
    assert np.sqrt((w ** 2).sum(0)).max() <= 0.8 + 1e-5 and (b >= 0).all() and (b == 0).any()
    for n in (2, 3):
        ranks = job(tmp_path, n)
        for r in ranks:
            assert r["size"] == n
            np.testing.assert_allclose(r["loss"], one["loss"], rtol=1e-5, atol=1e-6)
            for a, b in zip(r["weights"], one["weights"]):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
