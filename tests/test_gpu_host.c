/* test_gpu_host.c: the device kernels (src/gpu/kernels/) through their host build
 * (tnt__gpu_host_kernel_find, the trampolines the emulated device uses) against the CPU engine:
 * the libm-free math against double references, the elementwise and bias kernels, every
 * activation forward and backward against kernels/activation.c, the optimizer steps bitwise
 * against optimizers/optimizer.c over several steps. Outputs start poisoned (a NaN), sizes are
 * odd and grids of several blocks, so a missed or doubly visited element shows. The layers'
 * kernels are in test_gpu_host_layers.c. */
#include "gpu_host_util.h"

#include "gpu/kernels/kmath.h" /* the host branch of the kernels' math: static functions */
#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "optimizers/optimizer.h"

/* ---- math without libm ---------------------------------------------------------------------- */

/* worst relative error of f against ref over [lo, hi] in steps */
static double worst_rel(float (*f)(float), double (*ref)(double), double lo, double hi, double step, double floor_abs) {
    double worst = 0;
    for (double v = lo; v <= hi; v += step) {
        const float x = (float)v;
        const double r = ref(x), got = f(x);
        const double e = fabs(got - r) / (fabs(r) > floor_abs ? fabs(r) : floor_abs);
        if (e > worst) worst = e;
    }
    return worst;
}

static void test_kmath(void **state) {
    (void)state;
    /* float has 2^-24 = 6e-8 relative precision: about 2 ulps allowed */
    double e;
    e = worst_rel(k_expf, exp, -87, 88, 0.00731, 1e-30);
    printf("k_expf   max rel err %.3g on [-87, 88]\n", e);
    assert_true(e < 2.5e-7);
    e = worst_rel(k_logf, log, 1e-6, 1e6, 0.0917, 1e-30);
    printf("k_logf   max rel err %.3g on [1e-6, 1e6]\n", e);
    assert_true(e < 2.5e-7);
    e = worst_rel(k_logf, log, 1e-7, 3, 0.0000917, 1e-7); /* near 1: absolute below 1e-7 */
    assert_true(e < 2.5e-7);
    e = worst_rel(k_tanhf, tanh, -12, 12, 0.000913, 1e-30);
    printf("k_tanhf  max rel err %.3g on [-12, 12]\n", e);
    assert_true(e < 2.5e-7);
    e = worst_rel(k_expm1f, expm1, -20, 20, 0.000917, 1e-30);
    printf("k_expm1f max rel err %.3g on [-20, 20]\n", e);
    assert_true(e < 2.5e-7);
    e = worst_rel(k_log1pf, log1p, -0.999, 100, 0.000917, 1e-30);
    printf("k_log1pf max rel err %.3g on [-0.999, 100]\n", e);
    assert_true(e < 2.5e-7);
    double ee = 0;
    for (double v = -6; v <= 6; v += 0.00137) ee = fmax(ee, fabs(k_erf(v) - erf(v)));
    printf("k_erf    max abs err %.3g on [-6, 6]\n", ee);
    assert_true(ee < 1.6e-8); /* erfc(4) = 1.5e-8 at the cut to 1: a quarter of a float ulp of 1 */
    ee = 0;
    for (double v = -700; v <= 700; v += 0.0737) ee = fmax(ee, fabs(k_exp_d(v) / exp(v) - 1));
    printf("k_exp_d  max rel err %.3g on [-700, 700]\n", ee);
    assert_true(ee < 1e-12);
    /* edges */
    assert_true(k_expf(-100.f) == 0.f && isinf(k_expf(89.f)) && k_expf(0.f) == 1.f);
    assert_true(isinf(k_logf(0.f)) && k_logf(0.f) < 0 && isnan(k_logf(-1.f)) && k_logf(1.f) == 0.f);
    assert_true(fabsf(k_logf(1e-40f) - logf(1e-40f)) < 1e-5f); /* subnormal */
    assert_true(k_tanhf(20.f) == 1.f && k_tanhf(-20.f) == -1.f && k_expm1f(0.f) == 0.f && k_log1pf(0.f) == 0.f);
    assert_true(isnan(k_expf(NAN)) && isnan(k_tanhf(NAN)));
}

/* ---- elementwise ---------------------------------------------------------------------------- */

static void test_elementwise(void **state) {
    (void)state;
    i64 n = 1001;
    float *x = gh_random(n, -3, 3, 1), *b = gh_random(n, -3, 3, 2), *y = gh_poisoned(n), *ref = gh_poisoned(n);
    float v = 0.75f, a = -1.5f, c = 0.25f;
    gh_launch("tnt_k_fill", 3, ARGS(&y, &n, &v));
    for (i64 i = 0; i < n; i++) ref[i] = v;
    tu_assert_bitwise(y, ref, n, "fill");
    gh_launch("tnt_k_copy", 5, ARGS(&x, &y, &n));
    tu_assert_bitwise(y, x, n, "copy");
    gh_launch("tnt_k_scale", 2, ARGS(&x, &y, &n, &a));
    for (i64 i = 0; i < n; i++) ref[i] = a * x[i];
    tu_assert_bitwise(y, ref, n, "scale");
    gh_launch("tnt_k_add", 7, ARGS(&x, &b, &y, &n));
    for (i64 i = 0; i < n; i++) ref[i] = x[i] + b[i];
    tu_assert_bitwise(y, ref, n, "add");
    gh_launch("tnt_k_mul", 7, ARGS(&x, &b, &y, &n));
    for (i64 i = 0; i < n; i++) ref[i] = x[i] * b[i];
    tu_assert_bitwise(y, ref, n, "mul");
    memcpy(y, b, (size_t)n * sizeof(float));
    gh_launch("tnt_k_axpy", 3, ARGS(&x, &y, &n, &a));
    for (i64 i = 0; i < n; i++) ref[i] = b[i] + a * x[i];
    tu_assert_bitwise(y, ref, n, "axpy");
    memcpy(y, b, (size_t)n * sizeof(float));
    gh_launch("tnt_k_axpby", 3, ARGS(&x, &y, &n, &a, &c));
    for (i64 i = 0; i < n; i++) ref[i] = a * x[i] + c * b[i];
    tu_assert_bitwise(y, ref, n, "axpby");
    float clipv = 1.0f;
    x[5] = NAN;
    gh_launch("tnt_k_clip", 4, ARGS(&x, &y, &n, &clipv));
    for (i64 i = 0; i < n; i++) ref[i] = x[i] > 1.f ? 1.f : x[i] < -1.f ? -1.f : x[i];
    tu_assert_bitwise(y, ref, n, "clip (NaN stays NaN)");
    assert_true(isnan(y[5]));
    x[5] = 0.5f;
    /* sum of squares: partials of a 7-block grid add up to the double sum */
    float *partial = gh_poisoned(7);
    gh_launch("tnt_k_sum_squares_partial", 7, ARGS(&x, &partial, &n));
    double got = 0, want = 0;
    for (int k = 0; k < 7; k++) got += partial[k];
    for (i64 i = 0; i < n; i++) want += (double)x[i] * x[i];
    assert_true(fabs(got - want) <= 1e-6 * want);
    free(partial), free(x), free(b), free(y), free(ref);
}

/* column sums in row order, float (as layers/core/dense.c's bias gradient) or double */
static void col_sums_ref(const float *x, float *out, i64 rows, i64 cols) {
    memcpy(out, x, (size_t)cols * sizeof(float));
    for (i64 i = 1; i < rows; i++)
        for (i64 j = 0; j < cols; j++) out[j] += x[i * cols + j];
}
static void col_sums_exact(const float *x, float *out, i64 rows, i64 cols) {
    for (i64 j = 0; j < cols; j++) {
        double s = 0.0;
        for (i64 i = 0; i < rows; i++) s += x[i * cols + j];
        out[j] = (float)s;
    }
}

static void test_bias(void **state) {
    (void)state;
    i64 rows = 67, cols = 13, n = rows * cols;
    float *x = gh_random(n, -2, 2, 3), *bias = gh_random(cols, -1, 1, 4), *y = gh_copy(x, n), *ref = gh_poisoned(n);
    gh_launch("tnt_k_bias_add", 5, ARGS(&y, &bias, &rows, &cols));
    for (i64 i = 0; i < n; i++) ref[i] = x[i] + bias[i % cols];
    tu_assert_bitwise(y, ref, n, "bias_add");
    float *z = gh_poisoned(n);
    gh_launch("tnt_k_bias_set", 4, ARGS(&z, &bias, &rows, &cols));
    for (i64 i = 0; i < n; i++) ref[i] = bias[i % cols];
    tu_assert_bitwise(z, ref, n, "bias_set");
    float *db = gh_poisoned(cols), *dbref = gh_poisoned(cols);
    /* the column sums in double: the exact sum rounded once (a fixed order of double additions) */
    float *dbx = gh_poisoned(cols);
    gh_launch("tnt_k_col_sums", 2, ARGS(&x, &db, &rows, &cols));
    col_sums_exact(x, dbx, rows, cols);
    gh_assert_close(db, dbx, cols, 2.4e-7, 1e-7, "col_sums (double)");
    col_sums_ref(x, dbref, rows, cols);
    gh_assert_close(db, dbref, cols, 1e-6, 1e-6, "col_sums against Dense's float row order");
    /* tall input in chunks of 16 rows: 5 partial rows (float, row order: bitwise), then their sums */
    i64 chunk = 16, chunks = (rows + chunk - 1) / chunk;
    float *part = gh_poisoned(chunks * cols), *part_ref = gh_poisoned(chunks * cols);
    gh_launch("tnt_k_col_sums_partial", 3, ARGS(&x, &part, &rows, &cols, &chunk));
    for (i64 k = 0; k < chunks; k++) {
        const i64 r1 = (k + 1) * chunk < rows ? (k + 1) * chunk : rows;
        col_sums_ref(x + k * chunk * cols, part_ref + k * cols, r1 - k * chunk, cols);
    }
    tu_assert_bitwise(part, part_ref, chunks * cols, "col_sums_partial (row order in each chunk)");
    gh_launch("tnt_k_col_sums", 1, ARGS(&part, &db, &chunks, &cols));
    gh_assert_close(db, dbref, cols, 1e-6, 1e-6, "col_sums in chunks");
    /* many rows over few columns (LeNet's conv1 bias: 1568 partials of 6 columns, a tile of 8
     * lanes x 32 groups) and a column count past one tile */
    for (int shape = 0; shape < 2; shape++) {
        i64 tr = shape ? 77 : 1568, tc = shape ? 45 : 6;
        float *tx = gh_random(tr * tc, -1, 1, 6), *t1 = gh_poisoned(tc), *t2 = gh_poisoned(tc);
        gh_launch("tnt_k_col_sums", 1, ARGS(&tx, &t1, &tr, &tc));
        col_sums_exact(tx, t2, tr, tc);
        gh_assert_close(t1, t2, tc, 2.4e-7, 1e-7, "col_sums (tall or wide)");
        free(tx), free(t1), free(t2);
    }
    free(dbx), free(part_ref);
    free(x), free(bias), free(y), free(ref), free(z), free(db), free(dbref), free(part);
}

static void test_bf16(void **state) {
    (void)state;
    i64 n = 999;
    float *x = gh_random(n, -1000, 1000, 5);
    /* ties, NaN, infinities, the largest values, subnormals */
    const uint32_t special[] = {0x3f808000, 0x3f818000, 0x7fc00001, 0xff800000, 0x7f800000, 0x7f7fffff,
                                0x00000001, 0x80400000, 0x7f7f8000, 0xffa00000};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) memcpy(&x[k * 31], &special[k], 4);
    unsigned short *h = malloc((size_t)n * 2), *href = malloc((size_t)n * 2);
    memset(h, 0xab, (size_t)n * 2);
    gh_launch("tnt_k_f32_to_bf16", 3, ARGS(&x, &h, &n));
    tnt__f32_to_bf16(x, href, n);
    for (i64 i = 0; i < n; i++) {
        /* the AVX-512 BF16 instruction flushes subnormals to zero, the engine's scalar and AVX2 code
         * round them: a subnormal matches the scalar rounding, every other value the engine's */
        const bool subnormal = x[i] != 0 && fabsf(x[i]) < 1.17549435e-38f;
        const unsigned short want = subnormal ? tnt__bf16_from_float(x[i]) : href[i];
        if (h[i] != want) fail_msg("f32_to_bf16[%lld] of %a: 0x%04x, expected 0x%04x", i, x[i], h[i], want);
        href[i] = want;
    }
    float *back = gh_poisoned(n), *backref = gh_poisoned(n);
    gh_launch("tnt_k_bf16_to_f32", 2, ARGS(&h, &back, &n));
    tnt__bf16_to_f32(href, backref, n);
    tu_assert_bitwise(back, backref, n, "bf16_to_f32");
    free(x), free(h), free(href), free(back), free(backref);
}

/* ---- activations ---------------------------------------------------------------------------- */

/* x in [-6, 6) with the formulas' break points among them */
static float *act_input(i64 n, uint64_t seed) {
    float *x = gh_random(n, -6, 6, seed);
    const float edges[] = {0.f, 0.5f, -0.5f, 1.f, -1.f, 2.5f, -2.5f, 3.f, -3.f, 6.f, 1e-3f, -1e-3f, 0.3f, 5.5f};
    for (size_t k = 0; k < sizeof edges / sizeof edges[0] && (i64)k * 7 < n; k++) x[k * 7] = edges[k];
    return x;
}

static bool act_rowwise(int act) {
    return act == TNT_ACT_SOFTMAX || act == TNT_ACT_LOG_SOFTMAX || act == TNT_ACT_SPARSEMAX;
}

static void check_act(tnt_activation act, float alpha, i64 rows, i64 cols) {
    i64 n = rows * cols;
    float *x = act_input(n, 10 + act), *dy = gh_random(n, -1, 1, 50 + act);
    float *y = gh_poisoned(n), *dx = gh_poisoned(n), *yk = gh_poisoned(n), *dxk = gh_poisoned(n);
    tnt__act a;
    tu_ok(tnt__act_create(&a, act, alpha, rows, cols));
    tu_ok(tnt__act_forward(&a, x, y));
    tu_ok(tnt__act_backward(&a, x, y, dy, dx));
    int code = (int)act;
    const char *fwd = "tnt_k_act_fwd", *bwd = "tnt_k_act_bwd";
    if (act == TNT_ACT_SOFTMAX) fwd = "tnt_k_softmax_fwd", bwd = "tnt_k_softmax_bwd";
    if (act == TNT_ACT_LOG_SOFTMAX) fwd = "tnt_k_log_softmax_fwd", bwd = "tnt_k_log_softmax_bwd";
    if (act == TNT_ACT_SPARSEMAX) fwd = "tnt_k_sparsemax_fwd", bwd = "tnt_k_sparsemax_bwd";
    if (act_rowwise(act)) {
        gh_launch(fwd, 3, ARGS(&x, &yk, &rows, &cols));
        gh_launch(bwd, 5, ARGS(&yk, &dy, &dxk, &rows, &cols));
    } else {
        /* backward reads only what the CPU's reads: the other input is NULL */
        float *xin = tnt__act_backward_needs_src(act) || act == TNT_ACT_LINEAR ? x : NULL;
        float *yin = xin ? NULL : yk;
        gh_launch("tnt_k_act_fwd", 3, ARGS(&code, &alpha, &x, &yk, &n));
        gh_launch("tnt_k_act_bwd", 4, ARGS(&code, &alpha, &xin, &yin, &dy, &dxk, &n));
    }
    /* 1e-6 relative, 1e-6 absolute (x - tanh x and the like cancel near 0) */
    char what[96];
    snprintf(what, sizeof what, "%s forward (alpha %g)", tnt_activation_name(act), (double)alpha);
    printf("%-16s fwd %.2f bwd %.2f of the tolerance\n", tnt_activation_name(act), gh_worst(yk, y, n, 1e-6, 1e-6, NULL),
           gh_worst(dxk, dx, n, 1e-6, 1e-6, NULL));
    gh_assert_close(yk, y, n, 1e-6, 1e-6, what);
    snprintf(what, sizeof what, "%s backward (alpha %g)", tnt_activation_name(act), (double)alpha);
    gh_assert_close(dxk, dx, n, 1e-6, 1e-6, what);
    tnt__act_destroy(&a);
    free(x), free(dy), free(y), free(dx), free(yk), free(dxk);
}

/* the fused epilogue equals bias add then activation, bitwise */
static void test_bias_act(void **state) {
    (void)state;
    i64 rows = 33, cols = 17, n = rows * cols;
    float *x = gh_random(n, -4, 4, 60), *bias = gh_random(cols, -1, 1, 61);
    for (int act = 0; act < TNT_ACT_COUNT; act++) {
        if (act_rowwise(act)) continue;
        float alpha = act == TNT_ACT_LEAKY_RELU ? 0.3f : 0.0f;
        float *pre = gh_copy(x, n), *y = gh_poisoned(n), *ref = gh_copy(x, n), *yref = gh_poisoned(n);
        gh_launch("tnt_k_bias_act_fwd", 3, ARGS(&pre, &bias, &y, &act, &alpha, &rows, &cols));
        gh_launch("tnt_k_bias_add", 2, ARGS(&ref, &bias, &rows, &cols));
        gh_launch("tnt_k_act_fwd", 2, ARGS(&act, &alpha, &ref, &yref, &n));
        tu_assert_bitwise(pre, ref, n, "bias_act_fwd: pre-activation");
        tu_assert_bitwise(y, yref, n, "bias_act_fwd: output");
        float *none = NULL; /* no bias, in place */
        memcpy(pre, x, (size_t)n * sizeof(float));
        gh_launch("tnt_k_bias_act_fwd", 2, ARGS(&pre, &none, &pre, &act, &alpha, &rows, &cols));
        gh_launch("tnt_k_act_fwd", 2, ARGS(&act, &alpha, &x, &yref, &n));
        tu_assert_bitwise(pre, yref, n, "bias_act_fwd in place without a bias");
        /* Add's fused kernels: add then the activation; the gradient from y to two outputs */
        float *b2 = gh_random(n, -2, 2, 62), *sum = gh_poisoned(n);
        gh_launch("tnt_k_add_act", 3, ARGS(&x, &b2, &y, &act, &alpha, &n));
        gh_launch("tnt_k_add", 2, ARGS(&x, &b2, &sum, &n));
        gh_launch("tnt_k_act_fwd", 2, ARGS(&act, &alpha, &sum, &yref, &n));
        tu_assert_bitwise(y, yref, n, "add_act: add then act_fwd");
        if (act == TNT_ACT_RELU || act == TNT_ACT_LEAKY_RELU || act == TNT_ACT_SIGMOID || act == TNT_ACT_TANH ||
            act == TNT_ACT_ELU) { /* the gradients read from y */
            float *dy = gh_random(n, -1, 1, 63), *d0 = gh_poisoned(n), *d1 = gh_poisoned(n), *dref = gh_poisoned(n);
            float *no_x = NULL, *no_dx = NULL;
            gh_launch("tnt_k_act_bwd_y2", 3, ARGS(&act, &alpha, &y, &dy, &d0, &d1, &n));
            gh_launch("tnt_k_act_bwd", 2, ARGS(&act, &alpha, &no_x, &y, &dy, &dref, &n));
            tu_assert_bitwise(d0, dref, n, "act_bwd_y2: first output");
            tu_assert_bitwise(d1, dref, n, "act_bwd_y2: second output");
            free(d1), d1 = gh_poisoned(n);
            gh_launch("tnt_k_act_bwd_y2", 3, ARGS(&act, &alpha, &y, &dy, &d1, &no_dx, &n));
            tu_assert_bitwise(d1, dref, n, "act_bwd_y2: one output");
            free(dy), free(d0), free(d1), free(dref);
        }
        free(b2), free(sum);
        free(pre), free(y), free(ref), free(yref);
    }
    free(x), free(bias);
}

static void test_activations(void **state) {
    (void)state;
    for (int act = 0; act < TNT_ACT_COUNT; act++) check_act((tnt_activation)act, 0.0f, 37, 29);
    check_act(TNT_ACT_LEAKY_RELU, 0.3f, 11, 17); /* the LeakyReLU layer's alpha */
    check_act(TNT_ACT_ELU, 0.5f, 11, 17);
    check_act(TNT_ACT_RELU, 0.1f, 11, 17); /* relu ignores alpha (the ReLU layer's slope is leaky relu) */
    check_act(TNT_ACT_SOFTMAX, 0.0f, 5, 1000); /* long rows */
    check_act(TNT_ACT_LOG_SOFTMAX, 0.0f, 5, 1000);
    check_act(TNT_ACT_SOFTMAX, 0.0f, 64, 1);
}

/* ---- optimizers ----------------------------------------------------------------------------- */

/* The kernel launch for one step of optimizer o over n parameters, with the scalars computed as
 * tnt__optimizer_apply computes them; slots[k] mirrors o's slot k. The gradient is clipped first
 * as the CPU does when clipvalue is set. */
static void device_step(tnt_optimizer *o, float *p, const float *g_in, float **slots, float *clip_buf, i64 n) {
    const float *g = g_in;
    if (o->clipvalue > 0) {
        float c = o->clipvalue;
        gh_launch("tnt_k_clip", 3, ARGS(&g_in, &clip_buf, &n, &c));
        g = clip_buf;
    }
    const double lr = o->learning_rate, t = (double)(o->iterations + 1);
    float wdl = (float)((double)o->weight_decay * lr), eps = o->epsilon, lrf = (float)lr;
    float *none = NULL;
    switch (o->kind) {
    case TNT__OPT_SGD:
        if (o->momentum > 0) {
            int nesterov = o->nesterov;
            float mom = o->momentum;
            gh_launch("tnt_k_sgd_momentum", 3, ARGS(&p, &g, &slots[0], &n, &lrf, &mom, &nesterov, &wdl));
        } else {
            gh_launch("tnt_k_sgd", 3, ARGS(&p, &g, &n, &lrf, &wdl));
        }
        break;
    case TNT__OPT_ADAM: {
        float alpha = (float)(lr * sqrt(1.0 - pow(o->beta_2, t)) / (1.0 - pow(o->beta_1, t)));
        float c1 = 1.0f - o->beta_1, c2 = 1.0f - o->beta_2;
        float **vhat = o->amsgrad ? &slots[2] : &none;
        gh_launch("tnt_k_adam", 4, ARGS(&p, &g, &slots[0], &slots[1], vhat, &n, &c1, &c2, &alpha, &eps, &wdl));
        break;
    }
    case TNT__OPT_RMSPROP: {
        int k = 1;
        float **mo = o->momentum > 0 ? &slots[k++] : &none;
        float **a = o->centered ? &slots[k++] : &none;
        float rho = o->rho, mom = o->momentum;
        gh_launch("tnt_k_rmsprop", 3, ARGS(&p, &g, &slots[0], mo, a, &n, &lrf, &rho, &mom, &eps, &wdl));
        break;
    }
    case TNT__OPT_ADAGRAD: gh_launch("tnt_k_adagrad", 3, ARGS(&p, &g, &slots[0], &n, &lrf, &eps, &wdl)); break;
    case TNT__OPT_ADADELTA: {
        float rho = o->rho;
        gh_launch("tnt_k_adadelta", 3, ARGS(&p, &g, &slots[0], &slots[1], &n, &lrf, &rho, &eps, &wdl));
        break;
    }
    case TNT__OPT_ADAMAX: {
        float step = (float)(lr / (1.0 - pow(o->beta_1, t))), c1 = 1.0f - o->beta_1, b2 = o->beta_2;
        gh_launch("tnt_k_adamax", 3, ARGS(&p, &g, &slots[0], &slots[1], &n, &c1, &b2, &step, &eps, &wdl));
        break;
    }
    case TNT__OPT_NADAM: {
        const double u_t = o->beta_1 * (1.0 - 0.5 * pow(0.96, t)), u_t1 = o->beta_1 * (1.0 - 0.5 * pow(0.96, t + 1));
        const double up_t = o->nadam_u_product * u_t, up_t1 = up_t * u_t1;
        float cm = (float)(u_t1 / (1.0 - up_t1)), cg = (float)((1.0 - u_t) / (1.0 - up_t));
        float cv = (float)(1.0 / (1.0 - pow(o->beta_2, t))), c1 = 1.0f - o->beta_1, c2 = 1.0f - o->beta_2;
        gh_launch("tnt_k_nadam", 3,
                  ARGS(&p, &g, &slots[0], &slots[1], &n, &c1, &c2, &cm, &cg, &cv, &lrf, &eps, &wdl));
        break;
    }
    }
}

static void check_optimizer(const char *name, tnt_optimizer_opts opts) {
    i64 n = 1003;
    tnt_optimizer *o = tnt_optimizer_new(name, &opts);
    if (!o) fail_msg("%s: %s", name, tnt_last_error());
    tu_ok(tnt__optimizer_prepare(o, n));
    float *p = gh_random(n, -1, 1, 7), *pk = gh_copy(p, n), *clip = gh_poisoned(n);
    float *slots[TNT__OPT_MAX_SLOTS] = {NULL, NULL, NULL};
    for (int k = 0; k < o->n_slots; k++) slots[k] = gh_copy(o->slots[k], n); /* zeros, Adagrad's initial value */
    for (int step = 0; step < 4; step++) {
        float *g = gh_random(n, -2, 2, 100 + step);
        g[3] = 0.0f;
        if (step == 2) tu_ok(tnt_optimizer_set_lr(o, o->learning_rate * 0.5f));
        device_step(o, pk, g, slots, clip, n);
        tu_ok(tnt__optimizer_apply(o, p, g, 0, n));
        tnt__optimizer_finish_step(o);
        char what[96];
        snprintf(what, sizeof what, "%s step %d: parameters", name, step + 1);
        tu_assert_bitwise(pk, p, n, what);
        for (int k = 0; k < o->n_slots; k++) {
            snprintf(what, sizeof what, "%s step %d: slot %s", name, step + 1, o->slot_names[k]);
            tu_assert_bitwise(slots[k], o->slots[k], n, what);
        }
        free(g);
    }
    for (int k = 0; k < o->n_slots; k++) free(slots[k]);
    free(p), free(pk), free(clip);
    tnt_optimizer_free(o);
}

static void test_optimizers(void **state) {
    (void)state;
    check_optimizer("sgd", (tnt_optimizer_opts){.learning_rate = 0.1f});
    check_optimizer("sgd", (tnt_optimizer_opts){.learning_rate = 0.1f, .weight_decay = 0.01f});
    check_optimizer("sgd", (tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f});
    check_optimizer("sgd", (tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.9f, .nesterov = true});
    check_optimizer("sgd", (tnt_optimizer_opts){.learning_rate = 0.05f, .momentum = 0.8f, .weight_decay = 0.1f,
                                                .clipvalue = 0.5f});
    check_optimizer("adam", (tnt_optimizer_opts){0});
    check_optimizer("adam", (tnt_optimizer_opts){.learning_rate = 0.01f, .amsgrad = true});
    check_optimizer("adam", (tnt_optimizer_opts){.learning_rate = 0.01f, .beta_1 = 0.8f, .beta_2 = 0.99f,
                                                 .epsilon = 1e-3f, .clipvalue = 1.0f});
    check_optimizer("adamw", (tnt_optimizer_opts){.learning_rate = 0.01f});
    check_optimizer("adamw", (tnt_optimizer_opts){.learning_rate = 0.01f, .weight_decay = 0.1f, .amsgrad = true});
    check_optimizer("rmsprop", (tnt_optimizer_opts){0});
    check_optimizer("rmsprop", (tnt_optimizer_opts){.learning_rate = 0.01f, .momentum = 0.9f});
    check_optimizer("rmsprop", (tnt_optimizer_opts){.learning_rate = 0.01f, .centered = true});
    check_optimizer("rmsprop", (tnt_optimizer_opts){.learning_rate = 0.01f, .momentum = 0.5f, .centered = true,
                                                    .rho = 0.8f, .weight_decay = 0.01f});
    check_optimizer("adagrad", (tnt_optimizer_opts){.learning_rate = 0.1f});
    check_optimizer("adadelta", (tnt_optimizer_opts){.learning_rate = 1.0f});
    check_optimizer("adamax", (tnt_optimizer_opts){.learning_rate = 0.01f});
    check_optimizer("nadam", (tnt_optimizer_opts){.learning_rate = 0.01f});
    check_optimizer("nadam", (tnt_optimizer_opts){.learning_rate = 0.01f, .weight_decay = 0.05f});
}

static void test_lookup(void **state) {
    (void)state;
    assert_non_null(tnt__gpu_host_kernel_find("tnt_k_adam"));
    assert_null(tnt__gpu_host_kernel_find("tnt_k_no_such_kernel"));
    assert_null(tnt__gpu_host_kernel_find(""));
    assert_null(tnt__gpu_host_kernel_find(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),      cmocka_unit_test(test_kmath),       cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_bias),        cmocka_unit_test(test_bf16),        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_optimizers),  cmocka_unit_test(test_bias_act),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
