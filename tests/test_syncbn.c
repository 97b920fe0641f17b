/* test_syncbn.c: SyncBatchNormalization under real MPI (ctest runs it with 2 and 3 ranks).
 *
 * Every rank computes plain BatchNormalization on the whole batch in its own process (the
 * reference), and runs SyncBatchNormalization with parallel = true on its contiguous share of the
 * batch (uneven shares: 7 samples are 4 + 3 or 3 + 2 + 2; a 2-sample batch leaves one of 3 ranks
 * empty). Checked within rtol 1e-5: y and dx of the share equal the reference's rows, the moving
 * statistics equal the reference's on every rank (two steps), dgamma and dbeta are the local sums
 * whose sum over ranks is the full-batch gradient, backward without dx gives the same weight
 * gradients; inference and parallel = false are BatchNormalization on the share alone. */
#include "testutil.h"

#include "comm/comm.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GAMMA, BETA, MMEAN, MVAR };

typedef struct bn {
    tnt_layer *l;
    int64_t batch, per_sample, c;
    void *ws;
} bn;

/* Builds l for in and gives it gamma, beta and moving statistics from fixed seeds (the same on
 * every rank and for every layer of the test). */
static void bn_init(bn *b, tnt_layer *l, tnt_shape in, int64_t batch) {
    assert_non_null(l);
    b->l = l;
    b->batch = batch;
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    assert_int_equal(l->n_weights, 4);
    b->c = in.dim[in.ndim - 1];
    b->per_sample = tnt_shape_numel(in);
    for (int i = 0; i < 4; i++) {
        l->weights[i].value = calloc((size_t)b->c, sizeof(float));
        l->weights[i].grad = l->weights[i].trainable ? calloc((size_t)b->c, sizeof(float)) : NULL;
        tu_fill(l->weights[i].value, b->c, 50 + (uint64_t)i);
    }
    for (int64_t k = 0; k < b->c; k++) {
        l->weights[GAMMA].value[k] += 1.5f;                         /* in [0.5, 2.5) */
        l->weights[MVAR].value[k] = 1.0f + 0.5f * l->weights[MVAR].value[k]; /* > 0 */
    }
    b->ws = tnt__alloc(l->ops->workspace_size(l, NULL, batch) + 8);
}

static void bn_free(bn *b) {
    for (int i = 0; i < 4; i++) free(b->l->weights[i].value), free(b->l->weights[i].grad);
    tnt_layer_free(b->l);
    tnt__free(b->ws);
}

static void bn_fwd(bn *b, const float *x, float *y, bool training, bool parallel) {
    tnt__fwd_args a = {.batch = b->batch, .x = x, .n_inputs = 1, .xs = &x, .y = y, .workspace = b->ws,
                       .training = training, .parallel = parallel};
    tu_ok(b->l->ops->forward(b->l, NULL, &a));
}

static void bn_bwd(bn *b, const float *x, const float *y, const float *dy, float *dx, bool parallel) {
    float *dxs[1] = {dx};
    tnt__bwd_args a = {.batch = b->batch, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = b->ws,
                       .n_inputs = 1, .xs = &x, .dxs = dxs, .parallel = parallel};
    tu_ok(b->l->ops->backward(b->l, NULL, &a));
}

static float max_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* rtol 1e-5, atol scaled to the reference */
static void close5(const float *got, const float *ref, int64_t n, const char *what) {
    char label[128];
    snprintf(label, sizeof label, "rank %d of %d: %s", tnt_get_rank(), tnt_get_size(), what);
    tu_assert_close(got, ref, n, 1e-5, 1e-6 * fmax(1.0, max_abs(ref, n)), label);
}

/* This rank's contiguous share [*first, *first + *count) of n samples: the first n % size ranks
 * get one more. */
static void share(int64_t n, int64_t *first, int64_t *count) {
    const int64_t r = tnt_get_rank(), p = tnt_get_size(), base = n / p, rem = n % p;
    *count = base + (r < rem ? 1 : 0);
    *first = r * base + (r < rem ? r : rem);
}

/* One case: batch n of samples of shape in. */
static void run_case(tnt_shape in, int64_t n, float momentum, float epsilon) {
    const int64_t per = tnt_shape_numel(in), C = in.dim[in.ndim - 1];
    int64_t first, cnt;
    share(n, &first, &cnt);
    float *x = malloc((size_t)(n * per) * sizeof(float)), *x2 = malloc((size_t)(n * per) * sizeof(float));
    float *dy = malloc((size_t)(n * per) * sizeof(float));
    float *y_ref = malloc((size_t)(n * per) * sizeof(float)), *dx_ref = malloc((size_t)(n * per) * sizeof(float));
    tu_fill(x, n * per, 1);
    tu_fill(x2, n * per, 2);
    tu_fill(dy, n * per, 3);
    for (int64_t i = 0; i < n * per; i++) x[i] = 2.0f * x[i] + 0.7f, x2[i] = 0.5f * x2[i] - 1.0f;

    /* reference: BatchNormalization on the whole batch, in this process */
    bn ref;
    bn_init(&ref, tnt_batch_normalization(momentum, epsilon, "ref"), in, n);
    bn_fwd(&ref, x, y_ref, true, false);
    bn_bwd(&ref, x, y_ref, dy, dx_ref, false);
    float *mm1 = malloc((size_t)C * sizeof(float)), *mv1 = malloc((size_t)C * sizeof(float));
    memcpy(mm1, ref.l->weights[MMEAN].value, (size_t)C * sizeof(float));
    memcpy(mv1, ref.l->weights[MVAR].value, (size_t)C * sizeof(float));
    float *y2_ref = malloc((size_t)(n * per) * sizeof(float));
    bn_fwd(&ref, x2, y2_ref, true, false); /* second step: the moving statistics move on */

    /* SyncBatchNormalization on this rank's share */
    bn s;
    bn_init(&s, tnt_sync_batch_normalization(momentum, epsilon, "sync"), in, cnt);
    assert_string_equal(tnt_layer_class(s.l), "SyncBatchNormalization");
    const int64_t off = first * per, m = cnt * per;
    float *y = malloc((size_t)(m + 1) * sizeof(float)), *dx = malloc((size_t)(m + 1) * sizeof(float));
    bn_fwd(&s, x + off, y, true, true);
    close5(y, y_ref + off, m, "y");
    close5(s.l->weights[MMEAN].value, mm1, C, "moving_mean after step 1");
    close5(s.l->weights[MVAR].value, mv1, C, "moving_variance after step 1");
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < C; k++) s.l->weights[i].grad[k] = 1e6f; /* overwritten, not added */
    bn_bwd(&s, x + off, y, dy + off, dx, true);
    close5(dx, dx_ref + off, m, "dx");
    /* dgamma, dbeta: local sums; their sum over ranks is the full-batch gradient */
    double *g = calloc((size_t)(2 * C), sizeof(double));
    float *gsum = malloc((size_t)(2 * C) * sizeof(float)), *gref = malloc((size_t)(2 * C) * sizeof(float));
    const double eps = epsilon == 0.0f ? 1e-3 : (double)epsilon;
    for (int64_t k = 0; k < C; k++) {
        /* the local sums, from the full-batch statistics computed here in double */
        double mean = 0, var = 0, lg = 0, lb = 0;
        for (int64_t i = 0; i < n * per / C; i++) mean += x[i * C + k];
        mean /= (double)(n * per / C);
        for (int64_t i = 0; i < n * per / C; i++) var += (x[i * C + k] - mean) * (x[i * C + k] - mean);
        var /= (double)(n * per / C);
        for (int64_t i = 0; i < m / C; i++) {
            const double gi = dy[off + i * C + k];
            lb += gi;
            lg += gi * (x[off + i * C + k] - mean) / sqrt(var + eps);
        }
        float want[2] = {(float)lg, (float)lb}, got[2] = {s.l->weights[GAMMA].grad[k], s.l->weights[BETA].grad[k]};
        close5(got, want, 2, "local dgamma, dbeta");
        g[k] = s.l->weights[GAMMA].grad[k];
        g[C + k] = s.l->weights[BETA].grad[k];
    }
    tu_ok(tnt__allreduce_sum_f64(g, 2 * C));
    for (int64_t k = 0; k < C; k++) {
        gsum[k] = (float)g[k], gsum[C + k] = (float)g[C + k];
        gref[k] = ref.l->weights[GAMMA].grad[k], gref[C + k] = ref.l->weights[BETA].grad[k];
    }
    close5(gsum, gref, 2 * C, "dgamma, dbeta summed over ranks");
    /* without dx: the same local weight gradients (and the same collectives on every rank) */
    float *gl = malloc((size_t)(2 * C) * sizeof(float));
    memcpy(gl, s.l->weights[GAMMA].grad, (size_t)C * sizeof(float));
    memcpy(gl + C, s.l->weights[BETA].grad, (size_t)C * sizeof(float));
    memset(s.l->weights[GAMMA].grad, 0, (size_t)C * sizeof(float));
    memset(s.l->weights[BETA].grad, 0, (size_t)C * sizeof(float));
    bn_bwd(&s, x + off, y, dy + off, NULL, true);
    close5(s.l->weights[GAMMA].grad, gl, C, "dgamma (dx NULL)");
    close5(s.l->weights[BETA].grad, gl + C, C, "dbeta (dx NULL)");

    /* second step */
    bn_fwd(&s, x2 + off, y, true, true);
    close5(y, y2_ref + off, m, "y (step 2)");
    close5(s.l->weights[MMEAN].value, ref.l->weights[MMEAN].value, C, "moving_mean after step 2");
    close5(s.l->weights[MVAR].value, ref.l->weights[MVAR].value, C, "moving_variance after step 2");

    /* inference (parallel or not): the moving statistics, no collective; equal to BatchNormalization */
    float *yi = malloc((size_t)(n * per) * sizeof(float));
    bn_fwd(&ref, x, yi, false, false);
    bn_fwd(&s, x + off, y, false, true);
    close5(y, yi + off, m, "inference y");
    bn_bwd(&s, x + off, y, dy + off, dx, true); /* inference statistics: dx = gamma / std * dy */
    bn_bwd(&ref, x, yi, dy, dx_ref, false);
    close5(dx, dx_ref + off, m, "dx with inference statistics");

    /* parallel = false: BatchNormalization on the share alone */
    if (cnt > 0) {
        bn loc;
        bn_init(&loc, tnt_batch_normalization(momentum, epsilon, "local"), in, cnt);
        memcpy(s.l->weights[MMEAN].value, loc.l->weights[MMEAN].value, (size_t)C * sizeof(float));
        memcpy(s.l->weights[MVAR].value, loc.l->weights[MVAR].value, (size_t)C * sizeof(float));
        float *yl = malloc((size_t)m * sizeof(float)), *dxl = malloc((size_t)m * sizeof(float));
        bn_fwd(&loc, x + off, yl, true, false);
        bn_bwd(&loc, x + off, yl, dy + off, dxl, false);
        bn_fwd(&s, x + off, y, true, false);
        bn_bwd(&s, x + off, y, dy + off, dx, false);
        assert_memory_equal(y, yl, (size_t)m * sizeof(float));
        assert_memory_equal(dx, dxl, (size_t)m * sizeof(float));
        assert_memory_equal(s.l->weights[MVAR].value, loc.l->weights[MVAR].value, (size_t)C * sizeof(float));
        assert_memory_equal(s.l->weights[GAMMA].grad, loc.l->weights[GAMMA].grad, (size_t)C * sizeof(float));
        free(yl), free(dxl);
        bn_free(&loc);
    }
    tu_ok(tnt__barrier());

    free(g), free(gsum), free(gref), free(gl), free(yi);
    free(y), free(dx), free(mm1), free(mv1), free(y2_ref);
    bn_free(&s);
    bn_free(&ref);
    free(x), free(x2), free(dy), free(y_ref), free(dx_ref);
}

static void test_nhwc_uneven(void **state) {
    (void)state;
    run_case(TNT_SHAPE(2, 3, 4), 7, 0.0f, 0.0f); /* Keras defaults */
}

static void test_features_uneven(void **state) {
    (void)state;
    run_case(TNT_SHAPE(5), 7, 0.9f, 1e-2f);
}

/* 2 samples: with 3 ranks one share is empty, and that rank still takes part */
static void test_tiny_batch(void **state) {
    (void)state;
    run_case(TNT_SHAPE(3), 2, 0.5f, 1e-3f);
}

static void test_constructor(void **state) {
    (void)state;
    assert_null(tnt_sync_batch_normalization(1.0f, 0.0f, NULL));
    tu_error_contains("SyncBatchNormalization: momentum 1");
    assert_null(tnt_sync_batch_normalization(0.9f, -1.0f, NULL));
    tu_error_contains("SyncBatchNormalization: epsilon -1");
    tnt_layer *l = tnt_sync_batch_normalization(0, 0, NULL);
    assert_string_equal(tnt_layer_class(l), "SyncBatchNormalization");
    char b[64];
    tnt__layer_base_name(tnt_layer_class(l), b, sizeof b);
    assert_string_equal(b, "sync_batch_normalization");
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 0), &out), TNT_ERR_SHAPE);
    tu_error_contains("SyncBatchNormalization");
    tu_error_contains("(3, 0)");
    tu_ok(l->ops->build(l, TNT_SHAPE(4, 6), &out));
    const char *names[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(l->weights[i].name, names[i]);
        assert_true(l->weights[i].trainable == (i < 2));
        assert_int_equal(tnt_shape_numel(l->weights[i].shape), 6);
    }
    tnt_layer_free(l);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nhwc_uneven),
        cmocka_unit_test(test_features_uneven),
        cmocka_unit_test(test_tiny_batch),
        cmocka_unit_test(test_constructor),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
