"""Data-parallel runs from Python under the launcher (2 ranks): Python callbacks see the same
global logs on every rank (and their own figures with aggregate_logs=False), run_on_all_ranks,
a Python map in the pipeline, predict on every rank, the same figures as one rank, and a Python
exception on one rank ends the job on every rank instead of hanging it."""
import json
import os

import numpy as np
import pytest

from conftest import HERE, launch, python

JOB = os.path.join(HERE, "dist_job.py")


def job(tmp_path, ranks, mode, check=True, reducer=None):
    d = tmp_path / f"{mode}_{ranks}_{reducer}"
    d.mkdir()
    r = launch(ranks, python([JOB, mode, str(d)] + ([reducer] if reducer else [])), timeout=240, check=check)
    return [json.load(open(d / f"rank_{i}.json")) for i in range(ranks) if (d / f"rank_{i}.json").exists()], r


def close(a, b, tol=1e-5):
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=tol, atol=tol, err_msg=key)


def test_callbacks_logs_and_predict_on_two_ranks(tmp_path):
    (one,), _ = job(tmp_path, 1, "train")
    two, _ = job(tmp_path, 2, "train")
    r0, r1 = two
    assert r0["size"] == r1["size"] == 2
    # every rank's callback sees the same global figures, which are the serial ones
    assert r0["global_epochs"] == r1["global_epochs"] and r0["global_batches"] == r1["global_batches"]
    for e in range(3):
        close(r0["global_epochs"][e], one["global_epochs"][e])
        assert r0["global_epochs"][e] == {k: v[e] for k, v in r0["history"].items()}
    close(r0["evaluate"], one["evaluate"])
    # aggregate_logs=False: each rank its own share of every batch (validation stays global)
    assert r0["local_batches"] != r1["local_batches"]
    assert r0["local_epochs"][0]["val_loss"] == r1["local_epochs"][0]["val_loss"] == r0["global_epochs"][0]["val_loss"]
    # run_on_all_ranks=False: the master only
    assert (r0["master_only_calls"], r1["master_only_calls"]) == (3, 0)
    # predict: every row on every rank (or on the master only)
    assert np.array_equal(r0["predict"], r1["predict"])
    np.testing.assert_allclose(r0["predict"], one["predict"], rtol=1e-5, atol=1e-6)
    assert (r0["predict_master_only"], r1["predict_master_only"]) == (96, 0)


def test_reducers_give_the_flat_weights(tmp_path):
    """tnt.Model(..., reducer=): node-aware and sharded training equal flat within 1e-6, the same
    on both ranks."""
    (f0, f1), _ = job(tmp_path, 2, "weights", reducer="flat")
    assert f0["weights"] == f1["weights"]
    for reducer in ("node", "sharded"):
        r0, r1 = job(tmp_path, 2, "weights", reducer=reducer)[0]
        assert r0["weights"] == r1["weights"]
        for a, b in zip(r0["weights"], f0["weights"]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=reducer)
        close(r0["history"], f0["history"], tol=1e-6)


def test_reducers_through_a_users_loop(tmp_path):
    """train_on_batch, get_weights, evaluate, fit, set_weights and a custom GradientTape step, one
    after another (the model stays in the node's shared window between calls and leaves it at a
    write): the default reducer (auto), node and sharded give flat's losses and weights within 1e-6."""
    (f0, f1), _ = job(tmp_path, 2, "loop", reducer="flat")
    assert f0["weights"] == f1["weights"]
    for reducer in (None, "node", "sharded"):
        r0, r1 = job(tmp_path, 2, "loop", reducer=reducer)[0]
        assert r0["weights"] == r1["weights"] and r0["losses"] == r1["losses"]
        for key in ("before", "weights"):
            for a, b in zip(r0[key], f0[key]):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=f"{reducer}: {key}")
        np.testing.assert_allclose(r0["losses"], f0["losses"], rtol=1e-6, atol=1e-7, err_msg=str(reducer))


def test_exception_on_one_rank_ends_the_job(tmp_path):
    """rank 1's callback raises after its epoch; rank 0 goes on, rank 1's fit raises the Python
    exception, and the library ends the whole job (at the latest at rank 1's finalize) instead of
    leaving rank 0 waiting for a partner that is gone."""
    results, r = job(tmp_path, 2, "fail", check=False)
    errors = {res["rank"]: res["error"] for res in results}
    assert errors.get(1) == "RuntimeError: rank 1 gives up"
    assert r.returncode != 0
    assert errors.get(0) or "aborting the job" in r.stderr, r.stderr[-2000:]
