"""Shared helpers of the Python package's tests (run by ctest: PYTHONPATH=build/python,
TNT_BUILD_DIR=build)."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("TNT_BUILD_DIR", os.path.join(REPO, "build"))
BIN = os.path.join(BUILD, "bin")
FASHION = "/usr/share/datasets/fashion-mnist"


def run(cmd, timeout=300, env=None, check=True):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def launch(n, args, timeout=300, env=None, check=True):
    """args run under the launcher on n ranks (one thread per rank)."""
    e = {"OMP_NUM_THREADS": "1"}
    e.update(env or {})
    return run([os.path.join(BIN, "tarantella"), "-n", str(n), "--"] + args, timeout=timeout, env=e, check=check)


def python(script_args):
    return [sys.executable] + list(script_args)


@pytest.fixture(scope="session")
def tnt():
    import tarantella
    tarantella.init()
    return tarantella


def small_mlp(tnt, name=None, inputs=8, classes=3):
    k = tnt.keras
    return k.Sequential([k.layers.Dense(16, activation="relu", input_shape=(inputs,)),
                         k.layers.Dense(classes, activation="softmax")], name=name)


def toy_data(n=64, inputs=8, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, inputs)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32) + (x[:, 1] > 0.5)
    return x, np.minimum(y, classes - 1).astype(np.float32)
