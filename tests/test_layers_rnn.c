/* test_layers_rnn.c: LSTM, GRU, SimpleRNN, CuDNNLSTM and CuDNNGRU through the layer contract:
 * outputs, dx and weight gradients against PyTorch's nn.LSTM/GRU/RNN and a port of the Keras
 * formulas (tests/fixtures/gen_layers_rnn.py: masks, go_backwards, hard_sigmoid, GRU
 * reset_after=False, zero_output_for_mask), finite differences (dropout included), dropout masks
 * that do not depend on the split of the batch, masks through a graph, and argument errors. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

/* ---- fixtures ----------------------------------------------------------------------------- */

/* Runs fixture case rnn_NAME on layer l (consumed): forward, backward with and without dx. */
static void rnn_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs, ms;
    snprintf(f, sizeof f, "rnn_%s_x", name);
    float *x = tu_load(f, &xs);
    snprintf(f, sizeof f, "rnn_%s_mask", name);
    float *mask = fixture_exists(f) ? tu_load(f, &ms) : NULL;
    const int64_t B = xs.dim[0], T = xs.dim[1];
    tnt_shape in[2] = {TNT_SHAPE(xs.dim[1], xs.dim[2]), TNT_SHAPE(T)};
    int n_in = mask ? 2 : 1;
    l->mask_input = mask != NULL;
    tnt_shape out;
    tu_ok(l->ops->build_multi(l, n_in, in, &out));
    l->in_shape = in[0];
    l->out_shape = out;
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)n, sizeof(float));
        l->weights[i].grad = calloc((size_t)n, sizeof(float));
        snprintf(f, sizeof f, "rnn_%s_w%d", name, i);
        load_into(l->weights[i].value, f, n);
    }
    int64_t ny = B * tnt_shape_numel(out), nx = B * tnt_shape_numel(in[0]);
    float *y = calloc((size_t)ny, sizeof(float)), *dy = calloc((size_t)ny, sizeof(float));
    float *dx = calloc((size_t)nx, sizeof(float)), *dmask = calloc((size_t)(B * T), sizeof(float));
    void *ws = calloc(1, l->ops->workspace_size(l, NULL, B));
    snprintf(f, sizeof f, "rnn_%s_w%d", name, l->n_weights);
    assert_false(fixture_exists(f)); /* every weight of the fixture was used */
    snprintf(f, sizeof f, "rnn_%s_dy", name);
    load_into(dy, f, ny);
    const float *xsp[2] = {x, mask};
    tnt__fwd_args fa = {.batch = B, .x = x, .y = y, .n_inputs = n_in, .xs = xsp, .workspace = ws, .training = true};
    tu_ok(l->ops->forward(l, NULL, &fa));
    snprintf(f, sizeof f, "rnn_%s_y", name);
    check(y, f, ny, "y");

    for (int pass = 0; pass < 2; pass++) { /* with dx, then without (backward consumes the workspace) */
        tu_ok(l->ops->forward(l, NULL, &fa));
        poison_grads(l);
        for (int64_t i = 0; i < nx; i++) dx[i] = 7.0f;
        for (int64_t i = 0; i < B * T; i++) dmask[i] = 5.0f;
        float *dxs[2] = {pass ? NULL : dx, dmask};
        tnt__bwd_args ba = {.batch = B, .x = x, .y = y, .dy = dy, .dx = dxs[0], .workspace = ws,
                            .n_inputs = n_in, .xs = xsp, .dxs = dxs};
        tu_ok(l->ops->backward(l, NULL, &ba));
        snprintf(f, sizeof f, "rnn_%s_dx", name);
        if (pass == 0) check(dx, f, nx, "dx");
        else
            for (int64_t i = 0; i < nx; i++) assert_true(dx[i] == 7.0f);
        for (int i = 0; i < l->n_weights; i++) {
            snprintf(f, sizeof f, "rnn_%s_dw%d", name, i);
            check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), l->weights[i].name);
        }
        if (mask)
            for (int64_t i = 0; i < B * T; i++) assert_true(dmask[i] == 0.0f);
    }
    for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
    tnt_layer_free(l);
    free(x), free(mask), free(y), free(dy), free(dx), free(dmask), free(ws);
}

static void test_lstm_fixtures(void **state) {
    (void)state;
    rnn_case("lstm_last", tnt_lstm(3, NULL));
    rnn_case("lstm_seq", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("lstm_nobias", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true, .no_bias = true}));
    rnn_case("lstm_big", tnt_lstm(17, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("cudnn_lstm", tnt_cudnn_lstm(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("lstm_hard", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true, .recurrent_activation = "hard_sigmoid"}));
    rnn_case("lstm_back", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true}));
}

static void test_gru_fixtures(void **state) {
    (void)state;
    rnn_case("gru_after", tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("gru_after_last", tnt_gru(7, NULL));
    rnn_case("cudnn_gru", tnt_cudnn_gru(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("gru_before", tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true, .reset_before = true}));
    rnn_case("gru_before_big", tnt_gru(9, &(tnt_rnn_opts){.reset_before = true}));
    rnn_case("gru_hard_v3", tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true, .activation = "relu",
                                                        .recurrent_activation = "hard_sigmoid_v3"}));
    rnn_case("gru_back_last", tnt_gru(3, &(tnt_rnn_opts){.go_backwards = true, .reset_before = true}));
}

static void test_simple_rnn_fixtures(void **state) {
    (void)state;
    rnn_case("rnn_tanh", tnt_simple_rnn(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("rnn_relu_last", tnt_simple_rnn(3, &(tnt_rnn_opts){.activation = "relu"}));
}

static void test_mask_fixtures(void **state) {
    (void)state;
    rnn_case("lstm_mask", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true}));
    rnn_case("lstm_mask_last", tnt_lstm(3, NULL));
    rnn_case("gru_mask_back", tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true}));
    rnn_case("gru_before_mask", tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true, .reset_before = true}));
    rnn_case("rnn_mask_zero", tnt_simple_rnn(3, &(tnt_rnn_opts){.return_sequences = true, .zero_output_for_mask = true}));
    rnn_case("lstm_mask_zero_back", tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true,
                                                                 .zero_output_for_mask = true}));
}

/* ---- wrappers ------------------------------------------------------------------------------ */

static tnt_layer *bidi(tnt_layer *inner, tnt_merge_mode mode) { return tnt_bidirectional(inner, NULL, mode, NULL); }

static void test_bidirectional_fixtures(void **state) {
    (void)state;
    tnt_rnn_opts seq = {.return_sequences = true};
    rnn_case("bidi_lstm_concat", bidi(tnt_lstm(3, &seq), TNT_MERGE_CONCAT));
    rnn_case("bidi_lstm_sum", bidi(tnt_lstm(3, &seq), TNT_MERGE_SUM));
    rnn_case("bidi_gru_mul", bidi(tnt_gru(3, NULL), TNT_MERGE_MUL));
    rnn_case("bidi_rnn_ave", bidi(tnt_simple_rnn(3, &seq), TNT_MERGE_AVE));
    rnn_case("bidi_lstm_mask", bidi(tnt_lstm(3, &seq), TNT_MERGE_CONCAT));
    rnn_case("bidi_gru_mask_last", bidi(tnt_gru(3, NULL), TNT_MERGE_SUM));
    tnt_layer *back = tnt_simple_rnn(3, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true, .activation = "relu"});
    tnt_layer *l = tnt_bidirectional(tnt_simple_rnn(3, &seq), back, TNT_MERGE_CONCAT, "bi");
    assert_string_equal(tnt_layer_name(back), "backward_simple_rnn");
    rnn_case("bidi_rnn_backward_layer", l);
}

static void test_bidirectional_weights_and_errors(void **state) {
    (void)state;
    tnt_layer *l = tnt_bidirectional(tnt_lstm(4, &(tnt_rnn_opts){.name = "lstm_1"}), NULL, TNT_MERGE_CONCAT, NULL);
    tnt_shape out;
    tu_ok(l->ops->build(l, TNT_SHAPE(5, 3), &out));
    assert_int_equal(out.ndim, 1);
    assert_int_equal(out.dim[0], 8);
    assert_int_equal(l->n_weights, 6);
    assert_string_equal(l->weights[0].name, "forward_lstm_1/kernel");
    assert_string_equal(l->weights[5].name, "backward_lstm_1/bias");
    tnt_layer_free(l);
    assert_null(tnt_bidirectional(tnt_dense(3, NULL), NULL, TNT_MERGE_SUM, NULL));
    tu_error_contains("must be recurrent");
    assert_null(tnt_bidirectional(tnt_lstm(3, &(tnt_rnn_opts){.return_state = true}),
                                  tnt_lstm(3, &(tnt_rnn_opts){.go_backwards = true}), TNT_MERGE_NONE, NULL));
    tu_error_contains("return_state");
    assert_null(tnt_bidirectional(tnt_lstm(3, NULL), tnt_lstm(3, NULL), TNT_MERGE_SUM, NULL));
    tu_error_contains("go_backwards");
    assert_null(tnt_bidirectional(tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true}),
                                  tnt_lstm(3, &(tnt_rnn_opts){.go_backwards = true}), TNT_MERGE_SUM, NULL));
    tu_error_contains("return_sequences");
}

static void test_time_distributed(void **state) {
    (void)state;
    run_case("td_dense", tnt_time_distributed(tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), NULL));
    run_case("td_conv2d", tnt_time_distributed(tnt_conv2d(4, 3, 3, NULL), NULL));
    fd_check(tnt_time_distributed(tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), NULL), TNT_SHAPE(4, 2), 2);
    /* Flatten inside: the model never runs a view layer, the wrapper copies */
    tnt_layer *l = tnt_time_distributed(tnt_flatten(NULL), NULL);
    float x[2 * 3 * 4], y[2 * 3 * 4], dy[2 * 3 * 4], dx[2 * 3 * 4];
    tu_fill(x, 24, 1);
    tu_fill(dy, 24, 2);
    run_layer(l, TNT_SHAPE(3, 2, 2), 2, x, y, dy, dx, true);
    assert_int_equal(l->out_shape.ndim, 2);
    assert_int_equal(l->out_shape.dim[1], 4);
    assert_memory_equal(y, x, sizeof x);
    assert_memory_equal(dx, dy, sizeof dy);
    tnt_layer_free(l);
    assert_null(tnt_time_distributed(NULL, NULL));
    tu_error_contains("NULL");
    l = tnt_time_distributed(tnt_dense(2, NULL), NULL);
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4), &out), TNT_ERR_SHAPE);
    tu_error_contains("rank >= 2");
    tnt_layer_free(l);
}

/* ---- finite differences ------------------------------------------------------------------- */

static void test_finite_differences(void **state) {
    (void)state;
    tnt_shape in = TNT_SHAPE(4, 3);
    fd_check(tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true}), in, 2);
    fd_check(tnt_gru(3, &(tnt_rnn_opts){.go_backwards = true}), in, 2);
    fd_check(tnt_gru(3, &(tnt_rnn_opts){.return_sequences = true, .reset_before = true}), in, 2);
    fd_check(tnt_simple_rnn(4, &(tnt_rnn_opts){.return_sequences = true}), in, 2);
    fd_check(tnt_cudnn_lstm(2, NULL), in, 2);
    /* the dropout masks are fixed by the step's seed, so the loss stays a smooth function */
    fd_check(tnt_lstm(3, &(tnt_rnn_opts){.return_sequences = true, .dropout = 0.3f, .recurrent_dropout = 0.4f}), in, 3);
    fd_check(tnt_gru(3, &(tnt_rnn_opts){.reset_before = true, .dropout = 0.3f, .recurrent_dropout = 0.4f}), in, 3);
    fd_check(tnt_gru(3, &(tnt_rnn_opts){.dropout = 0.2f, .recurrent_dropout = 0.5f}), in, 3);
    fd_check(tnt_bidirectional(tnt_lstm(2, &(tnt_rnn_opts){.return_sequences = true}), NULL, TNT_MERGE_MUL, NULL), in, 2);
}

/* ---- dropout ------------------------------------------------------------------------------ */

/* Forward of a 4-sample batch equals forward of its two halves given their sample offsets (the
 * masks follow the global sample index), dropout changes the training output, and inference
 * ignores it. */
static void test_dropout_split_invariant(void **state) {
    (void)state;
    const int64_t B = 4, T = 6, I = 5, U = 4;
    tnt_rnn_opts o = {.return_sequences = true, .dropout = 0.4f, .recurrent_dropout = 0.3f};
    drv d;
    tnt_layer *l = tnt_gru(U, &o);
    l->seed = 99;
    drv_init(&d, l, TNT_SHAPE(T, I), B);
    tu_fill(d.x, in_numel(&d), 3);
    int64_t ny = out_numel(&d), per = ny / B;
    float *full = malloc((size_t)ny * sizeof(float)), *halves = malloc((size_t)ny * sizeof(float));
    float *plain = malloc((size_t)ny * sizeof(float));
    tnt__fwd_args a = {.batch = B, .x = d.x, .y = full, .workspace = d.ws, .training = true, .seed = 5};
    tu_ok(l->ops->forward(l, d.plan, &a));
    for (int h = 0; h < 2; h++) {
        tnt__fwd_args ah = {.batch = 2, .x = d.x + h * 2 * T * I, .y = halves + h * 2 * per, .workspace = d.ws,
                            .training = true, .seed = 5, .sample_offset = 2 * h};
        tu_ok(l->ops->forward(l, d.plan, &ah));
    }
    /* The masks are what must not depend on the split: a different mask moves outputs by ~1e-1.
     * The GEMM's blocking depends on the batch size on some ISAs (AVX2: 3.7e-9 apart), so equal
     * within 1e-6, not bit for bit. */
    tu_assert_close(halves, full, ny, 0, 1e-6, "split forward");
    tnt__fwd_args ai = {.batch = B, .x = d.x, .y = plain, .workspace = d.ws, .training = false, .seed = 5};
    tu_ok(l->ops->forward(l, d.plan, &ai));
    double diff = 0;
    for (int64_t i = 0; i < ny; i++) diff += fabs(plain[i] - full[i]);
    assert_true(diff > 1e-3); /* training dropped something */
    /* inference equals the same layer without dropout */
    tnt_layer *l2 = tnt_gru(U, &(tnt_rnn_opts){.return_sequences = true});
    drv d2;
    drv_init(&d2, l2, TNT_SHAPE(T, I), B);
    for (int i = 0; i < l->n_weights; i++)
        memcpy(l2->weights[i].value, l->weights[i].value, (size_t)tnt_shape_numel(l->weights[i].shape) * sizeof(float));
    memcpy(d2.x, d.x, (size_t)in_numel(&d) * sizeof(float));
    drv_forward(&d2, false);
    tu_assert_close(plain, d2.y, ny, 0, 0, "inference ignores dropout");
    free(full), free(halves), free(plain);
    drv_free(&d, true);
    drv_free(&d2, true);
}

/* ---- masks through a model ---------------------------------------------------------------- */

/* Embedding(mask_zero) -> LSTM in a graph: a sequence pre-padded with id 0 gives the output of the
 * same sequence unpadded (the LSTM skips the padding). */
static void test_mask_through_graph(void **state) {
    (void)state;
    tnt_model *m[2];
    const int T[2] = {7, 4};
    for (int k = 0; k < 2; k++) {
        tnt_graph *g = tnt_graph_new();
        tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(T[k]), NULL);
        tnt_ktensor e = tnt_call(g, tnt_embedding(10, 3, true, NULL), in);
        tnt_ktensor h = tnt_call(g, tnt_lstm(5, NULL), e);
        m[k] = tnt_functional(g, 1, &in, 1, &h, NULL);
        assert_non_null(m[k]);
        tnt_graph_free(g);
    }
    int64_t n = tnt_model_count_params(m[0]);
    float *w = malloc((size_t)n * sizeof(float));
    tu_ok(tnt_get_weights(m[0], w, n));
    tu_ok(tnt_set_weights(m[1], w, n));
    free(w);
    float padded[7] = {0, 0, 0, 3, 1, 4, 1}, plain[4] = {3, 1, 4, 1};
    tnt_tensor xp = {.shape = TNT_SHAPE(1, 7), .data = padded}, xq = {.shape = TNT_SHAPE(1, 4), .data = plain};
    tnt_tensor *yp = NULL, *yq = NULL;
    tu_ok(tnt_predict_on_batch(m[0], &xp, &yp));
    tu_ok(tnt_predict_on_batch(m[1], &xq, &yq));
    tu_assert_close(yp->data, yq->data, 5, 1e-6, 1e-7, "padded == unpadded");
    tnt_tensor_free(yp);
    tnt_tensor_free(yq);
    tnt_model_free(m[0]);
    tnt_model_free(m[1]);
}

/* ---- Keras config ------------------------------------------------------------------------- */

/* Every recurrent class and wrapper through to_json and back: the same JSON, the same predictions. */
static void test_json_round_trip(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("rnns");
    tu_ok(tnt_model_add(m, tnt_input_layer(TNT_SHAPE(6, 3), NULL)));
    tu_ok(tnt_model_add(m, tnt_lstm(4, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true, .dropout = 0.25f,
                                                      .recurrent_activation = "hard_sigmoid"})));
    tu_ok(tnt_model_add(m, tnt_gru(5, &(tnt_rnn_opts){.return_sequences = true, .reset_before = true,
                                                     .recurrent_dropout = 0.5f, .no_bias = true})));
    tu_ok(tnt_model_add(m, tnt_cudnn_gru(3, &(tnt_rnn_opts){.return_sequences = true})));
    tu_ok(tnt_model_add(m, tnt_time_distributed(tnt_dense(4, &(tnt_layer_opts){.activation = TNT_ACT_TANH}), NULL)));
    tu_ok(tnt_model_add(m, tnt_bidirectional(tnt_simple_rnn(2, &(tnt_rnn_opts){.activation = "relu"}), NULL,
                                             TNT_MERGE_AVE, NULL)));
    char *json = NULL, *again = NULL;
    tu_ok(tnt_model_to_json(m, &json));
    assert_non_null(strstr(json, "\"reset_after\":false"));
    assert_non_null(strstr(json, "\"merge_mode\":\"ave\""));
    assert_non_null(strstr(json, "\"class_name\":\"Orthogonal\""));
    tnt_model *r = tnt_model_from_json(json);
    if (!r) fail_msg("from_json: %s", tnt_last_error());
    tu_ok(tnt_model_to_json(r, &again));
    assert_string_equal(again, json);
    int64_t n = tnt_model_count_params(m);
    assert_int_equal(tnt_model_count_params(r), n);
    float *w = malloc((size_t)n * sizeof(float)), x[2 * 6 * 3];
    tu_ok(tnt_get_weights(m, w, n));
    tu_ok(tnt_set_weights(r, w, n));
    tu_fill(x, 2 * 6 * 3, 4);
    tnt_tensor in = {.shape = TNT_SHAPE(2, 6, 3), .data = x}, *ya = NULL, *yb = NULL;
    tu_ok(tnt_predict_on_batch(m, &in, &ya));
    tu_ok(tnt_predict_on_batch(r, &in, &yb));
    tu_assert_close(yb->data, ya->data, tnt_shape_numel(ya->shape), 0, 0, "predictions after the round trip");
    tnt_tensor_free(ya), tnt_tensor_free(yb);
    free(w), free(json), free(again);
    tnt_model_free(m), tnt_model_free(r);
}

/* A Keras 2 Sequential file whose Embedding has mask_zero: loaded as a graph (masks reach the LSTM)
 * that is still written as Sequential; where the padding lies changes nothing. */
static void test_keras_sequential_with_mask(void **state) {
    (void)state;
    const char *json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
        "{\"class_name\": \"Embedding\", \"config\": {\"name\": \"e\", \"batch_input_shape\": [null, 6], "
        "\"input_dim\": 9, \"output_dim\": 3, \"mask_zero\": true}},"
        "{\"class_name\": \"LSTM\", \"config\": {\"name\": \"l\", \"units\": 4, \"recurrent_activation\": "
        "\"hard_sigmoid\", \"implementation\": 1}}]}, \"keras_version\": \"2.2.4\"}";
    tnt_model *m = tnt_model_from_json(json);
    if (!m) fail_msg("from_json: %s", tnt_last_error());
    char *out = NULL;
    tu_ok(tnt_model_to_json(m, &out));
    assert_non_null(strstr(out, "\"class_name\":\"Sequential\""));
    free(out);
    float x[2 * 6] = {0, 0, 0, 5, 2, 7, /* */ 3, 3, 5, 2, 7, 1};
    tnt_tensor in = {.shape = TNT_SHAPE(2, 6), .data = x}, *y = NULL;
    tu_ok(tnt_predict_on_batch(m, &in, &y));
    float *y1 = malloc(8 * sizeof(float));
    memcpy(y1, y->data, 8 * sizeof(float));
    tnt_tensor_free(y);
    /* the same ids with the padding moved between them: masked steps keep the state */
    float x2[2 * 6] = {5, 0, 0, 2, 0, 7, /* */ 3, 3, 5, 2, 7, 1};
    tnt_tensor in2 = {.shape = TNT_SHAPE(2, 6), .data = x2};
    tu_ok(tnt_predict_on_batch(m, &in2, &y));
    tu_assert_close(y->data, y1, 8, 0, 0, "padding is skipped");
    tnt_tensor_free(y);
    free(y1);
    tnt_model_free(m);
}

/* Keras's stateful layers: a batch starts from the states the batch before left, row by row, so
 * two batches of 3 steps give what one pass over the 6 steps gives; reset_states starts again. */
static void test_stateful_carries_states(void **state) {
    (void)state;
    for (int cell = 0; cell < 3; cell++) {
        tnt_model *m[2];
        for (int k = 0; k < 2; k++) {
            m[k] = tnt_sequential(k ? "whole" : "stateful");
            tu_ok(tnt_model_add(m[k], tnt_input_layer(TNT_SHAPE(k ? 6 : 3, 2), NULL)));
            tnt_rnn_opts o = {.stateful = k == 0};
            tu_ok(tnt_model_add(m[k], cell == 0 ? tnt_lstm(4, &o) : cell == 1 ? tnt_gru(4, &o) : tnt_simple_rnn(4, &o)));
        }
        int64_t n = tnt_model_count_params(m[0]);
        float w[256], x[2 * 6 * 2], x1[2 * 3 * 2], x2[2 * 3 * 2];
        assert_true(n <= 256);
        tu_ok(tnt_get_weights(m[0], w, n));
        tu_ok(tnt_set_weights(m[1], w, n));
        tu_fill(x, 2 * 6 * 2, 9);
        for (int b = 0; b < 2; b++) { /* the first and the last three steps of each row */
            memcpy(x1 + b * 6, x + b * 12, 6 * sizeof(float));
            memcpy(x2 + b * 6, x + b * 12 + 6, 6 * sizeof(float));
        }
        tnt_tensor whole = {.shape = TNT_SHAPE(2, 6, 2), .data = x}, first = {.shape = TNT_SHAPE(2, 3, 2), .data = x1},
                   second = {.shape = TNT_SHAPE(2, 3, 2), .data = x2};
        tnt_tensor *ya = NULL, *yb = NULL, *yc = NULL, *yd = NULL;
        tu_ok(tnt_predict_on_batch(m[0], &first, &ya));
        tu_ok(tnt_predict_on_batch(m[0], &second, &yb));
        tu_ok(tnt_predict_on_batch(m[1], &whole, &yc));
        tu_assert_close(yb->data, yc->data, 2 * 4, 1e-5, 1e-6, "the second batch continues the first");
        tnt_model_reset_states(m[0]);
        tu_ok(tnt_predict_on_batch(m[0], &first, &yd));
        tu_assert_close(yd->data, ya->data, 2 * 4, 0, 0, "after reset_states");
        tnt_tensor_free(ya), tnt_tensor_free(yb), tnt_tensor_free(yc), tnt_tensor_free(yd);
        tnt_model_free(m[0]), tnt_model_free(m[1]);
    }
}

/* ---- errors -------------------------------------------------------------------------------- */

static void test_errors(void **state) {
    (void)state;
    assert_null(tnt_lstm(0, NULL));
    tu_error_contains("units 0");
    assert_null(tnt_simple_rnn(3, &(tnt_rnn_opts){.activation = "softsign"}));
    tu_error_contains("\"softsign\"");
    assert_null(tnt_lstm(3, &(tnt_rnn_opts){.recurrent_dropout = 1.0f}));
    tu_error_contains("recurrent_dropout 1");
    assert_null(tnt_cudnn_gru(3, &(tnt_rnn_opts){.dropout = 0.1f}));
    tu_error_contains("fixed by cuDNN");
    tnt_layer *l = tnt_lstm(3, NULL);
    tnt_shape out;
    assert_int_equal(l->ops->build(l, TNT_SHAPE(4, 3, 2), &out), TNT_ERR_SHAPE);
    tu_error_contains("(timesteps, features)");
    tnt_layer_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_fixtures),
        cmocka_unit_test(test_gru_fixtures),
        cmocka_unit_test(test_simple_rnn_fixtures),
        cmocka_unit_test(test_mask_fixtures),
        cmocka_unit_test(test_bidirectional_fixtures),
        cmocka_unit_test(test_bidirectional_weights_and_errors),
        cmocka_unit_test(test_time_distributed),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_dropout_split_invariant),
        cmocka_unit_test(test_mask_through_graph),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_keras_sequential_with_mask),
        cmocka_unit_test(test_stateful_carries_states),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
