/* test_mixed_precision.c: Keras's mixed_bfloat16 policy.
 *   - each layer with a bf16 engine (Dense, Conv2D, Conv1D, DepthwiseConv2D, MultiHeadAttention):
 *     forward, dx and every weight gradient of a mixed_bfloat16 layer against the same layer in
 *     float32, within a bf16 tolerance (1e-2 of the reference's largest value), and not equal to
 *     it (the bf16 engine ran), where the CPU and the ISA caps let it run; elsewhere bit for bit
 *     (the float32 fallback), so that every CPU tests what it does;
 *   - the policy API: global and per layer, names checked with clear errors;
 *   - Keras configs: "dtype": "mixed_bfloat16" (Keras 2) and DTypePolicy objects (Keras 3) read,
 *     written and round-tripped through JSON, .h5 and .keras files;
 *   - training: a mixed model's loss falls and follows float32 within tolerance; weights,
 *     gradients and the optimizer slots stay float32 (values bf16 cannot hold); a model read from
 *     a file carrying mixed_bfloat16 trains in bf16;
 *   - a CPU without native bf16 (forced): the layers compute float32, bit for bit; whether the
 *     engine runs follows the CPU's avx512_bf16 and the caps ONEDNN_MAX_CPU_ISA, TNT_MAX_CPU_ISA.
 * tests/CMakeLists.txt runs it a second time with TNT_MAX_CPU_ISA=avx2 (the fallback on a bf16 CPU). */
#include "layer_harness.h"

#include "kernels/bf16.h"
#include "layers/layer.h"
#include "model/model.h"
#include "optimizers/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zip.h>

/* bf16 keeps 8 significant bits: each product of bf16-rounded operands is off by up to ~2^-8
 * relative, and sums of them with float32 accumulation by ~2^-8 / sqrt(terms) of their norm. The
 * checks: the relative L2 error within 1e-2, and no element off by more than 5e-2 of the largest
 * reference value (a sum whose terms cancel can lose more than its share, relatively). */
#define BF16_RTOL 1e-2
#define BF16_MAXTOL 5e-2

/* got (bf16 engine) against ref (float32) within rtol relative L2; differs: got != ref somewhere
 * (the bf16 engine ran). */
static void assert_close_rtol(const float *got, const float *ref, int64_t n, bool differs, double rtol, const char *what) {
    double worst = 0, scale = max_abs(ref, n), e2 = 0, r2 = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        e2 += e * e, r2 += (double)ref[i] * ref[i];
        if (e > worst) worst = e, at = i;
    }
    double rel = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
    if (getenv("TNT_TEST_VERBOSE")) print_message("%s: relative L2 %.2e, max %.2e of max|ref|\n", what, rel, worst / scale);
    if (rel > rtol || worst > BF16_MAXTOL * scale + 1e-12)
        fail_msg("%s: |bf16 - f32| relative L2 %.3g (at most %.0e), largest %.3g at %lld (%g against %g) (at most "
                 "%.0e x max|f32| %.3g)", what, rel, rtol, worst, (long long)at, (double)got[at], (double)ref[at],
                 BF16_MAXTOL, scale);
    if (differs && worst == 0) fail_msg("%s: bf16 equals float32 bit for bit: the bf16 engine did not run", what);
}
static void assert_bf16_close(const float *got, const float *ref, int64_t n, bool differs, const char *what) {
    assert_close_rtol(got, ref, n, differs, BF16_RTOL, what);
}

/* ---- single-input layers through the layer harness ---------------------------------------- */

typedef tnt_layer *(*make_fn)(void);

static tnt_layer *dense_relu(void) { return tnt_dense(48, &(tnt_layer_opts){.activation = TNT_ACT_RELU}); }
static tnt_layer *dense_gelu(void) { return tnt_dense(24, &(tnt_layer_opts){.activation = TNT_ACT_GELU}); }
static tnt_layer *dense_linear(void) { return tnt_dense(16, NULL); }
static tnt_layer *conv_relu(void) {
    return tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU});
}
static tnt_layer *conv_strided(void) { return tnt_conv2d(16, 3, 3, &(tnt_layer_opts){.strides = {2, 2}}); }
static tnt_layer *conv1d_causal(void) {
    return tnt_conv1d(12, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL, .dilation = {2}, .activation = TNT_ACT_TANH});
}
static tnt_layer *depthwise(void) { return tnt_depthwise_conv2d(3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}); }
static tnt_layer *conv3d_relu(void) {
    return tnt_conv3d(6, (int[3]){3, 3, 2}, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU});
}
static tnt_layer *conv_channels_first(void) {
    tnt_layer *l = conv_relu();
    return l && tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST) == TNT_OK ? l : NULL;
}

/* got equals ref within rtol where the bf16 engine runs, else bit for bit */
static void check_policy_rtol(bool bf16, const float *got, const float *ref, int64_t n, bool differs, double rtol,
                              const char *what) {
    if (bf16) assert_close_rtol(got, ref, n, differs, rtol, what);
    else if (memcmp(got, ref, (size_t)n * sizeof(float))) fail_msg("%s: differs from float32 (no bf16 engine here)", what);
}

/* got equals ref within the bf16 tolerance where the bf16 engine runs, else bit for bit */
static void check_policy(bool bf16, const float *got, const float *ref, int64_t n, bool differs, const char *what) {
    if (bf16) assert_bf16_close(got, ref, n, differs, what);
    else if (memcmp(got, ref, (size_t)n * sizeof(float))) fail_msg("%s: differs from float32 (no bf16 engine here)", what);
}

/* The layer made by mk in float32 and in mixed_bfloat16, with the same weights and input: y,
 * the pre-activation, dx and the weight gradients agree within the bf16 tolerance (bf16: the
 * layer has a bf16 engine), or bit for bit (a layer that runs float32 under the policy). */
static void compare_layer_as(const char *name, make_fn mk, tnt_shape in, int64_t batch, bool bf16) {
    tnt_layer *a = mk(), *b = mk();
    assert_non_null(a), assert_non_null(b);
    tu_ok(tnt_layer_set_dtype_policy(b, "mixed_bfloat16"));
    assert_string_equal(tnt_layer_dtype_policy(b), "mixed_bfloat16");
    assert_string_equal(tnt_layer_dtype_policy(a), "float32");
    drv f, h;
    drv_init(&f, a, in, batch);
    drv_init(&h, b, in, batch);
    tu_fill(f.x, in_numel(&f), 5);
    memcpy(h.x, f.x, (size_t)in_numel(&f) * sizeof(float));
    tu_fill(f.dy, out_numel(&f), 6);
    memcpy(h.dy, f.dy, (size_t)out_numel(&f) * sizeof(float));
    char what[96];
    for (int pass = 0; pass < 2; pass++) { /* without, then with the pre-activation kept */
        drv_forward(&f, pass == 1);
        drv_forward(&h, pass == 1);
        snprintf(what, sizeof what, "%s: y%s", name, pass ? " (preact kept)" : "");
        check_policy(bf16, h.y, f.y, out_numel(&f), true, what);
        if (pass == 1 && a->activation != TNT_ACT_LINEAR) {
            snprintf(what, sizeof what, "%s: pre-activation", name);
            check_policy(bf16, h.pre, f.pre, out_numel(&f), true, what);
        }
    }
    /* backward from the same gradient before the activation: relu's mask would otherwise differ
     * where bf16 moved y across 0, an activation's effect, not the products' */
    const bool preact = a->activation == TNT_ACT_RELU;
    poison_grads(a), poison_grads(b);
    drv_backward(&f, true, preact);
    drv_backward(&h, true, preact);
    snprintf(what, sizeof what, "%s: dx", name);
    check_policy(bf16, h.dx, f.dx, in_numel(&f), true, what);
    for (int i = 0; i < a->n_weights; i++) {
        snprintf(what, sizeof what, "%s: d%s", name, a->weights[i].name);
        /* bias gradients are float32 sums of the float32 dpre: equal unless the activation's
         * derivative saw bf16-computed values */
        check_policy(bf16, b->weights[i].grad, a->weights[i].grad, tnt_shape_numel(a->weights[i].shape),
                          strcmp(a->weights[i].name, "bias") != 0, what);
    }
    drv_free(&f, true);
    drv_free(&h, true);
}
/* Whether the bf16 engine runs here (tnt__bf16_native(), checked against the CPU and the caps by
 * test_native_follows_cpu_and_caps): the layers' results are then bf16's, else float32's. */
static bool native;

static void compare_layer(const char *name, make_fn mk, tnt_shape in, int64_t batch) {
    compare_layer_as(name, mk, in, batch, native);
}

static void test_dense_bf16_matches_f32(void **state) {
    (void)state;
    compare_layer("Dense relu 64x40", dense_relu, TNT_SHAPE(40), 64);
    compare_layer("Dense gelu 200x17 (unfused)", dense_gelu, TNT_SHAPE(17), 200);
    compare_layer("Dense on (5, 32) rows", dense_linear, TNT_SHAPE(5, 32), 7);
}

static void test_conv_bf16_matches_f32(void **state) {
    (void)state;
    compare_layer("Conv2D 3x3 same relu", conv_relu, TNT_SHAPE(9, 9, 16), 4);
    compare_layer("Conv2D 3x3 stride 2", conv_strided, TNT_SHAPE(12, 10, 32), 3);
    compare_layer("Conv1D causal dilated", conv1d_causal, TNT_SHAPE(20, 16), 5);
    compare_layer("DepthwiseConv2D", depthwise, TNT_SHAPE(8, 8, 16), 3);
    compare_layer("Conv3D 3x3x2 same relu", conv3d_relu, TNT_SHAPE(5, 6, 7, 8), 2);
    /* the bf16 engine reads channels-last tensors only: channels_first runs float32 */
    compare_layer_as("Conv2D channels_first", conv_channels_first, TNT_SHAPE(16, 9, 9), 4, false);
}

/* ---- MultiHeadAttention through the multi-input contract ---------------------------------- */

typedef struct mha_run {
    tnt_layer *l;
    void *plan, *ws;
    float *x[3], *dx[3], *y, *dy;
} mha_run;

/* Self-attention (query = value = key, one buffer) or cross-attention (query from x0, value =
 * key from x1), causal or not, with dropout in training. */
static void mha_setup(mha_run *r, bool mixed, bool self, bool causal, float dropout, int64_t B, int64_t T, int64_t S,
                      int64_t d) {
    memset(r, 0, sizeof *r);
    r->l = tnt_multi_head_attention(4, 8, &(tnt_attention_opts){.value_dim = 6, .dropout = dropout});
    assert_non_null(r->l);
    if (mixed) tu_ok(tnt_layer_set_dtype_policy(r->l, "mixed_bfloat16"));
    tu_ok(tnt__attention_configure(r->l, false, false, false, causal));
    const int64_t tv = self ? T : S;
    tnt_shape in[3] = {TNT_SHAPE(T, d), TNT_SHAPE(tv, d), TNT_SHAPE(tv, d)};
    r->l->n_inputs = 3;
    for (int i = 0; i < 3; i++) r->l->in_shapes[i] = in[i];
    r->l->in_shape = in[0];
    tu_ok(r->l->ops->build_multi(r->l, 3, in, &r->l->out_shape));
    for (int i = 0; i < r->l->n_weights; i++) {
        int64_t k = tnt_shape_numel(r->l->weights[i].shape);
        r->l->weights[i].value = calloc((size_t)k, sizeof(float));
        r->l->weights[i].grad = calloc((size_t)k, sizeof(float));
        tnt__weight_init(&r->l->weights[i], 77 + (uint64_t)i);
        if (strstr(r->l->weights[i].name, "bias")) tu_fill(r->l->weights[i].value, k, 40 + (uint64_t)i);
    }
    r->plan = r->l->ops->plan_create(r->l, B);
    assert_non_null(r->plan);
    r->ws = tnt__alloc(r->l->ops->workspace_size(r->l, r->plan, B));
    r->x[0] = calloc((size_t)(B * T * d), sizeof(float));
    tu_fill(r->x[0], B * T * d, 8);
    r->x[1] = r->x[2] = self ? r->x[0] : calloc((size_t)(B * S * d), sizeof(float));
    if (!self) tu_fill(r->x[1], B * S * d, 9);
    for (int i = 0; i < 3; i++) r->dx[i] = calloc((size_t)(B * (i ? tv : T) * d), sizeof(float));
    r->y = calloc((size_t)(B * T * d), sizeof(float));
    r->dy = calloc((size_t)(B * T * d), sizeof(float));
    tu_fill(r->dy, B * T * d, 10);
}

static void mha_pass(mha_run *r, int64_t B, bool training) {
    const float *xs[3] = {r->x[0], r->x[1], r->x[2]};
    tnt__fwd_args f = {.batch = B, .x = xs[0], .n_inputs = 3, .xs = xs, .y = r->y, .workspace = r->ws,
                       .training = training, .seed = 17};
    tu_ok(r->l->ops->forward(r->l, r->plan, &f));
    tnt__bwd_args b = {.batch = B, .x = xs[0], .y = r->y, .dy = r->dy, .dx = r->dx[0], .workspace = r->ws,
                       .n_inputs = 3, .xs = xs, .dxs = r->dx};
    tu_ok(r->l->ops->backward(r->l, r->plan, &b));
}

static void mha_free(mha_run *r, bool self) {
    r->l->ops->plan_destroy(r->plan);
    tnt__free(r->ws);
    for (int i = 0; i < r->l->n_weights; i++) free(r->l->weights[i].value), free(r->l->weights[i].grad);
    tnt_layer_free(r->l);
    free(r->x[0]);
    if (!self) free(r->x[1]);
    for (int i = 0; i < 3; i++) free(r->dx[i]);
    free(r->y), free(r->dy);
}

static void compare_mha(const char *name, bool self, bool causal, float dropout) {
    const int64_t B = 3, T = 10, S = 7, d = 16;
    mha_run f, h;
    mha_setup(&f, false, self, causal, dropout, B, T, S, d);
    mha_setup(&h, true, self, causal, dropout, B, T, S, d);
    mha_pass(&f, B, dropout > 0);
    mha_pass(&h, B, dropout > 0);
    const int64_t tv = self ? T : S;
    char what[96];
    snprintf(what, sizeof what, "%s: y", name);
    check_policy(native, h.y, f.y, B * T * d, true, what);
    /* The query and key gradients go through the softmax's gradient dS = P * (dP - sum P dP), a
     * difference of near-equal terms: dP's bf16 rounding (~2e-3 of it) grows relative to dS, to
     * ~1e-2 here (Keras computes that difference in bf16 itself); 2e-2 for them. */
    const double qk_rtol = 2 * BF16_RTOL;
    static const char *in_names[3] = {"dquery", "dvalue", "dkey"};
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "%s: %s", name, in_names[i]);
        check_policy_rtol(native, h.dx[i], f.dx[i], B * (i ? tv : T) * d, true, i == 1 ? BF16_RTOL : qk_rtol, what);
    }
    for (int i = 0; i < f.l->n_weights; i++) {
        snprintf(what, sizeof what, "%s: d%s", name, f.l->weights[i].name);
        if (!strcmp(f.l->weights[i].name, "key/bias")) {
            /* zero in exact arithmetic (each row of the softmax's gradient sums to 0); what is
             * left is rounding, small beside the query bias's gradient */
            const int64_t k = tnt_shape_numel(f.l->weights[i].shape);
            if (native) assert_true(max_abs(h.l->weights[i].grad, k) <= BF16_RTOL * max_abs(f.l->weights[i - 2].grad, k));
            else tu_assert_bitwise(h.l->weights[i].grad, f.l->weights[i].grad, k, what);
            continue;
        }
        /* the output bias's gradient sums dy itself: float32 in both */
        const char *wn = f.l->weights[i].name;
        check_policy_rtol(native, h.l->weights[i].grad, f.l->weights[i].grad, tnt_shape_numel(f.l->weights[i].shape),
                          !strstr(wn, "attention_output/bias"), strncmp(wn, "query", 5) && strncmp(wn, "key", 3) ? BF16_RTOL : qk_rtol,
                          what);
    }
    mha_free(&f, self);
    mha_free(&h, self);
}

static void test_attention_bf16_matches_f32(void **state) {
    (void)state;
    compare_mha("MultiHeadAttention self", true, false, 0.0f);
    compare_mha("MultiHeadAttention self causal", true, true, 0.0f);
    compare_mha("MultiHeadAttention cross with dropout", false, false, 0.25f);
}

/* ---- the policy API ------------------------------------------------------------------------ */

static void test_policy_api(void **state) {
    (void)state;
    assert_string_equal(tnt_mixed_precision_global_policy(), "float32");
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    assert_string_equal(tnt_mixed_precision_global_policy(), "mixed_bfloat16");
    tnt_layer *l = tnt_dense(3, NULL), *c = tnt_conv2d(2, 1, 1, NULL), *p = tnt_max_pooling2d(2, 2, NULL);
    assert_string_equal(tnt_layer_dtype_policy(l), "mixed_bfloat16"); /* layers made afterwards take it */
    assert_string_equal(tnt_layer_dtype_policy(c), "mixed_bfloat16");
    assert_string_equal(tnt_layer_dtype_policy(p), "mixed_bfloat16"); /* carried, computes float32 */
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_string_equal(tnt_layer_dtype_policy(l), "mixed_bfloat16"); /* made before: kept */
    tnt_layer *k = tnt_dense(3, NULL);
    assert_string_equal(tnt_layer_dtype_policy(k), "float32");

    assert_int_equal(tnt_mixed_precision_set_global_policy("mixed_float16"), TNT_ERR_ARG);
    tu_error_contains("\"mixed_float16\"");
    tu_error_contains("expected \"float32\" or \"mixed_bfloat16\"");
    assert_int_equal(tnt_mixed_precision_set_global_policy(NULL), TNT_ERR_ARG);
    tu_error_contains("NULL");
    assert_string_equal(tnt_mixed_precision_global_policy(), "float32"); /* unchanged by failures */
    assert_int_equal(tnt_layer_set_dtype_policy(k, "bfloat16"), TNT_ERR_ARG);
    tu_error_contains("Dense");
    tu_error_contains("\"bfloat16\"");
    assert_int_equal(tnt_layer_set_dtype_policy(NULL, "float32"), TNT_ERR_ARG);

    /* after build: refused (Keras sets it at construction) */
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(4), NULL)));
    tu_ok(tnt_model_add(m, k));
    assert_int_equal(tnt_layer_set_dtype_policy(k, "mixed_bfloat16"), TNT_ERR_STATE);
    tu_error_contains("before adding the layer");
    tu_ok(tnt_layer_set_dtype_policy(k, "float32")); /* the same policy: no change, no error */
    tnt_model_free(m);
    tnt_layer_free(l), tnt_layer_free(c), tnt_layer_free(p);
}

/* ---- Keras configs --------------------------------------------------------------------------- */

/* Input(6,6,2) -> Conv2D(4) mixed -> Flatten -> Dense(5, relu) mixed -> Dense(3) float32 */
static tnt_model *mixed_model(void) {
    tnt_model *m = tnt_sequential("mixed");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(6, 6, 2), NULL)));
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    tu_ok(tnt_model_add(m, tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.name = "c", .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_flatten("f")));
    tu_ok(tnt_model_add(m, tnt_dense(5, &(tnt_layer_opts){.name = "d", .activation = TNT_ACT_RELU})));
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.name = "out", .activation = TNT_ACT_SOFTMAX})));
    return m;
}

static const char *policy_of(tnt_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->name, name)) return tnt_layer_dtype_policy(m->layers[i]);
    fail_msg("no layer %s", name);
    return NULL;
}

static void assert_mixed_layers(tnt_model *m) {
    assert_string_equal(policy_of(m, "c"), "mixed_bfloat16");
    assert_string_equal(policy_of(m, "f"), "mixed_bfloat16");
    assert_string_equal(policy_of(m, "d"), "mixed_bfloat16");
    assert_string_equal(policy_of(m, "out"), "float32");
}

static void test_keras2_json_round_trip(void **state) {
    (void)state;
    tnt_model *m = mixed_model();
    char *j1 = NULL, *j2 = NULL;
    tu_ok(tnt_model_to_json(m, &j1));
    assert_non_null(strstr(j1, "\"name\":\"c\",\"trainable\":true,\"dtype\":\"mixed_bfloat16\""));
    assert_non_null(strstr(j1, "\"name\":\"out\",\"trainable\":true,\"dtype\":\"float32\""));
    tnt_model *r = tnt_model_from_json(j1);
    assert_non_null(r);
    assert_mixed_layers(r);
    tu_ok(tnt_model_to_json(r, &j2));
    assert_string_equal(j1, j2);
    free(j1), free(j2);
    tnt_model_free(r), tnt_model_free(m);
}

/* Keras 3 layer configs: DTypePolicy objects (and FloatDTypePolicy, Keras 3.2-3.5), null (the
 * global policy), and an unsupported policy named in the error. */
#define DP(cls, name) "{\"module\": \"keras\", \"class_name\": \"" cls "\", \"config\": {\"name\": \"" name "\"}, \"registered_name\": null}"
static void test_keras3_dtype_policy_objects(void **state) {
    (void)state;
    const char *json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"k3\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], \"dtype\": \"float32\", \"name\": \"in\"}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"a\", \"units\": 3, \"dtype\": " DP("DTypePolicy", "mixed_bfloat16") "}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"b\", \"units\": 3, \"dtype\": " DP("FloatDTypePolicy", "mixed_bfloat16") "}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"c\", \"units\": 3, \"dtype\": " DP("DTypePolicy", "float32") "}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"dtype\": null}}]}}";
    tnt_model *m = tnt_model_from_json(json);
    assert_non_null(m);
    assert_string_equal(policy_of(m, "a"), "mixed_bfloat16");
    assert_string_equal(policy_of(m, "b"), "mixed_bfloat16");
    assert_string_equal(policy_of(m, "c"), "float32");
    assert_string_equal(policy_of(m, "d"), "float32"); /* null: the global policy, float32 here */
    tnt_model_free(m);
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    m = tnt_model_from_json(json);
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_non_null(m);
    assert_string_equal(policy_of(m, "d"), "mixed_bfloat16");
    tnt_model_free(m);

    const char *bad = "[{\"class_name\": \"Dense\", \"config\": {\"name\": \"x\", \"units\": 3, "
                      "\"batch_input_shape\": [null, 4], \"dtype\": " DP("DTypePolicy", "mixed_float16") "}}]";
    assert_null(tnt_model_from_json(bad));
    tu_error_contains("\"x\"");
    tu_error_contains("dtype policy \"mixed_float16\"");
    tu_error_contains("expected \"float32\" or \"mixed_bfloat16\"");
    const char *bad_cls = "[{\"class_name\": \"Dense\", \"config\": {\"name\": \"x\", \"units\": 3, "
                          "\"batch_input_shape\": [null, 4], \"dtype\": " DP("QuantizedDTypePolicy", "int8") "}}]";
    assert_null(tnt_model_from_json(bad_cls));
    tu_error_contains("QuantizedDTypePolicy");
}

/* config.json of a .keras archive (caller frees). */
static char *keras_config(const char *path) {
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    assert_non_null(z);
    zip_stat_t st;
    assert_int_equal(zip_stat(z, "config.json", 0, &st), 0);
    char *buf = calloc(1, (size_t)st.size + 1);
    zip_file_t *f = zip_fopen(z, "config.json", 0);
    assert_non_null(f);
    assert_int_equal(zip_fread(f, buf, st.size), (zip_int64_t)st.size);
    zip_fclose(f);
    zip_discard(z);
    return buf;
}

static void test_files_round_trip(void **state) {
    (void)state;
    tnt_model *m = mixed_model();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(1e-3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    const char *k3 = tu_tmp_path("mixed.keras");
    tu_ok(tnt_save_model(m, k3, NULL));
    char *cfg = keras_config(k3);
    assert_non_null(strstr(cfg, "\"name\":\"c\",\"trainable\":true,\"dtype\":{\"module\":\"keras\",\"class_name\":"
                                "\"DTypePolicy\",\"config\":{\"name\":\"mixed_bfloat16\"},\"registered_name\":null}"));
    assert_non_null(strstr(cfg, "\"name\":\"out\",\"trainable\":true,\"dtype\":{\"module\":\"keras\",\"class_name\":"
                                "\"DTypePolicy\",\"config\":{\"name\":\"float32\"}"));
    assert_non_null(strstr(cfg, "\"class_name\":\"InputLayer\",\"config\":{\"batch_input_shape\":[null,6,6,2],\"dtype\":\"float32\""));
    free(cfg);
    tnt_model *r = tnt_load_model(k3, true);
    assert_non_null(r);
    assert_mixed_layers(r);
    tnt_model_free(r);
    const char *h5 = tu_tmp_path("mixed.h5");
    tu_ok(tnt_save_model(m, h5, NULL));
    r = tnt_load_model(h5, true);
    assert_non_null(r);
    assert_mixed_layers(r);
    tnt_model_free(r);
    tnt_model_free(m);
}

/* ---- training ------------------------------------------------------------------------------ */

enum { N = 256, BATCH = 32 };
static float X[N * 6 * 6 * 2], Y[N];

static void make_data(void) {
    tu_fill(X, N * 72, 3);
    for (int i = 0; i < N; i++) {
        float s = 0, t = 0;
        for (int j = 0; j < 72; j++) *(j % 3 ? &s : &t) += X[i * 72 + j] * (j < 36 ? 1.0f : -0.7f);
        Y[i] = s > 0.5f ? 2.0f : t > 0 ? 1.0f : 0.0f;
    }
}

/* Trains m (consumed) for epochs with Adam; the History's losses into loss[epochs], the final
 * weights into w (n floats). */
static void train(tnt_model *m, int epochs, double *loss, float *w, int64_t n) {
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(3e-3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .seed = 7}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(X, TNT_SHAPE(6, 6, 2), Y, TNT_SHAPE(), N, false), BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = epochs}, &h));
    for (int e = 0; e < epochs; e++) loss[e] = tnt_history_get(h, "loss", e);
    if (w) tu_ok(tnt_get_weights(m, w, n));
    /* float32 state: weights, gradients and Adam's slots hold values no bf16 can (low mantissa
     * bits set), as Keras keeps variables and optimizer state in float32 under mixed_bfloat16 */
    int64_t np = m->n_params, wide[4] = {0};
    const float *bufs[4] = {m->params, m->grads, tnt__optimizer_slot(m->optimizer, 0), tnt__optimizer_slot(m->optimizer, 1)};
    for (int b = 0; b < 4; b++) {
        assert_non_null(bufs[b]);
        for (int64_t i = 0; i < np; i++) wide[b] += tnt__bf16_to_float(tnt__bf16_from_float(bufs[b][i])) != bufs[b][i];
        if (wide[b] < np / 2) fail_msg("buffer %d: only %lld of %lld values beyond bf16", b, (long long)wide[b], (long long)np);
    }
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_training_follows_f32(void **state) {
    (void)state;
    make_data();
    enum { EPOCHS = 6 };
    double l32[EPOCHS], l16[EPOCHS], lf[EPOCHS];
    tnt_model *m32 = mixed_model();
    for (int i = 0; i < m32->n_layers; i++) m32->layers[i]->dtype_policy = TNT__POLICY_FLOAT32;
    const int64_t n = tnt_model_count_params(m32);
    float *w32 = malloc((size_t)n * sizeof(float)), *w16 = malloc((size_t)n * sizeof(float));
    train(m32, EPOCHS, l32, w32, n);
    train(mixed_model(), EPOCHS, l16, w16, n);
    for (int e = 0; e < EPOCHS; e++) {
        if (getenv("TNT_TEST_VERBOSE")) print_message("epoch %d: loss %.5f float32, %.5f mixed_bfloat16\n", e, l32[e], l16[e]);
        if (fabs(l16[e] - l32[e]) > 0.02 * l32[e])
            fail_msg("epoch %d: loss %.5f (mixed_bfloat16) against %.5f (float32)", e, l16[e], l32[e]);
    }
    for (int e = 1; e < EPOCHS; e++) assert_true(l16[e] < l16[e - 1]); /* it learns */
    if (native) assert_true(l16[EPOCHS - 1] != l32[EPOCHS - 1]); /* in bf16 */
    else for (int e = 0; e < EPOCHS; e++) assert_true(l16[e] == l32[e]); /* float32 engines, bit for bit */
    double dw = 0, ww = 0;
    for (int64_t i = 0; i < n; i++) dw += fabs(w16[i] - w32[i]), ww += fabs(w32[i]);
    assert_true(dw < 0.05 * ww);

    /* the same architecture read from its Keras JSON, mixed_bfloat16 in the file, trains alike */
    char *json = NULL;
    tnt_model *src = mixed_model();
    tu_ok(tnt_model_to_json(src, &json));
    tnt_model_free(src);
    tnt_model *fromfile = tnt_model_from_json(json);
    free(json);
    assert_non_null(fromfile);
    assert_mixed_layers(fromfile);
    train(fromfile, EPOCHS, lf, NULL, 0);
    for (int e = 0; e < EPOCHS; e++) assert_true(lf[e] == l16[e]); /* same seed, same bf16 computation */
    free(w32), free(w16);
}

/* A CPU without native bf16: mixed layers run the float32 engines, bit for bit. */
static void test_fallback_without_bf16(void **state) {
    (void)state;
    tnt__bf16_force_native(0);
    tnt_layer *a = dense_relu(), *b = dense_relu();
    tu_ok(tnt_layer_set_dtype_policy(b, "mixed_bfloat16"));
    drv f, h;
    drv_init(&f, a, TNT_SHAPE(40), 16);
    drv_init(&h, b, TNT_SHAPE(40), 16);
    tu_fill(f.x, in_numel(&f), 5);
    memcpy(h.x, f.x, (size_t)in_numel(&f) * sizeof(float));
    drv_forward(&f, false);
    drv_forward(&h, false);
    tu_assert_bitwise(h.y, f.y, out_numel(&f), "Dense mixed_bfloat16 without bf16: y");
    drv_free(&f, true);
    drv_free(&h, true);
    tnt__bf16_force_native(-1);
}

/* The bf16 engine runs exactly where the CPU has avx512_bf16 (or AMX) and no cap
 * (ONEDNN_MAX_CPU_ISA, TNT_MAX_CPU_ISA) holds the ISA below it: read here from the CPU and the
 * environment, independently of the library. */
static void test_native_follows_cpu_and_caps(void **state) {
    (void)state;
    __builtin_cpu_init();
    bool expected = __builtin_cpu_supports("avx512bf16");
    static const char *const below[] = {"sse41", "avx", "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni"};
    const char *caps[2] = {getenv("ONEDNN_MAX_CPU_ISA"), getenv("TNT_MAX_CPU_ISA")};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; caps[c] && i < sizeof below / sizeof *below; i++)
            if (!strcasecmp(caps[c], below[i])) expected = false;
    print_message("bf16 engine %s (oneDNN ISA %s)\n", native ? "runs" : "does not run: float32 fallback",
                  tnt__bf16_isa_name());
    assert_int_equal(native, expected);
    assert_int_equal(tnt_mixed_precision_native(), native);
}

static void test_conversion_rounds_to_nearest_even(void **state) {
    (void)state;
    /* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: even (1); 1 + 3*2^-8 rounds up */
    float x[37], back[37];
    for (int i = 0; i < 37; i++) x[i] = 1.0f + (float)(i % 4) * 0x1p-8f;
    x[36] = NAN;
    tnt__bf16 y[37];
    tnt__f32_to_bf16(x, y, 37); /* 32 through the vector kernel, 5 in its masked tail */
    tnt__bf16_to_f32(y, back, 37);
    static const float want[4] = {1.0f, 1.0f, 1.0f + 0x1p-7f, 1.0f + 0x1p-6f};
    for (int i = 0; i < 36; i++) assert_true(back[i] == want[i % 4]);
    assert_true(isnan(back[36]));
    for (int i = 0; i < 4; i++) assert_true(tnt__bf16_to_float(tnt__bf16_from_float(x[i])) == want[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversion_rounds_to_nearest_even),
        cmocka_unit_test(test_dense_bf16_matches_f32),
        cmocka_unit_test(test_conv_bf16_matches_f32),
        cmocka_unit_test(test_attention_bf16_matches_f32),
        cmocka_unit_test(test_policy_api),
        cmocka_unit_test(test_keras2_json_round_trip),
        cmocka_unit_test(test_keras3_dtype_policy_objects),
        cmocka_unit_test(test_files_round_trip),
        cmocka_unit_test(test_training_follows_f32),
        cmocka_unit_test(test_fallback_without_bf16),
        cmocka_unit_test(test_native_follows_cpu_and_caps),
    };
    tnt_init(NULL, NULL); /* TNT_MAX_CPU_ISA takes effect */
    native = tnt__bf16_native();
    int rc = cmocka_run_group_tests(tests, tu_tmpdir_setup, tu_tmpdir_teardown);
    tnt_finalize();
    return rc;
}
