/* test_gpu_precision.c: the device's precision options on the emulated device (TNT_GPU_EMULATE=1),
 * each checked against an independent reference computed here in double:
 *   - TF32 (tnt_gpu_set_tf32, TNT_GPU_TF32): off by default; the rounding to TF32 (PTX's
 *     cvt.rna.tf32.f32: nearest, ties away from zero); sgemm with TF32 on multiplies the inputs
 *     rounded to TF32 (and with it off, the float32 inputs), plain and strided batched; a model
 *     trained with TF32 on follows float32 within TF32's tolerance and differs from it;
 *   - bf16 (mixed_bfloat16): tnt__gpu_to_bf16 equals the CPU's conversion bit for bit;
 *     tnt__gpu_gemm_bf16 multiplies the bf16 values with float32 sums, all four transposes; a
 *     mixed_bfloat16 Dense layer on the device computes bf16(x) bf16(W) + b; a mixed model trained
 *     on the device follows the CPU engine's mixed precision (where the CPU computes bf16 natively;
 *     elsewhere the CPU falls back to float32 and the device follows float32 within bf16's
 *     tolerance) and its weights stay float32;
 *   - Conv2D under mixed_bfloat16 (cuDNN's PSEUDO_BFLOAT16_CONFIG; on a GPU with cuDNN only, the
 *     emulated device has none): forward against a reference in double over bf16 operands and
 *     against the CPU's bf16 engine, step-1 gradients (dW, and dX through a second convolution)
 *     and a few epochs of training against the CPU's mixed precision;
 *   - the other layers of ResNet-50 (ZeroPadding2D, MaxPooling2D, BatchNormalization, Activation,
 *     Add, GlobalAveragePooling2D, Dense) under mixed_bfloat16 run on the device (also emulated)
 *     and train as the CPU does. */
#include "testutil.h"

#include "gpu/gpu.h"
#include "kernels/bf16.h"
#include "model/device.h"
#include "model/model.h"
#include "resnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float bits_to_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void test_round_tf32(void **state) {
    (void)state;
    assert_true(tnt__gpu_round_tf32(1.0f) == 1.0f);
    /* 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties away from zero, both signs */
    assert_true(tnt__gpu_round_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);
    assert_true(tnt__gpu_round_tf32(-1.0f - 0x1p-11f) == -1.0f - 0x1p-10f);
    assert_true(tnt__gpu_round_tf32(1.0f + 0x1p-12f) == 1.0f);
    assert_true(tnt__gpu_round_tf32(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
    /* 10 mantissa bits survive: 1 + 3 2^-10 stays */
    assert_true(tnt__gpu_round_tf32(1.0f + 3 * 0x1p-10f) == 1.0f + 3 * 0x1p-10f);
    assert_int_equal(float_bits(tnt__gpu_round_tf32(bits_to_float(0x3f812345u))) & 0x1fffu, 0);
    assert_true(isinf(tnt__gpu_round_tf32(INFINITY)) && tnt__gpu_round_tf32(-INFINITY) < 0);
    assert_true(isnan(tnt__gpu_round_tf32(NAN)));
    assert_true(isinf(tnt__gpu_round_tf32(3.4028235e38f))); /* the largest float rounds up past TF32's */
    assert_true(tnt__gpu_round_tf32(0.0f) == 0.0f);
}

static void test_tf32_setting(void **state) {
    (void)state;
    assert_false(tnt_gpu_tf32_enabled()); /* off by default (TNT_GPU_TF32 unset) */
    tnt_gpu_set_tf32(true);
    assert_true(tnt_gpu_tf32_enabled());
    assert_true(tnt__gpu_tf32());
    tnt_gpu_set_tf32(false);
    assert_false(tnt_gpu_tf32_enabled());
}

/* ---- GEMMs against references in double ---------------------------------------------------- */

enum { M = 37, K = 53, NN = 29 };

static float *dev_upload(const void *host, size_t bytes) {
    void *d = tnt__gpu_malloc(bytes);
    assert_non_null(d);
    tu_ok(tnt__gpu_copy_to_device(d, host, bytes, TNT__GPU_COMPUTE));
    return d;
}

/* c (m, n) = op(a) op(b) in double over values f(a), f(b) (row-major, lda/ldb row strides); also
 * the sums of |terms| per element, the scale of the rounding that float32 sums allow */
static void ref_gemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                     float (*f)(float), double *c, double *mag) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, g = 0;
            for (int p = 0; p < k; p++) {
                const double t = (double)f(ta ? a[p * lda + i] : a[i * lda + p]) * f(tb ? b[j * ldb + p] : b[p * ldb + j]);
                s += t, g += fabs(t);
            }
            c[i * n + j] = s, mag[i * n + j] = g;
        }
}

static float same(float x) { return x; }
static float to_bf16_and_back(float x) { return tnt__bf16_to_float(tnt__bf16_from_float(x)); }

/* got within float32 summation's rounding of ref (1e-5 of the sum of |terms|); returns the largest
 * difference relative to that sum */
static double assert_gemm_close(const float *got, const double *ref, const double *mag, int n, const char *what) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const double d = fabs(got[i] - ref[i]) / (mag[i] + 1e-30);
        if (d > 1e-5) fail_msg("%s: element %d: %.9g, reference %.9g (sum of |terms| %.3g)", what, i, (double)got[i], ref[i], mag[i]);
        if (d > worst) worst = d;
    }
    return worst;
}

/* the largest difference of got from ref, relative to the sum of |terms| */
static double gemm_distance(const float *got, const double *ref, const double *mag, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - ref[i]) / (mag[i] + 1e-30));
    return worst;
}

static void test_sgemm_tf32(void **state) {
    (void)state;
    tu_ok(tnt__gpu_open(0));
    static float a[M * K], b[K * NN], c[M * NN];
    static double ref32[M * NN], ref19[M * NN], mag[M * NN];
    tu_fill(a, M * K, 11);
    tu_fill(b, K * NN, 12);
    float *da = dev_upload(a, sizeof a), *db = dev_upload(b, sizeof b), *dc = tnt__gpu_malloc(sizeof c);
    assert_non_null(dc);
    ref_gemm(false, false, M, NN, K, a, K, b, NN, same, ref32, mag);
    ref_gemm(false, false, M, NN, K, a, K, b, NN, tnt__gpu_round_tf32, ref19, mag);
    for (int tf32 = 0; tf32 < 2; tf32++) {
        tnt_gpu_set_tf32(tf32);
        tu_ok(tnt__gpu_sgemm(false, false, M, NN, K, 1.0f, da, K, db, NN, 0.0f, dc, NN));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof c, TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
        if (!tnt__gpu_emulated() && tf32) {
            /* cuBLAS may round TF32 otherwise than cvt.rna, or pick a float32 kernel for a small
             * product: within TF32's error of float32, and say which reference it is nearer */
            const double d32 = gemm_distance(c, ref32, mag, M * NN), d19 = gemm_distance(c, ref19, mag, M * NN);
            print_message("GPU sgemm, TF32 on: %.3g from float32, %.3g from inputs rounded to TF32 (rna)\n", d32, d19);
            assert_true(d32 < 2e-3);
            continue;
        }
        assert_gemm_close(c, tf32 ? ref19 : ref32, mag, M * NN, tf32 ? "sgemm, TF32 on" : "sgemm, TF32 off");
        /* TF32 is not float32: the other reference is far (10 bits against 23) */
        assert_true(gemm_distance(c, tf32 ? ref32 : ref19, mag, M * NN) > 1e-4);
    }
    /* strided batched (attention's heads): two products at a fixed stride, TF32 on */
    tnt_gpu_set_tf32(true);
    static float c2[2 * M * NN];
    float *dc2 = tnt__gpu_malloc(sizeof c2);
    assert_non_null(dc2);
    /* batch 2: a's rows [0, 18) and [18, 36) (stride 18 K) times b, with b's stride 0 */
    tu_ok(tnt__gpu_sgemm_strided(false, false, 18, NN, K, 1.0f, da, K, 18 * K, db, NN, 0, 0.0f, dc2, NN, 18 * NN, 2));
    tu_ok(tnt__gpu_copy_to_host(c2, dc2, 36 * NN * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    if (tnt__gpu_emulated()) assert_gemm_close(c2, ref19, mag, 36 * NN, "strided sgemm, TF32 on");
    else assert_true(gemm_distance(c2, ref32, mag, 36 * NN) < 2e-3);
    tnt_gpu_set_tf32(false);
    tnt__gpu_free(da), tnt__gpu_free(db), tnt__gpu_free(dc), tnt__gpu_free(dc2);
}

static void test_to_bf16(void **state) {
    (void)state;
    tu_ok(tnt__gpu_open(0));
    enum { n = 1000 };
    static float x[n];
    static uint16_t got[n], want[n];
    tu_fill(x, n, 3);
    x[0] = 1.0f + 0x1p-8f; /* a tie: to even (1.0) */
    x[1] = 1.0f + 3 * 0x1p-8f; /* a tie: to even (1 + 2^-6) */
    x[2] = NAN, x[3] = -INFINITY, x[4] = 3.4e38f, x[5] = 1e-40f; /* NaN quiet, inf, overflow, subnormal */
    float *dx = dev_upload(x, sizeof x);
    uint16_t *dy = tnt__gpu_malloc(sizeof got);
    assert_non_null(dy);
    tu_ok(tnt__gpu_to_bf16(dx, dy, n));
    tu_ok(tnt__gpu_copy_to_host(got, dy, sizeof got, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    for (int i = 0; i < n; i++) want[i] = tnt__bf16_from_float(x[i]);
    assert_memory_equal(got, want, sizeof got);
    assert_int_equal(got[0], 0x3f80);
    assert_int_equal(got[1], 0x3f82);
    tnt__gpu_free(dx), tnt__gpu_free(dy);
}

static void test_gemm_bf16(void **state) {
    (void)state;
    tu_ok(tnt__gpu_open(0));
    static float a[M * K], b[K * NN], c[M * NN];
    static double ref[M * NN], ref32[M * NN], mag[M * NN];
    static uint16_t a16[M * K], b16[K * NN];
    tu_fill(a, M * K, 21);
    tu_fill(b, K * NN, 22);
    for (int i = 0; i < M * K; i++) a16[i] = tnt__bf16_from_float(a[i]);
    for (int i = 0; i < K * NN; i++) b16[i] = tnt__bf16_from_float(b[i]);
    uint16_t *da = (uint16_t *)dev_upload(a16, sizeof a16), *db = (uint16_t *)dev_upload(b16, sizeof b16);
    float *dc = tnt__gpu_malloc(sizeof c);
    assert_non_null(dc);
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        /* the same storage read as op(a) (M, K) or, transposed, a K x M matrix's first rows: a
         * is M x K stored; transposed it is read as (K, M) with lda M, from the same floats */
        const int lda = ta ? M : K, ldb = tb ? K : NN;
        char what[64];
        snprintf(what, sizeof what, "gemm_bf16 %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
        ref_gemm(ta, tb, M, NN, K, a, lda, b, ldb, to_bf16_and_back, ref, mag);
        ref_gemm(ta, tb, M, NN, K, a, lda, b, ldb, same, ref32, mag);
        tu_ok(tnt__gpu_memset_zero(dc, sizeof c, TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_gemm_bf16(ta, tb, M, NN, K, 1.0f, da, lda, db, ldb, 0.0f, dc, NN));
        tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof c, TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
        assert_gemm_close(c, ref, mag, M * NN, what);
        assert_true(gemm_distance(c, ref32, mag, M * NN) > 1e-4); /* bf16, not float32 */
    }
    /* beta 1 adds to C (the bias rows Dense writes first) */
    static float ones[M * NN];
    for (int i = 0; i < M * NN; i++) ones[i] = 1.0f;
    tu_ok(tnt__gpu_copy_to_device(dc, ones, sizeof ones, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_gemm_bf16(false, false, M, NN, K, 0.5f, da, K, db, NN, 1.0f, dc, NN));
    tu_ok(tnt__gpu_copy_to_host(c, dc, sizeof c, TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    ref_gemm(false, false, M, NN, K, a, K, b, NN, to_bf16_and_back, ref, mag);
    for (int i = 0; i < M * NN; i++) ref[i] = 1.0 + 0.5 * ref[i];
    assert_gemm_close(c, ref, mag, M * NN, "gemm_bf16, alpha 0.5, beta 1");
    /* the emulated device refuses a host pointer, naming the call (a GPU would fault: the real
     * device checks only for NULL, since a pointer query per GEMM would cost a driver call) */
    if (tnt__gpu_emulated()) {
        assert_int_equal(tnt__gpu_gemm_bf16(false, false, M, NN, K, 1.0f, a16, K, db, NN, 0.0f, dc, NN), TNT_ERR_ARG);
        tu_error_contains("tnt__gpu_gemm_bf16");
    }
    tnt__gpu_free(da), tnt__gpu_free(db), tnt__gpu_free(dc);
}

/* ---- models ---------------------------------------------------------------------------------- */

enum { N = 96, FEAT = 12, CLASSES = 4, BATCH = 16 };
static float xs[N * FEAT], ys[N];

static void make_data(void) {
    tu_fill(xs, N * FEAT, 7);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int j = 0; j < FEAT; j++) s += xs[i * FEAT + j] * (j % 2 ? 1.0f : -0.7f);
        ys[i] = (float)((s > 0) * 2 + (xs[i * FEAT] > 0));
    }
}

/* Dense with fused activations (relu, swish, whose backward reads its input), a softmax output */
static tnt_model *mlp(const char *policy) {
    tu_ok(tnt_mixed_precision_set_global_policy(policy));
    tnt_model *m = tnt_sequential("mlp");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEAT), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(24, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_SWISH})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    return m;
}

typedef struct run {
    float *w;
    int64_t n;
    double loss[3];
    bool on_device;
} run;
static double rel_l2(const float *a, const float *b, int64_t n);

/* A fitted model's weights and first (up to 3) epoch losses; frees the model and its history. */
static run collect(tnt_model *m, tnt_history *h, int epochs) {
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    for (int e = 0; e < epochs && e < 3; e++) r.loss[e] = tnt_history_get(h, "loss", e);
    tnt_history_free(h);
    tnt_model_free(m);
    return r;
}

static run train(const char *policy, tnt_device dev, int epochs) {
    tnt_model *m = mlp(policy);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = 0.01f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 5, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEAT), ys, TNT_SHAPE(), N, false), BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = epochs}, &h));
    tnt_dataset_free(ds);
    return collect(m, h, epochs);
}

/* the relative L2 distance of a from b */
static double rel_l2(const float *a, const float *b, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) e += (double)(a[i] - b[i]) * (a[i] - b[i]), r += (double)b[i] * b[i];
    return sqrt(e / (r + 1e-30));
}

/* A Dense layer under mixed_bfloat16 on the device computes bf16(x) bf16(W) + b with float32 sums:
 * predict after a device fit, against that formula in double over the trained weights. */
static void test_dense_bf16_forward(void **state) {
    (void)state;
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    tnt_model *m = tnt_sequential("one");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEAT), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, NULL)));
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 3,
                                             .device = TNT_DEVICE_GPU}));
    static float targets[N * CLASSES];
    tu_fill(targets, N * CLASSES, 9);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEAT), targets, TNT_SHAPE(CLASSES), N, false),
                                        BATCH, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_true(m->on_device);
    float w[FEAT * CLASSES + CLASSES];
    tu_ok(tnt_get_weights(m, w, FEAT * CLASSES + CLASSES));
    tnt_tensor x = {.shape = TNT_SHAPE(BATCH, FEAT), .data = xs}, *y = NULL;
    tu_ok(tnt_predict_on_batch(m, &x, &y));
    double worst32 = 0;
    for (int i = 0; i < BATCH; i++)
        for (int j = 0; j < CLASSES; j++) {
            double s = w[FEAT * CLASSES + j], s32 = s, mag = fabs(s);
            for (int p = 0; p < FEAT; p++) {
                const double t = (double)to_bf16_and_back(xs[i * FEAT + p]) * to_bf16_and_back(w[p * CLASSES + j]);
                s += t, mag += fabs(t), s32 += (double)xs[i * FEAT + p] * w[p * CLASSES + j];
            }
            const float got = y->data[i * CLASSES + j];
            if (fabs(got - s) > 1e-5 * mag)
                fail_msg("Dense bf16 on the device: y[%d][%d] = %.9g, bf16 reference %.9g", i, j, (double)got, s);
            worst32 = fmax(worst32, fabs(got - s32) / mag);
        }
    assert_true(worst32 > 1e-4); /* it did compute in bf16 */
    tnt_tensor_free(y);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* 3 epochs of a mixed_bfloat16 MLP on the device against the CPU engine */
static void test_mixed_training(void **state) {
    (void)state;
    run gpu = train("mixed_bfloat16", TNT_DEVICE_GPU, 3);
    run gpu32 = train("float32", TNT_DEVICE_GPU, 3);
    run cpu = train("mixed_bfloat16", TNT_DEVICE_CPU, 3);
    assert_true(gpu.on_device && gpu32.on_device && !cpu.on_device);
    assert_true(gpu.loss[2] < gpu.loss[0]); /* it learns */
    /* bf16 changes the numbers, within bf16's tolerance of float32 (test_mixed_precision's 1e-2) */
    const double d32 = rel_l2(gpu.w, gpu32.w, gpu.n);
    assert_true(d32 > 1e-6);
    assert_true(d32 < 1e-2);
    if (tnt_mixed_precision_native()) {
        /* the CPU's bf16 engine: the same roundings of the same operands, sums in another order */
        const double d = rel_l2(gpu.w, cpu.w, gpu.n);
        print_message("mixed_bfloat16 weights after 3 epochs, relative L2: device against CPU bf16 %.3g, against "
                      "device float32 %.3g\n", d, d32);
        const double tol = tnt__gpu_emulated() ? 1e-5 : 1e-3; /* emulated: 9e-9 measured */
        if (d > tol) fail_msg("mixed_bfloat16: device weights differ from the CPU's by %.3g (relative L2)", d);
        for (int e = 0; e < 3; e++)
            if (fabs(gpu.loss[e] - cpu.loss[e]) > tol * fabs(cpu.loss[e]))
                fail_msg("mixed_bfloat16: loss of epoch %d: device %.9g, CPU %.9g", e + 1, gpu.loss[e], cpu.loss[e]);
        /* the device is nearer the CPU's bf16 than float32 is */
        assert_true(d < d32);
    } else {
        /* this CPU computes mixed_bfloat16 in float32: bit for bit the float32 run's numbers */
        print_message("this CPU has no native bf16 (%s): the device's bf16 against float32 only\n", tnt__bf16_isa_name());
        assert_true(rel_l2(cpu.w, gpu32.w, gpu.n) < 1e-5);
    }
    free(gpu.w), free(gpu32.w), free(cpu.w);
}

/* self-attention (causal, dropout) -> Flatten -> Dense(softmax) on (T, D) sequences */
enum { T = 6, D = 8 };
static float seqs[N * T * D];

static tnt_model *attention_model(const char *policy) {
    tu_ok(tnt_mixed_precision_set_global_policy(policy));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T, D), NULL);
    tnt_layer *mha = tnt_multi_head_attention(2, 4, &(tnt_attention_opts){.dropout = 0.2f, .name = "mha"});
    tnt_ktensor a = tnt_call_attention(g, mha, in, in, (tnt_ktensor){-1}, (tnt_ktensor){-1}, true);
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}),
                               tnt_call(g, tnt_flatten(NULL), a));
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "attention");
    tnt_graph_free(g);
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_non_null(m);
    return m;
}

static run train_attention(const char *policy, tnt_device dev) {
    tnt_model *m = attention_model(policy);
    /* SGD with momentum: the key bias's gradient is zero up to rounding (see test_gpu_attention) */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.05f, .momentum = 0.9f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(seqs, TNT_SHAPE(T, D), ys, TNT_SHAPE(), N, false), BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    tnt_dataset_free(ds);
    return collect(m, h, 2);
}

/* MultiHeadAttention under mixed_bfloat16 on the device: the CPU bf16 engine's rounding points */
static void test_attention_bf16(void **state) {
    (void)state;
    tu_fill(seqs, N * T * D, 31);
    run gpu = train_attention("mixed_bfloat16", TNT_DEVICE_GPU);
    run gpu32 = train_attention("float32", TNT_DEVICE_GPU);
    run cpu = train_attention("mixed_bfloat16", TNT_DEVICE_CPU);
    assert_true(gpu.on_device && gpu32.on_device && !cpu.on_device);
    const double d32 = rel_l2(gpu.w, gpu32.w, gpu.n);
    assert_true(d32 > 1e-6 && d32 < 1e-2);
    if (tnt_mixed_precision_native()) {
        const double d = rel_l2(gpu.w, cpu.w, gpu.n), tol = tnt__gpu_emulated() ? 1e-5 : 1e-3;
        print_message("attention, mixed_bfloat16, weights after 2 epochs, relative L2: device against CPU bf16 %.3g, "
                      "against device float32 %.3g\n", d, d32);
        if (d > tol) fail_msg("attention mixed_bfloat16: device weights differ from the CPU's by %.3g", d);
        for (int e = 0; e < 2; e++)
            if (fabs(gpu.loss[e] - cpu.loss[e]) > tol * fabs(cpu.loss[e]))
                fail_msg("attention mixed_bfloat16: loss of epoch %d: device %.9g, CPU %.9g", e + 1, gpu.loss[e], cpu.loss[e]);
    } else {
        assert_true(rel_l2(cpu.w, gpu32.w, gpu.n) < 1e-5);
    }
    free(gpu.w), free(gpu32.w), free(cpu.w);
}

/* ---- Conv2D under mixed_bfloat16 (cuDNN) -------------------------------------------------------
 * Tolerance. The device rounds x and W to bf16 as the CPU's bf16 engine does and sums in float32,
 * but cuDNN's bf16 configuration also writes y, dX and dW in bf16 (the CPU engine: float32): each
 * carries one more rounding, at most 2^-9 of its value. So a forward output is within
 * 2^-8 |conv sum| (that rounding, with room for a second) + 1e-4 sum|terms| (float32 sums in
 * another order: 1e-5 holds for the GEMMs above) of the reference in double over bf16 operands,
 * and of the CPU's. Gradients and trained weights pass such roundings along (y feeds the loss,
 * bf16 dX feeds the first layer's dW) and sums of many terms that cancel magnify them: the CPU's
 * bf16 and float32 step-1 gradients of this net differ by 2.7e-2 (relative L2, first kernel;
 * 5.6e-2 its bias), the weights after 3 epochs by 2.75e-2 (measured on a Zen 5). The device's extra
 * roundings are about as many and as large as the operands' roundings that make that difference
 * (and its bias gradient sums float32 dpre, the CPU's bf16 dpre), so the device is within 3x the
 * CPU's bf16-float32 distance (+ 2e-3) of the CPU's bf16; a wrong layout or padding is off by O(1). */

static bool conv_gpu_ready(void) {
    if (tnt__gpu_cudnn_usable()) return true;
    print_message("Conv2D bf16: skipped, no cuDNN on this device (%s)\n", tnt__gpu_emulated() ? "emulated" : "real");
    return false;
}

/* channels and filters multiples of 8: the sizes cuDNN's bf16 tensor-core kernels take (another
 * size may leave a layer float32, with a warning: conv_gpu_plan_create) */
enum { CH = 9, CW = 9, CC = 8, CF = 8, CN = 32, CB = 8 };
static float cimgs[CN * CH * CW * CC], clabels[CN], ctargets[CN * CH * CW * CF];

static void make_conv_data(void) {
    tu_fill(cimgs, CN * CH * CW * CC, 41);
    tu_fill(ctargets, CN * CH * CW * CF, 42);
    for (int i = 0; i < CN; i++) {
        const float *x = cimgs + (int64_t)i * CH * CW * CC;
        clabels[i] = (float)((x[0] + x[CC * 40] > 0) * 2 + (x[CC * 20 + 1] > 0));
    }
}

/* one Conv2D (3x3, "same", bias): y = conv(x, W) + b */
static tnt_model *one_conv(const char *policy, tnt_device dev) {
    tu_ok(tnt_mixed_precision_set_global_policy(policy));
    tnt_model *m = tnt_sequential("conv");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(CH, CW, CC), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(CF, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME})));
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 3,
                                             .device = dev}));
    return m;
}

/* y (the layer's output for the first CB images, weights w: HWIO kernel then bias) against the
 * convolution in double over bf16 operands, within tol = 2^-8 |conv sum| + 1e-4 sum|terms|; the
 * largest differences / sum|terms| from it and from float32 into worst[0..1]. With `other` (the
 * CPU's output), y within 2 tol + extra sum|terms| of it too (both near the reference), its
 * largest difference / that tolerance into worst[2]. */
static void check_conv_forward(const float *w, const float *y, const float *other, double extra, const char *who,
                               double worst[3]) {
    worst[0] = worst[1] = worst[2] = 0;
    for (int n = 0; n < CB; n++)
        for (int i = 0; i < CH; i++)
            for (int j = 0; j < CW; j++)
                for (int f = 0; f < CF; f++) {
                    double s = 0, s32 = 0, mag = 0;
                    for (int di = 0; di < 3; di++)
                        for (int dj = 0; dj < 3; dj++) {
                            const int ii = i + di - 1, jj = j + dj - 1; /* "same": one row and column of zeros */
                            if (ii < 0 || ii >= CH || jj < 0 || jj >= CW) continue;
                            for (int c = 0; c < CC; c++) {
                                const float xv = cimgs[((n * CH + ii) * CW + jj) * CC + c];
                                const float wv = w[((di * 3 + dj) * CC + c) * CF + f]; /* HWIO */
                                const double t = (double)to_bf16_and_back(xv) * to_bf16_and_back(wv);
                                s += t, mag += fabs(t), s32 += (double)xv * wv;
                            }
                        }
                    const double b = w[3 * 3 * CC * CF + f], ref = s + b;
                    const int64_t at = ((n * CH + i) * CW + j) * CF + f;
                    const double got = y[at];
                    const double tol = 0x1p-8 * fabs(s) + 1e-4 * mag + 1e-30;
                    if (fabs(got - ref) > tol)
                        fail_msg("Conv2D bf16, %s: y[%lld] = %.9g, bf16 reference %.9g (conv sum %.6g, sum|terms| %.3g)",
                                 who, (long long)at, got, ref, s, mag);
                    if (other) {
                        const double r = fabs(got - other[at]) / (2 * tol + extra * mag);
                        if (r > 1) fail_msg("Conv2D bf16: %s y[%lld] = %.9g, CPU engine %.9g", who, (long long)at, got, (double)other[at]);
                        worst[2] = fmax(worst[2], r);
                    }
                    worst[0] = fmax(worst[0], fabs(got - ref) / (mag + 1e-30));
                    worst[1] = fmax(worst[1], fabs(got - (s32 + b)) / (mag + 1e-30));
                }
}

static void test_conv_bf16_forward(void **state) {
    (void)state;
    tnt_tensor x = {.shape = TNT_SHAPE(CB, CH, CW, CC), .data = cimgs}, *y = NULL, *yc = NULL;
    enum { NW = 3 * 3 * CC * CF + CF };
    static float w[NW];
    double d[3];
    /* the reference and its tolerance against the CPU's bf16 engine (every machine with native bf16) */
    tnt_model *cpu = one_conv("mixed_bfloat16", TNT_DEVICE_CPU);
    assert_int_equal(tnt_model_count_params(cpu), NW);
    tu_ok(tnt_get_weights(cpu, w, NW));
    for (int f = 0; f < CF; f++) w[NW - CF + f] = 0.1f * (float)(f - 2);
    tu_ok(tnt_set_weights(cpu, w, NW));
    tu_ok(tnt_predict_on_batch(cpu, &x, &yc));
    if (tnt_mixed_precision_native()) {
        check_conv_forward(w, yc->data, NULL, 0, "CPU bf16 engine", d);
        print_message("Conv2D bf16 forward, CPU bf16 engine: largest difference / sum|terms| %.3g from the bf16 "
                      "reference, %.3g from float32\n", d[0], d[1]);
    }
    tnt_tensor_free(yc);
    if (!conv_gpu_ready()) {
        tnt_model_free(cpu);
        return;
    }
    /* a device fit moves the weights; then predict on the device and on the CPU with its weights */
    tnt_model *m = one_conv("mixed_bfloat16", TNT_DEVICE_GPU);
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(cimgs, TNT_SHAPE(CH, CW, CC), ctargets, TNT_SHAPE(CH, CW, CF),
                                                                CN, false), CB, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_true(m->on_device);
    tu_ok(tnt_get_weights(m, w, NW));
    tu_ok(tnt_set_weights(cpu, w, NW));
    tu_ok(tnt_predict_on_batch(m, &x, &y));
    tu_ok(tnt_predict_on_batch(cpu, &x, &yc));
    assert_false(cpu->on_device);
    /* without native bf16 the CPU computes float32: then the operands' roundings apart too */
    check_conv_forward(w, y->data, yc->data, tnt_mixed_precision_native() ? 0 : 0x1p-8, "device", d);
    print_message("Conv2D bf16 forward on the device: largest difference / sum|terms| %.3g from the bf16 reference, "
                  "%.3g from float32; against the CPU engine %.3g of the tolerance\n", d[0], d[1], d[2]);
    if (!(d[1] > 1e-4)) /* it did compute in bf16 */
        fail_msg("Conv2D bf16 on the device equals float32 (%.3g): did cuDNN refuse bf16 (a warning above)?", d[1]);
    tnt_tensor_free(y), tnt_tensor_free(yc);
    tnt_dataset_free(ds);
    tnt_model_free(m), tnt_model_free(cpu);
}

/* 3x3 "same" + relu, 3x3 stride 2 "valid" (its dX feeds the first's dW), Flatten, Dense softmax */
static tnt_model *conv_net(const char *policy) {
    tu_ok(tnt_mixed_precision_set_global_policy(policy));
    tnt_model *m = tnt_sequential("convnet");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(CH, CW, CC), NULL)));
    tu_ok(tnt_model_add(m, tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.strides = {2, 2}})));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    return m;
}

static tnt_model *conv_net_compiled(const char *policy, tnt_device dev, float lr) {
    tnt_model *m = conv_net(policy);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("adam", &(tnt_optimizer_opts){.learning_rate = lr}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 7, .device = dev}));
    return m;
}

static tnt_dataset *conv_labels_ds(void) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(cimgs, TNT_SHAPE(CH, CW, CC), clabels, TNT_SHAPE(), CN, false), CB,
                             false);
}

/* the gradients of one step (learning rate 0 leaves the weights as they are) */
static float *conv_first_gradients(const char *policy, tnt_device dev, int64_t *n) {
    tnt_model *m = conv_net_compiled(policy, dev, 0.0f);
    tnt_dataset *ds = conv_labels_ds();
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .steps_per_epoch = 1}, NULL));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    *n = m->n_params;
    float *g = malloc((size_t)m->n_params * sizeof(float));
    if (m->on_device) {
        tu_ok(tnt__gpu_copy_to_host(g, m->dev->grads, (size_t)m->n_params * sizeof(float), TNT__GPU_COMPUTE));
        tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    } else {
        memcpy(g, m->grads, (size_t)m->n_params * sizeof(float));
    }
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return g;
}

/* the tolerance of the device's bf16 against the CPU's: 3x the CPU's bf16-float32 distance + 2e-3;
 * without native bf16 the CPU's mixed_bfloat16 is float32 and nothing calibrates it: 0.1 */
static double bf16_tolerance(double cpu_bf16_vs_f32) {
    return tnt_mixed_precision_native() ? 3 * cpu_bf16_vs_f32 + 2e-3 : 0.1;
}

static void test_conv_bf16_gradients(void **state) {
    (void)state;
    if (!conv_gpu_ready()) skip();
    int64_t n = 0, n2 = 0, n3 = 0;
    float *gd = conv_first_gradients("mixed_bfloat16", TNT_DEVICE_GPU, &n);
    float *gc = conv_first_gradients("mixed_bfloat16", TNT_DEVICE_CPU, &n2);
    float *g32 = conv_first_gradients("float32", TNT_DEVICE_CPU, &n3);
    assert_int_equal(n, n2);
    assert_int_equal(n, n3);
    /* weight tensor by weight tensor, in the flat buffer's order (the layers' weights in turn) */
    tnt_model *m = conv_net("float32");
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.0f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    double worst = 0, worst32 = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            const tnt__weight *wt = &m->layers[i]->weights[j];
            if (!wt->grad) continue;
            const int64_t off = wt->value - m->params, len = tnt_shape_numel(wt->shape);
            const double d = rel_l2(gd + off, gc + off, len), d32 = rel_l2(g32 + off, gc + off, len);
            print_message("Conv2D bf16 step-1 gradient of %s/%s: relative L2 device against CPU bf16 %.3g (CPU float32 "
                          "against CPU bf16 %.3g)\n", m->layers[i]->name, wt->name, d, d32);
            if (!(d <= bf16_tolerance(d32)))
                fail_msg("mixed_bfloat16 step-1 gradient of %s/%s: device differs from the CPU by %.3g (relative L2; "
                         "tolerance %.3g)", m->layers[i]->name, wt->name, d, bf16_tolerance(d32));
            worst = fmax(worst, d), worst32 = fmax(worst32, d32);
        }
    print_message("Conv2D bf16 step-1 gradients: relative L2 device against CPU bf16 %.3g at most (CPU float32 %.3g)\n",
                  worst, worst32);
    assert_true(rel_l2(gd, g32, n) > 1e-6); /* bf16 is not float32 */
    tnt_model_free(m);
    free(gd), free(gc), free(g32);
}

/* 3 epochs (4 steps each) of the conv net under mixed_bfloat16: device against the CPU */
static run train_conv(const char *policy, tnt_device dev) {
    tnt_model *m = conv_net_compiled(policy, dev, 0.01f);
    tnt_dataset *ds = conv_labels_ds();
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 3}, &h));
    tnt_dataset_free(ds);
    return collect(m, h, 3);
}

static void test_conv_bf16_training(void **state) {
    (void)state;
    if (!conv_gpu_ready()) skip();
    run gpu = train_conv("mixed_bfloat16", TNT_DEVICE_GPU);
    run cpu = train_conv("mixed_bfloat16", TNT_DEVICE_CPU);
    run cpu32 = train_conv("float32", TNT_DEVICE_CPU);
    assert_true(gpu.on_device && !cpu.on_device);
    assert_true(gpu.loss[2] < gpu.loss[0]); /* it learns */
    const double d = rel_l2(gpu.w, cpu.w, gpu.n), d32 = rel_l2(cpu32.w, cpu.w, gpu.n), tol = bf16_tolerance(d32);
    print_message("Conv2D mixed_bfloat16 weights after 3 epochs, relative L2: device against CPU %s %.3g (tolerance "
                  "%.3g), CPU float32 against it %.3g, device against CPU float32 %.3g\n",
                  tnt_mixed_precision_native() ? "bf16" : "(float32 here)", d, tol, d32, rel_l2(gpu.w, cpu32.w, gpu.n));
    assert_true(rel_l2(gpu.w, cpu32.w, gpu.n) > 1e-6); /* bf16 is not float32 */
    if (d > tol) fail_msg("Conv2D mixed_bfloat16: device weights differ from the CPU's by %.3g (relative L2)", d);
    for (int e = 0; e < 3; e++) {
        const double dl = fabs(gpu.loss[e] - cpu.loss[e]) / fabs(cpu.loss[e]);
        if (dl > bf16_tolerance(fabs(cpu32.loss[e] - cpu.loss[e]) / fabs(cpu.loss[e])))
            fail_msg("Conv2D mixed_bfloat16: loss of epoch %d: device %.9g, CPU %.9g (CPU float32 %.9g)", e + 1,
                     gpu.loss[e], cpu.loss[e], cpu32.loss[e]);
    }
    free(gpu.w), free(cpu32.w), free(cpu.w);
}

/* ---- ResNet-50's other layers under mixed_bfloat16 ------------------------------------------------
 * Conv-free, so that it runs on the emulated device too: a stem (ZeroPadding2D, MaxPooling2D 3x3/2),
 * a bottleneck whose 1x1 convolutions are per-pixel Dense layers, BatchNormalization, Activation
 * relu, the Add of the shortcut, GlobalAveragePooling2D and the Dense head. Only Dense computes in
 * bf16 (BatchNormalization computes float32 under mixed_bfloat16, as Keras's). */
static tnt_model *resnet_parts(const char *policy) {
    tu_ok(tnt_mixed_precision_set_global_policy(policy));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(CH, CW, CC), NULL);
    tnt_ktensor x = tnt_call(g, tnt_zero_padding2d(1, 1, 1, 1, NULL), in);
    x = tnt_call(g, tnt_max_pooling2d(3, 3, &(tnt_layer_opts){.strides = {2, 2}}), x);
    tnt_ktensor shortcut = tnt_call(g, tnt_batch_normalization(0.9f, 1.001e-5f, NULL), tnt_call(g, tnt_dense(8, NULL), x));
    x = tnt_call(g, tnt_dense(4, NULL), x);
    x = tnt_call(g, tnt_batch_normalization(0.9f, 1.001e-5f, NULL), x);
    x = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), x);
    x = tnt_call(g, tnt_dense(8, NULL), x);
    x = tnt_call(g, tnt_batch_normalization(0.9f, 1.001e-5f, NULL), x);
    x = tnt_call2(g, tnt_add(NULL), shortcut, x);
    x = tnt_call(g, tnt_activation_layer(TNT_ACT_RELU, NULL), x);
    x = tnt_call(g, tnt_global_average_pooling2d(NULL), x);
    tnt_ktensor out = tnt_call(g, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), x);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, "resnet_parts");
    tnt_graph_free(g);
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_non_null(m);
    return m;
}

static run train_resnet_parts(const char *policy, tnt_device dev) {
    tnt_model *m = resnet_parts(policy);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.05f, .momentum = 0.9f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 9, .device = dev}));
    tnt_dataset *ds = conv_labels_ds();
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    char why[256] = "";
    if (dev == TNT_DEVICE_GPU && !m->on_device && !tnt__model_device_check(m, why, sizeof why))
        fail_msg("ResNet's layers under %s stay off the device: %s", policy, why);
    tnt_dataset_free(ds);
    return collect(m, h, 2);
}

static void test_resnet_layers_bf16(void **state) {
    (void)state;
    run gpu = train_resnet_parts("mixed_bfloat16", TNT_DEVICE_GPU);
    run gpu32 = train_resnet_parts("float32", TNT_DEVICE_GPU);
    run cpu = train_resnet_parts("mixed_bfloat16", TNT_DEVICE_CPU);
    assert_true(gpu.on_device && gpu32.on_device && !cpu.on_device);
    const double d32 = rel_l2(gpu.w, gpu32.w, gpu.n);
    assert_true(d32 > 1e-6 && d32 < 1e-2);
    if (tnt_mixed_precision_native()) {
        const double d = rel_l2(gpu.w, cpu.w, gpu.n), tol = tnt__gpu_emulated() ? 1e-5 : 1e-3;
        print_message("ResNet layers, mixed_bfloat16, weights after 2 epochs, relative L2: device against CPU bf16 %.3g, "
                      "against device float32 %.3g\n", d, d32);
        if (d > tol) fail_msg("ResNet layers mixed_bfloat16: device weights differ from the CPU's by %.3g", d);
        for (int e = 0; e < 2; e++)
            if (fabs(gpu.loss[e] - cpu.loss[e]) > tol * fabs(cpu.loss[e]))
                fail_msg("ResNet layers mixed_bfloat16: loss of epoch %d: device %.9g, CPU %.9g", e + 1, gpu.loss[e],
                         cpu.loss[e]);
    } else {
        assert_true(rel_l2(cpu.w, gpu32.w, gpu.n) < 1e-5);
    }
    free(gpu.w), free(gpu32.w), free(cpu.w);
}

/* Every layer of ResNet-50 (zoo/resnet.c) under mixed_bfloat16 has a device path: without cuDNN
 * (the emulated device) only Conv2D refuses, for cuDNN's sake; with it, none does. */
static void test_resnet50_bf16_supported(void **state) {
    (void)state;
    tu_ok(tnt_mixed_precision_set_global_policy("mixed_bfloat16"));
    tnt_model *m = resnet50(10, 32);
    tu_ok(tnt_mixed_precision_set_global_policy("float32"));
    assert_non_null(m);
    int convs = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const tnt_layer *l = m->layers[i];
        const char *why = NULL;
        const bool conv = !strcmp(l->ops->class_name, "Conv2D");
        if (!strcmp(l->ops->class_name, "InputLayer")) continue;
        if (!l->ops->gpu) fail_msg("ResNet-50 layer \"%s\" (%s) has no device path", l->name, l->ops->class_name);
        if (conv) {
            convs++;
            assert_int_equal(l->dtype_policy, TNT__POLICY_MIXED_BF16);
        }
        if (!l->ops->gpu->supported || l->ops->gpu->supported(l, &why)) continue;
        if (conv && !tnt__gpu_cudnn_usable() && why && strstr(why, "cuDNN")) continue;
        fail_msg("ResNet-50 layer \"%s\" (%s) under mixed_bfloat16 has no device path: %s", l->name,
                 l->ops->class_name, why ? why : "?");
    }
    assert_int_equal(convs, 53);
    tnt_model_free(m);
}

/* TF32 on: the model follows float32 within TF32's tolerance, and differs from it */
static void test_tf32_training(void **state) {
    (void)state;
    run f32 = train("float32", TNT_DEVICE_GPU, 2);
    tnt_gpu_set_tf32(true);
    run t = train("float32", TNT_DEVICE_GPU, 2);
    tnt_gpu_set_tf32(false);
    run again = train("float32", TNT_DEVICE_GPU, 2);
    const double d = rel_l2(t.w, f32.w, t.n);
    print_message("TF32 on: weights after 2 epochs differ from float32 by %.3g (relative L2)\n", d);
    assert_true(d < 5e-3);
    if (tnt__gpu_emulated()) assert_true(d > 1e-7); /* a GPU may keep small products in float32 */
    tu_assert_bitwise(again.w, f32.w, f32.n, "TF32 off again"); /* the setting is undone */
    free(f32.w), free(t.w), free(again.w);
}

int main(void) {
    /* ctest: the emulated device; scripts/gpu_check.sh runs it on a GPU with TNT_GPU_EMULATE=0 */
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt_init(NULL, NULL) != TNT_OK) return fprintf(stderr, "tnt_init: %s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_precision: no device: %s\n", why), 77;
    make_data();
    make_conv_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_tf32),     cmocka_unit_test(test_tf32_setting), cmocka_unit_test(test_sgemm_tf32),
        cmocka_unit_test(test_to_bf16),        cmocka_unit_test(test_gemm_bf16),    cmocka_unit_test(test_dense_bf16_forward),
        cmocka_unit_test(test_mixed_training), cmocka_unit_test(test_attention_bf16),
        cmocka_unit_test(test_tf32_training),  cmocka_unit_test(test_conv_bf16_forward),
        cmocka_unit_test(test_conv_bf16_gradients), cmocka_unit_test(test_conv_bf16_training),
        cmocka_unit_test(test_resnet_layers_bf16), cmocka_unit_test(test_resnet50_bf16_supported),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}
