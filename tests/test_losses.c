/* test_losses.c: each loss against PyTorch (fixtures/gen_train.py): per-sample values, their sum
 * and the gradient scaled by inv_batch, from logits (including logits of +-1e4) and from
 * probabilities (including exact 0 and 1, clipped as Keras does); hand-checked values; label
 * validation; loss names. */
#include "testutil.h"

#include "core/core.h"
#include "objectives/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    tnt_loss_kind kind;
    bool from_logits;
} CASES[] = {
    {"scce_logits", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true},
    {"scce_probs", TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false},
    {"cce_logits", TNT_CATEGORICAL_CROSSENTROPY, true},
    {"cce_probs", TNT_CATEGORICAL_CROSSENTROPY, false},
    {"bce_logits", TNT_BINARY_CROSSENTROPY, true},
    {"bce_probs", TNT_BINARY_CROSSENTROPY, false},
    {"mse", TNT_MEAN_SQUARED_ERROR, false},
    {"mae", TNT_MEAN_ABSOLUTE_ERROR, false},
};

static void test_against_torch(void **state) {
    (void)state;
    const double inv_batch = 0.125; /* as if these n samples were part of a global batch of 8 */
    for (size_t ci = 0; ci < TNT_ARRAY_LEN(CASES); ci++) {
        char name[96], what[160];
        tnt_shape sp;
        snprintf(name, sizeof name, "loss_%s_pred", CASES[ci].name);
        float *pred = tu_load(name, &sp);
        snprintf(name, sizeof name, "loss_%s_y", CASES[ci].name);
        float *y = tu_load(name, NULL);
        snprintf(name, sizeof name, "loss_%s_loss", CASES[ci].name);
        float *want_loss = tu_load(name, NULL);
        snprintf(name, sizeof name, "loss_%s_grad", CASES[ci].name);
        float *want_grad = tu_load(name, NULL);
        const int64_t n = sp.dim[0], c = sp.dim[1];
        const bool sparse = CASES[ci].kind == TNT_SPARSE_CATEGORICAL_CROSSENTROPY;

        /* the whole batch */
        float *d = malloc((size_t)(n * c) * sizeof *d);
        double sum = -1, want_sum = 0;
        tu_ok(tnt__loss_compute(CASES[ci].kind, CASES[ci].from_logits, n, c, pred, y, inv_batch, d, &sum));
        for (int64_t i = 0; i < n; i++) want_sum += want_loss[i];
        if (!(fabs(sum - want_sum) <= 1e-6 * fabs(want_sum) + 1e-7))
            fail_msg("%s: loss sum %.9g, expected %.9g", CASES[ci].name, sum, want_sum);
        for (int64_t i = 0; i < n * c; i++) {
            want_grad[i] = (float)(want_grad[i] * inv_batch);
            if (!isfinite(d[i])) fail_msg("%s: gradient[%lld] = %g is not finite", CASES[ci].name, (long long)i, d[i]);
        }
        snprintf(what, sizeof what, "%s gradient", CASES[ci].name);
        tu_assert_close(d, want_grad, n * c, 1e-5, 1e-8, what);

        /* sample by sample, and without a gradient */
        for (int64_t i = 0; i < n; i++) {
            double l;
            tu_ok(tnt__loss_compute(CASES[ci].kind, CASES[ci].from_logits, 1, c, pred + i * c,
                                    y + (sparse ? i : i * c), 1.0, NULL, &l));
            if (!isfinite(l) || !(fabs(l - want_loss[i]) <= 1e-5 * fabs(want_loss[i]) + 1e-7))
                fail_msg("%s: loss of sample %lld = %.9g, expected %.9g", CASES[ci].name, (long long)i, l,
                         (double)want_loss[i]);
        }
        free(d);
        free(pred), free(y), free(want_loss), free(want_grad);
    }
}

static double loss1(tnt_loss_kind kind, bool logits, int64_t n, int64_t c, const float *p, const float *y, float *d,
                    double inv_batch) {
    double l = NAN;
    tu_ok(tnt__loss_compute(kind, logits, n, c, p, y, inv_batch, d, &l));
    return l;
}

static void test_hand_checked(void **state) {
    (void)state;
    float d[8];
    /* uniform logits over 4 classes: log 4; gradient (1/4 - onehot) / batch */
    float z[4] = {0, 0, 0, 0}, lab = 2;
    assert_float_equal(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 1, 4, z, &lab, d, 0.5), log(4.0), 1e-12);
    assert_float_equal(d[0], 0.125f, 1e-7);
    assert_float_equal(d[2], -0.375f, 1e-7);
    /* shift invariance at large magnitude: logits 1e4 + [0, 0, 0, 0] */
    float zb[4] = {1e4f, 1e4f, 1e4f, 1e4f};
    assert_float_equal(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 1, 4, zb, &lab, d, 1.0), log(4.0), 1e-12);
    /* a confident wrong answer costs the logit gap: [1e4, 0], label 1 -> 1e4 */
    float zw[2] = {1e4f, 0}, l1 = 1;
    assert_float_equal(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 1, 2, zw, &l1, d, 1.0), 1e4, 1e-9);
    assert_float_equal(d[0], 1.0f, 0);
    assert_float_equal(d[1], -1.0f, 0);

    /* categorical CE renormalizes probabilities: [2, 2] with label [1, 0] -> log 2 */
    float p2[2] = {2, 2}, y2[2] = {1, 0};
    assert_float_equal(loss1(TNT_CATEGORICAL_CROSSENTROPY, false, 1, 2, p2, y2, d, 1.0), log(2.0), 1e-7);
    /* d/dp of -log(p0 / (p0 + p1)) at (2, 2): -1/p0 + 1/(p0+p1) = -0.25, and 0.25 */
    assert_float_equal(d[0], -0.25f, 1e-6);
    assert_float_equal(d[1], 0.25f, 1e-6);
    /* sparse CE does not renormalize: [2, 2] label 0 -> log(clip sum) - log(clip p0) with p clipped
     * to 1 - 1e-7: log 2 */
    float l0 = 0;
    assert_float_equal(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, 1, 2, p2, &l0, d, 1.0), log(2.0), 1e-7);
    assert_float_equal(d[0], 0.0f, 0); /* both clipped: no gradient */
    /* exact one-hot prediction: clipped to [hi, lo, lo] (float32 1e-7 and 1 - 1e-7), loss
     * log(hi + 2 lo) - log(r_label): ~2e-7 when right, ~16.1 when wrong; no gradient */
    const double lo = (double)1e-7f, hi = (double)(1.0f - 1e-7f);
    float oh[3] = {1, 0, 0}, lr = 0, lw = 1;
    assert_true(fabs(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, 1, 3, oh, &lr, d, 1.0) -
                     (log(hi + 2 * lo) - log(hi))) < 1e-15);
    assert_true(fabs(loss1(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, 1, 3, oh, &lw, d, 1.0) -
                     (log(hi + 2 * lo) - log(lo))) < 1e-12);
    for (int j = 0; j < 3; j++) assert_float_equal(d[j], 0.0f, 0);

    /* binary CE on p = 0.5 averages over outputs: -log(0.5 + 1e-7) */
    float ph[2] = {0.5f, 0.5f}, yb[2] = {1, 0};
    assert_float_equal(loss1(TNT_BINARY_CROSSENTROPY, false, 1, 2, ph, yb, d, 1.0), -log(0.5 + 1e-7), 1e-12);
    /* from logits at 0: log 2 per output, gradient (0.5 - y) / c */
    float x0[2] = {0, 0};
    assert_float_equal(loss1(TNT_BINARY_CROSSENTROPY, true, 1, 2, x0, yb, d, 1.0), log(2.0), 1e-12);
    assert_float_equal(d[0], -0.25f, 1e-7);
    assert_float_equal(d[1], 0.25f, 1e-7);
    /* extreme logits: exact and finite */
    float xe[2] = {1e4f, -1e4f}, ye[2] = {0, 0};
    assert_float_equal(loss1(TNT_BINARY_CROSSENTROPY, true, 1, 2, xe, ye, d, 1.0), 5e3, 1e-9);
    assert_float_equal(d[0], 0.5f, 0);
    assert_float_equal(d[1], 0.0f, 0);

    /* MSE and MAE: two samples, the mean over the last axis, summed over samples */
    float pm[4] = {1, 2, 0, -1}, ym[4] = {0, 0, 0, 1};
    assert_float_equal(loss1(TNT_MEAN_SQUARED_ERROR, false, 2, 2, pm, ym, d, 0.5), (1 + 4) / 2.0 + 4 / 2.0, 1e-12);
    assert_float_equal(d[0], 2 * 1 / 2.0f * 0.5f, 0);
    assert_float_equal(d[3], 2 * -2 / 2.0f * 0.5f, 0);
    assert_float_equal(loss1(TNT_MEAN_ABSOLUTE_ERROR, false, 2, 2, pm, ym, d, 1.0), 1.5 + 1.0, 1e-12);
    assert_float_equal(d[0], 0.5f, 0);
    assert_float_equal(d[2], 0.0f, 0); /* error exactly 0: no gradient, as tf.abs */
    assert_float_equal(d[3], -0.5f, 0);

    /* n = 0: sum 0 */
    assert_float_equal(loss1(TNT_MEAN_SQUARED_ERROR, false, 0, 3, NULL, NULL, NULL, 1.0), 0.0, 0);
}

static void test_bad_labels(void **state) {
    (void)state;
    float p[3 * 5] = {0}, d[15];
    double l;
    float y[3] = {1, 4, 5};
    assert_int_equal(tnt__loss_compute(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 3, 5, p, y, 1.0, d, &l), TNT_ERR_ARG);
    tu_error_contains("label 5 of sample 2 is out of range");
    tu_error_contains("[0, 5)");
    y[2] = -1;
    assert_int_equal(tnt__loss_compute(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, 3, 5, p, y, 1.0, d, &l), TNT_ERR_ARG);
    tu_error_contains("label -1 of sample 2");
    y[2] = 1.5f;
    assert_int_equal(tnt__loss_compute(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 3, 5, p, y, 1.0, NULL, &l), TNT_ERR_ARG);
    tu_error_contains("label 1.5 of sample 2 is not an integer");
    y[0] = NAN;
    assert_int_equal(tnt__loss_compute(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, 3, 5, p, y, 1.0, NULL, &l), TNT_ERR_ARG);
    tu_error_contains("sample 0 is not a number");

    /* other bad arguments */
    assert_int_equal(tnt__loss_compute(TNT_LOSS_NONE, true, 3, 5, p, y, 1.0, NULL, &l), TNT_ERR_ARG);
    assert_int_equal(tnt__loss_compute(TNT_MEAN_SQUARED_ERROR, false, 3, 0, p, p, 1.0, NULL, &l), TNT_ERR_SHAPE);
    tu_error_contains("mean_squared_error");
    assert_int_equal(tnt__loss_compute(TNT_MEAN_SQUARED_ERROR, false, 3, 5, NULL, p, 1.0, NULL, &l), TNT_ERR_ARG);
    assert_int_equal(tnt__loss_compute(TNT_MEAN_SQUARED_ERROR, false, 3, 5, p, p, 1.0, NULL, NULL), TNT_ERR_ARG);
}

/* label_smoothing and ignore_class against torch's cross_entropy(label_smoothing, ignore_index). */
static void test_smoothing_and_ignore_class(void **state) {
    (void)state;
    tnt_shape sh;
    float *logits = tu_load("lossopt_logits", &sh), *labels = tu_load("lossopt_labels", &sh);
    const int64_t rows = 12, c = 5;
    const struct { const char *name; tnt__loss_opts o; } cases[] = {
        {"smooth", {0.1f, false, 0, 0}}, {"ignore", {0, true, 0, 0}}, {"both", {0.2f, true, 0, 0}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char f[64];
        snprintf(f, sizeof f, "lossopt_%s_loss", cases[k].name);
        float *want = tu_load(f, &sh);
        snprintf(f, sizeof f, "lossopt_%s_grad", cases[k].name);
        float *want_grad = tu_load(f, &sh);
        float grad[12 * 5];
        double sum;
        int64_t valid;
        tu_ok(tnt__loss_compute_opts(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, true, &cases[k].o, rows, c, logits, labels, 1.0,
                                     grad, &sum, &valid));
        int64_t expect_valid = cases[k].o.has_ignore_class ? 8 : 12;
        assert_int_equal(valid, expect_valid);
        float mean = (float)(sum / (double)valid);
        tu_assert_close(&mean, want, 1, 1e-5, 1e-7, cases[k].name);
        for (int i = 0; i < 60; i++) grad[i] /= (float)valid; /* the model scales by the global count */
        tu_assert_close(grad, want_grad, 60, 1e-4, 1e-7, cases[k].name);
        free(want), free(want_grad);
    }
    /* categorical from probabilities with smoothing */
    float *probs = tu_load("lossopt_cce_probs", &sh), *onehot = tu_load("lossopt_cce_onehot", &sh);
    float *want = tu_load("lossopt_cce_loss", &sh), *want_grad = tu_load("lossopt_cce_grad", &sh);
    float grad[20];
    double sum;
    tnt__loss_opts smooth = {0.2f, false, 0, 0};
    tu_ok(tnt__loss_compute_opts(TNT_CATEGORICAL_CROSSENTROPY, false, &smooth, 4, 5, probs, onehot, 0.25, grad, &sum, NULL));
    float mean = (float)(sum / 4);
    tu_assert_close(&mean, want, 1, 1e-5, 1e-7, "cce smoothing");
    tu_assert_close(grad, want_grad, 20, 1e-4, 1e-7, "cce smoothing grad");
    /* smoothing of sparse labels needs logits; MSE has none */
    assert_int_equal(tnt__loss_compute_opts(TNT_SPARSE_CATEGORICAL_CROSSENTROPY, false, &smooth, 4, 5, probs, labels, 1.0,
                                            NULL, &sum, NULL), TNT_ERR_UNSUPPORTED);
    assert_int_equal(tnt__loss_compute_opts(TNT_MEAN_SQUARED_ERROR, false, &smooth, 4, 5, probs, onehot, 1.0, NULL, &sum,
                                            NULL), TNT_ERR_ARG);
    tu_error_contains("label_smoothing");
    free(probs), free(onehot), free(want), free(want_grad), free(logits), free(labels);
}

static void test_names(void **state) {
    (void)state;
    assert_int_equal(tnt_loss_from_name("sparse_categorical_crossentropy"), TNT_SPARSE_CATEGORICAL_CROSSENTROPY);
    assert_int_equal(tnt_loss_from_name("SparseCategoricalCrossentropy"), TNT_SPARSE_CATEGORICAL_CROSSENTROPY);
    assert_int_equal(tnt_loss_from_name("categorical_crossentropy"), TNT_CATEGORICAL_CROSSENTROPY);
    assert_int_equal(tnt_loss_from_name("binary_crossentropy"), TNT_BINARY_CROSSENTROPY);
    assert_int_equal(tnt_loss_from_name("mse"), TNT_MEAN_SQUARED_ERROR);
    assert_int_equal(tnt_loss_from_name("MSE"), TNT_MEAN_SQUARED_ERROR);
    assert_int_equal(tnt_loss_from_name("mean_squared_error"), TNT_MEAN_SQUARED_ERROR);
    assert_int_equal(tnt_loss_from_name("mae"), TNT_MEAN_ABSOLUTE_ERROR);
    assert_int_equal(tnt_loss_from_name("mean_absolute_error"), TNT_MEAN_ABSOLUTE_ERROR);
    assert_int_equal(tnt_loss_from_name("hinge"), TNT_HINGE);
    assert_int_equal(tnt_loss_from_name("KLDivergence"), TNT_KL_DIVERGENCE);
    assert_int_equal(tnt_loss_from_name("kld"), TNT_KL_DIVERGENCE);
    assert_int_equal(tnt_loss_from_name("huber_loss"), TNT_HUBER);
    assert_int_equal(tnt_loss_from_name("logcosh"), TNT_LOG_COSH);
    assert_int_equal(tnt_loss_from_name("mape"), TNT_MEAN_ABSOLUTE_PERCENTAGE_ERROR);
    assert_int_equal(tnt_loss_from_name("focal"), -1);
    tu_error_contains("unknown loss \"focal\"");
    assert_int_equal(tnt_loss_from_name(NULL), -1);
    assert_int_equal(tnt_loss_from_name(""), -1);
    for (int k = TNT_SPARSE_CATEGORICAL_CROSSENTROPY; k < TNT_LOSS_KIND_COUNT; k++)
        assert_int_equal(tnt_loss_from_name(tnt_loss_name((tnt_loss_kind)k)), k);
    assert_string_equal(tnt_loss_name(TNT_MEAN_SQUARED_ERROR), "mean_squared_error");
    assert_string_equal(tnt_loss_name((tnt_loss_kind)42), "unknown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_torch),
        cmocka_unit_test(test_hand_checked),
        cmocka_unit_test(test_bad_labels),
        cmocka_unit_test(test_smoothing_and_ignore_class),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
