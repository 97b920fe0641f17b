/* test_layers_mask.c: Keras Masking and the sequence mask it makes: Masking forward and backward,
 * and GlobalAveragePooling1D's masked mean, against PyTorch (tests/fixtures/gen_layers_mask.py);
 * finite differences; the mask reaching GlobalAveragePooling1D through a graph, and-ed by
 * Concatenate and Add; the Keras JSON round trip; and argument and shape errors. */
#include "json_harness.h"
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dnnl_util.h"

static void test_masking_fixtures(void **state) {
    (void)state;
    run_case("masking_zero", tnt_masking(0.0f, NULL));
    run_case("masking_value", tnt_masking(-1.5f, "m"));
}

/* GlobalAveragePooling1D given the mask as its second input, as the graph appends it. */
static void test_gap1d_masked_fixture(void **state) {
    (void)state;
    tnt_shape xs, ms;
    float *x = tu_load("gap1d_masked_x", &xs), *mask = tu_load("gap1d_masked_mask", &ms);
    float *dy = tu_load("gap1d_masked_dy", NULL);
    const int64_t B = xs.dim[0], T = xs.dim[1], C = xs.dim[2];
    tnt_layer *l = tnt_global_average_pooling1d(NULL);
    assert_true(l->ops->consumes_mask);
    tnt_shape in[2] = {TNT_SHAPE(T, C), TNT_SHAPE(T)};
    tu_ok(l->ops->build_multi(l, 2, in, &l->out_shape));
    assert_true(tnt__shape_equal(l->out_shape, TNT_SHAPE(C)));
    float *y = calloc((size_t)(B * C), sizeof(float)), *dx = calloc((size_t)(B * T * C), sizeof(float));
    float *dmask = malloc((size_t)(B * T) * sizeof(float));
    for (int64_t i = 0; i < B * T; i++) dmask[i] = 7.0f;
    const float *xsp[2] = {x, mask};
    float *dxs[2] = {dx, dmask};
    tnt__fwd_args fa = {.batch = B, .x = x, .n_inputs = 2, .xs = xsp, .y = y};
    tu_ok(l->ops->forward(l, NULL, &fa));
    check(y, "gap1d_masked_y", B * C, "masked mean");
    tnt__bwd_args ba = {.batch = B, .x = x, .y = y, .dy = dy, .dx = dx, .n_inputs = 2, .xs = xsp, .dxs = dxs};
    tu_ok(l->ops->backward(l, NULL, &ba));
    check(dx, "gap1d_masked_dx", B * T * C, "masked mean dx");
    for (int64_t i = 0; i < B * T; i++) assert_true(dmask[i] == 0.0f);
    /* a mask of the wrong length is refused */
    in[1] = TNT_SHAPE(T + 1);
    assert_int_equal(l->ops->build_multi(l, 2, in, &l->out_shape), TNT_ERR_SHAPE);
    tu_error_contains("sequence mask of shape (5,)");
    tnt_layer_free(l);
    free(x), free(mask), free(dy), free(y), free(dx), free(dmask);
}

static void test_finite_differences(void **state) {
    (void)state;
    fd_check(tnt_masking(0.0f, NULL), TNT_SHAPE(4, 3), 2);
}

/* Input -> Masking(0) -> GlobalAveragePooling1D: the mean over the steps that are not all zero. */
static void test_mask_through_graph(void **state) {
    (void)state;
    tnt_shape xs, ms;
    float *x = tu_load("gap1d_masked_x", &xs), *mask = tu_load("gap1d_masked_mask", &ms);
    const int64_t B = xs.dim[0], T = xs.dim[1], C = xs.dim[2];
    for (int64_t i = 0; i < B * T; i++)
        if (mask[i] == 0.0f) memset(x + i * C, 0, (size_t)C * sizeof(float));
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T, C), NULL);
    tnt_ktensor y = tnt_call(g, tnt_global_average_pooling1d(NULL), tnt_call(g, tnt_masking(0.0f, NULL), in));
    tnt_model *m = tnt_functional(g, 1, &in, 1, &y, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    tnt_tensor *out;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(B, T, C), x}, &out));
    check(out->data, "gap1d_masked_y", B * C, "Masking -> GlobalAveragePooling1D");
    tnt_tensor_free(out);
    tnt_model_free(m);
    free(x), free(mask);
}

/* Two masked branches merged: the output is masked where either input is (Keras's merge masks). */
static void test_merged_masks(void **state) {
    (void)state;
    enum { B = 2, T = 4, C = 2 };
    /* branch a masks step 1 of sample 0; branch b masks step 3 of sample 0 and step 0 of sample 1 */
    float xa[B * T * C] = {1, 2, 0, 0, 3, 4, 5, 6, /**/ 7, 8, 9, 1, 2, 3, 4, 5};
    float xb[B * T * C] = {1, 1, 2, 2, 3, 3, 0, 0, /**/ 0, 0, 6, 6, 7, 7, 8, 8};
    float xab[B * T * 2 * C];
    for (int i = 0; i < B * T; i++) {
        memcpy(xab + i * 2 * C, xa + i * C, C * sizeof(float));
        memcpy(xab + i * 2 * C + C, xb + i * C, C * sizeof(float));
    }
    for (int merge = 0; merge < 2; merge++) {
        tnt_graph *g = tnt_graph_new();
        tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T, C), NULL), tnt_graph_input(g, TNT_SHAPE(T, C), NULL)};
        tnt_ktensor a = tnt_call(g, tnt_masking(0.0f, NULL), ins[0]), b = tnt_call(g, tnt_masking(0.0f, NULL), ins[1]);
        tnt_ktensor j = tnt_call2(g, merge ? tnt_add(NULL) : tnt_concatenate(-1, NULL), a, b);
        tnt_ktensor y = tnt_call(g, tnt_global_average_pooling1d(NULL), j);
        tnt_model *m = tnt_functional(g, 2, ins, 1, &y, NULL);
        tnt_graph_free(g);
        assert_non_null(m);
        /* two inputs: each sample's values of input 0, then of input 1 */
        float packed[B * 2 * T * C];
        for (int n = 0; n < B; n++) {
            memcpy(packed + n * 2 * T * C, xa + n * T * C, T * C * sizeof(float));
            memcpy(packed + n * 2 * T * C + T * C, xb + n * T * C, T * C * sizeof(float));
        }
        tnt_tensor *out;
        tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(B, 2 * T * C), packed}, &out));
        /* expected: mean over the steps kept by both (sample 0: 0 and 2; sample 1: 1, 2, 3) */
        static const int kept[B][T] = {{1, 0, 1, 0}, {0, 1, 1, 1}};
        int width = merge ? C : 2 * C;
        float want[B * 2 * C] = {0};
        for (int n = 0; n < B; n++) {
            int k = 0;
            for (int t = 0; t < T; t++) {
                if (!kept[n][t]) continue;
                k++;
                for (int ch = 0; ch < width; ch++) {
                    const float *r = xab + (n * T + t) * 2 * C;
                    want[n * width + ch] += merge ? r[ch] + r[C + ch] : r[ch];
                }
            }
            for (int ch = 0; ch < width; ch++) want[n * width + ch] /= (float)k;
        }
        tu_assert_close(out->data, want, B * width, 1e-6, 1e-6, merge ? "Add of masked" : "Concatenate of masked");
        tnt_tensor_free(out);
        tnt_model_free(m);
    }
}

static void test_json_and_errors(void **state) {
    (void)state;
    check_layer(TNT_SHAPE(5, 3), tnt_masking(-1.0f, NULL), "Masking", "\"mask_value\":-1");
    tnt_model *m = seq_from_layer_json("[null, 4, 2]", "{\"class_name\": \"Masking\", \"config\": {\"name\": \"mk\"}}");
    assert_non_null(m);
    tnt_model_free(m);
    static const char *const bad_value[] = {"Masking", "mask_value", NULL};
    expect_error("{\"class_name\": \"Sequential\", \"config\": {\"layers\": [{\"class_name\": \"Masking\", "
                 "\"config\": {\"name\": \"mk\", \"batch_input_shape\": [null, 3, 2], \"mask_value\": \"x\"}}]}}",
                 bad_value);
    assert_null(tnt_masking(NAN, NULL));
    tu_error_contains("Masking: mask_value nan");
    tnt_layer *l = tnt_masking(0.0f, "mk");
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(6), &out), TNT_ERR_SHAPE);
    tu_error_contains("Masking \"mk\": input shape (6,)");
    float v = 1;
    assert_true(tnt__masking_value(l, &v));
    assert_true(v == 0.0f);
    tnt_layer_free(l);
    l = tnt_rescaling(1, 0, NULL);
    assert_false(tnt__masking_value(l, &v));
    tnt_layer_free(l);
}

static int teardown(void **state) {
    (void)state;
    tnt__dnnl_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_masking_fixtures),
        cmocka_unit_test(test_gap1d_masked_fixture),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_mask_through_graph),
        cmocka_unit_test(test_merged_masks),
        cmocka_unit_test(test_json_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
