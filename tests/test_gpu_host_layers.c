/* test_gpu_host_layers.c: the layers' device kernels (src/gpu/kernels/pooling.cu,
 * normalization.cu, misc.cu) through their host build against the CPU layers run through the
 * layer contract: pooling (max with its argmax, average, global; 2-D and 3-D, "valid" and "same",
 * overlapping windows, ties) and Dropout, Embedding, ZeroPadding/Cropping bitwise;
 * BatchNormalization (training and inference, channels last and first, a folded relu, without
 * gamma or beta) and LayerNormalization within 1e-6; concatenation and the filter transposes
 * against their index formulas. Outputs start poisoned. */
#include "gpu_host_util.h"

#include "gpu/kernels/kargs.h"
#include "layer_harness.h"
#include "layers/attention/attention.h"
#include "layers/layer.h"
#include "layers/regularizer.h"
#include "model/model.h"

typedef long long i64;

/* one forward (and backward when dy) of a built layer with explicit training, seed and offset */
static void layer_fwd(drv *d, bool training, uint64_t seed, int64_t sample_offset) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .workspace = d->ws, .training = training,
                       .seed = seed, .sample_offset = sample_offset};
    tu_ok(d->l->ops->forward(d->l, d->plan, &a));
}
static void layer_bwd(drv *d, int64_t sample_offset) {
    tnt__bwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .dy = d->dy, .dx = d->dx, .workspace = d->ws,
                       .sample_offset = sample_offset};
    tu_ok(d->l->ops->backward(d->l, d->plan, &a));
}

/* values on a grid of 0.5 in [-4, 4): many ties for the max rules */
static void fill_ties(float *x, int64_t n, uint64_t seed) {
    tu_fill(x, n, seed);
    for (int64_t i = 0; i < n; i++) x[i] = floorf(x[i] * 8.0f) * 0.5f;
}

/* ---- pooling -------------------------------------------------------------------------------- */

/* TensorFlow's "same" padding before, as layers/pooling/pooling.c */
static int pad_before(int in, int k, int s, int out, tnt_padding p) {
    if (p != TNT_PADDING_SAME) return 0;
    int total = (out - 1) * s + k - in;
    return total > 0 ? total / 2 : 0;
}

static void check_pool(bool is_max, int spatial, const int in[3], int c, const int k[3], const int s[3],
                       tnt_padding padding, int64_t batch) {
    tnt_layer_opts o = {.padding = padding};
    int first = 3 - spatial;
    for (int a = 0; a < spatial; a++) o.strides[a] = s[first + a];
    tnt_layer *l;
    tnt_shape shape;
    if (spatial == 2) {
        l = is_max ? tnt_max_pooling2d(k[1], k[2], &o) : tnt_average_pooling2d(k[1], k[2], &o);
        shape = TNT_SHAPE(in[1], in[2], c);
    } else {
        l = is_max ? tnt_max_pooling3d(k, &o) : tnt_average_pooling3d(k, &o);
        shape = TNT_SHAPE(in[0], in[1], in[2], c);
    }
    drv d;
    drv_init(&d, l, shape, batch);
    fill_ties(d.x, in_numel(&d), 11);
    tu_fill(d.dy, out_numel(&d), 12);
    layer_fwd(&d, true, 1, 0);
    layer_bwd(&d, 0);

    tnt_k_pool g = {.n = batch, .c = c};
    for (int a = 0; a < 3; a++) {
        g.in[a] = in[a], g.k[a] = k[a], g.s[a] = s[a];
        g.out[a] = a < first ? 1 : (int)l->out_shape.dim[a - first];
        g.pad[a] = pad_before(in[a], k[a], s[a], g.out[a], padding);
    }
    i64 ny = out_numel(&d), nx = in_numel(&d);
    float *y = gh_poisoned(ny), *dx = gh_poisoned(nx);
    unsigned short *arg = malloc((size_t)ny * sizeof *arg);
    char what[96];
    snprintf(what, sizeof what, "%s pool %dD k %dx%dx%d s %dx%dx%d %s", is_max ? "max" : "avg", spatial, k[0], k[1],
             k[2], s[0], s[1], s[2], padding == TNT_PADDING_SAME ? "same" : "valid");
    if (is_max) {
        memset(arg, 0xee, (size_t)ny * sizeof *arg);
        gh_launch("tnt_k_max_pool_fwd", 7, ARGS(&g, &d.x, &y, &arg));
        gh_launch("tnt_k_max_pool_bwd", 5, ARGS(&g, &d.dy, &arg, &dx));
        if (memcmp(arg, d.ws, (size_t)ny * sizeof *arg)) fail_msg("%s: argmax differs from the CPU's workspace", what);
    } else {
        gh_launch("tnt_k_avg_pool_fwd", 7, ARGS(&g, &d.x, &y));
        gh_launch("tnt_k_avg_pool_bwd", 5, ARGS(&g, &d.dy, &dx));
    }
    tu_assert_bitwise(y, d.y, ny, what);
    tu_assert_bitwise(dx, d.dx, nx, what);
    free(y), free(dx), free(arg);
    drv_free(&d, true);
}

static void test_pooling(void **state) {
    (void)state;
    for (int is_max = 0; is_max < 2; is_max++) {
        check_pool(is_max, 2, (int[]){1, 28, 28}, 6, (int[]){1, 2, 2}, (int[]){1, 2, 2}, TNT_PADDING_VALID, 3);
        check_pool(is_max, 2, (int[]){1, 7, 9}, 3, (int[]){1, 3, 3}, (int[]){1, 2, 2}, TNT_PADDING_SAME, 2);
        check_pool(is_max, 2, (int[]){1, 6, 6}, 5, (int[]){1, 3, 2}, (int[]){1, 1, 1}, TNT_PADDING_SAME, 2);
        check_pool(is_max, 2, (int[]){1, 9, 8}, 4, (int[]){1, 3, 3}, (int[]){1, 2, 2}, TNT_PADDING_VALID, 3);
        check_pool(is_max, 3, (int[]){4, 5, 6}, 3, (int[]){2, 2, 3}, (int[]){1, 2, 2}, TNT_PADDING_SAME, 2);
    }
}

static void check_global_pool(bool is_max, int h, int w, int c, int64_t batch) {
    tnt_layer *l = is_max ? tnt_global_max_pooling2d(NULL) : tnt_global_average_pooling2d(NULL);
    drv d;
    drv_init(&d, l, TNT_SHAPE(h, w, c), batch);
    fill_ties(d.x, in_numel(&d), 21);
    tu_fill(d.dy, out_numel(&d), 22);
    layer_fwd(&d, true, 1, 0);
    layer_bwd(&d, 0);
    i64 n = batch, hw = (i64)h * w, cc = c, ny = out_numel(&d), nx = in_numel(&d);
    int max = is_max;
    float *y = gh_poisoned(ny), *dx = gh_poisoned(nx);
    gh_launch("tnt_k_global_pool_fwd", 3, ARGS(&d.x, &y, &n, &hw, &cc, &max));
    if (is_max)
        gh_launch("tnt_k_global_max_pool_bwd", 3, ARGS(&d.x, &d.dy, &dx, &n, &hw, &cc));
    else
        gh_launch("tnt_k_global_avg_pool_bwd", 3, ARGS(&d.dy, &dx, &n, &hw, &cc));
    tu_assert_bitwise(y, d.y, ny, is_max ? "global max pool forward" : "global average pool forward");
    tu_assert_bitwise(dx, d.dx, nx, is_max ? "global max pool backward (ties split)" : "global average pool backward");
    free(y), free(dx);
    drv_free(&d, true);
}

static void test_global_pooling(void **state) {
    (void)state;
    check_global_pool(false, 7, 7, 33, 3);
    check_global_pool(true, 7, 7, 33, 3);
    check_global_pool(true, 3, 5, 4, 2);
}

/* ---- normalization -------------------------------------------------------------------------- */

static float *weight_or_null(tnt_layer *l, const char *name, bool grad) {
    for (int i = 0; i < l->n_weights; i++)
        if (strstr(l->weights[i].name, name)) return grad ? l->weights[i].grad : l->weights[i].value;
    return NULL;
}

/* inner > 1: channels first (axis 1) over (c, h, w); chunk: values per channel in a tile of the
 * sums; grid: host blocks (fewer than the tiles: the kernels stride over them) */
static float bn_offset = 0.5f; /* added to x: the statistics' shifted sums must not cancel */

static void check_bn_shape(int h, int w, int c, i64 chunk, unsigned grid, bool channels_first, bool training, bool relu,
                           bool no_scale, bool no_center, int64_t batch) {
    tnt_batch_norm_opts o = {.momentum = 0.9f, .epsilon = 1e-3f, .no_scale = no_scale, .no_center = no_center,
                             .axis = channels_first ? 1 : 0};
    tnt_layer *l = tnt_batch_normalization_with(&o);
    assert_non_null(l);
    if (relu) l->activation = TNT_ACT_RELU; /* the model folds a following ReLU in */
    drv d;
    drv_init(&d, l, channels_first ? TNT_SHAPE(c, h, w) : TNT_SHAPE(h, w, c), batch);
    tu_fill(d.x, in_numel(&d), 31);
    for (int64_t i = 0; i < in_numel(&d); i++) d.x[i] = d.x[i] * 3.0f + bn_offset;
    tu_fill(d.dy, out_numel(&d), 32);
    float *gamma = weight_or_null(l, "gamma", false), *beta = weight_or_null(l, "beta", false);
    float *mmean = weight_or_null(l, "moving_mean", false), *mvar = weight_or_null(l, "moving_variance", false);
    if (gamma) tu_fill(gamma, c, 33);
    if (beta) tu_fill(beta, c, 34);
    tu_fill(mmean, c, 35);
    for (int k = 0; k < c; k++) mvar[k] = 0.5f + 0.1f * (float)k;
    float *mm0 = gh_copy(mmean, c), *mv0 = gh_copy(mvar, c);
    layer_fwd(&d, training, 1, 0);
    layer_bwd(&d, 0);

    i64 C = c, inner = channels_first ? (i64)h * w : 1, rows = batch * h * w * c / (C * inner);
    i64 m = rows * inner, chunks = (m + chunk - 1) / chunk, n = in_numel(&d);
    int r = relu, batch_stats = training;
    double M = (double)m, mom = 0.9f, eps = 1e-3f;
    double *part = malloc((size_t)(chunks * 2 * C) * sizeof(double));
    float *mean_f = gh_poisoned(C), *inv_std = gh_poisoned(C), *mm = gh_copy(mm0, C), *mv = gh_copy(mv0, C);
    float *y = gh_poisoned(n), *dx = gh_poisoned(n), *dg = gh_poisoned(C), *db = gh_poisoned(C);
    float *mg = gh_poisoned(C), *mgx = gh_poisoned(C);
    if (training) {
        gh_launch("tnt_k_bn_stat_sums", grid, ARGS(&d.x, &part, &rows, &C, &inner, &chunk));
        gh_launch("tnt_k_bn_stats", 2, ARGS(&d.x, &part, &chunks, &C, &inner, &mean_f, &inv_std, &mm, &mv, &M, &mom, &eps));
    } else {
        gh_launch("tnt_k_bn_moving_stats", 2, ARGS(&mm, &mv, &mean_f, &inv_std, &C, &eps));
    }
    gh_launch("tnt_k_bn_apply", grid, ARGS(&d.x, &y, &gamma, &beta, &mean_f, &inv_std, &rows, &C, &inner, &r));
    gh_launch("tnt_k_bn_grad_sums", grid,
              ARGS(&d.x, &d.dy, &y, &mean_f, &inv_std, &part, &rows, &C, &inner, &chunk, &r));
    float *dgp = gamma ? dg : NULL, *dbp = beta ? db : NULL;
    gh_launch("tnt_k_bn_grad_finish", 2, ARGS(&part, &chunks, &C, &dgp, &dbp, &mg, &mgx, &M, &batch_stats));
    gh_launch("tnt_k_bn_dx", grid,
              ARGS(&d.x, &d.dy, &y, &gamma, &mean_f, &inv_std, &mg, &mgx, &dx, &rows, &C, &inner, &r));

    char what[128];
    snprintf(what, sizeof what, "BatchNormalization (%dx%dx%d, chunk %lld, %s, %s%s%s%s)", h, w, c, chunk,
             channels_first ? "channels first" : "channels last",
             training ? "training" : "inference", relu ? ", relu" : "", no_scale ? ", no gamma" : "",
             no_center ? ", no beta" : "");
    gh_assert_close(y, d.y, n, 1e-6, 1e-6, what);
    gh_assert_close(mm, mmean, C, 1e-6, 1e-7, what);
    gh_assert_close(mv, mvar, C, 1e-6, 1e-7, what);
    gh_assert_close(dx, d.dx, n, 1e-6, 1e-6, what);
    /* the parameter gradients are sums of m values that cancel: the CPU adds float partial sums of
     * 64 rows (about 1e-6 off here), the kernels sum in double; dbeta against the exact sum */
    if (gamma) gh_assert_close(dg, weight_or_null(l, "gamma", true), C, 1e-6, 1e-5, what);
    if (beta) gh_assert_close(db, weight_or_null(l, "beta", true), C, 1e-6, 1e-5, what);
    for (i64 k = 0; beta && k < C; k++) {
        double exact = 0;
        for (i64 v = 0; v < m; v++) {
            const i64 j = (v / inner * C + k) * inner + v % inner;
            exact += relu && !(y[j] > 0.0f) ? 0.0 : d.dy[j];
        }
        if (fabs(db[k] - exact) > 1e-7 + 1e-7 * fabs(exact)) fail_msg("%s: dbeta[%lld] %.9g, exact %.9g", what, k, db[k], exact);
    }
    free(part), free(mean_f), free(inv_std), free(mm), free(mv), free(y), free(dx), free(dg);
    free(db), free(mg), free(mgx), free(mm0), free(mv0);
    drv_free(&d, true);
}

static void check_bn(bool channels_first, bool training, bool relu, bool no_scale, bool no_center, int64_t batch) {
    check_bn_shape(5, 7, 6, 64, 3, channels_first, training, relu, no_scale, no_center, batch);
}

static void test_batch_norm(void **state) {
    (void)state;
    check_bn(false, true, false, false, false, 4);
    check_bn(false, true, true, false, false, 3);
    check_bn(false, false, false, false, false, 3);
    check_bn(true, true, false, false, false, 3);
    check_bn(true, false, true, false, false, 2);
    check_bn(false, true, false, true, true, 3);
    /* the tiles of the device kernels: one channel (a tile of 256 lanes along the values); 45
     * channels (two tiles of 32, the second partial) over 297 rows in chunks of 40 (not a multiple
     * of the 8 lane groups); 2048 channels (64 tiles) over 18 rows; many chunks (35 of 4 values: the
     * merges' 8 serial groups and their tree); channels first with a chunk that splits rows */
    check_bn_shape(5, 7, 1, 64, 3, false, true, true, false, false, 3);
    check_bn_shape(9, 11, 45, 40, 5, false, true, true, false, false, 3);
    check_bn_shape(9, 11, 45, 40, 5, false, false, false, false, false, 3);
    check_bn_shape(3, 3, 2048, 8, 7, false, true, true, false, false, 2);
    check_bn_shape(5, 7, 6, 4, 3, false, true, false, false, false, 4);
    check_bn_shape(5, 7, 3, 50, 2, true, true, true, false, false, 3);
    bn_offset = 1000.0f; /* mean / std about 600 */
    check_bn_shape(9, 11, 45, 40, 5, false, true, false, false, false, 3);
    bn_offset = 0.5f;
}

/* chunk: rows per tile of the parameter gradients' sums */
static void check_layer_norm(int seq, int C, int batch, i64 chunk, unsigned grid) {
    tnt_layer *l = tnt_layer_normalization(1e-3f, NULL);
    drv d;
    drv_init(&d, l, TNT_SHAPE(seq, C), batch);
    tu_fill(d.x, in_numel(&d), 41);
    for (int64_t i = 0; i < in_numel(&d); i++) d.x[i] = d.x[i] * 2.0f + 1.0f;
    tu_fill(d.dy, out_numel(&d), 42);
    tu_fill(l->weights[0].value, C, 43);
    tu_fill(l->weights[1].value, C, 44);
    layer_fwd(&d, true, 1, 0);
    layer_bwd(&d, 0);
    i64 rows = (i64)batch * seq, cols = C, n = rows * cols, chunks = (rows + chunk - 1) / chunk;
    double eps = 1e-3f, no_count = 0.0;
    double *stats = malloc((size_t)(2 * rows) * sizeof(double)), *part = malloc((size_t)(chunks * 2 * C) * sizeof(double));
    float *y = gh_poisoned(n), *dx = gh_poisoned(n), *dg = gh_poisoned(C), *db = gh_poisoned(C), *none = NULL;
    float *gamma = l->weights[0].value, *beta = l->weights[1].value;
    int no_batch_stats = 0;
    gh_launch("tnt_k_ln_fwd", 5, ARGS(&d.x, &y, &gamma, &beta, &stats, &rows, &cols, &eps));
    gh_launch("tnt_k_ln_param_sums", grid, ARGS(&d.x, &stats, &d.dy, &part, &rows, &cols, &chunk));
    gh_launch("tnt_k_bn_grad_finish", 2, ARGS(&part, &chunks, &cols, &dg, &db, &none, &none, &no_count, &no_batch_stats));
    gh_launch("tnt_k_ln_bwd_dx", 4, ARGS(&d.x, &d.dy, &gamma, &stats, &dx, &rows, &cols));
    char what[96];
    snprintf(what, sizeof what, "LayerNormalization (%d rows of %d, chunk %lld)", (int)rows, C, chunk);
    gh_assert_close(y, d.y, n, 1e-6, 1e-6, what);
    gh_assert_close(dg, l->weights[0].grad, C, 1e-6, 1e-6, what);
    gh_assert_close(db, l->weights[1].grad, C, 1e-6, 1e-6, what);
    gh_assert_close(dx, d.dx, n, 1e-6, 1e-6, what);
    free(stats), free(part), free(y), free(dx), free(dg), free(db);
    drv_free(&d, true);
}

static void test_layer_norm(void **state) {
    (void)state;
    check_layer_norm(7, 129, 3, 64, 3);  /* 5 tiles of columns, one chunk */
    check_layer_norm(7, 129, 3, 4, 7);   /* 6 chunks, the last partial */
    check_layer_norm(30, 3, 11, 32, 2);  /* 3 columns (a tile of 4 lanes), 11 chunks: the merges' groups */
    check_layer_norm(2, 1024, 2, 32, 5); /* wide rows */
}

/* ---- dropout, embedding, padding ------------------------------------------------------------ */

static void test_dropout(void **state) {
    (void)state;
    const float rate = 0.3f;
    tnt_layer *l = tnt_dropout(rate, 0, NULL);
    l->seed = 987654321;
    drv d;
    drv_init(&d, l, TNT_SHAPE(13, 7), 5);
    tu_fill(d.x, in_numel(&d), 51);
    tu_fill(d.dy, out_numel(&d), 52);
    const int64_t offset = 37; /* this rank's first sample in the global batch */
    layer_fwd(&d, true, 0x1234abcdull, offset);
    layer_bwd(&d, offset);
    i64 n = in_numel(&d);
    unsigned long long seed = *(uint64_t *)d.ws, base = (unsigned long long)(offset * 13 * 7);
    float r = rate, scale = 1.0f / (1.0f - rate);
    float *y = gh_poisoned(n), *dx = gh_poisoned(n);
    gh_launch("tnt_k_dropout", 4, ARGS(&d.x, &y, &n, &seed, &base, &r, &scale));
    gh_launch("tnt_k_dropout", 3, ARGS(&d.dy, &dx, &n, &seed, &base, &r, &scale));
    tu_assert_bitwise(y, d.y, n, "dropout mask and scale (forward)");
    tu_assert_bitwise(dx, d.dx, n, "dropout backward");
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) dropped += y[i] == 0.0f;
    assert_true(dropped > n / 5 && dropped < n * 2 / 5); /* about rate */
    free(y), free(dx);
    drv_free(&d, true);
}

static void test_embedding(void **state) {
    (void)state;
    const int V = 50, D = 19, seq = 11;
    tnt_layer *l = tnt_embedding(V, D, false, NULL);
    drv d;
    drv_init(&d, l, TNT_SHAPE(seq), 4);
    i64 n = in_numel(&d), dim = D, vocab = V;
    for (i64 i = 0; i < n; i++) d.x[i] = (float)((i * 7) % 13); /* repeated ids */
    d.x[5] = 49;
    tu_fill(d.dy, out_numel(&d), 61);
    layer_fwd(&d, true, 1, 0);
    layer_bwd(&d, 0);
    float *y = gh_poisoned(n * D), *grad = gh_poisoned((i64)V * D);
    float *table = l->weights[0].value;
    i64 nv = (i64)V * D;
    gh_launch("tnt_k_embedding_fwd", 3, ARGS(&d.x, &table, &y, &n, &dim));
    /* the gradient: positions sorted by id (counts, offsets, order), then per-id sums */
    int *count = malloc(V * sizeof(int)), *offset = malloc(V * sizeof(int)), *order = malloc((size_t)n * sizeof(int));
    memset(order, 0xff, (size_t)n * sizeof(int));
    gh_launch("tnt_k_embedding_count", 3, ARGS(&d.x, &count, &n, &vocab));
    gh_launch("tnt_k_embedding_offsets", 1, ARGS(&count, &offset, &vocab));
    gh_launch("tnt_k_embedding_order", 2, ARGS(&d.x, &offset, &order, &n, &vocab));
    gh_launch("tnt_k_embedding_grad", 5, ARGS(&d.dy, &count, &offset, &order, &grad, &dim, &vocab));
    for (int v = 0, total = 0; v < V; total += count[v], v++) assert_int_equal(offset[v], total);
    for (i64 q = 1; q < n; q++) /* sorted by id, stably */
        assert_true(d.x[order[q - 1]] < d.x[order[q]] || (d.x[order[q - 1]] == d.x[order[q]] && order[q - 1] < order[q]));
    tu_assert_bitwise(y, d.y, n * D, "embedding gather");
    tu_assert_bitwise(grad, l->weights[0].grad, nv, "embedding gradient");
    free(count), free(offset), free(order);
    /* bad ids: the first position of a non-integer, negative or too large id */
    int vin = V;
    long long part[4], *pp = part;
    gh_launch("tnt_k_embedding_bad_ids", 4, ARGS(&d.x, &n, &vin, &pp));
    long long first = n;
    for (int b = 0; b < 4; b++) first = part[b] < first ? part[b] : first;
    assert_int_equal(first, n); /* none */
    const float bad[] = {2.5f, -1.0f, 50.0f, NAN};
    for (int k = 0; k < 4; k++) {
        float keep = d.x[30];
        d.x[30] = bad[k], d.x[41] = bad[k];
        gh_launch("tnt_k_embedding_bad_ids", 4, ARGS(&d.x, &n, &vin, &pp));
        first = n;
        for (int b = 0; b < 4; b++) first = part[b] < first ? part[b] : first;
        assert_int_equal(first, 30);
        d.x[30] = keep, d.x[41] = keep;
    }
    free(y), free(grad);
    drv_free(&d, true);
}

static void test_padding(void **state) {
    (void)state;
    const int h = 5, w = 6, c = 3;
    for (int crop = 0; crop < 2; crop++) {
        tnt_layer *l = crop ? tnt_cropping2d(1, 2, 0, 3, NULL) : tnt_zero_padding2d(1, 2, 3, 0, NULL);
        drv d;
        drv_init(&d, l, TNT_SHAPE(h, w, c), 3);
        tu_fill(d.x, in_numel(&d), 71);
        tu_fill(d.dy, out_numel(&d), 72);
        layer_fwd(&d, true, 1, 0);
        layer_bwd(&d, 0);
        const int oh = (int)l->out_shape.dim[0], ow = (int)l->out_shape.dim[1];
        /* forward: y from x; backward: dx from dy, the box the other way round */
        tnt_k_box f = {.n = 3, .c = c, .in = {1, h, w}, .out = {1, oh, ow}, .off = {0, crop ? -1 : 1, crop ? 0 : 3}};
        tnt_k_box b = {.n = 3, .c = c, .in = {1, oh, ow}, .out = {1, h, w}, .off = {0, -f.off[1], -f.off[2]}};
        float *y = gh_poisoned(out_numel(&d)), *dx = gh_poisoned(in_numel(&d)), zero = 0.0f;
        gh_launch("tnt_k_box_copy", 3, ARGS(&f, &d.x, &y, &zero));
        gh_launch("tnt_k_box_copy", 3, ARGS(&b, &d.dy, &dx, &zero));
        tu_assert_bitwise(y, d.y, out_numel(&d), crop ? "Cropping2D forward" : "ZeroPadding2D forward");
        tu_assert_bitwise(dx, d.dx, in_numel(&d), crop ? "Cropping2D backward" : "ZeroPadding2D backward");
        free(y), free(dx);
        drv_free(&d, true);
    }
}

/* ---- concatenate, slice, transposes --------------------------------------------------------- */

static void test_concat_slice(void **state) {
    (void)state;
    /* Concatenate(axis=1) of a (4, 3, 5) and b (4, 2, 5) into y (4, 5, 5) */
    i64 rows = 4, ca = 15, cb = 10, ct = 25, zero = 0, acc = 0;
    float *a = gh_random(rows * ca, -1, 1, 81), *b = gh_random(rows * cb, -1, 1, 82), *y = gh_poisoned(rows * ct);
    gh_launch("tnt_k_copy_cols", 3, ARGS(&a, &y, &rows, &ca, &ca, &zero, &ct, &zero, &acc));
    gh_launch("tnt_k_copy_cols", 2, ARGS(&b, &y, &rows, &cb, &cb, &zero, &ct, &ca, &acc));
    for (i64 r = 0; r < rows; r++)
        for (i64 j = 0; j < ct; j++) {
            const float want = j < ca ? a[r * ca + j] : b[r * cb + j - ca];
            if (memcmp(&y[r * ct + j], &want, 4)) fail_msg("concat (%lld, %lld)", r, j);
        }
    /* its backward: b's slice of dy added into an existing gradient */
    float *g = gh_random(rows * cb, -1, 1, 83), *g0 = gh_copy(g, rows * cb);
    int accumulate = 1;
    gh_launch("tnt_k_copy_cols", 3, ARGS(&y, &g, &rows, &cb, &ct, &ca, &cb, &zero, &accumulate));
    for (i64 i = 0; i < rows * cb; i++) assert_true(g[i] == g0[i] + b[i]);
    free(a), free(b), free(y), free(g), free(g0);
}

static void test_transpose(void **state) {
    (void)state;
    /* a Keras Conv2D kernel (kh, kw, in, out) to cuDNN's KRSC (out, kh, kw, in) and back */
    const i64 kh = 3, kw = 5, in = 4, out = 7, n = kh * kw * in * out;
    float *hwio = gh_random(n, -1, 1, 91), *krsc = gh_poisoned(n), *back = gh_poisoned(n);
    i64 rows = kh * kw * in, cols = out;
    gh_launch("tnt_k_transpose", 3, ARGS(&hwio, &krsc, &rows, &cols));
    for (i64 o = 0; o < out; o++)
        for (i64 r = 0; r < kh; r++)
            for (i64 s = 0; s < kw; s++)
                for (i64 c = 0; c < in; c++)
                    if (memcmp(&krsc[((o * kh + r) * kw + s) * in + c], &hwio[((r * kw + s) * in + c) * out + o], 4))
                        fail_msg("KRSC[%lld][%lld][%lld][%lld] is not HWIO[%lld][%lld][%lld][%lld]", o, r, s, c, r, s, c, o);
    gh_launch("tnt_k_transpose", 2, ARGS(&krsc, &back, &cols, &rows));
    tu_assert_bitwise(back, hwio, n, "KRSC -> HWIO");
    free(hwio), free(krsc), free(back);
}

static void test_permute(void **state) {
    (void)state;
    const int dims[3] = {3, 1, 2}; /* Keras's 1-based: output axis i is input axis dims[i] */
    const int64_t in[3] = {4, 5, 6};
    tnt_layer *l = tnt_permute(3, dims, NULL);
    drv d;
    drv_init(&d, l, TNT_SHAPE(in[0], in[1], in[2]), 3);
    tu_fill(d.x, in_numel(&d), 101);
    tu_fill(d.dy, out_numel(&d), 102);
    layer_fwd(&d, true, 1, 0);
    layer_bwd(&d, 0);
    /* forward: destination axis i is source axis dims[i] - 1; backward: the inverse */
    const int64_t stride[3] = {in[1] * in[2], in[2], 1};
    tnt_k_perm f = {.n = 3, .numel = in[0] * in[1] * in[2], .ndim = 3}, b = f;
    int64_t out[3], ostride[3];
    for (int i = 0; i < 3; i++) out[i] = in[dims[i] - 1], f.dim[i] = out[i], f.src_stride[i] = stride[dims[i] - 1];
    ostride[2] = 1, ostride[1] = out[2], ostride[0] = out[1] * out[2];
    for (int i = 0; i < 3; i++) b.dim[dims[i] - 1] = out[i], b.src_stride[dims[i] - 1] = ostride[i];
    float *y = gh_poisoned(out_numel(&d)), *dx = gh_poisoned(in_numel(&d));
    gh_launch("tnt_k_permute", 5, ARGS(&f, &d.x, &y));
    gh_launch("tnt_k_permute", 5, ARGS(&b, &d.dy, &dx));
    tu_assert_bitwise(y, d.y, out_numel(&d), "Permute forward");
    tu_assert_bitwise(dx, d.dx, in_numel(&d), "Permute backward");
    free(y), free(dx);
    drv_free(&d, true);
}

/* Maximum and Minimum of three inputs with ties and NaNs, through the merge layer */
static void test_merge_minmax(void **state) {
    (void)state;
    for (int is_max = 0; is_max < 2; is_max++) {
        tnt_layer *l = is_max ? tnt_maximum(NULL) : tnt_minimum(NULL);
        tnt_shape in[3] = {TNT_SHAPE(7, 3), TNT_SHAPE(7, 3), TNT_SHAPE(7, 3)};
        tu_ok(tnt__layer_build(l, 3, in, ""));
        i64 n = 4 * 21;
        float *xs[3], *dxs[3], *y = gh_poisoned(n), *dy = gh_random(n, -1, 1, 111);
        for (int k = 0; k < 3; k++) {
            xs[k] = gh_random(n, -2, 2, 112 + (uint64_t)k), dxs[k] = gh_poisoned(n);
            for (i64 i = 0; i < n; i++) xs[k][i] = floorf(xs[k][i]); /* ties */
        }
        xs[1][5] = NAN, xs[0][9] = NAN;
        tnt__fwd_args fa = {.batch = 4, .x = xs[0], .n_inputs = 3, .xs = (const float *const *)xs, .y = y, .training = true};
        tu_ok(l->ops->forward(l, NULL, &fa));
        tnt__bwd_args ba = {.batch = 4, .x = xs[0], .y = y, .dy = dy, .dx = dxs[0], .n_inputs = 3,
                            .xs = (const float *const *)xs, .dxs = dxs};
        tu_ok(l->ops->backward(l, NULL, &ba));
        /* the kernels: y = x0, then a step per input; backward: arg from a scratch best */
        float *yk = gh_poisoned(n), *best = gh_poisoned(n), *dxk = gh_poisoned(n);
        unsigned char *arg = calloc((size_t)n, 1);
        int mx = is_max, zero = 0;
        gh_launch("tnt_k_copy", 2, ARGS(&xs[0], &yk, &n));
        gh_launch("tnt_k_copy", 2, ARGS(&xs[0], &best, &n));
        for (int k = 1; k < 3; k++) {
            gh_launch("tnt_k_minmax_step", 3, ARGS(&xs[k], &yk, &n, &mx));
            gh_launch("tnt_k_select_step", 3, ARGS(&xs[k], &best, &arg, &n, &k, &mx));
        }
        tu_assert_bitwise(yk, y, n, is_max ? "Maximum forward (NaN propagates)" : "Minimum forward (NaN propagates)");
        for (int k = 0; k < 3; k++) {
            gh_launch("tnt_k_select_grad", 3, ARGS(&dy, &arg, &dxk, &n, &k, &zero));
            tu_assert_bitwise(dxk, dxs[k], n, is_max ? "Maximum backward" : "Minimum backward");
        }
        for (int k = 0; k < 3; k++) free(xs[k]), free(dxs[k]);
        free(y), free(dy), free(yk), free(best), free(dxk), free(arg);
        tnt_layer_free(l);
    }
}

/* MultiHeadAttention's masked softmax (each mask kind, causal) against the CPU's row function, and
 * its backward through dropout against the CPU's formula */
static void test_mha_softmax(void **state) {
    (void)state;
    i64 B = 2, H = 3, Tq = 5, Tv = 7, rows = B * H * Tq, n = rows * Tv;
    float *am = gh_random(B * Tq * Tv, 0, 1, 121), *qm = gh_random(B * Tq, 0, 1, 122), *vm = gh_random(B * Tv, 0, 1, 123);
    for (i64 i = 0; i < B * Tq * Tv; i++) am[i] = am[i] > 0.3f;
    for (i64 i = 0; i < B * Tq; i++) qm[i] = qm[i] > 0.2f;
    for (i64 i = 0; i < B * Tv; i++) vm[i] = vm[i] > 0.3f;
    for (int variant = 0; variant < 5; variant++) {
        /* none, attention, query + value, causal, all */
        float *a = variant == 1 || variant == 4 ? am : NULL, *q = variant == 2 || variant == 4 ? qm : NULL;
        float *v = variant == 2 || variant == 4 ? vm : NULL;
        int causal = variant >= 3;
        float *scores = gh_random(n, -6, 6, 124), *want = gh_copy(scores, n), m[16];
        for (i64 r = 0; r < rows; r++) {
            const i64 t = r % Tq, b = r / Tq / H;
            bool masked = a || q || v || (causal && t < Tv - 1);
            for (i64 j = 0; j < Tv; j++) {
                bool on = !q || q[b * Tq + t] != 0.0f;
                if (a) on = on && a[(b * Tq + t) * Tv + j] != 0.0f;
                if (v) on = on && v[b * Tv + j] != 0.0f;
                if (causal) on = on && j <= t;
                m[j] = on ? 1.0f : 0.0f;
            }
            tnt__mha_softmax_row(want + r * Tv, masked ? m : NULL, Tv);
        }
        gh_launch("tnt_k_mha_softmax", 7, ARGS(&scores, &a, &q, &v, &B, &H, &Tq, &Tv, &causal));
        gh_assert_close(scores, want, n, 1e-6, 1e-7, "MultiHeadAttention masked softmax");
        free(scores), free(want);
    }
    /* backward: dS from dPd, through a dropout with rate 0.25 */
    float *p = gh_random(n, 0, 0.3f, 125), *pd = gh_copy(p, n), *g = gh_random(n, -1, 1, 126), *want = gh_copy(g, n);
    float dscale = 1.0f / 0.75f;
    for (i64 i = 0; i < n; i++) pd[i] = i % 4 == 1 ? 0.0f : p[i] * dscale;
    p[3] = 0.0f, pd[3] = 0.0f;
    for (i64 r = 0; r < rows; r++) {
        float *gr = want + r * Tv, *pr = p + r * Tv, *pdr = pd + r * Tv, dot = 0.0f;
        for (i64 j = 0; j < Tv; j++) gr[j] = pdr[j] != 0.0f || pr[j] == 0.0f ? gr[j] * dscale : 0.0f;
        for (i64 j = 0; j < Tv; j++) dot += pr[j] * gr[j];
        for (i64 j = 0; j < Tv; j++) gr[j] = pr[j] * (gr[j] - dot);
    }
    gh_launch("tnt_k_mha_softmax_bwd", 4, ARGS(&p, &pd, &g, &rows, &Tv, &dscale));
    gh_assert_close(g, want, n, 1e-6, 1e-7, "MultiHeadAttention softmax backward through dropout");
    free(am), free(qm), free(vm), free(p), free(pd), free(g), free(want);
}

/* a Dense kernel's L1L2 penalty and its gradient, as layers/regularizer.c computes them */
static void test_regularizer(void **state) {
    (void)state;
    const float l1 = 0.01f, l2 = 0.02f;
    tnt_layer *l = tnt_dense(13, &(tnt_layer_opts){.no_bias = true});
    tu_ok(tnt_layer_set_regularizer(l, "kernel_regularizer", TNT_REG_L1L2, l1, l2));
    drv d;
    drv_init(&d, l, TNT_SHAPE(29), 2);
    tnt__weight *w = &l->weights[0];
    i64 n = tnt_shape_numel(w->shape);
    w->value[0] = 0.0f; /* sign(0) = 0 */
    tu_fill(w->grad, n, 131);
    float *g = gh_copy(w->grad, n), a = (float)(1.0 * l1), b = (float)(1.0 * 2.0 * l2);
    tnt__layer_add_penalty_grads(l);
    gh_launch("tnt_k_l1l2_grad", 3, ARGS(&w->value, &g, &n, &a, &b));
    tu_assert_bitwise(g, w->grad, n, "L1L2 penalty gradient");
    double part[8], *pp = part, s1 = 0, s2 = 0;
    gh_launch("tnt_k_l1l2_sums_partial", 4, ARGS(&w->value, &pp, &n));
    for (int k = 0; k < 4; k++) s1 += part[2 * k], s2 += part[2 * k + 1];
    const double want = tnt__layer_weight_penalty(l), got = l1 * s1 + l2 * s2;
    if (fabs(got - want) > 1e-12 * want) fail_msg("L1L2 penalty %.17g, the CPU's %.17g", got, want);
    free(g);
    drv_free(&d, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pooling),      cmocka_unit_test(test_global_pooling), cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_layer_norm),   cmocka_unit_test(test_dropout),        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_padding),      cmocka_unit_test(test_concat_slice),   cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_permute),      cmocka_unit_test(test_merge_minmax),   cmocka_unit_test(test_mha_softmax),
        cmocka_unit_test(test_regularizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
