#!/usr/bin/env python3
"""The scale study (make scale-study): one training step of ResNet-50, the Transformer and the MLP
on 8 to 256 simulated CPU ranks and 4 to 96 simulated GPUs, flat against node-aware reduction,
by SimGrid's SMPI running bench/scale/scale_sim.c with each layer's compute charged as its
measured time (bench/scale/profiles/*.txt, from profile_model --table on one core of this
machine). Prints speed-up and efficiency per rank count beside Tarantella's published figures
and draws the curves (matplotlib, when installed). --quick: 4 simulated ranks, for ctest.

Assumptions (the README's scale-study section explains each):
  cpu: nodes of 2 x 64 cores, one rank per core (128 per node), each running the layer times
       measured on one core here; 100 Gb/s InfiniBand (12.5 GB/s, 1.5 us) per node into a
       non-blocking fabric; MPI's shared-memory transport within a node: 150 GB/s in all, 0.5 us;
       memory bandwidth for sums 300 GB/s per node, shared by its ranks (at most 20 GB/s each).
  cpu-socket: the same nodes with one rank per 64-core socket (2 per node), each running the
       one-core layer times / 32 (64 threads at 50% parallel efficiency), the comm thread's sums
       at 20 GB/s.
  gpu: nodes of 4 GPUs of V100 class (compute: this machine's layer times scaled by
       V100's ResNet-50 fp32 throughput, 370 images/s, to our ResNet-50 step, one factor for
       every model), NVLink-class links within a node (300 GB/s in all, 2 us; sums at
       150 GB/s per GPU), 100 Gb/s InfiniBand between nodes (12.5 GB/s, 2 us).
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = {  # Tarantella 0.9's documentation: speed-up over one device
    ("resnet50", "cpu", 256): 62.0,
    ("resnet50", "cpu-socket", 256): 62.0,
    ("resnet50", "gpu", 96): 57.0,
    ("transformer", "gpu", 96): 34.0,
}
V100_RESNET50_IMAGES_PER_S = 370.0  # fp32, batch 64 (NVIDIA's published TensorFlow figure, about)

PLATFORMS = {
    "cpu": dict(ranks_per_node=128, cores=128, link_gbps=12.5, link_lat="1.5us", loop_gbps=150.0,
                loop_lat="0.5us", node_mem_gbps=300.0, core_mem_gbps=20.0, counts=[8, 16, 32, 64, 128, 256]),
    # one rank per 64-core socket: this machine's one-core layer times / 32 (64 threads at 50%)
    "cpu-socket": dict(ranks_per_node=2, cores=128, link_gbps=12.5, link_lat="1.5us", loop_gbps=150.0,
                       loop_lat="0.5us", node_mem_gbps=300.0, core_mem_gbps=20.0, compute_scale=1 / 32.0,
                       counts=[8, 16, 32, 64, 128, 256]),
    "gpu": dict(ranks_per_node=4, cores=8, link_gbps=12.5, link_lat="2us", loop_gbps=300.0, loop_lat="2us",
                node_mem_gbps=600.0, core_mem_gbps=150.0, counts=[4, 8, 16, 32, 64, 96]),
}


def read_profile(path):
    info = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                info[parts[0]] = parts[1]
    return info


def platform_xml(name, nodes):
    p = PLATFORMS[name]
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="{name}" prefix="node" suffix="" radical="0-{nodes - 1}" speed="1Gf" core="{p['cores']}"
             bw="{p['link_gbps']}GBps" lat="{p['link_lat']}" sharing_policy="SPLITDUPLEX"
             bb_bw="100TBps" bb_lat="0us" loopback_bw="{p['loop_gbps']}GBps" loopback_lat="{p['loop_lat']}"/>
  </zone>
</platform>
"""


def simulate(args, table, platform, ranks, reducer, compute_scale, tmp):
    p = PLATFORMS[platform]
    rpn = min(ranks, p["ranks_per_node"])
    nodes = (ranks + rpn - 1) // rpn
    per_host = 1 if reducer == "lib-flat" else 2  # modelled reducers: a comm rank beside each rank
    # node-mpi: node-aware with MPI_Allreduce across nodes (TNT_CROSS_NODE=mpi); node, sharded:
    # the library's own cross-node allreduce (args.cross, TNT_CROSS_NODE's default auto)
    sim_reducer, cross = ("node", "mpi") if reducer == "node-mpi" else (reducer, args.cross)
    xml = os.path.join(tmp, f"{platform}-{nodes}.xml")
    with open(xml, "w") as f:
        f.write(platform_xml(platform, nodes))
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        for r in range(ranks):
            f.write(f"node{r // rpn}\n" * per_host)
    sum_gbps = min(p["core_mem_gbps"], p["node_mem_gbps"] / rpn)
    cmd = [args.smpirun, "-np", str(ranks * per_host), "-platform", xml, "-hostfile", hosts,
           "--cfg=smpi/simulate-computation:no", "--cfg=smpi/test:1e-7", "--cfg=smpi/coll-selector:ompi",
           "--cfg=smpi/shared-malloc-blocksize:8388608", "--log=root.thres:critical",
           *[f"--cfg={c}" for c in args.smpi_cfg],
           args.sim, "--table", table, "--reducer", sim_reducer, "--cross", cross, "--compute-scale", f"{compute_scale:.6g}",
           "--sum-gbps", f"{sum_gbps:.6g}", "--steps", "1"]
    env = dict(os.environ, TNT_FORCE_MPI="1", OMP_NUM_THREADS="1")
    for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"):
        env.pop(k, None)
    t0 = time.time()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    m = re.search(r"scale_sim: (\S+) (\S+) ranks (\d+) nodes (\d+) buckets (\d+) step ([\d.e+-]+) compute ([\d.e+-]+) "
                  r"exposed ([\d.e+-]+)", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"scale_study: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr[-3000:]}")
    step, compute, exposed = float(m.group(6)), float(m.group(7)), float(m.group(8))
    speedup = ranks * compute / step
    return dict(platform=platform, ranks=ranks, nodes=nodes, reducer=reducer, step_s=step, compute_s=compute,
                exposed_s=exposed, speedup=speedup, efficiency=speedup / ranks, wall_s=time.time() - t0,
                buckets=int(m.group(5)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", required=True, help="scale_sim built with smpicc (BUILD/smpi/bin/scale_sim)")
    ap.add_argument("--smpirun", default="smpirun")
    ap.add_argument("--profiles", default=os.path.join(HERE, "profiles"))
    ap.add_argument("--models", default="resnet50,transformer,mlp")
    ap.add_argument("--reducers", default="flat,node-mpi,node,sharded",
                    help="node-mpi: node-aware, MPI_Allreduce across nodes; node, sharded: --cross across nodes")
    ap.add_argument("--cross", default="auto", choices=["auto", "mpi", "ring", "halving", "doubling"],
                    help="the cross-node allreduce of node and sharded (TNT_CROSS_NODE)")
    ap.add_argument("--platforms", default="cpu,cpu-socket,gpu")
    ap.add_argument("--out", default="scale-study", help="folder for results.csv and scale_study.png")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--counts", help="rank counts to simulate instead of each platform's (comma list)")
    ap.add_argument("--smpi-cfg", action="append", default=[], metavar="KEY:VALUE",
                    help="one more SimGrid setting (e.g. smpi/lat-factor:1: the links' own latency)")
    ap.add_argument("--quick", action="store_true", help="4 simulated ranks of LeNet-5 (ctest)")
    ap.add_argument("--plot-logs", nargs="+", help="no simulation: draw the tables printed by earlier runs")
    args = ap.parse_args()
    if args.plot_logs:
        rows = [r for path in args.plot_logs for r in parse_log(path)]
        os.makedirs(args.out, exist_ok=True)
        draw(rows, os.path.join(args.out, "scale_study.png"))
        return 0
    if args.quick:
        args.models, PLATFORMS["cpu"]["counts"], PLATFORMS["cpu"]["ranks_per_node"] = "lenet5", [4], 2
        args.platforms, args.reducers = "cpu", "flat,node-mpi,node,sharded,lib-flat"
    resnet = read_profile(os.path.join(args.profiles, "resnet50.txt"))
    gpu_scale = (float(resnet["batch"]) / V100_RESNET50_IMAGES_PER_S) / float(resnet["step"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            table = os.path.join(args.profiles, f"{model}.txt")
            prof = read_profile(table)
            for platform in args.platforms.split(","):
                scale = gpu_scale if platform == "gpu" else PLATFORMS[platform].get("compute_scale", 1.0)
                print(f"\n{model} on {platform} (batch {prof['batch']} per rank, one rank's step "
                      f"{float(prof['step']) * scale * 1e3:.1f} ms, {int(prof['params']) * 4 / 1e6:.1f} MB of gradients)")
                print("| ranks | nodes | reducer | step ms | exposed ms | speed-up | efficiency | Tarantella |")
                print("|---|---|---|---|---|---|---|---|")
                counts = [int(c) for c in args.counts.split(",")] if args.counts else PLATFORMS[platform]["counts"]
                for ranks in counts:
                    for reducer in args.reducers.split(","):
                        r = simulate(args, table, platform, ranks, reducer, scale, tmp)
                        r["model"] = model
                        rows.append(r)
                        pub = PUBLISHED.get((model, platform, ranks))
                        pub_s = f"{pub:.0f}x ({100 * pub / ranks:.0f}%)" if pub else ""
                        print(f"| {ranks} | {r['nodes']} | {reducer} | {1e3 * r['step_s']:.2f} | {1e3 * r['exposed_s']:.2f} "
                              f"| {r['speedup']:.1f}x | {100 * r['efficiency']:.1f}% | {pub_s} |", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    if args.quick:
        return check_quick(rows)
    draw(rows, os.path.join(args.out, "scale_study.png"))
    return 0


def parse_log(path):
    """The rows of the tables this script printed (a log of an earlier run)."""
    rows, model, platform = [], None, None
    with open(path) as f:
        for line in f:
            m = re.match(r"(\S+) on (\S+) \(", line)
            if m:
                model, platform = m.groups()
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if model and len(cells) >= 7 and cells[0].isdigit():
                rows.append(dict(model=model, platform=platform, ranks=int(cells[0]), nodes=int(cells[1]),
                                 reducer=cells[2], step_s=float(cells[3]) / 1e3, exposed_s=float(cells[4]) / 1e3,
                                 speedup=float(cells[5].rstrip("x")), efficiency=float(cells[6].rstrip("%")) / 100))
    return rows


def check_quick(rows):
    """ctest: every reducer ran on 4 ranks of 2 nodes, each speed-up is a possible one, and the
    modelled flat step is the library's own flat reducer's within 10%."""
    by = {r["reducer"]: r for r in rows}
    bad = [f"{k}: efficiency {v['efficiency']:.3f}" for k, v in by.items() if not 0.3 < v["efficiency"] <= 1.05]
    if set(by) != {"flat", "node-mpi", "node", "sharded", "lib-flat"} or any(r["ranks"] != 4 or r["nodes"] != 2 for r in rows):
        bad.append(f"runs: {[(r['reducer'], r['ranks'], r['nodes']) for r in rows]}")
    if not abs(by["flat"]["step_s"] / by["lib-flat"]["step_s"] - 1) < 0.10:
        bad.append(f"modelled flat step {by['flat']['step_s']:.6f} s against the library's {by['lib-flat']['step_s']:.6f} s")
    for b in bad:
        print("FAIL:", b)
    print("scale study at 4 simulated ranks:", "FAILED" if bad else "ok")
    return 1 if bad else 0


def draw(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scale_study: no matplotlib (Debian's python3-matplotlib): no plot")
        return
    platforms = sorted({r["platform"] for r in rows})
    fig, axes = plt.subplots(1, len(platforms), figsize=(6.5 * len(platforms), 5), squeeze=False)
    for ax, platform in zip(axes[0], platforms):
        counts = sorted({r["ranks"] for r in rows if r["platform"] == platform})
        ax.plot(counts, counts, color="0.6", lw=0.8, label="linear")
        for k, model in enumerate(sorted({r["model"] for r in rows})):
            for reducer, style in (("flat", "--"), ("node-mpi", "-."), ("node", "-"), ("sharded", ":")):
                pts = [(r["ranks"], r["speedup"]) for r in rows
                       if r["platform"] == platform and r["model"] == model and r["reducer"] == reducer]
                if pts:  # a colour per model, a line style per reducer
                    ax.plot(*zip(*pts), style, color=f"C{k}", marker="o", ms=3, label=f"{model} {reducer}")
        for (model, plat, ranks), s in PUBLISHED.items():
            if plat == platform:
                ax.plot([ranks], [s], "r*", ms=12)
                ax.annotate(f"Tarantella {model} {s:.0f}x", (ranks, s), textcoords="offset points", xytext=(-120, -4))
        ax.set_title(f"{platform}: simulated speed-up per rank count (SMPI)")
        ax.set_xlabel("ranks")
        ax.set_ylabel("speed-up over one rank")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"scale_study: {path}")


if __name__ == "__main__":
    sys.exit(main())
