"""Installing the package: `make install`'s CMake rule (the package for this Python, finding the
library through its relative RUNPATH) and `pip install --no-build-isolation .` offline in a venv,
against the installed library (TARANTELLA_PREFIX)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, REPO, run

SMOKE = ("import numpy as np, tarantella as tnt; tnt.init(); k = tnt.keras; "
         "m = k.Sequential([k.layers.Dense(2, input_shape=(3,))]); m.compile('sgd', 'mse'); "
         "h = m.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0); print('OK', tnt.__file__, h.history['loss'][0])")


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", BUILD, "--prefix", str(p)])
    return p


def test_make_install_layout(prefix):
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    pkg = [d for d in site.iterdir()][0] / "tarantella"
    assert (pkg / "__init__.py").exists() and list(pkg.glob("_tarantella*.so"))
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(pkg.parent)!r}); " + SMOKE],
                       capture_output=True, text=True, env=clean_env(), cwd="/")
    assert r.returncode == 0 and "OK " + str(pkg) in r.stdout, r.stderr


def test_pip_install_offline_in_a_venv(prefix, tmp_path):
    src = tmp_path / "src"  # a copy of what setup.py needs: pip builds in the tree it is given
    src.mkdir()
    for f in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, f), src / f)
    shutil.copytree(os.path.join(REPO, "include"), src / "include")
    shutil.copytree(os.path.join(REPO, "python"), src / "python", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    env = dict(clean_env(), TARANTELLA_PREFIX=str(prefix))
    run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", str(src)], env=env,
        timeout=600)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", SMOKE], capture_output=True, text=True, env=clean_env(),
                       cwd="/")
    assert r.returncode == 0 and "OK " + str(venv) in r.stdout, r.stdout + r.stderr
