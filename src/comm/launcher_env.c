/* launcher_env.c: which MPI launcher started this process, and the check that tnt_init joined the
 * world it made (see launcher_env.h). Measured cause: an MPI that cannot take part in the
 * launcher's world (another MPI's mpirun, srun without the right PMI, a thread level refused)
 * gives every process a world of its own, and p processes each trained alone and printed ranks=1. */
#include "comm/launcher_env.h"

#include <stdio.h>

static void evidence(tnt__launch *l, const char *name, int64_t v) {
    if (v < 0) return;
    size_t len = strlen(l->evidence);
    snprintf(l->evidence + len, sizeof l->evidence - len, "%s%s=%lld", len ? ", " : "", name, (long long)v);
}

void tnt__launch_detect(const tnt__config *c, tnt__launch *l) {
    *l = (tnt__launch){.size = -1, .rank = -1};
    if (c->ompi_size >= 0) {
        l->by = "Open MPI's mpirun";
        l->size = c->ompi_size, l->rank = c->ompi_rank;
        evidence(l, "OMPI_COMM_WORLD_SIZE", c->ompi_size);
        evidence(l, "OMPI_COMM_WORLD_RANK", c->ompi_rank);
    } else if (c->pmi_size >= 0 || c->pmi_rank >= 0) {
        l->by = "a PMI launcher (MPICH's mpiexec, Intel MPI's mpirun or srun --mpi=pmi2)";
        l->size = c->pmi_size, l->rank = c->pmi_rank;
        evidence(l, "PMI_SIZE", c->pmi_size);
        evidence(l, "PMI_RANK", c->pmi_rank);
    } else if (c->pmix_rank >= 0) {
        l->by = "a PMIx launcher (srun --mpi=pmix or prterun)";
        l->rank = c->pmix_rank;
        evidence(l, "PMIX_RANK", c->pmix_rank);
        if (c->slurm_step && c->slurm_step_tasks >= 0) {
            l->size = c->slurm_step_tasks;
            evidence(l, "SLURM_STEP_NUM_TASKS", c->slurm_step_tasks);
        }
    } else if (c->slurm_step && c->slurm_step_tasks > 1) {
        l->by = "Slurm's srun";
        l->size = c->slurm_step_tasks, l->rank = c->slurm_procid;
        evidence(l, "SLURM_STEP_NUM_TASKS", c->slurm_step_tasks);
        evidence(l, "SLURM_PROCID", c->slurm_procid);
    } else if (c->under_mpirun) {
        /* a launcher variable without a number (e.g. PMI_RANK="") */
        l->by = "an MPI launcher";
        snprintf(l->evidence, sizeof l->evidence, "a launcher variable");
    }
}

tnt_status tnt__launch_check(const tnt__launch *l, int world_rank, int world_size, const char *library) {
    if (!l->by || l->size < 0 || l->size == world_size) return TNT_OK;
    char as[64] = "";
    if (l->rank >= 0) snprintf(as, sizeof as, " as rank %lld of %lld", (long long)l->rank, (long long)l->size);
    else snprintf(as, sizeof as, " as one of %lld ranks", (long long)l->size);
    return tnt__error(TNT_ERR_MPI,
                      "%s started this process%s (%s), but the MPI world it joined has %d rank%s (this is rank %d): "
                      "it would train %s. Run the program with the mpirun of the MPI it was built with%s%s%s "
                      "(for srun: the --mpi plugin that MPI supports)",
                      l->by, as, l->evidence, world_size, world_size == 1 ? "" : "s", world_rank,
                      world_size == 1 ? "alone" : "without the other ranks", library ? " (" : "",
                      library ? library : "", library ? ")" : "");
}
