/* cross_node.h: private to comm/: the cross-node stage of the node-aware reducer (cross_node.c),
 * an allreduce of our own among the ranks with the same local index, so that its algorithm does
 * not depend on the MPI library's fixed decision rules. */
#ifndef TNT_COMM_CROSS_NODE_H
#define TNT_COMM_CROSS_NODE_H

#include <mpi.h>
#include <stdint.h>

/* TNT_CROSS_NODE: the algorithm (auto: chosen per message by size and participant count) */
typedef enum tnt__cross_algo {
    TNT__CROSS_AUTO,     /* halving or doubling, the cheaper by a latency-bandwidth cost model */
    TNT__CROSS_MPI,      /* MPI_Allreduce: the MPI library's own choice */
    TNT__CROSS_RING,     /* ring reduce-scatter + allgather: 2(q-1) steps of n/q, any q */
    TNT__CROSS_HALVING,  /* recursive halving + doubling over q's prime factors (Rabenseifner's
                          * on a power of two; no fold otherwise): 2 sum(k_i - 1) steps, ring's bytes */
    TNT__CROSS_DOUBLING, /* recursive doubling of the whole message; off a power of two the extra
                          * ranks are folded in first and sent the result after */
} tnt__cross_algo;

/* The algorithm an allreduce of bytes among q ranks runs (never AUTO; the same on every rank
 * for the same arguments). */
tnt__cross_algo tnt__cross_choose(tnt__cross_algo asked, int64_t bytes, int q);

/* In place: x (count elements of type, MPI_FLOAT or MPI_UINT16_T) becomes the reduction by op
 * (commutative: MPI_SUM or a user op) over comm. Deterministic: the same additions in the same
 * order on every run, and every rank ends with bitwise the same values. Blocking (the comm thread
 * calls it once every rank has arrived). Returns an MPI error code. */
int tnt__cross_allreduce(void *x, int64_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, tnt__cross_algo algo);

/* Elements each rank combines in one allreduce by algo (its reduction work, for the scale
 * study's cost charge; 0 for MPI, which does not say). */
int64_t tnt__cross_combined(tnt__cross_algo algo, int64_t count, int q);

#endif
