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
 *  - halving: recursive halving then doubling over the prime factors of q (mixed radix: a stage
 *    of radix k is a ring of k ranks), 2 * sum(k_i - 1) steps and the ring's bytes: Rabenseifner's
 *    algorithm for a power of two, and for 24 = 2 x 2 x 2 x 3 ten steps without the fold (MPI's
 *    way off a power of two: the extra ranks' whole vectors in, the result out); a prime q: the ring;
 *  - doubling: log2(pof2) exchanges of the whole vector for small messages, pof2 the largest
 *    power of two <= q; the q - pof2 extra ranks are folded in first and sent the result after.
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

/* q's prime factors, ascending (at most 31 of them): the radices of halving's stages */
static int factors(int q, int *k) {
    int m = 0;
    for (int f = 2; f <= q / f; f++)
        while (q % f == 0) k[m++] = f, q /= f;
    if (q > 1) k[m++] = q; /* what is left is prime */
    return m;
}

tnt__cross_algo tnt__cross_choose(tnt__cross_algo asked, int64_t bytes, int q) {
    if (asked != TNT__CROSS_AUTO) return asked;
    if (q <= 1) return TNT__CROSS_DOUBLING;
    int pof2 = pow2_floor(q), steps = log2_int(pof2), k[32], m = factors(q, k), radix_steps = 0;
    for (int i = 0; i < m; i++) radix_steps += k[i] - 1;
    double n = (double)bytes, fold = q == pof2 ? 0 : 2 * (ALPHA_S + n * BETA_S_PER_BYTE);
    /* halving never costs more than the ring (the same bytes in fewer steps; a prime q: the same) */
    double halving = 2.0 * radix_steps * ALPHA_S + 2.0 * n * (q - 1) / q * BETA_S_PER_BYTE;
    double doubling = steps * (ALPHA_S + n * BETA_S_PER_BYTE) + fold;
    return doubling <= halving ? TNT__CROSS_DOUBLING : TNT__CROSS_HALVING;
}

int64_t tnt__cross_combined(tnt__cross_algo algo, int64_t count, int q) {
    if (q <= 1 || algo == TNT__CROSS_MPI) return 0;
    int pof2 = pow2_floor(q);
    int64_t fold = q == pof2 ? 0 : count;
    if (algo == TNT__CROSS_RING || algo == TNT__CROSS_HALVING) return count * (q - 1) / q;
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

/* Recursive halving over the factors of q: stage i splits the range of blocks (q blocks of the
 * vector) a rank is responsible for into k_i parts, and the k_i ranks that differ only in digit i
 * of their rank (mixed radix) reduce-scatter it around a ring of k_i; after the last stage each
 * rank holds one block summed. The allgather retraces the stages backwards. */
static int halving(const xfer *t, int64_t n, int me, int q) {
    int k[32], lo[32], hi[32], m = factors(q, k), stride = 1, rc = MPI_SUCCESS;
    int cur_lo = 0, cur_hi = q;
    for (int i = 0; i < m; i++) {
        int d = me / stride % k[i], w = (cur_hi - cur_lo) / k[i];
        int right = me + ((d + 1) % k[i] - d) * stride, left = me + ((d + k[i] - 1) % k[i] - d) * stride;
        lo[i] = cur_lo, hi[i] = cur_hi;
        for (int s = 0; s < k[i] - 1 && rc == MPI_SUCCESS; s++) {
            int send = cur_lo + (d - s + 2 * k[i]) % k[i] * w, recv = cur_lo + (d - s - 1 + 2 * k[i]) % k[i] * w;
            rc = exchange(t, right, cut(n, send, q), cut(n, send + w, q), left, cut(n, recv, q), cut(n, recv + w, q), 1);
        }
        cur_lo += (d + 1) % k[i] * w, cur_hi = cur_lo + w; /* the part summed here whole */
        stride *= k[i];
    }
    for (int i = m - 1; i >= 0 && rc == MPI_SUCCESS; i--) {
        stride /= k[i];
        int d = me / stride % k[i], w = (hi[i] - lo[i]) / k[i];
        int right = me + ((d + 1) % k[i] - d) * stride, left = me + ((d + k[i] - 1) % k[i] - d) * stride;
        for (int s = 0; s < k[i] - 1 && rc == MPI_SUCCESS; s++) {
            int send = lo[i] + (d + 1 - s + 2 * k[i]) % k[i] * w, recv = lo[i] + (d - s + 2 * k[i]) % k[i] * w;
            rc = exchange(t, right, cut(n, send, q), cut(n, send + w, q), left, cut(n, recv, q), cut(n, recv + w, q), 0);
        }
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
    int64_t need = algo == TNT__CROSS_RING ? count / q + 1 : algo == TNT__CROSS_HALVING ? count / 2 + 1 : count;
    xfer t = {x, malloc((size_t)need * (size_t)size_int), (size_t)size_int, type, op, comm};
    if (!t.tmp) return MPI_ERR_NO_MEM;
    if (algo == TNT__CROSS_RING) {
        rc = ring(&t, count, me, q);
    } else if (algo == TNT__CROSS_HALVING) {
        rc = halving(&t, count, me, q);
    } else if (me >= pof2) { /* an extra rank: folded into me - pof2, which sends the result back */
        rc = MPI_Send(x, (int)count, type, me - pof2, TAG, comm);
        if (rc == MPI_SUCCESS) rc = MPI_Recv(x, (int)count, type, me - pof2, TAG, comm, MPI_STATUS_IGNORE);
    } else {
        if (me < q - pof2) {
            rc = MPI_Recv(t.tmp, (int)count, type, me + pof2, TAG, comm, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Reduce_local(t.tmp, x, (int)count, type, op);
        }
        if (rc == MPI_SUCCESS) rc = doubling(&t, count, me, pof2);
        if (rc == MPI_SUCCESS && me < q - pof2) rc = MPI_Send(x, (int)count, type, me + pof2, TAG, comm);
    }
    free(t.tmp);
    return rc;
}
