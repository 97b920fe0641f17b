/* launcher_env.h: which MPI launcher started this process, as its environment tells (read by
 * core/config.c), and the check that the MPI world tnt_init joined is the one the launcher made:
 * a process that a launcher started as one of p ranks never trains alone. */
#ifndef TNT_COMM_LAUNCHER_ENV_H
#define TNT_COMM_LAUNCHER_ENV_H

#include "core/config.h"

typedef struct tnt__launch {
    const char *by;     /* the launcher in words; NULL when no launcher variable is set */
    char evidence[96];  /* the variables that say so, e.g. "PMI_SIZE=4, PMI_RANK=1" */
    int64_t size, rank; /* what the launcher says; -1 when it does not say */
} tnt__launch;

/* Reads the launcher from the settings. In order: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), a PMI
 * launcher (PMI_SIZE / PMI_RANK: MPICH's Hydra, Intel MPI, srun --mpi=pmi2), a PMIx launcher
 * (PMIX_RANK; its size from Slurm when srun started it), and Slurm's srun alone (SLURM_STEP_ID with
 * SLURM_STEP_NUM_TASKS > 1: a program that no PMI joined to the others). A Slurm batch script
 * itself (SLURM_PROCID without a step) is no launcher. */
void tnt__launch_detect(const tnt__config *c, tnt__launch *l);

/* After MPI started: TNT_ERR_MPI on every rank whose world (world_size ranks, this one
 * world_rank) is not the one the launcher made, with a message naming the launcher, its
 * variables, the world and the MPI library (library: MPI_Get_library_version's first line, or
 * NULL); TNT_OK when they agree or the launcher does not say. */
tnt_status tnt__launch_check(const tnt__launch *l, int world_rank, int world_size, const char *library);

#endif
