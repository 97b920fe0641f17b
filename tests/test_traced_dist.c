/* test_traced_dist.c: a model with a traced layer trains data-parallel exactly as serially, run by
 * ctest under mpirun with 1, 2 and 3 ranks (3: uneven micro-batches). The traced layer is a small
 * block written as operations: gelu(x W + b), dropout keyed on the global sample index, a layer
 * normalization from mean/var/rsqrt with a learned scale, and a residual einsum projection. Each
 * rank trains a serial model and a distributed copy; weights and losses equal serial within 1e-5
 * and the weights are bitwise equal on all ranks. The same block read back from the model's Keras
 * JSON trains alike. */
#include "testutil.h"

#include "comm/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 46, F = 6, H = 8, BATCH = 12 }; /* 46 = 3 * 12 + 10: a last partial batch */

static float xs[N * F], ys[N];

static tnt_layer *block(void) {
    tnt_opgraph *g = tnt_opgraph_new();
    int x = tnt_opgraph_input(g, TNT_SHAPE(TNT_DIM_NONE, F));
    int w = tnt_opgraph_weight(g, "kernel", TNT_SHAPE(F, H), "glorot_uniform", true);
    int b = tnt_opgraph_weight(g, "bias", TNT_SHAPE(H), "zeros", true);
    int gamma = tnt_opgraph_weight(g, "gamma", TNT_SHAPE(H), "ones", true);
    int proj = tnt_opgraph_weight(g, "proj", TNT_SHAPE(F, H), "glorot_uniform", true);
    int h = tnt_opgraph_op(g, "matmul", 2, (int[]){x, w}, NULL);
    h = tnt_opgraph_op(g, "add", 2, (int[]){h, b}, NULL);
    h = tnt_opgraph_op(g, "gelu", 1, (int[]){h}, NULL);
    h = tnt_opgraph_op(g, "dropout", 1, (int[]){h}, "{\"rate\": 0.25}");
    int mean = tnt_opgraph_op(g, "mean", 1, (int[]){h}, "{\"axis\": -1, \"keepdims\": true}");
    int var = tnt_opgraph_op(g, "var", 1, (int[]){h}, "{\"axis\": -1, \"keepdims\": true}");
    int eps = tnt_opgraph_op(g, "constant", 0, NULL, "{\"value\": 0.001}");
    var = tnt_opgraph_op(g, "add", 2, (int[]){var, eps}, NULL);
    int inv = tnt_opgraph_op(g, "rsqrt", 1, (int[]){var}, NULL);
    int c = tnt_opgraph_op(g, "subtract", 2, (int[]){h, mean}, NULL);
    c = tnt_opgraph_op(g, "multiply", 2, (int[]){c, inv}, NULL);
    c = tnt_opgraph_op(g, "multiply", 2, (int[]){c, gamma}, NULL);
    int r = tnt_opgraph_op(g, "einsum", 2, (int[]){x, proj}, "{\"equation\": \"bf,fh->bh\"}");
    int y = tnt_opgraph_op(g, "add", 2, (int[]){c, r}, NULL);
    assert_true(y >= 0);
    tu_ok(tnt_opgraph_output(g, y));
    tnt_layer *l = tnt_traced_layer(g, "Block", "block");
    assert_non_null(l);
    return l;
}

static char *model_json(void) {
    tnt_model *m = tnt_sequential("traced");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(F), NULL)));
    tu_ok(tnt_model_add(m, block()));
    tu_ok(tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    char *json = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    tnt_model_free(m);
    return json;
}

static void check_equals_serial(bool from_json) {
    char *json = from_json ? model_json() : NULL;
    tnt_model *ms[2];
    for (int k = 0; k < 2; k++) {
        if (from_json) {
            ms[k] = tnt_model_from_json(json);
        } else {
            ms[k] = tnt_sequential("traced");
            tu_ok(tnt_model_add(ms[k], tnt_input_layer(TNT_SHAPE(F), NULL)));
            tu_ok(tnt_model_add(ms[k], block()));
            tu_ok(tnt_model_add(ms[k], tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
        }
        assert_non_null(ms[k]);
        if (k) tu_ok(tnt_distribute(ms[k]));
        tu_ok(tnt_compile(ms[k], &(tnt_compile_opts){.optimizer = tnt_adam(0.01f),
                                                     .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                     .metrics = "accuracy", .seed = 9}));
    }
    free(json);
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_shuffle(tnt_dataset_from_arrays(xs, TNT_SHAPE(F), ys, TNT_SHAPE(), N, false), N, 3), BATCH, false);
    tnt_history *hs, *hd;
    tu_ok(tnt_fit(ms[0], ds, &(tnt_fit_opts){.epochs = 3}, &hs));
    tu_ok(tnt_fit(ms[1], ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    int64_t n = tnt_model_count_params(ms[0]);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    float *master = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(ms[0], ws, n));
    tu_ok(tnt_get_weights(ms[1], wd, n));
    char what[96];
    snprintf(what, sizeof what, "traced block%s weights (ranks %d)", from_json ? " from JSON" : "", tnt_get_size());
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
    memcpy(master, wd, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    assert_memory_equal(master, wd, (size_t)n * sizeof(float));
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "accuracy" : "loss";
            double a = tnt_history_get(hs, key, e), b = tnt_history_get(hd, key, e);
            if (!(fabs(a - b) <= 1e-5 * fabs(a) + 1e-7))
                fail_msg("%s epoch %d %s: distributed %.9g, serial %.9g", what, e, key, b, a);
        }
    assert_true(tnt_history_get(hs, "loss", 2) < tnt_history_get(hs, "loss", 0)); /* it learns */
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd), free(master);
    tnt_dataset_free(ds);
    tnt_model_free(ms[0]), tnt_model_free(ms[1]);
}

static void test_traced_block_equals_serial(void **state) {
    (void)state;
    check_equals_serial(false);
}

static void test_traced_block_from_json_equals_serial(void **state) {
    (void)state;
    check_equals_serial(true);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    tu_fill(xs, N * F, 21);
    for (int i = 0; i < N; i++) ys[i] = (float)((xs[i * F] + xs[i * F + 1] > 0) + (xs[i * F + 2] > 0.5f));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traced_block_equals_serial),
        cmocka_unit_test(test_traced_block_from_json_equals_serial),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
