/* test_rnn_dist.c: recurrent models train data-parallel exactly as serially, run by ctest under
 * mpirun with 1, 2 and 3 ranks (3: uneven micro-batches). Each rank trains a serial model and a
 * distributed copy: Embedding(mask_zero) + Bidirectional(LSTM, dropout and recurrent dropout) +
 * Dense, and Embedding + GRU(return_sequences) + TimeDistributed(Dense) with per-step labels;
 * weights and History equal serial within 1e-5 relative and are bitwise equal on all ranks. The
 * sequences are pre-padded with id 0, so the mask matters, and the dropout masks must follow the
 * global sample index. A Keras encoder-decoder read from its JSON (an encoder LSTM with
 * return_state whose h and c start the decoder LSTM, then Dense per step) trains alike too. */
#include "testutil.h"

#include "comm/comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 46, T = 7, V = 12, BATCH = 12 }; /* 46 = 3 * 12 + 10: a last partial batch */

static float xs[N * T], ys_last[N], ys_seq[N * T];

static void make_data(void) {
    for (int i = 0; i < N; i++) {
        int pad = i % 4; /* 0..3 leading padding ids */
        int sum = 0;
        for (int t = 0; t < T; t++) {
            int id = t < pad ? 0 : 1 + (i * 5 + t * 3) % (V - 1);
            xs[i * T + t] = (float)id;
            sum += id;
            ys_seq[i * T + t] = (float)((sum + t) % 3);
        }
        ys_last[i] = (float)(sum % 3);
    }
}

static tnt_model *model(bool bidirectional, bool distributed) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T), NULL), out;
    tnt_ktensor e = tnt_call(g, tnt_embedding(V, 6, bidirectional, NULL), in);
    if (bidirectional) {
        tnt_layer *lstm = tnt_lstm(5, &(tnt_rnn_opts){.dropout = 0.2f, .recurrent_dropout = 0.3f});
        tnt_ktensor h = tnt_call(g, tnt_bidirectional(lstm, NULL, TNT_MERGE_CONCAT, NULL), e);
        out = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), h);
    } else {
        tnt_ktensor h = tnt_call(g, tnt_gru(6, &(tnt_rnn_opts){.return_sequences = true, .recurrent_dropout = 0.25f}), e);
        out = tnt_call(g, tnt_time_distributed(tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), NULL), h);
    }
    tnt_model *m = tnt_functional(g, 1, &in, 1, &out, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    if (distributed) tu_ok(tnt_distribute(m));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(0.01f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .metrics = "accuracy", .seed = 9}));
    return m;
}

static void check_equals_serial(bool bidirectional) {
    const float *y = bidirectional ? ys_last : ys_seq;
    tnt_shape ys = bidirectional ? TNT_SHAPE() : TNT_SHAPE(T);
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_shuffle(tnt_dataset_from_arrays(xs, TNT_SHAPE(T), y, ys, N, false), N, 3), BATCH, false);
    tnt_model *s = model(bidirectional, false), *d = model(bidirectional, true);
    tnt_history *hs, *hd;
    tu_ok(tnt_fit(s, ds, &(tnt_fit_opts){.epochs = 3}, &hs));
    tu_ok(tnt_fit(d, ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    int64_t n = tnt_model_count_params(s);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    float *master = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(s, ws, n));
    tu_ok(tnt_get_weights(d, wd, n));
    char what[96];
    snprintf(what, sizeof what, "%s weights (ranks %d)", bidirectional ? "Bidirectional(LSTM)" : "GRU",
             tnt_get_size());
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
    tnt_model_free(s), tnt_model_free(d);
}

/* ---- seq2seq: encoder states into the decoder, through Keras JSON ---- */

enum { T1 = 5, F1 = 3, T2 = 4, F2 = 2, NX = T1 * F1 + T2 * F2 };
static float s2s_x[N * NX], s2s_y[N * T2];

static char *seq2seq_json(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T1, F1), "enc_in"), tnt_graph_input(g, TNT_SHAPE(T2, F2), "dec_in")};
    tnt_ktensor enc[3], dec[3];
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(6, &(tnt_rnn_opts){.return_state = true, .recurrent_dropout = 0.2f}), 1,
                                      ins, 3, enc), 3);
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(6, &(tnt_rnn_opts){.return_sequences = true, .return_state = true,
                                                                      .dropout = 0.1f}),
                                      3, (tnt_ktensor[]){ins[1], enc[1], enc[2]}, 3, dec), 3);
    tnt_ktensor y = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), dec[0]);
    tnt_model *m = tnt_functional(g, 2, ins, 1, &y, "seq2seq");
    tnt_graph_free(g);
    assert_non_null(m);
    char *json = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    tnt_model_free(m);
    return json;
}

static void test_seq2seq_from_json_equals_serial(void **state) {
    (void)state;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < NX; k++) s2s_x[i * NX + k] = (float)((i * 7 + k * 3) % 11) / 5.0f - 1.0f;
        for (int t = 0; t < T2; t++) s2s_y[i * T2 + t] = (float)((i + t * (i % 3)) % 3);
    }
    char *json = seq2seq_json();
    tnt_model *ms[2];
    for (int k = 0; k < 2; k++) {
        ms[k] = tnt_model_from_json(json);
        assert_non_null(ms[k]);
        if (k) tu_ok(tnt_distribute(ms[k]));
        tu_ok(tnt_compile(ms[k], &(tnt_compile_opts){.optimizer = tnt_adam(0.02f),
                                                     .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 5}));
    }
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_shuffle(tnt_dataset_from_arrays(s2s_x, TNT_SHAPE(NX), s2s_y, TNT_SHAPE(T2), N, false), N, 3), BATCH,
        false);
    tnt_history *hs, *hd;
    tu_ok(tnt_fit(ms[0], ds, &(tnt_fit_opts){.epochs = 3}, &hs));
    tu_ok(tnt_fit(ms[1], ds, &(tnt_fit_opts){.epochs = 3}, &hd));
    int64_t n = tnt_model_count_params(ms[0]);
    float *ws = malloc((size_t)n * sizeof(float)), *wd = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(ms[0], ws, n));
    tu_ok(tnt_get_weights(ms[1], wd, n));
    char what[64];
    snprintf(what, sizeof what, "seq2seq weights (ranks %d)", tnt_get_size());
    tu_assert_close(wd, ws, n, 1e-5, 1e-6, what);
    for (int e = 0; e < 3; e++) {
        double a = tnt_history_get(hs, "loss", e), b = tnt_history_get(hd, "loss", e);
        if (!(fabs(a - b) <= 1e-5 * fabs(a) + 1e-7)) fail_msg("%s epoch %d loss: distributed %.9g, serial %.9g", what, e, b, a);
    }
    assert_true(tnt_history_get(hs, "loss", 2) < tnt_history_get(hs, "loss", 0));
    tnt_history_free(hs), tnt_history_free(hd);
    free(ws), free(wd), free(json);
    tnt_dataset_free(ds);
    tnt_model_free(ms[0]), tnt_model_free(ms[1]);
}

static void test_bidirectional_lstm_equals_serial(void **state) {
    (void)state;
    check_equals_serial(true);
}

static void test_gru_time_distributed_equals_serial(void **state) {
    (void)state;
    check_equals_serial(false);
}

int main(int argc, char **argv) {
    if (tnt_init(&argc, &argv) != TNT_OK) {
        fprintf(stderr, "tnt_init: %s\n", tnt_last_error());
        return 1;
    }
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bidirectional_lstm_equals_serial),
        cmocka_unit_test(test_gru_time_distributed_equals_serial),
        cmocka_unit_test(test_seq2seq_from_json_equals_serial),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tnt_finalize();
    return rc;
}
