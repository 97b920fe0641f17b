/* gpu_comm.c: how the ranks that train on GPUs sum their gradients (TNT_GPU_COMM): NCCL on the
 * device where every rank can use it, else staged through page-locked host memory and the MPI
 * reducer (every MPI, two ranks on one GPU). The choice is each rank's, then agreed: NCCL only when
 * all ranks can, since the ranks must issue the same collectives. NCCL's communicator is made once
 * per process from an id rank 0 draws and MPI broadcasts (ncclCommInitRank, collective). */
#include "comm/comm.h"
#include "core/config.h"
#include "gpu/gpu.h"

#include <mpi.h>
#include <stdio.h>

int tnt__gpu_comm_choose(const tnt__gpu_comm_inputs *in, char *why, size_t size) {
    if (in->ranks <= 1) return snprintf(why, size, "%s", ""), TNT__GPU_COMM_HOST;
    if (in->setting == TNT__GPU_COMM_HOST) {
        snprintf(why, size, "TNT_GPU_COMM=mpi");
    } else if (!in->nccl) {
        snprintf(why, size, "%s", in->nccl_why && *in->nccl_why ? in->nccl_why : "no NCCL");
    } else if (in->shared_by < 0) {
        snprintf(why, size, "the GPU was opened outside tnt_init's device choice (TNT_DEVICE=cpu with a model "
                            "compiled for the GPU): which ranks share it is unknown, and NCCL takes one rank per GPU");
    } else if (in->shared_by > 1) {
        snprintf(why, size, "%d ranks share this GPU (NCCL takes one rank per GPU)", in->shared_by);
    } else {
        snprintf(why, size, "%s", "");
        return TNT__GPU_COMM_NCCL;
    }
    return TNT__GPU_COMM_HOST;
}

static struct {
    bool said; /* the fallback line is said once per process */
} comm_state;

tnt_status tnt__gpu_comm_open(int *comm) {
    const tnt__config *c = tnt__config_get();
    const int ranks = tnt__world_active() ? tnt__world_size() : 1;
    const char *nccl_why = "";
    const bool nccl = tnt__gpu_nccl_available(&nccl_why);
    /* the stand-in of the tests sums through the host: ranks sharing the emulated device are fine */
    tnt__gpu_comm_inputs in = {.setting = c->gpu_comm, .ranks = ranks, .nccl = nccl, .nccl_why = nccl_why,
                               .shared_by = tnt__gpu_emulated() ? 1 : tnt__device_shared_by()};
    char why[320];
    int mine = tnt__gpu_comm_choose(&in, why, sizeof why);
    *comm = TNT__GPU_COMM_HOST;
    if (ranks <= 1) return TNT_OK;
    int64_t cannot = mine != TNT__GPU_COMM_NCCL;
    tnt_status s = tnt__agree(TNT_OK, &cannot, 1);
    if (s != TNT_OK) return s;
    if (cannot > 0) {
        if (mine == TNT__GPU_COMM_NCCL)
            snprintf(why, sizeof why, "%lld of %d ranks cannot use NCCL", (long long)cannot, ranks);
        if (!comm_state.said && c->gpu_comm != TNT__GPU_COMM_HOST)
            tnt_log(c->gpu_comm == TNT__GPU_COMM_NCCL ? TNT_LOG_WARNING : TNT_LOG_INFO,
                    "TNT_GPU_COMM=%s: gradients are staged through the host and MPI, not NCCL: %s",
                    c->gpu_comm == TNT__GPU_COMM_NCCL ? "nccl" : "auto", why);
        comm_state.said = true;
        return TNT_OK;
    }
    if (!tnt__gpu_nccl_is_open()) {
        char id[TNT__GPU_NCCL_ID_BYTES] = {0};
        int64_t failed = tnt__world_rank() == 0 && tnt__gpu_nccl_unique_id(id) != TNT_OK;
        /* rank 0's failure reaches every rank before any waits in ncclCommInitRank */
        if ((s = tnt__agree(failed ? TNT_ERR_BACKEND : TNT_OK, NULL, 0)) != TNT_OK) return s;
        int rc = MPI_Bcast(id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return tnt__error(TNT_ERR_MPI, "NCCL: MPI_Bcast of the communicator's id failed: %d", rc);
        s = tnt__gpu_nccl_open(id, ranks, tnt__world_rank());
        if ((s = tnt__agree(s, NULL, 0)) != TNT_OK) return tnt__error_prefix(s, "NCCL (TNT_GPU_COMM=mpi avoids it): ");
        const int v = tnt__gpu_nccl_version();
        tnt_log(TNT_LOG_INFO, "gradients: NCCL %d.%d.%d over %d GPU ranks", v / 10000, v % 10000 / 100, v % 100, ranks);
    }
    *comm = TNT__GPU_COMM_NCCL;
    return TNT_OK;
}
