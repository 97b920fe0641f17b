"""A custom training loop data-parallel, Horovod's way: on 2 ranks each rank runs the loop on its
shard of every global batch and tape.gradient averages the gradients over the ranks, so the weights
equal those of 1 rank on the global batches (1e-5), Dropout included (drawn by the global sample
index), and so does fit around a train_step of the user's."""
import json
import os

import numpy as np

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "tape_dist_job.py")


def job(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=240)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_tape_loop_on_2_ranks_equals_1_rank_on_the_global_batch(tmp_path):
    (one,) = job(tmp_path, 1)
    assert one["iterations"] == 4 and all(np.isfinite(one["losses"]))
    ranks = job(tmp_path, 2)
    for r in ranks:
        assert r["size"] == 2 and r["iterations"] == 4
        for a, b in zip(r["weights"], one["weights"]):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
        assert r["seen"] == [6] * 8 and one["seen"] == [12] * 8  # 4 global batches of 12, 2 epochs
        for a, b in zip(r["step_weights"], one["step_weights"]):  # fit around a train_step of the user's
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    # each rank's loss is its shard's mean: their mean is the global batch's loss
    np.testing.assert_allclose(np.mean([r["losses"] for r in ranks], axis=0), one["losses"], rtol=1e-5)
