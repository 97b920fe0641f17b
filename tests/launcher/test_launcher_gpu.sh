#!/usr/bin/env bash
# The launcher's devices (tools/tarantella.c, tools/launcher/devices.c): --no-gpu exports
# TNT_DEVICE=cpu; with TNT_DEVICE=auto or gpu the ranks per node default to the GPUs found
# (emulated here: TNT_GPU_EMULATE=N stands for N GPUs), --dry-run prints each rank's GPU or "cpu"
# and why, bad TNT_DEVICE / TNT_GPU_ORDINAL values are usage errors; real 2-rank runs take the
# GPUs the dry run printed. Usage: test_launcher_gpu.sh PATH/TO/tarantella PATH/TO/test_gpu_dist
set -u
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 PATH/TO/tarantella PATH/TO/test_gpu_dist" >&2
    exit 2
fi
T=$(realpath "$1")
PROG=$(realpath "$2")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset TNT_MPIRUN TNT_LOG_LEVEL TNT_DEVICE TNT_GPU_EMULATE TNT_GPU_ORDINAL TNT_CUDA_LIBDIR TNT_CUDA_DRIVER
export TNT_MPIRUN=mpirun # the dry runs print Open MPI's command line
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }
run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}
expect_rc() {
    if [ "$RC" -eq "$2" ]; then ok "$1 (exit $RC)"
    else fail "$1: exit $RC, expected $2"; echo "  stdout: $OUT"; echo "  stderr: $ERR"; fi
}
expect_in() {
    case "$2" in *"$3"*) ok "$1" ;; *) fail "$1: '$3' not in:"; echo "$2" | sed 's/^/  | /' ;; esac
}
expect_not_in() {
    case "$2" in *"$3"*) fail "$1: '$3' unexpectedly in:"; echo "$2" | sed 's/^/  | /' ;; *) ok "$1" ;; esac
}

# ---- dry runs --------------------------------------------------------------------------------
# the default (auto) without a driver: the CPU, and why (a driver path of our own, so that the
# reason is the same on a machine with a GPU)
TNT_CUDA_DRIVER=/nonexistent/libcuda.so.1 run "$T" --dry-run -- ./prog
expect_rc "default" 0
expect_in "default: one rank" "$OUT" " -np 1 "
expect_in "default (auto): the CPU and why" "$OUT" "rank 0 on localhost (local rank 0): cpu (no /nonexistent/libcuda.so.1)"
expect_not_in "default: TNT_DEVICE not exported" "$OUT" $'\n'"TNT_DEVICE="

run "$T" --no-gpu -n 2 --dry-run -- ./prog
expect_rc "--no-gpu" 0
expect_in "--no-gpu exports TNT_DEVICE=cpu" "$OUT" $'\n'"TNT_DEVICE=cpu"$'\n'
expect_in "--no-gpu: rank 1 on the CPU" "$OUT" "rank 1 on localhost (local rank 1): cpu (--no-gpu)"

# GPUs found: one rank per GPU of the host, rank r on GPU r
TNT_DEVICE=auto TNT_GPU_EMULATE=3 run "$T" --dry-run -- ./prog
expect_rc "auto with 3 GPUs" 0
expect_in "ranks per node = GPUs" "$OUT" " -np 3 --host localhost:3 "
expect_in "rank 2 on GPU 2" "$OUT" "rank 2 on localhost (local rank 2): gpu 2"
# the same from -x, and --no-gpu gives the CPU whatever the environment says
run "$T" -x TNT_DEVICE=gpu TNT_GPU_EMULATE=2 --dry-run -- ./prog
expect_in "-x TNT_DEVICE=gpu: 2 ranks" "$OUT" " -np 2 "
expect_in "-x: rank 1 on GPU 1" "$OUT" "rank 1 on localhost (local rank 1): gpu 1"
TNT_DEVICE=auto TNT_GPU_EMULATE=3 run "$T" --no-gpu --dry-run -- ./prog
expect_in "--no-gpu over TNT_DEVICE=auto: one rank" "$OUT" " -np 1 "
expect_in "--no-gpu over TNT_DEVICE=auto: cpu" "$OUT" "rank 0 on localhost (local rank 0): cpu (--no-gpu)"
expect_in "--no-gpu over TNT_DEVICE=auto: exported" "$OUT" $'\n'"TNT_DEVICE=cpu"$'\n'

# more ranks than GPUs share them (local rank % GPUs); hosts fill in order
printf 'nodeA\nnodeB\n' >"$TMP/hosts"
TNT_DEVICE=auto TNT_GPU_EMULATE=2 run "$T" --hostfile "$TMP/hosts" --devices-per-node 3 --dry-run -- ./prog
expect_rc "2 hosts x 3 ranks on 2 GPUs" 0
expect_in "rank 2 shares GPU 0" "$OUT" "rank 2 on nodeA (local rank 2): gpu 0"
expect_in "sharing noted" "$ERR" "tarantella: 3 ranks per node share the 2 GPUs of this host (each takes local rank % 2)"
expect_in "rank 4 on nodeB's GPU 1" "$OUT" "rank 4 on nodeB (local rank 1): gpu 1"
TNT_DEVICE=auto TNT_GPU_EMULATE=2 run "$T" --hostfile "$TMP/hosts" --dry-run -- ./prog
expect_in "hostfile: GPUs per host" "$OUT" " -np 4 --host nodeA:2,nodeB:2 "
TNT_DEVICE=auto TNT_GPU_EMULATE=4 run "$T" -x TNT_GPU_ORDINAL=3 -n 2 --dry-run -- ./prog
expect_in "TNT_GPU_ORDINAL: every rank on it" "$OUT" "rank 1 on localhost (local rank 1): gpu 3"
expect_in "TNT_GPU_ORDINAL: sharing noted" "$ERR" "the 2 ranks of a node share GPU 3 (TNT_GPU_ORDINAL)"
TNT_DEVICE=auto TNT_GPU_EMULATE=3 run "$T" --dry-run -- ./prog
expect_not_in "one rank per GPU: nothing shared" "$ERR" "share"

# no usable GPU: the CPU and the loader's reason; gpu says tnt_init will stop
mkdir "$TMP/empty"
TNT_DEVICE=auto TNT_CUDA_DRIVER="$TMP/empty/libcuda.so.1" run "$T" --dry-run -- ./prog
expect_in "auto without a driver: the reason" "$OUT" "cpu (no $TMP/empty/libcuda.so.1)"
TNT_DEVICE=gpu TNT_CUDA_LIBDIR=/nonexistent/cuda run "$T" --dry-run -- ./prog
expect_in "gpu without a backend" "$OUT" \
    "cpu (TNT_DEVICE=gpu: tnt_init will stop every rank: TNT_CUDA_LIBDIR: /nonexistent/cuda is not a folder)"

# bad values: usage errors naming them
run "$T" -x TNT_DEVICE=tpu --dry-run -- ./prog
expect_rc "TNT_DEVICE=tpu" 2
expect_in "TNT_DEVICE=tpu named" "$ERR" "invalid TNT_DEVICE 'tpu' (-x): expected auto, cpu or gpu"
TNT_DEVICE=auto TNT_GPU_EMULATE=2 run "$T" -x TNT_GPU_ORDINAL=2 --dry-run -- ./prog
expect_rc "TNT_GPU_ORDINAL beyond the GPUs" 2
expect_in "TNT_GPU_ORDINAL named" "$ERR" "TNT_GPU_ORDINAL=2: this host has 2 GPUs"
TNT_GPU_ORDINAL=x run "$T" --dry-run -- ./prog
expect_rc "TNT_GPU_ORDINAL=x" 2

# ---- real runs: the ranks take what the dry run said -----------------------------------------
unset TNT_MPIRUN # the launcher of the MPI this build uses (MPICH's Hydra in an MPICH build)
export GPU_DIST_CASE=launched
TNT_DEVICE=auto TNT_GPU_EMULATE=2 run "$T" -x OMP_NUM_THREADS=1 -- "$PROG"
expect_rc "2 ranks on 2 emulated GPUs" 0
expect_in "rank 1 took GPU 1" "$OUT" "rank 1: gpu 1: emulated device"
TNT_DEVICE=auto TNT_GPU_EMULATE=2 run "$T" --no-gpu -n 2 -x OMP_NUM_THREADS=1 -- "$PROG"
expect_rc "--no-gpu, 2 ranks" 0
expect_in "--no-gpu: rank 1 on the CPU" "$OUT" "rank 1: cpu: TNT_DEVICE=cpu"

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all launcher GPU checks passed"
