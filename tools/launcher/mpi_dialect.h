/* mpi_dialect.h: the command lines of the MPI launchers tarantella speaks (mpi_dialect.c): Open MPI's
 * mpirun, MPICH's Hydra mpiexec (also Intel MPI and MVAPICH2's), and Slurm's srun; which one an
 * mpirun program is, from `mpirun --version`. */
#ifndef TNT_LAUNCHER_MPI_DIALECT_H
#define TNT_LAUNCHER_MPI_DIALECT_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef enum mpi_dialect {
    DIALECT_OPENMPI, /* --host a:2,b:2  -x NAME  --bind-to none */
    DIALECT_HYDRA,   /* -hosts a:2,b:2  -genv NAME VALUE  -bind-to none */
    DIALECT_SRUN,    /* --ntasks --ntasks-per-node --cpus-per-task, the environment exported whole */
} mpi_dialect;

/* "Open MPI", "MPICH Hydra" or "Slurm srun". */
const char *dialect_name(mpi_dialect d);

/* The dialect that the output of `mpirun --version` names, or -1: "Open MPI" or "OpenRTE" (Open
 * MPI), "HYDRA", "MPICH" or "Intel(R) MPI" (Hydra), "slurm" (srun). */
int dialect_from_version(const char *text);

/* Which dialect the program mpirun (a path, or NULL when it is not installed; name: as given)
 * speaks: its --version output (within 10 s), else its name ("mpich", "hydra" or "srun" in it),
 * else Open MPI. *how receives how it was decided (a static string, for --dry-run). */
mpi_dialect detect_dialect(const char *path, const char *name, const char **how);

/* Everything a command line says about a job. */
typedef struct launch_spec {
    const char *mpirun;           /* the program, as given */
    long n, ppn, threads;         /* ranks, ranks per host, threads per rank */
    size_t n_hosts;
    char **hosts;                 /* n_hosts names, with slots[i] ranks each */
    const long *slots;
    bool hosts_given;             /* from a hostfile or the Slurm allocation, not the default localhost */
    bool root, oversubscribe, pin_socket, pin_memory;
    const strv *names, *values;   /* exported variables, in order */
    const char *interpreter;      /* NULL: none */
    char *const *prog;            /* PROGRAM and its ARGS, NULL-terminated */
} launch_spec;

/* Appends the command line of s in dialect d to argv. Returns 0, or 1 with a message in err (an
 * option the dialect cannot do). Values of exported variables reach the ranks through the
 * launcher's environment (Open MPI's -x NAME, srun's --export=ALL) or on the command line (Hydra's
 * -genv NAME VALUE): the caller sets them in its environment before running argv. */
int dialect_command(mpi_dialect d, const launch_spec *s, strv *argv, char *err, size_t err_size);

#endif
