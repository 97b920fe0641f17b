#!/usr/bin/python3
"""make bench-python: the Tarantella quick start from Python (examples/python/quick_start.py)
against the C program (build/bin/lenet5) on the same flags: training throughput as each program
reports it, epochs x train_size samples over fit's wall time (samples/s) and over the CPU time
the master process spent in fit, all its threads (samples per CPU second: steadier than wall time
on a shared machine), on 1 rank x 1 thread and 2 ranks x 1 thread (build/bin/tarantella -n 2).
The runs alternate and each figure is the best of --reps. Then the two programs run side by side,
started together --reps times, so that both see the same load: the median of the per-pair
ratios of their wall-time throughput. Then LeNet-5 fed by a tnt.data pipeline (from_tensor_slices
of the uint8 images, shuffle, map with a Python function that scales them, batch, prefetch)
against fit on the same data as in-memory float arrays, alternating, best of --reps. Prints
Markdown."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
ENV = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


def cpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"Model name:\s*(.+)", out)
    n = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M)
    return f"{m.group(1).strip() if m else 'unknown'}, {n.group(1) if n else '?'} CPUs"


def start(cmd, env):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **env))


def finish(p, cmd):
    """(samples/s, samples per CPU second) as the program prints them, or None."""
    out, err = p.communicate()
    if p.returncode != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{out[-2000:]}\n{err[-2000:]}\n")
        return None
    m = re.search(r"training: ([0-9.]+) samples/s, ([0-9.]+) samples per CPU second", out)
    return (float(m.group(1)), float(m.group(2))) if m else None


def throughput(cmd, env):
    return finish(start(cmd, env), cmd)


# LeNet-5 (the quick start's model) trained one epoch from in-memory arrays or from a pipeline
# whose map runs a Python function per sample; prints the throughput as the quick start does
PIPELINE = r"""
import sys, time
import numpy as np
import tarantella as tnt
from tarantella import keras
sys.path.insert(0, sys.argv[4])
from quick_start import lenet5_model_generator
tnt.init()
mode, n, bs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
(x, y), _ = keras.datasets.fashion_mnist.load_data()
x, y = x[:n].reshape(-1, 28, 28, 1), y[:n].astype(np.float32)
model = tnt.Model(lenet5_model_generator())
model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
scale = np.float32(1.0 / 255.0)
if mode == "arrays":
    xs = x.astype(np.float32) * scale
    args = dict(x=xs, y=y, batch_size=bs, shuffle=True)
else:
    def prepare(image, label):  # the user's Python function, run on every sample
        return image.astype(np.float32) * scale, label
    ds = tnt.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=42).map(
        prepare, num_parallel_calls=tnt.data.AUTOTUNE).batch(bs).prefetch(tnt.data.AUTOTUNE)
    args = dict(x=ds)
start, cpu = time.perf_counter(), time.process_time()
model.fit(epochs=1, verbose=0, **args)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(f"training: {n / seconds:.1f} samples/s, {n / cpu:.1f} samples per CPU second")
"""


def pipeline_section(a, env):
    print(f"\n### A tnt.data pipeline with a Python map against in-memory arrays\n\nLeNet-5, {a.train_size} "
          f"Fashion-MNIST images, batch {a.batch_size}, 1 rank x 1 thread, one epoch; best of {a.reps} alternating "
          f"runs.\n")
    print("| feed | samples/s | samples per CPU s |")
    print("|---|---|---|")
    examples = os.path.join(ROOT, "examples", "python")
    best = {}
    for _ in range(a.reps):
        for mode in ("arrays", "map"):
            cmd = [PY, "-c", PIPELINE, mode, str(a.train_size), str(a.batch_size), examples]
            v = throughput(cmd, env)
            if v:
                best[mode] = tuple(max(x, y) for x, y in zip(best.get(mode, v), v))
    for mode, what in (("arrays", "in-memory arrays (fit(x, y))"), ("map", "from_tensor_slices, shuffle, "
                                                                            "map(Python fn), batch, prefetch")):
        v = best.get(mode)
        print(f"| {what} | {v[0]:.1f} | {v[1]:.1f} |" if v else f"| {what} | n/a | n/a |")
    if "arrays" in best and "map" in best:
        print(f"\npipeline / arrays: {best['map'][0] / best['arrays'][0]:.3f} (wall), "
              f"{best['map'][1] / best['arrays'][1]:.3f} (CPU)")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--train_size", type=int, default=6400)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--ranks", default="1,2", help="rank counts of the quick start part ('' for none)")
    p.add_argument("--no_pipeline", action="store_true", help="leave out the tnt.data pipeline part")
    a = p.parse_args()
    flags = [f"--train_size={a.train_size}", f"--number_epochs={a.epochs}", f"--batch_size={a.batch_size}",
             "--val_size=0", "--test_size=0", "--verbose=0"]
    c = [os.path.join(a.build, "bin", "lenet5")] + flags
    py = [PY, os.path.join(ROOT, "examples", "python", "quick_start.py")] + flags
    env = dict(ENV, PYTHONPATH=os.path.join(a.build, "python"))
    launcher = os.path.join(a.build, "bin", "tarantella")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"### The quick start from Python against C\n\nCPU: {cpu()}; load {load} at the start; "
          f"LeNet-5 on Fashion-MNIST, {' '.join(flags)}; best of {a.reps} alternating runs; 1 thread per rank.\n")
    print("| ranks | C lenet5 samples/s | Python samples/s | Python / C | C samples per CPU s | "
          "Python samples per CPU s | Python / C | side by side: Python / C (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for ranks in [int(r) for r in a.ranks.split(",") if r]:
        best = {"c": [None, None], "py": [None, None]}
        for _ in range(a.reps):
            for key, cmd in (("c", c), ("py", py)):
                full = cmd if ranks == 1 else [launcher, "-n", str(ranks), "--"] + cmd
                v = throughput(full, env)
                for i in range(2):
                    if v and (best[key][i] is None or v[i] > best[key][i]):
                        best[key][i] = v[i]
        pairs = []
        for _ in range(a.reps):
            cmds = [cmd if ranks == 1 else [launcher, "-n", str(ranks), "--"] + cmd for cmd in (c, py)]
            procs = [start(cmd, env) for cmd in cmds]
            rc, rp = (finish(p, cmd) for p, cmd in zip(procs, cmds))
            if rc and rp:
                pairs.append(rp[0] / rc[0])
        pairs.sort()
        cells = []
        for i in range(2):
            c_v, p_v = best["c"][i], best["py"][i]
            cells += ["n/a" if c_v is None else f"{c_v:.1f}", "n/a" if p_v is None else f"{p_v:.1f}",
                      f"{p_v / c_v:.3f}" if c_v and p_v else "n/a"]
        cells.append(f"{pairs[len(pairs) // 2]:.3f} ({len(pairs)} pairs)" if pairs else "n/a")
        print(f"| {ranks} | " + " | ".join(cells) + " |")
        sys.stdout.flush()
    if not a.no_pipeline:
        pipeline_section(a, env)

if __name__ == "__main__":
    main()
