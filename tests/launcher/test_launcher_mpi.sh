#!/usr/bin/env bash
# The launcher's MPI dialects and Slurm (tools/launcher/mpi_dialect.c, slurm.c): which mpirun it
# runs (--mpirun, TNT_MPIRUN, the build's default) and what `--version` says it is; the command
# lines of Open MPI (--host, -x), MPICH's Hydra (-hosts, -genv) and srun under --dry-run; a
# simulated Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE) as
# hosts and tasks, and its bad values; real 2-rank runs through each installed mpirun.
# Usage: test_launcher_mpi.sh PATH/TO/tarantella. Exits nonzero if a check fails.
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH/TO/tarantella" >&2
    exit 2
fi
T=$(realpath "$1")
TMP=$(mktemp -d)
CORES=$(getconf _NPROCESSORS_ONLN)
trap 'rm -rf "$TMP"' EXIT
unset TNT_MPIRUN SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST SLURM_TASKS_PER_NODE \
    SLURM_NTASKS_PER_NODE SLURM_NTASKS SLURM_STEP_ID OMPI_MCA_plm_rsh_agent
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok:   $*"; }
run() { "$@" >"$TMP/out" 2>"$TMP/err"; RC=$?; OUT=$(cat "$TMP/out"); ERR=$(cat "$TMP/err"); }
expect_rc() {
    if [ "$RC" -eq "$2" ]; then ok "$1 (exit $RC)"
    else fail "$1: exit $RC, expected $2"; echo "  stdout: $OUT"; echo "  stderr: $ERR"; fi
}
expect_in() { case "$2" in *"$3"*) ok "$1" ;; *) fail "$1: '$3' not in:"; echo "$2" | sed 's/^/  | /' ;; esac; }
expect_not_in() { case "$2" in *"$3"*) fail "$1: '$3' unexpectedly in:"; echo "$2" | sed 's/^/  | /' ;; *) ok "$1" ;; esac; }
threads_for() { local t=$((CORES / $1)); [ $t -lt 1 ] && t=1; echo $t; }

# Fake launchers: they answer --version as the real ones do and print their arguments otherwise.
mkdir -p "$TMP/bin"
fake() { # NAME VERSION-TEXT
    cat >"$TMP/bin/$1" <<EOS
#!/bin/sh
if [ "\$1" = "--version" ]; then printf '%s\n' "$2"; exit 0; fi
for a in "\$@"; do printf 'ARG<%s>\n' "\$a"; done
printf 'ENV G<%s> OMP<%s>\n' "\$GREETING" "\$OMP_NUM_THREADS"
EOS
    chmod +x "$TMP/bin/$1"
}
fake hydra-run "HYDRA build details:
    Version:                                 4.0.2"
fake impi-run "Intel(R) MPI Library for Linux* OS, Version 2021.6 Build 20220227 (id: 28877f3f32)"
fake ompi-run "mpirun (Open MPI) 4.1.4"
fake srun "slurm 23.02.6"
fake odd-run "some launcher 1.0"

# ---- dialect detection and the command lines ----------------------------------------------------
run "$T" --mpirun "$TMP/bin/hydra-run" -n 2 -x GREETING='x y' --dry-run -- ./prog 'a b'
expect_rc "Hydra dry run" 0
CMD=$(echo "$OUT" | head -n 1)
expect_in "Hydra: named on stderr" "$ERR" "MPICH Hydra's command line for '$TMP/bin/hydra-run' (dialect from its --version)"
expect_in "Hydra: -np and -hosts" "$CMD" "hydra-run -np 2 -hosts localhost:2 -bind-to none "
expect_in "Hydra: -genv NAME VALUE, quoted" "$CMD" " -genv GREETING 'x y' ./prog 'a b'"
expect_in "Hydra: OMP_NUM_THREADS by -genv" "$CMD" " -genv OMP_NUM_THREADS $(threads_for 2) "
expect_not_in "Hydra: no Open MPI flags" "$CMD" "--allow-run-as-root"
expect_not_in "Hydra: no -x" "$CMD" " -x "
expect_in "Hydra: environment listed" "$OUT" $'\n'"GREETING='x y'"
TNT_MPIRUN="$TMP/bin/impi-run" run "$T" -n 3 --dry-run -- ./prog
expect_in "Intel MPI is Hydra (TNT_MPIRUN)" "$OUT" "impi-run -np 3 -hosts localhost:3 "
run "$T" --mpirun "$TMP/bin/ompi-run" -n 2 --dry-run -- ./prog
expect_in "Open MPI by --version" "$OUT" "ompi-run "
expect_in "Open MPI: --host and -x" "$OUT" " -np 2 --host localhost:2 --bind-to none "
expect_in "Open MPI: -x NAME" "$OUT" " -x OMP_NUM_THREADS ./prog"
TNT_MPIRUN="$TMP/bin/hydra-run" run "$T" --mpirun "$TMP/bin/ompi-run" -n 2 --dry-run -- ./prog
expect_in "--mpirun wins over TNT_MPIRUN" "$OUT" "ompi-run "; expect_in "--mpirun wins: Open MPI words" "$OUT" " -np 2 --host localhost:2"
run "$T" --mpirun "$TMP/bin/odd-run" -n 2 --dry-run -- ./prog
expect_in "unknown --version: Open MPI's dialect" "$OUT" "odd-run "
expect_in "unknown --version: said so" "$ERR" "(dialect the default (--version named no MPI))"
run "$T" --mpirun /nonexistent/mpirun.mpich -n 2 --dry-run -- ./prog
expect_rc "dry run of an mpirun not installed" 0
expect_in "not installed: dialect by its name" "$OUT" "/nonexistent/mpirun.mpich -np 2 -hosts localhost:2"
run "$T" --mpirun /nonexistent/mpirun.mpich -n 2 -- ./prog
expect_rc "run of an mpirun not installed" 1
expect_in "not installed: says so" "$ERR" "cannot find '/nonexistent/mpirun.mpich'"
run "$T" --mpirun= -- ./prog
expect_rc "empty --mpirun" 2
run "$T" --help
for opt in --mpirun --launcher "Hydra" "SLURM_JOB_NODELIST"; do expect_in "--help mentions $opt" "$OUT" "$opt"; done
run "$T" --launcher srun --mpirun mpirun.mpich -- ./prog
expect_rc "--launcher srun with --mpirun" 2
expect_in "--launcher srun with --mpirun says why" "$ERR" "--mpirun mpirun.mpich and --launcher srun exclude each other"
run "$T" --launcher mpiexec -- ./prog
expect_rc "bad --launcher" 2
expect_in "bad --launcher names it" "$ERR" "invalid value 'mpiexec' for --launcher: expected mpirun or srun"

# pinning in Hydra's words; strict memory placement is Open MPI's and srun's only
printf '#!/bin/sh\nexec "$@"\n' >"$TMP/bin/numactl"
chmod +x "$TMP/bin/numactl"
PATH="$TMP/bin:$PATH" run "$T" --mpirun hydra-run -n 2 --pin-to-socket --dry-run -- ./prog
expect_in "Hydra --pin-to-socket" "$OUT" " -bind-to socket -map-by socket "
expect_in "Hydra --pin-to-socket numactl" "$OUT" " numactl --localalloc ./prog"
PATH="$TMP/bin:$PATH" run "$T" --mpirun hydra-run -n 2 --pin-memory-to-socket --dry-run -- ./prog
expect_rc "Hydra --pin-memory-to-socket" 1
expect_in "Hydra --pin-memory-to-socket says why" "$ERR" "--pin-memory-to-socket needs Open MPI's mpirun or srun"

# hostfiles in Hydra's words
printf 'nodeA slots=4\nnodeB\n' >"$TMP/hosts"
run "$T" --mpirun "$TMP/bin/hydra-run" --hostfile "$TMP/hosts" --dry-run -- ./prog
expect_in "Hydra hostfile with slots" "$OUT" " -np 5 -hosts nodeA:4,nodeB:1 "

# values reach the fake Hydra intact (execvp, no shell)
run "$T" --mpirun "$TMP/bin/hydra-run" -n 2 -x 'GREETING=$HOME;`x`' -- ./prog
expect_rc "fake Hydra run" 0
expect_in "Hydra: -genv value verbatim" "$OUT" $'ARG<-genv>\nARG<GREETING>\nARG<$HOME;`x`>'

# ---- Slurm allocations ---------------------------------------------------------------------------
slurm() { env SLURM_JOB_ID=4242 "$@"; }
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='node[01-03],gpu7' SLURM_TASKS_PER_NODE='2(x3),1' \
    "$T" --mpirun ompi-run --dry-run -- ./prog
expect_rc "Slurm allocation, Open MPI" 0
expect_in "Slurm: nodes and tasks as hosts" "$OUT" " -np 7 --host node01:2,node02:2,node03:2,gpu7:1 "
expect_in "Slurm: threads per rank from the most tasks on a node" "$OUT" $'\n'"OMP_NUM_THREADS=$(threads_for 2)"
PATH="$TMP/bin:$PATH" run slurm SLURM_NODELIST='c[1-2]' SLURM_NTASKS_PER_NODE=3 SLURM_TASKS_PER_NODE='9(x2)' \
    "$T" --mpirun hydra-run --dry-run -- ./prog
expect_in "Slurm: SLURM_NTASKS_PER_NODE wins, Hydra" "$OUT" " -np 6 -hosts c1:3,c2:3 "
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='rack[1-2]-n[01-02]' "$T" --mpirun ompi-run -n 2 --dry-run -- ./prog
expect_in "Slurm: two bracket groups, -n spread" "$OUT" " -np 2 --host rack1-n01:1,rack1-n02:1,rack2-n01:1,rack2-n02:1 "
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='x[1-2]' SLURM_TASKS_PER_NODE='1(x2)' \
    "$T" --mpirun ompi-run --hostfile "$TMP/hosts" --dry-run -- ./prog
expect_in "--hostfile wins over the allocation" "$OUT" " --host nodeA:4,nodeB:1 "
PATH="$TMP/bin:$PATH" run env SLURM_JOB_NODELIST='x[1-2]' "$T" --mpirun ompi-run --dry-run -- ./prog
expect_in "a node list without a job id is no allocation" "$OUT" " --host localhost:1 "

# srun: the allocation's tasks, the environment exported whole
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='node[01-02]' SLURM_TASKS_PER_NODE='2(x2)' \
    "$T" --launcher srun -x GREETING=hi --dry-run -- ./prog --flag
expect_rc "srun dry run" 0
CMD=$(echo "$OUT" | head -n 1)
expect_in "srun: command line" "$CMD" "srun --ntasks=4 --nodes=2 --nodelist=node01,node02 --ntasks-per-node=2 --cpus-per-task=$(threads_for 2) --cpu-bind=none --kill-on-bad-exit=1 --export=ALL ./prog --flag"
expect_in "srun: named" "$ERR" "Slurm srun's command line for 'srun' (dialect by --launcher srun)"
expect_in "srun: GREETING in the environment" "$OUT" $'\n'"GREETING=hi"
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='n1' "$T" --launcher srun -n 3 --dry-run -- ./prog
expect_in "srun: -n on one node" "$OUT" "srun --ntasks=3 --nodes=1 --nodelist=n1 --ntasks-per-node=3 "
PATH="$TMP/bin:$PATH" run slurm SLURM_JOB_NODELIST='node[01-02]' SLURM_TASKS_PER_NODE='1(x2)' \
    "$T" --launcher srun -x GREETING=hello -- ./prog
expect_rc "fake srun run" 0
expect_in "srun: value through the environment" "$OUT" "ENV G<hello> OMP<$CORES>"
run env PATH="$TMP/empty:/usr/bin:/bin" "$T" --launcher srun -- ./prog
if ! command -v srun >/dev/null 2>&1; then
    expect_rc "no srun" 1
    expect_in "no srun: says so" "$ERR" "--launcher srun: cannot find 'srun' in PATH"
fi

# bad allocations: clear errors naming the variable
bad_slurm() { # NAME EXPECTED VAR=VALUE...
    local name=$1 want=$2
    shift 2
    run env SLURM_JOB_ID=4242 "$@" "$T" --mpirun "$TMP/bin/ompi-run" --dry-run -- ./prog
    expect_rc "$name" 1
    expect_in "$name: message" "$ERR" "$want"
}
bad_slurm "unbalanced bracket" "SLURM_JOB_NODELIST=node[01-04: Slurm node list 'node[01-04': '[' without ']'" \
    SLURM_JOB_NODELIST='node[01-04'
bad_slurm "backwards range" "range 9-3 runs backwards" SLURM_JOB_NODELIST='n[9-3]'
bad_slurm "too many hosts" "more than 65536 hosts" SLURM_JOB_NODELIST='n[1-99999]'
bad_slurm "product too large" "more than 65536 hosts" SLURM_JOB_NODELIST='a[1-1000]b[1-1000]'
bad_slurm "bad host name" "invalid host name 'node_1'" SLURM_JOB_NODELIST='node_[1-2]'
bad_slurm "duplicate host" "host 'n1' is listed twice" SLURM_JOB_NODELIST='n[1-2],n1'
bad_slurm "tasks for fewer nodes" "SLURM_TASKS_PER_NODE=2(x2): Slurm tasks per node '2(x2)': counts for 2 nodes, the node list has 3" \
    SLURM_JOB_NODELIST='n[1-3]' SLURM_TASKS_PER_NODE='2(x2)'
bad_slurm "bad tasks" "expected '(xN)' with N >= 1 after 2" SLURM_JOB_NODELIST='n[1-3]' SLURM_TASKS_PER_NODE='2(x0)'
bad_slurm "bad ntasks per node" "SLURM_NTASKS_PER_NODE=two: expected a count from 1 to 100000" \
    SLURM_JOB_NODELIST='n1' SLURM_NTASKS_PER_NODE=two

# examples/slurm/train.sbatch in a simulated allocation of 2 nodes x 2 tasks, its tarantella made
# a dry run (no nodes to reach here): both of its launcher calls take the allocation's hosts
SBATCH=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/slurm" && pwd)/train.sbatch
mkdir -p "$TMP/build/bin"
printf '#!/bin/sh\nexec "%s" --dry-run "$@"\n' "$T" >"$TMP/build/bin/tarantella"
chmod +x "$TMP/build/bin/tarantella"
PATH="$TMP/bin:$PATH" run env SLURM_JOB_ID=99 SLURM_JOB_NODELIST='cn[07-08]' SLURM_NTASKS_PER_NODE=2 \
    SLURM_TASKS_PER_NODE='2(x2)' TNT_MPIRUN=ompi-run TNT_BUILD="$TMP/build" TNT_DATA=/data/fmnist bash "$SBATCH"
expect_rc "train.sbatch in a simulated allocation" 0
expect_in "train.sbatch: 4 ranks on the allocation's nodes" "$OUT" " -np 4 --host cn07:2,cn08:2 "
expect_in "train.sbatch: the program and its flags" "$OUT" \
    "$TMP/build/bin/lenet5 --data_dir=/data/fmnist --number_epochs=5 --optimizer=adam --learning_rate=0.001"

# threads per rank from the CPUs the launcher may use (a Slurm step's cgroup, a cpuset), not all
if [ "$CORES" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    PATH="$TMP/bin:$PATH" run taskset -c 0 "$T" --mpirun ompi-run -n 1 --dry-run -- ./prog
    expect_in "one allowed CPU: 1 thread per rank" "$OUT" $'\n'"OMP_NUM_THREADS=1"
fi

# ---- real runs through each installed mpirun -----------------------------------------------------
for m in mpirun.openmpi mpirun.mpich; do
    command -v $m >/dev/null 2>&1 || { echo "     ($m not installed)"; continue; }
    run timeout 60 "$T" --mpirun $m -n 2 -x GREETING='hi there' -- /bin/sh -c \
        'echo "rank ${OMPI_COMM_WORLD_RANK:-$PMI_RANK} of ${OMPI_COMM_WORLD_SIZE:-$PMI_SIZE} threads $OMP_NUM_THREADS $GREETING"'
    expect_rc "$m: real run" 0
    expect_in "$m: rank 0 ran" "$OUT" "rank 0 of 2 threads $(threads_for 2) hi there"
    expect_in "$m: rank 1 ran" "$OUT" "rank 1 of 2 threads $(threads_for 2) hi there"
    run timeout 60 "$T" --mpirun $m -n 2 -- /bin/sh -c 'exit 3'
    expect_rc "$m: exit code propagates" 3
done

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all launcher MPI and Slurm checks passed"
