#!/usr/bin/env bash
# test_cpu_check.sh BIN_DIR PYTHON_DIR: the build targets x86-64-v3 (AVX2, FMA, BMI2). On an older
# CPU every program (the shared library's, a statically linked test, Python's import) must refuse
# to start with a message naming what is missing, not die of SIGILL; on a Haswell it runs. The
# older CPUs are QEMU's user-mode CPU models (Debian's qemu-user), which report their own CPUID.
set -u
bin=$1 pydir=$2
command -v qemu-x86_64 >/dev/null || { echo "FAIL: qemu-x86_64 missing (Debian package qemu-user)"; exit 1; }
fails=0
# expect CPU WANT_RC NEEDLE COMMAND...
expect() {
  local cpu=$1 want=$2 needle=$3; shift 3
  local out rc
  out=$(qemu-x86_64 -cpu "$cpu" "$@" 2>&1)
  rc=$?
  out=$(grep -v "TCG doesn't support requested feature" <<<"$out")
  if [ "$rc" != "$want" ] || ! grep -qF -- "$needle" <<<"$out"; then
    echo "FAIL: -cpu $cpu $*: exit $rc (expected $want), output without \"$needle\":"; echo "$out" | head -5
    fails=$((fails + 1))
  else
    echo "ok: -cpu $cpu $(basename "$1")${2:+ $2}: exit $rc"
  fi
}
lacks_v3="this CPU lacks AVX2, FMA, BMI2: the library was built for x86-64-v3"
lacks_all="this CPU lacks AVX, AVX2, FMA, BMI2"
expect SandyBridge 1 "$lacks_v3" "$bin/bin/tnt-inspect" --help           # AVX only (2011)
expect Nehalem 1 "$lacks_all" "$bin/bin/tnt-inspect" --help              # no AVX (2008)
expect SandyBridge 1 "$lacks_v3" "$bin/tests/test_config"                # the static library
# (the environment reaches the emulated program; a program it execs would run natively)
export PYTHONPATH=$pydir
expect SandyBridge 1 "$lacks_v3" /usr/bin/python3 -c "import tarantella"
expect Haswell 0 "usage: tnt-inspect" "$bin/bin/tnt-inspect" --help      # x86-64-v3: runs
expect Haswell 0 "imported" /usr/bin/python3 -c "import tarantella; print('imported')"
[ $fails -eq 0 ] && echo "cpu check: 6 passed, 0 failed" || { echo "cpu check: $((6 - fails)) passed, $fails failed"; exit 1; }
