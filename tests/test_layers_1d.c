/* test_layers_1d.c: Conv1D, MaxPooling1D and GlobalAveragePooling1D driven directly through the
 * layer contract (build, plan, workspace, forward, backward) without a model: outputs and
 * gradients against PyTorch references (tests/fixtures/gen_layers_1d.py), finite differences,
 * the dx == NULL path, two batch-size plans side by side, defaults, and argument/shape errors.
 * The small driver below is the one of test_layers_nn.c. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

/* ---- a layer driven without a model ------------------------------------------------------- */

typedef struct drv {
    tnt_layer *l;
    int64_t batch;
    void *plan;
    void *ws;
    float *x, *y, *pre, *dy, *dx; /* (batch, in...) / (batch, out...) */
} drv;

static int64_t in_numel(const drv *d) { return d->batch * tnt_shape_numel(d->l->in_shape); }
static int64_t out_numel(const drv *d) { return d->batch * tnt_shape_numel(d->l->out_shape); }

/* Builds l for in (without batch), gives each weight a value and grad array, makes a plan and
 * workspace for batch, and zeroed activation buffers. */
static void drv_init(drv *d, tnt_layer *l, tnt_shape in, int64_t batch) {
    memset(d, 0, sizeof *d);
    assert_non_null(l);
    d->l = l;
    d->batch = batch;
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)n, sizeof(float));
        l->weights[i].grad = calloc((size_t)n, sizeof(float));
        tnt__weight_init(&l->weights[i], 1234 + (uint64_t)i);
    }
    if (l->ops->plan_create) { /* layers without oneDNN primitives have no plan */
        d->plan = l->ops->plan_create(l, batch);
        if (!d->plan) fail_msg("plan_create: %s", tnt_last_error());
    }
    size_t ws = l->ops->workspace_size ? l->ops->workspace_size(l, d->plan, batch) : 0;
    d->ws = tnt__alloc(ws ? ws : 64);
    d->x = calloc((size_t)in_numel(d), sizeof(float));
    d->dx = calloc((size_t)in_numel(d), sizeof(float));
    d->y = calloc((size_t)out_numel(d), sizeof(float));
    d->pre = calloc((size_t)out_numel(d), sizeof(float));
    d->dy = calloc((size_t)out_numel(d), sizeof(float));
}

/* Frees the buffers and the plan; frees the layer too when free_layer. */
static void drv_free(drv *d, bool free_layer) {
    tnt_layer *l = d->l;
    if (d->plan && l->ops->plan_destroy) l->ops->plan_destroy(d->plan);
    tnt__free(d->ws);
    free(d->x), free(d->y), free(d->pre), free(d->dy), free(d->dx);
    if (free_layer) {
        for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
        tnt_layer_free(l);
    }
}

static void drv_forward(drv *d, bool want_preact) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .preact = want_preact ? d->pre : NULL,
                       .workspace = d->ws, .training = true, .seed = 1};
    tu_ok(d->l->ops->forward(d->l, d->plan, &a));
}

static void drv_backward(drv *d, bool want_dx, bool dy_is_preact) {
    tnt__bwd_args a = {.batch = d->batch, .x = d->x, .y = d->y, .dy = d->dy,
                       .dx = want_dx ? d->dx : NULL, .workspace = d->ws, .dy_is_preact = dy_is_preact};
    tu_ok(d->l->ops->backward(d->l, d->plan, &a));
}

/* Fills every weight gradient with garbage, to prove that backward overwrites it. */
static void poison_grads(tnt_layer *l) {
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        for (int64_t j = 0; j < n; j++) l->weights[i].grad[j] = 1e6f;
    }
}

/* ---- comparison with the PyTorch fixtures ------------------------------------------------- */

static float max_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* rtol 1e-4; atol scaled to the tensor (sums of many products cancel to near zero). */
static void check(const float *got, const char *fixture, int64_t n, const char *what) {
    tnt_shape s;
    float *ref = tu_load(fixture, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    char label[160];
    snprintf(label, sizeof label, "%s: %s", fixture, what);
    tu_assert_close(got, ref, n, 1e-4, 1e-5 * fmax(1.0, max_abs(ref, n)), label);
    free(ref);
}

static void load_into(float *dst, const char *fixture, int64_t n) {
    tnt_shape s;
    float *src = tu_load(fixture, &s);
    assert_int_equal(tnt_shape_numel(s), n);
    memcpy(dst, src, (size_t)n * sizeof(float));
    free(src);
}

static bool fixture_exists(const char *fixture) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/%s.bin", fixture);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Runs one fixture case on layer l (consumed): forward (with and without preact), backward with
 * dx, without dx, and with dy already the pre-activation gradient. */
static void run_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    drv d;
    drv_init(&d, l, in, xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    const char *wnames[2] = {"w", "b"};
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, wnames[i]);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));

    /* forward, without and with the pre-activation output */
    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    memset(d.y, 0, (size_t)out_numel(&d) * sizeof(float));
    drv_forward(&d, true);
    check(d.y, f, out_numel(&d), "y (preact requested)");
    snprintf(f, sizeof f, "%s_pre", name);
    if (fixture_exists(f)) check(d.pre, f, out_numel(&d), "preact");

    /* backward with dx */
    poison_grads(l);
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    const char *gnames[2] = {"dw", "db"};
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), gnames[i]);
    }

    /* backward without dx: same weight gradients, dx untouched */
    poison_grads(l);
    for (int64_t i = 0; i < in_numel(&d); i++) d.dx[i] = 7.0f;
    drv_backward(&d, false, false);
    for (int64_t i = 0; i < in_numel(&d); i++) assert_true(d.dx[i] == 7.0f);
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), "grad (dx NULL)");
    }

    /* dy given as the pre-activation gradient (the fused softmax + cross-entropy path) */
    snprintf(f, sizeof f, "%s_dpre", name);
    if (l->activation != TNT_ACT_LINEAR && fixture_exists(f)) {
        load_into(d.dy, f, out_numel(&d));
        poison_grads(l);
        drv_forward(&d, true);
        drv_backward(&d, true, true);
        snprintf(f, sizeof f, "%s_dx", name);
        check(d.dx, f, in_numel(&d), "dx (dy_is_preact)");
        for (int i = 0; i < l->n_weights; i++) {
            snprintf(f, sizeof f, "%s_%s", name, gnames[i]);
            check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), "grad (dy_is_preact)");
        }
    }
    drv_free(&d, true);
}

/* ---- finite differences ------------------------------------------------------------------- */

/* L = sum(y * r) in double, for the current x and weights. */
static double fd_loss(drv *d, const float *r) {
    drv_forward(d, false);
    double s = 0;
    for (int64_t i = 0; i < out_numel(d); i++) s += (double)d->y[i] * r[i];
    return s;
}

typedef struct fd_target {
    float *v, *g; /* values and backward's gradient */
    int64_t n;
    const char *what;
} fd_target;

/* Central differences of L against backward's dx and weight gradients, for every entry of x and
 * of each weight (the cases are small). */
static void fd_check(tnt_layer *l, tnt_shape in, int64_t batch) {
    drv d;
    drv_init(&d, l, in, batch);
    tu_fill(d.x, in_numel(&d), 11);
    tu_fill(d.dy, out_numel(&d), 12);
    for (int i = 0; i < l->n_weights; i++)
        tu_fill(l->weights[i].value, tnt_shape_numel(l->weights[i].shape), 13 + (uint64_t)i);
    drv_forward(&d, false);
    drv_backward(&d, true, false);
    const float h = 1e-2f;
    fd_target t[1 + TNT_MAX_LAYER_WEIGHTS];
    int nt = 0;
    t[nt++] = (fd_target){d.x, d.dx, in_numel(&d), "dx"};
    for (int i = 0; i < l->n_weights; i++)
        t[nt++] = (fd_target){l->weights[i].value, l->weights[i].grad,
                              tnt_shape_numel(l->weights[i].shape), l->weights[i].name};
    for (int k = 0; k < nt; k++) {
        for (int64_t i = 0; i < t[k].n; i++) {
            float old = t[k].v[i];
            t[k].v[i] = old + h;
            double lp = fd_loss(&d, d.dy);
            t[k].v[i] = old - h;
            double lm = fd_loss(&d, d.dy);
            t[k].v[i] = old;
            double num = (lp - lm) / (2.0 * h), ana = t[k].g[i];
            if (fabs(num - ana) > 2e-3 + 1e-2 * fabs(num))
                fail_msg("%s %s[%lld]: backward %.6g, finite difference %.6g", tnt_layer_class(l),
                         t[k].what, (long long)i, ana, num);
        }
    }
    drv_free(&d, true);
}


/* ---- fixtures ----------------------------------------------------------------------------- */

static tnt_layer_opts c1_opts(int stride, int dil, tnt_padding pad, bool bias, tnt_activation act) {
    return (tnt_layer_opts){.strides = {stride, 0}, .dilation = {dil, 0}, .padding = pad,
                            .no_bias = !bias, .activation = act};
}

static void test_conv1d_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o;
    o = c1_opts(0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("conv1d_valid", tnt_conv1d(4, 3, &o));
    o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("conv1d_s2_same", tnt_conv1d(5, 4, &o));
    o = c1_opts(3, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    run_case("conv1d_s3_same_odd", tnt_conv1d(3, 3, &o));
    o = c1_opts(1, 2, TNT_PADDING_VALID, true, TNT_ACT_SIGMOID);
    run_case("conv1d_dil2_valid", tnt_conv1d(3, 3, &o));
    o = c1_opts(0, 2, TNT_PADDING_SAME, false, TNT_ACT_GELU);
    run_case("conv1d_dil2_same_nobias", tnt_conv1d(4, 3, &o));
    o = c1_opts(0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_case("conv1d_relu", tnt_conv1d(6, 5, &o));
    o = c1_opts(0, 0, TNT_PADDING_CAUSAL, true, TNT_ACT_LINEAR);
    run_case("conv1d_causal", tnt_conv1d(4, 3, &o));
    o = c1_opts(0, 2, TNT_PADDING_CAUSAL, true, TNT_ACT_RELU);
    run_case("conv1d_causal_dil2_relu", tnt_conv1d(3, 2, &o));
    o = c1_opts(2, 0, TNT_PADDING_CAUSAL, true, TNT_ACT_LINEAR);
    run_case("conv1d_causal_s2", tnt_conv1d(2, 3, &o));
}

static void test_pool1d_fixtures(void **state) {
    (void)state;
    run_case("maxpool1d_2_valid", tnt_max_pooling1d(2, NULL));
    tnt_layer_opts o = {.strides = {2, 0}};
    run_case("maxpool1d_3_s2_valid_odd", tnt_max_pooling1d(3, &o));
    o = (tnt_layer_opts){.strides = {2, 0}, .padding = TNT_PADDING_SAME};
    run_case("maxpool1d_3_s2_same", tnt_max_pooling1d(3, &o));
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME};
    run_case("maxpool1d_2_same_odd", tnt_max_pooling1d(2, &o));
    o = (tnt_layer_opts){.strides = {1, 0}, .padding = TNT_PADDING_SAME};
    run_case("maxpool1d_3_s1_same", tnt_max_pooling1d(3, &o));
    run_case("gap1d_7", tnt_global_average_pooling1d(NULL));
    run_case("gap1d_1", tnt_global_average_pooling1d("gap"));
}

/* Two plans of one layer side by side (the model caches the full and the last partial batch):
 * the batch-1 plan must give the first sample of the batch-2 results. */
static void test_two_plans(void **state) {
    (void)state;
    tnt_layer_opts o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    tnt_layer *l = tnt_conv1d(5, 4, &o);
    tnt_shape xs;
    float *x = tu_load("conv1d_s2_same_x", &xs);
    tnt_shape in = TNT_SHAPE(xs.dim[1], xs.dim[2]);
    drv d2, d1;
    drv_init(&d2, l, in, 2);
    load_into(l->weights[0].value, "conv1d_s2_same_w", tnt_shape_numel(l->weights[0].shape));
    load_into(l->weights[1].value, "conv1d_s2_same_b", 5);
    memset(&d1, 0, sizeof d1);
    d1.l = l, d1.batch = 1;
    d1.plan = l->ops->plan_create(l, 1);
    assert_non_null(d1.plan);
    d1.ws = tnt__alloc(l->ops->workspace_size(l, d1.plan, 1) + 64);
    d1.x = calloc((size_t)in_numel(&d1), sizeof(float));
    d1.dx = calloc((size_t)in_numel(&d1), sizeof(float));
    d1.y = calloc((size_t)out_numel(&d1), sizeof(float));
    d1.pre = calloc((size_t)out_numel(&d1), sizeof(float));
    d1.dy = calloc((size_t)out_numel(&d1), sizeof(float));
    memcpy(d2.x, x, (size_t)in_numel(&d2) * sizeof(float));
    memcpy(d1.x, x, (size_t)in_numel(&d1) * sizeof(float));
    float *dy = tu_load("conv1d_s2_same_dy", NULL);
    memcpy(d2.dy, dy, (size_t)out_numel(&d2) * sizeof(float));
    memcpy(d1.dy, dy, (size_t)out_numel(&d1) * sizeof(float));
    drv_forward(&d2, false);
    drv_forward(&d1, false);
    drv_backward(&d1, true, false);
    drv_backward(&d2, true, false);
    float *y = tu_load("conv1d_s2_same_y", NULL), *dx = tu_load("conv1d_s2_same_dx", NULL);
    tu_assert_close(d1.y, y, out_numel(&d1), 1e-4, 1e-5, "y batch 1");
    tu_assert_close(d2.y, y, out_numel(&d2), 1e-4, 1e-5, "y batch 2");
    tu_assert_close(d1.dx, dx, in_numel(&d1), 1e-4, 1e-5, "dx batch 1");
    tu_assert_close(d2.dx, dx, in_numel(&d2), 1e-4, 1e-5, "dx batch 2");
    free(x), free(dy), free(y), free(dx);
    drv_free(&d1, false);
    drv_free(&d2, true);
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    fd_check(tnt_conv1d(3, 3, &o), TNT_SHAPE(7, 2), 2);
    o = c1_opts(0, 2, TNT_PADDING_CAUSAL, false, TNT_ACT_GELU);
    fd_check(tnt_conv1d(2, 2, &o), TNT_SHAPE(6, 3), 2);
    o = c1_opts(0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    fd_check(tnt_conv1d(4, 3, &o), TNT_SHAPE(5, 2), 3);
    fd_check(tnt_global_average_pooling1d(NULL), TNT_SHAPE(5, 3), 2);
}

/* ---- configuration, defaults and errors --------------------------------------------------- */

static void test_defaults_and_names(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_conv1d(6, 5, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "Conv1D");
    assert_true(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(28, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(24, 6))); /* valid, stride 1 */
    assert_int_equal(l->n_weights, 2);
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 3, 6)));
    assert_int_equal(l->weights[0].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[0].fan_in, 15);
    assert_int_equal(l->weights[0].fan_out, 30);
    assert_int_equal(l->weights[1].init, TNT_INIT_ZEROS);
    assert_string_equal(l->weights[0].name, "kernel");
    assert_string_equal(l->weights[1].name, "bias");
    tnt_layer_free(l);

    /* TF "same" with stride 2: ceil(in / s); causal: ceil(in / s) too */
    l = tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {2, 0}, .padding = TNT_PADDING_SAME, .name = "c"});
    assert_string_equal(tnt_layer_name(l), "c");
    assert_false(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 4)));
    tnt_layer_free(l);
    l = tnt_conv1d(4, 5, &(tnt_layer_opts){.dilation = {3, 0}, .padding = TNT_PADDING_CAUSAL});
    tu_ok(l->ops->build(l, TNT_SHAPE(2, 1), &out)); /* causal never fails: kernel > input */
    assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 4)));
    tnt_layer_free(l);

    l = tnt_max_pooling1d(2, NULL);
    assert_string_equal(tnt_layer_class(l), "MaxPooling1D");
    tu_ok(l->ops->build(l, TNT_SHAPE(9, 20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 20))); /* strides default to pool_size */
    assert_int_equal(l->n_weights, 0);
    tnt_layer_free(l);
    l = tnt_max_pooling1d(3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 2), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 2)));
    tnt_layer_free(l);

    l = tnt_global_average_pooling1d(NULL);
    assert_string_equal(tnt_layer_class(l), "GlobalAveragePooling1D");
    assert_true(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(9, 20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(20)));
    tnt_layer_free(l);
}

static void test_constructor_errors(void **state) {
    (void)state;
    assert_null(tnt_conv1d(0, 3, NULL));
    tu_error_contains("Conv1D: filters 0");
    assert_null(tnt_conv1d(4, -2, NULL));
    tu_error_contains("kernel_size -2");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {-1, 0}}));
    tu_error_contains("strides -1");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.dilation = {-2, 0}}));
    tu_error_contains("dilation_rate -2");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {2, 0}, .dilation = {2, 0}}));
    tu_error_contains("not both");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.padding = (tnt_padding)7}));
    tu_error_contains("padding 7");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.activation = (tnt_activation)99}));
    tu_error_contains("activation 99");
    assert_null(tnt_max_pooling1d(0, NULL));
    tu_error_contains("MaxPooling1D: pool_size 0");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.strides = {-3, 0}}));
    tu_error_contains("MaxPooling1D: strides -3");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("padding 2");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
    tu_error_contains("no activation");
    /* the 2-D layers refuse causal padding */
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("padding 2");
}

static void expect_build_error(tnt_layer *l, tnt_shape in, const char *needle1, const char *needle2) {
    tnt_shape out;
    assert_non_null(l);
    snprintf(l->name, sizeof l->name, "%s", "lyr");
    assert_int_equal(l->ops->build(l, in, &out), TNT_ERR_SHAPE);
    tu_error_contains("\"lyr\"");
    tu_error_contains(needle1);
    tu_error_contains(needle2);
    tnt_layer_free(l);
}

static void test_build_errors(void **state) {
    (void)state;
    expect_build_error(tnt_conv1d(4, 3, NULL), TNT_SHAPE(28, 28, 1), "Conv1D", "rank 3");
    expect_build_error(tnt_conv1d(4, 3, NULL), TNT_SHAPE(28), "(28,)", "rank 1");
    expect_build_error(tnt_conv1d(4, 5, NULL), TNT_SHAPE(3, 2), "(3, 2)", "smaller than the kernel (5)");
    expect_build_error(tnt_conv1d(4, 3, &(tnt_layer_opts){.dilation = {3, 0}}), TNT_SHAPE(6, 1),
                       "(6, 1)", "dilation 3");
    expect_build_error(tnt_max_pooling1d(2, NULL), TNT_SHAPE(4, 4, 2), "MaxPooling1D", "rank 3");
    expect_build_error(tnt_max_pooling1d(4, NULL), TNT_SHAPE(3, 2), "(3, 2)", "smaller than pool_size 4");
    expect_build_error(tnt_global_average_pooling1d(NULL), TNT_SHAPE(3, 4, 5),
                       "GlobalAveragePooling1D", "rank 3");
    /* "same" padding never fails for a kernel larger than the input */
    tnt_shape out;
    tnt_layer *l = tnt_conv1d(2, 5, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(3, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 2)));
    tnt_layer_free(l);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d_fixtures),
        cmocka_unit_test(test_pool1d_fixtures),
        cmocka_unit_test(test_two_plans),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_defaults_and_names),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_build_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
