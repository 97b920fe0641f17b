/* nccl.c: NCCL through the loader's declarations (cuda_api.h): one communicator per process over
 * the ranks that train on GPUs, made from a unique id that one rank draws and MPI hands to the
 * others (comm/gpu_comm.c does the broadcast: this floor knows no MPI), and in-place float32 sums
 * of gradient buckets on a stream, in the order the caller issues them (the same on every rank).
 *
 * The emulated device has no NCCL. Tests may install a stand-in (tnt__gpu_nccl_standin) that sums
 * through the host, so that the device-side reduction path of the model runs without a GPU. */
#include "gpu/api.h"

#include <string.h>

tnt_status (*tnt__gpu_nccl_standin)(float *device_data, int64_t n, tnt__gpu_stream stream);

static struct {
    ncclComm_t comm;
    bool open;
    int ranks, rank;
} nccl;

bool tnt__gpu_nccl_available(const char **why) {
    const char *r = "";
    bool ok = false;
    if (!tnt__gpu_available(&r)) {
    } else if (tnt__gpu_emulated()) {
        ok = tnt__gpu_nccl_standin != NULL;
        r = ok ? "" : "the emulated device has no NCCL";
    } else if (!tnt__cuda.has_nccl) {
        r = tnt__cuda.nccl_why;
    } else {
        ok = true;
    }
    if (why) *why = r;
    return ok;
}

int tnt__gpu_nccl_version(void) { return tnt__gpu_emulated() ? 0 : tnt__cuda.nccl_version; }

tnt_status tnt__gpu_nccl_unique_id(void *id) {
    tnt_status status = TNT_OK;
    const char *why;
    if (!tnt__gpu_nccl_available(&why)) return tnt__error(TNT_ERR_UNSUPPORTED, "NCCL: %s", why);
    memset(id, 0, TNT__GPU_NCCL_ID_BYTES);
    if (tnt__gpu_emulated()) return TNT_OK;
    ncclUniqueId u;
    TNT_GPU_CHECK(nccl, ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
out:
    return status;
}

tnt_status tnt__gpu_nccl_open(const void *id, int ranks, int rank) {
    tnt_status status = TNT_OK;
    const char *why;
    if (nccl.open) {
        if (nccl.ranks == ranks && nccl.rank == rank) return TNT_OK;
        return tnt__error(TNT_ERR_STATE, "NCCL: already open as rank %d of %d (asked: %d of %d)", nccl.rank, nccl.ranks,
                          rank, ranks);
    }
    if (!tnt__gpu_nccl_available(&why)) return tnt__error(TNT_ERR_UNSUPPORTED, "NCCL: %s", why);
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return tnt__error(TNT_ERR_ARG, "NCCL: rank %d of %d (expected 0 to ranks - 1)", rank, ranks);
    if ((status = tnt__gpu_enter("tnt__gpu_nccl_open")) != TNT_OK) return status;
    if (!tnt__gpu.emulated) {
        ncclUniqueId u;
        memcpy(&u, id, sizeof u);
        /* collective: every rank of the communicator calls it with the same id */
        TNT_GPU_CHECK(nccl, ncclCommInitRank(&nccl.comm, ranks, u, rank));
    }
    nccl.open = true, nccl.ranks = ranks, nccl.rank = rank;
out:
    return status;
}

bool tnt__gpu_nccl_is_open(void) { return nccl.open; }

tnt_status tnt__gpu_nccl_allreduce(float *device_data, int64_t n, tnt__gpu_stream stream) {
    const char *what = "tnt__gpu_nccl_allreduce";
    tnt_status status = TNT_OK;
    if (!nccl.open) return tnt__error(TNT_ERR_STATE, "%s: NCCL is not open", what);
    if (n < 0) return tnt__error(TNT_ERR_ARG, "%s: n = %lld (expected >= 0)", what, (long long)n);
    if (n == 0) return TNT_OK;
    if ((status = tnt__gpu_enter(what)) != TNT_OK ||
        (status = tnt__gpu_check_device(device_data, (size_t)n * sizeof(float), what)) != TNT_OK)
        return status;
    if (tnt__gpu.emulated && stream == TNT__GPU_COPY) tnt__gpu_emu_copy_run(UINT64_MAX); /* in the stream's order */
    if (tnt__gpu.emulated)
        return tnt__gpu_nccl_standin ? tnt__gpu_nccl_standin(device_data, n, stream)
                                     : tnt__error(TNT_ERR_STATE, "%s: the emulated device's stand-in is gone", what);
    TNT_GPU_CHECK(nccl, ncclAllReduce(device_data, device_data, (size_t)n, TNT_NCCL_FLOAT32, TNT_NCCL_SUM, nccl.comm,
                                      tnt__gpu.streams[stream]));
out:
    return status;
}

void tnt__gpu_nccl_close(void) {
    if (!nccl.open) return;
    if (nccl.comm && tnt__gpu_enter("tnt__gpu_nccl_close") == TNT_OK) {
        tnt__gpu_sync(TNT__GPU_COPY); /* no sum still in flight */
        tnt__gpu_sync(TNT__GPU_COMPUTE);
        tnt__cuda.ncclCommDestroy(nccl.comm);
    }
    memset(&nccl, 0, sizeof nccl);
}
