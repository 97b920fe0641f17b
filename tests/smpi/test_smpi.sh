#!/usr/bin/env bash
# SimGrid SMPI smoke test: smpirun -np 4 of a few LeNet-5 steps (tests/smpi/smpi_lenet.c, built
# with smpicc) on a simulated cluster of 4 hosts. Checks that all 4 ranks joined one world of 4
# (each prints its line), that SMPI's MPI_THREAD_SINGLE put the gradient allreduces in the
# nonblocking engine with the one-line notice, and that every rank's weights equal the master's
# and serial training to rounding (the program checks that and exits 1 otherwise).
# Usage: test_smpi.sh PATH/TO/smpi_lenet [PATH/TO/smpirun]
set -u
P=$(realpath "$1")
SMPIRUN=${2:-smpirun}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }

# 4 hosts of 1 Gflop/s on a 10 GB/s, 1 us network (the figures do not matter for correctness)
cat >"$TMP/platform.xml" <<'XML'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="c" prefix="host" suffix="" radical="0-3" speed="1Gf" bw="10GBps" lat="1us"/>
  </zone>
</platform>
XML
printf 'host0\nhost1\nhost2\nhost3\n' >"$TMP/hosts"

t0=$SECONDS
# TNT_FORCE_MPI: smpirun sets no launcher variable; stdout is the test's, the log SimGrid's
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMI_RANK -u PMIX_RANK TNT_FORCE_MPI=1 OMP_NUM_THREADS=1 \
    timeout -k 5 240 "$SMPIRUN" -np 4 -platform "$TMP/platform.xml" -hostfile "$TMP/hosts" \
    --cfg=smpi/host-speed:1Gf --log=root.thres:warning "$P" >"$TMP/out" 2>"$TMP/err"
RC=$?
echo "     smpirun -np 4: exit $RC after $((SECONDS - t0)) s"
sed 's/^/  | /' "$TMP/out"
[ $RC -eq 0 ] && ok "all ranks exit 0" || { fail "smpirun exit $RC"; tail -30 "$TMP/err" | sed 's/^/  ! /'; }
for r in 0 1 2 3; do
    if grep -q "^smpi_lenet: rank $r of 4: MPI_THREAD_SINGLE, engine nonblocking, " "$TMP/out"; then
        ok "rank $r of 4 joined, MPI_THREAD_SINGLE, nonblocking engine"
    else
        fail "no line of rank $r in a world of 4 with the nonblocking engine"
    fi
done
# SMPI's MPI_Iallreduce adds each rank's own buffer first: the ranks' weights agree to rounding
# (the program checks 1e-4 relative against the master's), not bit for bit as under Open MPI
n=$(grep -c 'from the master.s [0-9.e+-]*, loss' "$TMP/out")
[ "$n" -eq 4 ] && ok "every rank compared its weights with the master's and serial" || fail "$n comparisons"
grep -q "MPI provides MPI_THREAD_SINGLE (asked for MPI_THREAD_SERIALIZED): gradient allreduces run in the nonblocking engine" \
    "$TMP/err" && ok "the one-line notice" || fail "no thread-level notice on stderr"
c=$(grep -c "MPI provides MPI_THREAD_SINGLE" "$TMP/err")
[ "$c" -eq 1 ] && ok "the notice once (master only)" || fail "the notice $c times"

if [ $FAILS -gt 0 ]; then
    echo "$FAILS check(s) FAILED"
    exit 1
fi
echo "all SMPI checks passed"
