/* tarantella: the launcher of Tarantella in C.
 *
 *   tarantella [options] -- PROGRAM [ARGS]
 *
 * Starts PROGRAM data-parallel on one or more hosts through mpirun (Open MPI's, or MPICH's Hydra:
 * `mpirun --version` tells which, launcher/mpi_dialect.c) or Slurm's srun: it works out ranks,
 * hosts (a hostfile, the Slurm allocation it runs in, or localhost) and threads per rank, exports
 * the runtime's TNT_* settings to every rank, and forwards Ctrl+C / SIGTERM to mpirun, which then
 * stops all ranks on all hosts. With --cleanup it ends a running PROGRAM on every host instead.
 * The options follow the original Tarantella CLI (tarantella_cli.py); see --help. mpirun is run
 * with execvp on an argv vector, never through a shell, so arguments reach the ranks unchanged.
 *
 * Exit codes: 0 success, 2 usage errors and bad option values, 1 other errors, otherwise mpirun's
 * (128+N when the job was interrupted by signal N, SIGINT/SIGTERM/SIGHUP, or mpirun died of signal N). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <sched.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <tarantella.h> /* tnt_timeline_merge */

#include "launcher/cleanup.h"
#include "launcher/devices.h"
#include "launcher/forward.h"
#include "launcher/hostfile.h"
#include "launcher/mpi_dialect.h"
#include "launcher/slurm.h"
#include "launcher/util.h"

/* the mpirun of the MPI this build uses (CMake: TNT_MPI), unless --mpirun or TNT_MPIRUN say */
#ifndef TNT_DEFAULT_MPIRUN
#define TNT_DEFAULT_MPIRUN "mpirun"
#endif

#define TNT_LAUNCHER_VERSION "0.1.0"
enum { EXIT_USAGE = 2, CONTINUE = -1 };
/* oversubscription beyond this many ranks per core is refused */
enum { MAX_RANKS_PER_CORE = 16 };

extern char **environ;

/* ---- small helpers ------------------------------------------------------------------------ */

static bool valid_env_name(const char *s, size_t len) {
    if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (size_t i = 1; i < len; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
    return true;
}

/* Looks PROG up like execvp would; the result is owned by the caller (NULL: not found). */
static char *find_in_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0 ? xstrdup(prog) : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char *cand = xasprintf("%.*s%s%s", (int)len, p, len ? "/" : "", prog);
        if (access(cand, X_OK) == 0) return cand;
        free(cand);
        if (!colon) return NULL;
        p = colon + 1;
    }
}


/* ---- options ------------------------------------------------------------------------------ */

typedef struct {
    long n, npn, fusion_kb;      /* -1: not given */
    long stall_check, stall_shutdown; /* seconds, -1: not given */
    long max_restarts;           /* runs of the whole job again after a failure */
    const char *hostfile, *log_level, *interpreter, *mpirun, *compression, *reducer, *timeline;
    bool log_all, output_all, dry_run, cleanup, force, pin_socket, pin_memory, srun, no_gpu;
    strv xvars;                  /* -x VAR=VALUE in the order given */
    char **prog;                 /* PROGRAM and its ARGS, inside argv */
} options;

static const char *const SYNOPSIS = "usage: tarantella [options] -- PROGRAM [ARGS]\n";

static void print_help(void) {
    fputs(SYNOPSIS, stdout);
    fputs(
        "\nRuns PROGRAM data-parallel on MPI ranks (through mpirun) and exports the Tarantella\n"
        "settings to every rank.\n"
        "\nRanks and hosts:\n"
        "  -n N, --n N              total number of ranks (default: hosts x ranks per node)\n"
        "  --hostfile FILE          hosts to run on, one per line (optional 'slots=K', '#' comments;\n"
        "                           names must be unique); default: the nodes and tasks of the Slurm\n"
        "                           allocation it runs in (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE),\n"
        "                           else localhost\n"
        "  --n-per-node N           ranks per host (aliases --devices-per-node, --npernode);\n"
        "                           default: ceil(N / hosts) with -n, else the GPUs of this host when\n"
        "                           the ranks use GPUs (TNT_DEVICE=auto or gpu), else the host's slots or 1\n"
        "  --no-gpu                 run on CPUs (TNT_DEVICE=cpu; the default, auto, uses the GPUs it\n"
        "                           finds); each rank otherwise takes GPU local rank % GPUs\n"
        "\nRuntime settings (exported to every rank):\n"
        "  --log-level LEVEL        DEBUG, INFO, WARNING or ERROR (TNT_LOG_LEVEL)\n"
        "  --log-on-all-devices     library log messages on every rank (TNT_LOG_ON_ALL_DEVICES=1)\n"
        "  --output-on-all-devices  fit/evaluate output on every rank (TNT_OUTPUT_ON_ALL_DEVICES=1)\n"
        "  --fusion-threshold KB    tensor fusion threshold in KB, >= 0 (TNT_FUSION_THRESHOLD_KB)\n"
        "  --compression none|bf16  gradients travel as bfloat16, summed in float32 (TNT_COMPRESSION)\n"
        "  --reducer auto|flat|node|sharded\n"
        "                           gradient sums: one allreduce over all ranks (flat), the node's ranks\n"
        "                           in shared memory then across nodes (node), and each rank of a node\n"
        "                           updating its slice of the weights (sharded); auto: sharded on CPUs,\n"
        "                           node on GPUs (TNT_REDUCER)\n"
        "  --timeline FILE          record each rank's layers, gradient reductions, optimizer, data waits\n"
        "                           and callbacks, merged into one Chrome trace-event FILE (Perfetto,\n"
        "                           chrome://tracing), with a step summary at the end (TNT_TIMELINE)\n"
        "  --stall-check-seconds S  warn which ranks a collective waits for after S seconds, and\n"
        "                           again every S (default 60; 0: off) (TNT_STALL_CHECK_SECONDS)\n"
        "  --stall-shutdown-seconds S\n"
        "                           abort the job when a collective waits S seconds (default 0:\n"
        "                           never) (TNT_STALL_SHUTDOWN_SECONDS)\n"
        "  -x VAR=VALUE [VAR=VALUE ...]\n"
        "                           set variables on every rank, in the given order (repeatable)\n"
        "\nPlacement:\n"
        "  --pin-to-socket          bind each rank to a socket (mpirun --map-by socket --bind-to\n"
        "                           socket); memory preferably local (numactl --localalloc)\n"
        "  --pin-memory-to-socket   also restrict memory to the rank's socket (implies\n"
        "                           --pin-to-socket; needs numactl)\n"
        "  --interpreter CMD        prefix PROGRAM with CMD on every rank, split on whitespace,\n"
        "                           e.g. \"valgrind --error-exitcode=1\" (alias --python-interpreter)\n"
        "\nMPI:\n"
        "  --mpirun PATH            the mpirun to run (default: TNT_MPIRUN, else " TNT_DEFAULT_MPIRUN "); its\n"
        "                           --version tells its dialect: Open MPI (--host, -x) or MPICH's\n"
        "                           Hydra, also Intel MPI's (-hosts, -genv)\n"
        "  --launcher mpirun|srun   start the ranks with mpirun (default) or as tasks of Slurm's srun\n"
        "                           (the MPI must support srun's PMI: srun --mpi, SLURM_MPI_TYPE)\n"
        "\nFailures:\n"
        "  --max-restarts N         run the whole job again, at most N times, when it fails (a rank\n"
        "                           killed, a host lost: a nonzero exit that no Ctrl+C or SIGTERM\n"
        "                           of the launcher caused); with a BackupAndRestore callback\n"
        "                           (tnt-train --backup_dir) training resumes from its backup\n"
        "\nOther:\n"
        "  --dry-run                print the command line, the exported environment and each rank's\n"
        "                           device (a GPU, or the CPU and why)\n"
        "  --cleanup [--force]      end PROGRAM on every host instead of starting it (SIGTERM;\n"
        "                           SIGKILL with --force)\n"
        "  --version                print the version\n"
        "  --help                   print this help\n"
        "\nThreads per rank are cores per node / ranks per node (OMP_NUM_THREADS; -x\n"
        "OMP_NUM_THREADS=K overrides). PATH, LD_LIBRARY_PATH and all TNT_* variables are exported\n"
        "too. Remote hosts are reached as mpirun does (OMPI_MCA_plm_rsh_agent; Hydra:\n"
        "HYDRA_LAUNCHER_EXEC; default ssh).\n"
        "\nExamples:\n"
        "  tarantella -n 2 -- ./lenet5 --batch_size=64\n"
        "  tarantella --hostfile hosts --n-per-node 2 -x DATASET=/scratch/data -- ./resnet50\n"
        "  tarantella --hostfile hosts --cleanup -- ./resnet50\n"
        "  tarantella --mpirun mpirun.mpich -n 4 -- ./lenet5       (MPICH's Hydra)\n"
        "  sbatch --nodes 2 --ntasks-per-node 2 --wrap 'tarantella -- ./lenet5'\n",
        stdout);
}

static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tarantella: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%sTry 'tarantella --help' for all options.\n", SYNOPSIS);
    return EXIT_USAGE;
}

/* Matches "--name" and "--name=value"; *val is set for the second form (else NULL). */
static bool opt_is(const char *arg, const char *name, const char **val) {
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0) return false;
    if (arg[len] == '\0') { *val = NULL; return true; }
    if (arg[len] == '=' && name[1] == '-') { *val = arg + len + 1; return true; }
    return false;
}

/* Returns CONTINUE, or the exit code (0 after --help/--version). */
static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.n = -1, .npn = -1, .fusion_kb = -1, .stall_check = -1, .stall_shutdown = -1};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *name = a;
        if (strcmp(a, "--") == 0) break;
        if (a[0] != '-' || a[1] == '\0')
            return usage_error("unexpected argument '%s': missing '--' before PROGRAM", a);

        /* Options taking a value: --name VALUE or --name=VALUE (-n also as -nN). */
        static const char *const valued[] = {
            "-n", "--n", "--hostfile", "--n-per-node", "--devices-per-node", "--npernode",
            "--log-level", "--fusion-threshold", "--compression", "--reducer", "--timeline", "--interpreter",
            "--python-interpreter",
            "--stall-check-seconds", "--stall-shutdown-seconds", "--mpirun", "--launcher", "--max-restarts", NULL};
        bool takes_value = false;
        for (int k = 0; valued[k]; k++)
            if (opt_is(a, valued[k], &val)) { takes_value = true; name = valued[k]; break; }
        if (!takes_value && strncmp(a, "-n", 2) == 0) {
            takes_value = true; name = "-n"; val = a + 2;
        }
        if (takes_value && !val) {
            if (i + 1 >= argc) return usage_error("option '%s' needs a value", name);
            val = argv[++i];
        }

        if (takes_value) {
            if (!strcmp(name, "-n") || !strcmp(name, "--n")) {
                if (!parse_long(val, 1, 1000000, &o->n))
                    return usage_error("invalid value '%s' for %s: expected a positive integer "
                                       "(number of ranks)", val, name);
            } else if (!strcmp(name, "--hostfile")) {
                o->hostfile = val;
            } else if (!strcmp(name, "--log-level")) {
                static const char *const levels[] = {"DEBUG", "INFO", "WARNING", "ERROR", NULL};
                o->log_level = NULL;
                for (int k = 0; levels[k]; k++)
                    if (!strcasecmp(val, levels[k])) o->log_level = levels[k];
                if (!o->log_level)
                    return usage_error("invalid value '%s' for --log-level: expected DEBUG, "
                                       "INFO, WARNING or ERROR", val);
            } else if (!strcmp(name, "--fusion-threshold")) {
                if (!parse_long(val, 0, INT_MAX, &o->fusion_kb))
                    return usage_error("invalid value '%s' for --fusion-threshold: expected an "
                                       "integer >= 0 (kilobytes)", val);
            } else if (!strcmp(name, "--compression")) {
                if (strcmp(val, "none") && strcmp(val, "bf16"))
                    return usage_error("invalid value '%s' for --compression: expected none or bf16", val);
                o->compression = val;
            } else if (!strcmp(name, "--timeline")) {
                if (!*val) return usage_error("invalid value '' for --timeline: expected a file name");
                o->timeline = val;
            } else if (!strcmp(name, "--reducer")) {
                if (strcmp(val, "auto") && strcmp(val, "flat") && strcmp(val, "node") && strcmp(val, "sharded"))
                    return usage_error("invalid value '%s' for --reducer: expected auto, flat, node or sharded", val);
                o->reducer = val;
            } else if (!strcmp(name, "--max-restarts")) {
                if (!parse_long(val, 0, 1000000, &o->max_restarts))
                    return usage_error("invalid value '%s' for --max-restarts: expected an integer from 0 "
                                       "to 1000000", val);
            } else if (!strncmp(name, "--stall-", 8)) {
                if (!parse_long(val, 0, 1000000, name[8] == 'c' ? &o->stall_check : &o->stall_shutdown))
                    return usage_error("invalid value '%s' for %s: expected seconds from 0 to 1000000 "
                                       "(0: off)", val, name);
            } else if (!strcmp(name, "--mpirun")) {
                if (!*val) return usage_error("invalid value '' for --mpirun: expected the mpirun program");
                o->mpirun = val;
            } else if (!strcmp(name, "--launcher")) {
                if (strcmp(val, "mpirun") && strcmp(val, "srun"))
                    return usage_error("invalid value '%s' for --launcher: expected mpirun or srun", val);
                o->srun = !strcmp(val, "srun");
            } else if (!strcmp(name, "--interpreter") || !strcmp(name, "--python-interpreter")) {
                o->interpreter = val; /* "" is allowed: no prefix, as in the original CLI */
            } else if (!parse_long(val, 1, 100000, &o->npn)) {
                return usage_error("invalid value '%s' for %s: expected a positive integer "
                                   "(ranks per node)", val, name);
            }
            continue;
        }

        /* -x VAR=VALUE [VAR=VALUE ...] up to the next option or "--" (also -xVAR=VALUE). */
        if (a[0] == '-' && a[1] == 'x') {
            const char *first = a[2] ? a + 2 : NULL;
            if (!first) {
                if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0)
                    return usage_error("option '-x' needs VAR=VALUE");
                first = argv[++i];
            }
            for (const char *xv = first;;) {
                const char *eq = strchr(xv, '=');
                if (!eq || !valid_env_name(xv, (size_t)(eq - xv)))
                    return usage_error("invalid -x '%s': expected VAR=VALUE with VAR made of "
                                       "letters, digits and '_' (missing '--' before PROGRAM?)",
                                       xv);
                sv_push(&o->xvars, xv);
                if (i + 1 >= argc || argv[i + 1][0] == '-') break;
                xv = argv[++i];
            }
            continue;
        }

        bool *flag = NULL;
        if (!strcmp(a, "--help")) { print_help(); return 0; }
        if (!strcmp(a, "--version")) { puts("tarantella " TNT_LAUNCHER_VERSION); return 0; }
        if (!strcmp(a, "--no-gpu") || !strcmp(a, "--no-gpus")) flag = &o->no_gpu;
        else if (!strcmp(a, "--log-on-all-devices")) flag = &o->log_all;
        else if (!strcmp(a, "--output-on-all-devices")) flag = &o->output_all;
        else if (!strcmp(a, "--dry-run")) flag = &o->dry_run;
        else if (!strcmp(a, "--cleanup")) flag = &o->cleanup;
        else if (!strcmp(a, "--force")) flag = &o->force;
        else if (!strcmp(a, "--pin-to-socket")) flag = &o->pin_socket;
        else if (!strcmp(a, "--pin-memory-to-socket")) flag = &o->pin_memory;
        if (!flag) {
            const char *eq = strchr(a, '=');
            if (eq) return usage_error("unknown option '%s' (or it takes no value)", a);
            return usage_error("unknown option '%s'", a);
        }
        *flag = true;
    }
    if (i >= argc) return usage_error("missing '--' before PROGRAM");
    if (i + 1 >= argc) return usage_error("missing PROGRAM after '--'");
    if (o->force && !o->cleanup) return usage_error("--force only applies to --cleanup");
    if (o->srun && o->mpirun) return usage_error("--mpirun %s and --launcher srun exclude each other", o->mpirun);
    o->prog = argv + i + 1;
    if (o->pin_memory) o->pin_socket = true; /* memory on the rank's socket needs the rank there */
    return CONTINUE;
}

/* ---- hosts -------------------------------------------------------------------------------- */

/* Reads FILE (see hostfile_read); 0, or 1 after printing the error. */
static int read_hostfile(const char *file, hostlist *h) {
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "tarantella: cannot read hostfile '%s': %s\n", file, strerror(errno));
        return 1;
    }
    char err[512];
    int rc = hostfile_read(f, file, h, err, sizeof err);
    if (rc) fprintf(stderr, "tarantella: %s\n", err);
    fclose(f);
    return rc;
}


/* ---- launching ---------------------------------------------------------------------------- */

/* Exported variables, in the order mpirun gets them; setting one again moves it to the end so
 * that later definitions (-x) win and keep their given order. */
typedef struct { strv names, values; } exports;

static void ex_set(exports *e, const char *name, const char *value) {
    for (size_t k = 0; k < e->names.n; k++)
        if (!strcmp(e->names.v[k], name)) {
            sv_remove(&e->names, k);
            sv_remove(&e->values, k);
            break;
        }
    sv_push(&e->names, name);
    sv_push(&e->values, value);
}

/* For "NAME=VALUE" strings (environ, -x). */
static void ex_set_pair(exports *e, const char *pair) {
    const char *eq = strchr(pair, '=');
    char *name = strndup(pair, (size_t)(eq - pair));
    if (!name) die_oom();
    ex_set(e, name, eq + 1);
    free(name);
}

static void ex_setf(exports *e, const char *name, long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    ex_set(e, name, buf);
}

/* -x OMP_NUM_THREADS=K beyond the cores makes every rank wait on its own threads (measured:
 * 5x slower LeNet-5 steps at K=8, 2 ranks, 2 cores). */
static void warn_threads(const exports *e, long ppn, long cores) {
    for (size_t k = 0; k < e->names.n; k++) {
        long t;
        if (strcmp(e->names.v[k], "OMP_NUM_THREADS") || !parse_long(e->values.v[k], 1, 1000000, &t)) continue;
        if (t * ppn > cores)
            fprintf(stderr, "tarantella: WARNING: OMP_NUM_THREADS=%ld x %ld ranks per node = %ld threads "
                    "exceed the %ld cores of this node (slow: threads wait for each other)\n",
                    t, ppn, t * ppn, cores);
    }
}

/* The device of the ranks, from TNT_DEVICE as they will see it (-x over --no-gpu over the
 * environment). -x TNT_* values go into the launcher's environment first: the GPU count reads
 * TNT_CUDA_LIBDIR and TNT_GPU_EMULATE as the ranks will. */
static bool plan_devices(const options *o, device_plan *p) {
    const char *device = getenv("TNT_DEVICE"), *source = "the environment", *ordinal = getenv("TNT_GPU_ORDINAL");
    if (o->no_gpu) device = "cpu", source = "--no-gpu";
    for (size_t k = 0; k < o->xvars.n; k++) {
        const char *xv = o->xvars.v[k], *eq = strchr(xv, '=');
        if (strncmp(xv, "TNT_", 4)) continue;
        char *name = strndup(xv, (size_t)(eq - xv));
        if (!name) die_oom();
        setenv(name, eq + 1, 1);
        free(name);
        if (!strncmp(xv, "TNT_DEVICE=", 11)) device = eq + 1, source = "-x";
        if (!strncmp(xv, "TNT_GPU_ORDINAL=", 16)) ordinal = eq + 1;
    }
    return devices_plan(device, source, ordinal, p);
}

static int launch(const options *o, const hostlist *h, bool hosts_given) {
    device_plan devices;
    if (!plan_devices(o, &devices)) return usage_error("%s", devices.why);
    /* Ranks per node: --n-per-node, else -n spread evenly (ceil), else one per GPU of this host when
     * the ranks use GPUs, else each host's slots or 1. */
    size_t nh = h->n;
    long n = o->n, ppn = o->npn;
    if (n < 0 && ppn < 0 && devices.gpu) ppn = devices.gpus;
    long *slots = calloc(nh, sizeof *slots);
    if (!slots) die_oom();
    if (ppn < 0 && n < 0) {
        n = 0;
        ppn = 1;
        for (size_t i = 0; i < nh; i++) {
            slots[i] = h->slots[i] > 0 ? h->slots[i] : 1;
            n += slots[i];
            if (slots[i] > ppn) ppn = slots[i];
        }
    } else {
        if (ppn < 0) ppn = (n + (long)nh - 1) / (long)nh;
        if (n < 0) n = (long)nh * ppn;
        if (n > (long)nh * ppn) {
            free(slots);
            return usage_error("-n %ld needs more than %zu host%s x %ld ranks per node", n, nh,
                               nh == 1 ? "" : "s", ppn);
        }
        for (size_t i = 0; i < nh; i++) slots[i] = ppn;
    }
    if (ppn > n) ppn = n; /* fewer ranks than slots: the first host gets them all */
    devices_note_sharing(stderr, &devices, ppn);

    /* the CPUs this launcher may run on (a Slurm job step or a cpuset sees fewer than the machine
     * has), else those online */
    long cores = 0;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cores = CPU_COUNT(&allowed);
    if (cores < 1) cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    /* One mpirun daemon per host starts its ranks: 300 ranks of `true` took it 36 s on 2 cores
     * and -n 100000 hung it. Hosts are taken to be like this one (as for threads per rank) or
     * to have the slots the hostfile gives. */
    long capacity = cores;
    for (size_t i = 0; i < nh; i++) capacity = h->slots[i] > capacity ? h->slots[i] : capacity;
    if (ppn > MAX_RANKS_PER_CORE * capacity) {
        free(slots);
        return usage_error("%ld ranks on %zu host%s put %ld on a host, more than %d per %s (at most %ld for %ld "
                           "%ss): mpirun would take minutes to start them, or hang; add hosts with --hostfile",
                           n, nh, nh == 1 ? "" : "s", ppn, MAX_RANKS_PER_CORE, capacity == cores ? "core" : "slot",
                           MAX_RANKS_PER_CORE * capacity, capacity, capacity == cores ? "core" : "slot");
    }
    long threads = cores / ppn > 0 ? cores / ppn : 1;
    bool oversubscribe = ppn > cores;
    if (oversubscribe)
        fprintf(stderr, "tarantella: WARNING: %ld ranks per node exceed the %ld cores of this "
                "node; running oversubscribed with 1 thread per rank (slow)\n", ppn, cores);

    /* What every rank gets: launcher environment first, then options, then -x in order. */
    exports ex = {0};
    static const char *const passed[] = {"PATH", "LD_LIBRARY_PATH", NULL};
    for (int k = 0; passed[k]; k++) {
        const char *v = getenv(passed[k]);
        if (v) ex_set(&ex, passed[k], v);
    }
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "TNT_", 4) && strchr(*e, '=')) ex_set_pair(&ex, *e);
    if (o->no_gpu) ex_set(&ex, "TNT_DEVICE", "cpu");
    if (o->log_level) ex_set(&ex, "TNT_LOG_LEVEL", o->log_level);
    if (o->log_all) ex_set(&ex, "TNT_LOG_ON_ALL_DEVICES", "1");
    if (o->output_all) ex_set(&ex, "TNT_OUTPUT_ON_ALL_DEVICES", "1");
    if (o->fusion_kb >= 0) ex_setf(&ex, "TNT_FUSION_THRESHOLD_KB", o->fusion_kb);
    if (o->compression) ex_set(&ex, "TNT_COMPRESSION", o->compression);
    if (o->reducer) ex_set(&ex, "TNT_REDUCER", o->reducer);
    char timeline[4096] = "";
    if (o->timeline) { /* absolute: every rank writes beside it, wherever it runs */
        char cwd[3072];
        if (o->timeline[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(timeline, sizeof timeline, "%s", o->timeline);
        else snprintf(timeline, sizeof timeline, "%s/%s", cwd, o->timeline);
        ex_set(&ex, "TNT_TIMELINE", timeline);
    } else if (getenv("TNT_TIMELINE")) {
        snprintf(timeline, sizeof timeline, "%s", getenv("TNT_TIMELINE"));
    }
    if (o->stall_check >= 0) ex_setf(&ex, "TNT_STALL_CHECK_SECONDS", o->stall_check);
    if (o->stall_shutdown >= 0) ex_setf(&ex, "TNT_STALL_SHUTDOWN_SECONDS", o->stall_shutdown);
    /* mpirun hands ranks a pseudo-terminal whatever the launcher writes to: tell them whether
     * the user's output really is a terminal (a live progress bar or plain lines) */
    if (!getenv("TNT_STDOUT_TTY")) ex_set(&ex, "TNT_STDOUT_TTY", isatty(STDOUT_FILENO) ? "1" : "0");
    ex_setf(&ex, "OMP_NUM_THREADS", threads);
    for (size_t k = 0; k < o->xvars.n; k++) ex_set_pair(&ex, o->xvars.v[k]);
    warn_threads(&ex, ppn, cores);

    int rc = 0;
    strv argv = {0};
    char *mpirun_path = NULL;
    const char *mpirun = o->mpirun ? o->mpirun : getenv("TNT_MPIRUN");
    if (!mpirun || !*mpirun) mpirun = TNT_DEFAULT_MPIRUN;
    if (o->srun) mpirun = "srun";
    mpirun_path = find_in_path(mpirun);
    if (!o->dry_run && !mpirun_path) {
        if (o->srun)
            fprintf(stderr, "tarantella: --launcher srun: cannot find 'srun' in PATH (run inside a Slurm allocation, "
                    "or use --launcher mpirun)\n");
        else
            fprintf(stderr, "tarantella: cannot find '%s' in PATH: install openmpi-bin (or mpich), or give the "
                    "mpirun program with --mpirun PATH or TNT_MPIRUN\n", mpirun);
        rc = 1;
        goto out;
    }
    const char *how = "by --launcher srun";
    mpi_dialect dialect = o->srun ? DIALECT_SRUN : detect_dialect(mpirun_path, mpirun, &how);
    if (o->pin_socket) {
        char *numactl = find_in_path("numactl");
        if (!numactl) {
            fprintf(stderr, "tarantella: %s needs numactl to place each rank's memory on its "
                    "socket, but 'numactl' is not in PATH (install the numactl package)\n",
                    o->pin_memory ? "--pin-memory-to-socket" : "--pin-to-socket");
            rc = 1;
            goto out;
        }
        free(numactl);
    }

    launch_spec spec = {
        .mpirun = mpirun, .n = n, .ppn = ppn, .threads = threads, .n_hosts = nh, .hosts = h->names,
        .slots = slots, .hosts_given = hosts_given, .root = geteuid() == 0, .oversubscribe = oversubscribe,
        .pin_socket = o->pin_socket, .pin_memory = o->pin_memory, .names = &ex.names, .values = &ex.values,
        .interpreter = o->interpreter, .prog = o->prog};
    char err[512];
    if (dialect_command(dialect, &spec, &argv, err, sizeof err)) {
        fprintf(stderr, "tarantella: %s\n", err);
        rc = 1;
        goto out;
    }

    if (o->dry_run) {
        fprintf(stderr, "tarantella: dry run: %s's command line for '%s' (dialect %s)\n", dialect_name(dialect), mpirun,
                how);
        for (size_t k = 0; k < argv.n; k++) {
            if (k) putchar(' ');
            shell_quote(stdout, argv.v[k]);
        }
        putchar('\n');
        for (size_t k = 0; k < ex.names.n; k++) {
            printf("%s=", ex.names.v[k]);
            shell_quote(stdout, ex.values.v[k]);
            putchar('\n');
        }
        devices_print(stdout, &devices, n, nh, h->names, slots);
        fflush(stdout);
        goto out;
    }
    /* The exported values, in the launcher's environment for mpirun or srun to pass on (Open
     * MPI's -x NAME and srun's --export=ALL take them from there). */
    for (size_t k = 0; k < ex.names.n; k++)
        if (setenv(ex.names.v[k], ex.values.v[k], 1) != 0) {
            fprintf(stderr, "tarantella: cannot set %s: %s\n", ex.names.v[k], strerror(errno));
            rc = 1;
            goto out;
        }
    /* A failed job runs again from the start: a program with a backup (BackupAndRestore) resumes
     * from it. A stop the user asked for is not a failure. */
    for (long restarts = 0;; restarts++) {
        rc = run_forwarding(argv.v);
        if (rc == 0 || run_interrupted() || restarts >= o->max_restarts) break;
        fprintf(stderr, "tarantella: the job failed (exit status %d); restarting it (restart %ld of at most %ld)\n", rc,
                restarts + 1, o->max_restarts);
    }
    /* the ranks' trace files into one, and where the time went (one rank wrote it whole) */
    if (timeline[0] && n > 1 && tnt_timeline_merge(timeline, (int)n, stderr) != TNT_OK)
        fprintf(stderr, "tarantella: %s\n", tnt_last_error());
out:
    free(mpirun_path);
    free(slots);
    sv_free(&argv);
    sv_free(&ex.names);
    sv_free(&ex.values);
    return rc;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CONTINUE) {
        sv_free(&o.xvars);
        return rc;
    }
    hostlist h = {0};
    rc = 0;
    slurm_env slurm;
    bool hosts_given = true;
    if (o.hostfile) {
        rc = read_hostfile(o.hostfile, &h);
    } else if (slurm_env_read(&slurm)) {
        /* inside an allocation: its nodes, with its tasks per node as slots */
        char err[768];
        if ((rc = slurm_hosts(&slurm, &h, err, sizeof err)))
            fprintf(stderr, "tarantella: Slurm job %.40s: %s (or give --hostfile)\n", slurm.job_id, err);
    } else {
        hosts_given = false;
        if (!hostlist_add(&h, "localhost", 0, 0)) die_oom();
    }
    if (rc == 0) rc = o.cleanup ? cleanup_hosts(o.prog, o.force, o.dry_run, &h) : launch(&o, &h, hosts_given);
    hostlist_free(&h);
    sv_free(&o.xvars);
    return rc;
}
