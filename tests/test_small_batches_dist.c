/* test_small_batches_dist.c: run by ctest under mpirun on 8 ranks (2 cores, oversubscribed). A data
 * set of 1,003 samples in global batches of 64 (a last batch of 43: some ranks get 5 samples,
 * others 6) and of 4 (every batch leaves half the ranks without a sample; the last has 3) trains
 * as serial does: the ranks without a sample add zero, weights and History equal serial. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1003, FEATURES = 6, CLASSES = 3 };

static float xs[N * FEATURES], ys[N];

static tnt_model *mlp(void) {
    tnt_model *m = tnt_sequential("small");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(FEATURES), NULL)));
    tu_ok(tnt_model_add(m, tnt_dense(8, &(tnt_layer_opts){.activation = TNT_ACT_TANH})));
    tu_ok(tnt_model_add(m, tnt_dense(CLASSES, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX})));
    return m;
}

static float *train(int64_t batch, bool distributed, tnt_history **h, int64_t *n) {
    tnt_model *m = mlp();
    if (distributed) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.05f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 7}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(FEATURES), ys, TNT_SHAPE(), N, false),
                                        batch, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, h));
    *n = tnt_model_count_params(m);
    float *w = malloc((size_t)*n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, *n));
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return w;
}

static void test_batches_smaller_than_ranks_equal_serial(void **state) {
    (void)state;
    const int64_t batches[] = {64, 4};
    for (int i = 0; i < 2; i++) {
        tnt_history *hs, *hd;
        int64_t n;
        float *ws = train(batches[i], false, &hs, &n), *wd = train(batches[i], true, &hd, &n);
        char what[64];
        snprintf(what, sizeof what, "weights, batch %lld on %d ranks", (long long)batches[i], tnt_get_size());
        tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "accuracy" : "loss";
            double s = tnt_history_get(hs, key, 0), d = tnt_history_get(hd, key, 0);
            if (!(fabs(s - d) <= 1e-6 * fabs(s) + 1e-7))
                fail_msg("batch %lld %s: distributed %.9g, serial %.9g", (long long)batches[i], key, d, s);
        }
        tnt_history_free(hs), tnt_history_free(hd);
        free(ws), free(wd);
    }
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    tu_fill(xs, N * FEATURES, 5);
    for (int i = 0; i < N; i++) ys[i] = (float)((xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.5f));
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_batches_smaller_than_ranks_equal_serial)};
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return r;
}
