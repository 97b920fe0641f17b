/* test_layers_basic.c: Activation (every Keras activation against PyTorch), Flatten, Reshape,
 * Dropout and InputLayer, driven directly through the layer contract. */
#include "layer_harness.h"

#include "layers/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_activations_match_torch(void **state) {
    (void)state;
    static const char *names[] = {"relu", "sigmoid", "tanh", "softmax", "elu",
                                  "selu", "gelu", "swish", "softplus", "leaky_relu",
                                  "softsign", "hard_sigmoid", "hard_sigmoid_v3", "hard_silu",
                                  "exponential", "relu6", "mish", "log_softmax", "celu",
                                  "hard_tanh", "tanh_shrink", "soft_shrink", "hard_shrink",
                                  "squareplus", "log_sigmoid", "sparse_plus", "sparse_sigmoid",
                                  "sparsemax"};
    tnt_shape xs;
    float *x = tu_load("act_x", &xs), *dy = tu_load("act_dy", NULL);
    int64_t n = xs.dim[0], c = xs.dim[1];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char yname[64], dname[64];
        snprintf(yname, sizeof yname, "act_%s_y", names[i]);
        snprintf(dname, sizeof dname, "act_%s_dx", names[i]);
        float *y_ref = tu_load(yname, NULL), *dx_ref = tu_load(dname, NULL);
        float *y = calloc((size_t)(n * c), sizeof(float)), *dx = calloc((size_t)(n * c), sizeof(float));
        int act = tnt_activation_from_name(names[i]);
        assert_true(act >= 0);
        tnt_layer *l = tnt_activation_layer((tnt_activation)act, NULL);
        assert_non_null(l);
        run_layer(l, TNT_SHAPE(c), n, x, y, dy, dx, true);
        tu_assert_close(y, y_ref, n * c, 1e-5, 1e-6, yname);
        tu_assert_close(dx, dx_ref, n * c, 1e-4, 1e-6, dname);
        tnt_layer_free(l);
        free(y), free(dx), free(y_ref), free(dx_ref);
    }
    assert_int_equal(tnt_activation_from_name("silu"), TNT_ACT_SWISH);
    assert_int_equal(tnt_activation_from_name("hard_swish"), TNT_ACT_HARD_SILU);
    for (int a = 0; a < TNT_ACT_COUNT; a++) /* every name reads back */
        assert_int_equal(tnt_activation_from_name(tnt_activation_name((tnt_activation)a)), a);
    assert_int_equal(tnt_activation_from_name("nope"), -1);
    assert_null(tnt_activation_layer((tnt_activation)99, NULL));
    tu_error_contains("99");
    free(x), free(dy);
}

/* The smooth ones by finite differences: alone, and fused into Dense (backward from the kept
 * pre-activation, or from the output for log_softmax). */
static void test_activations_finite_differences(void **state) {
    (void)state;
    static const tnt_activation smooth[] = {TNT_ACT_SOFTSIGN, TNT_ACT_MISH, TNT_ACT_LOG_SOFTMAX, TNT_ACT_CELU,
                                            TNT_ACT_TANH_SHRINK, TNT_ACT_SQUAREPLUS, TNT_ACT_LOG_SIGMOID,
                                            TNT_ACT_EXPONENTIAL, TNT_ACT_SPARSE_PLUS};
    for (size_t i = 0; i < sizeof smooth / sizeof *smooth; i++) {
        fd_check(tnt_activation_layer(smooth[i], NULL), TNT_SHAPE(6), 2);
        fd_check(tnt_dense(3, &(tnt_layer_opts){.activation = smooth[i]}), TNT_SHAPE(4), 2);
    }
}

static void test_flatten_reshape_shapes(void **state) {
    (void)state;
    tnt_shape out;
    tnt_layer *f = tnt_flatten(NULL);
    tu_ok(f->ops->build(f, TNT_SHAPE(7, 7, 50), &out));
    assert_int_equal(out.ndim, 1);
    assert_int_equal(out.dim[0], 2450);
    assert_true(f->ops->is_view);
    tnt_layer_free(f);

    tnt_layer *r = tnt_reshape(TNT_SHAPE(-1, 10), "r");
    tu_ok(r->ops->build(r, TNT_SHAPE(4, 5, 2), &out));
    assert_int_equal(out.dim[0], 4);
    assert_int_equal(out.dim[1], 10);
    assert_int_equal(r->ops->build(r, TNT_SHAPE(3, 3), &out), TNT_ERR_SHAPE);
    tu_error_contains("(3, 3)");
    tnt_layer_free(r);

    r = tnt_reshape(TNT_SHAPE(6, 7), "r2");
    assert_int_equal(r->ops->build(r, TNT_SHAPE(40), &out), TNT_ERR_SHAPE);
    tu_error_contains("(6, 7)");
    tnt_layer_free(r);

    assert_null(tnt_reshape(TNT_SHAPE(-1, -1), NULL));
    assert_null(tnt_reshape(TNT_SHAPE(0, 3), NULL));
    tu_error_contains("(0, 3)");
    assert_null(tnt_input_layer(TNT_SHAPE(28, 0, 1), NULL));
    tu_error_contains("(28, 0, 1)");
}

static void test_dropout(void **state) {
    (void)state;
    enum { N = 4, C = 5000 };
    float *x = malloc(N * C * sizeof(float)), *y = malloc(N * C * sizeof(float));
    float *dy = malloc(N * C * sizeof(float)), *dx = malloc(N * C * sizeof(float));
    for (int i = 0; i < N * C; i++) x[i] = 1.0f, dy[i] = 2.0f;
    tnt_layer *l = tnt_dropout(0.25f, 123, NULL);
    run_layer(l, TNT_SHAPE(C), N, x, y, dy, dx, true);
    int kept = 0;
    for (int i = 0; i < N * C; i++) {
        if (y[i] != 0.0f) {
            kept++;
            assert_float_equal(y[i], 1.0f / 0.75f, 1e-6);
            assert_float_equal(dx[i], 2.0f / 0.75f, 1e-6); /* same mask in backward */
        } else {
            assert_float_equal(dx[i], 0.0f, 0.0);
        }
    }
    double frac = (double)kept / (N * C);
    assert_true(frac > 0.73 && frac < 0.77);
    /* same seed, same mask */
    float *y2 = malloc(N * C * sizeof(float));
    run_layer(l, TNT_SHAPE(C), N, x, y2, NULL, NULL, true);
    assert_memory_equal(y, y2, N * C * sizeof(float));
    /* inactive outside training */
    run_layer(l, TNT_SHAPE(C), N, x, y2, dy, dx, false);
    assert_memory_equal(x, y2, N * C * sizeof(float));
    tnt_layer_free(l);
    assert_null(tnt_dropout(1.0f, 0, NULL));
    tu_error_contains("rate 1");
    assert_null(tnt_dropout(-0.5f, 0, NULL));
    free(x), free(y), free(y2), free(dy), free(dx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activations_match_torch),
        cmocka_unit_test(test_activations_finite_differences),
        cmocka_unit_test(test_flatten_reshape_shapes),
        cmocka_unit_test(test_dropout),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
