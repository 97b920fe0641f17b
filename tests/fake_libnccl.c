/* fake_libnccl.c: an NCCL for the loader's and the runtime's tests without a GPU (with
 * fake_cuda_working, whose device memory is host memory): the 6 functions the loader resolves, one
 * rank, and what the runtime asked for kept in fake_nccl_* for the test to read. Built three times:
 * working, FAKE_MISSING (no ncclAllReduce), FAKE_OLD (version 2.7.8). */
#include "gpu/cuda_api.h"

#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static char comm_storage;
EXPORT int fake_nccl_ranks = -1, fake_nccl_rank = -1, fake_nccl_sums, fake_nccl_destroyed;
EXPORT size_t fake_nccl_last_count;
EXPORT int fake_nccl_last_dtype = -1, fake_nccl_last_op = -1;
EXPORT const void *fake_nccl_last_send, *fake_nccl_last_recv;
EXPORT CUstream fake_nccl_last_stream;

EXPORT ncclResult_t ncclGetVersion(int *version) {
#ifdef FAKE_OLD
    *version = 2708; /* NCCL before 2.9 counted 1000 per major */
#else
    *version = 22809;
#endif
    return 0;
}
EXPORT const char *ncclGetErrorString(ncclResult_t r) { return r == 4 ? "invalid argument" : "fake NCCL error"; }
EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    memcpy(id->internal, "fake-nccl-id", 12);
    return 0;
}
EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank) {
    if (nranks != 1 || rank != 0 || memcmp(id.internal, "fake-nccl-id", 12)) return 4; /* ncclInvalidArgument */
    fake_nccl_ranks = nranks, fake_nccl_rank = rank;
    *c = (ncclComm_t)(void *)&comm_storage;
    return 0;
}
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c) {
    fake_nccl_destroyed += c == (ncclComm_t)(void *)&comm_storage;
    return 0;
}
#ifndef FAKE_MISSING
/* one rank: the sum is the data itself */
EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                                  ncclComm_t c, CUstream s) {
    if (c != (ncclComm_t)(void *)&comm_storage) return 4;
    fake_nccl_sums++;
    fake_nccl_last_send = send, fake_nccl_last_recv = recv, fake_nccl_last_count = count;
    fake_nccl_last_dtype = dtype, fake_nccl_last_op = op, fake_nccl_last_stream = s;
    if (send != recv) memmove(recv, send, count * 4);
    return 0;
}
#endif
