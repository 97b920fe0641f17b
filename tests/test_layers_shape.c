/* test_layers_shape.c: the weightless shape layers GlobalAveragePooling2D, GlobalMaxPooling2D,
 * ZeroPadding2D, Cropping2D and UpSampling2D, driven directly through the layer contract and
 * compared with PyTorch (tests/fixtures/gen_shape_layers.py), plus their argument and shape errors. */
#include "layer_harness.h"

#include "layers/layer.h"

#include <stdlib.h>
#include <string.h>

/* Checks layer l (freed here) against fixtures PREFIX_{x,y,dy,dx}: x is (n, h, w, c). */
static void check_fixture(tnt_layer *l, const char *prefix, const char *class_name) {
    char nx[64], ny[64], ndy[64], ndx[64];
    snprintf(nx, sizeof nx, "%s_x", prefix);
    snprintf(ny, sizeof ny, "%s_y", prefix);
    snprintf(ndy, sizeof ndy, "%s_dy", prefix);
    snprintf(ndx, sizeof ndx, "%s_dx", prefix);
    tnt_shape xs, ys;
    float *x = tu_load(nx, &xs), *y_ref = tu_load(ny, &ys), *dy = tu_load(ndy, NULL);
    float *dx_ref = tu_load(ndx, NULL);
    assert_int_equal(xs.ndim, 4);
    int64_t n = xs.dim[0], in_n = tnt_shape_numel(xs), out_n = tnt_shape_numel(ys);
    assert_non_null(l);
    assert_string_equal(tnt_layer_class(l), class_name);
    float *y = malloc((size_t)out_n * sizeof(float)), *dx = malloc((size_t)in_n * sizeof(float));
    for (int64_t i = 0; i < out_n; i++) y[i] = 1e30f; /* every output must be written */
    for (int64_t i = 0; i < in_n; i++) dx[i] = 1e30f;
    run_layer(l, TNT_SHAPE(xs.dim[1], xs.dim[2], xs.dim[3]), n, x, y, dy, dx, true);
    /* the built output shape is the fixture's without the batch */
    assert_int_equal(l->out_shape.ndim, ys.ndim - 1);
    for (int d = 1; d < ys.ndim; d++) assert_int_equal(l->out_shape.dim[d - 1], ys.dim[d]);
    tu_assert_close(y, y_ref, out_n, 1e-5, 1e-6, ny);
    tu_assert_close(dx, dx_ref, in_n, 1e-5, 1e-6, ndx);
    /* dx NULL (first layer): backward does nothing and succeeds */
    tnt__bwd_args ba = {.batch = n, .x = x, .y = y, .dy = dy, .dx = NULL};
    tu_ok(l->ops->backward(l, NULL, &ba));
    tnt_layer_free(l);
    free(x), free(y_ref), free(dy), free(dx_ref), free(y), free(dx);
}

static void test_global_pooling(void **state) {
    (void)state;
    check_fixture(tnt_global_average_pooling2d(NULL), "gap_3x5", "GlobalAveragePooling2D");
    check_fixture(tnt_global_average_pooling2d("g"), "gap_1x1", "GlobalAveragePooling2D");
    check_fixture(tnt_global_max_pooling2d(NULL), "gmp_3x5", "GlobalMaxPooling2D");
    /* tied maxima share the gradient equally (as TensorFlow's reduce_max and torch.amax) */
    check_fixture(tnt_global_max_pooling2d(NULL), "gmp_ties", "GlobalMaxPooling2D");

    tnt_shape out;
    tnt_layer *l = tnt_global_max_pooling2d("gmp");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("GlobalMaxPooling2D \"gmp\"");
    tu_error_contains("(4, 5)");
    tu_error_contains("rank 2");
    tnt_layer_free(l);
    l = tnt_global_average_pooling2d("gap");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 0, 2), &out), TNT_ERR_SHAPE);
    tu_error_contains("GlobalAveragePooling2D \"gap\"");
    tu_error_contains("(3, 0, 2)");
    tnt_layer_free(l);
}

static void test_zero_padding_cropping(void **state) {
    (void)state;
    check_fixture(tnt_zero_padding2d(1, 1, 1, 1, NULL), "zpad_1_1_1_1", "ZeroPadding2D");
    check_fixture(tnt_zero_padding2d(2, 0, 1, 3, "zp"), "zpad_2_0_1_3", "ZeroPadding2D");
    check_fixture(tnt_zero_padding2d(0, 1, 0, 0, NULL), "zpad_0_1_0_0", "ZeroPadding2D");
    check_fixture(tnt_cropping2d(1, 1, 1, 1, NULL), "crop_1_1_1_1", "Cropping2D");
    check_fixture(tnt_cropping2d(2, 0, 1, 3, "cr"), "crop_2_0_1_3", "Cropping2D");
    check_fixture(tnt_cropping2d(0, 1, 0, 0, NULL), "crop_0_1_0_0", "Cropping2D");

    assert_null(tnt_zero_padding2d(1, -2, 0, 0, "zp"));
    tu_error_contains("ZeroPadding2D \"zp\"");
    tu_error_contains("((1, -2), (0, 0))");
    assert_null(tnt_cropping2d(0, 0, -1, 0, NULL));
    tu_error_contains("Cropping2D");
    tu_error_contains("((0, 0), (-1, 0))");

    tnt_shape out;
    tnt_layer *l = tnt_zero_padding2d(1, 1, 1, 1, "zp");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5, 2, 1), &out), TNT_ERR_SHAPE);
    tu_error_contains("ZeroPadding2D \"zp\"");
    tu_error_contains("(4, 5, 2, 1)");
    tnt_layer_free(l);
    l = tnt_cropping2d(2, 1, 0, 0, "cr");
    tu_ok(l->ops->build(l, TNT_SHAPE(4, 5, 2), &out));
    assert_int_equal(out.dim[0], 1);
    assert_int_equal(l->ops->build(l, TNT_SHAPE(3, 5, 2), &out), TNT_ERR_SHAPE);
    tu_error_contains("Cropping2D \"cr\"");
    tu_error_contains("((2, 1), (0, 0))");
    tu_error_contains("(3, 5, 2)");
    tu_error_contains("(0, 5, 2)");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(8), &out), TNT_ERR_SHAPE);
    tu_error_contains("(8,)");
    tnt_layer_free(l);
    l = tnt_cropping2d(0, 0, 3, 4, "cw");
    assert_int_equal(l->ops->build(l, TNT_SHAPE(5, 7, 1), &out), TNT_ERR_SHAPE);
    tu_error_contains("(5, 0, 1)");
    tnt_layer_free(l);
}

static void test_upsampling(void **state) {
    (void)state;
    check_fixture(tnt_upsampling2d(2, 2, NULL, NULL), "up_2x2", "UpSampling2D");
    check_fixture(tnt_upsampling2d(3, 2, "nearest", "up"), "up_3x2", "UpSampling2D");
    check_fixture(tnt_upsampling2d(1, 3, NULL, NULL), "up_1x3", "UpSampling2D");

    assert_null(tnt_upsampling2d(0, 2, NULL, "up"));
    tu_error_contains("UpSampling2D \"up\"");
    tu_error_contains("size (0, 2)");
    assert_null(tnt_upsampling2d(2, -1, NULL, NULL));
    tu_error_contains("(2, -1)");
    assert_null(tnt_upsampling2d(2, 2, "bicubic", "up"));
    tu_error_contains("UpSampling2D \"up\": interpolation \"bicubic\" (expected \"nearest\" or \"bilinear\")");

    tnt_shape out;
    tnt_layer *l = tnt_upsampling2d(2, 3, NULL, "up");
    tu_ok(l->ops->build(l, TNT_SHAPE(4, 5, 2), &out));
    assert_int_equal(out.ndim, 3);
    assert_int_equal(out.dim[0], 8);
    assert_int_equal(out.dim[1], 15);
    assert_int_equal(out.dim[2], 2);
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 5), &out), TNT_ERR_SHAPE);
    tu_error_contains("UpSampling2D \"up\"");
    tu_error_contains("(4, 5)");
    tnt_layer_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_pooling),
        cmocka_unit_test(test_zero_padding_cropping),
        cmocka_unit_test(test_upsampling),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
