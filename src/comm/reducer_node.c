/* reducer_node.c: node-aware gradient reduction (the 2-D hierarchical scheme) and the shared
 * state of a sharded optimizer.
 *
 * The ranks of a node (MPI_Comm_split_type shared; TNT_NODE_SIZE regroups them, for tests) keep
 * their gradient buffers in one MPI-3 shared-memory window. Bucket by bucket, on the comm thread,
 * once every rank has finished the bucket (the same small barrier the flat reducer takes, which
 * feeds the stall inspector), local rank j sums slice j of the bucket from all the node's buffers
 * in local-rank order (the same additions on every run: bitwise repeatable), then the slice
 * crosses nodes as an allreduce among the ranks with the same local index (our own by default,
 * cross_node.c, TNT_CROSS_NODE; bfloat16 on that wire with compression; nothing crosses within a
 * node). The sum lands in a node-wide buffer that
 * the optimizer reads (or, when something is added to the gradients after the reduction, that
 * every rank copies into its own buffer behind the next bucket), or, sharded, in place in the
 * owner's slice, which only its owner reads: each rank then updates only its slices of the
 * weights, which live once per node in the window (or, with weight penalties or constraints,
 * are handed to the others through it: share_weights), and so do the optimizer's slots. Given an
 * update (tnt__reducer_set_update), a rank updates each slice it owns here, on the comm thread,
 * once the slice holds its sum (on one node, a node-computed kernel's block by block).
 *
 * Memory order: every read of another rank's writes follows a barrier with MPI_Win_sync on both
 * sides (the window is locked for its life). Who writes what, and until when:
 *  - buffer q: backward of rank q; read by every rank's slice sum of a bucket before the next
 *    bucket's barrier, the last bucket's before finish_step's barrier (sharded: before the
 *    step's agreement, which follows finish_step; the stashes of node-computed kernels alike);
 *  - sum[slice j]: rank j, read by all after the next barrier; written again one step later
 *    (sharded: the weights, written by their owner after finish_step's barrier, read by all
 *    after share_weights' barrier). */
#include "comm/cross_node.h"
#include "comm/reducer.h"
#include "core/config.h"
#include "core/timeline.h"

#include <string.h>

/* Freeing a window is collective over the node, and ranks may free their models in different
 * orders (Python's collector): a destroyed reducer only releases its window, communicators
 * included, and the windows that every rank has released are freed, in creation order, when the
 * next node-aware reducer is made (a collective call) or at tnt_finalize. */
typedef struct held {
    MPI_Win win, dw_win; /* dw_win: node-computed gradients' stash (MPI_WIN_NULL: none) */
    MPI_Comm local, cross;
    bool released, freed;
} held;

static struct {
    held *h;
    int n, cap; /* windows made: the same count on every rank */
} reg;

static void free_held(held *h) {
    if (h->dw_win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(h->dw_win);
        MPI_Win_free(&h->dw_win);
    }
    MPI_Win_unlock_all(h->win);
    MPI_Win_free(&h->win);
    MPI_Comm_free(&h->cross);
    MPI_Comm_free(&h->local);
    h->freed = true;
}

/* Collective over the world: frees the windows every rank has released. */
static void reclaim(void) {
    if (reg.n == 0) return;
    unsigned char *all = malloc((size_t)reg.n);
    if (!all) return;
    for (int i = 0; i < reg.n; i++) all[i] = reg.h[i].released && !reg.h[i].freed;
    if (MPI_Allreduce(MPI_IN_PLACE, all, reg.n, MPI_UNSIGNED_CHAR, MPI_BAND, MPI_COMM_WORLD) == MPI_SUCCESS)
        for (int i = 0; i < reg.n; i++)
            if (all[i]) free_held(&reg.h[i]);
    free(all);
}

void tnt__reducer_release_windows(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    for (int i = 0; i < reg.n && !fin; i++)
        if (!reg.h[i].freed) free_held(&reg.h[i]);
    free(reg.h);
    reg.h = NULL;
    reg.n = reg.cap = 0;
}

typedef struct node {
    MPI_Comm local, cross; /* this node's ranks; the ranks of the same local index */
    int me, p, nodes;
    MPI_Win win;
    int held; /* its entry in reg; -1: none */
    bool sharded;
    bool land; /* not sharded: copy the sums into each rank's buffer */
    float **bufs;  /* p: each local rank's gradient buffer (n floats) */
    float *sum;    /* n: the node's sums (not sharded) or weights exchanged (sharded) */
    float *slots;  /* sharded: n_slots * n optimizer slot values */
    uint16_t *wire; /* compression across nodes */
    MPI_Op bf16_sum;
    bool has_op;
    tnt__cross_algo cross_algo; /* TNT_CROSS_NODE */
    tnt__node_dw *dw; /* node-computed kernel gradients; NULL: none */
} node;

_Static_assert((int)TNT__CROSS_NODE_DOUBLING == (int)TNT__CROSS_DOUBLING, "TNT_CROSS_NODE's values");

/* Local rank j's slice of bucket i: cut at 16-float (64-byte) boundaries, so that no two
 * ranks write one cache line. */
static void slice(const tnt__reducer *r, int i, int j, int64_t *begin, int64_t *end) {
    const node *nd = r->impl;
    tnt__bucket b = r->buckets[i];
    int64_t len = b.end - b.begin;
    int64_t cut[2];
    for (int k = 0; k < 2; k++) {
        int q = j + k;
        if (q == 0) cut[k] = b.begin;
        else if (q == nd->p) cut[k] = b.end;
        else cut[k] = TNT_MIN(b.end, TNT_MAX(b.begin, (b.begin + len * q / nd->p) & ~(int64_t)15));
    }
    *begin = cut[0], *end = cut[1];
}

/* out[s, e) = bufs[0] + bufs[1] + ... + bufs[p-1], in that order (out may be one of them). */
static void sum_slice(const node *nd, float *out, int64_t s, int64_t e) {
    enum { BLOCK = 2048 };
    float acc[BLOCK];
    for (int64_t a = s; a < e; a += BLOCK) {
        int64_t len = TNT_MIN(BLOCK, e - a);
        memcpy(acc, nd->bufs[0] + a, (size_t)len * sizeof(float));
        for (int q = 1; q < nd->p; q++) {
            const float *b = nd->bufs[q] + a;
            for (int64_t k = 0; k < len; k++) acc[k] += b[k];
        }
        memcpy(out + a, acc, (size_t)len * sizeof(float));
    }
}

/* Across nodes: our own allreduce (comm/cross_node.c) or the MPI library's, TNT_CROSS_NODE. */
static int cross_allreduce(node *nd, float *x, int64_t n) {
    if (!nd->wire) return tnt__cross_allreduce(x, n, MPI_FLOAT, MPI_SUM, nd->cross, nd->cross_algo);
    uint16_t *w = nd->wire;
    tnt__bf16_compress(w, x, n);
    int rc = tnt__cross_allreduce(w, n, MPI_UINT16_T, nd->bf16_sum, nd->cross, nd->cross_algo);
    if (rc == MPI_SUCCESS) tnt__bf16_decompress(x, w, n);
    return rc;
}

static int node_sync(tnt__reducer *r, const char *what) {
    node *nd = r->impl;
    MPI_Win_sync(nd->win);
    tnt__node_dw_sync(nd->dw);
    int rc = tnt__wait_arrival(what);
    MPI_Win_sync(nd->win);
    tnt__node_dw_sync(nd->dw);
    return rc;
}

static void sum_cb(void *ctx, float *out, int64_t s, int64_t e) { sum_slice(ctx, out, s, e); }

static void copy_bucket(tnt__reducer *r, int i) {
    node *nd = r->impl;
    tnt__bucket b = r->buckets[i];
    memcpy(nd->bufs[nd->me] + b.begin, nd->sum + b.begin, (size_t)(b.end - b.begin) * sizeof(float));
}

/* On the comm thread: bucket i, once every rank has written it (and reduced bucket i - 1). */
static int run_bucket(tnt__reducer *r, int i) {
    node *nd = r->impl;
    double t0 = TNT_TL_BEGIN();
    int rc = node_sync(r, "gradient allreduce");
    TNT_TL_END("reduction.wait", "arrival", i, t0);
    if (rc != MPI_SUCCESS) return rc;
    int64_t s, e;
    slice(r, i, nd->me, &s, &e);
    if (r->buckets[i].frozen && !nd->dw) e = s; /* nobody reads the sum (a kernel the node computes: always summed) */
    float *out = nd->sharded ? nd->bufs[nd->me] : nd->sum;
    /* one node: the update follows each kernel block the node computes, while it is in cache */
    bool update_in_blocks = r->update && nd->dw && nd->nodes == 1;
    t0 = TNT_TL_BEGIN();
    if (nd->dw)
        rc = tnt__node_dw_reduce(nd->dw, out, s, e, i, sum_cb, nd, update_in_blocks ? r->update : NULL, r->update_ctx);
    else sum_slice(nd, out, s, e);
    TNT_TL_END("reduction.sum", "node sum", i, t0);
    if (rc != MPI_SUCCESS) return rc;
    if (nd->nodes > 1 && e > s) {
        t0 = TNT_TL_BEGIN();
        rc = cross_allreduce(nd, out + s, e - s);
        TNT_TL_END("reduction.cross", "cross-node", i, t0);
    }
    if (rc == MPI_SUCCESS && r->update && !update_in_blocks && e > s) { /* sharded: this rank's slice is final */
        t0 = TNT_TL_BEGIN();
        if (r->update(r->update_ctx, s, e) != TNT_OK) rc = MPI_ERR_OTHER;
        TNT_TL_END("reduction.update", "optimizer", i, t0);
    }
    if (nd->land && i > 0) { /* every slice of it was summed before the barrier */
        t0 = TNT_TL_BEGIN();
        copy_bucket(r, i - 1);
        TNT_TL_END("reduction.copy", "copy", i - 1, t0);
    }
    return rc;
}

static void node_start(tnt__reducer *r, int i) { tnt__comm_queue_push(r, i); }

static int node_finish(tnt__reducer *r) {
    node *nd = r->impl;
    int rc = tnt__comm_queue_wait(r, r->started);
    if (r->started == 0) return rc;
    /* sharded: no rank reads another's slice after its own comm thread is done, and a rank
     * writes its buffer again only past the step's agreement (tnt__parallel_step_end), which
     * every rank enters after its reads: that collective is this step's barrier (one less) */
    if (nd->sharded) {
        MPI_Win_sync(nd->win);
        tnt__node_dw_sync(nd->dw);
        return rc;
    }
    /* the last bucket's slices are summed (and nobody reads a buffer any more) past this; a rank
     * whose reduction failed still meets the others here, and the step's agreement tells all */
    int rs = node_sync(r, "gradient allreduce");
    if (rc == MPI_SUCCESS && rs == MPI_SUCCESS && nd->land) copy_bucket(r, r->started - 1);
    return rc != MPI_SUCCESS ? rc : rs;
}

/* Bucket i's sum: bucket i + 1's reduction has copied it, or the step ends here. */
static int node_wait(tnt__reducer *r, int i) {
    if (i + 1 < r->started) return tnt__comm_queue_wait(r, i + 2);
    return node_finish(r);
}

static void node_owned(const tnt__reducer *r, int i, int64_t *begin, int64_t *end) {
    const node *nd = r->impl;
    if (nd->sharded) slice(r, i, nd->me, begin, end);
    else *begin = r->buckets[i].begin, *end = r->buckets[i].end;
}

static int node_share_weights(tnt__reducer *r, float *params) {
    node *nd = r->impl;
    if (!nd->sharded) return MPI_SUCCESS;
    if (params == nd->sum) return node_sync(r, "weight exchange"); /* the weights live here */
    int64_t s, e;
    for (int i = 0; i < r->n_buckets; i++) {
        slice(r, i, nd->me, &s, &e);
        memcpy(nd->sum + s, params + s, (size_t)(e - s) * sizeof(float));
    }
    int rc = node_sync(r, "weight exchange");
    if (rc != MPI_SUCCESS) return rc;
    for (int i = 0; i < r->n_buckets; i++)
        for (int q = 0; q < nd->p; q++) {
            if (q == nd->me) continue;
            slice(r, i, q, &s, &e);
            memcpy(params + s, nd->sum + s, (size_t)(e - s) * sizeof(float));
        }
    return MPI_SUCCESS;
}

static void node_destroy(tnt__reducer *r) {
    node *nd = r->impl;
    tnt__comm_queue_stop(r);
    if (!nd) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (nd->held >= 0 && nd->held < reg.n) reg.h[nd->held].released = true; /* freed later: see reg */
    else if (!fin) { /* made before its window: nothing shared yet */
        if (nd->cross != MPI_COMM_NULL) MPI_Comm_free(&nd->cross);
        if (nd->local != MPI_COMM_NULL) MPI_Comm_free(&nd->local);
    }
    if (nd->has_op && !fin) MPI_Op_free(&nd->bf16_sum);
    tnt__node_dw_free(nd->dw);
    free(nd->bufs);
    free(nd->wire);
    free(nd);
    r->impl = NULL;
}

static const tnt__reducer_ops node_ops = {"node", node_start, node_wait, node_finish, node_destroy, NULL,
                                          node_owned, node_share_weights, node_sync};

float *tnt__reducer_node_grads(const tnt__reducer *r) {
    const node *nd = r->impl;
    return nd->bufs[nd->me];
}

float *tnt__reducer_node_sums(const tnt__reducer *r) {
    const node *nd = r->impl;
    return nd->sharded || nd->land ? NULL : nd->sum;
}

float *tnt__reducer_node_weights(const tnt__reducer *r) {
    const node *nd = r->impl;
    return nd->sharded ? nd->sum : NULL;
}

void tnt__reducer_node_copy_sums(const tnt__reducer *r, float *to) {
    const node *nd = r->impl;
    if (!nd->sharded) {
        memcpy(to, nd->land ? nd->bufs[nd->me] : nd->sum, (size_t)r->n * sizeof(float));
        return;
    }
    for (int i = 0; i < r->n_buckets; i++)
        for (int q = 0; q < nd->p; q++) {
            int64_t s, e;
            slice(r, i, q, &s, &e);
            memcpy(to + s, nd->bufs[q] + s, (size_t)(e - s) * sizeof(float));
        }
}

void tnt__reducer_node_set_land(tnt__reducer *r, bool land) {
    node *nd = r->impl;
    if (!nd->sharded) nd->land = land;
}

MPI_Comm tnt__reducer_node_local(const tnt__reducer *r, int *me, int *p) {
    const node *nd = r->impl;
    *me = nd->me, *p = nd->p;
    return nd->local;
}

tnt__node_dw *tnt__reducer_node_dw_get(const tnt__reducer *r) {
    const node *nd = r->kind == TNT_REDUCER_FLAT ? NULL : r->impl;
    return nd ? nd->dw : NULL;
}

void tnt__reducer_node_dw_attach(tnt__reducer *r, tnt__node_dw *d, MPI_Win win) {
    node *nd = r->impl;
    nd->dw = d;
    reg.h[nd->held].dw_win = win;
}

float *tnt__reducer_node_slot(const tnt__reducer *r, int k) {
    const node *nd = r->impl;
    return k >= 0 && k < r->n_slots ? nd->slots + (size_t)k * (size_t)r->n : NULL;
}

static bool mpi_failed(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return false;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    tnt__error(TNT_ERR_MPI, "node-aware reducer: %s failed on rank %d: %.*s", call, tnt__world_rank(), len, msg);
    return true;
}

bool tnt__reducer_node_init(tnt__reducer *r) {
    if (r->mode != TNT_COMM_MODE_THREAD || r->n == 0) return false;
    reclaim();
    int rank = tnt__world_rank();
    MPI_Comm local;
    int64_t group = tnt__config_get()->node_size;
    int rc = group > 0 ? MPI_Comm_split(MPI_COMM_WORLD, (int)(rank / group), rank, &local)
                       : MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return false;
    int p;
    MPI_Comm_size(local, &p);
    int sizes[2] = {p, -p}; /* the same decision on every rank: nodes of one size, more than one rank each */
    rc = MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS || sizes[0] != -sizes[1] || p == 1) {
        tnt_log(TNT_LOG_INFO, "node-aware reduction does not apply (%d to %d ranks per node): flat", -sizes[1], sizes[0]);
        MPI_Comm_free(&local);
        return false;
    }
    node *nd = tnt__calloc(1, sizeof *nd);
    if (!nd) {
        MPI_Comm_free(&local);
        return false;
    }
    r->impl = nd;
    r->ops = &node_ops;
    r->kind = r->kind == TNT_REDUCER_SHARDED ? TNT_REDUCER_SHARDED : TNT_REDUCER_NODE;
    nd->sharded = r->kind == TNT_REDUCER_SHARDED;
    nd->land = !nd->sharded;
    nd->local = local;
    nd->cross = MPI_COMM_NULL;
    nd->held = -1;
    nd->p = p;
    nd->cross_algo = (tnt__cross_algo)tnt__config_get()->cross_node;
    MPI_Comm_rank(local, &nd->me);
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    if (mpi_failed(MPI_Comm_split(MPI_COMM_WORLD, nd->me, rank, &nd->cross), "MPI_Comm_split")) return false;
    MPI_Comm_set_errhandler(nd->cross, MPI_ERRORS_RETURN);
    MPI_Comm_size(nd->cross, &nd->nodes);
    /* local rank 0's segment also holds the sums (or exchanged weights) and the sharded slots */
    size_t extra = nd->me == 0 ? (size_t)r->n * (1 + (nd->sharded ? (size_t)r->n_slots : 0)) : 0;
    MPI_Aint bytes = (MPI_Aint)(((size_t)r->n + extra) * sizeof(float));
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true"); /* each rank's pages its own */
    float *base;
    rc = MPI_Win_allocate_shared(bytes, (int)sizeof(float), info, local, &base, &nd->win);
    MPI_Info_free(&info);
    if (mpi_failed(rc, "MPI_Win_allocate_shared")) return false;
    if (mpi_failed(MPI_Win_lock_all(MPI_MODE_NOCHECK, nd->win), "MPI_Win_lock_all")) { /* rare: kept */
        MPI_Win_free(&nd->win);
        return false;
    }
    if (reg.n == reg.cap) {
        int cap = reg.cap ? 2 * reg.cap : 8;
        held *h = realloc(reg.h, (size_t)cap * sizeof *h);
        if (!h) {
            MPI_Win_unlock_all(nd->win);
            MPI_Win_free(&nd->win);
            tnt__error(TNT_ERR_NOMEM, "node-aware reducer: out of memory");
            return false;
        }
        reg.h = h, reg.cap = cap;
    }
    reg.h[reg.n] = (held){nd->win, MPI_WIN_NULL, nd->local, nd->cross, false, false};
    nd->held = reg.n++;
    if (!(nd->bufs = tnt__calloc((size_t)p, sizeof *nd->bufs))) return false;
    for (int q = 0; q < p; q++) {
        MPI_Aint size;
        int unit;
        if (mpi_failed(MPI_Win_shared_query(nd->win, q, &size, &unit, &nd->bufs[q]), "MPI_Win_shared_query"))
            return false;
    }
    nd->sum = nd->bufs[0] + r->n;
    nd->slots = nd->sharded ? nd->sum + r->n : NULL;
    if (r->compression == TNT_COMPRESSION_BF16 && nd->nodes > 1) {
        if (!(nd->wire = tnt__calloc((size_t)TNT__COLLECTIVE_MAX_FLOATS, sizeof *nd->wire))) return false;
        if (mpi_failed(tnt__bf16_sum_op(&nd->bf16_sum), "MPI_Op_create")) return false;
        nd->has_op = true;
    }
    return tnt__comm_queue_start(r, run_bucket);
}
