/* test_layers_merge.c: the Keras merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum,
 * Concatenate) and custom layers, driven through the layer contract.
 *
 * Merge layers: forward and every input gradient against PyTorch fixtures
 * (tests/fixtures/gen_layers_merge.py) with 2 and 3 inputs, Concatenate on Keras axes 1, 2 and -1
 * of rank-3 inputs, the tie rule of Maximum/Minimum (the first input holding the extreme gets dy),
 * dxs that are NULL or poisoned (overwritten, never accumulated), the OpenMP path on a large
 * tensor against a scalar reference, and errors (1 input, Subtract with 3, mismatched shapes, bad
 * axes).
 *
 * Custom layers: y = x W + b with a trainable kernel and bias and two state weights, checked
 * against hand-computed values and finite differences; Keras fans and default initializer;
 * destroy called once; a missing backward; user failures; definition and weight errors; and the
 * layer inside a Sequential model that trains. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* ---- a multi-input layer driven without a model ------------------------------------------- */

typedef struct mdrv {
    tnt_layer *l;
    int n;
    int64_t batch, in_n[TNT_MAX_LAYER_INPUTS], out_n;
    float *xs[TNT_MAX_LAYER_INPUTS], *dxs[TNT_MAX_LAYER_INPUTS];
    float *y, *pre, *dy;
} mdrv;

/* Builds l for n inputs (shapes without batch) as the model does, and allocates zeroed buffers. */
static void mdrv_init(mdrv *d, tnt_layer *l, int n, const tnt_shape *in, int64_t batch) {
    memset(d, 0, sizeof *d);
    assert_non_null(l);
    d->l = l;
    d->n = n;
    d->batch = batch;
    tu_ok(tnt__layer_build(l, n, in, ""));
    assert_int_equal(l->n_weights, 0);
    assert_null(l->ops->plan_create);
    assert_null(l->ops->workspace_size);
    for (int k = 0; k < n; k++) {
        d->in_n[k] = batch * tnt_shape_numel(in[k]);
        d->xs[k] = calloc((size_t)d->in_n[k], sizeof(float));
        d->dxs[k] = calloc((size_t)d->in_n[k], sizeof(float));
    }
    d->out_n = batch * tnt_shape_numel(l->out_shape);
    d->y = calloc((size_t)d->out_n, sizeof(float));
    d->pre = calloc((size_t)d->out_n, sizeof(float));
    d->dy = calloc((size_t)d->out_n, sizeof(float));
}

static void mdrv_free(mdrv *d) {
    for (int k = 0; k < d->n; k++) free(d->xs[k]), free(d->dxs[k]);
    free(d->y), free(d->pre), free(d->dy);
    tnt_layer_free(d->l);
}

static void mdrv_forward(mdrv *d, bool want_preact) {
    tnt__fwd_args a = {.batch = d->batch, .x = d->xs[0], .n_inputs = d->n, .xs = (const float *const *)d->xs,
                       .y = d->y, .preact = want_preact ? d->pre : NULL, .training = true, .seed = 1};
    tu_ok(d->l->ops->forward(d->l, NULL, &a));
}

/* want: bit k set = dxs[k] requested */
static void mdrv_backward(mdrv *d, unsigned want) {
    float *dxs[TNT_MAX_LAYER_INPUTS] = {0};
    for (int k = 0; k < d->n; k++) dxs[k] = (want >> k) & 1u ? d->dxs[k] : NULL;
    tnt__bwd_args a = {.batch = d->batch, .x = d->xs[0], .y = d->y, .dy = d->dy, .dx = dxs[0],
                       .n_inputs = d->n, .xs = (const float *const *)d->xs, .dxs = dxs};
    tu_ok(d->l->ops->backward(d->l, NULL, &a));
}

static void poison(float *x, int64_t n, float v) {
    for (int64_t i = 0; i < n; i++) x[i] = v;
}

/* One fixture case merge_NAME_*: forward (with and without preact), backward with every dx, each
 * dx alone, and none. Returns nothing; l is consumed. */
static void run_merge_case(const char *name, tnt_layer *l, int n) {
    char f[128];
    tnt_shape in[TNT_MAX_LAYER_INPUTS], s;
    int64_t batch = 0;
    for (int k = 0; k < n; k++) {
        snprintf(f, sizeof f, "merge_%s_x%d", name, k);
        free(tu_load(f, &s));
        batch = s.dim[0];
        in[k] = (tnt_shape){.ndim = s.ndim - 1};
        for (int i = 1; i < s.ndim; i++) in[k].dim[i - 1] = s.dim[i];
    }
    snprintf(f, sizeof f, "merge_%s_x%d", name, n);
    assert_false(fixture_exists(f)); /* the case has exactly n inputs */
    mdrv d;
    mdrv_init(&d, l, n, in, batch);
    for (int k = 0; k < n; k++) {
        snprintf(f, sizeof f, "merge_%s_x%d", name, k);
        load_into(d.xs[k], f, d.in_n[k]);
    }
    snprintf(f, sizeof f, "merge_%s_dy", name);
    load_into(d.dy, f, d.out_n);

    snprintf(f, sizeof f, "merge_%s_y", name);
    poison(d.y, d.out_n, 1e6f);
    mdrv_forward(&d, false);
    check(d.y, f, d.out_n, "y");
    poison(d.y, d.out_n, 1e6f);
    mdrv_forward(&d, true);
    check(d.y, f, d.out_n, "y (preact requested)");
    check(d.pre, f, d.out_n, "preact");

    /* all gradients, over poisoned buffers */
    for (int k = 0; k < n; k++) poison(d.dxs[k], d.in_n[k], 1e6f);
    mdrv_backward(&d, (1u << n) - 1);
    for (int k = 0; k < n; k++) {
        snprintf(f, sizeof f, "merge_%s_dx%d", name, k);
        check(d.dxs[k], f, d.in_n[k], "dx");
    }
    /* one gradient at a time: the others untouched */
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < n; k++) poison(d.dxs[k], d.in_n[k], 7.0f);
        mdrv_backward(&d, 1u << j);
        for (int k = 0; k < n; k++) {
            snprintf(f, sizeof f, "merge_%s_dx%d", name, k);
            if (k == j) check(d.dxs[k], f, d.in_n[k], "dx (requested alone)");
            else
                for (int64_t i = 0; i < d.in_n[k]; i++) assert_true(d.dxs[k][i] == 7.0f);
        }
    }
    mdrv_backward(&d, 0); /* nothing requested: nothing to do */
    mdrv_free(&d);
}

static void test_add(void **state) {
    (void)state;
    run_merge_case("add2", tnt_add(NULL), 2);
    run_merge_case("add3", tnt_add("my_add"), 3);
}

static void test_subtract(void **state) {
    (void)state;
    run_merge_case("sub2", tnt_subtract(NULL), 2);
}

static void test_multiply(void **state) {
    (void)state;
    run_merge_case("mul2", tnt_multiply(NULL), 2);
    run_merge_case("mul3", tnt_multiply(NULL), 3);
}

static void test_average(void **state) {
    (void)state;
    run_merge_case("avg2", tnt_average(NULL), 2);
    run_merge_case("avg3", tnt_average(NULL), 3);
}

static void test_maximum_minimum(void **state) {
    (void)state;
    run_merge_case("max2", tnt_maximum(NULL), 2);
    run_merge_case("max3", tnt_maximum(NULL), 3);
    run_merge_case("min2", tnt_minimum(NULL), 2);
    run_merge_case("min3", tnt_minimum(NULL), 3);
    /* inputs from {-1, 0, 1}: many ties, resolved as Keras/TensorFlow */
    run_merge_case("max2_ties", tnt_maximum(NULL), 2);
    run_merge_case("max3_ties", tnt_maximum(NULL), 3);
    run_merge_case("min2_ties", tnt_minimum(NULL), 2);
    run_merge_case("min3_ties", tnt_minimum(NULL), 3);
}

/* The tie rule by hand: dy goes to the first input (lowest index) that holds the extreme. */
static void test_tie_rule(void **state) {
    (void)state;
    const float x0[6] = {1, 2, 3, 5, 0, -1}, x1[6] = {1, 5, 3, 5, 0, -2}, x2[6] = {1, 5, 4, 4, 0, -2};
    const float dy[6] = {10, 20, 30, 40, 50, 60};
    /* maximum: 1 1 1 tie -> x0; x1 = x2 = 5 > 2 -> x1; x2 = 4 > 3 = 3 -> x2; 5 5 4 -> x0;
     * 0 0 0 -> x0; -1 > -2 -> x0 */
    const float max_dx[3][6] = {{10, 0, 0, 40, 50, 60}, {0, 20, 0, 0, 0, 0}, {0, 0, 30, 0, 0, 0}};
    /* minimum: 1 1 1 -> x0; 2 -> x0; 3 3 4 -> x0; 5 5 4 -> x2; 0 0 0 -> x0; -1 -2 -2 -> x1 */
    const float min_dx[3][6] = {{10, 20, 30, 0, 50, 0}, {0, 0, 0, 0, 0, 60}, {0, 0, 0, 40, 0, 0}};
    for (int is_max = 0; is_max < 2; is_max++) {
        mdrv d;
        tnt_shape in[3] = {TNT_SHAPE(3), TNT_SHAPE(3), TNT_SHAPE(3)};
        mdrv_init(&d, is_max ? tnt_maximum(NULL) : tnt_minimum(NULL), 3, in, 2);
        memcpy(d.xs[0], x0, sizeof x0), memcpy(d.xs[1], x1, sizeof x1), memcpy(d.xs[2], x2, sizeof x2);
        memcpy(d.dy, dy, sizeof dy);
        mdrv_forward(&d, false);
        for (int i = 0; i < 6; i++) {
            float e = is_max ? fmaxf(fmaxf(x0[i], x1[i]), x2[i]) : fminf(fminf(x0[i], x1[i]), x2[i]);
            assert_true(d.y[i] == e);
        }
        mdrv_backward(&d, 7u);
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 6; i++)
                if (d.dxs[k][i] != (is_max ? max_dx : min_dx)[k][i])
                    fail_msg("%s: dx%d[%d] = %g, expected %g", is_max ? "Maximum" : "Minimum", k, i,
                             (double)d.dxs[k][i], (double)(is_max ? max_dx : min_dx)[k][i]);
        mdrv_free(&d);
    }
}

static void test_concatenate(void **state) {
    (void)state;
    run_merge_case("concat_ax1", tnt_concatenate(1, NULL), 3);
    run_merge_case("concat_ax2", tnt_concatenate(2, NULL), 2);
    run_merge_case("concat_axm1", tnt_concatenate(-1, NULL), 3);
    /* -3 on rank 3 is Keras axis 1 */
    run_merge_case("concat_ax1", tnt_concatenate(-3, NULL), 3);
    /* output shapes */
    tnt_layer *l = tnt_concatenate(-1, NULL);
    tnt_shape in[2] = {TNT_SHAPE(4, 3), TNT_SHAPE(4, 5)};
    tu_ok(tnt__layer_build(l, 2, in, ""));
    assert_true(tnt__shape_equal(l->out_shape, TNT_SHAPE(4, 8)));
    tnt_layer_free(l);
    l = tnt_concatenate(1, NULL);
    tnt_shape in1[2] = {TNT_SHAPE(2), TNT_SHAPE(7)};
    tu_ok(tnt__layer_build(l, 2, in1, ""));
    assert_true(tnt__shape_equal(l->out_shape, TNT_SHAPE(9)));
    tnt_layer_free(l);
}

/* Large tensors take the OpenMP path (blocks, a partial last one): compare with scalar code. */
static void test_large_openmp(void **state) {
    (void)state;
    const tnt_shape s = TNT_SHAPE(31, 33, 64);
    const int64_t batch = 4, N = batch * 31 * 33 * 64;
    tnt_layer *(*ctor[6])(const char *) = {tnt_add, tnt_subtract, tnt_multiply, tnt_average, tnt_maximum, tnt_minimum};
    for (int op = 0; op < 6; op++) {
        const int n = op == 1 ? 2 : 3;
        tnt_shape in[3] = {s, s, s};
        mdrv d;
        mdrv_init(&d, ctor[op](NULL), n, in, batch);
        for (int k = 0; k < n; k++) {
            tu_fill(d.xs[k], N, 100 + (uint64_t)k);
            for (int64_t i = 0; i < N; i += 97) d.xs[k][i] = 0.25f; /* some ties */
        }
        tu_fill(d.dy, N, 200);
        mdrv_forward(&d, false);
        for (int k = 0; k < n; k++) poison(d.dxs[k], N, 1e6f);
        mdrv_backward(&d, (1u << n) - 1);
        for (int64_t i = 0; i < N; i++) {
            const float a = d.xs[0][i], b = d.xs[1][i], c = n > 2 ? d.xs[2][i] : 0.0f, g = d.dy[i];
            float y, dx[3];
            switch (op) {
            case 0: y = (a + b) + c, dx[0] = dx[1] = dx[2] = g; break;
            case 1: y = a - b, dx[0] = g, dx[1] = -g; break;
            case 2: y = (a * b) * c, dx[0] = g * b * c, dx[1] = g * a * c, dx[2] = g * a * b; break;
            case 3: y = ((a + b) + c) / 3.0f, dx[0] = dx[1] = dx[2] = g * (1.0f / 3.0f); break;
            default: {
                const bool mx = op == 4;
                int arg = 0;
                float best = a;
                if (mx ? b > best : b < best) best = b, arg = 1;
                if (mx ? c > best : c < best) best = c, arg = 2;
                y = best;
                for (int k = 0; k < 3; k++) dx[k] = k == arg ? g : 0.0f;
            }
            }
            if (fabsf(d.y[i] - y) > 1e-6f * fmaxf(1.0f, fabsf(y)))
                fail_msg("%s y[%lld] = %g, expected %g", tnt_layer_class(d.l), (long long)i, (double)d.y[i], (double)y);
            for (int k = 0; k < n; k++)
                if (fabsf(d.dxs[k][i] - dx[k]) > 1e-6f * fmaxf(1.0f, fabsf(dx[k])))
                    fail_msg("%s dx%d[%lld] = %g, expected %g", tnt_layer_class(d.l), k, (long long)i,
                             (double)d.dxs[k][i], (double)dx[k]);
        }
        mdrv_free(&d);
    }
    /* Concatenate on the last axis of a large tensor */
    tnt_shape in[2] = {TNT_SHAPE(31, 33, 64), TNT_SHAPE(31, 33, 32)};
    mdrv d;
    mdrv_init(&d, tnt_concatenate(-1, NULL), 2, in, batch);
    tu_fill(d.xs[0], d.in_n[0], 1), tu_fill(d.xs[1], d.in_n[1], 2), tu_fill(d.dy, d.out_n, 3);
    mdrv_forward(&d, false);
    mdrv_backward(&d, 3u);
    for (int64_t r = 0; r < batch * 31 * 33; r++) {
        assert_memory_equal(d.y + r * 96, d.xs[0] + r * 64, 64 * sizeof(float));
        assert_memory_equal(d.y + r * 96 + 64, d.xs[1] + r * 32, 32 * sizeof(float));
        assert_memory_equal(d.dxs[0] + r * 64, d.dy + r * 96, 64 * sizeof(float));
        assert_memory_equal(d.dxs[1] + r * 32, d.dy + r * 96 + 64, 32 * sizeof(float));
    }
    mdrv_free(&d);
}

static void test_merge_properties(void **state) {
    (void)state;
    struct { tnt_layer *l; const char *cls, *base; bool masking; } c[7] = {
        {tnt_add(NULL), "Add", "add", true},
        {tnt_subtract(NULL), "Subtract", "subtract", true},
        {tnt_multiply(NULL), "Multiply", "multiply", true},
        {tnt_average(NULL), "Average", "average", true},
        {tnt_maximum(NULL), "Maximum", "maximum", true},
        {tnt_minimum(NULL), "Minimum", "minimum", true},
        {tnt_concatenate(-1, NULL), "Concatenate", "concatenate", true},
    };
    for (int i = 0; i < 7; i++) {
        assert_non_null(c[i].l);
        assert_string_equal(tnt_layer_class(c[i].l), c[i].cls);
        char b[64];
        tnt__layer_base_name(c[i].cls, b, sizeof b);
        assert_string_equal(b, c[i].base);
        assert_true(c[i].l->auto_name);
        assert_non_null(c[i].l->ops->build_multi);
        assert_null(c[i].l->ops->build);
        assert_true(c[i].l->ops->supports_masking == c[i].masking);
        tnt_layer_free(c[i].l);
    }
    tnt_layer *l = tnt_add("res_add");
    assert_string_equal(tnt_layer_name(l), "res_add");
    tnt_layer_free(l);
}

static void test_merge_errors(void **state) {
    (void)state;
    tnt_shape out;
    tnt_shape two[3] = {TNT_SHAPE(2, 3), TNT_SHAPE(2, 3), TNT_SHAPE(2, 3)};
    /* one input */
    tnt_layer *(*ctor[6])(const char *) = {tnt_add, tnt_subtract, tnt_multiply, tnt_average, tnt_maximum, tnt_minimum};
    for (int op = 0; op < 6; op++) {
        tnt_layer *l = ctor[op]("m");
        assert_int_equal(l->ops->build_multi(l, 1, two, &out), TNT_ERR_ARG);
        tu_error_contains(tnt_layer_class(l));
        tu_error_contains("\"m\"");
        tu_error_contains("1 input(s) of shape (2, 3)");
        tu_error_contains(op == 1 ? "exactly 2" : "at least 2");
        tnt_layer_free(l);
    }
    /* Subtract takes exactly two */
    tnt_layer *l = tnt_subtract("sub");
    assert_int_equal(l->ops->build_multi(l, 3, two, &out), TNT_ERR_ARG);
    tu_error_contains("Subtract \"sub\": called on 3 input(s)");
    tnt_layer_free(l);
    /* mismatched shapes, also through the model's build (prefixed) */
    tnt_shape bad[3] = {TNT_SHAPE(2, 3), TNT_SHAPE(2, 3), TNT_SHAPE(3, 2)};
    l = tnt_multiply("mul");
    assert_int_equal(l->ops->build_multi(l, 3, bad, &out), TNT_ERR_SHAPE);
    tu_error_contains("Multiply \"mul\": input 2 has shape (3, 2) and input 0 has shape (2, 3)");
    tu_error_contains("do not broadcast");
    assert_int_equal(tnt__layer_build(l, 3, bad, ""), TNT_ERR_SHAPE);
    tu_error_contains("input 2 has shape (3, 2)");
    assert_false(l->built);
    tnt_layer_free(l);
    tnt_shape rank[2] = {TNT_SHAPE(6), TNT_SHAPE(2, 3)};
    l = tnt_add(NULL);
    assert_int_equal(l->ops->build_multi(l, 2, rank, &out), TNT_ERR_SHAPE);
    tu_error_contains("input 1 has shape (2, 3) and input 0 has shape (6,)");
    tnt_layer_free(l);
    /* shapes that broadcast as Keras's _Merge: leading axes of size 1 for a lower rank, then 1s */
    tnt_shape bc[3][2] = {{TNT_SHAPE(4), TNT_SHAPE(1, 4)}, {TNT_SHAPE(3, 1), TNT_SHAPE(3, 4)},
                          {TNT_SHAPE(2, 1, 4), TNT_SHAPE(3, 1)}};
    tnt_shape bc_out[3] = {TNT_SHAPE(1, 4), TNT_SHAPE(3, 4), TNT_SHAPE(2, 3, 4)};
    for (int i = 0; i < 3; i++) {
        l = tnt_multiply(NULL);
        assert_int_equal(l->ops->build_multi(l, 2, bc[i], &out), TNT_OK);
        assert_true(tnt__shape_equal(out, bc_out[i]));
        tnt_layer_free(l);
    }

    /* Concatenate */
    tnt_shape r3[2] = {TNT_SHAPE(2, 3, 4), TNT_SHAPE(2, 3, 5)};
    l = tnt_concatenate(1, "cat");
    assert_int_equal(l->ops->build_multi(l, 1, r3, &out), TNT_ERR_ARG);
    tu_error_contains("Concatenate \"cat\" (axis 1): called on 1 input(s) of shape (2, 3, 4)");
    /* axis 1 needs the other axes (3, 4 vs 3, 5) to agree */
    assert_int_equal(l->ops->build_multi(l, 2, r3, &out), TNT_ERR_SHAPE);
    tu_error_contains("Concatenate \"cat\" (axis 1): input 1 has shape (2, 3, 5) and input 0 has shape (2, 3, 4)");
    tnt_layer_free(l);
    const int bad_axes[4] = {4, 7, -5, 100};
    for (int i = 0; i < 4; i++) {
        l = tnt_concatenate(bad_axes[i], "cat");
        assert_int_equal(l->ops->build_multi(l, 2, r3, &out), TNT_ERR_ARG);
        char want[64];
        snprintf(want, sizeof want, "Concatenate \"cat\": axis %d is out of range", bad_axes[i]);
        tu_error_contains(want);
        tu_error_contains("(2, 3, 4)");
        tu_error_contains("expected 1..3 or -3..-1");
        tnt_layer_free(l);
    }
    const int batch_axes[2] = {0, -4};
    for (int i = 0; i < 2; i++) {
        l = tnt_concatenate(batch_axes[i], "cat");
        assert_int_equal(l->ops->build_multi(l, 2, r3, &out), TNT_ERR_UNSUPPORTED);
        tu_error_contains("is the batch axis");
        tu_error_contains("(2, 3, 4)");
        tnt_layer_free(l);
    }
    tnt_shape rk[2] = {TNT_SHAPE(2, 3, 4), TNT_SHAPE(2, 3)};
    l = tnt_concatenate(-1, "cat");
    assert_int_equal(l->ops->build_multi(l, 2, rk, &out), TNT_ERR_SHAPE);
    tu_error_contains("input 1 has shape (2, 3) and input 0 has shape (2, 3, 4)");
    tnt_layer_free(l);
    tnt_shape r0[2] = {TNT_SHAPE(), TNT_SHAPE()};
    r0[0].ndim = r0[1].ndim = 0;
    l = tnt_concatenate(-1, "cat");
    assert_int_equal(l->ops->build_multi(l, 2, r0, &out), TNT_ERR_SHAPE);
    tu_error_contains("without a non-batch axis");
    tnt_layer_free(l);
    /* too long a name */
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[99] = '\0';
    assert_null(tnt_add(longname));
    tu_error_contains("Add: name");
}

/* ---- custom layers ------------------------------------------------------------------------ */

/* y = x W + b on features: x (in), W (in, out), b (out); plus state: a scalar count of training
 * forwards and an unused rank-4 weight (to check Keras fans). */
typedef struct affine_user {
    int64_t in, out;
    int destroyed, forwards, backwards;
    int iw, ib, icount, iaux;
    tnt_status fail_forward; /* != TNT_OK: forward fails with it */
    bool fail_with_message;
} affine_user;

static tnt_status affine_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    affine_user *u = user;
    if (in.ndim != 1) return TNT_ERR_SHAPE; /* no message: the wrapper names the layer */
    u->in = in.dim[0];
    u->iw = tnt_layer_add_weight(l, "kernel", TNT_SHAPE(u->in, u->out), TNT_INIT_DEFAULT, true);
    u->ib = tnt_layer_add_weight(l, "bias", TNT_SHAPE(u->out), TNT_INIT_ZEROS, true);
    tnt_shape scalar = {.ndim = 0};
    u->icount = tnt_layer_add_weight(l, "count", scalar, TNT_INIT_ZEROS, false);
    u->iaux = tnt_layer_add_weight(l, "aux", TNT_SHAPE(2, 3, 4, 5), TNT_INIT_HE_NORMAL, false);
    if (u->iw < 0 || u->ib < 0 || u->icount < 0 || u->iaux < 0) return TNT_ERR_ARG;
    *out = TNT_SHAPE(u->out);
    return TNT_OK;
}

static tnt_status affine_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    affine_user *u = user;
    if (u->fail_forward != TNT_OK) {
        if (u->fail_with_message) tnt_layer_weight_value(l, 99); /* sets an error message */
        return u->fail_forward;
    }
    const float *w = tnt_layer_weight_value(l, u->iw), *b = tnt_layer_weight_value(l, u->ib);
    if (!w || !b) return TNT_ERR_STATE;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t j = 0; j < u->out; j++) {
            double s = b[j];
            for (int64_t i = 0; i < u->in; i++) s += (double)x[n * u->in + i] * w[i * u->out + j];
            y[n * u->out + j] = (float)s;
        }
    if (training) tnt_layer_weight_value(l, u->icount)[0] += 1.0f;
    u->forwards++;
    return TNT_OK;
}

static tnt_status affine_backward(tnt_layer *l, int64_t batch, const float *x, const float *y, const float *dy,
                                  float *dx, void *user) {
    (void)y;
    affine_user *u = user;
    const float *w = tnt_layer_weight_value(l, u->iw);
    float *dw = tnt_layer_weight_grad(l, u->iw), *db = tnt_layer_weight_grad(l, u->ib);
    if (tnt_layer_weight_grad(l, u->icount) != NULL) return TNT_ERR_STATE; /* state: no gradient */
    if (dw) memset(dw, 0, (size_t)(u->in * u->out) * sizeof(float));
    if (db) memset(db, 0, (size_t)u->out * sizeof(float));
    for (int64_t n = 0; n < batch; n++)
        for (int64_t j = 0; j < u->out; j++) {
            const float g = dy[n * u->out + j];
            if (db) db[j] += g;
            if (dw)
                for (int64_t i = 0; i < u->in; i++) dw[i * u->out + j] += x[n * u->in + i] * g;
        }
    if (dx)
        for (int64_t n = 0; n < batch; n++)
            for (int64_t i = 0; i < u->in; i++) {
                double s = 0;
                for (int64_t j = 0; j < u->out; j++) s += (double)w[i * u->out + j] * dy[n * u->out + j];
                dx[n * u->in + i] = (float)s;
            }
    u->backwards++;
    return TNT_OK;
}

static void affine_destroy(void *user) { ((affine_user *)user)->destroyed++; }

static tnt_custom_layer_def affine_def(affine_user *u) {
    return (tnt_custom_layer_def){.class_name = "AffineMap", .user = u, .build = affine_build,
                                  .forward = affine_forward, .backward = affine_backward,
                                  .destroy = affine_destroy};
}

static void test_custom_layer(void **state) {
    (void)state;
    affine_user u = {.out = 2};
    tnt_custom_layer_def def = affine_def(&u);
    tnt_layer *l = tnt_custom_layer(&def, NULL);
    assert_non_null(l);
    def.class_name = "Changed"; /* the layer keeps its own copy */
    assert_string_equal(tnt_layer_class(l), "AffineMap");
    char b[64];
    tnt__layer_base_name(tnt_layer_class(l), b, sizeof b);
    assert_string_equal(b, "affine_map");
    assert_true(l->auto_name);

    drv d;
    drv_init(&d, l, TNT_SHAPE(3), 2);
    assert_true(tnt__shape_equal(l->out_shape, TNT_SHAPE(2)));
    assert_int_equal(l->n_weights, 4);
    /* Keras fans and the resolved default initializer */
    assert_string_equal(l->weights[u.iw].name, "kernel");
    assert_int_equal(l->weights[u.iw].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[u.iw].fan_in, 3);
    assert_int_equal(l->weights[u.iw].fan_out, 2);
    assert_int_equal(l->weights[u.ib].fan_in, 2);
    assert_int_equal(l->weights[u.ib].fan_out, 2);
    assert_int_equal(l->weights[u.icount].fan_in, 1);
    assert_int_equal(l->weights[u.icount].fan_out, 1);
    assert_int_equal(l->weights[u.iaux].fan_in, 4 * 6);
    assert_int_equal(l->weights[u.iaux].fan_out, 5 * 6);
    assert_true(l->weights[u.iw].trainable && l->weights[u.ib].trainable);
    assert_false(l->weights[u.icount].trainable || l->weights[u.iaux].trainable);

    /* hand-computed forward and backward */
    const float W[6] = {1, -2, 0.5f, 3, -1, 0.25f}, B[2] = {0.5f, -1};
    const float X[6] = {1, 2, 3, -1, 0, 2}, DY[4] = {1, -1, 2, 0.5f};
    memcpy(l->weights[u.iw].value, W, sizeof W);
    memcpy(l->weights[u.ib].value, B, sizeof B);
    memcpy(d.x, X, sizeof X);
    memcpy(d.dy, DY, sizeof DY);
    drv_forward(&d, true);
    /* row 0: [1*1 + 2*0.5 + 3*-1 + 0.5, 1*-2 + 2*3 + 3*0.25 - 1] = [-0.5, 3.75]
     * row 1: [-1*1 + 0 + 2*-1 + 0.5, -1*-2 + 0 + 2*0.25 - 1] = [-2.5, 1.5] */
    const float Y[4] = {-0.5f, 3.75f, -2.5f, 1.5f};
    tu_assert_close(d.y, Y, 4, 1e-6, 1e-6, "custom y");
    tu_assert_close(d.pre, Y, 4, 1e-6, 1e-6, "custom preact");
    assert_true(l->weights[u.icount].value[0] == 1.0f);
    poison_grads(l);
    drv_backward(&d, true, false);
    /* dW[i][j] = sum_n x[n][i] dy[n][j]; db = sum_n dy; dx[n][i] = sum_j W[i][j] dy[n][j] */
    const float DW[6] = {1 - 2, -1 - 0.5f, 2, -2, 3 + 4, -3 + 1}, DB[2] = {3, -0.5f};
    const float DX[6] = {1 + 2, 0.5f - 3, -1 - 0.25f, 2 - 1, 1 + 1.5f, -2 + 0.125f};
    tu_assert_close(l->weights[u.iw].grad, DW, 6, 1e-6, 1e-6, "custom dW");
    tu_assert_close(l->weights[u.ib].grad, DB, 2, 1e-6, 1e-6, "custom db");
    tu_assert_close(d.dx, DX, 6, 1e-6, 1e-6, "custom dx");
    assert_int_equal(u.forwards, 1);
    assert_int_equal(u.backwards, 1);
    /* without dx: the weight gradients still come */
    poison_grads(l);
    poison(d.dx, 6, 7.0f);
    drv_backward(&d, false, false);
    tu_assert_close(l->weights[u.ib].grad, DB, 2, 1e-6, 1e-6, "custom db (dx NULL)");
    for (int i = 0; i < 6; i++) assert_true(d.dx[i] == 7.0f);

    /* weight accessors */
    assert_ptr_equal(tnt_layer_weight_value(l, u.iw), l->weights[u.iw].value);
    assert_ptr_equal(tnt_layer_weight_grad(l, u.ib), l->weights[u.ib].grad);
    assert_null(tnt_layer_weight_grad(l, u.icount));
    tu_error_contains("\"count\"");
    tu_error_contains("not trainable");
    assert_null(tnt_layer_weight_value(l, 4));
    tu_error_contains("has no weight 4 (it has 4)");
    assert_null(tnt_layer_weight_value(l, -1));
    tu_error_contains("has no weight -1");
    assert_null(tnt_layer_weight_grad(l, 17));
    tu_error_contains("tnt_layer_weight_grad");
    assert_null(tnt_layer_weight_value(NULL, 0));
    tu_error_contains("layer is NULL");
    /* weights only in build */
    assert_int_equal(tnt_layer_add_weight(l, "late", TNT_SHAPE(2), TNT_INIT_ZEROS, true), -1);
    tu_error_contains("only be declared in the build function of a custom layer");

    assert_int_equal(u.destroyed, 0);
    drv_free(&d, true);
    assert_int_equal(u.destroyed, 1); /* once */

    /* finite differences of the whole contract (kernel, bias, x) */
    affine_user u2 = {.out = 3};
    tnt_custom_layer_def def2 = affine_def(&u2);
    fd_check(tnt_custom_layer(&def2, "affine_fd"), TNT_SHAPE(4), 3);
    assert_int_equal(u2.destroyed, 1);
}

static tnt_status identity_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l, (void)user;
    *out = in;
    return TNT_OK;
}
static tnt_status identity_forward(tnt_layer *l, int64_t batch, const float *x, float *y, bool training, void *user) {
    (void)training, (void)user;
    memcpy(y, x, (size_t)(batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
    return TNT_OK;
}
static tnt_status bad_shape_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)l, (void)user;
    *out = in;
    out->dim[0] = 0;
    return TNT_OK;
}

static int weight_case; /* which bad tnt_layer_add_weight call weight_build makes */
#define STR_(x) #x
#define STR(x) STR_(x)
#define MAX_WEIGHTS_STR STR(TNT_MAX_LAYER_WEIGHTS)
static tnt_status weight_build(tnt_layer *l, tnt_shape in, tnt_shape *out, void *user) {
    (void)user;
    *out = in;
    int k = -1;
    switch (weight_case) {
    case 0: k = tnt_layer_add_weight(l, NULL, TNT_SHAPE(2), TNT_INIT_ZEROS, true); break;
    case 1: k = tnt_layer_add_weight(l, "", TNT_SHAPE(2), TNT_INIT_ZEROS, true); break;
    case 2: k = tnt_layer_add_weight(l, "w", TNT_SHAPE(2, 0), TNT_INIT_ZEROS, true); break;
    case 3:
        tnt_layer_add_weight(l, "w", TNT_SHAPE(2), TNT_INIT_ZEROS, true);
        k = tnt_layer_add_weight(l, "w", TNT_SHAPE(3), TNT_INIT_ZEROS, true);
        break;
    case 4: k = tnt_layer_add_weight(l, "w", TNT_SHAPE(2), (tnt_initializer)99, true); break;
    case 5:
        for (int i = 0; i <= TNT_MAX_LAYER_WEIGHTS; i++) {
            char n[16];
            snprintf(n, sizeof n, "w%d", i);
            k = tnt_layer_add_weight(l, n, TNT_SHAPE(1), TNT_INIT_ZEROS, true);
        }
        break;
    }
    return k < 0 ? TNT_ERR_ARG : TNT_OK;
}

static void test_custom_errors(void **state) {
    (void)state;
    affine_user u = {.out = 2};
    tnt_custom_layer_def def = affine_def(&u);
    tnt_custom_layer_def bad;

    /* the definition */
    assert_null(tnt_custom_layer(NULL, NULL));
    tu_error_contains("def is NULL");
    bad = def, bad.class_name = NULL;
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("class_name is NULL");
    bad = def, bad.class_name = "";
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("class_name is empty");
    bad = def, bad.class_name = "3Layer";
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("class_name \"3Layer\"");
    bad = def, bad.class_name = "My Layer";
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("identifier");
    bad = def, bad.build = NULL;
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("AffineMap: the build function is NULL");
    bad = def, bad.forward = NULL;
    assert_null(tnt_custom_layer(&bad, NULL));
    tu_error_contains("the forward function is NULL");
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[99] = '\0';
    assert_null(tnt_custom_layer(&def, longname));
    tu_error_contains("AffineMap: name");
    assert_int_equal(u.destroyed, 0); /* never created: the caller keeps user */

    /* build failures */
    tnt_shape out;
    tnt_layer *l = tnt_custom_layer(&def, "aff");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(2, 3), &out), TNT_ERR_SHAPE);
    tu_error_contains("custom layer AffineMap \"aff\": build failed (TNT_ERR_SHAPE) without a message");
    assert_int_equal(l->n_weights, 0);
    assert_int_equal(tnt__layer_build(l, 1, &TNT_SHAPE(2, 3), ""), TNT_ERR_SHAPE);
    tu_error_contains("build failed");
    assert_int_equal(tnt__layer_build(l, 2, (tnt_shape[2]){TNT_SHAPE(2), TNT_SHAPE(2)}, ""), TNT_ERR_ARG);
    tu_error_contains("takes one input");
    tnt_layer_free(l);
    assert_int_equal(u.destroyed, 1);

    bad = def, bad.build = bad_shape_build;
    l = tnt_custom_layer(&bad, "aff");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 3), &out), TNT_ERR_SHAPE);
    tu_error_contains("build gave output shape (0, 3) for input shape (4, 3)");
    tnt_layer_free(l);

    const char *weight_msgs[6] = {"weight name NULL", "weight name \"\"", "has shape (2, 0)",
                                  "weight \"w\" declared twice", "unknown initializer 99", "more than " MAX_WEIGHTS_STR " weights"};
    for (weight_case = 0; weight_case < 6; weight_case++) {
        bad = (tnt_custom_layer_def){.class_name = "Weights", .build = weight_build, .forward = identity_forward};
        l = tnt_custom_layer(&bad, "wl");
        assert_int_equal(l->ops->build(l, TNT_SHAPE(2), &out), TNT_ERR_ARG);
        tu_error_contains("custom layer Weights \"wl\"");
        tu_error_contains(weight_msgs[weight_case]);
        assert_int_equal(l->n_weights, 0);
        tnt_layer_free(l);
    }
    /* weights of layers that are not custom ones */
    l = tnt_add(NULL);
    assert_int_equal(tnt_layer_add_weight(l, "w", TNT_SHAPE(1), TNT_INIT_ZEROS, true), -1);
    tu_error_contains("(Add): weights can only be declared");
    tnt_layer_free(l);
    assert_int_equal(tnt_layer_add_weight(NULL, "w", TNT_SHAPE(1), TNT_INIT_ZEROS, true), -1);

    /* a failing forward, without and with its own message */
    u = (affine_user){.out = 2};
    l = tnt_custom_layer(&def, "aff");
    drv d;
    drv_init(&d, l, TNT_SHAPE(3), 2);
    u.fail_forward = TNT_ERR_UNSUPPORTED;
    tnt__fwd_args fa = {.batch = 2, .x = d.x, .y = d.y, .training = true};
    assert_int_equal(l->ops->forward(l, NULL, &fa), TNT_ERR_UNSUPPORTED);
    tu_error_contains("custom layer AffineMap \"aff\": forward failed (TNT_ERR_UNSUPPORTED) without a message");
    u.fail_with_message = true;
    assert_int_equal(l->ops->forward(l, NULL, &fa), TNT_ERR_UNSUPPORTED);
    tu_error_contains("custom layer AffineMap \"aff\": forward: ");
    tu_error_contains("has no weight 99");
    drv_free(&d, true);

    /* no backward: a clear error once training needs it; nothing needed, no error */
    tnt_custom_layer_def fwd_only = {.class_name = "FwdOnly", .build = identity_build, .forward = identity_forward};
    l = tnt_custom_layer(&fwd_only, "fo");
    drv_init(&d, l, TNT_SHAPE(3), 2);
    drv_forward(&d, false);
    tnt__bwd_args ba = {.batch = 2, .x = d.x, .y = d.y, .dy = d.dy, .dx = d.dx};
    assert_int_equal(l->ops->backward(l, NULL, &ba), TNT_ERR_UNSUPPORTED);
    tu_error_contains("custom layer FwdOnly \"fo\"");
    tu_error_contains("no backward function");
    ba.dx = NULL;
    tu_ok(l->ops->backward(l, NULL, &ba));
    drv_free(&d, true);
}

/* A custom layer inside a Sequential model: weights from the model, gradients, state, training. */
static void test_custom_in_model(void **state) {
    (void)state;
    affine_user u = {.out = 3};
    tnt_custom_layer_def def = affine_def(&u);
    tnt_model *m = tnt_sequential("custom_model");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(6), NULL)));
    tu_ok(tnt_model_add(m, tnt_custom_layer(&def, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){
        .optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.1f, .momentum = 0.9f}),
        .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 5}));
    const int64_t custom = 6 * 3 + 3 + 1 + 120, dense = 3 * 3 + 3;
    assert_int_equal(tnt_model_count_params(m), custom + dense);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    assert_non_null(strstr(buf, "affine_map (AffineMap)"));
    assert_non_null(strstr(buf, "Non-trainable params: 121"));
    free(buf);

    enum { N = 96 };
    float x[N * 6], y[N];
    tu_fill(x, N * 6, 31);
    for (int i = 0; i < N; i++) {
        float s0 = x[i * 6] + x[i * 6 + 1], s1 = x[i * 6 + 2] - x[i * 6 + 3], s2 = x[i * 6 + 4];
        y[i] = (float)(s0 > s1 ? (s0 > s2 ? 0 : 2) : (s1 > s2 ? 1 : 2));
    }
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(6), y, TNT_SHAPE(), N, true), 16, false);
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 6}, &h));
    assert_true(tnt_history_get(h, "loss", 5) < 0.8 * tnt_history_get(h, "loss", 0));
    tnt_history_free(h);
    assert_int_equal(u.forwards, 6 * 6);
    assert_int_equal(u.backwards, 6 * 6);
    /* the state weight "count" counted the training forwards (index 20: after kernel and bias) */
    float *w = malloc((size_t)(custom + dense) * sizeof(float));
    tu_ok(tnt_get_weights(m, w, custom + dense));
    assert_true(w[18 + 3] == 36.0f);
    free(w);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    assert_int_equal(u.destroyed, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_subtract),
        cmocka_unit_test(test_multiply),
        cmocka_unit_test(test_average),
        cmocka_unit_test(test_maximum_minimum),
        cmocka_unit_test(test_tie_rule),
        cmocka_unit_test(test_concatenate),
        cmocka_unit_test(test_large_openmp),
        cmocka_unit_test(test_merge_properties),
        cmocka_unit_test(test_merge_errors),
        cmocka_unit_test(test_custom_layer),
        cmocka_unit_test(test_custom_errors),
        cmocka_unit_test(test_custom_in_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
