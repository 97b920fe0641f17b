/* test_gpu_conv_few_taps.c: Conv2D layers of few taps on the device without cuDNN
 * (layers/convolutional/conv2d_gemm_gpu.c), as direct kernels (TNT_GPU_CONV_DIRECT) and as im2col
 * GEMMs (TNT_GPU_CONV_IM2COL), so they run on the emulated device (TNT_GPU_EMULATE=1: the CPU's
 * sgemm, the kernels' host build) as on a GPU (scripts/gpu_check.sh runs this with
 * TNT_GPU_EMULATE=0). For each path:
 *   - the layer alone against the CPU engine (oneDNN, checked against PyTorch by the layer tests):
 *     output, dX, dW and db for LeNet-5's two convolutions, a ResNet stem (7x7, stride 2, 3
 *     channels), strided "same" with asymmetric padding, dilation, a 2x3 window with strides
 *     (1, 2), fused activations (relu; swish, whose backward reads the pre-activation), no bias;
 *     im2col's col in one chunk and in chunks of one sample, the direct dW's partial sums over
 *     256 output pixels and over one; NaNs over the scratch between forward and backward (it
 *     lives one call);
 *   - Conv1D (same, causal with dilation, strides), DepthwiseConv2D (multipliers 1 to 3, strides,
 *     dilation) and a strided "same" Conv2D on even sizes (padding unlike on the two sides) under
 *     the default settings, where these kernels are their only device path;
 *   - LeNet-5 (5x5x1 and 5x5x20 taps) trained on the device equals the CPU engine, and a second
 *     device run repeats it bitwise; with both settings 0 its convolutions need cuDNN again. */
#include "gpu_device_util.h"
#include "testutil.h"

#include "classic.h"
#include "core/config.h"
#include "gpu/gpu.h"
#include "layers/convolutional/conv2d.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Emulated: the CPU's sgemm and the CPU's formulas, sums in another order than oneDNN's: 1e-5.
 * A real GPU: GPU-DESIGN.md section 5's tolerances. */
static double RTOL = 1e-5, ATOL = 1e-6;

typedef enum { CONV2D, CONV1D, DEPTHWISE } conv_kind;

/* CONV1D: h is 1, the steps w, the kernel kw; DEPTHWISE: filters is the depth multiplier */
typedef struct ccase {
    const char *what;
    int h, w, c, filters, kh, kw, sh, sw, dil;
    tnt_padding padding;
    tnt_activation act;
    bool no_bias;
    conv_kind kind;
} ccase;

static const ccase cases[] = {
    {"LeNet-5's first: 5x5 same, 1 channel, relu", 12, 12, 1, 6, 5, 5, 1, 1, 1, TNT_PADDING_SAME, TNT_ACT_RELU, false, CONV2D},
    {"LeNet-5's second: 5x5 valid", 9, 9, 6, 16, 5, 5, 1, 1, 1, TNT_PADDING_VALID, TNT_ACT_RELU, false, CONV2D},
    {"a ResNet stem: 7x7 stride 2 valid, 3 channels", 15, 13, 3, 8, 7, 7, 2, 2, 1, TNT_PADDING_VALID, TNT_ACT_LINEAR,
     false, CONV2D},
    {"3x3 stride 2 same, even sizes (asymmetric padding), no bias", 8, 10, 4, 5, 3, 3, 2, 2, 1, TNT_PADDING_SAME,
     TNT_ACT_LINEAR, true, CONV2D},
    {"3x3 dilation 2 same, swish", 9, 8, 3, 4, 3, 3, 1, 1, 2, TNT_PADDING_SAME, TNT_ACT_SWISH, false, CONV2D},
    {"2x3 window, strides (1, 2), same", 7, 9, 5, 3, 2, 3, 1, 2, 1, TNT_PADDING_SAME, TNT_ACT_TANH, false, CONV2D},
};

/* the layers whose only device path is these kernels: Conv1D (im2col by default), DepthwiseConv2D
 * (direct kernels by default) and padding unlike on the two sides (im2col by default) */
static const ccase own_cases[] = {
    {"Conv1D kernel 5, same", 1, 17, 6, 8, 1, 5, 1, 1, 1, TNT_PADDING_SAME, TNT_ACT_RELU, false, CONV1D},
    {"Conv1D kernel 3, causal, dilation 2", 1, 15, 4, 5, 1, 3, 1, 1, 2, TNT_PADDING_CAUSAL, TNT_ACT_LINEAR, false,
     CONV1D},
    {"Conv1D kernel 4, stride 2, valid, no bias", 1, 16, 3, 7, 1, 4, 1, 2, 1, TNT_PADDING_VALID, TNT_ACT_TANH, true,
     CONV1D},
    {"DepthwiseConv2D 3x3 same", 8, 7, 5, 1, 3, 3, 1, 1, 1, TNT_PADDING_SAME, TNT_ACT_RELU, false, DEPTHWISE},
    {"DepthwiseConv2D 3x3 stride 2 same, multiplier 2 (asymmetric padding)", 10, 8, 3, 2, 3, 3, 2, 2, 1,
     TNT_PADDING_SAME, TNT_ACT_LINEAR, false, DEPTHWISE},
    {"DepthwiseConv2D 5x3 valid, dilation 2, multiplier 3, no bias", 13, 11, 4, 3, 5, 3, 1, 1, 2, TNT_PADDING_VALID,
     TNT_ACT_SWISH, true, DEPTHWISE},
    {"Conv2D 3x3 stride 2 same on 32x32 (asymmetric padding)", 32, 32, 3, 8, 3, 3, 2, 2, 1, TNT_PADDING_SAME,
     TNT_ACT_RELU, false, CONV2D},
};

static tnt_layer *make_layer(const ccase *k, bool act) {
    tnt_layer_opts o = {.strides = {k->sh, k->sw}, .padding = k->padding, .activation = act ? k->act : TNT_ACT_LINEAR,
                        .no_bias = k->no_bias, .dilation = {k->dil, k->dil}};
    if (k->kind == CONV1D) {
        o.strides[0] = k->sw, o.strides[1] = 0, o.dilation[0] = k->dil, o.dilation[1] = 0;
        return tnt_conv1d(k->filters, k->kw, &o);
    }
    if (k->kind == DEPTHWISE) return tnt_depthwise_conv2d(k->kh, k->kw, k->filters, &o);
    return tnt_conv2d(k->filters, k->kh, k->kw, &o);
}

static tnt_shape in_shape(const ccase *k) { return k->kind == CONV1D ? TNT_SHAPE(k->w, k->c) : TNT_SHAPE(k->h, k->w, k->c); }

/* which of the two paths the 5x5 (and smaller) convolutions take */
static void use_path(bool direct) {
    setenv("TNT_GPU_CONV_DIRECT", direct ? "512" : "0", 1);
    setenv("TNT_GPU_CONV_IM2COL", direct ? "0" : "512", 1); /* LeNet-5's second has 5 x 5 x 20 taps */
    tu_ok(tnt__config_load());
}

typedef struct layer_result {
    float *y, *dx, *dw, *db;
} layer_result;

static void result_free(layer_result *r) { free(r->y), free(r->dx), free(r->dw), free(r->db); }

/* one forward and backward of a fresh layer (weights from fixed seeds) on the CPU or the device */
static layer_result run_layer(const ccase *k, bool device, const float *x, const float *dy, int64_t batch) {
    tnt_layer *l = make_layer(k, true);
    assert_non_null(l);
    tnt_shape in = in_shape(k);
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    const int64_t nx = batch * tnt_shape_numel(in), ny = batch * tnt_shape_numel(l->out_shape);
    layer_weights(l);
    layer_result r = {.y = malloc((size_t)ny * sizeof(float)), .dx = malloc((size_t)nx * sizeof(float))};
    layer_step(l, device, batch, x, dy, r.y, r.dx);
    r.dw = l->weights[0].grad, l->weights[0].grad = NULL;
    if (!k->no_bias) r.db = l->weights[1].grad, l->weights[1].grad = NULL;
    for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
    tnt_layer_free(l);
    return r;
}

/* chunk: im2col's col floats, or the direct dW's output pixels per partial sum; settings: set
 * the path (else the defaults: both 0) */
static void compare(const ccase *k, bool direct, int64_t chunk, bool settings) {
    enum { B = 3 };
    if (settings) use_path(direct);
    if (direct) tnt__conv_direct_chunk = chunk;
    else tnt__conv_im2col_floats = chunk;
    const char *path = direct ? "direct" : "im2col";
    const int64_t nx = B * k->h * k->w * k->c;
    float *x = malloc((size_t)nx * sizeof(float));
    tu_fill(x, nx, 5);
    tnt_layer *probe = make_layer(k, false);
    tnt_shape out;
    probe->in_shape = in_shape(k);
    tu_ok(probe->ops->build(probe, probe->in_shape, &out));
    const int64_t nw = tnt_shape_numel(probe->weights[0].shape), nb = k->no_bias ? 0 : tnt_shape_numel(probe->weights[1].shape);
    tnt_layer_free(probe);
    const int64_t ny = B * tnt_shape_numel(out);
    float *dy = malloc((size_t)ny * sizeof(float));
    tu_fill(dy, ny, 6);
    layer_result cpu = run_layer(k, false, x, dy, B), dev = run_layer(k, true, x, dy, B);
    char what[200];
    snprintf(what, sizeof what, "%s, %s (chunks of %lld): output", k->what, path, (long long)chunk);
    tu_assert_close(dev.y, cpu.y, ny, RTOL, ATOL, what);
    snprintf(what, sizeof what, "%s, %s (chunks of %lld): dx", k->what, path, (long long)chunk);
    tu_assert_close(dev.dx, cpu.dx, nx, RTOL, ATOL, what);
    snprintf(what, sizeof what, "%s, %s (chunks of %lld): kernel gradient", k->what, path, (long long)chunk);
    tu_assert_close(dev.dw, cpu.dw, nw, RTOL, ATOL * 10, what);
    if (!k->no_bias) {
        snprintf(what, sizeof what, "%s, %s (chunks of %lld): bias gradient", k->what, path,
                 (long long)chunk);
        tu_assert_close(dev.db, cpu.db, nb, RTOL, ATOL * 10, what);
    }
    result_free(&cpu), result_free(&dev);
    free(x), free(dy);
    tnt__conv_im2col_floats = 1 << 24;
    tnt__conv_direct_chunk = 256;
}

static void test_layer_equals_cpu(void **state) {
    (void)state;
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        compare(&cases[i], false, 1 << 24, true); /* one chunk of col */
        compare(&cases[i], false, 1, true);       /* a sample a chunk */
        compare(&cases[i], true, 256, true);      /* the default partial sums */
        compare(&cases[i], true, 1, true);        /* an output pixel a partial sum */
    }
}

/* Conv1D, DepthwiseConv2D and asymmetric padding under the default settings (TNT_GPU_CONV_DIRECT
 * and _IM2COL 0): their own path is their only one, so they take it; and under both settings */
static void test_own_paths_equal_cpu(void **state) {
    (void)state;
    for (size_t i = 0; i < TNT_ARRAY_LEN(own_cases); i++) {
        setenv("TNT_GPU_CONV_DIRECT", "0", 1);
        setenv("TNT_GPU_CONV_IM2COL", "0", 1);
        tu_ok(tnt__config_load());
        compare(&own_cases[i], own_cases[i].kind == DEPTHWISE, 256, false);
        compare(&own_cases[i], own_cases[i].kind == DEPTHWISE, 1, false);
        if (own_cases[i].kind != DEPTHWISE) compare(&own_cases[i], true, 1, true); /* direct, when asked */
    }
    use_path(true);
}

/* ---- LeNet-5 trained on the device -------------------------------------------------------------- */

enum { N = 64, BATCH = 16, IMG = 28 * 28 };
static float images[N * IMG], labels[N];

typedef struct run {
    float *w;
    int64_t n;
    double loss;
} run;

/* two epochs of a compiled model on ds, on the device asked for: its last loss and its weights
 * (the model and the dataset freed) */
static run fit_two_epochs(tnt_model *m, tnt_dataset *ds, tnt_device dev) {
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    run r = {.n = tnt_model_count_params(m), .loss = tnt_history_get(h, "loss", 1)};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static run train(tnt_device dev) {
    tnt_model *m = lenet5_model();
    /* plain SGD at 0.01: with momentum 0.9 at 0.05 this training amplifies a summation order's
     * 1e-7 to 1.5% of the weights in 8 steps (oneDNN capped to AVX2 sums otherwise than the
     * emulated device's sgemm), which would test the chaos, not the path */
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.01f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 7, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_from_arrays(images, TNT_SHAPE(28, 28, 1), labels, TNT_SHAPE(), N, false), BATCH, false);
    return fit_two_epochs(m, ds, dev);
}

static void lenet5_equals_cpu(bool direct) {
    use_path(direct);
    run cpu = train(TNT_DEVICE_CPU), dev = train(TNT_DEVICE_GPU), again = train(TNT_DEVICE_GPU);
    print_message("LeNet-5 (%s), 8 steps: loss %.7f on the CPU, %.7f on the device\n", direct ? "direct" : "im2col",
                  cpu.loss, dev.loss);
    /* emulated: each weight within 1e-4; a GPU sums in its own order at every step: the largest
     * difference within 1e-3 of the largest weight (test_gpu_model_device's measure) */
    if (tnt__gpu_emulated()) tu_assert_close(dev.w, cpu.w, cpu.n, 1e-4, 1e-5, "LeNet-5's weights, device");
    double d = 0, big = 1e-30;
    for (int64_t i = 0; i < cpu.n; i++) d = fmax(d, fabs((double)dev.w[i] - cpu.w[i])), big = fmax(big, fabs(cpu.w[i]));
    print_message("LeNet-5's weights: the largest difference %.3g of the largest weight\n", d / big);
    assert_true(d / big < 1e-3);
    assert_true(fabs(dev.loss - cpu.loss) < 1e-4 * (1 + fabs(cpu.loss)));
    tu_assert_bitwise(again.w, dev.w, dev.n, "a second device run");
    free(cpu.w), free(dev.w), free(again.w);
}

static void test_lenet5_im2col_equals_cpu(void **state) {
    (void)state;
    lenet5_equals_cpu(false);
}

static void test_lenet5_direct_equals_cpu(void **state) {
    (void)state;
    lenet5_equals_cpu(true);
}

/* Under the default settings, models whose convolutions have no cuDNN path train on the device
 * (they trained on the CPU before): a text CNN (Embedding, Conv1D causal and same, global max
 * pooling) and a depthwise-separable block (a strided "same" Conv2D on 16x16, DepthwiseConv2D,
 * BatchNormalization, a 1x1 Conv2D) against the CPU engine, 8 steps of SGD. */
static tnt_model *own_path_model(bool text) {
    tnt_model *m = tnt_sequential(text ? "text_cnn" : "depthwise_block");
    if (text) {
        tnt_model_add(m, tnt_input_layer(TNT_SHAPE(20), NULL));
        tnt_model_add(m, tnt_embedding(50, 8, false, NULL));
        tnt_model_add(m, tnt_conv1d(12, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL, .activation = TNT_ACT_RELU,
                                                             .dilation = {2}}));
        tnt_model_add(m, tnt_conv1d(10, 5, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU}));
        tnt_model_add(m, tnt_global_max_pooling1d(NULL));
    } else {
        tnt_model_add(m, tnt_input_layer(TNT_SHAPE(16, 16, 3), NULL));
        tnt_model_add(m, tnt_conv2d(8, 3, 3, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME,
                                                              .activation = TNT_ACT_RELU}));
        tnt_model_add(m, tnt_depthwise_conv2d(3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}));
        tnt_model_add(m, tnt_batch_normalization(0, 0, NULL));
        tnt_model_add(m, tnt_conv2d(6, 1, 1, &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
        tnt_model_add(m, tnt_global_average_pooling2d(NULL));
    }
    tnt_model_add(m, tnt_dense(10, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    return m;
}

static run train_own(bool text, tnt_device dev, const float *x) {
    tnt_model *m = own_path_model(text);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.05f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 11, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_from_arrays(x, text ? TNT_SHAPE(20) : TNT_SHAPE(16, 16, 3), labels, TNT_SHAPE(), N, false), BATCH,
        false);
    return fit_two_epochs(m, ds, dev);
}

static void test_own_path_models_equal_cpu(void **state) {
    (void)state;
    setenv("TNT_GPU_CONV_DIRECT", "0", 1);
    setenv("TNT_GPU_CONV_IM2COL", "0", 1);
    tu_ok(tnt__config_load());
    float *x = malloc((size_t)N * 16 * 16 * 3 * sizeof(float));
    for (int text = 0; text < 2; text++) {
        if (text) for (int i = 0; i < N * 20; i++) x[i] = (float)((i * 7 + i / 20) % 50);
        else tu_fill(x, N * 16 * 16 * 3, 9);
        run cpu = train_own(text, TNT_DEVICE_CPU, x), dev = train_own(text, TNT_DEVICE_GPU, x);
        print_message("%s, 8 steps: loss %.7f on the CPU, %.7f on the device\n", text ? "text CNN" : "depthwise block",
                      cpu.loss, dev.loss);
        if (tnt__gpu_emulated()) tu_assert_close(dev.w, cpu.w, cpu.n, 1e-4, 1e-5, text ? "text CNN" : "depthwise block");
        assert_true(fabs(dev.loss - cpu.loss) < 1e-4 * (1 + fabs(cpu.loss)));
        free(cpu.w), free(dev.w);
    }
    free(x);
    use_path(true);
}

/* both settings 0: the 5x5 convolutions go back to cuDNN, which the emulated device lacks */
static void test_off_needs_cudnn(void **state) {
    (void)state;
    if (!tnt__gpu_emulated()) skip();
    setenv("TNT_GPU_CONV_IM2COL", "0", 1);
    setenv("TNT_GPU_CONV_DIRECT", "0", 1);
    tu_ok(tnt__config_load());
    tnt_model *m = lenet5_model();
    tnt_status s = tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.01f),
                                                      .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                      .device = TNT_DEVICE_GPU});
    if (s == TNT_OK) { /* the device is chosen at the first fit */
        tnt_dataset *ds = tnt_dataset_batch(
            tnt_dataset_from_arrays(images, TNT_SHAPE(28, 28, 1), labels, TNT_SHAPE(), N, false), BATCH, false);
        s = tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL);
        tnt_dataset_free(ds);
    }
    assert_int_not_equal(s, TNT_OK);
    print_message("%s\n", tnt_last_error());
    assert_non_null(strstr(tnt_last_error(), "cuDNN"));
    tnt_model_free(m);
    use_path(true);
}

int main(void) {
    /* ctest: the emulated device; scripts/gpu_check.sh runs it on a GPU with TNT_GPU_EMULATE=0 */
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt_init(NULL, NULL) != TNT_OK) return fprintf(stderr, "tnt_init: %s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_conv_few_taps: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    tu_fill(images, N * IMG, 3);
    for (int i = 0; i < N * IMG; i++) images[i] = 0.5f * (images[i] + 1.0f);
    for (int i = 0; i < N; i++) labels[i] = (float)(i % 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_equals_cpu),
        cmocka_unit_test(test_own_paths_equal_cpu),
        cmocka_unit_test(test_own_path_models_equal_cpu),
        cmocka_unit_test(test_lenet5_im2col_equals_cpu),
        cmocka_unit_test(test_lenet5_direct_equals_cpu),
        cmocka_unit_test(test_off_needs_cudnn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
