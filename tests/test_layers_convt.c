/* test_layers_convt.c: Conv2DTranspose and Conv1DTranspose driven through the layer contract:
 * outputs and gradients against PyTorch references (tests/fixtures/gen_layers_convt.py) for
 * valid/same padding, strides below and above the kernel size, output_padding, dilation, no
 * bias and activations; finite differences; output shapes and weight fans; errors. The driver is
 * tests/layer_harness.c. */
#include "layer_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"

static tnt_layer_opts o2(int sh, int sw, int dil, tnt_padding pad, bool bias, tnt_activation act) {
    return (tnt_layer_opts){.strides = {sh, sw}, .dilation = {dil, dil}, .padding = pad, .no_bias = !bias,
                            .activation = act};
}

static void test_conv2d_transpose_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o = o2(0, 0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("convt_valid", tnt_conv2d_transpose(4, 3, 3, NULL, &o));
    o = o2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("convt_s2_same", tnt_conv2d_transpose(5, 3, 3, NULL, &o));
    o = o2(2, 2, 0, TNT_PADDING_VALID, true, TNT_ACT_RELU);
    run_case("convt_s2_valid_k2", tnt_conv2d_transpose(3, 2, 2, NULL, &o));
    o = o2(3, 3, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("convt_s3_k2_valid", tnt_conv2d_transpose(2, 2, 2, NULL, &o));
    o = o2(2, 2, 0, TNT_PADDING_SAME, false, TNT_ACT_LINEAR);
    run_case("convt_s2_same_k4", tnt_conv2d_transpose(3, 4, 4, NULL, &o));
    o = o2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    run_case("convt_op1", tnt_conv2d_transpose(2, 3, 3, (int[]){1, 1}, &o));
    o = o2(2, 3, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("convt_op_valid", tnt_conv2d_transpose(3, 3, 2, (int[]){1, 2}, &o));
    o = o2(0, 0, 2, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("convt_dil2", tnt_conv2d_transpose(3, 3, 3, NULL, &o));
    o = o2(2, 1, 0, TNT_PADDING_SAME, true, TNT_ACT_SIGMOID);
    run_case("convt_rect_s21", tnt_conv2d_transpose(2, 2, 3, NULL, &o));
}

static void test_conv1d_transpose_fixtures(void **state) {
    (void)state;
    run_case("convt1d_valid", tnt_conv1d_transpose(4, 3, -1, NULL));
    tnt_layer_opts o = {.strides = {2}, .padding = TNT_PADDING_SAME};
    run_case("convt1d_s2_same", tnt_conv1d_transpose(3, 4, -1, &o));
    o = (tnt_layer_opts){.strides = {3}, .no_bias = true};
    run_case("convt1d_op", tnt_conv1d_transpose(2, 3, 2, &o));
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = o2(2, 2, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    fd_check(tnt_conv2d_transpose(2, 3, 3, (int[]){1, 0}, &o), TNT_SHAPE(3, 2, 2), 2);
    o = (tnt_layer_opts){.strides = {3}};
    fd_check(tnt_conv1d_transpose(2, 2, -1, &o), TNT_SHAPE(3, 2), 2);
}

static void expect_shape(tnt_layer *l, tnt_shape in, tnt_shape want) {
    tnt_shape out;
    assert_non_null(l);
    tu_ok(l->ops->build(l, in, &out));
    char a[64], b[64];
    if (!tnt__shape_equal(out, want))
        fail_msg("%s: output %s, expected %s", tnt_layer_class(l), tnt_shape_str(out, a, sizeof a),
                 tnt_shape_str(want, b, sizeof b));
    tnt_layer_free(l);
}

static void test_shapes_and_defaults(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_conv2d_transpose(8, 3, 2, NULL, NULL);
    assert_string_equal(tnt_layer_class(l), "Conv2DTranspose");
    tu_ok(l->ops->build(l, TNT_SHAPE(5, 6, 4), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(7, 7, 8)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 2, 8, 4)));
    assert_int_equal(l->weights[0].fan_in, 6 * 8); /* Keras: receptive field * shape[-2] */
    assert_int_equal(l->weights[0].fan_out, 6 * 4);
    assert_int_equal(l->weights[0].init, TNT_INIT_GLOROT_UNIFORM);
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(8)));
    tnt_layer_free(l);
    /* Keras deconv_output_length: valid in*s + max(k - s, 0); same in*s; output_padding */
    tnt_layer_opts o = {.strides = {2, 2}};
    expect_shape(tnt_conv2d_transpose(1, 3, 3, NULL, &o), TNT_SHAPE(4, 5, 1), TNT_SHAPE(9, 11, 1));
    o.padding = TNT_PADDING_SAME;
    expect_shape(tnt_conv2d_transpose(1, 3, 3, NULL, &o), TNT_SHAPE(4, 5, 1), TNT_SHAPE(8, 10, 1));
    expect_shape(tnt_conv2d_transpose(1, 3, 3, (int[]){1, 0}, &o), TNT_SHAPE(4, 5, 1), TNT_SHAPE(8, 9, 1));
    o = (tnt_layer_opts){.strides = {4, 4}};
    expect_shape(tnt_conv2d_transpose(1, 2, 2, NULL, &o), TNT_SHAPE(3, 3, 1), TNT_SHAPE(12, 12, 1));
    o = (tnt_layer_opts){.strides = {2}, .padding = TNT_PADDING_SAME};
    l = tnt_conv1d_transpose(6, 5, -1, &o);
    assert_string_equal(tnt_layer_class(l), "Conv1DTranspose");
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(14, 6)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 6, 3)));
    tnt_layer_free(l);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_conv2d_transpose(0, 3, 3, NULL, NULL));
    tu_error_contains("Conv2DTranspose: filters 0");
    assert_null(tnt_conv2d_transpose(2, 3, -1, NULL, NULL));
    tu_error_contains("kernel_size (3, -1)");
    assert_null(tnt_conv2d_transpose(2, 3, 3, (int[]){1, 1}, NULL));
    tu_error_contains("output_padding (1, 1)");
    assert_null(tnt_conv2d_transpose(2, 3, 3, NULL, &(tnt_layer_opts){.strides = {2, 2}, .dilation = {2, 2}}));
    tu_error_contains("not both");
    assert_null(tnt_conv2d_transpose(2, 3, 3, NULL, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("padding 2");
    assert_null(tnt_conv1d_transpose(2, 3, 1, NULL));
    tu_error_contains("Conv1DTranspose: output_padding (0, 1)");
    tnt_shape out;
    tnt_layer *l = tnt_conv2d_transpose(2, 3, 3, NULL, &(tnt_layer_opts){.name = "up"});
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 4), &out), TNT_ERR_SHAPE);
    tu_error_contains("Conv2DTranspose \"up\": input shape (4, 4) has rank 2");
    tnt_layer_free(l);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_transpose_fixtures),
        cmocka_unit_test(test_conv1d_transpose_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_shapes_and_defaults),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
