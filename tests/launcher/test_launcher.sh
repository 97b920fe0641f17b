#!/usr/bin/env bash
# Tests of the `tarantella` launcher (tools/tarantella.c): option parsing and errors, the mpirun
# command line and exported environment (--dry-run and a fake mpirun through TNT_MPIRUN), hostfiles,
# real runs on 2 local ranks, exit codes, --cleanup (local and through a fake rsh agent) and
# signal forwarding. Usage: test_launcher.sh PATH/TO/tarantella. Exits nonzero if a check fails.
set -u

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH/TO/tarantella" >&2
    exit 2
fi
T=$(realpath "$1")
TMP=$(mktemp -d)
CORES=$(getconf _NPROCESSORS_ONLN)
TAG="$$"                       # makes our sleep commands unique to this run
unset TNT_MPIRUN TNT_LOG_LEVEL OMPI_MCA_plm_rsh_agent HYDRA_LAUNCHER_EXEC
# Open MPI's dialect (the system's mpirun), whichever MPI the launcher was built with (an MPICH
# build defaults to mpiexec.mpich); tests/launcher/test_launcher_mpi.sh checks Hydra and srun.
export TNT_MPIRUN=mpirun
FAILS=0
BG_PIDS=()

cleanup() {
    for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    pkill -KILL -f "^sleep 30[0-9]\.$TAG\$" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }

# run CMD...: sets RC, OUT, ERR.
run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}
expect_rc() { # NAME EXPECTED
    if [ "$RC" -eq "$2" ]; then ok "$1 (exit $RC)"
    else fail "$1: exit $RC, expected $2"; echo "  stdout: $OUT"; echo "  stderr: $ERR"; fi
}
expect_in() { # NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) ok "$1" ;; *) fail "$1: '$3' not in:"; echo "$2" | sed 's/^/  | /' ;; esac
}
expect_not_in() {
    case "$2" in *"$3"*) fail "$1: '$3' unexpectedly in:"; echo "$2" | sed 's/^/  | /' ;; *) ok "$1" ;; esac
}
# count_procs PATTERN: number of processes whose command line matches the regex.
count_procs() { pgrep -f "$1" | wc -l; }
# wait_until SECONDS CMD...: polls CMD every 0.1 s; false on timeout.
wait_until() {
    local end=$((SECONDS + $1)); shift
    until "$@"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.1
    done
}
procs_are() { [ "$(count_procs "$1")" -eq "$2" ]; }
pid_gone() { ! kill -0 "$1" 2>/dev/null; }

threads_for() { local t=$((CORES / $1)); [ $t -lt 1 ] && t=1; echo $t; }

# ---- version, help, usage errors --------------------------------------------------------------
run "$T" --version
expect_rc "--version" 0
[ "$OUT" = "tarantella 0.1.0" ] && ok "--version text" || fail "--version printed '$OUT'"

run "$T" --help
expect_rc "--help" 0
for opt in -n --hostfile --n-per-node --devices-per-node --no-gpu --log-level \
    --log-on-all-devices --output-on-all-devices -x --fusion-threshold --compression --pin-to-socket \
    --pin-memory-to-socket --interpreter --python-interpreter --dry-run --cleanup --force \
    --version; do
    case "$OUT" in *" $opt"*) ;; *) fail "--help does not mention $opt" ;; esac
done

run "$T" --bogus -- true
expect_rc "unknown option" 2
expect_in "unknown option names it" "$ERR" "'--bogus'"
expect_in "usage on stderr" "$ERR" "usage: tarantella"
run "$T" -n 2 true
expect_rc "missing --" 2
expect_in "missing -- message" "$ERR" "missing '--'"
run "$T" -n 2
expect_rc "no -- at all" 2
run "$T" -n 2 --
expect_rc "missing PROGRAM" 2
expect_in "missing PROGRAM message" "$ERR" "missing PROGRAM"
for bad in 0 -3 abc 2x ""; do
    run "$T" -n "$bad" -- true
    expect_rc "-n '$bad'" 2
    expect_in "-n '$bad' names the value" "$ERR" "'$bad'"
done
run "$T" --n-per-node zero -- true
expect_rc "--n-per-node zero" 2
expect_in "--n-per-node names the value" "$ERR" "'zero'"
run "$T" --log-level LOUD -- true
expect_rc "bad --log-level" 2
expect_in "bad --log-level names the value" "$ERR" "'LOUD'"
run "$T" --fusion-threshold -1 -- true
expect_rc "negative --fusion-threshold" 2
run "$T" --compression fp8 -- true
expect_rc "bad --compression" 2
expect_in "bad --compression names the value" "$ERR" "'fp8'"
run "$T" -x NOEQUALS -- true
expect_rc "-x without '='" 2
expect_in "-x without '=' names it" "$ERR" "'NOEQUALS'"
run "$T" -x 1BAD=2 -- true
expect_rc "-x with an invalid name" 2
run "$T" -x A=1 prog
expect_rc "-x list running into PROGRAM without --" 2
run "$T" --force -- true
expect_rc "--force without --cleanup" 2
run "$T" --hostfile
expect_rc "--hostfile without value" 2

# ---- --dry-run: command line and environment ---------------------------------------------------
run "$T" -n 2 --dry-run -- ./prog --batch_size=64 'a b'
expect_rc "--dry-run -n 2" 0
CMD=$(echo "$OUT" | head -n 1)
expect_in "dry-run runs mpirun" "$CMD" "mpirun "
expect_in "dry-run -np 2" "$CMD" " -np 2 "
expect_in "dry-run host" "$CMD" " --host localhost:2 "
expect_in "dry-run binds to none" "$CMD" " --bind-to none "
expect_in "dry-run exports OMP_NUM_THREADS" "$CMD" " -x OMP_NUM_THREADS "
expect_in "dry-run exports PATH" "$CMD" " -x PATH "
expect_in "dry-run program and quoted args last" "$CMD" " ./prog --batch_size=64 'a b'"
if [ "$(id -u)" -eq 0 ]; then
    expect_in "dry-run as root" "$CMD" " --allow-run-as-root "
else
    expect_not_in "dry-run not as root" "$CMD" "--allow-run-as-root"
fi
expect_in "OMP_NUM_THREADS = cores/2" "$OUT" $'\n'"OMP_NUM_THREADS=$(threads_for 2)"
expect_not_in "threads only through OMP_NUM_THREADS" "$OUT" "TNT_THREADS_PER_RANK"
expect_not_in "no warning at 2 ranks" "$ERR" "WARNING"

run "$T" -n 1 --dry-run -- ./prog
expect_in "OMP_NUM_THREADS = cores for 1 rank" "$OUT" $'\n'"OMP_NUM_THREADS=$CORES"
run "$T" --dry-run -- ./prog
expect_in "default is 1 rank" "$OUT" " -np 1 "
OMP_NUM_THREADS=99 run "$T" -n 1 --dry-run -- ./prog
expect_in "launcher's OMP_NUM_THREADS replaced" "$OUT" $'\n'"OMP_NUM_THREADS=$CORES"

run "$T" -n "$CORES" --dry-run -- ./prog
expect_not_in "no warning when ranks = cores" "$ERR" "WARNING"
expect_not_in "no --oversubscribe when ranks = cores" "$OUT" "--oversubscribe"
run "$T" -n $((CORES + 1)) --dry-run -- ./prog
expect_rc "oversubscribed dry run" 0
expect_in "oversubscribe warning" "$ERR" "WARNING"
expect_in "oversubscribe warning text" "$ERR" "ranks per node exceed the $CORES cores"
expect_in "--oversubscribe passed" "$OUT" " --oversubscribe "
expect_in "1 thread when oversubscribed" "$OUT" $'\n'"OMP_NUM_THREADS=1"

# -x: every variable exported, in the given order, after the launcher's own; -x wins.
TNT_FROM_ENV=yes LD_LIBRARY_PATH=/opt/lib run "$T" -n 2 --dry-run -x ZZ=1 AA='x y' -x MM=3 \
    -x OMP_NUM_THREADS=7 --log-level info -- ./prog
expect_rc "-x dry run" 0
CMD=$(echo "$OUT" | head -n 1)
expect_in "-x order on the command line" "$CMD" "-x ZZ -x AA -x MM -x OMP_NUM_THREADS ./prog"
ENVLINES=$(echo "$OUT" | tail -n +2 | cut -d= -f1 | tr '\n' ' ')
expect_in "-x order in the environment" "$ENVLINES" "ZZ AA MM OMP_NUM_THREADS "
expect_in "-x value with a space, quoted" "$OUT" $'\n'"AA='x y'"
expect_in "-x OMP_NUM_THREADS wins" "$OUT" $'\n'"OMP_NUM_THREADS=7"
[ "$(echo "$OUT" | grep -c '^OMP_NUM_THREADS=')" -eq 1 ] && ok "OMP_NUM_THREADS once" \
    || fail "OMP_NUM_THREADS exported more than once"
expect_in "TNT_* from the environment exported" "$CMD" " -x TNT_FROM_ENV "
expect_in "TNT_* value" "$OUT" $'\n'"TNT_FROM_ENV=yes"
expect_in "LD_LIBRARY_PATH exported" "$OUT" $'\n'"LD_LIBRARY_PATH=/opt/lib"
expect_in "--log-level normalised" "$OUT" $'\n'"TNT_LOG_LEVEL=INFO"

run "$T" --dry-run --log-on-all-devices --output-on-all-devices --fusion-threshold=64 \
    --no-gpu -- ./prog
expect_rc "runtime flags" 0
expect_in "TNT_LOG_ON_ALL_DEVICES" "$OUT" $'\n'"TNT_LOG_ON_ALL_DEVICES=1"
expect_in "TNT_OUTPUT_ON_ALL_DEVICES" "$OUT" $'\n'"TNT_OUTPUT_ON_ALL_DEVICES=1"
expect_in "TNT_FUSION_THRESHOLD_KB" "$OUT" $'\n'"TNT_FUSION_THRESHOLD_KB=64"
run "$T" --dry-run --compression bf16 -- ./prog
expect_in "TNT_COMPRESSION" "$OUT" $'\n'"TNT_COMPRESSION=bf16"

run "$T" -n 2 --dry-run --interpreter "valgrind  --error-exitcode=1" -- ./prog a
expect_in "--interpreter prefix" "$OUT" " valgrind --error-exitcode=1 ./prog a"
run "$T" -n 2 --dry-run --python-interpreter= -- ./prog a
expect_in "empty --python-interpreter" "$OUT" " OMP_NUM_THREADS ./prog a"

# Pinning needs numactl: a fake one in PATH shows the mapping; without it, a clear error.
mkdir -p "$TMP/fakebin" "$TMP/empty"
printf '#!/bin/sh\nexec "$@"\n' >"$TMP/fakebin/numactl"
chmod +x "$TMP/fakebin/numactl"
PATH="$TMP/fakebin:$PATH" run "$T" -n 2 --dry-run --pin-to-socket -- ./prog
expect_rc "--pin-to-socket with numactl" 0
expect_in "--pin-to-socket binding" "$OUT" " --map-by socket --bind-to socket "
expect_in "--pin-to-socket numactl" "$OUT" " numactl --localalloc ./prog"
expect_not_in "--pin-to-socket drops --bind-to none" "$OUT" "--bind-to none"
PATH="$TMP/fakebin:$PATH" run "$T" -n 2 --dry-run --pin-memory-to-socket -- ./prog
expect_in "--pin-memory-to-socket binding" "$OUT" " --map-by socket --bind-to socket "
expect_in "--pin-memory-to-socket memory policy" "$OUT" \
    " --mca hwloc_base_mem_alloc_policy local_only "
run env PATH="$TMP/empty" "$T" -n 2 --dry-run --pin-to-socket -- ./prog
expect_rc "--pin-to-socket without numactl" 1
expect_in "--pin-to-socket without numactl says so" "$ERR" "numactl"

# ---- hostfiles --------------------------------------------------------------------------------
HF="$TMP/hosts"
printf '# our nodes\nnodeA slots=4\n\n  nodeB   # the second\n' >"$HF"
run "$T" --hostfile "$HF" --n-per-node 2 --dry-run -- ./prog
expect_rc "hostfile + --n-per-node" 0
expect_in "hosts x n-per-node" "$OUT" " -np 4 --host nodeA:2,nodeB:2 "
expect_in "threads from n-per-node" "$OUT" $'\n'"OMP_NUM_THREADS=$(threads_for 2)"
run "$T" --hostfile "$HF" --devices-per-node=1 --dry-run -- ./prog
expect_in "--devices-per-node alias" "$OUT" " -np 2 --host nodeA:1,nodeB:1 "
run "$T" --hostfile "$HF" -n 3 --dry-run -- ./prog
expect_in "-n spread evenly (ceil)" "$OUT" " -np 3 --host nodeA:2,nodeB:2 "
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_in "slots= honoured without -n/--n-per-node" "$OUT" " -np 5 --host nodeA:4,nodeB:1 "
run "$T" --hostfile "$HF" -n 5 --n-per-node 2 --dry-run -- ./prog
expect_rc "-n larger than hosts x n-per-node" 2

run "$T" --hostfile "$TMP/nope" -- ./prog
expect_rc "missing hostfile" 1
expect_in "missing hostfile named" "$ERR" "$TMP/nope"
printf 'nodeA\nnodeB\nnodea\n' >"$HF"
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_rc "duplicate host" 1
expect_in "duplicate host: file" "$ERR" "$HF"
expect_in "duplicate host: line" "$ERR" "line 3"
expect_in "duplicate host: name" "$ERR" "'nodea'"
printf '# nothing\n\n   \n' >"$HF"
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_rc "empty hostfile" 1
expect_in "empty hostfile named" "$ERR" "$HF"
printf 'nodeA slots=x\n' >"$HF"
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_rc "bad slots" 1
expect_in "bad slots line" "$ERR" "line 1"
printf 'nodeA\n-oProxyCommand=x\n' >"$HF"
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_rc "host name like an option" 1
expect_in "bad host name line" "$ERR" "line 2"
# RFC 1123 names and IPv4 addresses pass; mpirun 4.1 smashes its stack on a first label of 57+
L56=$(printf 'a%.0s' $(seq 56)); L57="${L56}b"; L64="${L57}ccccccc"
printf '%s\n10.1.2.3\nn-1.%s.example.org\n' "$L56" "$L56" >"$HF"
run "$T" --hostfile "$HF" --dry-run -- ./prog
expect_rc "RFC 1123 names and IPv4" 0
expect_in "56-character label passed on" "$OUT" " --host $L56:1,10.1.2.3:1,n-1.$L56.example.org:1 "
check_bad_host() { # NAME REASON
    printf 'nodeA\n%s slots=2\n' "$1" >"$HF"
    run "$T" --hostfile "$HF" --dry-run -- ./prog
    expect_rc "bad host '${1:0:20}'" 1
    expect_in "bad host '${1:0:20}': line" "$ERR" "line 2: invalid host name"
    expect_in "bad host '${1:0:20}': why" "$ERR" "$2"
}
check_bad_host "$L57" "first label is longer than 56 characters"
check_bad_host "x.$L64" "a label longer than 63 characters"
check_bad_host "$(printf 'a%.0s' $(seq 254))" "longer than 253 characters"
check_bad_host "node-.x" "starts or ends with '-'"
check_bad_host "a..b" "an empty label"
check_bad_host "node_1" "only letters, digits"
check_bad_host "fe80::1" "an IPv6 address"
check_bad_host "nodeA:4" "':' is not allowed"
check_bad_host $'bell\x07' "'bell?'"

# ---- -n capped: at most 16 ranks per core (or per slot of the hostfile) -----------------------
run "$T" -n 100000 --dry-run -- ./prog
expect_rc "-n 100000" 2
expect_in "-n 100000 says why" "$ERR" "100000 ranks on 1 host put 100000 on a host, more than 16 per core (at most $((16 * CORES)) for $CORES cores)"
run timeout 10 "$T" -n 100000 -- true
expect_rc "-n 100000 without --dry-run fails at once" 2
run "$T" -n $((16 * CORES)) --dry-run -- ./prog
expect_rc "-n 16 per core" 0
run "$T" --n-per-node $((16 * CORES + 1)) --dry-run -- ./prog
expect_rc "--n-per-node above 16 per core" 2
printf 'nodeA slots=64\nnodeB\n' >"$HF"
run "$T" --hostfile "$HF" -n 2048 --dry-run -- ./prog
expect_rc "hostfile slots raise the cap" 0
run "$T" --hostfile "$HF" -n 2050 --dry-run -- ./prog
expect_rc "above 16 per slot" 2
expect_in "above 16 per slot says why" "$ERR" "more than 16 per slot (at most 1024 for 64 slots)"

# ---- argv and environment through a fake mpirun (no shell in between) -------------------------
cat >"$TMP/fakempirun" <<'EOF'
#!/bin/sh
for a in "$@"; do printf 'ARG<%s>\n' "$a"; done
printf 'ENV A<%s> OMP<%s>\n' "$A" "$OMP_NUM_THREADS"
exit "${FAKE_EXIT:-0}"
EOF
chmod +x "$TMP/fakempirun"
TNT_MPIRUN="$TMP/fakempirun" run "$T" -n 2 -x 'A=$HOME;`x`' -- ./prog 'a b' '$HOME' '*'
expect_rc "fake mpirun" 0
expect_in "argument with a space intact" "$OUT" "ARG<a b>"
expect_in "\$HOME not expanded" "$OUT" 'ARG<$HOME>'
expect_in "* not globbed" "$OUT" "ARG<*>"
expect_in "-x value reaches mpirun's environment verbatim" "$OUT" 'ENV A<$HOME;`x`>'
expect_in "OMP_NUM_THREADS in mpirun's environment" "$OUT" "OMP<$(threads_for 2)>"
FAKE_EXIT=7 TNT_MPIRUN="$TMP/fakempirun" run "$T" -n 2 -- ./prog
expect_rc "mpirun's exit code is the launcher's" 7
TNT_MPIRUN="$TMP/empty/mpirun" run "$T" -n 2 -- ./prog
expect_rc "mpirun not found" 1
expect_in "mpirun not found message" "$ERR" "$TMP/empty/mpirun"

# ---- real runs on 2 local ranks ---------------------------------------------------------------
run timeout 30 "$T" -n 2 -x GREETING=hi -- /bin/sh -c \
    'echo "rank $OMPI_COMM_WORLD_RANK threads $OMP_NUM_THREADS $GREETING"'
expect_rc "real run" 0
expect_in "rank 0 ran" "$OUT" "rank 0 threads $(threads_for 2) hi"
expect_in "rank 1 ran" "$OUT" "rank 1 threads $(threads_for 2) hi"
run timeout 30 "$T" -n 2 -- /bin/sh -c 'exit 3'
expect_rc "program exit code propagates" 3

# ---- --cleanup of a running job ---------------------------------------------------------------
S1="301.$TAG"
"$T" -n 2 -- sleep "$S1" >/dev/null 2>&1 &
L1=$!
BG_PIDS+=("$L1")
if wait_until 15 procs_are "^sleep $S1\$" 2; then
    run "$T" --cleanup --dry-run -- sleep "$S1"
    expect_rc "--cleanup --dry-run" 0
    expect_in "--cleanup --dry-run finds the 2 ranks only" "$OUT" "would send SIGTERM to 2 processes"
    procs_are "^sleep $S1\$" 2 && ok "--cleanup --dry-run leaves them" || fail "dry run killed"
    run "$T" --cleanup -- sleep "$S1"
    expect_rc "--cleanup" 0
    expect_in "--cleanup reports" "$OUT" "SIGTERM to 2 processes"
    wait_until 5 procs_are "^sleep $S1\$" 0 && ok "--cleanup ended the ranks" \
        || fail "ranks still running after --cleanup"
    wait_until 10 pid_gone "$L1" && ok "launcher ended after --cleanup" \
        || fail "launcher still running after --cleanup"
else
    fail "2 ranks of 'sleep $S1' did not start"
fi
run "$T" --cleanup --force -- sleep "$S1"
expect_rc "--cleanup with nothing running" 0
expect_in "--cleanup says nothing ran" "$OUT" "no process"

# Remote hosts go through the rsh agent; a fake agent runs the command here.
cat >"$TMP/fakersh" <<EOF
#!/bin/sh
echo "\$1" >>"$TMP/rsh.log"
shift
exec sh -c "\$*"
EOF
chmod +x "$TMP/fakersh"
printf 'fakenode1\n' >"$HF"
S2="302.$TAG"
sleep "$S2" &
BG_PIDS+=("$!")
sleep "$S2" &
BG_PIDS+=("$!")
OMPI_MCA_plm_rsh_agent="$TMP/fakersh" run "$T" --hostfile "$HF" --cleanup -- sleep "$S2"
expect_rc "remote --cleanup" 0
expect_in "remote --cleanup used the agent" "$(cat "$TMP/rsh.log" 2>/dev/null)" "fakenode1"
wait_until 5 procs_are "^sleep $S2\$" 0 && ok "remote --cleanup ended the processes" \
    || fail "processes still running after remote --cleanup"
OMPI_MCA_plm_rsh_agent="$TMP/fakersh" run "$T" --hostfile "$HF" --cleanup -- sleep "$S2"
expect_rc "remote --cleanup with nothing running" 0
OMPI_MCA_plm_rsh_agent="false" run "$T" --hostfile "$HF" --cleanup -- sleep "$S2"
expect_rc "remote --cleanup whose agent fails" 1

# ---- signals are forwarded to mpirun, which stops every rank ----------------------------------
for sig in INT TERM; do
    S3="303.$TAG"
    "$T" -n 2 -- sleep "$S3" >/dev/null 2>&1 &
    L3=$!
    BG_PIDS+=("$L3")
    if wait_until 15 procs_are "^sleep $S3\$" 2; then
        kill -"$sig" "$L3"
        if wait_until 10 pid_gone "$L3"; then
            wait "$L3"
            RC=$?
            [ "$RC" -ne 0 ] && ok "SIG$sig: launcher exited with $RC" \
                || fail "SIG$sig: launcher exited 0"
        else
            fail "SIG$sig: launcher still running 10 s after the signal"
        fi
        wait_until 5 procs_are "^sleep $S3\$" 0 && ok "SIG$sig: all ranks gone" \
            || fail "SIG$sig: ranks still running"
    else
        fail "SIG$sig: 2 ranks of 'sleep $S3' did not start"
    fi
    pkill -KILL -f "^sleep $S3\$" 2>/dev/null
done

# Ctrl+C typed at a terminal reaches launcher and mpirun together; the launcher must not forward
# it again (mpirun takes a second one as "terminate now" and leaves its ranks running).
if command -v script >/dev/null; then
    S4="304.$TAG"
    (wait_until 15 procs_are "^sleep $S4\$" 2; printf '\003') |
        timeout 20 script -qec "'$T' -n 2 -- sleep $S4" /dev/null >/dev/null 2>&1
    RC=$?
    [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && ok "terminal Ctrl+C: launcher exited with $RC" \
        || fail "terminal Ctrl+C: launcher exit $RC"
    wait_until 5 procs_are "^sleep $S4\$" 0 && ok "terminal Ctrl+C: all ranks gone" \
        || fail "terminal Ctrl+C: ranks still running"
    pkill -KILL -f "^sleep $S4\$" 2>/dev/null
else
    echo "skip: terminal Ctrl+C (no 'script' command)"
fi

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all launcher checks passed"
