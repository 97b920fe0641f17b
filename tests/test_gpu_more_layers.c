/* test_gpu_more_layers.c: the device paths of the activation layers with parameters (ReLU with
 * max_value, negative_slope and threshold, LeakyReLU, ELU, ThresholdedReLU, Softmax over the last
 * axis), every merge layer (Add, Subtract, Multiply, Average, Maximum, Minimum, with ties and NaN,
 * and broadcast inputs),
 * MaxPooling1D / AveragePooling1D, Conv2DTranspose / Conv1DTranspose (strides, same and valid,
 * output_padding, dilation), TimeDistributed (Dense, Conv2D, Flatten), UpSampling1D/2D/3D (nearest):
 * each layer's forward, input and weight gradients against the CPU engine on the emulated device (TNT_GPU_EMULATE=1; scripts/gpu_check.sh runs it on a GPU),
 * bitwise where the device computes the CPU's operations in its order (merges, max pooling, the
 * piecewise-linear activations), within 1e-6 where it takes kmath.h's exp (ELU, Softmax) or
 * multiplies by a reciprocal where the CPU divides (AveragePooling1D); and a traced layer run on
 * the host inside a model on the device (layers/host_bridge.c), trained, against the CPU. */
#include "gpu_device_util.h"
#include "testutil.h"

#include "gpu/gpu.h"
#include "layers/layer.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double RTOL = 1e-6, ATOL = 1e-7;

/* one layer of one input on both sides: output and dx compared */
static void single(tnt_layer *l, tnt_shape in, bool bitwise, const char *what) {
    enum { B = 4 };
    assert_non_null(l);
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    const int64_t nx = B * tnt_shape_numel(in), ny = B * tnt_shape_numel(l->out_shape);
    float *x = malloc((size_t)nx * sizeof(float)), *dy = malloc((size_t)ny * sizeof(float));
    tu_fill(x, nx, 17);
    for (int64_t i = 0; i < nx; i += 7) x[i] = 0.0f; /* the kinks */
    for (int64_t i = 3; i < nx; i += 11) x[i] = 0.5f;
    tu_fill(dy, ny, 18);
    float *yc = malloc((size_t)ny * sizeof(float)), *dxc = malloc((size_t)nx * sizeof(float));
    float *yd = malloc((size_t)ny * sizeof(float)), *dxd = malloc((size_t)nx * sizeof(float));
    if (l->n_weights) layer_weights(l);
    layer_step(l, false, B, x, dy, yc, dxc);
    float *gc[4] = {NULL};
    for (int i = 0; i < l->n_weights && i < 4; i++) /* the CPU's weight gradients, before the device's */
        gc[i] = l->weights[i].grad, l->weights[i].grad = calloc((size_t)tnt_shape_numel(l->weights[i].shape), sizeof(float));
    layer_step(l, true, B, x, dy, yd, dxd);
    char w[160];
    for (int i = 0; i < l->n_weights && i < 4; i++) {
        snprintf(w, sizeof w, "%s: weight %d's gradient", what, i);
        tu_assert_close(l->weights[i].grad, gc[i], tnt_shape_numel(l->weights[i].shape), 1e-5, 1e-5, w);
        free(gc[i]), free(l->weights[i].value), free(l->weights[i].grad);
        l->weights[i].value = l->weights[i].grad = NULL;
    }
    snprintf(w, sizeof w, "%s: output", what);
    if (bitwise) tu_assert_bitwise(yd, yc, ny, w);
    else tu_assert_close(yd, yc, ny, RTOL, ATOL, w);
    snprintf(w, sizeof w, "%s: dx", what);
    if (bitwise) tu_assert_bitwise(dxd, dxc, nx, w);
    else tu_assert_close(dxd, dxc, nx, RTOL, ATOL, w);
    free(x), free(dy), free(yc), free(dxc), free(yd), free(dxd);
    tnt_layer_free(l);
}

static void test_activation_layers(void **state) {
    (void)state;
    const tnt_shape in = TNT_SHAPE(5, 7);
    single(tnt_relu_layer(INFINITY, 0.0f, 0.0f, NULL), in, true, "ReLU()");
    single(tnt_relu_layer(1.2f, 0.1f, 0.5f, NULL), in, true, "ReLU(max_value 1.2, negative_slope 0.1, threshold 0.5)");
    single(tnt_leaky_relu_layer(0.3f, NULL), in, true, "LeakyReLU(0.3)");
    single(tnt_thresholded_relu(0.5f, NULL), in, true, "ThresholdedReLU(0.5)");
    single(tnt_elu_layer(0.7f, NULL), in, false, "ELU(0.7)");
    single(tnt_softmax_layer(-1, NULL), in, false, "Softmax(-1)");
    single(tnt_softmax_layer(2, NULL), TNT_SHAPE(3, 9), false, "Softmax(2) on (3, 9)");
    single(tnt_rescaling(1.0f / 255.0f, -0.5f, NULL), in, false, "Rescaling(1/255, offset -0.5)");
    const float mean[7] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -1.0f, 0.5f}, var[7] = {1.0f, 4.0f, 0.25f, 2.0f, 1.0f, 9.0f, 0.5f};
    single(tnt_normalization(&(tnt_normalization_opts){.mean = mean, .variance = var, .n_values = 7}), in, true,
           "Normalization (per channel, through the host)");
}

static void test_softmax_other_axis_refused(void **state) {
    (void)state;
    tnt_layer *l = tnt_softmax_layer(1, NULL);
    l->in_shape = TNT_SHAPE(5, 7);
    tu_ok(l->ops->build(l, l->in_shape, &l->out_shape));
    const char *why = "";
    assert_false(l->ops->gpu->supported(l, &why));
    assert_non_null(strstr(why, "other than the last"));
    tnt_layer_free(l);
}

static void test_pooling1d(void **state) {
    (void)state;
    single(tnt_max_pooling1d(3, &(tnt_layer_opts){.strides = {2}, .padding = TNT_PADDING_SAME}), TNT_SHAPE(11, 4), true,
           "MaxPooling1D(3, strides 2, same)");
    single(tnt_max_pooling1d(2, NULL), TNT_SHAPE(10, 3), true, "MaxPooling1D(2)");
    /* the mean: the 2-D kernels multiply by the reciprocal of the count, the 1-D CPU loop divides */
    single(tnt_average_pooling1d(3, &(tnt_layer_opts){.strides = {1}, .padding = TNT_PADDING_SAME}), TNT_SHAPE(9, 5),
           false, "AveragePooling1D(3, strides 1, same)");
    single(tnt_average_pooling1d(2, NULL), TNT_SHAPE(8, 2), false, "AveragePooling1D(2)");
}

/* Conv2DTranspose and Conv1DTranspose: the adjoint of the direct convolution kernels; the sums
 * run in another order than oneDNN's deconvolution */
static void test_conv_transpose(void **state) {
    (void)state;
    const double r = RTOL, a = ATOL;
    RTOL = 1e-5, ATOL = 1e-5;
    single(tnt_conv2d_transpose(4, 3, 3, NULL, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME,
                                                                 .activation = TNT_ACT_RELU}),
           TNT_SHAPE(5, 6, 3), false, "Conv2DTranspose(4, 3x3, strides 2, same, relu)");
    single(tnt_conv2d_transpose(3, 4, 4, NULL, &(tnt_layer_opts){.strides = {2, 2}}), TNT_SHAPE(4, 4, 5), false,
           "Conv2DTranspose(3, 4x4, strides 2, valid)");
    single(tnt_conv2d_transpose(2, 3, 2, (const int[]){1, 0},
                                &(tnt_layer_opts){.strides = {2, 1}, .padding = TNT_PADDING_SAME, .no_bias = true}),
           TNT_SHAPE(3, 5, 4), false, "Conv2DTranspose(2, 3x2, strides (2, 1), same, output_padding (1, 0), no bias)");
    single(tnt_conv2d_transpose(3, 3, 3, NULL, &(tnt_layer_opts){.dilation = {2, 2}}), TNT_SHAPE(4, 5, 2), false,
           "Conv2DTranspose(3, 3x3, dilation 2)");
    single(tnt_conv1d_transpose(5, 3, -1, &(tnt_layer_opts){.strides = {2}, .padding = TNT_PADDING_SAME}),
           TNT_SHAPE(7, 4), false, "Conv1DTranspose(5, 3, strides 2, same)");
    RTOL = r, ATOL = a;
}

/* UpSampling, nearest: each cell over its block, each block's gradient summed */
static void test_upsampling(void **state) {
    (void)state;
    single(tnt_upsampling2d(2, 3, "nearest", NULL), TNT_SHAPE(3, 4, 2), true, "UpSampling2D((2, 3))");
    single(tnt_upsampling1d(3, NULL), TNT_SHAPE(5, 2), true, "UpSampling1D(3)");
    single(tnt_upsampling3d((const int[]){2, 1, 2}, NULL), TNT_SHAPE(2, 3, 2, 2), true, "UpSampling3D((2, 1, 2))");
    tnt_layer *l = tnt_upsampling2d(2, 2, "bilinear", NULL);
    const char *why = "";
    assert_false(l->ops->gpu->supported(l, &why));
    assert_non_null(strstr(why, "bilinear"));
    tnt_layer_free(l);
}

/* TimeDistributed: its inner layer's device path on batch * steps samples */
static void test_time_distributed(void **state) {
    (void)state;
    single(tnt_time_distributed(tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), NULL), TNT_SHAPE(5, 3), false,
           "TimeDistributed(Dense(4, relu))");
    single(tnt_time_distributed(tnt_conv2d(2, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), NULL),
           TNT_SHAPE(3, 6, 6, 1), false, "TimeDistributed(Conv2D(2, 3x3, same))");
    single(tnt_time_distributed(tnt_flatten(NULL), NULL), TNT_SHAPE(4, 2, 3), true, "TimeDistributed(Flatten)");
}

/* a merge layer of k inputs of the given shapes (broadcast to the output's) on both sides */
static void merge_shapes(tnt_layer *l, int k, const tnt_shape *in, const char *what) {
    enum { B = 3 };
    assert_non_null(l);
    tu_ok(l->ops->build_multi(l, k, in, &l->out_shape));
    l->in_shape = in[0];
    const int64_t n = B * tnt_shape_numel(l->out_shape);
    int64_t nin[4];
    float *xh[4], *dxc[4], *dy = malloc(n * sizeof(float)), *yc = malloc(n * sizeof(float));
    for (int j = 0; j < k; j++) {
        nin[j] = B * tnt_shape_numel(in[j]);
        xh[j] = malloc(nin[j] * sizeof(float)), dxc[j] = malloc(nin[j] * sizeof(float));
        tu_fill(xh[j], nin[j], 30 + j);
        for (int64_t i = 0; i < nin[j]; i += 4) xh[j][i] = 0.25f; /* ties between the inputs */
    }
    xh[0][1] = NAN; /* a NaN wins Maximum and Minimum */
    tu_fill(dy, n, 40);
    /* the CPU */
    tnt__fwd_args fa = {.batch = B, .x = xh[0], .n_inputs = k, .xs = (const float **)xh, .y = yc, .training = true};
    tu_ok(l->ops->forward(l, NULL, &fa));
    tnt__bwd_args ba = {.batch = B, .x = xh[0], .n_inputs = k, .xs = (const float **)xh, .y = yc, .dy = dy,
                        .dx = dxc[0], .dxs = dxc};
    tu_ok(l->ops->backward(l, NULL, &ba));
    /* the device */
    float *xd[4], *dxd[4];
    for (int j = 0; j < k; j++) xd[j] = dev_up(xh[j], nin[j]), dxd[j] = tnt__gpu_malloc(nin[j] * sizeof(float));
    float *y_dev = tnt__gpu_malloc(n * sizeof(float)), *dy_dev = dev_up(dy, n);
    const size_t sb = l->ops->gpu->scratch_size ? l->ops->gpu->scratch_size(l, NULL, B) : 0;
    void *scratch = tnt__gpu_malloc(sb + 64);
    tnt__fwd_args fd = {.batch = B, .x = xd[0], .n_inputs = k, .xs = (const float **)xd, .y = y_dev, .training = true,
                        .scratch = scratch};
    tu_ok(l->ops->gpu->forward(l, NULL, &fd));
    tnt__bwd_args bd = {.batch = B, .x = xd[0], .n_inputs = k, .xs = (const float **)xd, .y = y_dev, .dy = dy_dev,
                        .dx = dxd[0], .dxs = dxd, .scratch = scratch};
    tu_ok(l->ops->gpu->backward(l, NULL, &bd));
    float *yd = dev_down(y_dev, n);
    char w[160];
    snprintf(w, sizeof w, "%s: output", what);
    tu_assert_bitwise(yd, yc, n, w);
    for (int j = 0; j < k; j++) {
        float *g = dev_down(dxd[j], nin[j]);
        snprintf(w, sizeof w, "%s: dx%d", what, j);
        tu_assert_bitwise(g, dxc[j], nin[j], w);
        free(g), free(xh[j]), free(dxc[j]);
        tnt__gpu_free(xd[j]), tnt__gpu_free(dxd[j]);
    }
    free(yd), free(dy), free(yc);
    tnt__gpu_free(y_dev), tnt__gpu_free(dy_dev), tnt__gpu_free(scratch);
    tnt_layer_free(l);
}

static void merge(tnt_layer *l, int k, const char *what) {
    const tnt_shape same[4] = {TNT_SHAPE(3, 5), TNT_SHAPE(3, 5), TNT_SHAPE(3, 5), TNT_SHAPE(3, 5)};
    merge_shapes(l, k, same, what);
}

static void test_merges(void **state) {
    (void)state;
    merge(tnt_add(NULL), 3, "Add of 3");
    merge(tnt_subtract(NULL), 2, "Subtract");
    merge(tnt_multiply(NULL), 3, "Multiply of 3");
    merge(tnt_average(NULL), 3, "Average of 3");
    merge(tnt_maximum(NULL), 3, "Maximum of 3");
    merge(tnt_minimum(NULL), 2, "Minimum of 2");
    /* broadcasting: lower ranks get leading axes, then each dimension agrees or is 1 */
    merge_shapes(tnt_multiply(NULL), 2, (const tnt_shape[]){TNT_SHAPE(3, 5), TNT_SHAPE(5)}, "Multiply (3, 5) by (5,)");
    merge_shapes(tnt_add(NULL), 3, (const tnt_shape[]){TNT_SHAPE(3, 5), TNT_SHAPE(1, 5), TNT_SHAPE(3, 1)},
                 "Add (3, 5), (1, 5), (3, 1)");
    merge_shapes(tnt_maximum(NULL), 2, (const tnt_shape[]){TNT_SHAPE(1, 1), TNT_SHAPE(4, 2, 3)}, "Maximum (1, 1) and (4, 2, 3)");
    merge_shapes(tnt_subtract(NULL), 2, (const tnt_shape[]){TNT_SHAPE(6), TNT_SHAPE(1, 6)}, "Subtract (6,) - (1, 6)");
    merge_shapes(tnt_average(NULL), 2, (const tnt_shape[]){TNT_SHAPE(2, 2, 4), TNT_SHAPE(1, 1, 4)},
                 "Average (2, 2, 4) and a per-channel (1, 1, 4)");
}

/* A traced layer (a Lambda's or a custom Layer's operation graph) runs on the host inside a model
 * on the device (layers/host_bridge.c): x -> relu(x W + b) traced, then Dense softmax; and a traced
 * layer of two outputs' worth of ops on two inputs in a functional model. Trained 2 epochs of SGD
 * on the emulated device, equal to the CPU engine. */
enum { TN = 32, TIN = 4 };
static float t_x[TN * TIN], t_y[TN];

static tnt_layer *traced_dense(void) {
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, TIN));
    int k = tnt_opgraph_weight(g, "kernel", TNT_SHAPE(TIN, 5), "glorot_uniform", true);
    int b = tnt_opgraph_weight(g, "bias", TNT_SHAPE(5), "zeros", true);
    int y = tnt_opgraph_op(g, "matmul", 2, (int[]){x, k}, NULL);
    y = tnt_opgraph_op(g, "add", 2, (int[]){y, b}, NULL);
    y = tnt_opgraph_op(g, "relu", 1, (int[]){y}, NULL);
    assert_true(y >= 0);
    tu_ok(tnt_opgraph_output(g, y));
    return tnt_traced_layer(g, "MyDense", "my_dense");
}

static void train_traced(tnt_device dev, float *w, int64_t *n, double *loss) {
    tnt_model *m = tnt_sequential("traced");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(TIN), NULL)));
    tu_ok(tnt_model_add(m, traced_dense()));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .seed = 3, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(t_x, TNT_SHAPE(TIN), t_y, TNT_SHAPE(), TN, false), 8, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    *n = tnt_model_count_params(m);
    *loss = tnt_history_get(h, "loss", 1);
    tu_ok(tnt_get_weights(m, w, *n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

static void test_traced_layer_through_host(void **state) {
    (void)state;
    tu_fill(t_x, TN * TIN, 50);
    for (int i = 0; i < TN; i++) t_y[i] = (float)(i % 3);
    float wc[64], wd[64];
    int64_t nc = 0, nd = 0;
    double lc = 0, ld = 0;
    train_traced(TNT_DEVICE_CPU, wc, &nc, &lc);
    train_traced(TNT_DEVICE_GPU, wd, &nd, &ld);
    assert_int_equal(nc, nd);
    print_message("traced layer, 8 steps: loss %.7f on the CPU, %.7f with the model on the device\n", lc, ld);
    tu_assert_close(wd, wc, nc, 1e-5, 1e-6, "weights after training");
    assert_true(fabs(ld - lc) < 1e-5 * (1 + fabs(lc)));
}

int main(void) {
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt_init(NULL, NULL) != TNT_OK) return fprintf(stderr, "tnt_init: %s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_more_layers: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-5, ATOL = 1e-6; /* a GPU's own exp and fused multiply-adds */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_layers),
        cmocka_unit_test(test_softmax_other_axis_refused),
        cmocka_unit_test(test_pooling1d),
        cmocka_unit_test(test_merges),
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_time_distributed),
        cmocka_unit_test(test_upsampling),
        cmocka_unit_test(test_traced_layer_through_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
