/* test_gpu_regularizers.c: regularizers and constraints while a model trains on the device
 * (model/device_rules.h), run by ctest under mpirun with 1 and 2 ranks on the emulated device
 * (TNT_GPU_EMULATE=1; scripts/gpu_check.sh runs it on a real GPU with TNT_GPU_EMULATE=0).
 * Models with every weight regularizer (L1, L2, L1L2 on kernels and biases), activity
 * regularizers (on a hidden layer and on the softmax output) and every constraint (MaxNorm with
 * the default axis, several axes and axes apart, NonNeg, UnitNorm, MinMaxNorm), Dense and Conv2D,
 * trained on the device equal the CPU engine: the loss history (which holds the penalties), the
 * weights and evaluate's loss, with the loss gradient on the device and on the host, serially and
 * distributed (host-staged sums and NCCL's path through a stand-in). The constraints hold on the
 * device's weights (norms against their bounds, recomputed here). OrthogonalRegularizer keeps a
 * model on the CPU under auto and fails under gpu, naming it.
 * The noise layers (GaussianNoise, GaussianDropout, AlphaDropout, SpatialDropout1D/2D,
 * ActivityRegularization) draw the CPU's noise on the device: each layer's forward and backward
 * bitwise the CPU's, 2^18 normal draws bitwise core.c's tnt__rand_normal, and a model of them all
 * trained on the device equals the CPU, serially and distributed (the draws keyed on the global
 * sample index). */
#include "gpu_device_util.h"
#include "testutil.h"

#include "comm/comm.h"
#include "core/config.h"
#include "gpu/gpu.h"
#include "model/device.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 80, BATCH = 16, EPOCHS = 3, FEAT = 12, CLASSES = 3, IMG = 6, CH = 2 };

static float xs_dense[N * FEAT], xs_conv[N * IMG * IMG * CH], ys[N];
/* emulated: the CPU's sgemm and formulas, sums in other orders; a real GPU: GPU-DESIGN.md's 1e-3 */
static double RTOL = 1e-5, ATOL = 1e-6;

static void make_data(void) {
    tu_fill(xs_dense, N * FEAT, 21);
    tu_fill(xs_conv, N * IMG * IMG * CH, 22);
    for (int i = 0; i < N; i++) {
        float s = 0;
        for (int j = 0; j < FEAT; j++) s += xs_dense[i * FEAT + j] * (j % 3 ? 1.0f : -1.5f);
        ys[i] = (float)(s > 0.4f ? 2 : s > -0.4f ? 1 : 0);
    }
}

static void set_rule(tnt_layer *l, const char *key, tnt_regularizer_kind kind, float l1, float l2) {
    tu_ok(tnt_layer_set_regularizer(l, key, kind, l1, l2));
}
static void set_constraint(tnt_layer *l, const char *key, tnt_constraint c) { tu_ok(tnt_layer_set_constraint(l, key, &c)); }

/* Dense: every weight regularizer, activity regularizers (hidden and the softmax output) and the
 * four constraints */
static tnt_model *dense_model(void) {
    tnt_model *m = tnt_sequential("dense_rules");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEAT), NULL)));
    tnt_layer *a = tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_TANH, .name = "a"});
    set_rule(a, "kernel_regularizer", TNT_REG_L2, 0, 0.01f);
    set_rule(a, "bias_regularizer", TNT_REG_L1, 0.02f, 0);
    set_rule(a, "activity_regularizer", TNT_REG_L1L2, 0.01f, 0.005f);
    set_constraint(a, "kernel_constraint", (tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.9f});
    tnt_layer *b = tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU, .name = "b"});
    set_rule(b, "kernel_regularizer", TNT_REG_L1L2, 0.003f, 0.004f);
    set_constraint(b, "kernel_constraint", (tnt_constraint){.kind = TNT_UNIT_NORM, .n_axes = 1, .axes = {-1}});
    set_constraint(b, "bias_constraint", (tnt_constraint){.kind = TNT_NON_NEG});
    tnt_layer *c = tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "c"});
    set_rule(c, "kernel_regularizer", TNT_REG_L1, 0.01f, 0);
    set_rule(c, "activity_regularizer", TNT_REG_L2, 0, 0.05f);
    set_constraint(c, "kernel_constraint",
                   (tnt_constraint){.kind = TNT_MIN_MAX_NORM, .min_value = 0.5f, .max_value = 0.8f, .rate = 0.7f});
    tu_ok(tnt_model_add(m, a));
    tu_ok(tnt_model_add(m, b));
    tu_ok(tnt_model_add(m, c));
    return m;
}

/* Conv2D as the corpus has it (kernel_regularizer=l2), MaxNorm over the three input axes (Keras's
 * advice for a convolution) and over axes apart, NonNeg on a bias */
static tnt_model *conv_model(void) {
    tnt_model *m = tnt_sequential("conv_rules");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(IMG, IMG, CH), NULL)));
    tnt_layer *a = tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU, .name = "ca"});
    set_rule(a, "kernel_regularizer", TNT_REG_L2, 0, 0.002f);
    set_constraint(a, "kernel_constraint", (tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.6f, .n_axes = 3, .axes = {0, 1, 2}});
    set_constraint(a, "bias_constraint", (tnt_constraint){.kind = TNT_NON_NEG});
    tnt_layer *b = tnt_conv2d(5, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_TANH, .name = "cb"});
    set_rule(b, "kernel_regularizer", TNT_REG_L1L2, 0.001f, 0.002f);
    set_rule(b, "bias_regularizer", TNT_REG_L2, 0, 0.01f);
    set_constraint(b, "kernel_constraint", (tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.5f, .n_axes = 2, .axes = {0, 3}});
    tnt_layer *c = tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "cc"});
    set_rule(c, "activity_regularizer", TNT_REG_L1, 0.01f, 0);
    tu_ok(tnt_model_add(m, a));
    tu_ok(tnt_model_add(m, b));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, c));
    return m;
}

typedef struct run {
    float *w;
    int64_t n;
    double loss[EPOCHS], eval_loss;
    bool on_device, nccl; /* trained on the device; its sums went through NCCL's path */
} run;

/* every noise layer, with the activity penalty of ActivityRegularization (relu, not AlphaDropout's
 * SELU: kmath.h's exp, an ulp from oneDNN's, would move the weights by 1e-6 over the steps) */
static tnt_model *noise_model(void) {
    tnt_model *m = tnt_sequential("noise");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEAT), NULL)));
    tu_ok(tnt_model_add(m, tnt_reshape(TNT_SHAPE(4, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_spatial_dropout1d(0.3f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_flatten(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(16, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_alpha_dropout(0.2f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_gaussian_noise(0.3f, 5, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_gaussian_dropout(0.25f, 0, NULL)));
    tu_ok(tnt_model_add(m, tnt_activity_regularization(0.01f, 0.02f, NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

enum { DENSE, CONV, NOISE };
static int conv; /* which model the runs train: DENSE, CONV or NOISE */

static tnt_dataset *dataset(void) {
    const float *x = conv == CONV ? xs_conv : xs_dense;
    tnt_shape s = conv == CONV ? TNT_SHAPE(IMG, IMG, CH) : TNT_SHAPE(FEAT);
    return tnt_dataset_batch(tnt_dataset_shuffle(tnt_dataset_from_arrays(x, s, ys, TNT_SHAPE(), N, false), N, 7), BATCH,
                             false);
}

/* dist: NULL trains serially; check (may be NULL) looks at the trained model */
static run train(tnt_device dev, const tnt_distribute_opts *dist, void (*check)(tnt_model *)) {
    tnt_model *m = conv == CONV ? conv_model() : conv == NOISE ? noise_model() : dense_model();
    if (dist) tu_ok(tnt_distribute_with(m, dist));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = conv == CONV ? tnt_sgd(0.2f) : tnt_adam(0.02f),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 11, .device = dev}));
    tnt_dataset *ds = dataset();
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = EPOCHS}, &h));
    run r = {.n = tnt_model_count_params(m), .on_device = m->on_device, .nccl = m->dev && m->dev->nccl};
    for (int e = 0; e < EPOCHS; e++) r.loss[e] = tnt_history_get(h, "loss", e);
    tnt_logs logs;
    tu_ok(tnt_evaluate(m, ds, NULL, &logs));
    assert_true(tnt_logs_get(&logs, "loss", &r.eval_loss));
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    if (check) check(m);
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static void assert_same_run(const run *dev, const run *cpu, const char *what) {
    char msg[160];
    assert_true(dev->on_device);
    assert_false(cpu->on_device);
    assert_int_equal(dev->n, cpu->n);
    for (int e = 0; e < EPOCHS; e++) {
        if (fabs(dev->loss[e] - cpu->loss[e]) > RTOL * fabs(cpu->loss[e]))
            fail_msg("%s: epoch %d loss %.9g on the device, %.9g on the CPU", what, e + 1, dev->loss[e], cpu->loss[e]);
    }
    if (fabs(dev->eval_loss - cpu->eval_loss) > RTOL * fabs(cpu->eval_loss))
        fail_msg("%s: evaluate's loss %.9g on the device, %.9g on the CPU", what, dev->eval_loss, cpu->eval_loss);
    snprintf(msg, sizeof msg, "%s: weights", what);
    tu_assert_close(dev->w, cpu->w, dev->n, RTOL, ATOL, msg);
}

/* ---- the constraints, recomputed on the trained weights ----------------------------------- */

static const tnt__weight *weight(tnt_model *m, const char *layer, const char *name) {
    tnt_layer *l = tnt_model_get_layer(m, layer);
    assert_non_null(l);
    for (int j = 0; j < l->n_weights; j++)
        if (!strcmp(l->weights[j].name, name)) return &l->weights[j];
    fail_msg("layer %s has no weight %s", layer, name);
    return NULL;
}

/* the norms of w's values over the axes in reduced (one per index over the other axes) each
 * within [lo, hi] (slack for rounding) */
static void assert_norms(const tnt__weight *w, const bool *reduced, double lo, double hi, const char *what) {
    const tnt_shape s = w->shape;
    int64_t n = tnt_shape_numel(s), groups = n;
    for (int d = 0; d < s.ndim; d++)
        if (reduced[d]) groups /= s.dim[d];
    double *sq = calloc((size_t)groups, sizeof *sq);
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, g = 0, stride = 1;
        for (int d = s.ndim - 1; d >= 0; d--) {
            int64_t idx = rest % s.dim[d];
            rest /= s.dim[d];
            if (!reduced[d]) g += idx * stride, stride *= s.dim[d];
        }
        sq[g] += (double)w->value[i] * w->value[i];
    }
    for (int64_t g = 0; g < groups; g++)
        if (sqrt(sq[g]) < lo - 1e-5 || sqrt(sq[g]) > hi + 1e-5)
            fail_msg("%s: norm %lld is %.8g (expected %g to %g)", what, (long long)g, sqrt(sq[g]), lo, hi);
    free(sq);
}

static void assert_non_neg(const tnt__weight *w, const char *what) {
    for (int64_t i = 0; i < tnt_shape_numel(w->shape); i++)
        if (w->value[i] < 0) fail_msg("%s: value %lld is %g", what, (long long)i, w->value[i]);
}

static void check_dense(tnt_model *m) {
    assert_norms(weight(m, "a", "kernel"), (bool[]){true, false}, 0, 0.9, "MaxNorm(0.9) on a's kernel columns");
    assert_norms(weight(m, "b", "kernel"), (bool[]){false, true}, 1, 1, "UnitNorm(axis=-1) on b's kernel rows");
    assert_non_neg(weight(m, "b", "bias"), "NonNeg on b's bias");
    /* MinMaxNorm with rate 0.7 moves a norm 70% of the way into [0.5, 0.8]: after the last step
     * within reach of it, not necessarily inside */
    assert_norms(weight(m, "c", "kernel"), (bool[]){true, false}, 0.3, 1.2, "MinMaxNorm(0.5, 0.8, 0.7) on c's kernel");
}

static void check_conv(tnt_model *m) {
    assert_norms(weight(m, "ca", "kernel"), (bool[]){true, true, true, false}, 0, 0.6, "MaxNorm over axes 0-2");
    assert_non_neg(weight(m, "ca", "bias"), "NonNeg on ca's bias");
    assert_norms(weight(m, "cb", "kernel"), (bool[]){true, false, false, true}, 0, 0.5, "MaxNorm over axes 0 and 3");
}

static void set_device_loss(bool on) { ((tnt__config *)tnt__config_get())->gpu_device_loss = on; } /* tests only */

/* serial: the device against the CPU, with the loss gradient on the device and on the host */
static const char *model_name(void) { return conv == CONV ? "Conv2D" : conv == NOISE ? "noise" : "Dense"; }
static void (*model_check(void))(tnt_model *) { return conv == CONV ? check_conv : conv == NOISE ? NULL : check_dense; }

static void serial_case(int which) {
    conv = which;
    run cpu = train(TNT_DEVICE_CPU, NULL, NULL);
    for (int dl = 1; dl >= 0; dl--) {
        set_device_loss(dl);
        run dev = train(TNT_DEVICE_GPU, NULL, model_check());
        char what[96];
        snprintf(what, sizeof what, "%s model, loss gradient on the %s", model_name(), dl ? "device" : "host");
        assert_same_run(&dev, &cpu, what);
        free(dev.w);
    }
    set_device_loss(true);
    free(cpu.w);
}

static void test_dense_equals_cpu(void **state) {
    (void)state;
    serial_case(DENSE);
}

static void test_conv_equals_cpu(void **state) {
    (void)state;
    serial_case(CONV);
}

static void test_noise_model_equals_cpu(void **state) {
    (void)state;
    serial_case(NOISE);
}

/* NCCL's path on the emulated device: a stand-in for ncclAllReduce that sums through the host */
static tnt_status standin(float *d, int64_t n, tnt__gpu_stream stream) {
    float *h = malloc((size_t)n * sizeof(float));
    tnt_status s = h ? tnt__gpu_copy_to_host(h, d, (size_t)n * sizeof(float), stream) : TNT_ERR_NOMEM;
    if (s == TNT_OK) s = tnt__gpu_sync(stream);
    if (s == TNT_OK) s = tnt__allreduce_sum_f32(h, n);
    if (s == TNT_OK) s = tnt__gpu_copy_to_device(d, h, (size_t)n * sizeof(float), stream);
    if (s == TNT_OK) s = tnt__gpu_sync(stream);
    free(h);
    return s;
}

static void set_gpu_comm(int comm) { ((tnt__config *)tnt__config_get())->gpu_comm = comm; } /* tests only */

/* distributed on the device (each penalty once, not once per rank) against the CPU serially:
 * host-staged sums with both reducers, and NCCL's path */
static void test_distributed_equals_serial(void **state) {
    (void)state;
    for (int c = DENSE; c <= NOISE; c++) {
        conv = c;
        run cpu = train(TNT_DEVICE_CPU, NULL, NULL);
        const tnt_distribute_opts opts[] = {
            {.reducer = TNT_REDUCER_FLAT, .fusion_threshold_kb = 1, .has_fusion_threshold = true},
            {.reducer = TNT_REDUCER_NODE},
        };
        for (int k = 0; k < 3; k++) {
            if (k == 2 && !tnt__gpu_emulated()) break; /* a real GPU: gpu_check.sh's own NCCL runs */
            set_gpu_comm(k == 2 ? TNT__GPU_COMM_AUTO : TNT__GPU_COMM_HOST);
            tnt__gpu_nccl_standin = k == 2 ? standin : NULL;
            run dev = train(TNT_DEVICE_GPU, &opts[k == 1], model_check());
            char what[128];
            snprintf(what, sizeof what, "%s model, %d ranks, %s", model_name(), tnt_get_size(),
                     k == 0 ? "flat reducer" : k == 1 ? "node-aware reducer" : "NCCL's path (stand-in)");
            assert_same_run(&dev, &cpu, what);
            assert_int_equal(dev.nccl, k == 2 && tnt_get_size() > 1);
            float *master = malloc((size_t)dev.n * sizeof(float));
            memcpy(master, dev.w, (size_t)dev.n * sizeof(float));
            tu_ok(tnt__bcast_f32(master, dev.n));
            tu_assert_bitwise(dev.w, master, dev.n, "weights on every rank");
            free(master), free(dev.w);
        }
        tnt__gpu_nccl_standin = NULL;
        set_gpu_comm(TNT__GPU_COMM_AUTO);
        free(cpu.w);
    }
}

/* a regularizer set between two fits counts in the second on the device as on the CPU (the
 * device plan of the first has no slot for it) */
static void test_rule_set_between_fits(void **state) {
    (void)state;
    conv = DENSE;
    double loss[2][2];
    float *w[2];
    int64_t n = 0;
    for (int d = 0; d < 2; d++) {
        tnt_model *m = dense_model();
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .seed = 3, .device = d ? TNT_DEVICE_GPU : TNT_DEVICE_CPU}));
        tnt_dataset *ds = dataset();
        for (int f = 0; f < 2; f++) {
            tnt_history *h;
            if (f) set_rule(tnt_model_get_layer(m, "c"), "bias_regularizer", TNT_REG_L2, 0, 0.5f);
            tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
            loss[d][f] = tnt_history_get(h, "loss", 0);
            tnt_history_free(h);
        }
        assert_int_equal(m->on_device, d);
        n = tnt_model_count_params(m);
        w[d] = malloc((size_t)n * sizeof(float));
        tu_ok(tnt_get_weights(m, w[d], n));
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
    for (int f = 0; f < 2; f++)
        if (fabs(loss[1][f] - loss[0][f]) > RTOL * fabs(loss[0][f]))
            fail_msg("fit %d: loss %.9g on the device, %.9g on the CPU", f + 1, loss[1][f], loss[0][f]);
    tu_assert_close(w[1], w[0], n, RTOL, ATOL, "weights after a bias regularizer set between fits");
    free(w[0]), free(w[1]);
}

/* ---- the noise layers alone ------------------------------------------------------------------ */

/* forward and backward of l (built on in) on the CPU and the device, bitwise */
static void noise_layer(tnt_layer *l, tnt_shape in, const char *what) {
    enum { B = 5 };
    assert_non_null(l);
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    const int64_t n = B * tnt_shape_numel(in);
    float *x = malloc((size_t)n * sizeof(float)), *dy = malloc((size_t)n * sizeof(float));
    float *yc = malloc((size_t)n * sizeof(float)), *dxc = malloc((size_t)n * sizeof(float));
    float *yd = malloc((size_t)n * sizeof(float)), *dxd = malloc((size_t)n * sizeof(float));
    tu_fill(x, n, 31), tu_fill(dy, n, 32);
    layer_step(l, false, B, x, dy, yc, dxc);
    layer_step(l, true, B, x, dy, yd, dxd);
    char w[128];
    int changed = 0;
    for (int64_t i = 0; i < n; i++) changed += yc[i] != x[i];
    if (changed < n / 10) fail_msg("%s: the CPU changed only %d of %lld values: no noise to compare", what, changed, (long long)n);
    snprintf(w, sizeof w, "%s: output", what);
    tu_assert_bitwise(yd, yc, n, w);
    snprintf(w, sizeof w, "%s: dx", what);
    tu_assert_bitwise(dxd, dxc, n, w);
    free(x), free(dy), free(yc), free(dxc), free(yd), free(dxd);
    tnt_layer_free(l);
}

static void test_noise_layers(void **state) {
    (void)state;
    noise_layer(tnt_gaussian_noise(0.4f, 3, NULL), TNT_SHAPE(7, 5), "GaussianNoise");
    noise_layer(tnt_gaussian_dropout(0.3f, 3, NULL), TNT_SHAPE(7, 5), "GaussianDropout");
    noise_layer(tnt_alpha_dropout(0.35f, 3, NULL), TNT_SHAPE(7, 5), "AlphaDropout");
    noise_layer(tnt_spatial_dropout1d(0.4f, 3, NULL), TNT_SHAPE(6, 9), "SpatialDropout1D");
    tnt_layer *l = tnt_spatial_dropout2d(0.4f, 3, NULL);
    noise_layer(l, TNT_SHAPE(3, 4, 8), "SpatialDropout2D");
    l = tnt_spatial_dropout2d(0.4f, 3, NULL);
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    noise_layer(l, TNT_SHAPE(8, 3, 4), "SpatialDropout2D, channels_first");
}

/* 2^18 normal draws of the device (GaussianNoise of x = 0, stddev 1, from global index 1000)
 * bitwise core.c's: the device's log and cos in double round to the same floats */
static void test_normal_draws(void **state) {
    (void)state;
    long long n = 1 << 18;
    unsigned long long seed = 0x1234567887654321ull, base = 1000;
    float stddev = 1.0f, *zeros = calloc((size_t)n, sizeof(float)), *want = malloc((size_t)n * sizeof(float));
    float *x = dev_up(zeros, n), *y = tnt__gpu_malloc((size_t)n * sizeof(float));
    void *args[] = {&x, &y, &n, &seed, &base, &stddev};
    tu_ok(tnt__gpu_launch("tnt_k_gaussian_noise", tnt__gpu_grid_for(n, 256), 256, 0, args));
    float *got = dev_down(y, n);
    for (long long i = 0; i < n; i++) want[i] = tnt__rand_normal(seed, base + (uint64_t)i);
    tu_assert_bitwise(got, want, n, "normal draws against tnt__rand_normal");
    free(got), free(want), free(zeros);
    tnt__gpu_free(x), tnt__gpu_free(y);
}

/* OrthogonalRegularizer has no device path: auto trains on the CPU, gpu fails naming it */
static void test_orthogonal_stays_on_cpu(void **state) {
    (void)state;
    conv = DENSE;
    for (int req = 0; req < 2; req++) {
        tnt_model *m = dense_model();
        tu_ok(tnt_layer_set_orthogonal_regularizer(tnt_model_get_layer(m, "b"), "kernel_regularizer", 0.01f, false));
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .device = req ? TNT_DEVICE_GPU : TNT_DEVICE_AUTO}));
        tnt_dataset *ds = dataset();
        if (req) {
            assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_UNSUPPORTED);
            tu_error_contains("OrthogonalRegularizer");
            tu_error_contains("\"b\"");
        } else {
            tu_ok(tnt_fit(m, ds, NULL, NULL));
            assert_false(m->on_device);
        }
        tnt_dataset_free(ds);
        tnt_model_free(m);
    }
}

int main(int argc, char **argv) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1); /* read by tnt_init; ctest sets it too */
    /* the emulated device's convolutions: im2col GEMMs (no cuDNN; a real GPU keeps its own) */
    if (atoi(getenv("TNT_GPU_EMULATE")) > 0 && !getenv("TNT_GPU_CONV_IM2COL")) setenv("TNT_GPU_CONV_IM2COL", "1000000", 1);
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_equals_cpu),
        cmocka_unit_test(test_conv_equals_cpu),
        cmocka_unit_test(test_distributed_equals_serial),
        cmocka_unit_test(test_orthogonal_stays_on_cpu),
        cmocka_unit_test(test_rule_set_between_fits),
        cmocka_unit_test(test_noise_layers),
        cmocka_unit_test(test_normal_draws),
        cmocka_unit_test(test_noise_model_equals_cpu),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
