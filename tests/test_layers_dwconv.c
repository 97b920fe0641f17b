/* test_layers_dwconv.c: DepthwiseConv2D and SeparableConv2D driven directly through the layer
 * contract (build, plan, workspace, forward, backward) without a model: outputs, the
 * pre-activation, dx and every weight gradient against PyTorch references
 * (tests/fixtures/gen_layers_dwconv.py), the dx == NULL and dy_is_preact paths, finite
 * differences, two batch-size plans side by side, defaults, and argument/shape errors. The
 * driver is tests/layer_harness.c. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

static tnt_layer_opts opts2(int stride_h, int stride_w, int dil, tnt_padding pad, bool bias,
                            tnt_activation act) {
    return (tnt_layer_opts){.strides = {stride_h, stride_w}, .dilation = {dil, dil}, .padding = pad,
                            .no_bias = !bias, .activation = act};
}

static void test_depthwise_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o;
    o = opts2(0, 0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("dwconv_valid", tnt_depthwise_conv2d(3, 3, 1, &o));
    o = opts2(0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("dwconv_same_dm2", tnt_depthwise_conv2d(3, 3, 2, &o));
    o = opts2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("dwconv_s2_same_dm2", tnt_depthwise_conv2d(3, 3, 2, &o));
    o = opts2(1, 1, 2, TNT_PADDING_VALID, false, TNT_ACT_LINEAR);
    run_case("dwconv_dil2_valid_nobias", tnt_depthwise_conv2d(3, 3, 0, &o)); /* 0: the default 1 */
    o = opts2(0, 0, 2, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    run_case("dwconv_dil2_same", tnt_depthwise_conv2d(3, 2, 1, &o));
    o = opts2(0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_case("dwconv_relu", tnt_depthwise_conv2d(3, 3, 1, &o));
    o = opts2(2, 1, 0, TNT_PADDING_VALID, false, TNT_ACT_RELU);
    run_case("dwconv_k23_s21_nobias_dm3", tnt_depthwise_conv2d(2, 3, 3, &o));
}

/* The separable layer's weights are depthwise_kernel, pointwise_kernel and bias: fixtures
 * NAME_{w,pw,b} and their gradients NAME_{dw,dpw,db}. As run_case: forward with and without the
 * pre-activation, backward with dx, without dx, and with dy the pre-activation gradient. */
static const char *const sep_w[3] = {"w", "pw", "b"}, *const sep_g[3] = {"dw", "dpw", "db"};

static void check_sep_grads(const char *name, tnt_layer *l, const char *what) {
    char f[128];
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, sep_g[i]);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), what);
    }
}

static void run_sep_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    drv d;
    drv_init(&d, l, TNT_SHAPE(xs.dim[1], xs.dim[2], xs.dim[3]), xs.dim[0]);
    memcpy(d.x, x, (size_t)in_numel(&d) * sizeof(float));
    free(x);
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "%s_%s", name, sep_w[i]);
        load_into(l->weights[i].value, f, tnt_shape_numel(l->weights[i].shape));
    }
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(d.dy, f, out_numel(&d));

    drv_forward(&d, false);
    snprintf(f, sizeof f, "%s_y", name);
    check(d.y, f, out_numel(&d), "y");
    memset(d.y, 0, (size_t)out_numel(&d) * sizeof(float));
    drv_forward(&d, true);
    check(d.y, f, out_numel(&d), "y (preact requested)");
    snprintf(f, sizeof f, "%s_pre", name);
    check(d.pre, f, out_numel(&d), "preact");

    poison_grads(l);
    drv_backward(&d, true, false);
    snprintf(f, sizeof f, "%s_dx", name);
    check(d.dx, f, in_numel(&d), "dx");
    check_sep_grads(name, l, "grad");

    poison_grads(l);
    for (int64_t i = 0; i < in_numel(&d); i++) d.dx[i] = 7.0f;
    drv_backward(&d, false, false);
    for (int64_t i = 0; i < in_numel(&d); i++) assert_true(d.dx[i] == 7.0f);
    check_sep_grads(name, l, "grad (dx NULL)");

    if (l->activation != TNT_ACT_LINEAR) {
        snprintf(f, sizeof f, "%s_dpre", name);
        load_into(d.dy, f, out_numel(&d));
        poison_grads(l);
        drv_forward(&d, true);
        drv_backward(&d, true, true);
        snprintf(f, sizeof f, "%s_dx", name);
        check(d.dx, f, in_numel(&d), "dx (dy_is_preact)");
        check_sep_grads(name, l, "grad (dy_is_preact)");
    }
    drv_free(&d, true);
}

static void test_separable_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o;
    o = opts2(0, 0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_sep_case("sepconv_valid", tnt_separable_conv2d(4, 3, 3, 0, &o));
    o = opts2(0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_sep_case("sepconv_same_dm2_relu", tnt_separable_conv2d(5, 3, 3, 2, &o));
    o = opts2(2, 2, 0, TNT_PADDING_SAME, false, TNT_ACT_LINEAR);
    run_sep_case("sepconv_s2_same_nobias", tnt_separable_conv2d(3, 3, 3, 1, &o));
    o = opts2(0, 0, 2, TNT_PADDING_VALID, true, TNT_ACT_TANH);
    run_sep_case("sepconv_dil2_dm2_tanh", tnt_separable_conv2d(4, 3, 3, 2, &o));
}

static void test_two_plans(void **state) {
    (void)state;
    static const char *const dw_w[2] = {"w", "b"};
    tnt_layer_opts o = opts2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    check_two_plans(tnt_depthwise_conv2d(3, 3, 2, &o), "dwconv_s2_same_dm2", 2, dw_w);
    o = opts2(0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    check_two_plans(tnt_separable_conv2d(5, 3, 3, 2, &o), "sepconv_same_dm2_relu", 3, sep_w);
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = opts2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    fd_check(tnt_depthwise_conv2d(3, 3, 2, &o), TNT_SHAPE(5, 6, 2), 2);
    o = opts2(0, 0, 2, TNT_PADDING_SAME, false, TNT_ACT_LINEAR);
    fd_check(tnt_depthwise_conv2d(2, 3, 1, &o), TNT_SHAPE(5, 6, 3), 1);
    o = opts2(1, 2, 0, TNT_PADDING_VALID, true, TNT_ACT_GELU);
    fd_check(tnt_separable_conv2d(3, 3, 2, 2, &o), TNT_SHAPE(5, 6, 2), 2);
}

/* ---- configuration, defaults and errors --------------------------------------------------- */

static void test_defaults_and_names(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_depthwise_conv2d(3, 3, 0, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "DepthwiseConv2D");
    assert_true(l->auto_name);
    char base[64];
    tnt__layer_base_name(tnt_layer_class(l), base, sizeof base);
    assert_string_equal(base, "depthwise_conv2d");
    tu_ok(l->ops->build(l, TNT_SHAPE(28, 27, 8), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(26, 25, 8))); /* valid, stride 1, dm 1 */
    assert_int_equal(l->n_weights, 2);
    assert_string_equal(l->weights[0].name, "depthwise_kernel");
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 3, 8, 1)));
    assert_int_equal(l->weights[0].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[0].fan_in, 72); /* Keras: kh * kw * in */
    assert_int_equal(l->weights[0].fan_out, 9); /* kh * kw * depth_multiplier */
    assert_string_equal(l->weights[1].name, "bias");
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(8)));
    assert_int_equal(l->weights[1].init, TNT_INIT_ZEROS);
    tnt_layer_free(l);

    /* TF "same" with stride 2: ceil(in / s); depth_multiplier multiplies the channels */
    l = tnt_depthwise_conv2d(3, 3, 4, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME,
                                                        .name = "dw", .no_bias = true,
                                                        .kernel_initializer = TNT_INIT_HE_NORMAL});
    assert_string_equal(tnt_layer_name(l), "dw");
    assert_false(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 8, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 4, 12)));
    assert_int_equal(l->n_weights, 1);
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 3, 3, 4)));
    assert_int_equal(l->weights[0].init, TNT_INIT_HE_NORMAL);
    assert_int_equal(l->weights[0].fan_in, 27);
    assert_int_equal(l->weights[0].fan_out, 36);
    tnt_layer_free(l);
    /* "same" never fails for a kernel larger than the input */
    l = tnt_depthwise_conv2d(5, 5, 1, &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .dilation = {2, 2}});
    tu_ok(l->ops->build(l, TNT_SHAPE(3, 2, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 2, 1)));
    tnt_layer_free(l);

    l = tnt_separable_conv2d(16, 3, 3, 0, &(tnt_layer_opts){.activation = TNT_ACT_RELU});
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "SeparableConv2D");
    assert_true(l->auto_name);
    assert_int_equal(l->activation, TNT_ACT_RELU);
    tnt__layer_base_name(tnt_layer_class(l), base, sizeof base);
    assert_string_equal(base, "separable_conv2d");
    tu_ok(l->ops->build(l, TNT_SHAPE(10, 9, 4), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(8, 7, 16)));
    assert_int_equal(l->n_weights, 3);
    assert_string_equal(l->weights[0].name, "depthwise_kernel");
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 3, 4, 1)));
    assert_int_equal(l->weights[0].fan_in, 36);
    assert_int_equal(l->weights[0].fan_out, 9);
    assert_string_equal(l->weights[1].name, "pointwise_kernel");
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(1, 1, 4, 16)));
    assert_int_equal(l->weights[1].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[1].fan_in, 4);
    assert_int_equal(l->weights[1].fan_out, 16);
    assert_string_equal(l->weights[2].name, "bias");
    assert_true(tnt__shape_equal(l->weights[2].shape, TNT_SHAPE(16)));
    assert_int_equal(l->weights[2].init, TNT_INIT_ZEROS);
    tnt_layer_free(l);

    l = tnt_separable_conv2d(5, 3, 3, 2, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME,
                                                           .no_bias = true, .name = "sep"});
    assert_string_equal(tnt_layer_name(l), "sep");
    tu_ok(l->ops->build(l, TNT_SHAPE(9, 10, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(5, 5, 5)));
    assert_int_equal(l->n_weights, 2);
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 3, 3, 2)));
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(1, 1, 6, 5)));
    tnt_layer_free(l);
}

static void test_constructor_errors(void **state) {
    (void)state;
    assert_null(tnt_depthwise_conv2d(0, 3, 1, NULL));
    tu_error_contains("DepthwiseConv2D: kernel_size (0, 3) (expected > 0)");
    assert_null(tnt_depthwise_conv2d(3, -1, 1, NULL));
    tu_error_contains("kernel_size (3, -1)");
    assert_null(tnt_depthwise_conv2d(3, 3, -2, NULL));
    tu_error_contains("DepthwiseConv2D: depth_multiplier -2 (expected > 0");
    assert_null(tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("DepthwiseConv2D: padding 2 (expected TNT_PADDING_VALID, TNT_PADDING_SAME)");
    assert_null(tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.strides = {-1, 1}}));
    tu_error_contains("DepthwiseConv2D: strides (-1, 1)");
    assert_null(tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.dilation = {1, -2}}));
    tu_error_contains("DepthwiseConv2D: dilation_rate (1, -2)");
    assert_null(tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.strides = {2, 2}, .dilation = {2, 2}}));
    tu_error_contains("not both");
    assert_null(tnt_depthwise_conv2d(3, 3, 1, &(tnt_layer_opts){.activation = (tnt_activation)99}));
    tu_error_contains("activation 99");

    assert_null(tnt_separable_conv2d(0, 3, 3, 1, NULL));
    tu_error_contains("SeparableConv2D: filters 0 (expected > 0)");
    assert_null(tnt_separable_conv2d(4, 3, 0, 1, NULL));
    tu_error_contains("SeparableConv2D: kernel_size (3, 0)");
    assert_null(tnt_separable_conv2d(4, 3, 3, -1, NULL));
    tu_error_contains("SeparableConv2D: depth_multiplier -1");
    assert_null(tnt_separable_conv2d(4, 3, 3, 1, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("SeparableConv2D: padding 2");
    assert_null(tnt_separable_conv2d(4, 3, 3, 1, &(tnt_layer_opts){.strides = {1, 3}, .dilation = {2, 1}}));
    tu_error_contains("SeparableConv2D: strides (1, 3) with dilation_rate (2, 1)");
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
    expect_build_error(tnt_depthwise_conv2d(3, 3, 1, NULL), TNT_SHAPE(28, 3), "DepthwiseConv2D",
                       "rank 2 (expected 3: height, width, channels)");
    expect_build_error(tnt_depthwise_conv2d(3, 3, 1, NULL), TNT_SHAPE(2, 8, 8, 3), "(2, 8, 8, 3)", "rank 4");
    expect_build_error(tnt_depthwise_conv2d(3, 3, 1, NULL), TNT_SHAPE(8, 0, 3), "DepthwiseConv2D",
                       "empty dimension");
    expect_build_error(tnt_depthwise_conv2d(5, 3, 1, NULL), TNT_SHAPE(4, 8, 2), "(4, 8, 2)",
                       "smaller than the kernel (5, 3)");
    expect_build_error(tnt_depthwise_conv2d(3, 3, 2, &(tnt_layer_opts){.dilation = {1, 3}}),
                       TNT_SHAPE(8, 6, 2), "dilation (1, 3)", "output would be (6, 0, 4)");
    expect_build_error(tnt_separable_conv2d(4, 3, 3, 1, NULL), TNT_SHAPE(16), "SeparableConv2D", "rank 1");
    expect_build_error(tnt_separable_conv2d(4, 3, 3, 1, NULL), TNT_SHAPE(2, 9, 3), "SeparableConv2D",
                       "smaller than the kernel (3, 3)");
}

/* In a model: Input -> DepthwiseConv2D -> SeparableConv2D -> GlobalAveragePooling2D -> Dense,
 * with the model's weight views, initialization, workspace arena and plans: Keras's parameter
 * count, and training lowers the loss. */
static tnt_dataset *blob_data(int64_t n, uint64_t seed) {
    float *x = malloc((size_t)n * 8 * 8 * 3 * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    tu_fill(x, n * 8 * 8 * 3, seed);
    for (int64_t i = 0; i < n; i++) { /* the label: which channel has the largest top-left mean */
        float s[3] = {0};
        for (int p = 0; p < 16; p++)
            for (int c = 0; c < 3; c++) s[c] += x[((i * 8 + p / 4) * 8 + p % 4) * 3 + c];
        y[i] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
    tnt_dataset *ds = tnt_dataset_from_arrays(x, TNT_SHAPE(8, 8, 3), y, TNT_SHAPE(), n, true);
    free(x), free(y);
    return tnt_dataset_batch(ds, 16, false);
}

static void test_in_model(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("mobile");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(8, 8, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_depthwise_conv2d(3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME,
                                                                          .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_separable_conv2d(8, 3, 3, 1, &(tnt_layer_opts){.strides = {2, 2},
                                                   .padding = TNT_PADDING_SAME, .activation = TNT_ACT_RELU})));
    tu_ok(tnt_model_add(m, tnt_global_average_pooling2d(NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.02f),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 3}));
    /* (3*3*3*2 + 6) + (3*3*6 + 6*8 + 8) + (8*3 + 3) */
    assert_int_equal(tnt_model_count_params(m), 60 + 110 + 27);
    assert_string_equal(tnt_layer_name(tnt_model_get_layer(m, "depthwise_conv2d")), "depthwise_conv2d");
    assert_non_null(tnt_model_get_layer(m, "separable_conv2d"));
    tnt_dataset *train = blob_data(200, 5); /* 200 = 12 * 16 + 8: a partial last batch */
    tnt_history *h;
    tu_ok(tnt_fit(m, train, &(tnt_fit_opts){.epochs = 15}, &h));
    assert_true(tnt_history_get(h, "loss", 14) < 0.8 * tnt_history_get(h, "loss", 0));
    tnt_history_free(h);
    tnt_dataset_free(train);
    tnt_model_free(m);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depthwise_fixtures),
        cmocka_unit_test(test_separable_fixtures),
        cmocka_unit_test(test_two_plans),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_defaults_and_names),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_in_model),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
