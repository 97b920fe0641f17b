/* test_layers_act.c: Keras's activation layers ReLU, LeakyReLU, ELU, ThresholdedReLU, PReLU and
 * Softmax driven through the layer contract: outputs and gradients (dx, and PReLU's dalpha)
 * against PyTorch references (tests/fixtures/gen_layers_act.py), finite differences, shapes of
 * PReLU's alpha with shared axes, and argument/shape errors. The driver is tests/layer_harness.c. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_elementwise_fixtures(void **state) {
    (void)state;
    run_case("relu_plain", tnt_relu_layer(INFINITY, 0.0f, 0.0f, NULL));
    run_case("relu_max6", tnt_relu_layer(6.0f, 0.0f, 0.0f, NULL));
    run_case("relu_full", tnt_relu_layer(1.5f, 0.1f, 0.5f, NULL));
    run_case("relu_slope", tnt_relu_layer(INFINITY, 0.2f, 0.0f, NULL));
    run_case("relu_negthr", tnt_relu_layer(INFINITY, 0.05f, -0.7f, NULL));
    run_case("leaky_03", tnt_leaky_relu_layer(0.3f, NULL));
    run_case("elu_1", tnt_elu_layer(1.0f, NULL));
    run_case("elu_07", tnt_elu_layer(0.7f, NULL));
    run_case("thresholded_1", tnt_thresholded_relu(1.0f, NULL));
    run_case("thresholded_neg", tnt_thresholded_relu(-0.25f, NULL));
}

static void test_prelu_fixtures(void **state) {
    (void)state;
    run_case("prelu_full", tnt_prelu(0, NULL, TNT_INIT_DEFAULT, NULL));
    run_case("prelu_shared12", tnt_prelu(2, (int[]){1, 2}, TNT_INIT_DEFAULT, NULL));
    run_case("prelu_shared2", tnt_prelu(1, (int[]){2}, TNT_INIT_DEFAULT, NULL));
}

static void test_softmax_fixtures(void **state) {
    (void)state;
    run_case("softmax_last", tnt_softmax_layer(-1, NULL));
    run_case("softmax_axis1", tnt_softmax_layer(1, NULL));
    run_case("softmax_mid", tnt_softmax_layer(-2, NULL));
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_prelu(1, (int[]){1}, TNT_INIT_DEFAULT, NULL), TNT_SHAPE(3, 4), 2);
    fd_check(tnt_softmax_layer(2, NULL), TNT_SHAPE(3, 4, 2), 2);
    fd_check(tnt_elu_layer(0.5f, NULL), TNT_SHAPE(6), 3);
    fd_check(tnt_rescaling(0.25f, 2.0f, NULL), TNT_SHAPE(5), 2);
}

static void test_shapes_and_defaults(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *l = tnt_prelu(1, (int[]){2}, TNT_INIT_DEFAULT, NULL);
    assert_string_equal(tnt_layer_class(l), "PReLU");
    tu_ok(l->ops->build(l, TNT_SHAPE(5, 6, 3), &out));
    assert_true(tnt__shape_equal(out, TNT_SHAPE(5, 6, 3)));
    assert_int_equal(l->n_weights, 1);
    assert_string_equal(l->weights[0].name, "alpha");
    assert_true(tnt__shape_equal(l->weights[0].shape, TNT_SHAPE(5, 1, 3)));
    assert_int_equal(l->weights[0].init, TNT_INIT_ZEROS); /* Keras's alpha_initializer */
    tnt_layer_free(l);
    const struct { tnt_layer *l; const char *cls; } cases[] = {
        {tnt_relu_layer(INFINITY, 0, 0, NULL), "ReLU"},
        {tnt_leaky_relu_layer(0.3f, NULL), "LeakyReLU"},
        {tnt_elu_layer(1.0f, NULL), "ELU"},
        {tnt_thresholded_relu(1.0f, NULL), "ThresholdedReLU"},
        {tnt_softmax_layer(-1, NULL), "Softmax"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_string_equal(tnt_layer_class(cases[i].l), cases[i].cls);
        assert_true(cases[i].l->ops->supports_masking);
        tu_ok(cases[i].l->ops->build(cases[i].l, TNT_SHAPE(2, 3), &out));
        assert_true(tnt__shape_equal(out, TNT_SHAPE(2, 3)));
        assert_int_equal(cases[i].l->n_weights, 0);
        tnt_layer_free(cases[i].l);
    }
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_relu_layer(-1.0f, 0, 0, NULL));
    tu_error_contains("ReLU: max_value -1");
    assert_null(tnt_relu_layer(NAN, 0, 0, NULL));
    tu_error_contains("max_value nan");
    assert_null(tnt_relu_layer(INFINITY, -0.5f, 0, NULL));
    tu_error_contains("negative_slope -0.5");
    assert_null(tnt_relu_layer(INFINITY, 0, INFINITY, NULL));
    tu_error_contains("threshold inf");
    assert_null(tnt_leaky_relu_layer(-0.1f, NULL));
    tu_error_contains("LeakyReLU: alpha -0.1");
    assert_null(tnt_elu_layer(NAN, NULL));
    tu_error_contains("ELU: alpha nan");
    assert_null(tnt_thresholded_relu(INFINITY, NULL));
    tu_error_contains("ThresholdedReLU: theta inf");
    assert_null(tnt_prelu(1, (int[]){0}, TNT_INIT_DEFAULT, NULL));
    tu_error_contains("PReLU: shared axis 0");
    assert_null(tnt_prelu(-1, NULL, TNT_INIT_DEFAULT, NULL));
    tu_error_contains("-1 shared axes");
    assert_null(tnt_prelu(0, NULL, (tnt_initializer)99, NULL));
    tu_error_contains("alpha_initializer 99");
    assert_null(tnt_softmax_layer(0, NULL));
    tu_error_contains("Softmax: axis 0");

    tnt_shape out;
    tnt_layer *l = tnt_prelu(1, (int[]){3}, TNT_INIT_DEFAULT, "p");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("PReLU \"p\": shared axis 3 outside input shape (4, 5)");
    tnt_layer_free(l);
    l = tnt_softmax_layer(3, "s");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("Softmax \"s\": axis 3 outside input shape (4, 5)");
    tnt_layer_free(l);
    l = tnt_softmax_layer(-3, "s");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tnt_layer_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_fixtures),
        cmocka_unit_test(test_prelu_fixtures),
        cmocka_unit_test(test_softmax_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_shapes_and_defaults),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
