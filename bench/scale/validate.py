#!/usr/bin/env python3
"""The scale study's simulator against this machine (2 ranks on one host, where both can run):
  1. an allreduce of the MLP's and LeNet-5's gradient bytes: SMPI's (as scale_sim charges it) against
     a real plain MPI_Allreduce of Open MPI on 2 ranks (bench_train --allreduce);
  2. the 2-rank speed-up of LeNet-5 and the MLP with the flat reducer, at the same global batch
     (64: 32 per rank on 2 ranks): scale_sim's prediction from profile_model tables made here at
     both batch sizes, against bench_train run on 1 and on 2 ranks.
The simulated host is this one: 2 cores, MPI's shared-memory transport at the copy bandwidth
measured here (NumPy, one core), sums at the same memory traffic (a copy reads and writes each byte). Usage:
  validate.py --build BUILD [--steps N]   (quiet machine: the real runs are timed by the wall clock)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = {"lenet5": 64, "mlp": 64}


def copy_gbps():
    a = np.ones(16 << 20, dtype=np.float32)  # 64 MB
    b = np.empty_like(a)
    best = 1e9
    for _ in range(7):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return a.nbytes / best / 1e9  # bytes copied per second


def smpi(args, ranks, extra, tmp, gbps):
    xml = os.path.join(tmp, "here.xml")
    with open(xml, "w") as f:
        f.write(f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="here" prefix="host" suffix="" radical="0-0" speed="1Gf" core="2" bw="10GBps" lat="1us"
             loopback_bw="{gbps:.3f}GBps" loopback_lat="1us"/>
  </zone>
</platform>
""")
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write("host0\n" * ranks)
    cmd = [args.smpirun, "-np", str(ranks), "-platform", xml, "-hostfile", hosts, "--cfg=smpi/simulate-computation:no",
           "--cfg=smpi/test:1e-7", "--cfg=smpi/coll-selector:ompi", "--log=root.thres:critical",
           os.path.join(args.build, "smpi", "bin", "scale_sim"), "--sum-gbps", f"{2 * gbps:.3f}"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode:
        sys.exit(f"validate: {' '.join(cmd)}: {out.stderr[-2000:]}")
    return out.stdout


def real(args, ranks, model, extra):
    cmd = [os.path.join(args.build, "bin", "tarantella"), "-n", str(ranks), "-x", "OMP_NUM_THREADS=1"] + \
        (["--reducer", "flat"] if ranks > 1 else []) + ["--", os.path.join(args.build, "bin", "bench_train"),
                                                       "--model", model, "--batch", str(BATCH[model])] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode:
        sys.exit(f"validate: {' '.join(cmd)}: {out.stderr[-2000:]}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--smpirun", default="smpirun")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    gbps = copy_gbps()
    print(f"this machine: one core copies {gbps:.1f} GB/s (the simulated host's transport and sum rate)")
    with tempfile.TemporaryDirectory() as tmp:
        print("\n| gradients of | bytes | real MPI_Allreduce, 2 ranks | simulated | simulated / real |\n|---|---|---|---|---|")
        for model in ("lenet5", "mlp"):
            r = re.search(r"allreduce bytes=(\d+) buckets=\d+ fused_GBps=[\d.]+ plain_GBps=([\d.]+)",
                          real(args, 2, model, ["--steps", "1", "--warmup", "1", "--allreduce", "10"]))
            nbytes, real_gbps = int(r.group(1)), float(r.group(2))
            s = re.search(r"seconds ([\d.e+-]+)", smpi(args, 2, ["--allreduce", str(nbytes // 4)], tmp, gbps))
            sim_s, real_s = float(s.group(1)), nbytes / real_gbps / 1e9
            print(f"| {model} | {nbytes} | {1e3 * real_s:.2f} ms | {1e3 * sim_s:.2f} ms | {sim_s / real_s:.2f} |")
        print("\n| model | measured 1 rank samples/s | measured 2 ranks (flat) | measured speed-up "
              "| simulated speed-up (flat, 2 ranks) |\n|---|---|---|---|---|")
        for model in ("lenet5", "mlp"):
            sps = []
            for ranks in (1, 2):
                out = real(args, ranks, model, ["--steps", str(args.steps), "--warmup", "3"])
                sps.append(float(re.search(r"samples_per_s=([\d.]+)", out).group(1)))
            # the same global batch on 2 ranks: each rank's share (half) profiled here, one core
            steps = {}
            for batch in (BATCH[model], BATCH[model] // 2):
                table = os.path.join(tmp, f"{model}-{batch}.txt")
                subprocess.run([os.path.join(args.build, "bin", "profile_model"), "--model", model, "--batch",
                                str(batch), "--steps", "5", "--warmup", "2", "--clock", "cpu", "--table", table],
                               check=True, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                steps[batch] = table
            one = float(re.search(r"^step (\S+)", open(steps[BATCH[model]]).read(), re.M).group(1))
            out = smpi(args, 4, ["--table", steps[BATCH[model] // 2], "--reducer", "flat", "--steps", "2"], tmp, gbps)
            two = float(re.search(r"step ([\d.e+-]+) compute", out).group(1))
            print(f"| {model} | {sps[0]:.0f} | {sps[1]:.0f} | {sps[1] / sps[0]:.2f}x | {one / two:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
