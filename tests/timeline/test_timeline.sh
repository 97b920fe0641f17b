#!/usr/bin/env bash
# The timeline through the launcher: --timeline on 2 ranks (each reducer) and TNT_TIMELINE on one
# process give one valid Chrome trace-event file with every layer and bucket of every step
# (check_trace.py; sharded: the optimizer's update on the comm thread too), the ranks' part files
# merged away, and the step summary on stderr.
# Usage: test_timeline.sh PATH/TO/tarantella PATH/TO/fault_prog
set -u
T=$(realpath "$1")
P=$(realpath "$2")
HERE=$(dirname "$(realpath "$0")")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }

# fault_prog ok: two Dense layers, 3 epochs of 16 steps; one bucket per layer
for red in flat node sharded; do
    rm -f "$TMP"/trace.json*
    (cd "$TMP" && timeout 120 "$T" -n 2 --reducer $red --fusion-threshold 0 --timeline trace.json -- \
        "$P" ok 0 0 "$TMP" >"$TMP/out" 2>"$TMP/err")
    rc=$?
    [ $rc -eq 0 ] || { fail "$red: exit $rc"; tail -20 "$TMP/err"; continue; }
    python3 "$HERE/check_trace.py" "$TMP/trace.json" 2 2 && ok "$red: the merged trace checks" ||
        fail "$red: the merged trace"
    ls "$TMP"/trace.json.rank* >/dev/null 2>&1 && fail "$red: part files left" || ok "$red: part files merged away"
    grep -q "timeline .*trace.json: 2 rank(s), 48 steps each" "$TMP/err" &&
        grep -q "of it hidden behind backward" "$TMP/err" && ok "$red: step summary" ||
        { fail "$red: no step summary"; cat "$TMP/err"; }
    if [ $red = sharded ]; then # the optimizer's update runs on the comm thread, per owned slice
        grep -q '"cat": *"reduction.update"' "$TMP/trace.json" &&
            grep -q "the optimizer's update of this rank's slices" "$TMP/err" &&
            ok "sharded: the update on the comm thread, in the trace and the summary" ||
            fail "sharded: no update on the comm thread in the trace or the summary"
    fi
done

# one process, no launcher: the library writes the file and the summary itself
rm -f "$TMP"/one.json
TNT_TIMELINE="$TMP/one.json" timeout 60 "$P" ok 0 0 "$TMP" >"$TMP/out" 2>"$TMP/err"
python3 "$HERE/check_trace.py" "$TMP/one.json" 1 0 && ok "one process: the trace checks" || fail "one process: the trace"
grep -q "timeline .*one.json: 1 rank(s), 48 steps each" "$TMP/err" && ok "one process: step summary" ||
    { fail "one process: no step summary"; cat "$TMP/err"; }
"$T" --timeline= -- true 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "invalid value '' for --timeline" "$TMP/err" && ok "empty --timeline: usage error" ||
    fail "empty --timeline accepted"

[ "$FAILS" -eq 0 ] && echo "all timeline checks passed" || echo "$FAILS timeline check(s) failed"
exit $((FAILS > 0))
