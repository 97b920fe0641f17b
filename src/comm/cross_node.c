/* cross_node.c: the node-aware reducer's cross-node allreduce, of our own (issue 25), so that the
 * algorithm follows the message and the participants, not the MPI library's fixed rules: Open MPI
 * 4.1 (and SMPI's ompi selector, which reproduces it) runs Rabenseifner with a fold for a
 * participant count that is not a power of two (at 24 nodes a whole extra transfer: 67% where 16
 * nodes gave 98% in the scale study) and reduce + broadcast for small messages at 128-255 ranks.
 *
 * Three algorithms, all by MPI_Sendrecv among the ranks of comm and MPI_Reduce_local (so the
 * same code sums floats and, compressed, bfloat16 with its own operation):
 *  - ring: reduce-scatter then allgather around the ring, 2(q-1) steps of n/q elements: the
 *    fewest bytes for any q, at q-proportional latency;
 *  - halving (Rabenseifner): recursive halving then recursive doubling on the largest power of
 *    two pof2 <= q, 2 log2(pof2) steps and the same bytes as the ring; the q - pof2 extra ranks
 *    first send their whole vector to a partner and receive the result at the end;
 *  - doubling: log2(pof2) exchanges of the whole vector (the same fold), for small messages.
 * Deterministic: every element's sum is formed in a fixed order (ring and halving: by one rank,
 * then copied to all; doubling: both partners add the same two values, and x + y == y + x
 * bitwise), so every rank gets bitwise the same values on every run. */
#include "comm/cross_node.h"

#include <limits.h>
#include <stdlib.h>

enum { TAG = 25 };

/* the cost model of auto: per message latency, per byte time of a node's link shared by its ranks */
#define ALPHA_S 5e-6
#define BETA_S_PER_BYTE 0.4e-9

static int pow2_floor(int q) {
    int p = 1;
    while (p * 2 <= q) p *= 2;
    return p;
}

static int log2_int(int p) {
    int l = 0;
    while ((1 << l) < p) l++;
    return l;
}

tnt__cross_algo tnt__cross_choose(tnt__cross_algo asked, int64_t bytes, int q) {
    if (asked != TNT__CROSS_AUTO) return asked;
    if (q <= 1) return TNT__CROSS_DOUBLING;
    int pof2 = pow2_floor(q), steps = log2_int(pof2);
    double n = (double)bytes, fold = q == pof2 ? 0 : 2 * (ALPHA_S + n * BETA_S_PER_BYTE);
    double ring = 2.0 * (q - 1) * (ALPHA_S + n / q * BETA_S_PER_BYTE);
    double halving = 2.0 * steps * ALPHA_S + 2.0 * n * (pof2 - 1) / pof2 * BETA_S_PER_BYTE + fold;
    double doubling = steps * (ALPHA_S + n * BETA_S_PER_BYTE) + fold;
    if (doubling <= halving && doubling <= ring) return TNT__CROSS_DOUBLING;
    return halving <= ring ? TNT__CROSS_HALVING : TNT__CROSS_RING;
}

int64_t tnt__cross_combined(tnt__cross_algo algo, int64_t count, int q) {
    if (q <= 1 || algo == TNT__CROSS_MPI) return 0;
    int pof2 = pow2_floor(q);
    int64_t fold = q == pof2 ? 0 : count;
    if (algo == TNT__CROSS_RING) return count * (q - 1) / q;
    if (algo == TNT__CROSS_HALVING) return count * (pof2 - 1) / pof2 + fold;
    return count * log2_int(pof2) + fold;
}

/* element k * count / parts: where block k of parts starts */
static int64_t cut(int64_t count, int k, int parts) { return count * k / parts; }

typedef struct xfer {
    char *x, *tmp;
    size_t size; /* bytes per element */
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
} xfer;

/* Sends x[sb, se) to dest and receives into x[rb, re) (combine: into tmp, then x[rb, re) =
 * tmp op x[rb, re)) from src. */
static int exchange(const xfer *t, int dest, int64_t sb, int64_t se, int src, int64_t rb, int64_t re, int combine) {
    char *into = combine ? t->tmp : t->x + (size_t)rb * t->size;
    int rc = MPI_Sendrecv(t->x + (size_t)sb * t->size, (int)(se - sb), t->type, dest, TAG, into, (int)(re - rb),
                          t->type, src, TAG, t->comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && combine && re > rb)
        rc = MPI_Reduce_local(t->tmp, t->x + (size_t)rb * t->size, (int)(re - rb), t->type, t->op);
    return rc;
}

static int ring(const xfer *t, int64_t n, int me, int q) {
    int right = (me + 1) % q, left = (me + q - 1) % q, rc = MPI_SUCCESS;
    /* reduce-scatter: after step s, chunk (me - s - 1) holds the sum of s + 2 ranks; at the end
     * rank me holds chunk me + 1 whole */
    for (int s = 0; s < q - 1 && rc == MPI_SUCCESS; s++) {
        int send = (me - s + 2 * q) % q, recv = (me - s - 1 + 2 * q) % q;
        rc = exchange(t, right, cut(n, send, q), cut(n, send + 1, q), left, cut(n, recv, q), cut(n, recv + 1, q), 1);
    }
    for (int s = 0; s < q - 1 && rc == MPI_SUCCESS; s++) { /* allgather of the whole chunks */
        int send = (me + 1 - s + 2 * q) % q, recv = (me - s + 2 * q) % q;
        rc = exchange(t, right, cut(n, send, q), cut(n, send + 1, q), left, cut(n, recv, q), cut(n, recv + 1, q), 0);
    }
    return rc;
}

/* Among ranks [0, pof2): rank me ends holding block me of pof2 summed, then every block. */
static int halving(const xfer *t, int64_t n, int me, int pof2) {
    int lo = 0, hi = pof2, rc = MPI_SUCCESS;
    for (int mask = pof2 / 2; mask >= 1 && rc == MPI_SUCCESS; mask /= 2) {
        int partner = me ^ mask, mid = (lo + hi) / 2;
        int keep_lo = me & mask ? mid : lo, keep_hi = me & mask ? hi : mid;
        int give_lo = me & mask ? lo : mid, give_hi = me & mask ? mid : hi;
        rc = exchange(t, partner, cut(n, give_lo, pof2), cut(n, give_hi, pof2), partner, cut(n, keep_lo, pof2),
                      cut(n, keep_hi, pof2), 1);
        lo = keep_lo, hi = keep_hi;
    }
    for (int mask = 1; mask < pof2 && rc == MPI_SUCCESS; mask *= 2) { /* lo == me's range: doubles */
        int partner = me ^ mask, width = hi - lo;
        int other_lo = me & mask ? lo - width : hi;
        rc = exchange(t, partner, cut(n, lo, pof2), cut(n, hi, pof2), partner, cut(n, other_lo, pof2),
                      cut(n, other_lo + width, pof2), 0);
        lo = lo < other_lo ? lo : other_lo, hi = lo + 2 * width;
    }
    return rc;
}

static int doubling(const xfer *t, int64_t n, int me, int pof2) {
    int rc = MPI_SUCCESS;
    for (int mask = 1; mask < pof2 && rc == MPI_SUCCESS; mask *= 2)
        rc = exchange(t, me ^ mask, 0, n, me ^ mask, 0, n, 1);
    return rc;
}

int tnt__cross_allreduce(void *x, int64_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, tnt__cross_algo algo) {
    int q, me, size_int;
    int rc = MPI_Comm_size(comm, &q);
    if (rc != MPI_SUCCESS) return rc;
    if ((rc = MPI_Type_size(type, &size_int)) != MPI_SUCCESS) return rc;
    if (count > INT_MAX) return MPI_ERR_COUNT;
    algo = tnt__cross_choose(algo, count * size_int, q);
    if (algo == TNT__CROSS_MPI) return MPI_Allreduce(MPI_IN_PLACE, x, (int)count, type, op, comm);
    if (q == 1 || count == 0) return MPI_SUCCESS;
    if ((rc = MPI_Comm_rank(comm, &me)) != MPI_SUCCESS) return rc;
    int pof2 = pow2_floor(q);
    /* scratch: one received chunk (ring), half the vector (halving), the whole (doubling, fold) */
    int64_t need = algo == TNT__CROSS_RING ? count / q + 1 : q != pof2 || algo == TNT__CROSS_DOUBLING ? count : count / 2 + 1;
    xfer t = {x, malloc((size_t)need * (size_t)size_int), (size_t)size_int, type, op, comm};
    if (!t.tmp) return MPI_ERR_NO_MEM;
    if (algo == TNT__CROSS_RING) {
        rc = ring(&t, count, me, q);
    } else if (me >= pof2) { /* an extra rank: folded into me - pof2, which sends the result back */
        rc = MPI_Send(x, (int)count, type, me - pof2, TAG, comm);
        if (rc == MPI_SUCCESS) rc = MPI_Recv(x, (int)count, type, me - pof2, TAG, comm, MPI_STATUS_IGNORE);
    } else {
        if (me < q - pof2) {
            rc = MPI_Recv(t.tmp, (int)count, type, me + pof2, TAG, comm, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Reduce_local(t.tmp, x, (int)count, type, op);
        }
        if (rc == MPI_SUCCESS)
            rc = algo == TNT__CROSS_HALVING ? halving(&t, count, me, pof2) : doubling(&t, count, me, pof2);
        if (rc == MPI_SUCCESS && me < q - pof2) rc = MPI_Send(x, (int)count, type, me + pof2, TAG, comm);
    }
    free(t.tmp);
    return rc;
}
