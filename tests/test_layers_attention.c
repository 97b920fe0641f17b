/* test_layers_attention.c: MultiHeadAttention driven directly through the multi-input layer
 * contract (tnt__attention_configure, build_multi, workspace, forward, backward) without a model:
 * output, dquery, dvalue, dkey and every weight gradient against PyTorch references written to
 * Keras's formulas (tests/fixtures/gen_layers_attention.py) for self- and cross-attention,
 * value_dim != key_dim, output_dim, no bias, attention/query/value masks, the causal mask and
 * fully masked rows; dropout (inference = none, training split-invariant across sample offsets),
 * finite differences, defaults, errors, and a timing print of the Transformer benchmark shape. */
#include "layer_harness.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

/* ---- a driver for the multi-input contract ------------------------------------------------ */

typedef struct mdrv {
    tnt_layer *l;
    int64_t batch;
    int n;                              /* inputs: 3 + masks */
    tnt_shape in[6];                    /* without batch */
    float *buf[6];                      /* owned input buffers (query, value, key, masks) */
    const float *xs[6];                 /* inputs as passed (key may alias value, etc.) */
    float *dxs_buf[6], *dxs[6];
    float *y, *dy;
    void *ws;
} mdrv;

static int64_t numel_b(const mdrv *d, tnt_shape s) { return d->batch * tnt_shape_numel(s); }

/* Configures and builds l for the given input shapes, gives weights value and grad arrays
 * (initialized by their initializers), allocates inputs, gradients, y, dy and the workspace. */
static void mdrv_init(mdrv *d, tnt_layer *l, int64_t batch, int n, const tnt_shape *in, bool am, bool qm,
                      bool vm, bool causal) {
    memset(d, 0, sizeof *d);
    assert_non_null(l);
    d->l = l, d->batch = batch, d->n = n;
    tu_ok(tnt__attention_configure(l, am, qm, vm, causal));
    l->n_inputs = n;
    for (int i = 0; i < n; i++) d->in[i] = l->in_shapes[i] = in[i];
    l->in_shape = in[0];
    tu_ok(l->ops->build_multi(l, n, in, &l->out_shape));
    for (int i = 0; i < l->n_weights; i++) {
        int64_t k = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)k, sizeof(float));
        l->weights[i].grad = calloc((size_t)k, sizeof(float));
        tnt__weight_init(&l->weights[i], 99 + (uint64_t)i);
    }
    for (int i = 0; i < n; i++) {
        d->buf[i] = calloc((size_t)numel_b(d, in[i]), sizeof(float));
        d->xs[i] = d->buf[i];
        d->dxs_buf[i] = calloc((size_t)numel_b(d, in[i]), sizeof(float));
        d->dxs[i] = i < 3 ? d->dxs_buf[i] : NULL;
    }
    d->y = calloc((size_t)numel_b(d, l->out_shape), sizeof(float));
    d->dy = calloc((size_t)numel_b(d, l->out_shape), sizeof(float));
    size_t ws = l->ops->workspace_size(l, NULL, batch);
    assert_true(ws > 0);
    d->ws = tnt__alloc(ws);
}

static void mdrv_free(mdrv *d) {
    tnt_layer *l = d->l;
    for (int i = 0; i < d->n; i++) free(d->buf[i]), free(d->dxs_buf[i]);
    free(d->y), free(d->dy);
    tnt__free(d->ws);
    for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
    tnt_layer_free(l);
}

static void mdrv_forward(mdrv *d, bool training, uint64_t seed, int64_t offset) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->xs[0], .n_inputs = d->n, .xs = d->xs, .y = d->y,
                       .workspace = d->ws, .training = training, .seed = seed, .sample_offset = offset};
    tu_ok(d->l->ops->forward(d->l, NULL, &a));
}

static void mdrv_backward(mdrv *d, bool want_dx, int64_t offset) {
    float *none[6] = {0};
    tnt__bwd_args a = {.batch = d->batch, .x = d->xs[0], .y = d->y, .dy = d->dy,
                       .dx = want_dx ? d->dxs[0] : NULL, .workspace = d->ws, .sample_offset = offset,
                       .n_inputs = d->n, .xs = d->xs, .dxs = want_dx ? d->dxs : none};
    tu_ok(d->l->ops->backward(d->l, NULL, &a));
}

/* ---- fixture cases ------------------------------------------------------------------------ */

typedef struct mcase {
    const char *name;
    int heads, key_dim, value_dim, output_dim;
    bool no_bias, self, key_is_value, am, qm, vm, causal;
} mcase;

static const mcase cases[] = {
    {"mha_self", 2, 3, 0, 0, false, true, false, false, false, false, false},
    {"mha_cross", 2, 3, 0, 0, false, false, false, false, false, false, false},
    {"mha_vdim_out", 2, 3, 4, 7, false, false, true, false, false, false, false},
    {"mha_nobias", 3, 2, 0, 0, true, false, true, false, false, false, false},
    {"mha_attn_mask", 2, 3, 0, 0, false, false, false, true, false, false, false},
    {"mha_qv_mask", 2, 3, 0, 0, false, false, true, false, true, true, false},
    {"mha_causal", 2, 3, 0, 0, false, true, false, false, false, false, true},
    {"mha_all_masks", 2, 3, 2, 3, false, false, false, true, true, true, true},
};

static tnt_shape drop_batch(tnt_shape s) {
    tnt_shape r = {.ndim = s.ndim - 1};
    for (int i = 1; i < s.ndim; i++) r.dim[i - 1] = s.dim[i];
    return r;
}

/* Sets up a case: layer (with dropout rate), shapes and data from the fixtures, weights loaded. */
static void setup_case(mdrv *d, const mcase *c, float dropout) {
    char f[128];
    const char *roles[6] = {"query", "value", "key", "am", "qm", "vm"};
    const bool present[6] = {true, true, true, c->am, c->qm, c->vm};
    tnt_shape in[6], full[6];
    float *data[6];
    int n = 0;
    for (int i = 0; i < 6; i++) {
        if (!present[i]) continue;
        snprintf(f, sizeof f, "%s_%s", c->name, roles[i]);
        data[n] = tu_load(f, &full[n]);
        in[n] = drop_batch(full[n]);
        n++;
    }
    tnt_attention_opts o = {.value_dim = c->value_dim, .output_dim = c->output_dim, .no_bias = c->no_bias,
                            .dropout = dropout};
    tnt_layer *l = tnt_multi_head_attention(c->heads, c->key_dim, &o);
    mdrv_init(d, l, full[0].dim[0], n, in, c->am, c->qm, c->vm, c->causal);
    for (int i = 0; i < n; i++) {
        memcpy(d->buf[i], data[i], (size_t)numel_b(d, in[i]) * sizeof(float));
        free(data[i]);
    }
    if (c->self) d->xs[1] = d->xs[2] = d->xs[0];
    if (c->key_is_value) d->xs[2] = d->xs[1];
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_w%d", c->name, i);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    snprintf(f, sizeof f, "%s_dy", c->name);
    load_into(d->dy, f, numel_b(d, l->out_shape));
}

static void check_grads(mdrv *d, const mcase *c, bool with_dx, const char *what) {
    char f[128], label[96];
    tnt_layer *l = d->l;
    const char *roles[3] = {"dquery", "dvalue", "dkey"};
    if (with_dx)
        for (int i = 0; i < 3; i++) {
            snprintf(f, sizeof f, "%s_%s", c->name, roles[i]);
            snprintf(label, sizeof label, "%s (%s)", roles[i], what);
            check(d->dxs[i], f, numel_b(d, d->in[i]), label);
        }
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_dw%d", c->name, i);
        snprintf(label, sizeof label, "%s gradient (%s)", l->weights[i].name, what);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), label);
    }
}

static void test_fixtures(void **state) {
    (void)state;
    char f[128];
    for (size_t k = 0; k < TNT_ARRAY_LEN(cases); k++) {
        const mcase *c = &cases[k];
        mdrv d;
        setup_case(&d, c, 0.0f);
        const int64_t ny = numel_b(&d, d.l->out_shape);
        snprintf(f, sizeof f, "%s_y", c->name);
        mdrv_forward(&d, true, 1, 0);
        check(d.y, f, ny, "y");

        poison_grads(d.l);
        for (int i = 0; i < 3; i++)
            for (int64_t j = 0; j < numel_b(&d, d.in[i]); j++) d.dxs[i][j] = 1e6f;
        mdrv_backward(&d, true, 0);
        check_grads(&d, c, true, "all dx");

        /* again, without input gradients: the workspace survives a backward */
        poison_grads(d.l);
        for (int64_t j = 0; j < numel_b(&d, d.in[0]); j++) d.dxs[0][j] = 7.0f;
        mdrv_backward(&d, false, 0);
        check_grads(&d, c, false, "dx NULL");
        for (int64_t j = 0; j < numel_b(&d, d.in[0]); j++) assert_true(d.dxs[0][j] == 7.0f);

        /* only dkey asked for */
        d.dxs[0] = d.dxs[1] = NULL;
        memset(d.dxs[2], 0, (size_t)numel_b(&d, d.in[2]) * sizeof(float));
        mdrv_backward(&d, true, 0);
        snprintf(f, sizeof f, "%s_dkey", c->name);
        check(d.dxs[2], f, numel_b(&d, d.in[2]), "dkey alone");

        /* inference gives the same output */
        memset(d.y, 0, (size_t)ny * sizeof(float));
        mdrv_forward(&d, false, 1, 0);
        snprintf(f, sizeof f, "%s_y", c->name);
        check(d.y, f, ny, "y (inference)");
        mdrv_free(&d);
    }
}

/* ---- dropout ------------------------------------------------------------------------------ */

/* (a) with dropout, inference is the plain layer; training changes the output, and in backward
 * the weight gradients follow the dropped probabilities (checked by finite differences below). */
static void test_dropout_inference(void **state) {
    (void)state;
    mdrv d;
    setup_case(&d, &cases[1], 0.5f);
    const int64_t ny = numel_b(&d, d.l->out_shape);
    mdrv_forward(&d, false, 5, 0);
    check(d.y, "mha_cross_y", ny, "y inference with dropout 0.5");
    mdrv_backward(&d, true, 0);
    check_grads(&d, &cases[1], true, "inference backward");
    mdrv_forward(&d, true, 5, 0);
    float *ref = tu_load("mha_cross_y", NULL);
    double diff = 0;
    for (int64_t i = 0; i < ny; i++) diff = fmax(diff, fabs(d.y[i] - ref[i]));
    assert_true(diff > 1e-3);
    free(ref);
    mdrv_free(&d);
}

/* (b) split invariance: batch 4 in one call equals two calls on 2 samples with sample_offset 0
 * and 2 (the global index drives the dropout mask): outputs and input gradients per sample, and
 * weight gradients as the sum of the halves. */
static void test_dropout_split(void **state) {
    (void)state;
    const int64_t Tq = 3, Tv = 5;
    tnt_shape in[4] = {TNT_SHAPE(Tq, 6), TNT_SHAPE(Tv, 4), TNT_SHAPE(Tv, 5), TNT_SHAPE(Tv)};
    tnt_attention_opts o = {.dropout = 0.4f};
    mdrv full, half[2];
    mdrv_init(&full, tnt_multi_head_attention(2, 3, &o), 4, 4, in, false, false, true, false);
    for (int h = 0; h < 2; h++)
        mdrv_init(&half[h], tnt_multi_head_attention(2, 3, &o), 2, 4, in, false, false, true, false);
    tnt_layer *l = full.l;
    for (int i = 0; i < l->n_weights; i++) {
        int64_t k = tnt_shape_numel(l->weights[i].shape);
        tu_fill(l->weights[i].value, k, 40 + (uint64_t)i);
        for (int h = 0; h < 2; h++) memcpy(half[h].l->weights[i].value, l->weights[i].value, (size_t)k * sizeof(float));
    }
    for (int i = 0; i < 4; i++) {
        int64_t per = tnt_shape_numel(in[i]);
        tu_fill(full.buf[i], 4 * per, 60 + (uint64_t)i);
        if (i == 3)
            for (int64_t j = 0; j < 4 * per; j++) full.buf[i][j] = full.buf[i][j] > -0.5f ? 1.0f : 0.0f;
        for (int h = 0; h < 2; h++) memcpy(half[h].buf[i], full.buf[i] + h * 2 * per, (size_t)(2 * per) * sizeof(float));
    }
    const int64_t per_y = Tq * 6;
    tu_fill(full.dy, 4 * per_y, 70);
    for (int h = 0; h < 2; h++) memcpy(half[h].dy, full.dy + h * 2 * per_y, (size_t)(2 * per_y) * sizeof(float));
    for (int h = 0; h < 2; h++) half[h].l->seed = l->seed = 1234;

    mdrv_forward(&full, true, 77, 0);
    mdrv_backward(&full, true, 0);
    for (int h = 0; h < 2; h++) {
        mdrv_forward(&half[h], true, 77, 2 * h);
        mdrv_backward(&half[h], true, 2 * h);
        tu_assert_close(half[h].y, full.y + h * 2 * per_y, 2 * per_y, 1e-5, 1e-6, "y split");
        for (int i = 0; i < 3; i++) {
            int64_t per = tnt_shape_numel(in[i]);
            tu_assert_close(half[h].dxs[i], full.dxs[i] + h * 2 * per, 2 * per, 1e-5, 1e-6, "dx split");
        }
    }
    for (int i = 0; i < l->n_weights; i++) {
        int64_t k = tnt_shape_numel(l->weights[i].shape);
        float *sum = calloc((size_t)k, sizeof(float));
        for (int64_t j = 0; j < k; j++) sum[j] = half[0].l->weights[i].grad[j] + half[1].l->weights[i].grad[j];
        tu_assert_close(sum, l->weights[i].grad, k, 1e-4, 1e-5, l->weights[i].name);
        free(sum);
    }
    /* some, not all, probabilities were dropped: the output differs from inference */
    float *yt = malloc((size_t)(4 * per_y) * sizeof(float));
    memcpy(yt, full.y, (size_t)(4 * per_y) * sizeof(float));
    mdrv_forward(&full, false, 77, 0);
    double diff = 0;
    for (int64_t j = 0; j < 4 * per_y; j++) diff = fmax(diff, fabs(yt[j] - full.y[j]));
    assert_true(diff > 1e-3);
    /* another step seed gives another mask */
    mdrv_forward(&full, true, 78, 0);
    diff = 0;
    for (int64_t j = 0; j < 4 * per_y; j++) diff = fmax(diff, fabs(yt[j] - full.y[j]));
    assert_true(diff > 1e-3);
    free(yt);
    mdrv_free(&full);
    mdrv_free(&half[0]);
    mdrv_free(&half[1]);
}

/* ---- finite differences ------------------------------------------------------------------- */

static double fd_loss_m(mdrv *d, bool training) {
    mdrv_forward(d, training, 3, 4);
    double s = 0;
    for (int64_t i = 0; i < numel_b(d, d->l->out_shape); i++) s += (double)d->y[i] * d->dy[i];
    return s;
}

/* Central differences of sum(y * r) against backward for every entry of query, value, key and
 * each weight: cross-attention with an attention mask, value mask, causal mask and dropout in
 * training (the mask depends on the seed and index only); every row keeps an attended key. */
static void fd_case(tnt_attention_opts o, int heads, int kd, bool training) {
    const int64_t B = 2, Tq = 3, Tv = 4;
    tnt_shape in[5] = {TNT_SHAPE(Tq, 3), TNT_SHAPE(Tv, 2), TNT_SHAPE(Tv, 3), TNT_SHAPE(Tq, Tv), TNT_SHAPE(Tv)};
    mdrv d;
    mdrv_init(&d, tnt_multi_head_attention(heads, kd, &o), B, 5, in, true, false, true, true);
    d.l->seed = 17;
    for (int i = 0; i < 3; i++) tu_fill(d.buf[i], numel_b(&d, in[i]), 11 + (uint64_t)i);
    for (int64_t j = 0; j < B * Tq * Tv; j++) d.buf[3][j] = (j % 3 == 1) ? 0.0f : 1.0f;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < Tq; t++) d.buf[3][(b * Tq + t) * Tv] = 1.0f; /* s = 0 always attended */
    for (int64_t j = 0; j < B * Tv; j++) d.buf[4][j] = (j % Tv == 2) ? 0.0f : 1.0f;
    tu_fill(d.dy, numel_b(&d, d.l->out_shape), 12);
    tnt_layer *l = d.l;
    for (int i = 0; i < l->n_weights; i++)
        tu_fill(l->weights[i].value, tnt_shape_numel(l->weights[i].shape), 13 + (uint64_t)i);
    mdrv_forward(&d, training, 3, 4);
    mdrv_backward(&d, true, 4);
    const float h = 1e-2f;
    fd_target t[3 + TNT_MAX_LAYER_WEIGHTS];
    int nt = 0;
    const char *roles[3] = {"query", "value", "key"};
    for (int i = 0; i < 3; i++) t[nt++] = (fd_target){d.buf[i], d.dxs[i], numel_b(&d, in[i]), roles[i]};
    for (int i = 0; i < l->n_weights; i++)
        t[nt++] = (fd_target){l->weights[i].value, l->weights[i].grad, tnt_shape_numel(l->weights[i].shape),
                              l->weights[i].name};
    for (int k = 0; k < nt; k++)
        for (int64_t i = 0; i < t[k].n; i++) {
            float old = t[k].v[i];
            t[k].v[i] = old + h;
            double lp = fd_loss_m(&d, training);
            t[k].v[i] = old - h;
            double lm = fd_loss_m(&d, training);
            t[k].v[i] = old;
            double num = (lp - lm) / (2.0 * h), ana = t[k].g[i];
            if (fabs(num - ana) > 2e-3 + 1e-2 * fabs(num))
                fail_msg("MultiHeadAttention %s[%lld]: backward %.6g, finite difference %.6g", t[k].what,
                         (long long)i, ana, num);
        }
    mdrv_free(&d);
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_case((tnt_attention_opts){.dropout = 0.3f}, 2, 2, true);
    fd_case((tnt_attention_opts){.value_dim = 3, .output_dim = 2, .no_bias = true}, 3, 2, true);
    fd_case((tnt_attention_opts){.dropout = 0.5f, .value_dim = 1}, 1, 3, false);
}

/* ---- defaults, names and errors ----------------------------------------------------------- */

static void test_defaults(void **state) {
    (void)state;
    tnt_layer *l = tnt_multi_head_attention(4, 8, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "MultiHeadAttention");
    assert_true(l->auto_name);
    assert_true(l->ops->supports_masking);
    tnt_shape in[3] = {TNT_SHAPE(10, 16), TNT_SHAPE(12, 20), TNT_SHAPE(12, 24)}, out;
    tu_ok(tnt__attention_configure(l, false, false, false, false));
    tu_ok(l->ops->build_multi(l, 3, in, &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(10, 16)));
    assert_int_equal(l->n_weights, 8);
    const char *names[8] = {"query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel",
                            "value/bias", "attention_output/kernel", "attention_output/bias"};
    tnt_shape shapes[8] = {TNT_SHAPE(16, 4, 8), TNT_SHAPE(4, 8), TNT_SHAPE(24, 4, 8), TNT_SHAPE(4, 8),
                           TNT_SHAPE(20, 4, 8), TNT_SHAPE(4, 8), TNT_SHAPE(4, 8, 16), TNT_SHAPE(16)};
    for (int i = 0; i < 8; i++) {
        assert_string_equal(l->weights[i].name, names[i]);
        assert_true(tnt__shape_equal(l->weights[i].shape, shapes[i]));
        assert_int_equal(l->weights[i].init, i % 2 ? TNT_INIT_ZEROS : TNT_INIT_GLOROT_UNIFORM);
    }
    /* Keras's fans for rank-3 kernels: receptive field = product of the leading axes */
    assert_int_equal(l->weights[0].fan_in, 16 * 4);
    assert_int_equal(l->weights[0].fan_out, 16 * 8);
    assert_int_equal(l->weights[6].fan_in, 4 * 8);
    assert_int_equal(l->weights[6].fan_out, 4 * 16);
    tnt_layer_free(l);

    tnt_attention_opts o = {.name = "att", .value_dim = 5, .output_dim = 7, .no_bias = true,
                            .kernel_initializer = TNT_INIT_HE_NORMAL};
    l = tnt_multi_head_attention(2, 3, &o);
    assert_string_equal(tnt_layer_name(l), "att");
    assert_false(l->auto_name);
    tu_ok(tnt__attention_configure(l, true, true, true, true));
    tnt_shape in2[6] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(5, 2), TNT_SHAPE(4, 5), TNT_SHAPE(4),
                        TNT_SHAPE(5)};
    tu_ok(l->ops->build_multi(l, 6, in2, &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 7)));
    assert_int_equal(l->n_weights, 4);
    assert_string_equal(l->weights[3].name, "attention_output/kernel");
    assert_true(tnt__shape_equal(l->weights[2].shape, TNT_SHAPE(2, 2, 5)));
    assert_true(tnt__shape_equal(l->weights[3].shape, TNT_SHAPE(2, 5, 7)));
    assert_int_equal(l->weights[0].init, TNT_INIT_HE_NORMAL);
    tnt_layer_free(l);

    /* glorot_uniform draws stay within Keras's limit sqrt(6 / (fan_in + fan_out)) */
    l = tnt_multi_head_attention(4, 8, NULL);
    mdrv d;
    mdrv_init(&d, l, 1, 3, in, false, false, false, false);
    const float lim = sqrtf(6.0f / (16 * 4 + 16 * 8));
    float mx = max_abs(l->weights[0].value, 16 * 4 * 8);
    assert_true(mx <= lim && mx > 0.8f * lim);
    assert_true(max_abs(l->weights[1].value, 32) == 0.0f);
    mdrv_free(&d);
}

static void expect_build_error(tnt_attention_opts *o, bool am, bool qm, bool vm, int n, const tnt_shape *in,
                               const char *needle1, const char *needle2) {
    tnt_shape out;
    tnt_layer *l = tnt_multi_head_attention(2, 3, o);
    assert_non_null(l);
    snprintf(l->name, sizeof l->name, "%s", "mha");
    tu_ok(tnt__attention_configure(l, am, qm, vm, false));
    assert_int_equal(l->ops->build_multi(l, n, in, &out), TNT_ERR_SHAPE);
    tu_error_contains("\"mha\"");
    tu_error_contains(needle1);
    tu_error_contains(needle2);
    tnt_layer_free(l);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_multi_head_attention(0, 3, NULL));
    tu_error_contains("num_heads 0");
    assert_null(tnt_multi_head_attention(2, -1, NULL));
    tu_error_contains("key_dim -1");
    assert_null(tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.value_dim = -2}));
    tu_error_contains("value_dim -2");
    assert_null(tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.output_dim = -1}));
    tu_error_contains("output_dim -1");
    assert_null(tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.dropout = 1.0f}));
    tu_error_contains("dropout 1");
    assert_null(tnt_multi_head_attention(2, 3, &(tnt_attention_opts){.kernel_initializer = (tnt_initializer)77}));
    tu_error_contains("initializer 77");

    tnt_layer *dense = tnt_dense(3, &(tnt_layer_opts){.name = "d"});
    assert_int_equal(tnt__attention_configure(dense, false, false, false, true), TNT_ERR_ARG);
    tu_error_contains("\"d\"");
    tu_error_contains("not a MultiHeadAttention");
    tnt_layer_free(dense);

    tnt_shape ok[6] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(5, 3), TNT_SHAPE(4, 5), TNT_SHAPE(4), TNT_SHAPE(5)};
    expect_build_error(NULL, false, false, false, 2, ok, "2 inputs", "expected 3");
    expect_build_error(NULL, true, false, true, 4, ok, "4 inputs", "expected 5 (query, value, key, attention_mask, value_mask)");
    tnt_shape bad[3] = {TNT_SHAPE(4, 6, 2), TNT_SHAPE(5, 2), TNT_SHAPE(5, 3)};
    expect_build_error(NULL, false, false, false, 3, bad, "query shape (4, 6, 2)", "rank 3");
    tnt_shape bad2[3] = {TNT_SHAPE(4, 6), TNT_SHAPE(5), TNT_SHAPE(5, 3)};
    expect_build_error(NULL, false, false, false, 3, bad2, "value shape (5,)", "rank 1");
    tnt_shape bad3[3] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(6, 3)};
    expect_build_error(NULL, false, false, false, 3, bad3, "key shape (6, 3) has 6 steps", "value's 5");
    tnt_shape bad4[4] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(5, 3), TNT_SHAPE(5, 4)};
    expect_build_error(NULL, true, false, false, 4, bad4, "attention_mask shape (5, 4)", "expected (4, 5)");
    tnt_shape bad5[5] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(5, 3), TNT_SHAPE(4), TNT_SHAPE(4)};
    expect_build_error(NULL, false, true, true, 5, bad5, "value_mask shape (4,)", "expected (5,)");
    tnt_shape bad6[4] = {TNT_SHAPE(4, 6), TNT_SHAPE(5, 2), TNT_SHAPE(5, 3), TNT_SHAPE(5)};
    expect_build_error(NULL, false, true, false, 4, bad6, "query_mask shape (5,)", "expected (4,)");
}

/* ---- timing (printed, not asserted) ------------------------------------------------------- */

static double now_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The Transformer benchmark's self-attention: batch 32, seq 128, d_model 256, 4 heads, key_dim 64. */
static void test_timing(void **state) {
    (void)state;
    const int64_t B = 32, T = 128, D = 256;
    tnt_shape in[3] = {TNT_SHAPE(T, D), TNT_SHAPE(T, D), TNT_SHAPE(T, D)};
    mdrv d;
    mdrv_init(&d, tnt_multi_head_attention(4, 64, NULL), B, 3, in, false, false, false, false);
    tu_fill(d.buf[0], B * T * D, 1);
    tu_fill(d.dy, B * T * D, 2);
    d.xs[1] = d.xs[2] = d.xs[0];
    mdrv_forward(&d, true, 1, 0);
    mdrv_backward(&d, true, 0);
    const int reps = 5;
    double f = 0, b = 0, cpu = 0;
    for (int r = 0; r < reps; r++) {
        double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID), t0 = now_ms(CLOCK_MONOTONIC);
        mdrv_forward(&d, true, 1, 0);
        double t1 = now_ms(CLOCK_MONOTONIC);
        mdrv_backward(&d, true, 0);
        double t2 = now_ms(CLOCK_MONOTONIC), c2 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
        f += t1 - t0, b += t2 - t1, cpu += c2 - c0;
    }
    /* wall time is inflated when the machine is shared; CPU time over threads is the check */
    printf("[ TIMING ] MultiHeadAttention B=32 T=128 d=256 H=4 kd=64, %d thread(s): forward %.1f ms, "
           "backward %.1f ms, total %.1f ms wall, %.1f ms CPU\n",
           omp_get_max_threads(), f / reps, b / reps, (f + b) / reps, cpu / reps);
    mdrv_free(&d);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_dropout_inference),
        cmocka_unit_test(test_dropout_split),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_timing),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
