#!/usr/bin/python3
"""make bench: runs this project's benchmarks and the PyTorch peers (../shared/bench, or
bench/peers/ when absent) side by side in one run, and prints a Markdown table of samples/s,
ratios and peak RSS (ru_maxrss of each run's process tree)."""
import os, re, subprocess, sys, resource, argparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def run(cmd, env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out, err = "", ""
    _, status, usage = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{out}\n{err}\n")
        return None, None
    m = re.search(r"samples_per_s=([0-9.]+)", out)
    return (float(m.group(1)) if m else None), usage.ru_maxrss / 1024.0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    a = ap.parse_args()
    peers = os.path.join(ROOT, "..", "shared", "bench")
    if not os.path.isdir(peers): peers = os.path.join(ROOT, "bench", "peers")
    have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    tnt = os.path.join(a.build, "bin", "bench_train")
    q = a.quick
    configs = [  # (label, model, tnt args, torch script args)
        ("LeNet-5 (batch 64, Fashion-MNIST)", "lenet5", ["--steps", "100" if q else "300", "--warmup", "20"],
         ["torch_lenet5.py", "--steps", "100" if q else "300"]),
        ("MLP 784-4096x3-10 (batch 64, synthetic)", "mlp", ["--steps", "8" if q else "20", "--warmup", "3"],
         ["torch_models.py", "--model", "mlp", "--steps", "8" if q else "20"]),
    ]
    rows = []
    for label, model, targs, pargs in configs:
        for threads in (1, 2):
            env = {"OMP_NUM_THREADS": str(threads)}
            ours, our_rss = run([tnt, "--model", model] + targs, env)
            theirs, their_rss = (None, None)
            if have_torch:
                theirs, their_rss = run(["/usr/bin/python3", os.path.join(peers, pargs[0])] + pargs[1:] +
                                        ["--threads", str(threads)], env)
            rows.append((label, threads, ours, theirs, our_rss, their_rss))
            print(f"# {label} threads={threads}: tnt {ours} torch {theirs}", file=sys.stderr, flush=True)
    print("| model | threads | tarantella samples/s | PyTorch samples/s | ratio | peak RSS tnt / torch (MiB) |")
    print("|---|---|---|---|---|---|")
    f = lambda v, d=1: "n/a" if v is None else f"{v:.{d}f}"
    for label, th, ours, theirs, rss, trss in rows:
        ratio = f"{ours / theirs:.2f}x" if ours and theirs else "n/a"
        print(f"| {label} | {th} | {f(ours)} | {f(theirs)} | {ratio} | {f(rss, 0)} / {f(trss, 0)} |")

if __name__ == "__main__":
    main()
