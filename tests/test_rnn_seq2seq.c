/* test_rnn_seq2seq.c: layers with several outputs in models: the Keras encoder-decoder (an
 * encoder LSTM with return_state whose h and c start the decoder LSTM, Keras's initial_state),
 * built with tnt_call_outputs, written as Keras JSON (tensor_index 1 and 2 in the decoder's
 * inbound node) and read back with the same predictions; gradients reach the encoder only
 * through the states; Keras 3's initial_state keyword form; Bidirectional merge_mode None and
 * its states feeding other layers; the graph's errors; and the architecture of a real Keras 2.1
 * seq2seq model (tests/fixtures/keras_real/seq2seq_5549.json: Embedding, Bidirectional LSTM
 * with return_state, Concatenate of its states, a decoder LSTM started from them), whose
 * predictions (weights from a formula: the file ships none) equal an independent PyTorch rebuild
 * (tests/fixtures/gen_keras_real_seq2seq.py) within 1e-5; and a real trained tf.keras 2.12 decoder
 * (initial states as inputs, states as outputs) against PyTorch with the file's weights. */
#include "testutil.h"

#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 5, T1 = 4, F1 = 3, T2 = 3, F2 = 2, U = 4, V = 3 };

/* enc (T1, F1) -> LSTM(return_state) -> [_, h, c]; dec (T2, F2) -> LSTM(seq, initial_state [h, c])
 * -> Dense(V, softmax). */
static tnt_model *seq2seq(void) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T1, F1), "enc_in"), tnt_graph_input(g, TNT_SHAPE(T2, F2), "dec_in")};
    tnt_ktensor enc[3], dec[3];
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(U, &(tnt_rnn_opts){.return_state = true, .name = "encoder"}), 1, ins,
                                      3, enc), 3);
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(U, &(tnt_rnn_opts){.return_sequences = true, .return_state = true,
                                                                      .name = "decoder"}),
                                      3, (tnt_ktensor[]){ins[1], enc[1], enc[2]}, 3, dec), 3);
    tnt_shape hs = tnt_ktensor_shape(g, enc[2]);
    assert_true(tnt__shape_equal(hs, TNT_SHAPE(U)));
    tnt_ktensor y = tnt_call(g, tnt_dense(V, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX, .name = "out"}), dec[0]);
    tnt_model *m = tnt_functional(g, 2, ins, 1, &y, "s2s");
    tnt_graph_free(g);
    assert_non_null(m);
    return m;
}

static float xin[N * (T1 * F1 + T2 * F2)];

static tnt_tensor *predict(tnt_model *m) {
    tnt_tensor *y;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(N, T1 * F1 + T2 * F2), xin}, &y));
    return y;
}

static void test_json_round_trip(void **state) {
    (void)state;
    tu_fill(xin, N * (T1 * F1 + T2 * F2), 3);
    tnt_model *m = seq2seq();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 4}));
    char *json = NULL, *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tu_ok(tnt_model_summary(m, f));
    fclose(f);
    if (!strstr(text, "encoder (LSTM)              [(None, 4), (None, 4), (None, 4)] 128") ||
        !strstr(text, "encoder[0][1]"))
        fail_msg("summary:\n%s", text);
    free(text);
    tu_ok(tnt_model_to_json(m, &json));
    /* the decoder's inbound node: its sequence, then the encoder's outputs 1 and 2 */
    assert_non_null(strstr(json, "[[[\"dec_in\",0,0,{}],[\"encoder\",0,1,{}],[\"encoder\",0,2,{}]]]"));
    assert_non_null(strstr(json, "\"return_state\":true"));
    tnt_model *r = tnt_model_from_json(json);
    assert_non_null(r);
    int64_t n = tnt_model_count_params(m);
    assert_int_equal(tnt_model_count_params(r), n);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m, w, n));
    tu_ok(tnt_set_weights(r, w, n));
    tnt_tensor *a = predict(m), *b = predict(r);
    assert_int_equal(tnt_shape_numel(a->shape), N * T2 * V);
    tu_assert_close(b->data, a->data, N * T2 * V, 0, 0, "seq2seq read back from its JSON");
    char *json2 = NULL;
    tu_ok(tnt_model_to_json(r, &json2));
    assert_string_equal(json, json2);
    /* the decoder depends on the encoder's states: other encoder inputs, other predictions */
    for (int i = 0; i < N; i++) xin[i * (T1 * F1 + T2 * F2)] += 1.0f;
    tnt_tensor *c = predict(m);
    bool differs = false;
    for (int64_t i = 0; i < N * T2 * V; i++) differs |= c->data[i] != a->data[i];
    assert_true(differs);
    tnt_tensor_free(a), tnt_tensor_free(b), tnt_tensor_free(c);
    free(json), free(json2), free(w);
    tnt_model_free(m), tnt_model_free(r);
}

/* Whole-model files: Keras 2 .h5 and Keras 3 .keras keep the graph (states and initial states),
 * the weights and the compile settings; the loaded models predict alike. */
static void test_save_and_load(void **state) {
    (void)state;
    tu_fill(xin, N * (T1 * F1 + T2 * F2), 9);
    tnt_model *m = seq2seq();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_adam(1e-3f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 2}));
    tnt_tensor *a = predict(m);
    const char *paths[2] = {"/tmp/tnt_test_seq2seq.h5", "/tmp/tnt_test_seq2seq.keras"};
    for (int k = 0; k < 2; k++) {
        tu_ok(tnt_save_model(m, paths[k], NULL));
        tnt_model *r = tnt_load_model(paths[k], true);
        if (!r) fail_msg("load_model %s: %s", paths[k], tnt_last_error());
        assert_int_equal(tnt_model_get_layer(r, "decoder")->n_inputs, 3);
        assert_int_equal(tnt_model_get_layer(r, "encoder")->n_outputs, 3);
        tnt_tensor *b = predict(r);
        tu_assert_close(b->data, a->data, N * T2 * V, 0, 0, paths[k]);
        tnt_tensor_free(b);
        tnt_model_free(r);
        remove(paths[k]);
    }
    tnt_tensor_free(a);
    tnt_model_free(m);
}

/* One training step moves the encoder's weights: its only path to the loss is through h and c. */
static void test_gradients_reach_the_encoder(void **state) {
    (void)state;
    tu_fill(xin, N * (T1 * F1 + T2 * F2), 5);
    float ys[N * T2 * V];
    for (int i = 0; i < N * T2 * V; i++) ys[i] = (float)(i % V == i / V % V);
    tnt_model *m = seq2seq();
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.5f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 4}));
    tnt_layer *enc = tnt_model_get_layer(m, "encoder");
    assert_non_null(enc);
    int64_t k = tnt_shape_numel(enc->weights[0].shape);
    float *before = malloc((size_t)k * sizeof(float));
    memcpy(before, enc->weights[0].value, (size_t)k * sizeof(float));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(xin, TNT_SHAPE(T1 * F1 + T2 * F2), ys, TNT_SHAPE(T2, V), N,
                                                                false), N, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    double moved = 0;
    for (int64_t i = 0; i < k; i++) moved += fabs(enc->weights[0].value[i] - before[i]);
    assert_true(moved > 1e-6);
    free(before);
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

/* Keras 3 writes initial_state as a call keyword holding the tensors. */
static void test_keras3_initial_state(void **state) {
    (void)state;
    static const char *json =
        "{\"class_name\": \"Functional\", \"config\": {\"name\": \"k3\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"a\", \"config\": {\"batch_shape\": [null, 4, 3], \"name\": \"a\"},"
        " \"inbound_nodes\": []},"
        "{\"class_name\": \"InputLayer\", \"name\": \"b\", \"config\": {\"batch_shape\": [null, 3, 2], \"name\": \"b\"},"
        " \"inbound_nodes\": []},"
        "{\"class_name\": \"GRU\", \"name\": \"enc\", \"config\": {\"name\": \"enc\", \"units\": 4, \"return_state\": true,"
        " \"reset_after\": true}, \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": "
        "{\"shape\": [null, 4, 3], \"keras_history\": [\"a\", 0, 0]}}], \"kwargs\": {\"training\": false}}]},"
        "{\"class_name\": \"GRU\", \"name\": \"dec\", \"config\": {\"name\": \"dec\", \"units\": 4, \"reset_after\": true},"
        " \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 3, 2],"
        " \"keras_history\": [\"b\", 0, 0]}}], \"kwargs\": {\"initial_state\": [{\"class_name\": \"__keras_tensor__\","
        " \"config\": {\"shape\": [null, 4], \"keras_history\": [\"enc\", 0, 1]}}], \"training\": false}}]}],"
        " \"input_layers\": [[\"a\", 0, 0], [\"b\", 0, 0]], \"output_layers\": [[\"dec\", 0, 0], [\"enc\", 0, 1]]}}";
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_int_equal(tnt_model_num_outputs(m), 2);
    assert_string_equal(tnt_model_io_name(m, true, 1), "enc");
    tnt_layer *dec = tnt_model_get_layer(m, "dec");
    assert_int_equal(dec->n_inputs, 2); /* the sequence and h0 */
    char *out = NULL;
    tu_ok(tnt_model_to_json(m, &out));
    assert_non_null(strstr(out, "[\"enc\",0,1,{}]]]"));
    assert_non_null(strstr(out, "\"output_layers\":[[\"dec\",0,0],[\"enc\",0,1]]"));
    free(out);
    tnt_model_free(m);
}

/* Bidirectional merge_mode None: the two outputs, concatenated by a Concatenate layer, equal
 * merge_mode concat; its states (return_state) feed another layer. */
static void test_bidirectional_none(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T1, F1), NULL), o[6];
    tnt_layer *none = tnt_bidirectional(tnt_lstm(U, &(tnt_rnn_opts){.return_state = true}), NULL, TNT_MERGE_NONE, "bi");
    assert_int_equal(tnt_call_outputs(g, none, 1, &in, 6, o), 6);
    tnt_ktensor cat = tnt_call2(g, tnt_concatenate(-1, NULL), o[0], o[1]);
    tnt_ktensor hs = tnt_call2(g, tnt_concatenate(-1, NULL), o[2], o[4]); /* forward h, backward h */
    tnt_model *m = tnt_functional(g, 1, &in, 2, (tnt_ktensor[]){cat, hs}, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    g = tnt_graph_new();
    in = tnt_graph_input(g, TNT_SHAPE(T1, F1), NULL);
    tnt_ktensor y = tnt_call(g, tnt_bidirectional(tnt_lstm(U, NULL), NULL, TNT_MERGE_CONCAT, "bi"), in);
    tnt_model *c = tnt_functional(g, 1, &in, 1, &y, NULL);
    tnt_graph_free(g);
    int64_t n = tnt_model_count_params(c);
    assert_int_equal(tnt_model_count_params(m), n);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(c, w, n));
    tu_ok(tnt_set_weights(m, w, n));
    float x[N * T1 * F1];
    tu_fill(x, N * T1 * F1, 8);
    tnt_tensor *a, *b;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(N, T1, F1), x}, &a));
    tu_ok(tnt_predict_on_batch(c, &(tnt_tensor){TNT_SHAPE(N, T1, F1), x}, &b));
    for (int i = 0; i < N; i++) { /* without return_sequences the output is the last h of each direction */
        tu_assert_close(a->data + i * 4 * U, b->data + i * 2 * U, 2 * U, 0, 0, "merge_mode None, concatenated");
        tu_assert_close(a->data + i * 4 * U + 2 * U, b->data + i * 2 * U, 2 * U, 0, 0, "the states are the outputs");
    }
    char *json;
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"merge_mode\":null"));
    assert_non_null(strstr(json, "[[[\"bi\",0,2,{}],[\"bi\",0,4,{}]]]"));
    tnt_model *r = tnt_model_from_json(json);
    assert_non_null(r);
    tnt_model_free(r);
    free(json), free(w);
    tnt_tensor_free(a), tnt_tensor_free(b);
    tnt_model_free(m), tnt_model_free(c);
}

/* A sequence mask reaches both outputs of Bidirectional(return_sequences, merge_mode None), not its
 * states: masked means of the two outputs equal the halves of the masked mean of concat. */
static void test_bidirectional_none_mask(void **state) {
    (void)state;
    tnt_model *ms[2];
    for (int k = 0; k < 2; k++) {
        tnt_graph *g = tnt_graph_new();
        tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T1, F1), NULL), o[4], y[2];
        tnt_ktensor x = tnt_call(g, tnt_masking(0.0f, NULL), in);
        tnt_rnn_opts ro = {.return_sequences = true, .return_state = k == 0};
        tnt_layer *b = tnt_bidirectional(tnt_gru(U, &ro), NULL, k ? TNT_MERGE_CONCAT : TNT_MERGE_NONE, "bi");
        int n = tnt_call_outputs(g, b, 1, &x, 4, o);
        assert_int_equal(n, k ? 1 : 4);
        for (int j = 0; j < (k ? 1 : 2); j++) y[j] = tnt_call(g, tnt_global_average_pooling1d(NULL), o[j]);
        ms[k] = tnt_functional(g, 1, &in, k ? 1 : 2, y, NULL);
        tnt_graph_free(g);
        assert_non_null(ms[k]);
    }
    int64_t n = tnt_model_count_params(ms[1]);
    float *w = malloc((size_t)n * sizeof(float)), x[N * T1 * F1];
    tu_ok(tnt_get_weights(ms[1], w, n));
    tu_ok(tnt_set_weights(ms[0], w, n));
    tu_fill(x, N * T1 * F1, 4);
    for (int i = 0; i < N; i++) /* pre-padding: i masked leading steps */
        memset(x + i * T1 * F1, 0, (size_t)(i % T1) * F1 * sizeof(float));
    tnt_tensor *a, *c;
    tu_ok(tnt_predict_on_batch(ms[0], &(tnt_tensor){TNT_SHAPE(N, T1, F1), x}, &a));
    tu_ok(tnt_predict_on_batch(ms[1], &(tnt_tensor){TNT_SHAPE(N, T1, F1), x}, &c));
    tu_assert_close(a->data, c->data, N * 2 * U, 1e-6, 1e-7, "masked means of merge_mode None and concat");
    tnt_tensor_free(a), tnt_tensor_free(c);
    free(w);
    tnt_model_free(ms[0]), tnt_model_free(ms[1]);
}

static void test_real_keras_seq2seq_architecture(void **state) {
    (void)state;
    FILE *f = fopen("fixtures/keras_real/seq2seq_5549.json", "rb");
    assert_non_null(f);
    char json[8192] = {0};
    assert_true(fread(json, 1, sizeof json - 1, f) > 0);
    fclose(f);
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    assert_int_equal(tnt_model_num_inputs(m), 2);
    tnt_layer *bi = tnt_model_get_layer(m, "bidirectional_1"), *dec = tnt_model_get_layer(m, "lstm_2");
    assert_int_equal(bi->n_outputs, 5);
    assert_int_equal(dec->n_inputs, 3);
    assert_int_equal(dec->n_outputs, 3);
    tnt_shape s = tnt_model_output_shape_at(m, 0);
    assert_int_equal(s.ndim, 2);
    assert_int_equal(s.dim[1], 4);
    /* the file has no weights: every weight from gen_keras_real_seq2seq.py's integer formula, and
     * the predictions of its independent PyTorch rebuild */
    static const char *const names[] = {
        "embedding_1/embeddings:0", "bidirectional_1/forward_lstm_1/kernel:0",
        "bidirectional_1/forward_lstm_1/recurrent_kernel:0", "bidirectional_1/forward_lstm_1/bias:0",
        "bidirectional_1/backward_lstm_1/kernel:0", "bidirectional_1/backward_lstm_1/recurrent_kernel:0",
        "bidirectional_1/backward_lstm_1/bias:0", "lstm_2/kernel:0", "lstm_2/recurrent_kernel:0", "lstm_2/bias:0",
        "dense_1/kernel:0", "dense_1/bias:0"};
    assert_int_equal(tnt_model_num_weights(m), 12);
    for (int j = 0; j < 12; j++) {
        const char *name;
        tnt_shape ws;
        float *data;
        tu_ok(tnt_model_weight(m, j, &name, &ws, &data));
        assert_string_equal(name, names[j]);
        for (int64_t i = 0; i < tnt_shape_numel(ws); i++)
            data[i] = (float)((int64_t)(((uint64_t)i * 2654435761ull + (uint64_t)j * 40503ull) % 2001ull) - 1000) * 1e-4f;
    }
    tnt_shape s0, s1;
    float *x0 = tu_load("keras_real/seq2seq_5549_x0", &s0), *x1 = tu_load("keras_real/seq2seq_5549_x1", &s1);
    float *ref = tu_load("keras_real/seq2seq_5549_y", NULL);
    const int64_t B = s0.dim[0], TE = s0.dim[1], TD = s1.dim[1], F = s1.dim[2];
    tu_ok(tnt_model_set_input_shapes(m, 2, (tnt_shape[]){TNT_SHAPE(TE), TNT_SHAPE(TD, F)}));
    float *x = malloc((size_t)(B * (TE + TD * F)) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        memcpy(x + b * (TE + TD * F), x0 + b * TE, (size_t)TE * sizeof(float));
        memcpy(x + b * (TE + TD * F) + TE, x1 + b * TD * F, (size_t)(TD * F) * sizeof(float));
    }
    tnt_tensor *y;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(B, TE + TD * F), x}, &y));
    assert_int_equal(tnt_shape_numel(y->shape), B * TD * 4);
    tu_assert_close(y->data, ref, B * TD * 4, 1e-5, 1e-6, "seq2seq_5549 against its PyTorch rebuild");
    tnt_tensor_free(y);
    free(x), free(x0), free(x1), free(ref);
    tnt_model_free(m);
}

/* A real trained Keras file: the inference decoder of Keras's character seq2seq recipe (tf.keras
 * 2.12, keras_real/duolingo_decoder_model.h5): inputs (steps, 28), h0, c0 -> LSTM(256,
 * initial_state, return_state) -> outputs Dense softmax, h, c; against its PyTorch rebuild
 * (gen_keras_real_seq2seq.py: torch.nn.LSTM with the file's weights read by h5py). */
static void test_real_keras_decoder(void **state) {
    (void)state;
    tnt_model *m = tnt_load_model("fixtures/keras_real/duolingo_decoder_model.h5", false);
    if (!m) fail_msg("load_model: %s", tnt_last_error());
    assert_int_equal(tnt_model_num_inputs(m), 3);
    assert_int_equal(tnt_model_num_outputs(m), 3);
    assert_string_equal(tnt_model_io_name(m, true, 1), "lstm_1");
    tnt_shape s[3];
    float *x[3], *ref[3];
    char f[96];
    for (int k = 0; k < 3; k++) {
        snprintf(f, sizeof f, "keras_real/duolingo_decoder_x%d", k);
        x[k] = tu_load(f, &s[k]);
        snprintf(f, sizeof f, "keras_real/duolingo_decoder_y%d", k);
        ref[k] = tu_load(f, NULL);
    }
    const int64_t B = s[0].dim[0], T = s[0].dim[1], F = s[0].dim[2], H = s[1].dim[1];
    tu_ok(tnt_model_set_input_shapes(m, 3, (tnt_shape[]){TNT_SHAPE(T, F), TNT_SHAPE(H), TNT_SHAPE(H)}));
    const int64_t row = T * F + 2 * H, out_row = T * F + 2 * H; /* Dense(28) per step: F = 28 too */
    float *packed = malloc((size_t)(B * row) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        memcpy(packed + b * row, x[0] + b * T * F, (size_t)(T * F) * sizeof(float));
        memcpy(packed + b * row + T * F, x[1] + b * H, (size_t)H * sizeof(float));
        memcpy(packed + b * row + T * F + H, x[2] + b * H, (size_t)H * sizeof(float));
    }
    tnt_tensor *y;
    tu_ok(tnt_predict_on_batch(m, &(tnt_tensor){TNT_SHAPE(B, row), packed}, &y));
    assert_int_equal(tnt_shape_numel(y->shape), B * out_row); /* outputs packed per sample */
    const int64_t sizes[3] = {T * F, H, H};
    const char *what[3] = {"dense (softmax per step)", "h", "c"};
    for (int k = 0, col = 0; k < 3; col += (int)sizes[k], k++)
        for (int64_t b = 0; b < B; b++)
            tu_assert_close(y->data + b * out_row + col, ref[k] + b * sizes[k], sizes[k], 1e-5, 1e-6, what[k]);
    tnt_tensor_free(y);
    /* Keras's output names: the layer's second output is "lstm_1_1"; the states take their loss
     * gradients too (one step of training on all three outputs moves the LSTM) */
    assert_string_equal(tnt__model_output_name(m, 1), "lstm_1");
    assert_string_equal(tnt__model_output_name(m, 2), "lstm_1_1");
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.1f), .loss = TNT_MEAN_SQUARED_ERROR,
                                             .loss_weights = (float[]){0, 1, 1}, .n_loss_weights = 3}));
    float *target = calloc((size_t)(B * out_row), sizeof(float));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(packed, TNT_SHAPE(row), target, TNT_SHAPE(out_row), B,
                                                                false), B, false);
    tnt_layer *lstm = tnt_model_get_layer(m, "lstm_1");
    float before = lstm->weights[1].value[5], dense_before = tnt_model_get_layer(m, "dense")->weights[0].value[3];
    tnt_history *h;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, &h));
    assert_true(isfinite(tnt_history_get(h, "lstm_1_1_loss", 0)));
    assert_true(lstm->weights[1].value[5] != before);
    assert_true(tnt_model_get_layer(m, "dense")->weights[0].value[3] == dense_before); /* loss weight 0 */
    tnt_history_free(h);
    tnt_dataset_free(ds);
    free(target);
    free(packed);
    for (int k = 0; k < 3; k++) free(x[k]), free(ref[k]);
    tnt_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor x = tnt_graph_input(g, TNT_SHAPE(T1, F1), NULL), h = tnt_graph_input(g, TNT_SHAPE(U + 1), NULL);
    tnt_ktensor o[3];
    assert_int_equal(tnt_call_outputs(g, tnt_gru(U, NULL), 2, (tnt_ktensor[]){x, h}, 3, o), -1);
    tu_error_contains("initial state 0 has shape (5,)");
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(U, NULL), 2, (tnt_ktensor[]){x, x}, 3, o), -1);
    tu_error_contains("2 initial states");
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(U, NULL), 1, &x, 0, o), -1);
    tu_error_contains("cap 0");
    tnt_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_gradients_reach_the_encoder),
        cmocka_unit_test(test_save_and_load),
        cmocka_unit_test(test_keras3_initial_state),
        cmocka_unit_test(test_bidirectional_none),
        cmocka_unit_test(test_bidirectional_none_mask),
        cmocka_unit_test(test_real_keras_seq2seq_architecture),
        cmocka_unit_test(test_real_keras_decoder),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
