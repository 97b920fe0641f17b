/* mpi_dialect.c: see mpi_dialect.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi_dialect.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *dialect_name(mpi_dialect d) {
    return d == DIALECT_HYDRA ? "MPICH Hydra" : d == DIALECT_SRUN ? "Slurm srun" : "Open MPI";
}

int dialect_from_version(const char *text) {
    if (strstr(text, "Open MPI") || strstr(text, "OpenRTE")) return DIALECT_OPENMPI;
    if (strstr(text, "HYDRA") || strstr(text, "MPICH") || strstr(text, "Intel(R) MPI")) return DIALECT_HYDRA;
    if (!strncmp(text, "slurm ", 6)) return DIALECT_SRUN;
    return -1;
}

/* The first bytes that `path --version` writes (stdout and stderr) within limit seconds; "" when
 * it cannot be run. Owned by the caller. */
static char *version_output(const char *path, int limit) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) return xstrdup("");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return xstrdup("");
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        dup2(fd[1], STDERR_FILENO);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, STDIN_FILENO);
        execl(path, path, "--version", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char *buf = calloc(4097, 1);
    if (!buf) die_oom();
    size_t len = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = limit * 1000L - ((now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L);
        if (left <= 0) break;
        struct pollfd p = {fd[0], POLLIN, 0};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        ssize_t got = read(fd[0], buf + len, 4096 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        len += (size_t)got;
        if (len == 4096) break;
    }
    close(fd[0]);
    kill(pid, SIGKILL); /* done or out of time: it has said what it will say */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    return buf;
}

mpi_dialect detect_dialect(const char *path, const char *name, const char **how) {
    if (path) {
        char *text = version_output(path, 10);
        int d = dialect_from_version(text);
        free(text);
        if (d >= 0) {
            *how = "from its --version";
            return (mpi_dialect)d;
        }
    }
    const char *base = base_name(name);
    if (strstr(base, "mpich") || strstr(base, "hydra")) {
        *how = path ? "by its name (--version named no MPI)" : "by its name (not installed here)";
        return DIALECT_HYDRA;
    }
    if (!strcmp(base, "srun")) {
        *how = path ? "by its name (--version named no MPI)" : "by its name (not installed here)";
        return DIALECT_SRUN;
    }
    *how = path ? "the default (--version named no MPI)" : "the default (not installed here)";
    return DIALECT_OPENMPI;
}

static int problem(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return 1;
}

/* "a:2,b:2": the hosts with their ranks */
static char *host_list(const launch_spec *s) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) die_oom();
    for (size_t i = 0; i < s->n_hosts; i++) fprintf(f, "%s%s:%ld", i ? "," : "", s->hosts[i], s->slots[i]);
    if (fclose(f) != 0) die_oom();
    return out;
}

static void push_program(const launch_spec *s, strv *argv) {
    if (s->pin_socket) { /* first-touch memory on the socket the rank is bound to */
        sv_push(argv, "numactl");
        sv_push(argv, "--localalloc");
    }
    if (s->interpreter) sv_split_words(argv, s->interpreter);
    for (int k = 0; s->prog[k]; k++) sv_push(argv, s->prog[k]);
}

static void openmpi_command(const launch_spec *s, strv *argv) {
    sv_push(argv, s->mpirun);
    if (s->root) sv_push(argv, "--allow-run-as-root"); /* Open MPI refuses root without */
    sv_push(argv, "-np");
    sv_push_owned(argv, xasprintf("%ld", s->n));
    sv_push(argv, "--host");
    sv_push_owned(argv, host_list(s));
    if (s->oversubscribe) sv_push(argv, "--oversubscribe");
    if (s->pin_socket) {
        sv_push(argv, "--map-by");
        sv_push(argv, "socket");
        sv_push(argv, "--bind-to");
        sv_push(argv, "socket");
    } else {
        /* mpirun binds ranks to one core by default; the rank's OpenMP threads need all of its
         * share of the cores. */
        sv_push(argv, "--bind-to");
        sv_push(argv, "none");
    }
    if (s->pin_memory) { /* strict: Open MPI restricts allocations to the local NUMA node */
        sv_push(argv, "--mca");
        sv_push(argv, "hwloc_base_mem_alloc_policy");
        sv_push(argv, "local_only");
    }
    /* -x NAME forwards the value NAME has in mpirun's environment, which it inherits from the
     * launcher: values never pass through a command line */
    for (size_t k = 0; k < s->names->n; k++) {
        sv_push(argv, "-x");
        sv_push(argv, s->names->v[k]);
    }
    push_program(s, argv);
}

/* Hydra (MPICH, Intel MPI, MVAPICH2): -hosts a:2,b:2 places ranks as Open MPI's --host does (the
 * first host's slots first); -genv sets a variable on every rank, remote ones included. Hydra
 * binds nothing unless asked, runs as root and oversubscribes without a flag. */
static void hydra_command(const launch_spec *s, strv *argv) {
    sv_push(argv, s->mpirun);
    sv_push(argv, "-np");
    sv_push_owned(argv, xasprintf("%ld", s->n));
    sv_push(argv, "-hosts");
    sv_push_owned(argv, host_list(s));
    sv_push(argv, "-bind-to");
    sv_push(argv, s->pin_socket ? "socket" : "none");
    if (s->pin_socket) {
        sv_push(argv, "-map-by");
        sv_push(argv, "socket");
    }
    for (size_t k = 0; k < s->names->n; k++) {
        sv_push(argv, "-genv");
        sv_push(argv, s->names->v[k]);
        sv_push(argv, s->values->v[k]);
    }
    push_program(s, argv);
}

/* srun inside an allocation: the ranks are its tasks (no mpirun; the MPI must support srun's PMI,
 * chosen by srun --mpi or SLURM_MPI_TYPE); the environment goes whole (--export=ALL); a failed
 * rank ends the step (--kill-on-bad-exit). */
static void srun_command(const launch_spec *s, strv *argv) {
    sv_push(argv, s->mpirun);
    sv_push_owned(argv, xasprintf("--ntasks=%ld", s->n));
    if (s->hosts_given) {
        sv_push_owned(argv, xasprintf("--nodes=%zu", s->n_hosts));
        char *list = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&list, &len);
        if (!f) die_oom();
        for (size_t i = 0; i < s->n_hosts; i++) fprintf(f, "%s%s", i ? "," : "", s->hosts[i]);
        if (fclose(f) != 0) die_oom();
        sv_push_owned(argv, xasprintf("--nodelist=%s", list));
        free(list);
    }
    sv_push_owned(argv, xasprintf("--ntasks-per-node=%ld", s->ppn));
    sv_push_owned(argv, xasprintf("--cpus-per-task=%ld", s->threads));
    if (s->oversubscribe) sv_push(argv, "--overcommit");
    sv_push(argv, s->pin_socket ? "--cpu-bind=sockets" : "--cpu-bind=none");
    if (s->pin_memory) sv_push(argv, "--mem-bind=local");
    sv_push(argv, "--kill-on-bad-exit=1");
    sv_push(argv, "--export=ALL");
    push_program(s, argv);
}

int dialect_command(mpi_dialect d, const launch_spec *s, strv *argv, char *err, size_t err_size) {
    if (d == DIALECT_HYDRA && s->pin_memory)
        return problem(err, err_size, "--pin-memory-to-socket needs Open MPI's mpirun or srun: Hydra (%s) has no "
                       "strict local memory policy; use --pin-to-socket (memory preferably local)", s->mpirun);
    if (d == DIALECT_OPENMPI) openmpi_command(s, argv);
    else if (d == DIALECT_HYDRA) hydra_command(s, argv);
    else srun_command(s, argv);
    return 0;
}
