/* test_layers_bn.c: BatchNormalization driven through the layer contract against PyTorch
 * references (tests/fixtures/gen_layers_bn.py): training forward, moving statistics after one and
 * two steps (unbiased variance, Keras momentum = 1 - PyTorch momentum), dx/dgamma/dbeta, the
 * dx == NULL path, inference with given moving statistics, a rank-1 (features) case, finite
 * differences, constructor errors; and a small Conv2D + BatchNormalization model that trains. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "model/model.h"

enum { GAMMA, BETA, MMEAN, MVAR };

/* ---- a layer driven without a model ------------------------------------------------------- */

typedef struct drv {
    tnt_layer *l;
    int64_t batch, n, c; /* n = batch * numel(in), c = channels */
    void *ws;
    float *x, *y, *dy, *dx;
} drv;

static void drv_init(drv *d, tnt_layer *l, tnt_shape in, int64_t batch) {
    memset(d, 0, sizeof *d);
    assert_non_null(l);
    d->l = l;
    d->batch = batch;
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    d->c = in.dim[in.ndim - 1];
    for (int i = 0; i < l->n_weights; i++) {
        assert_int_equal(tnt_shape_numel(l->weights[i].shape), d->c);
        l->weights[i].value = calloc((size_t)d->c, sizeof(float));
        /* as the model does: state has no gradient */
        l->weights[i].grad = l->weights[i].trainable ? calloc((size_t)d->c, sizeof(float)) : NULL;
        tnt__weight_init(&l->weights[i], 7 + (uint64_t)i);
    }
    assert_null(l->ops->plan_create);
    d->ws = tnt__alloc(l->ops->workspace_size(l, NULL, batch));
    d->n = batch * tnt_shape_numel(in);
    d->x = calloc((size_t)d->n, sizeof(float));
    d->y = calloc((size_t)d->n, sizeof(float));
    d->dy = calloc((size_t)d->n, sizeof(float));
    d->dx = calloc((size_t)d->n, sizeof(float));
}

static void drv_free(drv *d) {
    for (int i = 0; i < d->l->n_weights; i++) free(d->l->weights[i].value), free(d->l->weights[i].grad);
    tnt_layer_free(d->l);
    tnt__free(d->ws);
    free(d->x), free(d->y), free(d->dy), free(d->dx);
}

static void drv_forward(drv *d, bool training) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .workspace = d->ws, .training = training};
    tu_ok(d->l->ops->forward(d->l, NULL, &a));
}

static void drv_backward(drv *d, bool want_dx) {
    tnt__bwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .dy = d->dy,
                       .dx = want_dx ? d->dx : NULL, .workspace = d->ws};
    tu_ok(d->l->ops->backward(d->l, NULL, &a));
}

/* ---- fixtures ----------------------------------------------------------------------------- */

static float max_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static void check(const float *got, const char *name, const char *key, int64_t n) {
    char f[128];
    snprintf(f, sizeof f, "bn_%s_%s", name, key);
    tnt_shape s;
    float *ref = tu_load(f, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    tu_assert_close(got, ref, n, 1e-4, 1e-5 * fmax(1.0, max_abs(ref, n)), f);
    free(ref);
}

static void load_into(float *dst, const char *name, const char *key, int64_t n) {
    char f[128];
    snprintf(f, sizeof f, "bn_%s_%s", name, key);
    tnt_shape s;
    float *src = tu_load(f, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    memcpy(dst, src, (size_t)n * sizeof(float));
    free(src);
}

/* One fixture case with Keras momentum/epsilon (0 = defaults). */
static void run_case(const char *name, float momentum, float epsilon) {
    char f[128];
    snprintf(f, sizeof f, "bn_%s_x", name);
    tnt_shape xs;
    free(tu_load(f, &xs));
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, tnt_batch_normalization(momentum, epsilon, NULL), in, xs.dim[0]);
    tnt_layer *l = d.l;
    const int64_t c = d.c;
    const char *keys[4] = {"gamma", "beta", "mm0", "mv0"};
    for (int i = 0; i < 4; i++) load_into(l->weights[i].value, name, keys[i], c);
    load_into(d.x, name, "x", d.n);
    load_into(d.dy, name, "dy", d.n);

    /* inference: the moving statistics normalize, nothing is updated */
    drv_forward(&d, false);
    check(d.y, name, "yinf", d.n);
    check(l->weights[MMEAN].value, name, "mm0", c);
    check(l->weights[MVAR].value, name, "mv0", c);

    /* training step 1 */
    drv_forward(&d, true);
    check(d.y, name, "y", d.n);
    check(l->weights[MMEAN].value, name, "mm1", c);
    check(l->weights[MVAR].value, name, "mv1", c);
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < c; k++) l->weights[i].grad[k] = 1e6f; /* overwritten, not added */
    drv_backward(&d, true);
    check(d.dx, name, "dx", d.n);
    check(l->weights[GAMMA].grad, name, "dgamma", c);
    check(l->weights[BETA].grad, name, "dbeta", c);
    /* without dx: the same weight gradients */
    memset(l->weights[GAMMA].grad, 0, (size_t)c * sizeof(float));
    memset(l->weights[BETA].grad, 0, (size_t)c * sizeof(float));
    drv_backward(&d, false);
    check(l->weights[GAMMA].grad, name, "dgamma", c);
    check(l->weights[BETA].grad, name, "dbeta", c);

    /* training step 2 on another batch: the moving statistics move on */
    load_into(d.x, name, "x2", d.n);
    drv_forward(&d, true);
    check(l->weights[MMEAN].value, name, "mm2", c);
    check(l->weights[MVAR].value, name, "mv2", c);
    drv_free(&d);
}

static void test_nhwc_vs_torch(void **state) {
    (void)state;
    run_case("nhwc", 0.0f, 0.0f); /* Keras defaults: momentum 0.99, epsilon 1e-3 */
}

static void test_features_vs_torch(void **state) {
    (void)state;
    run_case("features", 0.9f, 1e-2f);
}

/* Keras center=False / scale=False: the weights that remain, in Keras order, and the training
 * step against PyTorch's batch_norm without weight or bias. */
static void affine_case(const char *name, bool scale, bool center) {
    char f[128];
    snprintf(f, sizeof f, "bn_%s_x", name);
    tnt_shape xs;
    free(tu_load(f, &xs));
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, tnt_batch_normalization_with(&(tnt_batch_norm_opts){.no_scale = !scale, .no_center = !center}),
             in, xs.dim[0]);
    tnt_layer *l = d.l;
    assert_int_equal(l->n_weights, 2 + scale + center);
    const char *names[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    int w = 0;
    for (int i = 0; i < 4; i++)
        if ((i != GAMMA || scale) && (i != BETA || center)) assert_string_equal(l->weights[w++].name, names[i]);
    if (scale) load_into(l->weights[0].value, name, "gamma", d.c);
    if (center) load_into(l->weights[scale].value, name, "beta", d.c);
    load_into(d.x, name, "x", d.n);
    load_into(d.dy, name, "dy", d.n);
    drv_forward(&d, true);
    check(d.y, name, "y", d.n);
    drv_backward(&d, true);
    check(d.dx, name, "dx", d.n);
    if (scale) check(l->weights[0].grad, name, "dgamma", d.c);
    if (center) check(l->weights[scale].grad, name, "dbeta", d.c);
    drv_free(&d);
}

static void test_center_scale_false(void **state) {
    (void)state;
    affine_case("noaffine", false, false);
    affine_case("nocenter", true, false);
    affine_case("noscale", false, true);
}

/* ---- finite differences ------------------------------------------------------------------- */

/* L = sum(y * dy) of the training forward (batch statistics depend on x) */
static double loss(drv *d) {
    drv_forward(d, true);
    double s = 0;
    for (int64_t i = 0; i < d->n; i++) s += (double)d->y[i] * d->dy[i];
    return s;
}

static void test_finite_differences(void **state) {
    (void)state;
    drv d;
    drv_init(&d, tnt_batch_normalization(0.5f, 0.1f, "bn_fd"), TNT_SHAPE(2, 2, 3), 3);
    tnt_layer *l = d.l;
    tu_fill(d.x, d.n, 1);
    tu_fill(d.dy, d.n, 2);
    tu_fill(l->weights[GAMMA].value, 3, 3);
    tu_fill(l->weights[BETA].value, 3, 4);
    for (int64_t i = 0; i < d.n; i++) d.x[i] *= 2.0f;
    loss(&d);
    drv_backward(&d, true);
    const float h = 1e-2f;
    float *targets[3] = {d.x, l->weights[GAMMA].value, l->weights[BETA].value};
    const float *grads[3] = {d.dx, l->weights[GAMMA].grad, l->weights[BETA].grad};
    int64_t sizes[3] = {d.n, 3, 3};
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < sizes[t]; i++) {
            float v = targets[t][i];
            targets[t][i] = v + h;
            double lp = loss(&d);
            targets[t][i] = v - h;
            double lm = loss(&d);
            targets[t][i] = v;
            double fd = (lp - lm) / (2.0 * h);
            if (fabs(fd - grads[t][i]) > 2e-3 + 2e-2 * fabs(fd))
                fail_msg("target %d index %lld: analytic %g, finite difference %g", t, (long long)i,
                         (double)grads[t][i], fd);
        }
    drv_free(&d);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_batch_normalization(1.0f, 0.0f, NULL));
    tu_error_contains("momentum 1");
    tu_error_contains("[0, 1)");
    assert_null(tnt_batch_normalization(-0.5f, 0.0f, NULL));
    tu_error_contains("momentum -0.5");
    assert_null(tnt_batch_normalization(NAN, 0.0f, NULL));
    tu_error_contains("momentum nan");
    assert_null(tnt_batch_normalization(0.9f, -1e-3f, NULL));
    tu_error_contains("epsilon -0.001");
    tu_error_contains("expected > 0");
    tnt_layer *l = tnt_batch_normalization(0, 0, NULL);
    assert_string_equal(tnt_layer_class(l), "BatchNormalization");
    tnt_shape out;
    l->in_shape = TNT_SHAPE(3, 0);
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 0), &out), TNT_ERR_SHAPE);
    tu_error_contains("(3, 0)");
    tnt_layer_free(l);
}

/* ---- in a model --------------------------------------------------------------------------- */

static tnt_dataset *image_data(int64_t n, int64_t batch, uint64_t seed) {
    float *x = malloc((size_t)n * 48 * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    tu_fill(x, n * 48, seed);
    for (int64_t i = 0; i < n; i++) {
        float s[3] = {0};
        for (int j = 0; j < 48; j++) s[j % 3] += x[i * 48 + j] * (j < 24 ? 1.0f : -0.5f);
        y[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
        for (int j = 0; j < 48; j++) x[i * 48 + j] = 3.0f * x[i * 48 + j] + 2.0f; /* off-centre */
    }
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(4, 4, 3), y, TNT_SHAPE(), n, true);
    free(x), free(y);
    return tnt_dataset_batch(ds, batch, false);
}

static void test_model_trains(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("bn_model");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4, 4, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(4, 3, 3, NULL)));
    tu_ok(tnt_model_add(m, tnt_batch_normalization(0.9f, 0.0f, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){
        .optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f}),
        .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3}));
    const int64_t conv = 3 * 3 * 3 * 4 + 4, bn = 4 * 4, dense = 2 * 2 * 4 * 3 + 3;
    const int64_t total = conv + bn + dense;
    assert_int_equal(tnt_model_count_params(m), total);
    assert_int_equal(m->n_params, total - 8); /* the moving statistics are state */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "batch_normalization (BatchNormalization)"));
    assert_non_null(strstr(buf, "Trainable params: 171"));
    assert_non_null(strstr(buf, "Non-trainable params: 8"));
    free(buf);
    const char *name;
    tu_ok(tnt_model_weight(m, 4, &name, NULL, NULL));
    assert_string_equal(name, "batch_normalization/moving_mean:0");
    tu_ok(tnt_model_weight(m, 5, &name, NULL, NULL));
    assert_string_equal(name, "batch_normalization/moving_variance:0");

    tnt_dataset *ds = image_data(128, 16, 11);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 5}, &h));
    assert_true(tnt_history_get(h, "loss", 4) < tnt_history_get(h, "loss", 0));
    tnt_history_free(h);

    float *w = malloc((size_t)total * sizeof(float)), *w2 = malloc((size_t)total * sizeof(float));
    tu_ok(tnt_get_weights(m, w, total));
    const float *mm = w + conv + 8, *mv = w + conv + 12;
    for (int k = 0; k < 4; k++) {
        /* the input is off-centre, so the moving mean left 0; momentum 0.9 over 40 steps */
        assert_true(fabsf(mm[k]) > 1e-3f);
        assert_true(fabsf(mv[k] - 1.0f) > 1e-3f);
        assert_true(mv[k] > 0.0f);
    }
    /* evaluation (inference) leaves the state alone */
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    tu_ok(tnt_get_weights(m, w2, total));
    assert_memory_equal(w, w2, (size_t)total * sizeof(float));
    free(w), free(w2);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nhwc_vs_torch),
        cmocka_unit_test(test_features_vs_torch),
        cmocka_unit_test(test_center_scale_false),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_model_trains),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
