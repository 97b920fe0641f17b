#!/usr/bin/python3
"""make bench: this project's training benchmarks beside the PyTorch peers (../shared/bench, or
bench/peers/), measured in the same run. Prints Markdown tables:
  1. one process: samples/s at 1 and 2 threads, ratio to PyTorch, peak RSS;
  2. data parallel: 2 ranks x 1 thread against 1 rank x 1 thread, beside PyTorch DDP (gloo);
  3. fused allreduce bandwidth against one plain MPI_Allreduce of the same bytes;
  4. a fusion-threshold sweep, with the share of allreduce time hidden behind backward;
  5. the two comm engines (comm thread, nonblocking collectives);
  6. ResNet-50 (batch 16, synthetic 224x224, 1 thread): against PyTorch (torchvision), and 2 ranks
     against 1 with peak RSS per rank (one run each: a step takes seconds; --resnet-only runs just
     this table, --no-resnet skips it);
  7. the Transformer encoder classifier of torch_models.py --model transformer (batch 32, seq 128,
     1 thread): against PyTorch, and 2 ranks against 1 with peak RSS per rank (--transformer-only
     runs just this table, --no-transformer skips it).
The machine is shared and noisy: each of our figures is the best of --reps runs, taken in
alternation, so that ratios compare like with like."""
import argparse, os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--bind-to", "none", "--oversubscribe"]

def run(cmd, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out, err = p.communicate()
    if p.returncode != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{out}\n{err}\n")
        return None
    fields = dict(re.findall(r"(\w+)=([0-9.]+)", out))
    fields["maxrss_mb"] = None
    return fields

def rss_run(cmd, env_extra):
    """samples/s and peak RSS (ru_maxrss of the process, MiB)."""
    env = dict(os.environ, **env_extra)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{out}\n")
        return None, None
    m = re.search(r"samples_per_s=([0-9.]+)", out)
    return (float(m.group(1)) if m else None), usage.ru_maxrss / 1024.0

def best(cmds, reps):
    """Runs each command reps times in alternation; returns the best samples/s run of each."""
    results = [None] * len(cmds)
    for _ in range(reps):
        for i, (cmd, env) in enumerate(cmds):
            r = run(cmd, env)
            if r and "samples_per_s" in r and (results[i] is None or
                                               float(r["samples_per_s"]) > float(results[i]["samples_per_s"])):
                results[i] = r
    return results

def f(v, d=1):
    return "n/a" if v is None else f"{float(v):.{d}f}"

def ratio(a, b):
    return f"{float(a) / float(b):.2f}x" if a and b else "n/a"

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-resnet", action="store_true")
    ap.add_argument("--resnet-only", action="store_true")
    ap.add_argument("--no-transformer", action="store_true")
    ap.add_argument("--transformer-only", action="store_true")
    a = ap.parse_args()
    peers = os.path.join(ROOT, "..", "shared", "bench")
    if not os.path.isdir(peers): peers = os.path.join(ROOT, "bench", "peers")
    torch = not a.no_torch and subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    tnt = os.path.join(a.build, "bin", "bench_train")
    lenet = ["--model", "lenet5", "--steps", "200", "--warmup", "20"]
    mlp = ["--model", "mlp", "--steps", "12", "--warmup", "3"]
    tl = lambda *x: ["/usr/bin/python3", os.path.join(peers, "torch_lenet5.py"), "--steps", "200"] + list(x)
    tm = lambda *x: ["/usr/bin/python3", os.path.join(peers, "torch_models.py"), "--model", "mlp", "--steps", "6", "--warmup", "1"] + list(x)
    out = []
    if not a.resnet_only and not a.transformer_only:
        generic_tables(a, out, tnt, torch, lenet, mlp, tl, tm)
    if not a.no_resnet and not a.transformer_only:
        resnet_tables(a, out, tnt, torch, peers)
    if not a.no_transformer and not a.resnet_only:
        transformer_tables(a, out, tnt, torch, peers)
    print("\n".join(out))

def transformer_tables(a, out, tnt, torch, peers):
    """The encoder classifier of torch_models.py --model transformer (zoo/transformer.h),
    global batch 32, SGD(0.01, momentum 0.9), 1 thread per process: 1 process against PyTorch, and
    2 ranks against 1 rank (mpirun both); ours best of --reps runs in alternation. Peak RSS: our
    rank 0's own ru_maxrss (the ranks are alike); PyTorch's process. The peer takes tens of seconds
    per step (Debian's torch has BLAS_INFO=generic), so it runs 1 warm-up + 2 timed steps once."""
    env1 = {"OMP_NUM_THREADS": "1"}
    tt = ["--model", "transformer", "--batch", "32", "--steps", "10", "--warmup", "2"]
    out.append("\n### Transformer encoder classifier (5.24M parameters), batch 32, seq 128, 1 thread per process\n")
    out.append("| run | tarantella samples/s | against | its samples/s | ratio | peak RSS per rank tnt / other (MiB) |")
    out.append("|---|---|---|---|---|---|")
    serial, one, two = best([([tnt] + tt, env1), (MPIRUN + ["-np", "1", tnt] + tt, env1),
                             (MPIRUN + ["-np", "2", tnt] + tt, env1)], a.reps)
    theirs, trss = (rss_run(["/usr/bin/python3", os.path.join(peers, "torch_models.py"), "--model", "transformer",
                             "--threads", "1", "--batch", "32", "--steps", "2", "--warmup", "1"], env1)
                    if torch else (None, None))
    g = lambda r, k: r and r.get(k)
    out.append(f"| 1 process x 1 thread | {f(g(serial, 'samples_per_s'))} | PyTorch, 1 thread | {f(theirs)} | "
               f"{ratio(g(serial, 'samples_per_s'), theirs)} | {f(g(serial, 'rank0_maxrss_mb'), 0)} / {f(trss, 0)} |")
    out.append(f"| 2 ranks x 1 thread (global batch 32) | {f(g(two, 'samples_per_s'))} | 1 rank x 1 thread (mpirun) | "
               f"{f(g(one, 'samples_per_s'))} | {ratio(g(two, 'samples_per_s'), g(one, 'samples_per_s'))} | "
               f"{f(g(two, 'rank0_maxrss_mb'), 0)} / {f(g(one, 'rank0_maxrss_mb'), 0)} |")
    print("\n".join(out[-2:]), file=sys.stderr, flush=True)

def resnet_tables(a, out, tnt, torch, peers):
    """ResNet-50, global batch 16, synthetic 224x224 images, SGD(0.01, momentum 0.9), 1 thread per
    process; 2 warm-up + 5 timed steps, one run of each (peak RSS from the same run). Under mpirun
    the peak RSS is the largest process of the tree: one rank's."""
    args = ["--model", "resnet50", "--batch", "16", "--warmup", "2", "--steps", "5"]
    peer = lambda *x: ["/usr/bin/python3", os.path.join(peers, "torch_models.py"), "--model", "resnet50", "--batch", "16",
                       "--warmup", "2", "--steps", "5"] + list(x)
    env1 = {"OMP_NUM_THREADS": "1"}
    out.append("\n### ResNet-50 (25.6M parameters), batch 16, synthetic 224x224, 1 thread per process\n")
    out.append("| run | tarantella samples/s | PyTorch samples/s | ratio | peak RSS tnt / torch (MiB) |")
    out.append("|---|---|---|---|---|")
    ours, rss = rss_run([tnt] + args, env1)
    theirs, trss = rss_run(peer("--threads", "1"), env1) if torch else (None, None)
    out.append(f"| 1 process x 1 thread | {f(ours)} | {f(theirs)} | {ratio(ours, theirs)} | {f(rss, 0)} / {f(trss, 0)} |")
    print(out[-1], file=sys.stderr, flush=True)
    one, rss1 = rss_run(MPIRUN + ["-np", "1", tnt] + args, env1)
    two, rss2 = rss_run(MPIRUN + ["-np", "2", tnt] + args, env1)
    p2, prss2 = rss_run(peer("--threads", "1", "--ddp", "2"), env1) if torch else (None, None)
    out.append(f"| tnt 1 rank x 1 thread (mpirun) | {f(one)} | | | {f(rss1, 0)} / |")
    out.append(f"| 2 ranks x 1 thread (global batch 16) | {f(two)} | {f(p2)} (DDP) | {ratio(two, p2)} | "
               f"{f(rss2, 0)} per rank / {f(prss2, 0)} |")
    out.append(f"\nResNet-50 data-parallel speed-up, 2 ranks against 1: tarantella {ratio(two, one)}, "
               f"PyTorch DDP {ratio(p2, theirs)}.")
    print("\n".join(out[-3:]), file=sys.stderr, flush=True)

def generic_tables(a, out, tnt, torch, lenet, mlp, tl, tm):
    out.append("### One process\n")
    out.append("| model | threads | tarantella samples/s | PyTorch samples/s | ratio | peak RSS tnt / torch (MiB) |")
    out.append("|---|---|---|---|---|---|")
    for label, args, peer in (("LeNet-5, batch 64, Fashion-MNIST", lenet, tl), ("MLP 784-4096x3-10, batch 64", mlp, tm)):
        for th in (1, 2):
            env = {"OMP_NUM_THREADS": str(th)}
            ours = best([([tnt] + args, env)], a.reps)[0]
            _, rss = rss_run([tnt] + args, env)
            theirs, trss = rss_run(peer("--threads", str(th)), env) if torch else (None, None)
            out.append(f"| {label} | {th} | {f(ours and ours['samples_per_s'])} | {f(theirs)} | "
                       f"{ratio(ours and ours['samples_per_s'], theirs)} | {f(rss, 0)} / {f(trss, 0)} |")
            print(out[-1], file=sys.stderr, flush=True)

    out.append("\n### Data parallel: 2 ranks x 1 thread against 1 rank x 1 thread (same global batch 64)\n")
    out.append("| model | tnt 1 rank | tnt 2 ranks | tnt speed-up | allreduce hidden | PyTorch 1 | PyTorch DDP 2 | DDP speed-up |")
    out.append("|---|---|---|---|---|---|---|---|")
    env1 = {"OMP_NUM_THREADS": "1"}
    for label, args, peer in (("LeNet-5", lenet, tl), ("MLP 36.8M", mlp, tm)):
        one, two = best([(MPIRUN + ["-np", "1", tnt] + args, env1), (MPIRUN + ["-np", "2", tnt] + args, env1)], a.reps)
        p1 = p2 = None
        if torch:
            r1, r2 = run(peer("--threads", "1"), env1), run(peer("--threads", "1", "--ddp", "2"), env1)
            p1, p2 = r1 and r1.get("samples_per_s"), r2 and r2.get("samples_per_s")
        out.append(f"| {label} | {f(one and one['samples_per_s'])} | {f(two and two['samples_per_s'])} | "
                   f"{ratio(two and two['samples_per_s'], one and one['samples_per_s'])} | "
                   f"{f(two and two.get('hidden'), 2)} | {f(p1)} | {f(p2)} | {ratio(p2, p1)} |")
        print(out[-1], file=sys.stderr, flush=True)

    out.append("\n### Fused allreduce against one plain MPI_Allreduce of the same bytes (2 ranks, best of 20)\n")
    out.append("| gradient buffer | buckets | fused GB/s | MPI_Allreduce GB/s | fused / plain |")
    out.append("|---|---|---|---|---|")
    for label, args in (("LeNet-5, 5.0 MB", ["--model", "lenet5", "--steps", "5", "--warmup", "2", "--allreduce", "20"]),
                        ("MLP, 147 MB", ["--model", "mlp", "--steps", "1", "--warmup", "1", "--allreduce", "5"])):
        r = run(MPIRUN + ["-np", "2", tnt] + args, env1)
        if r:
            out.append(f"| {label} | {r['buckets']} | {f(r['fused_GBps'], 2)} | {f(r['plain_GBps'], 2)} | {f(r['ratio'], 2)} |")

    out.append("\n### Fusion threshold sweep (LeNet-5, 2 ranks x 1 thread)\n")
    out.append("| TNT_FUSION_THRESHOLD_KB | buckets | samples/s | allreduce hidden |")
    out.append("|---|---|---|---|")
    kbs = ["0", "4", "32", "256", "1048576"]
    res = best([(MPIRUN + ["-np", "2", tnt] + lenet, dict(env1, TNT_FUSION_THRESHOLD_KB=kb)) for kb in kbs], a.reps)
    for kb, r in zip(kbs, res):
        out.append(f"| {kb} | {r and r['buckets']} | {f(r and r['samples_per_s'])} | {f(r and r['hidden'], 2)} |")

    out.append("\n### Comm engine (LeNet-5, 2 ranks x 1 thread)\n")
    out.append("| TNT_COMM_MODE | samples/s | allreduce hidden |")
    out.append("|---|---|---|")
    modes = ["thread", "nonblocking"]
    res = best([(MPIRUN + ["-np", "2", tnt] + lenet, dict(env1, TNT_COMM_MODE=m)) for m in modes], a.reps)
    for m, r in zip(modes, res):
        out.append(f"| {m} | {f(r and r['samples_per_s'])} | {f(r and r['hidden'], 2)} |")

if __name__ == "__main__":
    main()
