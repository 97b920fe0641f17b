"""examples/python/quick_start.py against the C quick start (build/bin/lenet5) on the same flags,
on 1 and 2 ranks: every epoch's figures and the test figures agree to 1e-6."""
import os

import pytest

from conftest import BIN, FASHION, REPO, launch, python, run

FLAGS = ["--train_size=1000", "--val_size=200", "--test_size=500", "--number_epochs=2", "--batch_size=64",
         "--verbose=0"]
QUICK_START = os.path.join(REPO, "examples", "python", "quick_start.py")


def read_history(path):
    out = {}
    with open(path) as f:
        for line in f:
            name, epoch, value = line.split()
            out[(name, int(epoch))] = float(value)
    return out


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="needs Debian's dataset-fashion-mnist")
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_quick_start_equals_c(tmp_path, ranks, optimizer):
    flags = FLAGS + [f"--optimizer={optimizer}", "--learning_rate=0.001" if optimizer == "adam" else "--momentum=0.9"]
    c_hist, py_hist = tmp_path / "c.txt", tmp_path / "py.txt"
    c = [os.path.join(BIN, "lenet5")] + flags + [f"--history_file={c_hist}"]
    py = python([QUICK_START] + flags + [f"--history_file={py_hist}"])
    if ranks == 1:
        run(c, env={"OMP_NUM_THREADS": "1"})
        out = run(py, env={"OMP_NUM_THREADS": "1"}).stdout
    else:
        launch(ranks, c)
        out = launch(ranks, py).stdout
    assert f"({500} images, {ranks} rank(s))" in out
    a, b = read_history(c_hist), read_history(py_hist)
    assert set(a) == set(b) and len(a) == 4 * 2 + 2  # loss, accuracy, val_ twice per epoch; the test pair
    for key in a:
        assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1e-6), key
