/* test_layers_1d.c: Conv1D, MaxPooling1D and GlobalAveragePooling1D driven directly through the
 * layer contract (build, plan, workspace, forward, backward) without a model: outputs and
 * gradients against PyTorch references (tests/fixtures/gen_layers_1d.py), finite differences,
 * the dx == NULL path, two batch-size plans side by side, defaults, and argument/shape errors; and
 * AveragePooling1D, ZeroPadding1D, Cropping1D and UpSampling1D (with their Keras JSON). The driver
 * is tests/layer_harness.c. */
#include "json_harness.h"
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

static tnt_layer_opts c1_opts(int stride, int dil, tnt_padding pad, bool bias, tnt_activation act) {
    return (tnt_layer_opts){.strides = {stride, 0}, .dilation = {dil, 0}, .padding = pad,
                            .no_bias = !bias, .activation = act};
}

static void test_conv1d_fixtures(void **state) {
    (void)state;
    tnt_layer_opts o;
    o = c1_opts(0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    run_case("conv1d_valid", tnt_conv1d(4, 3, &o));
    o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    run_case("conv1d_s2_same", tnt_conv1d(5, 4, &o));
    o = c1_opts(3, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    run_case("conv1d_s3_same_odd", tnt_conv1d(3, 3, &o));
    o = c1_opts(1, 2, TNT_PADDING_VALID, true, TNT_ACT_SIGMOID);
    run_case("conv1d_dil2_valid", tnt_conv1d(3, 3, &o));
    o = c1_opts(0, 2, TNT_PADDING_SAME, false, TNT_ACT_GELU);
    run_case("conv1d_dil2_same_nobias", tnt_conv1d(4, 3, &o));
    o = c1_opts(0, 0, TNT_PADDING_SAME, true, TNT_ACT_RELU);
    run_case("conv1d_relu", tnt_conv1d(6, 5, &o));
    o = c1_opts(0, 0, TNT_PADDING_CAUSAL, true, TNT_ACT_LINEAR);
    run_case("conv1d_causal", tnt_conv1d(4, 3, &o));
    o = c1_opts(0, 2, TNT_PADDING_CAUSAL, true, TNT_ACT_RELU);
    run_case("conv1d_causal_dil2_relu", tnt_conv1d(3, 2, &o));
    o = c1_opts(2, 0, TNT_PADDING_CAUSAL, true, TNT_ACT_LINEAR);
    run_case("conv1d_causal_s2", tnt_conv1d(2, 3, &o));
}

static void test_pool1d_fixtures(void **state) {
    (void)state;
    run_case("maxpool1d_2_valid", tnt_max_pooling1d(2, NULL));
    tnt_layer_opts o = {.strides = {2, 0}};
    run_case("maxpool1d_3_s2_valid_odd", tnt_max_pooling1d(3, &o));
    o = (tnt_layer_opts){.strides = {2, 0}, .padding = TNT_PADDING_SAME};
    run_case("maxpool1d_3_s2_same", tnt_max_pooling1d(3, &o));
    o = (tnt_layer_opts){.padding = TNT_PADDING_SAME};
    run_case("maxpool1d_2_same_odd", tnt_max_pooling1d(2, &o));
    o = (tnt_layer_opts){.strides = {1, 0}, .padding = TNT_PADDING_SAME};
    run_case("maxpool1d_3_s1_same", tnt_max_pooling1d(3, &o));
    run_case("gap1d_7", tnt_global_average_pooling1d(NULL));
    run_case("gap1d_1", tnt_global_average_pooling1d("gap"));
}

/* AveragePooling1D, ZeroPadding1D, Cropping1D, UpSampling1D: PyTorch fixtures, finite
 * differences and the Keras JSON round trip */
static void test_more_1d_layers(void **state) {
    (void)state;
    run_case("avgpool1d_2_valid", tnt_average_pooling1d(2, NULL));
    tnt_layer_opts o = {.strides = {2, 0}, .padding = TNT_PADDING_SAME};
    run_case("avgpool1d_3_s2_same", tnt_average_pooling1d(3, &o));
    o = (tnt_layer_opts){.strides = {3, 0}, .padding = TNT_PADDING_SAME};
    run_case("avgpool1d_4_s3_same_odd", tnt_average_pooling1d(4, &o));
    o = (tnt_layer_opts){.strides = {1, 0}};
    run_case("avgpool1d_3_s1_valid", tnt_average_pooling1d(3, &o));
    run_case("zeropad1d_1_3", tnt_zero_padding1d(1, 3, NULL));
    run_case("crop1d_2_1", tnt_cropping1d(2, 1, NULL));
    run_case("upsample1d_3", tnt_upsampling1d(3, NULL));

    o = (tnt_layer_opts){.strides = {2, 0}, .padding = TNT_PADDING_SAME};
    fd_check(tnt_average_pooling1d(3, &o), TNT_SHAPE(7, 2), 2);
    fd_check(tnt_zero_padding1d(2, 1, NULL), TNT_SHAPE(4, 2), 2);
    fd_check(tnt_cropping1d(1, 1, NULL), TNT_SHAPE(5, 2), 2);
    fd_check(tnt_upsampling1d(2, NULL), TNT_SHAPE(3, 2), 2);

    o = (tnt_layer_opts){.strides = {1, 0}, .padding = TNT_PADDING_SAME};
    check_layer(TNT_SHAPE(9, 3), tnt_average_pooling1d(3, &o), "AveragePooling1D",
                "\"pool_size\":[3],\"padding\":\"same\",\"strides\":[1]");
    check_layer(TNT_SHAPE(5, 2), tnt_zero_padding1d(1, 3, NULL), "ZeroPadding1D", "\"padding\":[1,3]");
    check_layer(TNT_SHAPE(7, 2), tnt_cropping1d(2, 1, NULL), "Cropping1D", "\"cropping\":[2,1]");
    check_layer(TNT_SHAPE(4, 2), tnt_upsampling1d(3, NULL), "UpSampling1D", "\"size\":3");
    /* Keras's defaults and spellings: padding 1 on both sides, AvgPool1D, size 2 */
    tnt_model *m = seq_from_layer_json("[null, 4, 2]", "{\"class_name\": \"ZeroPadding1D\", \"config\": {\"name\": \"z\"}}");
    assert_non_null(m);
    tnt_model_free(m);
    m = seq_from_layer_json("[null, 6, 2]", "{\"class_name\": \"AvgPool1D\", \"config\": {\"name\": \"a\", \"pool_size\": 2}}");
    assert_non_null(m);
    tnt_model_free(m);

    assert_null(tnt_average_pooling1d(0, NULL));
    tu_error_contains("AveragePooling1D: pool_size 0");
    assert_null(tnt_zero_padding1d(-1, 0, "z"));
    tu_error_contains("ZeroPadding1D \"z\": padding (-1, 0)");
    assert_null(tnt_cropping1d(0, -2, NULL));
    tu_error_contains("Cropping1D \"\": cropping (0, -2)");
    assert_null(tnt_upsampling1d(0, NULL));
    tu_error_contains("UpSampling1D \"\": size 0");
}

/* the batch-1 plan of a strided Conv1D gives the first sample of the batch-2 results */
static void test_two_plans(void **state) {
    (void)state;
    static const char *const w_b[2] = {"w", "b"};
    tnt_layer_opts o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_LINEAR);
    check_two_plans(tnt_conv1d(5, 4, &o), "conv1d_s2_same", 2, w_b);
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_layer_opts o = c1_opts(2, 0, TNT_PADDING_SAME, true, TNT_ACT_TANH);
    fd_check(tnt_conv1d(3, 3, &o), TNT_SHAPE(7, 2), 2);
    o = c1_opts(0, 2, TNT_PADDING_CAUSAL, false, TNT_ACT_GELU);
    fd_check(tnt_conv1d(2, 2, &o), TNT_SHAPE(6, 3), 2);
    o = c1_opts(0, 0, TNT_PADDING_VALID, true, TNT_ACT_LINEAR);
    fd_check(tnt_conv1d(4, 3, &o), TNT_SHAPE(5, 2), 3);
    fd_check(tnt_global_average_pooling1d(NULL), TNT_SHAPE(5, 3), 2);
}

/* ---- configuration, defaults and errors --------------------------------------------------- */

static void test_defaults_and_names(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_conv1d(6, 5, NULL);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), "Conv1D");
    assert_true(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(28, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(24, 6))); /* valid, stride 1 */
    assert_int_equal(l->n_weights, 2);
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 3, 6)));
    assert_int_equal(l->weights[0].init, TNT_INIT_GLOROT_UNIFORM);
    assert_int_equal(l->weights[0].fan_in, 15);
    assert_int_equal(l->weights[0].fan_out, 30);
    assert_int_equal(l->weights[1].init, TNT_INIT_ZEROS);
    assert_string_equal(l->weights[0].name, "kernel");
    assert_string_equal(l->weights[1].name, "bias");
    tnt_layer_free(l);

    /* TF "same" with stride 2: ceil(in / s); causal: ceil(in / s) too */
    l = tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {2, 0}, .padding = TNT_PADDING_SAME, .name = "c"});
    assert_string_equal(tnt_layer_name(l), "c");
    assert_false(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 4)));
    tnt_layer_free(l);
    l = tnt_conv1d(4, 5, &(tnt_layer_opts){.dilation = {3, 0}, .padding = TNT_PADDING_CAUSAL});
    tu_ok(l->ops->build(l, TNT_SHAPE(2, 1), &out)); /* causal never fails: kernel > input */
    assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 4)));
    tnt_layer_free(l);

    l = tnt_max_pooling1d(2, NULL);
    assert_string_equal(tnt_layer_class(l), "MaxPooling1D");
    tu_ok(l->ops->build(l, TNT_SHAPE(9, 20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(4, 20))); /* strides default to pool_size */
    assert_int_equal(l->n_weights, 0);
    tnt_layer_free(l);
    l = tnt_max_pooling1d(3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 2), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 2)));
    tnt_layer_free(l);

    l = tnt_global_average_pooling1d(NULL);
    assert_string_equal(tnt_layer_class(l), "GlobalAveragePooling1D");
    assert_true(l->auto_name);
    tu_ok(l->ops->build(l, TNT_SHAPE(9, 20), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(20)));
    tnt_layer_free(l);
}

static void test_constructor_errors(void **state) {
    (void)state;
    assert_null(tnt_conv1d(0, 3, NULL));
    tu_error_contains("Conv1D: filters 0");
    assert_null(tnt_conv1d(4, -2, NULL));
    tu_error_contains("kernel_size -2");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {-1, 0}}));
    tu_error_contains("strides -1");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.dilation = {-2, 0}}));
    tu_error_contains("dilation_rate -2");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.strides = {2, 0}, .dilation = {2, 0}}));
    tu_error_contains("not both");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.padding = (tnt_padding)7}));
    tu_error_contains("padding 7");
    assert_null(tnt_conv1d(4, 3, &(tnt_layer_opts){.activation = (tnt_activation)99}));
    tu_error_contains("activation 99");
    assert_null(tnt_max_pooling1d(0, NULL));
    tu_error_contains("MaxPooling1D: pool_size 0");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.strides = {-3, 0}}));
    tu_error_contains("MaxPooling1D: strides -3");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("padding 2");
    assert_null(tnt_max_pooling1d(2, &(tnt_layer_opts){.activation = TNT_ACT_RELU}));
    tu_error_contains("no activation");
    /* the 2-D layers refuse causal padding */
    assert_null(tnt_conv2d(4, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_CAUSAL}));
    tu_error_contains("padding 2");
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
    expect_build_error(tnt_conv1d(4, 3, NULL), TNT_SHAPE(28, 28, 1), "Conv1D", "rank 3");
    expect_build_error(tnt_conv1d(4, 3, NULL), TNT_SHAPE(28), "(28,)", "rank 1");
    expect_build_error(tnt_conv1d(4, 5, NULL), TNT_SHAPE(3, 2), "(3, 2)", "smaller than the kernel (5)");
    expect_build_error(tnt_conv1d(4, 3, &(tnt_layer_opts){.dilation = {3, 0}}), TNT_SHAPE(6, 1),
                       "(6, 1)", "dilation 3");
    expect_build_error(tnt_max_pooling1d(2, NULL), TNT_SHAPE(4, 4, 2), "MaxPooling1D", "rank 3");
    expect_build_error(tnt_max_pooling1d(4, NULL), TNT_SHAPE(3, 2), "(3, 2)", "smaller than pool_size 4");
    expect_build_error(tnt_global_average_pooling1d(NULL), TNT_SHAPE(3, 4, 5),
                       "GlobalAveragePooling1D", "rank 3");
    expect_build_error(tnt_average_pooling1d(2, NULL), TNT_SHAPE(4, 4, 2), "AveragePooling1D", "rank 3");
    expect_build_error(tnt_zero_padding1d(1, 1, NULL), TNT_SHAPE(4, 4, 2), "ZeroPadding1D", "rank 3");
    expect_build_error(tnt_upsampling1d(2, NULL), TNT_SHAPE(4), "UpSampling1D", "rank 1");
    expect_build_error(tnt_cropping1d(2, 2, NULL), TNT_SHAPE(4, 3), "Cropping1D", "leaves nothing");
    /* "same" padding never fails for a kernel larger than the input */
    tnt_shape out;
    tnt_layer *l = tnt_conv1d(2, 5, &(tnt_layer_opts){.padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(3, 1), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 2)));
    tnt_layer_free(l);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d_fixtures),
        cmocka_unit_test(test_pool1d_fixtures),
        cmocka_unit_test(test_more_1d_layers),
        cmocka_unit_test(test_two_plans),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_defaults_and_names),
        cmocka_unit_test(test_constructor_errors),
        cmocka_unit_test(test_build_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
