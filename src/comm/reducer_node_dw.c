/* reducer_node_dw.c: kernel gradients computed once per node (comm.h, tnt__node_dw_kernel).
 *
 * Why: with p ranks on a node, each rank's Dense computes the whole dW = x^T · dpre over its
 * own rows (the MLP's 147 MB, written p times), and the node then reads all p buffers again
 * to sum them. Here a rank only stashes its x and dpre rows (32 x (4096 + 4096) floats for a
 * 4096 x 4096 layer: 1 MB against 64 MB) in one shared window of the node, and the owner of each
 * slice of the bucket computes dW for that slice over every rank's rows, writing it where the
 * slice's sum goes. The node writes dW once and reads no per-rank gradient (no node sum).
 *
 * Layout (local rank 0's segment): per kernel, p headers {step, rows} of a cache line each, then
 * x of all ranks (p * cap_rows rows, rank q's at q * cap_rows), then dpre likewise. Pitches are
 * padded where a power-of-two pitch would alias (kernels/sgemm.h). The owner runs one GEMM per
 * rank, accumulated in rank order (beta 1): the additions of the node's sum of per-rank
 * gradients, in the same order on every run (bitwise repeatable). One GEMM over the node's
 * rows (k = 64 for the MLP) measured no faster on this 2-core VM and reorders the sum inside
 * each element: Adamax on the test's wide model then drifted 1.4e-6 from flat on 4 ranks.
 *
 * Who writes what, and until when: rank q writes its stash of kernel k in backward of step s,
 * before it starts the bucket holding k; every owner reads it after that bucket's barrier, and
 * before the step's closing barrier (sharded: the step's agreement), which rank q passes before
 * its next backward. A rank with no samples in a step stashes no rows (its header says so). */
#include "comm/reducer.h"
#include "kernels/sgemm.h"
#include "core/timeline.h"

#include <string.h>

typedef struct dw_kernel {
    tnt__node_dw_kernel k;
    int64_t ldx, lddpre;
    int64_t *head; /* p headers of 8 int64 (a cache line): [0] step, [1] rows */
    float *x, *dpre;
    bool stashed; /* this rank stashed it this step */
} dw_kernel;

struct tnt__node_dw {
    int me, p;
    MPI_Win win;
    int64_t step;
    dw_kernel *kernels; /* sorted by offset */
    int n;
};

/* A pitch of at least n floats, a multiple of 16, that is no multiple of 512 (4K aliasing). */
static int64_t pitch(int64_t n) {
    int64_t ld = (n + 15) & ~(int64_t)15;
    return ld % 512 ? ld : ld + 16;
}

static int by_offset(const void *a, const void *b) {
    const dw_kernel *x = a, *y = b;
    return x->k.offset < y->k.offset ? -1 : x->k.offset > y->k.offset;
}

tnt_status tnt__reducer_node_dw_setup(tnt__reducer *r, const tnt__node_dw_kernel *kernels, int n) {
    if (!r->active || r->kind == TNT_REDUCER_FLAT) return TNT_OK;
    if (tnt__reducer_node_dw_get(r)) return tnt__error(TNT_ERR_STATE, "node gradients: set up twice");
    int me, p;
    MPI_Comm local = tnt__reducer_node_local(r, &me, &p);
    tnt__node_dw *d = n > 0 ? tnt__calloc(1, sizeof *d) : NULL;
    if (d && !(d->kernels = tnt__calloc((size_t)n, sizeof *d->kernels))) free(d), d = NULL;
    /* the window is collective: every rank goes on, or none (a rank out of memory says so) */
    tnt_status s = tnt__agree(n < 0 || (n > 0 && !d) ? TNT_ERR_NOMEM : TNT_OK, NULL, 0);
    if (s != TNT_OK || n <= 0) {
        tnt__node_dw_free(d);
        return s != TNT_OK ? tnt__error_prefix(s, "node gradients: ") : TNT_OK;
    }
    d->me = me, d->p = p, d->n = n;
    size_t floats = 0;
    for (int i = 0; i < n; i++) {
        dw_kernel *k = &d->kernels[i];
        k->k = kernels[i];
        k->ldx = pitch(k->k.in), k->lddpre = pitch(k->k.units);
        floats += (size_t)p * (16 + (size_t)k->k.cap_rows * (size_t)(k->ldx + k->lddpre));
    }
    qsort(d->kernels, (size_t)n, sizeof *d->kernels, by_offset);
    float *base;
    MPI_Aint bytes = me == 0 ? (MPI_Aint)(floats * sizeof(float)) : 0;
    int rc = MPI_Win_allocate_shared(bytes, (int)sizeof(float), MPI_INFO_NULL, local, &base, &d->win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, d->win);
    MPI_Aint size;
    int unit;
    if (rc == MPI_SUCCESS) rc = MPI_Win_shared_query(d->win, 0, &size, &unit, &base);
    if (rc != MPI_SUCCESS) {
        free(d->kernels);
        free(d);
        return tnt__error(TNT_ERR_MPI, "node gradients: the shared stash of %zu bytes failed on rank %d (MPI error %d)",
                          floats * sizeof(float), tnt__world_rank(), rc);
    }
    float *at = base;
    for (int i = 0; i < n; i++) {
        dw_kernel *k = &d->kernels[i];
        k->head = (int64_t *)at;
        at += 16 * p; /* 8 int64 a rank */
        k->x = at;
        at += (size_t)p * (size_t)k->k.cap_rows * (size_t)k->ldx;
        k->dpre = at;
        at += (size_t)p * (size_t)k->k.cap_rows * (size_t)k->lddpre;
        if (me == 0) memset(k->head, 0, (size_t)p * 8 * sizeof(int64_t));
    }
    tnt__reducer_node_dw_attach(r, d, d->win); /* the window is freed with the reducer's */
    return tnt__reducer_sync(r, "node gradients");
}

void tnt__node_dw_free(tnt__node_dw *d) {
    if (!d) return;
    free(d->kernels);
    free(d);
}

void tnt__node_dw_begin_step(tnt__node_dw *d) {
    d->step++;
    for (int i = 0; i < d->n; i++) d->kernels[i].stashed = false;
}

void tnt__node_dw_sync(tnt__node_dw *d) {
    if (d) MPI_Win_sync(d->win);
}

int tnt__reducer_node_dw_find(const tnt__reducer *r, int64_t offset) {
    const tnt__node_dw *d = tnt__reducer_node_dw_get(r);
    for (int i = 0; d && i < d->n; i++)
        if (d->kernels[i].k.offset == offset) return i;
    return -1;
}

void tnt__reducer_node_dw_stash(const tnt__reducer *r, int i, float **x, int64_t *ldx, float **dpre, int64_t *lddpre,
                                int64_t *cap_rows) {
    const dw_kernel *k = &tnt__reducer_node_dw_get(r)->kernels[i];
    const tnt__node_dw *d = tnt__reducer_node_dw_get(r);
    *x = k->x + (size_t)d->me * (size_t)k->k.cap_rows * (size_t)k->ldx;
    *dpre = k->dpre + (size_t)d->me * (size_t)k->k.cap_rows * (size_t)k->lddpre;
    *ldx = k->ldx, *lddpre = k->lddpre, *cap_rows = k->k.cap_rows;
}

void tnt__reducer_node_dw_stashed(tnt__reducer *r, int i, int64_t rows) {
    tnt__node_dw *d = tnt__reducer_node_dw_get(r);
    dw_kernel *k = &d->kernels[i];
    int64_t *h = k->head + 8 * d->me;
    h[1] = rows;
    h[0] = d->step;
    k->stashed = true;
}

void tnt__reducer_node_dw_stash_none(tnt__reducer *r) {
    tnt__node_dw *d = tnt__reducer_node_dw_get(r);
    for (int i = 0; d && i < d->n; i++) tnt__reducer_node_dw_stashed(r, i, 0);
}

/* c (rows i0.., cols j0.., pitch units) = x[:, i0 : i0 + m]^T · dpre[:, j0 : j0 + n] over the node's
 * rows this step (ranks that stashed nothing this step count no rows). */
static tnt_status dw_block(const tnt__node_dw *d, const dw_kernel *k, int64_t i0, int64_t m, int64_t j0, int64_t n,
                           float *c);

/* The sharded optimizer's update of each finished piece of the slice (tnt__slice_update). */
typedef struct updater {
    tnt__slice_update fn; /* NULL: none */
    void *ctx;
    const float *base; /* flat offsets are pointers less base */
} updater;

static tnt_status update(const updater *u, const float *from, int64_t n) {
    return u->fn && n > 0 ? u->fn(u->ctx, from - u->base, from - u->base + n) : TNT_OK;
}

/* Row blocks of about 1 MB of c, so that each rank's GEMM after the first adds into c while it
 * is still in cache: 5.5 ms against 6.8 ms for half of a 4096 x 4096 gradient over 2 x 32 rows
 * (1 thread, Zen 5; one GEMM over all 64 rows, which reorders the sums, 4.8 ms); the update
 * follows each block while it is there (MLP, 2 ranks: +4% samples/s). */
static tnt_status dw_rows(const tnt__node_dw *d, const dw_kernel *k, int64_t i0, int64_t m, float *c, const updater *u) {
    int64_t units = k->k.units, step = TNT_MAX((int64_t)16, ((int64_t)1 << 18) / units);
    for (int64_t i = 0; i < m; i += step) {
        int64_t rows = TNT_MIN(step, m - i);
        tnt_status s = dw_block(d, k, i0 + i, rows, 0, units, c + i * units);
        if (s == TNT_OK) s = update(u, c + i * units, rows * units);
        if (s != TNT_OK) return s;
    }
    return TNT_OK;
}

static tnt_status dw_block(const tnt__node_dw *d, const dw_kernel *k, int64_t i0, int64_t m, int64_t j0, int64_t n,
                           float *c) {
    int64_t cap = k->k.cap_rows, units = k->k.units;
    float beta = 0.0f;
    for (int q = 0; q < d->p; q++) {
        int64_t rows = k->head[8 * q] == d->step ? k->head[8 * q + 1] : 0;
        if (rows <= 0) continue;
        tnt_status s = tnt__sgemm_tn_strided(m, n, rows, k->x + (size_t)q * (size_t)cap * (size_t)k->ldx + i0, k->ldx,
                                             k->dpre + (size_t)q * (size_t)cap * (size_t)k->lddpre + j0, k->lddpre,
                                             beta, c, units);
        if (s != TNT_OK) return s;
        beta = 1.0f;
    }
    if (beta == 0.0f) /* no rows on the node */
        for (int64_t i = 0; i < m; i++) memset(c + i * units, 0, (size_t)n * sizeof(float));
    return TNT_OK;
}

/* out[a, b) of kernel k (flat offsets inside it): whole rows in one block, partial first and
 * last rows in one each. */
static tnt_status dw_range(const tnt__node_dw *d, const dw_kernel *k, float *out, int64_t a, int64_t b,
                           const updater *u) {
    int64_t units = k->k.units, off = k->k.offset;
    int64_t t0 = a - off, t1 = b - off;
    int64_t i0 = t0 / units, j0 = t0 % units, i1 = t1 / units, j1 = t1 % units;
    tnt_status s = TNT_OK;
    if (i0 == i1) {
        s = dw_block(d, k, i0, 1, j0, j1 - j0, out + a);
        return s == TNT_OK ? update(u, out + a, j1 - j0) : s;
    }
    if (j0) {
        s = dw_block(d, k, i0, 1, j0, units - j0, out + a);
        if (s == TNT_OK) s = update(u, out + a, units - j0);
        i0++;
    }
    if (s == TNT_OK && i1 > i0) s = dw_rows(d, k, i0, i1 - i0, out + off + i0 * units, u);
    if (s == TNT_OK && j1) {
        s = dw_block(d, k, i1, 1, 0, j1, out + off + i1 * units);
        if (s == TNT_OK) s = update(u, out + off + i1 * units, j1);
    }
    return s;
}

int tnt__node_dw_reduce(tnt__node_dw *d, float *out, int64_t s, int64_t e, int bucket,
                        void (*sum)(void *ctx, float *out, int64_t s, int64_t e), void *ctx,
                        tnt__slice_update update_fn, void *update_ctx) {
    MPI_Win_sync(d->win);
    updater u = {update_fn, update_ctx, out};
    int64_t at = s;
    tnt_status st = TNT_OK;
    for (int i = 0; i < d->n && at < e && st == TNT_OK; i++) {
        const dw_kernel *k = &d->kernels[i];
        int64_t kb = TNT_MAX(at, k->k.offset), ke = TNT_MIN(e, k->k.offset + k->k.in * k->k.units);
        if (!k->stashed || kb >= ke) continue;
        if (kb > at) {
            sum(ctx, out, at, kb);
            if ((st = update(&u, out + at, kb - at)) != TNT_OK) break;
        }
        double t0 = TNT_TL_BEGIN();
        st = dw_range(d, k, out, kb, ke, &u);
        TNT_TL_END("reduction.dw", u.fn ? "node kernel gradient and update" : "node kernel gradient", bucket, t0);
        at = ke;
    }
    if (st == TNT_OK && at < e) {
        sum(ctx, out, at, e);
        st = update(&u, out + at, e - at);
    }
    if (st == TNT_OK) return MPI_SUCCESS;
    tnt_log(TNT_LOG_ERROR, "node gradients: %s", tnt_last_error());
    return MPI_ERR_OTHER;
}
