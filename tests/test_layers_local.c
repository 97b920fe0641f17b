/* test_layers_local.c: LocallyConnected1D, LocallyConnected2D and Conv3DTranspose driven through
 * the layer contract: outputs and gradients (dx, dkernel, dbias) against PyTorch references
 * (tests/fixtures/gen_layers_local.py: unfold + einsum for the unshared kernels, conv_transpose3d
 * for Conv3DTranspose), channels last and first; finite differences; shapes, fans and Keras
 * configs both ways; errors naming the class and value. The driver is tests/layer_harness.c. */
#include "json_harness.h"
#include "layer_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tnt_layer *cf(tnt_layer *l) {
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    return l;
}

static void test_locally_connected_fixtures(void **state) {
    (void)state;
    run_case("lc1d_valid", tnt_locally_connected1d(4, 3, 0, NULL));
    run_case("lc1d_s2_tanh", tnt_locally_connected1d(3, 2, 0, &(tnt_layer_opts){.strides = {2}, .activation = TNT_ACT_TANH}));
    run_case("lc1d_cf_nobias", cf(tnt_locally_connected1d(2, 3, 0, &(tnt_layer_opts){.no_bias = true})));
    run_case("lc1d_cf_s3", cf(tnt_locally_connected1d(3, 2, 0, &(tnt_layer_opts){.strides = {3}})));
    run_case("lc2d_valid", tnt_locally_connected2d(4, 3, 2, 0, NULL));
    run_case("lc2d_s2_softsign",
             tnt_locally_connected2d(3, 2, 3, 0, &(tnt_layer_opts){.strides = {2, 2}, .activation = TNT_ACT_SOFTSIGN}));
    run_case("lc2d_cf", cf(tnt_locally_connected2d(2, 3, 3, 0, &(tnt_layer_opts){.activation = TNT_ACT_RELU})));
    run_case("lc2d_cf_s12_nobias", cf(tnt_locally_connected2d(3, 2, 2, 0, &(tnt_layer_opts){.strides = {1, 2}, .no_bias = true})));
}

/* Implementations 2 (Keras's dense masked kernel) and 3 (its sparse list), padding valid and same */
static void test_locally_connected_impl2_fixtures(void **state) {
    (void)state;
    run_case("lc1d_i2_valid", tnt_locally_connected1d(3, 3, 2, &(tnt_layer_opts){.strides = {2}}));
    run_case("lc1d_i2_same_cf", cf(tnt_locally_connected1d(2, 2, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME})));
    run_case("lc2d_i2_same", tnt_locally_connected2d(3, 3, 2, 2, &(tnt_layer_opts){.strides = {2, 1},
                                                      .padding = TNT_PADDING_SAME, .activation = TNT_ACT_TANH}));
    run_case("lc2d_i2_valid_cf", cf(tnt_locally_connected2d(2, 2, 3, 2, &(tnt_layer_opts){.no_bias = true})));
    fd_check(tnt_locally_connected2d(2, 3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}), TNT_SHAPE(3, 4, 2), 2);
    /* implementation 3: the sorted list of (output, input) entries */
    run_case("lc1d_i3_same", tnt_locally_connected1d(3, 3, 3, &(tnt_layer_opts){.strides = {2}, .padding = TNT_PADDING_SAME}));
    run_case("lc2d_i3_valid_cf", cf(tnt_locally_connected2d(2, 2, 3, 3, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    run_case("lc2d_i3_same", tnt_locally_connected2d(2, 2, 2, 3, &(tnt_layer_opts){.strides = {2, 2},
                                                      .padding = TNT_PADDING_SAME, .no_bias = true}));
    fd_check(cf(tnt_locally_connected1d(2, 3, 3, &(tnt_layer_opts){.padding = TNT_PADDING_SAME})), TNT_SHAPE(2, 5), 2);
    check_layer(TNT_SHAPE(5, 4, 2), cf(tnt_locally_connected2d(2, 3, 3, 2, &(tnt_layer_opts){.padding = TNT_PADDING_SAME})),
                "LocallyConnected2D", "\"padding\":\"same\",\"data_format\":\"channels_first\"");
    tnt_shape out;
    tnt_layer *l = tnt_locally_connected2d(4, 3, 3, 2, &(tnt_layer_opts){.strides = {2, 2}, .padding = TNT_PADDING_SAME});
    tu_ok(l->ops->build(l, TNT_SHAPE(5, 6, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 3, 4)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 6, 3, 3, 3, 4)));
    assert_int_equal(l->weights[0].fan_in, 5 * 6 * 3 * 3 * 3); /* shape[-2] * prod(shape[:-2]) */
    tnt_layer_free(l);
}

static void test_conv3d_transpose_fixtures(void **state) {
    (void)state;
    run_case("convt3d_valid", tnt_conv3d_transpose(3, (int[]){2, 3, 2}, NULL, NULL));
    run_case("convt3d_s2_same", tnt_conv3d_transpose(2, (int[]){3, 3, 3}, NULL,
                                                     &(tnt_layer_opts){.strides = {2, 2, 2}, .padding = TNT_PADDING_SAME,
                                                                       .activation = TNT_ACT_TANH}));
    run_case("convt3d_op", tnt_conv3d_transpose(2, (int[]){3, 2, 3}, (int[]){1, 0, 2},
                                                &(tnt_layer_opts){.strides = {2, 2, 3}, .padding = TNT_PADDING_SAME}));
    run_case("convt3d_s3_k2_valid",
             tnt_conv3d_transpose(2, (int[]){2, 2, 2}, NULL, &(tnt_layer_opts){.strides = {3, 2, 1}, .no_bias = true}));
    run_case("convt3d_cf", cf(tnt_conv3d_transpose(3, (int[]){2, 2, 3}, NULL,
                                                   &(tnt_layer_opts){.strides = {1, 2, 2}, .padding = TNT_PADDING_SAME,
                                                                     .activation = TNT_ACT_RELU})));
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_locally_connected1d(2, 2, 0, &(tnt_layer_opts){.strides = {2}, .activation = TNT_ACT_TANH}),
             TNT_SHAPE(5, 3), 2);
    fd_check(cf(tnt_locally_connected2d(2, 2, 2, 0, &(tnt_layer_opts){.activation = TNT_ACT_MISH})), TNT_SHAPE(2, 3, 4), 2);
    fd_check(tnt_conv3d_transpose(2, (int[]){2, 2, 2}, (int[]){1, 0, 0},
                                  &(tnt_layer_opts){.strides = {2, 1, 1}, .padding = TNT_PADDING_SAME}),
             TNT_SHAPE(2, 2, 2, 2), 2);
}

static void test_shapes_and_fans(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_locally_connected2d(5, 3, 3, 0, &(tnt_layer_opts){.strides = {2, 1}});
    assert_string_equal(tnt_layer_class(l), "LocallyConnected2D");
    tu_ok(l->ops->build(l, TNT_SHAPE(7, 6, 4), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(3, 4, 5)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(12, 36, 5)));
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(3, 4, 5)));
    assert_int_equal(l->weights[0].fan_in, 36 * 12); /* Keras: shape[-2] * prod(shape[:-2]) */
    assert_int_equal(l->weights[0].fan_out, 5 * 12);
    tnt_layer_free(l);
    l = cf(tnt_locally_connected1d(2, 3, 0, NULL));
    tu_ok(l->ops->build(l, TNT_SHAPE(4, 9), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 7)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(7, 12, 2)));
    assert_true(tnt__shape_equal(l->weights[1].shape, TNT_SHAPE(7, 2)));
    tnt_layer_free(l);
    l = tnt_conv3d_transpose(4, (int[]){3, 3, 2}, NULL, &(tnt_layer_opts){.strides = {2, 2, 2}});
    assert_string_equal(tnt_layer_class(l), "Conv3DTranspose");
    tu_ok(l->ops->build(l, TNT_SHAPE(3, 4, 5, 2), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(7, 9, 10, 4)));
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(3, 3, 2, 4, 2)));
    assert_int_equal(l->weights[0].fan_in, 18 * 4);
    assert_int_equal(l->weights[0].fan_out, 18 * 2);
    tnt_layer_free(l);
}

static void test_configs(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(8, 3), tnt_locally_connected1d(4, 3, 0, &(tnt_layer_opts){.strides = {2}, .activation = TNT_ACT_RELU}),
                "LocallyConnected1D", "\"filters\":4,\"kernel_size\":[3],\"strides\":[2],\"padding\":\"valid\","
                "\"data_format\":\"channels_last\",\"activation\":\"relu\",\"use_bias\":true");
    check_layer(TNT_SHAPE(3, 6, 5), cf(tnt_locally_connected2d(2, 3, 2, 0, &(tnt_layer_opts){.no_bias = true})),
                "LocallyConnected2D", "\"data_format\":\"channels_first\"");
    check_layer(TNT_SHAPE(3, 3, 3, 2),
                tnt_conv3d_transpose(2, (int[]){3, 2, 2}, (int[]){1, 0, 1}, &(tnt_layer_opts){.strides = {2, 2, 2}}),
                "Conv3DTranspose", "\"kernel_size\":[3,2,2],\"strides\":[2,2,2],\"padding\":\"valid\","
                "\"output_padding\":[1,0,1],\"data_format\":\"channels_last\",\"dilation_rate\":[1,1,1]");
    /* Keras 1's LocallyConnected2D (nb_filter, nb_row, nb_col, subsample, dim_ordering "th") */
    tnt_model *m = seq_from_layer_json("[null, 2, 6, 5]", "{\"class_name\": \"LocallyConnected2D\", \"config\": "
                                       "{\"name\": \"lc\", \"nb_filter\": 3, \"nb_row\": 3, \"nb_col\": 2, \"subsample\": "
                                       "[1, 1], \"border_mode\": \"valid\", \"dim_ordering\": \"th\", \"bias\": true, "
                                       "\"activation\": \"linear\", \"init\": \"glorot_uniform\"}}");
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_true(tnt__shape_equal(tnt_model_output_shape(m), TNT_SHAPE(3, 4, 4)));
    assert_int_equal(tnt_model_count_params(m), 16 * 12 * 3 + 16 * 3);
    tnt_model_free(m);
    /* tf.keras 2.x's Conv3DTranspose with output_padding null and Keras's default strides */
    m = seq_from_layer_json("[null, 2, 2, 2, 3]", "{\"class_name\": \"Conv3DTranspose\", \"config\": {\"name\": \"up\", "
                            "\"filters\": 2, \"kernel_size\": [2, 2, 2], \"strides\": [2, 2, 2], \"padding\": \"same\", "
                            "\"output_padding\": null, \"data_format\": \"channels_last\", \"dilation_rate\": [1, 1, 1], "
                            "\"activation\": \"linear\", \"use_bias\": true}}");
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_true(tnt__shape_equal(tnt_model_output_shape(m), TNT_SHAPE(4, 4, 4, 2)));
    tnt_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
                 "\"LocallyConnected1D\", \"config\": {\"name\": \"lc\", \"filters\": 2, \"kernel_size\": 3, "
                 "\"implementation\": 4, \"batch_input_shape\": [null, 6, 2]}}]}}",
                 (const char *const[]){"\"lc\" (LocallyConnected1D)", "implementation 4", NULL});
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
                 "\"LocallyConnected2D\", \"config\": {\"name\": \"lc\", \"filters\": 2, \"kernel_size\": 3, "
                 "\"padding\": \"same\", \"batch_input_shape\": [null, 6, 6, 2]}}]}}",
                 (const char *const[]){"\"lc\" (LocallyConnected2D)", "padding \"same\"", NULL});
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
                 "\"Conv3DTranspose\", \"config\": {\"name\": \"up\", \"filters\": 2, \"kernel_size\": 3, "
                 "\"dilation_rate\": 2, \"batch_input_shape\": [null, 4, 4, 4, 2]}}]}}",
                 (const char *const[]){"\"up\" (Conv3DTranspose)", "dilation_rate (2, 2, 2)", NULL});
    assert_null(tnt_locally_connected2d(0, 3, 3, 0, NULL));
    tu_error_contains("LocallyConnected2D: filters 0");
    assert_null(tnt_locally_connected1d(2, 3, 0, &(tnt_layer_opts){.padding = TNT_PADDING_SAME}));
    tu_error_contains("LocallyConnected1D: padding");
    assert_null(tnt_conv3d_transpose(2, (int[]){3, 3, 3}, (int[]){2, 0, 0}, &(tnt_layer_opts){.strides = {2, 2, 2}}));
    tu_error_contains("Conv3DTranspose: output_padding (2, 0, 0)");
    tnt_shape out;
    tnt_layer *l = tnt_locally_connected2d(2, 4, 4, 0, NULL);
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 5, 2), &out), TNT_ERR_SHAPE);
    tu_error_contains("smaller than the kernel (4, 4)");
    tnt_layer_free(l);
}

int main(void) {
    tnt_init(NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locally_connected_fixtures),
        cmocka_unit_test(test_locally_connected_impl2_fixtures),
        cmocka_unit_test(test_conv3d_transpose_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_shapes_and_fans),
        cmocka_unit_test(test_configs),
        cmocka_unit_test(test_errors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}
