/* test_layers_nn.c: Conv2D, MaxPooling2D/AveragePooling2D and Dense driven directly through the
 * layer contract (build, plan, workspace, forward, backward) without a model: outputs and
 * gradients against PyTorch references (tests/fixtures/gen_layers.py), finite differences, the
 * dx == NULL path, several batch-size plans side by side, and argument/shape errors. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

static tnt_layer_opts conv_opts(int sh, int sw, int dh, int dw, tnt_padding pad, bool bias,
                                tnt_activation act) {
    return (tnt_layer_opts){.strides = {sh, sw}, .dilation = {dh, dw}, .padding = pad,
                            .no_bias = !bias, .activation = act};
}

static void test_conv_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o;
    o = conv_opts(2, 2, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("conv_s2_same_even", tnt_conv2d(4, 3, 3, &o));
    o = conv_opts(2, 2, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_case("conv_s2_same_odd", tnt_conv2d(5, 4, 4, &o));
    o = conv_opts(3, 2, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_LEAKY_RELU);
    run_case("conv_s32_same_leaky", tnt_conv2d(3, 3, 3, &o));
    o = conv_opts(0, 0, 2, 2, TNT_PADDING_VALID, true, TNT_ACT_TANH);
    run_case("conv_dil2_valid_tanh", tnt_conv2d(3, 3, 3, &o));
    o = conv_opts(1, 1, 2, 2, TNT_PADDING_SAME, false, TNT_ACT_GELU);
    run_case("conv_dil2_same_gelu_nobias", tnt_conv2d(4, 3, 2, &o));
    o = conv_opts(0, 0, 0, 0, TNT_PADDING_VALID, true, TNT_ACT_SIGMOID);
    run_case("conv_1x1_sigmoid", tnt_conv2d(7, 1, 1, &o));
    o = conv_opts(2, 1, 0, 0, TNT_PADDING_VALID, false, TNT_ACT_SWISH);
    run_case("conv_rect_s21_nobias_swish", tnt_conv2d(6, 3, 2, &o));
    o = conv_opts(0, 0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_SOFTMAX);
    run_case("conv_softmax", tnt_conv2d(4, 3, 3, &o));
    o = conv_opts(0, 0, 0, 0, TNT_PADDING_VALID, true, TNT_ACT_ELU);
    run_case("conv_elu", tnt_conv2d(3, 2, 2, &o));
    o = conv_opts(0, 0, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_case("conv_lenet1", tnt_conv2d(20, 5, 5, &o));
    run_case("conv_lenet2", tnt_conv2d(50, 5, 5, &o));
}

static void test_pool_fixtures(void **state) {
    (void)state;
    run_case("maxpool_2x2_valid", tnt_max_pooling2d(2, 2, NULL));
    tnt_layer_opts o = {.strides = {2, 2}, .padding = TNT_PADDING_SAME};
    run_case("maxpool_3x3_s2_same_odd", tnt_max_pooling2d(3, 3, &o));
    o = (tnt_layer_opts){.strides = {1, 2}, .padding = TNT_PADDING_SAME};
    run_case("maxpool_2x3_s12_same", tnt_max_pooling2d(2, 3, &o));
    o = (tnt_layer_opts){.strides = {2, 2}};
    run_case("maxpool_3x3_s2_valid_odd", tnt_max_pooling2d(3, 3, &o));
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME};
    run_case("avgpool_2x2_same_odd", tnt_average_pooling2d(2, 2, &o));
    o = (tnt_layer_opts){.strides = {1, 1}};
    run_case("avgpool_3x3_s1_valid", tnt_average_pooling2d(3, 3, &o));
    o = (tnt_layer_opts){.strides = {1, 1}, .padding = TNT_PADDING_SAME};
    run_case("avgpool_3x3_s1_same", tnt_average_pooling2d(3, 3, &o));
    o = (tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME};
    run_case("avgpool_3x3_s2_same", tnt_average_pooling2d(3, 3, &o));
}

static void test_dense_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o = {.activation = TNT_ACT_RELU};
    run_case("dense_relu", tnt_dense(7, &o));
    o = (tnt_layer_opts){.activation = TNT_ACT_SOFTMAX};
    run_case("dense_softmax", tnt_dense(6, &o));
    o = (tnt_layer_opts){.no_bias = true};
    run_case("dense_linear_nobias", tnt_dense(5, &o));
    o = (tnt_layer_opts){.activation = TNT_ACT_GELU};
    run_case("dense_gelu", tnt_dense(5, &o));
    o = (tnt_layer_opts){.activation = TNT_ACT_TANH};
    run_case("dense_tanh", tnt_dense(4, &o));
    o = (tnt_layer_opts){.activation = TNT_ACT_SELU};
    run_case("dense_selu", tnt_dense(4, &o));
    o = (tnt_layer_opts){.activation = TNT_ACT_RELU};
    run_case("dense_wide_relu", tnt_dense(70, &o));
}

/* the batch-1 plan of a strided Conv2D gives the first sample of the batch-2 results */
static void test_two_plans(void **state) {
    (void)state;
    static const char *const w_b[2] = {"w", "b"};
    tnt_layer_opts o = conv_opts(2, 2, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    check_two_plans(tnt_conv2d(5, 4, 4, &o), "conv_s2_same_odd", 2, w_b);
}

/* ---- finite differences ------------------------------------------------------------------- */

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = conv_opts(2, 2, 0, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    fd_check(tnt_conv2d(3, 3, 2, &o), TNT_SHAPE(5, 6, 2), 2);
    o = conv_opts(1, 1, 2, 1, TNT_PADDING_SAME, false, TNT_ACT_GELU);
    fd_check(tnt_conv2d(2, 2, 3, &o), TNT_SHAPE(6, 5, 3), 2);
    o = (tnt_layer_opts){.activation = TNT_ACT_SOFTMAX};
    fd_check(tnt_dense(4, &o), TNT_SHAPE(6), 3);
    o = (tnt_layer_opts){.activation = TNT_ACT_SWISH};
    fd_check(tnt_dense(5, &o), TNT_SHAPE(7), 3);
    o = (tnt_layer_opts){.strides = {1, 1}, .padding = TNT_PADDING_SAME};
    fd_check(tnt_average_pooling2d(2, 3, &o), TNT_SHAPE(4, 5, 2), 2);
}

/* ---- configuration, defaults and errors --------------------------------------------------- */

static void test_defaults_and_names(void **state) {
    (void)state;
    tnt_layer *l = tnt_conv2d(6, 5, 5, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "Conv2D");
    assert_true(l->auto_name);
    l->in_shape = TNT_SHAPE(28, 28, 3);
    tnt_shape out;
    tu_ok(l->ops->build(l, l->in_shape, &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(24, 24, 6))); /* valid, stride 1 */
    assert_int_equal(l->n_weights, 2);
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 5, 3, 6)));
    assert_int_equal(l->weights[0].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[0].fan_in, 75);
    assert_int_equal(l->weights[0].fan_out, 150);
    assert_int_equal(l->weights[1].init, TNT_INIT_ZEROS);
    assert_string_equal(l->weights[0].name, "kernel");
    assert_string_equal(l->weights[1].name, "bias");
    tnt_layer_free(l);

    tnt_layer_opts o = {.name = "fc1", .activation = TNT_ACT_RELU, .no_bias = true,
                        .kernel_initializer = TNT_INIT_HE_NORMAL};
    l = tnt_dense(10, &o);
    assert_string_equal(tnt_layer_name(l), "fc1");
    assert_string_equal(tnt_layer_class(l), "Dense");
    assert_false(l->auto_name);
    assert_int_equal(l->activation, TNT_ACT_RELU);
    tu_ok(l->ops->build(l, TNT_SHAPE(20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(10)));
    assert_int_equal(l->n_weights, 1);
    assert_int_equal(l->weights[0].init, TNT_INIT_HE_NORMAL);
    assert_int_equal(l->weights[0].fan_in, 20);
    assert_int_equal(l->weights[0].fan_out, 10);
    tnt_layer_free(l);

    l = tnt_max_pooling2d(2, 2, NULL);
    assert_string_equal(tnt_layer_class(l), "MaxPooling2D");
    tu_ok(l->ops->build(l, TNT_SHAPE(28, 28, 20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(14, 14, 20))); /* strides default to pool size */
    assert_int_equal(l->n_weights, 0);
    tnt_layer_free(l);
    l = tnt_average_pooling2d(3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    assert_string_equal(tnt_layer_class(l), "AveragePooling2D");
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 8, 2), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 3, 2)));
    tnt_layer_free(l);

    /* TF "same" with stride 2: ceil(in / s) */
    l = tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 8, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 4, 4)));
    tnt_layer_free(l);
}

static void test_constructor_errors(void **state) {
    (void)state;
    assert_null(tnt_dense(0, NULL));
    tu_error_contains("units 0");
    assert_null(tnt_dense(-3, NULL));
    tu_error_contains("units -3");
    assert_null(tnt_dense(4, &(tnt_layer_opts){.activation = (tnt_activation)99}));
    tu_error_contains("activation 99");
    assert_null(tnt_conv2d(0, 3, 3, NULL));
    tu_error_contains("filters 0");
    assert_null(tnt_conv2d(4, 0, 3, NULL));
    tu_error_contains("kernel_size (0, 3)");
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.strides = {-1, 1}}));
    tu_error_contains("strides (-1, 1)");
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.dilation = {1, -2}}));
    tu_error_contains("dilation_rate (1, -2)");
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.strides = {2, 2}, .dilation = {2, 2}}));
    tu_error_contains("not both");
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.padding = (tnt_padding)5}));
    tu_error_contains("padding 5");
    assert_null(tnt_max_pooling2d(0, 2, NULL));
    tu_error_contains("MaxPooling2D: pool_size (0, 2)");
    assert_null(tnt_average_pooling2d(2, 2, &(tnt_layer_opts){.strides = {2, -1}}));
    tu_error_contains("AveragePooling2D: strides (2, -1)");
    assert_null(tnt_max_pooling2d(2, 2, &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
    tu_error_contains("no activation");
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
    expect_build_error(tnt_conv2d(4, 3, 3, NULL), TNT_SHAPE(28, 28), "(28, 28)", "rank 2");
    expect_build_error(tnt_conv2d(4, 5, 5, NULL), TNT_SHAPE(3, 3, 1), "(3, 3, 1)",
                       "smaller than the kernel (5, 5)");
    expect_build_error(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.dilation = {3, 3}}), TNT_SHAPE(6, 9, 1),
                       "(6, 9, 1)", "dilation (3, 3)");
    expect_build_error(tnt_max_pooling2d(2, 2, NULL), TNT_SHAPE(10), "(10,)", "rank 1");
    expect_build_error(tnt_average_pooling2d(4, 4, NULL), TNT_SHAPE(3, 8, 2), "(3, 8, 2)",
                       "smaller than pool_size (4, 4)");
    /* "same" padding never fails for a kernel larger than the input */
    tnt_shape out;
    tnt_layer *l = tnt_conv2d(2, 5, 5, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(3, 3, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 3, 2)));
    tnt_layer_free(l);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_fixtures),
        cmocka_unit_test(test_pool_fixtures),
        cmocka_unit_test(test_dense_fixtures),
        cmocka_unit_test(test_two_plans),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_defaults_and_names),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_build_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
