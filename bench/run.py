#!/usr/bin/python3
"""make bench: this project's training throughput beside PyTorch's (bench/peers/, copies of the
shared peer scripts), measured in the same run, against the machine's own matmul ceiling.
Prints Markdown:
  0. the machine: CPU model, the ISA flags that matter (avx512f, avx512_bf16, amx), the load;
  1. the ceiling: oneDNN matmul GFLOP/s at 1 thread, 2048^3, f32 and (where the CPU has it) bf16
     (build/bin/matmul_ceiling);
  2. one process x 1 thread per model (LeNet-5, MLP, Transformer, ResNet-50): our samples/s,
     PyTorch's, the ratio, and the share of the f32 ceiling reached: FLOPs per sample are
     3 x the forward multiply-adds x 2, the multiply-adds counted from the model by bench_train;
  2b. mixed precision (where the CPU computes bf16): each model under Keras's mixed_bfloat16
     policy (bench_train --mixed_bfloat16) beside float32, and PyTorch's
     torch.cpu.amp.autocast(dtype=torch.bfloat16) beside its float32, all four alternating in the
     runs of table 2; our bf16 speed-up by wall clock and by CPU time (the machine is shared: CPU
     time is what this process got), and the share of the bf16 ceiling reached;
  3. data parallel: 2 ranks x 1 thread (build/bin/tarantella -n 2) against 1 rank x 1 thread,
     at fusion thresholds 0, 32, 1024 and 65536 KB and with bf16 gradient compression (the flat reducer), and
     with the default reducer (auto: node-aware with the sharded optimizer on the CPU), beside two independent 1-rank runs
     started at the same time (what 2 cores give at all, with no communication);
  4. the fused allreduce against one plain MPI_Allreduce of the same bytes.
--isa avx2 (make bench-avx2): an AVX2 machine (Zen 3, Haswell) on this one: our kernels capped by
ONEDNN_MAX_CPU_ISA=AVX2, the peer's too (its OpenBLAS on its Haswell kernels, its oneDNN capped).
Our runs and the peer's alternate and each figure is the best of --reps runs: the machine is
shared and noisy. A peer that reports blas=reference (Debian's netlib BLAS, 5-30x slower than
OpenBLAS) gets no ratio. --quick: LeNet-5 and the MLP only, fewer steps, one run each."""
import argparse, os, re, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "bench", "peers")
PY = "/usr/bin/python3"
# Every run, ours and the peer's: 1 thread, and glibc's allocator kept off mmap. PyTorch frees
# and re-allocates its large tensors every step (the MLP's 64 MB weight gradients); from mmap
# each comes back as fresh pages, and on a VM with costly page faults that alone cost the peer's
# MLP 3.6x (94 against 340 samples/s; our buffers live across steps and do not care).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}
# The peer also drops an OPENBLAS_CORETYPE of the environment (see openblas_core).
PEER_ENV = dict(ONE_THREAD, OPENBLAS_CORETYPE=None)
FUSION_KB = ["0", "32", "1024", "65536"]

# name: label, global batch, peer command (without --threads/--steps/--warmup/--batch),
# (steps, warm-up steps) of a full run and of a quick one (None: not in --quick)
MODELS = {
    "lenet5": ("LeNet-5, batch 64, Fashion-MNIST", 64, ["torch_lenet5.py"], (100, 10), (40, 5)),
    # the MLP: 30 steps (the sharded optimizer's move into the node's window, ~20 ms, is paid once
    # per model: the warm-up fit pays it)
    "mlp": ("MLP 784-4096x3-10, batch 64", 64, ["torch_models.py", "--model", "mlp"], (30, 3), (4, 1)),
    "transformer": ("Transformer encoder (5.24M), batch 32, seq 128", 32,
                    ["torch_models.py", "--model", "transformer"], (6, 1), None),
    "resnet50": ("ResNet-50, batch 16, synthetic 224x224", 16, ["torch_models.py", "--model", "resnet50"],
                 (3, 1), None),
}


def parse(out):
    return dict(re.findall(r"(\w+)=([A-Za-z0-9_./]+)", out)) or None


def start(cmd, env_extra):
    """env_extra: variables to set; a value None removes the variable."""
    env = {k: v for k, v in dict(os.environ, **env_extra).items() if v is not None}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(p, cmd):
    out, err = p.communicate()
    if p.returncode != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{out}\n{err}\n")
        return None
    return parse(out)


def run(cmd, env_extra=ONE_THREAD):
    return finish(start(cmd, env_extra), cmd)


def sps(r):
    return float(r["samples_per_s"]) if r and "samples_per_s" in r else None


def keep_best(best, key, r):
    if sps(r) and (best.get(key) is None or sps(r) > sps(best[key])):
        best[key] = r


def fmt(v, d=1):
    return "n/a" if v is None else f"{float(v):.{d}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def machine():
    model, flags, family = "unknown", set(), {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "model name": model = v.strip()
            if k == "flags": flags = set(v.split())
            if k in ("cpu family", "model", "stepping"): family[k] = v.strip()
    if family:  # a VM may hide the exact name ("AMD EPYC"); family 26 is Zen 5, 25 Zen 3/4
        model += " (" + ", ".join(f"{k} {v}" for k, v in family.items()) + ")"
    isa = [x for x in ("avx512f", "avx512_bf16") if x in flags] + sorted(x for x in flags if x.startswith("amx"))
    return model, isa or ["none of avx512f, avx512_bf16, amx"]


def cap_isa(isa):
    """Every run, ours and the peer's, on isa's kernels only (the dicts every run takes)."""
    for env in (ONE_THREAD, PEER_ENV):
        env["ONEDNN_MAX_CPU_ISA"] = isa.upper()
    PEER_ENV["OPENBLAS_CORETYPE"] = "Haswell"  # OpenBLAS's AVX2 kernels


def openblas_core():
    """The kernels OpenBLAS picks for the peer on this CPU by itself. An OPENBLAS_CORETYPE in the
    environment (this project's shells set Haswell, AVX2 only) would cripple the peer on an
    AVX-512 machine: the peer runs without it."""
    env = {k: v for k, v in dict(os.environ, **PEER_ENV).items() if v is not None}
    p = subprocess.run([PY, "-c", "import torch; torch.ones(2, 2) @ torch.ones(2, 2)"], capture_output=True,
                       text=True, env=dict(env, OPENBLAS_VERBOSE="2"))
    m = re.search(r"Core: (\w+)", p.stderr)
    core = m.group(1) if m else "unknown"
    note = f" (OPENBLAS_CORETYPE={PEER_ENV['OPENBLAS_CORETYPE']}: the AVX2 machine)" if PEER_ENV["OPENBLAS_CORETYPE"] \
        else f" (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} of the environment dropped)" \
        if "OPENBLAS_CORETYPE" in os.environ else ""
    return core + note


def ours_cmd(tnt, name, steps, warmup, bf16=False, batch=None):
    return [tnt, "--model", name, "--batch", str(batch or MODELS[name][1]), "--steps", str(steps), "--warmup",
            str(warmup)] + (["--mixed_bfloat16"] if bf16 else [])


def peer_cmd(name, steps, warmup, bf16=False):
    script, *args = MODELS[name][2]
    if bf16 and script != "torch_models.py": return None  # autocast only in torch_models.py
    return [PY, os.path.join(PEERS, script)] + args + ["--threads", "1", "--batch", str(MODELS[name][1]),
                                                       "--steps", str(steps), "--warmup", str(warmup)] + \
        (["--bf16"] if bf16 else [])


def cpu_sps(r):
    return float(r["cpu_samples_per_s"]) if r and "cpu_samples_per_s" in r else None


def peer_ratio(ours, peer):
    """ours / peer, or why not: no peer figure, or a peer on Debian's reference BLAS."""
    if peer is None: return "n/a"
    blas = peer.get("blas", "not reported")
    return f"refused: peer blas={blas}" if blas in ("reference", "not reported") else ratio(sps(ours), sps(peer))


def one_process(a, out, tnt, names, ceiling, torch, mixed):
    """Table 2; with mixed, the bf16 runs of table 2b alternate with them. Returns the best run of
    each (model, kind) for table 2b."""
    out.append("\n### One process x 1 thread\n")
    out.append("| model | tarantella samples/s | PyTorch samples/s | ratio | ratio by CPU time | GFLOP/s (FLOPs/sample) | share of f32 ceiling |")
    out.append("|---|---|---|---|---|---|---|")
    results = {}
    for name in names:
        steps, warmup = a.steps_of(name)
        best = results[name] = {}
        for _ in range(a.reps):  # alternate ours and the peer's, float32 and bf16, keep the best of each
            keep_best(best, "tnt", run(ours_cmd(tnt, name, steps, warmup)))
            if mixed: keep_best(best, "tnt_bf16", run(ours_cmd(tnt, name, steps, warmup, True)))
            if torch: keep_best(best, "torch", run(peer_cmd(name, steps, warmup), PEER_ENV))
            if torch and mixed and peer_cmd(name, steps, warmup, True):
                keep_best(best, "torch_bf16", run(peer_cmd(name, steps, warmup, True), PEER_ENV))
        ours, peer = best.get("tnt"), best.get("torch")
        blas = peer.get("blas", "not reported") if peer else None
        if peer is None: rat = "n/a"
        elif blas == "reference" or blas == "not reported":
            rat = f"refused: peer blas={blas}"
        else: rat = ratio(sps(ours), sps(peer))
        flops = 6.0 * float(ours["fwd_macs_per_sample"]) if ours else None
        gflops = sps(ours) * flops / 1e9 if ours else None
        share = f"{100 * gflops / ceiling:.0f}%" if gflops and ceiling else "n/a"
        peer_s = f"{fmt(sps(peer))} ({blas})" if peer else "n/a"
        # the samples per second of CPU time each process got: on a loaded machine the fairer ratio
        rat_cpu = ratio(cpu_sps(ours), cpu_sps(peer)) if rat.endswith("x") else "n/a"
        out.append(f"| {MODELS[name][0]} | {fmt(sps(ours))} | {peer_s} | {rat} | {rat_cpu} | "
                   f"{fmt(gflops)} ({fmt(flops and flops / 1e6)} M) | {share} |")
        print(out[-1], file=sys.stderr, flush=True)
    return results


def mixed_table(out, names, results, bf16_ceiling):
    """Table 2b from the runs of table 2."""
    out.append("\n### Mixed precision (Keras mixed_bfloat16 / torch.cpu.amp.autocast bf16), one process x 1 thread\n")
    out.append("Samples/s. Speed-up: our bf16 over our float32, by wall clock and by the CPU time this process "
               "got (the machine is shared). Share: the bf16 run's GFLOP/s against the bf16 matmul ceiling.\n")
    out.append("| model | ours fp32 | ours bf16 | speed-up (wall) | speed-up (CPU) | torch fp32 | torch autocast bf16 "
               "| torch speed-up | ours bf16 / torch bf16 | bf16 GFLOP/s | share of bf16 ceiling |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        best = results.get(name, {})
        o32, o16, t32, t16 = best.get("tnt"), best.get("tnt_bf16"), best.get("torch"), best.get("torch_bf16")
        flops = 6.0 * float(o16["fwd_macs_per_sample"]) if o16 else None
        gflops = sps(o16) * flops / 1e9 if o16 else None
        share = f"{100 * gflops / bf16_ceiling:.0f}%" if gflops and bf16_ceiling else "n/a"
        out.append(f"| {MODELS[name][0]} | {fmt(sps(o32))} | {fmt(sps(o16))} | {ratio(sps(o16), sps(o32))} | "
                   f"{ratio(cpu_sps(o16), cpu_sps(o32))} | {fmt(sps(t32))} | {fmt(sps(t16))} | {ratio(sps(t16), sps(t32))} | "
                   f"{peer_ratio(o16, t16)} | {fmt(gflops)} | {share} |")
        print(out[-1], file=sys.stderr, flush=True)


def data_parallel(a, out, tnt, names):
    launcher = os.path.join(a.build, "bin", "tarantella")
    # flat: one allreduce per bucket over all ranks (the columns by fusion threshold and bf16);
    # default: what a user gets, auto: node-aware reduction with the sharded optimizer (issue 25)
    ranks = lambda n, kb=None, wire=None, reducer="flat": [launcher, "-n", str(n), "-x", "OMP_NUM_THREADS=1"] + \
        (["--fusion-threshold", kb] if kb is not None else []) + \
        (["--compression", wire] if wire else []) + (["--reducer", reducer] if n > 1 and reducer else []) + ["--"]
    out.append("\n### Data parallel: 2 ranks x 1 thread against 1 rank x 1 thread (same global batch)\n")
    out.append("Cells: samples/s (buckets, share of allreduce time hidden behind backward). "
               "\"2 independent\": two 1-rank runs started together, the sum of their samples/s: "
               "what 2 cores give with no communication at all; \"at the rank's batch\": the same at half the "
               "batch, what each rank computes, so that the gap to it is the reduction's and the optimizer's "
               "alone (the gap between the two pairs is what half the rows cost the layers).\n")
    out.append("| model | 1 rank | " + " | ".join(f"2 ranks flat, {kb} KB" for kb in FUSION_KB) +
               " | best flat speed-up | 2 ranks flat, 32 KB, bf16 compression | its speed-up "
               "| 2 ranks, default (node-aware + sharded optimizer) | its speed-up | 2 independent | its speed-up "
               "| 2 independent at the rank's batch | default / it |")
    out.append("|---|---|" + "---|" * len(FUSION_KB) + "---|---|---|---|---|---|---|---|---|")
    for name in names:
        steps, warmup = a.steps_of(name)
        prog = ours_cmd(tnt, name, steps, warmup)
        best = {}
        # eight runs a round: --reps rounds, a single one for ResNet-50 and the Transformer (a step
        # takes seconds), to stay within 15 minutes on 2 cores
        for _ in range(1 if name in ("resnet50", "transformer") else a.reps):
            keep_best(best, "one", run(ranks(1) + prog))
            for kb in FUSION_KB:
                keep_best(best, kb, run(ranks(2, kb) + prog))
            keep_best(best, "bf16", run(ranks(2, "32", "bf16") + prog))
            keep_best(best, "default", run(ranks(2, reducer=None) + prog))
            cmd = ranks(1) + prog
            pair = [start(cmd, ONE_THREAD) for _ in range(2)]
            both = [finish(p, cmd) for p in pair]
            if all(both):
                keep_best(best, "pair", {"samples_per_s": str(sum(sps(r) for r in both))})
            half = ranks(1) + ours_cmd(tnt, name, steps, warmup, batch=MODELS[name][1] // 2)
            both = [finish(p, half) for p in [start(half, ONE_THREAD) for _ in range(2)]]
            if all(both):
                keep_best(best, "pair_half", {"samples_per_s": str(sum(sps(r) for r in both))})
        one = sps(best.get("one"))
        cell = lambda r: (f"{fmt(sps(r))} ({r.get('buckets')}, {fmt(r.get('hidden'), 2)})" if r else "n/a")
        top = max((sps(best[kb]) for kb in FUSION_KB if best.get(kb)), default=None)
        pair, wire, dflt = sps(best.get("pair")), best.get("bf16"), best.get("default")
        half = sps(best.get("pair_half"))
        out.append(f"| {MODELS[name][0]} | {fmt(one)} | " + " | ".join(cell(best.get(kb)) for kb in FUSION_KB) +
                   f" | {ratio(top, one)} | {cell(wire)} | {ratio(sps(wire), one)} | {cell(dflt)} | "
                   f"{ratio(sps(dflt), one)} | {fmt(pair)} | {ratio(pair, one)} | {fmt(half)} | "
                   f"{fmt(sps(dflt) / half, 2) if dflt and half else 'n/a'} |")
        print(out[-1], file=sys.stderr, flush=True)


def allreduce(a, out, tnt, names):
    launcher = os.path.join(a.build, "bin", "tarantella")
    out.append("\n### Fused allreduce against one plain MPI_Allreduce of the same bytes (2 ranks, best of 10)\n")
    out.append("| model | gradient MB | buckets | fused GB/s | MPI_Allreduce GB/s | fused / plain |")
    out.append("|---|---|---|---|---|---|")
    for name in names:
        r = run([launcher, "-n", "2", "-x", "OMP_NUM_THREADS=1", "--", tnt, "--model", name,
                 "--batch", str(MODELS[name][1]), "--steps", "1", "--warmup", "1", "--allreduce", "10"])
        if r:
            out.append(f"| {MODELS[name][0].split(',')[0]} | {float(r['bytes']) / 1e6:.1f} | {r['buckets']} | "
                       f"{fmt(r['fused_GBps'], 2)} | {fmt(r['plain_GBps'], 2)} | {fmt(r['ratio'], 2)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=None, help="runs of each figure (default 2, --quick 1)")
    ap.add_argument("--quick", action="store_true", help="LeNet-5 and the MLP, fewer steps, one run each")
    ap.add_argument("--models", default=None, help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-parallel", action="store_true", help="skip the data-parallel tables")
    ap.add_argument("--no-mixed", action="store_true", help="skip the mixed-precision (bf16) table")
    ap.add_argument("--isa", choices=["avx2"], help="every run (ours, the peer's, the ceiling) on AVX2 kernels only")
    a = ap.parse_args()
    if a.isa:
        cap_isa(a.isa)
        a.no_mixed = True
    a.reps = a.reps or (1 if a.quick else 2)  # 2: with the bf16 runs, 3 would pass 15 minutes
    a.steps_of = lambda name: MODELS[name][4] if a.quick else MODELS[name][3]
    names = a.models.split(",") if a.models else [n for n in MODELS if not a.quick or MODELS[n][4]]
    for n in names:
        if n not in MODELS: sys.exit(f"run.py: unknown model {n} (expected {', '.join(MODELS)})")
    tnt = os.path.join(a.build, "bin", "bench_train")
    torch = not a.no_torch and subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0
    t0 = time.time()

    model, isa = machine()
    out = ["## make bench" + (" (quick)" if a.quick else "") + (f" --isa {a.isa}" if a.isa else ""), "",
           f"Machine: {model}, {os.cpu_count()} cores; ISA: {', '.join(isa)}"
           f"{'; every kernel capped to ' + a.isa.upper() if a.isa else ''}; "
           f"load average at start {os.getloadavg()[0]:.2f}."]
    if torch: out.append(f"Peer: Debian's python3-torch; OpenBLAS kernels: {openblas_core()}. Every run: "
                         "1 thread, MALLOC_MMAP_MAX_=0 and a high MALLOC_TRIM_THRESHOLD_ (no fresh pages per step).")
    else: out.append("PyTorch (python3-torch) is not installed: no peer figures.")
    c = run([os.path.join(a.build, "bin", "matmul_ceiling")])
    ceiling = float(c["f32_gflops"]) if c else None
    out.append("\n### Ceiling: oneDNN matmul at 1 thread, 2048 x 2048 x 2048\n")
    out.append("| oneDNN ISA | f32 GFLOP/s | bf16 GFLOP/s |")
    out.append("|---|---|---|")
    out.append(f"| {c and c['isa']} | {fmt(ceiling)} | {c and c['bf16_gflops']} |")
    print("\n".join(out), file=sys.stderr, flush=True)

    bf16_ceiling = float(c["bf16_gflops"]) if c and c.get("bf16_gflops", "n/a") != "n/a" else None
    mixed = not a.no_mixed and bf16_ceiling is not None
    results = one_process(a, out, tnt, names, ceiling, torch, mixed)
    if mixed: mixed_table(out, names, results, bf16_ceiling)
    elif not a.no_mixed:
        out.append("\nNo mixed-precision table: this CPU has no native bf16 (avx512_bf16 or AMX); "
                   "mixed_bfloat16 layers compute in float32 here.")
    if not a.no_parallel:
        data_parallel(a, out, tnt, names)
        allreduce(a, out, tnt, [n for n in names if n in ("lenet5", "mlp")])
    out.append(f"\nBest of {a.reps} run(s) each; load average at the end {os.getloadavg()[0]:.2f}; "
               f"{time.time() - t0:.0f} s in all.")
    print("\n".join(out))


if __name__ == "__main__":
    main()
