/* test_gpu_host_threads.c: the kernels' block-level code with several threads per block, without a
 * GPU. The kernels are compiled here a second time with kdefs.h's K_HOST_THREADS branch: each block
 * runs as blockDim POSIX threads sharing its SHARED arrays and a barrier for SYNC(). Every kernel
 * with a reduction or a barrier (softmax rows, log-softmax, LayerNormalization, attention's
 * softmax, sums of squares, the bad-id search, Embedding's offsets) runs with blockDim 1, 2, 3, 32, 33 and 256 against
 * the one-thread host build of the library (tnt__gpu_host_kernel_find) within 1e-6 (the sums run
 * in another order); elementwise, pooling, normalization and optimizer kernels with blockDim 7
 * must match it bitwise (grid-stride indexing with several threads). A kernel whose threads
 * diverge around a barrier would hang here (the ctest timeout). */
#define K_HOST_THREADS 1
#include "gpu_host_util.h"

#include "gpu/host_unpack.h"
#include "gpu/kernels/kernels.cu"

_Thread_local int tnt__k_tid;
int tnt__k_ntid;
i64 tnt__k_block_mt, tnt__k_nblocks_mt;
pthread_barrier_t tnt__k_barrier;

typedef void (*body_fn)(void **args);
#define TNT_K(name, ...)                                                                                      \
    static void mt_##name(void **args) { name(K_UNPACK(__VA_ARGS__)); }
#include "gpu/kernels/kernel_list.h"
#undef TNT_K
static const struct {
    const char *name;
    body_fn fn;
} bodies[] = {
#define TNT_K(name, ...) {#name, mt_##name},
#include "gpu/kernels/kernel_list.h"
#undef TNT_K
};

typedef struct {
    body_fn fn;
    void **args;
    int tid;
} job;

static void *thread_main(void *p) {
    job *j = p;
    tnt__k_tid = j->tid;
    j->fn(j->args);
    return NULL;
}

/* a launch of grid blocks of `block` threads each, the blocks in turn */
static void mt_launch(const char *name, unsigned grid, unsigned block, void **args) {
    body_fn fn = NULL;
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        if (!strcmp(bodies[i].name, name)) fn = bodies[i].fn;
    if (!fn) fail_msg("no kernel %s", name);
    pthread_t th[K_MAX_BLOCK];
    job jobs[K_MAX_BLOCK];
    tnt__k_ntid = (int)block, tnt__k_nblocks_mt = grid;
    assert_int_equal(pthread_barrier_init(&tnt__k_barrier, NULL, block), 0);
    for (unsigned b = 0; b < grid; b++) {
        tnt__k_block_mt = b;
        for (unsigned t = 0; t < block; t++) {
            jobs[t] = (job){fn, args, (int)t};
            assert_int_equal(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
        }
        for (unsigned t = 0; t < block; t++) pthread_join(th[t], NULL);
    }
    pthread_barrier_destroy(&tnt__k_barrier);
}

static const unsigned BLOCKS[] = {1, 2, 3, 32, 33, 256};

/* ---- reductions: any blockDim, within 1e-6 of one thread ------------------------------------ */

static void test_row_reductions(void **state) {
    (void)state;
    i64 rows = 9, cols = 301, n = rows * cols;
    float *x = gh_random(n, -5, 5, 1), *dy = gh_random(n, -1, 1, 2), *y1 = gh_poisoned(n), *d1 = gh_poisoned(n);
    float *y = gh_poisoned(n), *d = gh_poisoned(n);
    const char *fwd[] = {"tnt_k_softmax_fwd", "tnt_k_log_softmax_fwd"}, *bwd[] = {"tnt_k_softmax_bwd", "tnt_k_log_softmax_bwd"};
    for (int k = 0; k < 2; k++) {
        gh_launch(fwd[k], 4, ARGS(&x, &y1, &rows, &cols));
        gh_launch(bwd[k], 4, ARGS(&y1, &dy, &d1, &rows, &cols));
        for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
            mt_launch(fwd[k], 4, BLOCKS[b], ARGS(&x, &y, &rows, &cols));
            mt_launch(bwd[k], 4, BLOCKS[b], ARGS(&y1, &dy, &d, &rows, &cols));
            gh_assert_close(y, y1, n, 1e-6, 1e-7, fwd[k]);
            gh_assert_close(d, d1, n, 1e-6, 1e-7, bwd[k]);
        }
    }
    /* LayerNormalization: forward and dx over rows of 301 */
    float *gamma = gh_random(cols, 0.5f, 1.5f, 3), *beta = gh_random(cols, -1, 1, 4);
    double eps = 1e-3, *st1 = malloc((size_t)(2 * rows) * sizeof(double)), *st = malloc((size_t)(2 * rows) * sizeof(double));
    gh_launch("tnt_k_ln_fwd", 4, ARGS(&x, &y1, &gamma, &beta, &st1, &rows, &cols, &eps));
    gh_launch("tnt_k_ln_bwd_dx", 4, ARGS(&x, &dy, &gamma, &st1, &d1, &rows, &cols));
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        mt_launch("tnt_k_ln_fwd", 4, BLOCKS[b], ARGS(&x, &y, &gamma, &beta, &st, &rows, &cols, &eps));
        mt_launch("tnt_k_ln_bwd_dx", 4, BLOCKS[b], ARGS(&x, &dy, &gamma, &st, &d, &rows, &cols));
        gh_assert_close(y, y1, n, 1e-6, 1e-6, "tnt_k_ln_fwd");
        gh_assert_close(d, d1, n, 1e-6, 1e-6, "tnt_k_ln_bwd_dx");
    }
    /* LayerNormalization's column sums: virtual lanes, so the same bits for any blockDim */
    i64 chunk = 4, chunks = (rows + chunk - 1) / chunk;
    double *p1 = malloc((size_t)(chunks * 2 * cols) * sizeof(double)), *p2 = malloc((size_t)(chunks * 2 * cols) * sizeof(double));
    gh_launch("tnt_k_ln_param_sums", 3, ARGS(&x, &st1, &dy, &p1, &rows, &cols, &chunk));
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        memset(p2, 0xff, (size_t)(chunks * 2 * cols) * sizeof(double));
        mt_launch("tnt_k_ln_param_sums", 3, BLOCKS[b], ARGS(&x, &st1, &dy, &p2, &rows, &cols, &chunk));
        assert_memory_equal(p1, p2, (size_t)(chunks * 2 * cols) * sizeof(double));
    }
    free(p1), free(p2);
    /* attention's masked softmax (causal) and its backward */
    i64 B = 1, H = 3, Tq = 3, Tv = 301;
    int causal = 1;
    float *none = NULL, *s1 = gh_copy(x, n), *s = NULL, dscale = 1.0f;
    gh_launch("tnt_k_mha_softmax", 2, ARGS(&s1, &none, &none, &none, &B, &H, &Tq, &Tv, &causal));
    gh_launch("tnt_k_mha_softmax_bwd", 2, ARGS(&s1, &none, &d1, &rows, &cols, &dscale));
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        s = gh_copy(x, n);
        mt_launch("tnt_k_mha_softmax", 2, BLOCKS[b], ARGS(&s, &none, &none, &none, &B, &H, &Tq, &Tv, &causal));
        gh_assert_close(s, s1, n, 1e-6, 1e-7, "tnt_k_mha_softmax");
        memcpy(d, dy, (size_t)n * sizeof(float));
        if (b == 0) memcpy(d1, dy, (size_t)n * sizeof(float)), gh_launch("tnt_k_mha_softmax_bwd", 2, ARGS(&s1, &none, &d1, &rows, &cols, &dscale));
        mt_launch("tnt_k_mha_softmax_bwd", 2, BLOCKS[b], ARGS(&s1, &none, &d, &rows, &cols, &dscale));
        gh_assert_close(d, d1, n, 1e-6, 1e-7, "tnt_k_mha_softmax_bwd");
        free(s);
    }
    free(x), free(dy), free(y1), free(d1), free(y), free(d), free(gamma), free(beta), free(st1), free(st), free(s1);
}

/* The norm constraints (MaxNorm, UnitNorm, MinMaxNorm) over the axes 0 and 2 of a (5, 3, 4, 6)
 * weight, a block per group of 20 values: each blockDim within 1e-6 of the norms recomputed here
 * (Keras's formulas: w * desired / (1e-7 + norm)); NonNeg bitwise. */
static void test_norm_constraints(void **state) {
    (void)state;
    i64 n = 5 * 3 * 4 * 6;
    float *w0 = gh_random(n, -1, 1, 9);
    tnt_k_axes_norm a = {.groups = 3 * 6, .per = 5 * 4, .dim = {5, 3, 4, 6}, .reduced = {1, 0, 1, 0}, .ndim = 4};
    for (int kind = 0; kind < 3; kind++) {
        float *want = gh_copy(w0, n);
        for (i64 g = 0; g < a.groups; g++) { /* group g: axis 1 index g / 6, axis 3 index g % 6 */
            double s = 0;
            for (i64 i0 = 0; i0 < 5; i0++)
                for (i64 i2 = 0; i2 < 4; i2++) {
                    double v = w0[((i0 * 3 + g / 6) * 4 + i2) * 6 + g % 6];
                    s += v * v;
                }
            float nrm = (float)sqrt(s), desired = kind == 0 ? fminf(nrm, 0.7f) : kind == 1 ? 1.0f
                                                                 : 0.4f * fminf(fmaxf(nrm, 0.9f), 1.1f) + 0.6f * nrm;
            for (i64 i0 = 0; i0 < 5; i0++)
                for (i64 i2 = 0; i2 < 4; i2++) want[((i0 * 3 + g / 6) * 4 + i2) * 6 + g % 6] *= desired / (1e-7f + nrm);
        }
        float maxv = kind == 0 ? 0.7f : 1.1f, minv = 0.9f, rate = 0.4f;
        for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
            float *w = gh_copy(w0, n);
            mt_launch("tnt_k_norm_constraint", 4, BLOCKS[b], ARGS(&w, &a, &kind, &maxv, &minv, &rate));
            gh_assert_close(w, want, n, 1e-6, 1e-7, "tnt_k_norm_constraint");
            free(w);
        }
        free(want);
    }
    float *w = gh_copy(w0, n), *want = gh_copy(w0, n);
    w[0] = want[0] = -0.0f;
    for (i64 i = 1; i < n; i++) want[i] = want[i] < 0 ? 0.0f : want[i];
    mt_launch("tnt_k_non_neg", 3, 7, ARGS(&w, &n));
    tu_assert_bitwise(w, want, n, "tnt_k_non_neg");
    free(w), free(want), free(w0);
}

static void test_grid_reductions(void **state) {
    (void)state;
    i64 n = 100003;
    float *x = gh_random(n, -2, 2, 5), *part = gh_poisoned(5);
    double want = 0;
    for (i64 i = 0; i < n; i++) want += (double)x[i] * x[i];
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        mt_launch("tnt_k_sum_squares_partial", 5, BLOCKS[b], ARGS(&x, &part, &n));
        double got = 0;
        for (int k = 0; k < 5; k++) got += part[k];
        if (fabs(got - want) > 1e-6 * want) fail_msg("sum of squares, blockDim %u: %.9g, want %.9g", BLOCKS[b], got, want);
    }
    /* two sums in one reduction (the L1/L2 penalty) */
    double pr[10], *prp = pr, w1 = 0, w2 = 0;
    for (i64 i = 0; i < n; i++) w1 += fabs((double)x[i]), w2 += (double)x[i] * x[i];
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        mt_launch("tnt_k_l1l2_sums_partial", 5, BLOCKS[b], ARGS(&x, &prp, &n));
        double g1 = 0, g2 = 0;
        for (int k = 0; k < 5; k++) g1 += pr[2 * k], g2 += pr[2 * k + 1];
        if (fabs(g1 - w1) > 1e-12 * w1 || fabs(g2 - w2) > 1e-12 * w2)
            fail_msg("L1/L2 sums, blockDim %u: %.17g %.17g, want %.17g %.17g", BLOCKS[b], g1, g2, w1, w2);
    }
    /* the first bad id, whichever thread of which block sees it */
    i64 m = 5000;
    int vocab = 100;
    float *ids = gh_random(m, 0, 99, 6);
    for (i64 i = 0; i < m; i++) ids[i] = floorf(ids[i]);
    ids[3217] = 100.0f, ids[4000] = -1.0f;
    long long p[5], *pp = p;
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        mt_launch("tnt_k_embedding_bad_ids", 5, BLOCKS[b], ARGS(&ids, &m, &vocab, &pp));
        long long first = m;
        for (int k = 0; k < 5; k++) first = p[k] < first ? p[k] : first;
        assert_int_equal(first, 3217);
    }
    /* Embedding's offsets: one block's scan of the id counts, exact for any blockDim */
    i64 ids_v = 1001;
    int *count = malloc((size_t)ids_v * sizeof(int)), *offset = malloc((size_t)ids_v * sizeof(int));
    for (i64 v = 0; v < ids_v; v++) count[v] = (int)((v * 7919) % 13);
    for (size_t b = 0; b < sizeof BLOCKS / sizeof BLOCKS[0]; b++) {
        memset(offset, 0xff, (size_t)ids_v * sizeof(int));
        mt_launch("tnt_k_embedding_offsets", 1, BLOCKS[b], ARGS(&count, &offset, &ids_v));
        for (int v = 0, total = 0; v < ids_v; total += count[v], v++)
            if (offset[v] != total) fail_msg("embedding offsets, blockDim %u: offset[%d] = %d, want %d", BLOCKS[b], v, offset[v], total);
    }
    free(count), free(offset);
    free(x), free(part), free(ids);
}

/* ---- grid-stride kernels with several threads: bitwise one thread's results ----------------- */

static void test_strided_bitwise(void **state) {
    (void)state;
    i64 rows = 37, cols = 29, n = rows * cols;
    float *x = gh_random(n, -4, 4, 7), *dy = gh_random(n, -1, 1, 8), *a = gh_poisoned(n), *b = gh_poisoned(n);
    for (int act = 0; act < K_ACT_COUNT; act++) {
        if (act == K_ACT_SOFTMAX || act == K_ACT_LOG_SOFTMAX || act == K_ACT_SPARSEMAX) continue;
        float alpha = 0.0f;
        gh_launch("tnt_k_act_fwd", 3, ARGS(&act, &alpha, &x, &a, &n));
        mt_launch("tnt_k_act_fwd", 3, 7, ARGS(&act, &alpha, &x, &b, &n));
        tu_assert_bitwise(b, a, n, "tnt_k_act_fwd, 7 threads");
        gh_launch("tnt_k_act_bwd", 3, ARGS(&act, &alpha, &x, &x, &dy, &a, &n));
        mt_launch("tnt_k_act_bwd", 3, 7, ARGS(&act, &alpha, &x, &x, &dy, &b, &n));
        tu_assert_bitwise(b, a, n, "tnt_k_act_bwd, 7 threads");
    }
    /* the bias kernels keep the column without a division per element: 29 columns (the grid's
     * 21 threads step less than a row) and 5 (more than a row) */
    for (i64 bc = 29; bc >= 5; bc -= 24) {
        i64 br = n / bc;
        float *bias = gh_random(bc, -1, 1, 15), *p1 = gh_copy(x, n), *p2 = gh_copy(x, n);
        gh_launch("tnt_k_bias_add", 3, ARGS(&p1, &bias, &br, &bc));
        mt_launch("tnt_k_bias_add", 3, 7, ARGS(&p2, &bias, &br, &bc));
        for (i64 i = 0; i < br * bc; i++) a[i] = x[i] + bias[i % bc];
        tu_assert_bitwise(p1, a, br * bc, "tnt_k_bias_add against x + bias");
        tu_assert_bitwise(p2, p1, n, "tnt_k_bias_add, 7 threads");
        gh_launch("tnt_k_bias_set", 3, ARGS(&p1, &bias, &br, &bc));
        mt_launch("tnt_k_bias_set", 3, 7, ARGS(&p2, &bias, &br, &bc));
        tu_assert_bitwise(p2, p1, n, "tnt_k_bias_set, 7 threads");
        int act = K_ACT_GELU;
        float alpha = 0.0f;
        gh_launch("tnt_k_bias_act_fwd", 3, ARGS(&p1, &bias, &a, &act, &alpha, &br, &bc));
        mt_launch("tnt_k_bias_act_fwd", 3, 7, ARGS(&p2, &bias, &b, &act, &alpha, &br, &bc));
        tu_assert_bitwise(p2, p1, n, "tnt_k_bias_act_fwd (pre), 7 threads");
        tu_assert_bitwise(b, a, br * bc, "tnt_k_bias_act_fwd, 7 threads");
        free(bias), free(p1), free(p2);
    }
    /* ZeroPadding's box copy (its index split by pooling.cu's divisors, set by thread 0) */
    {
        tnt_k_box bx = {.n = 2, .c = 3, .in = {1, 9, 8}, .out = {1, 11, 12}, .off = {0, 1, 2}};
        i64 bn = 2 * 11 * 12 * 3;
        float *bin = gh_random(2 * 9 * 8 * 3, -1, 1, 16), *bo1 = gh_poisoned(bn), *bo2 = gh_poisoned(bn), pad = 0.5f;
        gh_launch("tnt_k_box_copy", 3, ARGS(&bx, &bin, &bo1, &pad));
        mt_launch("tnt_k_box_copy", 3, 7, ARGS(&bx, &bin, &bo2, &pad));
        tu_assert_bitwise(bo2, bo1, bn, "box copy, 7 threads");
        free(bin), free(bo1), free(bo2);
    }
    /* 3x3 max and average pooling, stride 2, same padding */
    tnt_k_pool g = {.n = 2, .c = 3, .in = {1, 9, 8}, .out = {1, 5, 4}, .k = {1, 3, 3}, .s = {1, 2, 2}, .pad = {0, 1, 1}};
    i64 nx = 2 * 9 * 8 * 3, ny = 2 * 5 * 4 * 3;
    float *px = gh_random(nx, -1, 1, 9), *pdy = gh_random(ny, -1, 1, 10);
    float *y1 = gh_poisoned(ny), *y2 = gh_poisoned(ny), *dx1 = gh_poisoned(nx), *dx2 = gh_poisoned(nx);
    unsigned short *arg1 = calloc((size_t)ny, 2), *arg2 = calloc((size_t)ny, 2);
    gh_launch("tnt_k_max_pool_fwd", 3, ARGS(&g, &px, &y1, &arg1));
    mt_launch("tnt_k_max_pool_fwd", 3, 7, ARGS(&g, &px, &y2, &arg2));
    gh_launch("tnt_k_max_pool_bwd", 3, ARGS(&g, &pdy, &arg1, &dx1));
    mt_launch("tnt_k_max_pool_bwd", 3, 7, ARGS(&g, &pdy, &arg2, &dx2));
    tu_assert_bitwise(y2, y1, ny, "max pool forward, 7 threads");
    tu_assert_bitwise(dx2, dx1, nx, "max pool backward, 7 threads");
    gh_launch("tnt_k_avg_pool_bwd", 3, ARGS(&g, &pdy, &dx1));
    mt_launch("tnt_k_avg_pool_bwd", 3, 7, ARGS(&g, &pdy, &dx2));
    tu_assert_bitwise(dx2, dx1, nx, "average pool backward, 7 threads");
    /* the column sums (bias gradients): virtual lanes, the same bits for any blockDim; 29 columns
     * and 5 (a tile of 8 lanes x 32 groups) */
    for (i64 cc = 29; cc >= 5; cc -= 24) {
        i64 cr = n / cc;
        float *o1 = gh_poisoned(cc), *o2 = gh_poisoned(cc);
        gh_launch("tnt_k_col_sums", 1, ARGS(&x, &o1, &cr, &cc));
        for (unsigned bi = 0; bi < sizeof BLOCKS / sizeof BLOCKS[0]; bi++) {
            mt_launch("tnt_k_col_sums", 2, BLOCKS[bi], ARGS(&x, &o2, &cr, &cc));
            tu_assert_bitwise(o2, o1, cc, "tnt_k_col_sums, several threads");
        }
        free(o1), free(o2);
    }
    /* BatchNormalization's kernels (their sums run over virtual lanes: the same bits for any
     * blockDim), channels last over 45 channels (two tiles) and first (inner 7), and Adam */
    for (int layout = 0; layout < 2; layout++) {
        i64 C = layout ? 3 : 45, inner = layout ? 7 : 1, bn_rows = n / (C * inner), m = bn_rows * inner;
        i64 chunk = layout ? 50 : 40, chunks = (m + chunk - 1) / chunk;
        int relu = 1, batch_stats = 1;
        double M = (double)m, mom = 0.9, eps = 1e-3;
        for (unsigned bi = 0; bi < 3; bi++) {
            const unsigned blocks[] = {1, 7, 256};
            double *p1 = calloc((size_t)(chunks * 2 * C), sizeof(double)), *p2 = calloc((size_t)(chunks * 2 * C), sizeof(double));
            float *st[2][8], *out1 = gh_poisoned(n), *out2 = gh_poisoned(n), *g1 = gh_random(C, 0.5f, 1.5f, 13);
            for (int s = 0; s < 2; s++)
                for (int k = 0; k < 8; k++) st[s][k] = k < 2 ? gh_random(C, 0, 1, 14) : gh_poisoned(C);
            /* st[s]: moving mean, moving var, mean, inv_std, dgamma, dbeta, mean_g, mean_gx */
            gh_launch("tnt_k_bn_stat_sums", 2, ARGS(&x, &p1, &bn_rows, &C, &inner, &chunk));
            mt_launch("tnt_k_bn_stat_sums", 2, blocks[bi], ARGS(&x, &p2, &bn_rows, &C, &inner, &chunk));
            assert_memory_equal(p1, p2, (size_t)(chunks * 2 * C) * sizeof(double));
            gh_launch("tnt_k_bn_stats", 1, ARGS(&x, &p1, &chunks, &C, &inner, &st[0][2], &st[0][3], &st[0][0], &st[0][1], &M, &mom, &eps));
            mt_launch("tnt_k_bn_stats", 1, blocks[bi], ARGS(&x, &p2, &chunks, &C, &inner, &st[1][2], &st[1][3], &st[1][0], &st[1][1], &M, &mom, &eps));
            for (int k = 0; k < 4; k++) tu_assert_bitwise(st[1][k], st[0][k], C, "tnt_k_bn_stats, several threads");
            gh_launch("tnt_k_bn_apply", 3, ARGS(&x, &out1, &g1, &g1, &st[0][2], &st[0][3], &bn_rows, &C, &inner, &relu));
            mt_launch("tnt_k_bn_apply", 3, blocks[bi], ARGS(&x, &out2, &g1, &g1, &st[1][2], &st[1][3], &bn_rows, &C, &inner, &relu));
            tu_assert_bitwise(out2, out1, n, "tnt_k_bn_apply, several threads");
            gh_launch("tnt_k_bn_grad_sums", 2, ARGS(&x, &dy, &out1, &st[0][2], &st[0][3], &p1, &bn_rows, &C, &inner, &chunk, &relu));
            mt_launch("tnt_k_bn_grad_sums", 2, blocks[bi], ARGS(&x, &dy, &out2, &st[1][2], &st[1][3], &p2, &bn_rows, &C, &inner, &chunk, &relu));
            assert_memory_equal(p1, p2, (size_t)(chunks * 2 * C) * sizeof(double));
            gh_launch("tnt_k_bn_grad_finish", 1, ARGS(&p1, &chunks, &C, &st[0][4], &st[0][5], &st[0][6], &st[0][7], &M, &batch_stats));
            mt_launch("tnt_k_bn_grad_finish", 1, blocks[bi], ARGS(&p2, &chunks, &C, &st[1][4], &st[1][5], &st[1][6], &st[1][7], &M, &batch_stats));
            for (int k = 4; k < 8; k++) tu_assert_bitwise(st[1][k], st[0][k], C, "tnt_k_bn_grad_finish, several threads");
            gh_launch("tnt_k_bn_dx", 3, ARGS(&x, &dy, &out1, &g1, &st[0][2], &st[0][3], &st[0][6], &st[0][7], &a, &bn_rows, &C, &inner, &relu));
            mt_launch("tnt_k_bn_dx", 3, blocks[bi], ARGS(&x, &dy, &out2, &g1, &st[1][2], &st[1][3], &st[1][6], &st[1][7], &b, &bn_rows, &C, &inner, &relu));
            tu_assert_bitwise(b, a, n, "tnt_k_bn_dx, several threads");
            for (int s = 0; s < 2; s++)
                for (int k = 0; k < 8; k++) free(st[s][k]);
            free(p1), free(p2), free(out1), free(out2), free(g1);
        }
    }
    float *p = gh_copy(x, n), *q = gh_copy(x, n), *m1 = gh_random(n, -0.1f, 0.1f, 11), *m2 = gh_copy(m1, n);
    float *v1 = gh_random(n, 0, 1, 12), *v2 = gh_copy(v1, n), *vh = NULL;
    float c1 = 0.1f, c2 = 0.001f, al = 0.01f, eps = 1e-7f, wd = 0.0f;
    gh_launch("tnt_k_adam", 3, ARGS(&p, &dy, &m1, &v1, &vh, &n, &c1, &c2, &al, &eps, &wd));
    mt_launch("tnt_k_adam", 3, 7, ARGS(&q, &dy, &m2, &v2, &vh, &n, &c1, &c2, &al, &eps, &wd));
    tu_assert_bitwise(q, p, n, "Adam, 7 threads");
    free(x), free(dy), free(a), free(b), free(px), free(pdy), free(y1), free(y2), free(dx1), free(dx2), free(arg1);
    free(arg2), free(p), free(q), free(m1), free(m2), free(v1), free(v2);
}

/* pooling.cu's division by a launch constant: exact against '/' for dividends below 2^31 */
static void test_udiv(void **state) {
    (void)state;
    const unsigned divisors[] = {1, 2, 3, 5, 7, 31, 32, 33, 56, 64, 112, 255, 1000, 3136, 65535, 65536, 100003, 802816,
                                 0x3fffffffu, 0x40000000u, 0x7fffffffu};
    const unsigned edges[] = {0, 1, 2, 55, 56, 57, 4095, 65535, 65536, 802815, 802816, 0x3fffffffu, 0x7ffffffeu, 0x7fffffffu};
    uint64_t r = 12345;
    for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
        const unsigned d = divisors[k];
        const k_udiv v = k_udiv_make(d);
        for (int j = 0; j < 20000 + (int)(sizeof edges / sizeof edges[0]); j++) {
            unsigned n;
            if (j < (int)(sizeof edges / sizeof edges[0])) n = edges[j];
            else r = r * 6364136223846793005ull + 1442695040888963407ull, n = (unsigned)(r >> 33); /* < 2^31 */
            if (k_udiv_q(v, n) != n / d) fail_msg("k_udiv_q(%u, %u) = %u, expected %u", n, d, k_udiv_q(v, n), n / d);
        }
    }
}

/* The loss gradients (loss.cu): cross-entropy rows of 301 classes (a block per row, sums in double
 * in another order) within 1e-6 of one thread, a bad sparse label's zero row included; the
 * elementwise losses bitwise with blockDim 7. */
static void test_loss_grads(void **state) {
    (void)state;
    i64 rows = 6, cols = 301, n = rows * cols, positions = 2, ld = 2 * cols + 1, col = 1;
    float *x = gh_random(n, -6, 6, 5), *pr = gh_random(n, 0, 1, 6), *y = gh_random((n / positions) * ld, 0, 1, 7);
    for (i64 r = 0; r < rows; r++) y[(r / positions) * ld + col + r % positions] = (float)((r * 37) % cols);
    y[(3 / positions) * ld + col + 3 % positions] = -1.0f; /* row 3: a label out of range */
    float *d1 = gh_poisoned(n), *d = gh_poisoned(n);
    double scale = 1.0 / 24.0;
    for (int kind = 1; kind <= 5; kind++)
        for (int logits = 0; logits < 2; logits++) {
            const char *name = kind <= 2 ? "tnt_k_loss_grad_rows" : "tnt_k_loss_grad_elems";
            i64 c = kind == 1 ? cols : cols / 7; /* dense labels: (positions, c) per sample within ld */
            i64 r2 = kind == 1 ? rows : rows * 7;
            const float *in = logits ? x : pr;
            gh_launch(name, 3, ARGS(&kind, &logits, &in, &y, &d1, &r2, &c, &positions, &ld, &col, &scale));
            const unsigned *blocks = kind <= 2 ? BLOCKS : (const unsigned[]){7};
            const size_t nb = kind <= 2 ? sizeof BLOCKS / sizeof BLOCKS[0] : 1;
            for (size_t b = 0; b < nb; b++) {
                mt_launch(name, 3, blocks[b], ARGS(&kind, &logits, &in, &y, &d, &r2, &c, &positions, &ld, &col, &scale));
                if (kind <= 2) gh_assert_close(d, d1, r2 * c, 1e-6, 1e-12, name);
                else assert_memory_equal(d, d1, (size_t)(r2 * c) * sizeof(float));
            }
            if (kind == 1)
                for (i64 j = 0; j < cols; j++) assert_true(d[3 * cols + j] == 0.0f);
        }
    free(x), free(pr), free(y), free(d1), free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_grads),
        cmocka_unit_test(test_udiv),
        cmocka_unit_test(test_row_reductions),
        cmocka_unit_test(test_grid_reductions),
        cmocka_unit_test(test_norm_constraints),
        cmocka_unit_test(test_strided_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
