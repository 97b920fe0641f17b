"""Shared models on 2 ranks (test_shared_models.py's GAN loop as tnt.Models): the losses and the
generator's and discriminator's final weights equal one rank's."""
import json
import os

import numpy as np

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "shared_dist_job.py")


def run(tmp_path, ranks):
    d = tmp_path / f"r{ranks}"
    d.mkdir()
    launch(ranks, python([JOB, str(d)]), timeout=240)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks)]


def test_gan_loop_on_two_ranks_equals_one(tmp_path):
    (one,) = run(tmp_path, 1)
    r0, r1 = run(tmp_path, 2)
    assert r0["size"] == 2
    np.testing.assert_allclose(r0["losses"], one["losses"], rtol=1e-5, atol=1e-6)
    for part in ("g", "d"):
        for a, b, c in zip(r0[part], r1[part], one[part]):
            np.testing.assert_array_equal(a, b)  # every rank holds the same weights
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6, err_msg=part)
    assert len({round(g, 6) for _, g in one["losses"]}) == 4  # the generator trained (its loss moves)
