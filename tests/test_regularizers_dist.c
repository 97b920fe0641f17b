/* test_regularizers_dist.c: regularizers and constraints in data-parallel training, run by ctest
 * under mpirun with 2 and 3 ranks (3: uneven micro-batches). Each rank trains a serial model and
 * a distributed copy with weight penalties, activity penalties (one on the softmax output, whose
 * loss then runs on the probabilities) and MaxNorm/NonNeg constraints: the weights, History and
 * evaluate equal serial within 1e-5, so each penalty counts once, not once per rank; a rank with
 * another regularizer fails everywhere. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_SAMPLES = 90, BATCH = 16, FEATURES = 6, CLASSES = 3 }; /* 90 = 5*16 + 10 */

static float xs[N_SAMPLES * FEATURES], ys[N_SAMPLES];

static tnt_dataset *data(int64_t batch) {
    return tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEATURES), ys, TNT_SHAPE(), N_SAMPLES, false),
                             batch, false);
}

static tnt_model *model(void) {
    tnt_model *m = tnt_sequential("m");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL)));
    tnt_layer *h = tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_RELU});
    tu_ok(tnt_layer_set_regularizer(h, "kernel_regularizer", TNT_REG_L2, 0, 0.02f));
    tu_ok(tnt_layer_set_regularizer(h, "bias_regularizer", TNT_REG_L1, 0.01f, 0));
    tu_ok(tnt_layer_set_regularizer(h, "activity_regularizer", TNT_REG_L1L2, 0.01f, 0.01f));
    tu_ok(tnt_layer_set_constraint(h, "kernel_constraint", &(tnt_constraint){.kind = TNT_MAX_NORM, .max_value = 0.8f}));
    tnt_layer *out = tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX});
    tu_ok(tnt_layer_set_regularizer(out, "kernel_regularizer", TNT_REG_L1, 0.01f, 0));
    tu_ok(tnt_layer_set_regularizer(out, "activity_regularizer", TNT_REG_L2, 0, 0.1f));
    tu_ok(tnt_layer_set_constraint(out, "bias_constraint", &(tnt_constraint){.kind = TNT_NON_NEG}));
    tu_ok(tnt_model_add(m, h));
    tu_ok(tnt_model_add(m, out));
    return m;
}

static void test_equals_serial(void **state) {
    (void)state;
    tnt_model *s = model(), *d = model();
    tu_ok(tnt_distribute(d));
    tnt_compile_opts co = {.loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 5};
    co.optimizer = tnt_sgd(0.2f);
    tu_ok(tnt_compile(s, &co));
    co.optimizer = tnt_sgd(0.2f);
    tu_ok(tnt_compile(d, &co));
    tnt_dataset *train = data(BATCH), *val = data(30);
    tnt_history *hs, *hd;
    tu_ok(tnt_fit(s, train, &(tnt_fit_opts){.epochs = 3}, &hs));
    tu_ok(tnt_fit(d, train, &(tnt_fit_opts){.epochs = 3}, &hd));
    int64_t n = tnt_model_count_params(s);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, a, n));
    tu_ok(tnt_get_weights(d, b, n));
    tu_assert_close(b, a, n, 1e-5, 1e-6, "distributed weights");
    for (int e = 0; e < 3; e++) {
        double ls = tnt_history_get(hs, "loss", e), ld = tnt_history_get(hd, "loss", e);
        assert_float_equal(ld, ls, 1e-5); /* relative */
    }
    tnt_logs es, ed;
    tu_ok(tnt_evaluate(s, val, NULL, &es));
    tu_ok(tnt_evaluate(d, val, NULL, &ed));
    double vs = 0, vd = 0;
    assert_true(tnt_logs_get(&es, "loss", &vs) && tnt_logs_get(&ed, "loss", &vd));
    assert_float_equal(vd, vs, 1e-5);
    tnt_history_free(hs), tnt_history_free(hd);
    free(a), free(b);
    tnt_dataset_free(train), tnt_dataset_free(val);
    tnt_model_free(s), tnt_model_free(d);
}

/* A rank with another regularizer fails on every rank, naming the model, instead of diverging. */
static void test_other_regularizer_fails_everywhere(void **state) {
    (void)state;
    tnt_model *m = model();
    tnt_layer *out = tnt_model_get_layer(m, "dense_1");
    assert_non_null(out);
    tu_ok(tnt_layer_set_regularizer(out, "kernel_regularizer", TNT_REG_L1, tnt_get_rank() == 1 ? 0.02f : 0.01f, 0));
    tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY}));
    tnt_dataset *ds = data(BATCH);
    assert_int_equal(tnt_fit(m, ds, NULL, NULL), TNT_ERR_MPI);
    tu_error_contains("model");
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    tu_fill(xs, N_SAMPLES * FEATURES, 21);
    for (int i = 0; i < N_SAMPLES; i++) ys[i] = (float)((xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.3f));
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_equals_serial),
                                       cmocka_unit_test(test_other_regularizer_fails_everywhere)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return failed;
}
