#!/usr/bin/python3
"""make bench-loops: Keras training loops outside one long fit (bench/keras_loops.py), as Keras
programs write them: train_on_batch and fit(epochs=1) of one batch on the MLP, a GAN step
(generator.predict, two discriminator.train_on_batch, the combined model's train_on_batch), and
transfer learning (a frozen ResNet-50 base under a new head, train_on_batch), on 1
rank and 2 ranks x 1 thread (build/bin/tarantella -n 2, the default reducer), beside the same
loops in eager PyTorch at 1 thread (bench/peers/torch_loops.py, OpenBLAS, pinned threads). The
runs alternate; each figure is the best of --reps. Prints Markdown: ms per step (lower is
better), the 2-rank speed-up, and our 1 rank against PyTorch."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ONE_THREAD, PEER_ENV, PY, ROOT, finish, machine, openblas_core, start  # noqa: E402

LOOPS = [("mlp_tob", "MLP 784-4096x3-10, batch 64: train_on_batch", 20),
         ("mlp_fit1", "MLP 784-4096x3-10, batch 64: fit(epochs=1) of one batch", 20),
         ("gan", "GAN (Dense 1024 x 2 each), batch 64: predict + 3 x train_on_batch", 30),
         ("transfer", "frozen ResNet-50 base + Dense head, 96x96, batch 16: train_on_batch", 6)]


def ms(r):
    return float(r["ms_per_step"]) if r and "ms_per_step" in r else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    launcher = os.path.join(a.build, "bin", "tarantella")
    ours = os.path.join(ROOT, "bench", "keras_loops.py")
    peer = os.path.join(ROOT, "bench", "peers", "torch_loops.py")
    env = dict(ONE_THREAD, PYTHONPATH=os.path.join(a.build, "python"))
    print("## make bench-loops\n")
    model, isa = machine()
    print(f"Machine: {model}, {os.cpu_count()} cores; ISA: {', '.join(isa)}; load average at start "
          f"{os.getloadavg()[0]:.2f}. Peer's OpenBLAS kernels: {openblas_core()}.\n")
    print("| loop | ours, 1 rank (ms/step) | ours, 2 ranks (ms/step) | 2 ranks against 1 | PyTorch, 1 thread (ms/step) "
          "| ours 1 rank against PyTorch |")
    print("|---|---|---|---|---|---|")
    for name, label, steps in LOOPS:
        best = {}
        for _ in range(a.reps):
            for key, cmd, e in (
                    ("one", [launcher, "-n", "1", "-x", "OMP_NUM_THREADS=1", "--", PY, ours, "--model", name, "--steps", str(steps)], env),
                    ("two", [launcher, "-n", "2", "-x", "OMP_NUM_THREADS=1", "--", PY, ours, "--model", name,
                             "--steps", str(steps)], env),
                    ("peer", [PY, peer, "--model", name, "--steps", str(steps), "--threads", "1"], PEER_ENV)):
                r = finish(start(cmd, e), cmd)
                if ms(r) and (key not in best or ms(r) < ms(best[key])):
                    best[key] = r
        one, two, torch = (ms(best.get(k)) for k in ("one", "two", "peer"))
        f = lambda v: f"{v:.1f}" if v else "n/a"
        ratio = lambda x, y: f"{x / y:.2f}x" if x and y else "n/a"
        blas = best.get("peer", {}).get("blas", "?")
        print(f"| {label} | {f(one)} | {f(two)} | {ratio(one, two)} | {f(torch)} ({blas}) | {ratio(torch, one)} |",
              flush=True)


if __name__ == "__main__":
    main()
