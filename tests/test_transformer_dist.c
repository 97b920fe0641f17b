/* test_transformer_dist.c: a small Model Garden Transformer (zoo/transformer.c: the
 * shared embedding and logits custom layers, padding masks, causal attention; dropout 0) trained
 * data-parallel, run by ctest under mpirun with 2 ranks. Two steps of distributed training equal
 * serial training on the whole global batches (weights within 1e-5 relative, the same losses),
 * and the weights are bitwise identical on all ranks:
 *   - with the automatic split of each global batch (tnt_distribute + fit);
 *   - with the tutorial's manual distribution: each rank batches its own contiguous share of every
 *     global batch and fit runs with no_distribute (the gradient is still the global mean; with
 *     ignore_class 0 the mean over the non-padding positions of the global batch).
 * Sparse cross-entropy on the (T, vocab) logits, from_logits, label_smoothing 0.1, ignore_class 0. */
#include "testutil.h"

#include "comm/comm.h"
#include "transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 8, NS = 16, BATCH = 8 }; /* 2 global batches of 8: 2 steps */

static const transformer_params P = {
    .name = "test", .vocab_size = 13, .hidden_size = 16, .num_hidden_layers = 1, .num_heads = 2, .filter_size = 32,
    .label_smoothing = 0.1f, .learning_rate = 2.0f, .learning_rate_warmup_steps = 10,
    .adam_beta1 = 0.9f, .adam_beta2 = 0.997f, .adam_epsilon = 1e-9f, .max_length = T, .batch_size = BATCH};

static float xs[NS * 2 * T], ys[NS * T];

/* reverse task with random lengths 1..T-1, padded with 0 */
static void make_data(void) {
    uint64_t r = 12345;
    for (int i = 0; i < NS; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((r >> 33) % (T - 1));
        for (int t = 0; t < T; t++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            xs[i * 2 * T + t] = t < len ? (float)(1 + (r >> 33) % (P.vocab_size - 1)) : 0.0f;
        }
        for (int t = 0; t < T; t++) {
            float id = t < len ? xs[i * 2 * T + len - 1 - t] : 0.0f;
            xs[i * 2 * T + T + t] = id;
            ys[i * T + t] = id;
        }
    }
}

typedef enum { SERIAL, AUTO, MANUAL } mode;

static float *train(mode md, tnt_history **h, int64_t *n_out) {
    tnt_model *m = transformer_model(&P, T, NULL);
    if (!m) fail_msg("transformer_model: %s", tnt_last_error());
    if (md != SERIAL) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){.learning_rate = 0.1f, .momentum = 0.9f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .from_logits = true,
                                             .label_smoothing = 0.1f, .has_ignore_class = true, .ignore_class = 0,
                                             .seed = 5}));
    tu_ok(transformer_init_weights(m, &P, 5));
    tnt_dataset *ds;
    if (md == MANUAL) {
        /* the tutorial's data pipeline: micro-batches of BATCH / size, rank r's contiguous share of
         * every global batch */
        const int size = tnt_get_size(), rank = tnt_get_rank(), micro = BATCH / size;
        float *x = malloc(sizeof xs / (size_t)size), *y = malloc(sizeof ys / (size_t)size);
        int k = 0;
        for (int b = 0; b < NS / BATCH; b++)
            for (int i = 0; i < micro; i++, k++) {
                int src = b * BATCH + rank * micro + i;
                memcpy(x + k * 2 * T, xs + src * 2 * T, sizeof(float) * 2 * T);
                memcpy(y + k * T, ys + src * T, sizeof(float) * T);
            }
        ds = tnt_dataset_batch(tnt_dataset_from_arrays(x, TNT_SHAPE(2 * T), y, TNT_SHAPE(T), k, true), micro, true);
        free(x), free(y);
    } else {
        ds = tnt_dataset_batch(tnt_dataset_from_arrays(xs, TNT_SHAPE(2 * T), ys, TNT_SHAPE(T), NS, false), BATCH, true);
    }
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1, .no_distribute = md == MANUAL}, h));
    int64_t n = tnt_model_count_params(m);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    *n_out = n;
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return w;
}

static void assert_same_on_all_ranks(const float *w, int64_t n) {
    float *master = malloc((size_t)n * sizeof(float));
    memcpy(master, w, (size_t)n * sizeof(float));
    tu_ok(tnt__bcast_f32(master, n));
    if (memcmp(master, w, (size_t)n * sizeof(float))) fail_msg("rank %d: weights differ bitwise from the master's", tnt_get_rank());
    free(master);
}

static void check(mode md) {
    tnt_history *hs, *hd;
    int64_t ns, nd;
    float *ws = train(SERIAL, &hs, &ns);
    float *wd = train(md, &hd, &nd);
    assert_int_equal(ns, nd);
    assert_int_equal(ns, transformer_model_garden_params(&P));
    tu_assert_close(wd, ws, nd, 1e-5, 1e-6, md == AUTO ? "weights (automatic split)" : "weights (manual shards)");
    double ls = tnt_history_get(hs, "loss", 0), ld = tnt_history_get(hd, "loss", 0);
    if (!(fabs(ls - ld) <= 1e-5 * fabs(ls))) fail_msg("loss: distributed %.8g, serial %.8g", ld, ls);
    /* training moved the weights */
    float *w0;
    {
        tnt_model *m = transformer_model(&P, T, NULL);
        tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                                 .from_logits = true, .seed = 5}));
        tu_ok(transformer_init_weights(m, &P, 5));
        w0 = malloc((size_t)ns * sizeof(float));
        tu_ok(tnt_get_weights(m, w0, ns));
        tnt_model_free(m);
    }
    double moved = 0;
    for (int64_t i = 0; i < ns; i++) moved += fabs((double)w0[i] - (double)ws[i]);
    assert_true(moved > 1e-3);
    assert_same_on_all_ranks(wd, nd);
    free(w0), free(ws), free(wd);
    tnt_history_free(hs), tnt_history_free(hd);
}

static void test_auto_split_equals_serial(void **state) {
    (void)state;
    check(AUTO);
}

static void test_manual_shards_equal_serial(void **state) {
    (void)state;
    if (BATCH % tnt_get_size()) skip();
    check(MANUAL);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_split_equals_serial),
        cmocka_unit_test(test_manual_shards_equal_serial),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
