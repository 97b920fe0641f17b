"""Issue 21, item 3, on 2 ranks: pipelines with Python-only tf.data ops, a keras.utils.Sequence and
a Python generator train with the same figures as on one rank (each global batch split exactly into the ranks'
shares)."""
import json
import os

import numpy as np

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "data_dist_job.py")


def run(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=240)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_python_pipelines_on_two_ranks_equal_one(tmp_path):
    (one,) = run(tmp_path, 1)
    r0, r1 = run(tmp_path, 2)
    assert r0["size"] == 2
    for key in ("zip_filter", "sequence", "generator", "padded"):
        assert r0[key] == r1[key], key  # every rank sees the global figures
        assert set(r0[key]) == set(one[key]), key
        for metric in one[key]:
            np.testing.assert_allclose(r0[key][metric], one[key][metric], rtol=1e-5, atol=1e-6, err_msg=key)
    assert len(one["sequence"]["loss"]) == 3 and all(np.isfinite(one["padded"]["loss"]))
