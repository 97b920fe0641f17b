#!/usr/bin/python3
"""make bench-ops (issue 22's benchmark): one Transformer encoder block trained at 1 thread, three
ways on the same model, batch, sequence and width (bench/encoder_block.py, bench/peers/torch_encoder.py):
  ops     the block written with keras.ops in a custom keras.layers.Layer (add_weight), traced
          into operations that the C engine runs and differentiates;
  layers  the same block built from the library's layers (MultiHeadAttention, LayerNormalization, Dense);
  torch   PyTorch eager (nn.TransformerEncoderLayer), OpenBLAS, threads pinned.
The three alternate, --rounds times (the machine is shared: the best of each), and the figures are
samples/s over wall time and over the CPU time of the process (steadier under load). Targets:
ops / layers >= 0.8 and ops / torch > 1. Prints Markdown."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
# as bench/run.py: no fresh pages per step for either side, OpenBLAS picks its own kernels
ENV = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


def cpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"Model name:\s*(.+)", out)
    n = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M)
    return f"{m.group(1).strip() if m else 'unknown'}, {n.group(1) if n else '?'} CPUs"


def run(cmd, env):
    env = {k: v for k, v in dict(os.environ, **env).items() if k != "OPENBLAS_CORETYPE"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}\n")
        return None
    m = re.search(r"samples_per_s=([0-9.]+) cpu_samples_per_s=([0-9.]+)", p.stdout)
    blas = re.search(r"blas=(\w+)", p.stdout)
    return (float(m.group(1)), float(m.group(2)), blas.group(1) if blas else None) if m else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=512)
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    shape = ["--batch", str(a.batch), "--seq", str(a.seq), "--width", str(a.width), "--heads", str(a.heads),
             "--ff", str(a.ff), "--steps", str(a.steps)]
    env = dict(ENV, PYTHONPATH=os.path.abspath(os.path.join(a.build, "python")))
    cmds = {"ops": [PY, os.path.join(ROOT, "bench", "encoder_block.py"), "--variant", "ops"] + shape,
            "layers": [PY, os.path.join(ROOT, "bench", "encoder_block.py"), "--variant", "layers"] + shape,
            "torch": [PY, os.path.join(ROOT, "bench", "peers", "torch_encoder.py"), "--threads", "1"] + shape}
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    best = {k: [0.0, 0.0] for k in cmds}
    blas = None
    for _ in range(a.rounds):
        for key, cmd in cmds.items():
            v = run(cmd, env)
            if v is None:
                continue
            best[key] = [max(best[key][0], v[0]), max(best[key][1], v[1])]
            if key == "torch":
                blas = v[2]
    print(f"### Transformer encoder block: keras.ops custom layer, library layers, PyTorch eager\n\n"
          f"CPU: {cpu()}; load {load} at the start; batch {a.batch}, sequence {a.seq}, width {a.width}, "
          f"{a.heads} heads, feed-forward {a.ff}; {a.steps} steps after 3 of warm-up; 1 thread; best of "
          f"{a.rounds} alternating runs; PyTorch BLAS: {blas}.\n")
    print("| figure | ops (custom Layer) | layers | PyTorch eager | ops / layers | ops / PyTorch |")
    print("|---|---|---|---|---|---|")
    for i, what in enumerate(["samples/s", "samples per CPU s"]):
        o, l, t = best["ops"][i], best["layers"][i], best["torch"][i]
        r1 = f"{o / l:.2f}" if o and l else "n/a"
        r2 = f"{o / t:.2f}" if o and t and blas != "reference" else "n/a"
        print(f"| {what} | {o:.1f} | {l:.1f} | {t:.1f} | {r1} | {r2} |")
    if blas == "reference":
        print("\nPyTorch runs on the reference BLAS (install libopenblas0-pthread): no ratio against it.")
    if not all(best[k][0] for k in cmds):
        sys.exit(1)


if __name__ == "__main__":
    main()
