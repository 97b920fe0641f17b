#!/usr/bin/env bash
# Never a silent lone rank: programs started with a launcher's environment but no MPI world to join
# stop at tnt_init with a message on every rank, instead of each training alone.
#
#   test_lone_rank.sh BUILD_DIR MPI      (MPI: openmpi or mpich, the MPI BUILD_DIR was built with)
#
# Cases, each under a time limit that fails instead of hanging:
#  1. 4 copies of examples/lenet5 started at once with a fake Hydra/PMI environment
#     (PMI_SIZE=4, PMI_RANK=r) and no mpiexec: every one exits 1 naming its rank, the launcher's
#     variables and the world of 1 rank it got;
#  2. tnt-train with a fake Slurm step (SLURM_STEP_ID, SLURM_STEP_NUM_TASKS=2, SLURM_PROCID=1) and no
#     PMI: the same;
#  3. the other MPI's launcher (mpirun.mpich for an Open MPI build, mpirun.openmpi for an MPICH
#     build), when installed: both ranks of lenet5 stop with the message;
#  4. a Slurm batch script's own environment (SLURM_PROCID=0, SLURM_NTASKS=4, no step) and a
#     1-task step are no launcher: tnt_init succeeds as one rank (tnt-train runs to the end).
set -u
if [ $# -ne 2 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR openmpi|mpich" >&2
    exit 2
fi
B=$(realpath "$1")
MPI=$2
LENET=$B/bin/lenet5
TRAIN=$B/bin/tnt-train
AE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures" && pwd)/compiled_autoencoder.h5 # a compiled Keras model
TMP=$(mktemp -d)
FAILS=0
trap 'rm -rf "$TMP"' EXIT
unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK PMIX_RANK SLURM_STEP_ID SLURM_STEP_NUM_TASKS \
    SLURM_PROCID SLURM_NTASKS SLURM_JOB_ID TNT_FORCE_MPI PMI_FD PMI_PORT
export OMP_NUM_THREADS=1

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }
expect_in() { # NAME FILE TEXT
    if grep -qF -- "$3" "$2"; then ok "$1"; else fail "$1: no '$3' in:"; sed 's/^/  | /' "$2"; fi
}

# ---- 1. fake PMI environment, 4 processes at once -----------------------------------------------
PIDS=()
for r in 0 1 2 3; do
    env PMI_SIZE=4 PMI_RANK=$r timeout -k 5 60 "$LENET" --number_epochs=1 >"$TMP/out.$r" 2>"$TMP/err.$r" &
    PIDS+=($!)
done
for r in 0 1 2 3; do
    wait "${PIDS[$r]}"
    rc=$?
    [ $rc -eq 1 ] && ok "PMI rank $r: exit 1" || fail "PMI rank $r: exit $rc (expected 1)"
    expect_in "PMI rank $r: message" "$TMP/err.$r" \
        "started this process as rank $r of 4 (PMI_SIZE=4, PMI_RANK=$r), but the MPI world it joined has 1 rank"
    expect_in "PMI rank $r: would train alone" "$TMP/err.$r" "it would train alone"
    if grep -q "^Epoch\|step" "$TMP/out.$r"; then fail "PMI rank $r trained:"; sed 's/^/  | /' "$TMP/out.$r"; fi
done

# ---- 2. fake Slurm step of 2 tasks, no PMI --------------------------------------------------------
env SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 SLURM_NTASKS=2 \
    timeout -k 5 60 "$TRAIN" "$AE" --data synthetic:64 --epochs 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && ok "Slurm step: tnt-train exit $rc" || fail "Slurm step: tnt-train exit $rc"
expect_in "Slurm step: message" "$TMP/err" \
    "Slurm's srun started this process as rank 1 of 2 (SLURM_STEP_NUM_TASKS=2, SLURM_PROCID=1), but the MPI world it joined has 1 rank"

# ---- 3. the other MPI's launcher -------------------------------------------------------------------
if [ "$MPI" = openmpi ]; then OTHER=(mpirun.mpich -np 2); WHO="a PMI launcher"; LIB="Open MPI"
else OTHER=(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2); WHO="Open MPI's mpirun"; LIB="MPICH"; fi
if command -v "${OTHER[0]}" >/dev/null 2>&1; then
    timeout -k 5 60 "${OTHER[@]}" "$LENET" --number_epochs=1 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && ok "${OTHER[0]}: exit $rc" || fail "${OTHER[0]}: exit $rc"
    for r in 0 1; do
        expect_in "${OTHER[0]}: rank $r named" "$TMP/err" "as rank $r of 2"
    done
    expect_in "${OTHER[0]}: names the launcher" "$TMP/err" "tnt_init: $WHO"
    expect_in "${OTHER[0]}: names this build's MPI" "$TMP/err" "it was built with ($LIB"
    n=$(grep -c "it would train alone" "$TMP/err")
    [ "$n" -eq 2 ] && ok "${OTHER[0]}: both ranks said so" || fail "${OTHER[0]}: $n messages (expected 2)"
else
    echo "     (${OTHER[0]} not installed: the other MPI's launcher is not tried)"
fi

# ---- 4. no launcher: a batch script's environment, a 1-task step ------------------------------------
for vars in "SLURM_JOB_ID=77 SLURM_PROCID=0 SLURM_NTASKS=4" "SLURM_STEP_ID=3 SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0"; do
    env $vars timeout -k 5 60 "$TRAIN" "$AE" --data synthetic:64 --epochs 1 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 0 ] && ok "one rank with $vars" || { fail "one rank with $vars: exit $rc"; sed 's/^/  | /' "$TMP/err"; }
done

if [ $FAILS -gt 0 ]; then
    echo "$FAILS check(s) FAILED"
    exit 1
fi
echo "all lone-rank checks passed"
