/* test_gpu_rnn.c: the device path of LSTM, GRU (reset_after true and false) and SimpleRNN
 * (layers/recurrent/rnn_gpu.c, gpu/kernels/rnn.cu) against the CPU engine (rnn_common.c, checked
 * against PyTorch and the Keras formulas by test_layers_rnn) on the emulated device
 * (TNT_GPU_EMULATE=1: the CPU's sgemm, the kernels' host build; scripts/gpu_check.sh runs it on a
 * GPU):
 *   - each cell x return_sequences x go_backwards x activations (tanh/sigmoid, relu with Keras 2's
 *     hard_sigmoid, linear with Keras 3's hard_sigmoid, no bias): the output, dx and every weight
 *     gradient within 1e-5; with dropout and recurrent dropout (the same masks as the CPU's);
 *   - initial states (inputs) and return_state (outputs): every output and every input's gradient;
 *   - sequence masks: masked steps keep the state (alone, with states, in a Bidirectional);
 *   - `supported` refuses what has no device path yet (stateful, CuDNNLSTM, mixed_bfloat16;
 *     Bidirectional: merge_mode None, states) with its reason, and a stateful model says it;
 *   - Bidirectional over each cell, merge modes concat, sum, mul, ave, with and without
 *     return_sequences;
 *   - models trained on the device equal the CPU: Embedding -> LSTM -> Dense, Embedding -> GRU
 *     (return_sequences, dropout) -> SimpleRNN (go_backwards) -> GRU reset_before -> Dense, and
 *     Embedding -> Bidirectional(LSTM) -> Bidirectional(GRU, ave) -> Dense, and addition_rnn's
 *     LSTM -> RepeatVector -> LSTM -> TimeDistributed(Dense), and lstm_seq2seq's encoder-decoder
 *     (the encoder's final states start the decoder), and Embedding(mask_zero) -> LSTM -> Dense;
 *   - TimeDistributed (over Dense, LSTM, Flatten) and RepeatVector alone. */
#include "gpu_device_util.h"
#include "testutil.h"

#include "gpu/gpu.h"
#include "layers/layer.h"
#include "layers/recurrent/rnn_common.h"
#include "model/device.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Emulated: the CPU's sgemm, the CPU's formulas; the bias gradient sums in double on the device */
static double RTOL = 1e-5, ATOL = 1e-5;

typedef enum { LSTM, GRU, GRU_BEFORE, SIMPLE } cell_kind;
static const char *const cell_names[] = {"LSTM", "GRU", "GRU(reset_after=False)", "SimpleRNN"};

typedef struct act_case {
    const char *act, *rec_act;
    bool no_bias;
} act_case;

static const act_case acts[] = {
    {NULL, NULL, false},                       /* tanh, sigmoid (SimpleRNN: tanh) */
    {"relu", "hard_sigmoid", false},           /* Keras 2's hard sigmoid */
    {"linear", "hard_sigmoid_v3", true},       /* Keras 3's, no bias */
};

static tnt_layer *make(cell_kind k, int units, tnt_rnn_opts o) {
    o.reset_before = k == GRU_BEFORE;
    if (k == SIMPLE) o.recurrent_activation = NULL;
    return k == LSTM ? tnt_lstm(units, &o) : k == SIMPLE ? tnt_simple_rnn(units, &o) : tnt_gru(units, &o);
}

/* host weights: the layer's initializers (glorot, orthogonal), a nonzero bias; zeroed gradients */
static void weights(tnt_layer *l) {
    for (int i = 0; i < l->n_weights; i++) {
        const int64_t c = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)c, sizeof(float));
        l->weights[i].grad = calloc((size_t)c, sizeof(float));
        tnt__weight_init(&l->weights[i], 40 + (uint64_t)i);
        if (strstr(l->weights[i].name, "bias")) {
            tu_fill(l->weights[i].value, c, 71);
            for (int64_t j = 0; j < c; j++) l->weights[i].value[j] *= 0.5f;
        }
    }
}

/* one layer on both sides: output, dx and each weight's gradient; bidi: in a Bidirectional of
 * that merge mode */
static void compare_in(cell_kind k, tnt_rnn_opts o, const char *what, int bidi, tnt_merge_mode mode) {
    enum { B = 3, T = 5, I = 4, U = 6 };
    tnt_layer *l = make(k, U, o);
    if (bidi) l = tnt_bidirectional(l, NULL, mode, NULL);
    assert_non_null(l);
    l->in_shape = TNT_SHAPE(T, I);
    tu_ok(l->ops->build(l, l->in_shape, &l->out_shape));
    const int64_t nx = B * T * I, ny = B * tnt_shape_numel(l->out_shape);
    float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
    tu_fill(x, nx, 17);
    tu_fill(dy, ny, 18);
    float *yc = malloc(ny * sizeof(float)), *dxc = malloc(nx * sizeof(float));
    float *yd = malloc(ny * sizeof(float)), *dxd = malloc(nx * sizeof(float));
    weights(l);
    layer_step(l, false, B, x, dy, yc, dxc);
    float *gc[TNT_MAX_LAYER_WEIGHTS] = {NULL};
    for (int i = 0; i < l->n_weights; i++) /* the CPU's gradients, before the device's */
        gc[i] = l->weights[i].grad, l->weights[i].grad = calloc((size_t)tnt_shape_numel(l->weights[i].shape), sizeof(float));
    layer_step(l, true, B, x, dy, yd, dxd);
    char w[240];
    snprintf(w, sizeof w, "%s, %s: output", cell_names[k], what);
    tu_assert_close(yd, yc, ny, RTOL, ATOL, w);
    snprintf(w, sizeof w, "%s, %s: dx", cell_names[k], what);
    tu_assert_close(dxd, dxc, nx, RTOL, ATOL, w);
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(w, sizeof w, "%s, %s: %s's gradient", cell_names[k], what, l->weights[i].name);
        tu_assert_close(l->weights[i].grad, gc[i], tnt_shape_numel(l->weights[i].shape), RTOL, ATOL, w);
        double big = 0;
        for (int64_t j = 0; j < tnt_shape_numel(l->weights[i].shape); j++) big = fmax(big, fabs(gc[i][j]));
        assert_true(big > 1e-3); /* a gradient that is really there */
        free(gc[i]), free(l->weights[i].value), free(l->weights[i].grad);
        l->weights[i].value = l->weights[i].grad = NULL;
    }
    free(x), free(dy), free(yc), free(dxc), free(yd), free(dxd);
    tnt_layer_free(l);
}

static void compare(cell_kind k, tnt_rnn_opts o, const char *what) { compare_in(k, o, what, false, TNT_MERGE_CONCAT); }

static void every_option(cell_kind k) {
    for (size_t a = 0; a < TNT_ARRAY_LEN(acts); a++)
        for (int seq = 0; seq < 2; seq++)
            for (int back = 0; back < 2; back++) {
                tnt_rnn_opts o = {.activation = acts[a].act, .recurrent_activation = acts[a].rec_act,
                                  .no_bias = acts[a].no_bias, .return_sequences = seq, .go_backwards = back};
                char what[160];
                snprintf(what, sizeof what, "activation %s / %s%s, return_sequences %d, go_backwards %d",
                         acts[a].act ? acts[a].act : "default", acts[a].rec_act ? acts[a].rec_act : "default",
                         acts[a].no_bias ? ", no bias" : "", seq, back);
                compare(k, o, what);
            }
    tnt_rnn_opts d = {.dropout = 0.3f, .recurrent_dropout = 0.25f, .return_sequences = true};
    compare(k, d, "dropout 0.3, recurrent_dropout 0.25, return_sequences");
    d.go_backwards = true, d.return_sequences = false;
    compare(k, d, "dropout 0.3, recurrent_dropout 0.25, go_backwards");
}

static void test_lstm_equals_cpu(void **state) {
    (void)state;
    every_option(LSTM);
}

static void test_gru_equals_cpu(void **state) {
    (void)state;
    every_option(GRU);
    every_option(GRU_BEFORE);
}

static void test_simple_rnn_equals_cpu(void **state) {
    (void)state;
    every_option(SIMPLE);
}

/* Bidirectional over each cell, every merge mode but None, with and without return_sequences
 * (the backward layer's sequence meets the forward one's reversed), dropout in one case */
static void test_bidirectional_equals_cpu(void **state) {
    (void)state;
    static const char *const modes[] = {"concat", "sum", "mul", "ave"};
    for (int k = LSTM; k <= SIMPLE; k++)
        for (int m = TNT_MERGE_CONCAT; m <= TNT_MERGE_AVE; m++)
            for (int seq = 0; seq < 2; seq++) {
                tnt_rnn_opts o = {.return_sequences = seq, .dropout = m == TNT_MERGE_MUL ? 0.2f : 0.0f};
                char what[120];
                snprintf(what, sizeof what, "Bidirectional(merge_mode %s), return_sequences %d%s", modes[m], seq,
                         o.dropout > 0 ? ", dropout 0.2" : "");
                compare_in((cell_kind)k, o, what, true, (tnt_merge_mode)m);
            }
}

/* ---- initial states and return_state: several inputs and outputs ------------------------------ */

/* One forward and backward of a built recurrent layer of n_in inputs (the sequence, then its
 * initial states) and n_out outputs (the output, then the final states) on the CPU or the device;
 * xs, dys on the host; ys, dxs receive the results. */
static void states_step(tnt_layer *l, bool device, int64_t B, int n_in, float *const *xs, const int64_t *nx, int n_out,
                        float *const *dys, const int64_t *ny, float **ys, float **dxs) {
    const tnt__gpu_ops *g = l->ops->gpu;
    void *plan = device ? g->plan_create(l, B) : NULL;
    const size_t ws_bytes = (device ? g->workspace_size(l, plan, B) : l->ops->workspace_size(l, NULL, B)) + 64;
    float *x[4], *dx[4], *y[4], *dy[4];
    for (int k = 0; k < n_in; k++) {
        x[k] = device ? dev_up(xs[k], nx[k]) : xs[k];
        dx[k] = device ? tnt__gpu_malloc((size_t)nx[k] * sizeof(float)) : dxs[k];
    }
    for (int k = 0; k < n_out; k++) {
        y[k] = device ? tnt__gpu_malloc((size_t)ny[k] * sizeof(float)) : ys[k];
        dy[k] = device ? dev_up(dys[k], ny[k]) : dys[k];
    }
    if (device)
        for (int i = 0; i < l->n_weights; i++) {
            const int64_t c = tnt_shape_numel(l->weights[i].shape);
            l->weights[i].d_value = dev_up(l->weights[i].value, c);
            l->weights[i].d_grad = tnt__gpu_malloc((size_t)c * sizeof(float));
        }
    void *ws = device ? tnt__gpu_malloc(ws_bytes) : tnt__alloc(ws_bytes);
    tnt__fwd_args fa = {.batch = B, .x = x[0], .n_inputs = n_in, .xs = (const float *const *)x, .y = y[0],
                        .n_outputs = n_out, .ys = y, .workspace = ws, .training = true, .seed = 3};
    tu_ok(device ? g->forward(l, plan, &fa) : l->ops->forward(l, NULL, &fa));
    tnt__bwd_args ba = {.batch = B, .x = x[0], .y = y[0], .dy = dy[0], .n_outputs = n_out,
                        .ys = (const float *const *)y, .dys = (const float *const *)dy, .dx = dx[0], .workspace = ws,
                        .n_inputs = n_in, .xs = (const float *const *)x, .dxs = dx};
    tu_ok(device ? g->backward(l, plan, &ba) : l->ops->backward(l, NULL, &ba));
    if (!device) {
        tnt__free(ws);
        return;
    }
    for (int k = 0; k < n_out; k++) {
        float *h = dev_down(y[k], ny[k]);
        memcpy(ys[k], h, (size_t)ny[k] * sizeof(float));
        free(h), tnt__gpu_free(y[k]), tnt__gpu_free(dy[k]);
    }
    for (int k = 0; k < n_in; k++) {
        float *h = dev_down(dx[k], nx[k]);
        memcpy(dxs[k], h, (size_t)nx[k] * sizeof(float));
        free(h), tnt__gpu_free(x[k]), tnt__gpu_free(dx[k]);
    }
    for (int i = 0; i < l->n_weights; i++) {
        float *gr = dev_down(l->weights[i].d_grad, tnt_shape_numel(l->weights[i].shape));
        memcpy(l->weights[i].grad, gr, (size_t)tnt_shape_numel(l->weights[i].shape) * sizeof(float));
        free(gr), tnt__gpu_free(l->weights[i].d_value), tnt__gpu_free(l->weights[i].d_grad);
        l->weights[i].d_value = l->weights[i].d_grad = NULL;
    }
    tnt__gpu_free(ws);
    g->plan_destroy(plan);
}

/* a layer with initial states (init), return_state and/or a sequence mask (the last input; in a
 * Bidirectional with bidi) on both sides: every output, every input's gradient (the initial
 * states' too; the mask's zeros) and every weight gradient */
static void compare_in_full(cell_kind k, tnt_rnn_opts o, bool init, bool masked, bool bidi, const char *what) {
    enum { B = 3, T = 5, I = 4, U = 6 };
    tnt_layer *l = make(k, U, o);
    if (bidi) l = tnt_bidirectional(l, NULL, TNT_MERGE_CONCAT, NULL);
    assert_non_null(l);
    const int ns = k == LSTM ? 2 : 1, n_out = l->n_outputs;
    int n_in = init ? 1 + ns : 1;
    tnt_shape in[4] = {TNT_SHAPE(T, I), TNT_SHAPE(U), TNT_SHAPE(U)};
    if (masked) in[n_in++] = TNT_SHAPE(T), l->mask_input = true;
    l->n_inputs = n_in;
    for (int i = 0; i < n_in; i++) l->in_shapes[i] = in[i];
    l->in_shape = in[0];
    tu_ok(l->ops->build_multi(l, n_in, in, &l->out_shape));
    l->out_shapes[0] = l->out_shape;
    assert_true(l->ops->gpu->supported(l, NULL));
    int64_t nx[4] = {0}, ny[3] = {0};
    float *xs[4] = {0}, *dys[3] = {0}, *yc[3] = {0}, *yd[3] = {0}, *dxc[4] = {0}, *dxd[4] = {0};
    for (int i = 0; i < n_in; i++) {
        nx[i] = B * tnt_shape_numel(in[i]);
        xs[i] = malloc(nx[i] * sizeof(float)), dxc[i] = malloc(nx[i] * sizeof(float)), dxd[i] = malloc(nx[i] * sizeof(float));
        tu_fill(xs[i], nx[i], 50 + (uint64_t)i);
    }
    if (masked) /* steps masked at the start, in the middle and at the end; row 1 wholly kept */
        for (int64_t j = 0; j < B * T; j++) xs[n_in - 1][j] = j / T == 1 || (j % T != 0 && j % T != 2 + j / T) ? 1.0f : 0.0f;
    for (int i = 0; i < n_out; i++) {
        ny[i] = B * tnt_shape_numel(l->out_shapes[i]);
        dys[i] = malloc(ny[i] * sizeof(float)), yc[i] = malloc(ny[i] * sizeof(float)), yd[i] = malloc(ny[i] * sizeof(float));
        tu_fill(dys[i], ny[i], 60 + (uint64_t)i);
    }
    weights(l);
    states_step(l, false, B, n_in, xs, nx, n_out, dys, ny, yc, dxc);
    float *gc[TNT_MAX_LAYER_WEIGHTS] = {NULL};
    for (int i = 0; i < l->n_weights; i++)
        gc[i] = l->weights[i].grad, l->weights[i].grad = calloc((size_t)tnt_shape_numel(l->weights[i].shape), sizeof(float));
    states_step(l, true, B, n_in, xs, nx, n_out, dys, ny, yd, dxd);
    char w[240];
    for (int i = 0; i < n_out; i++) {
        snprintf(w, sizeof w, "%s, %s: output %d", cell_names[k], what, i);
        tu_assert_close(yd[i], yc[i], ny[i], RTOL, ATOL, w);
        free(dys[i]), free(yc[i]), free(yd[i]);
    }
    for (int i = 0; i < n_in; i++) {
        snprintf(w, sizeof w, "%s, %s: input %d's gradient", cell_names[k], what, i);
        tu_assert_close(dxd[i], dxc[i], nx[i], RTOL, ATOL, w);
        double big = 0;
        for (int64_t j = 0; j < nx[i]; j++) big = fmax(big, fabs(dxc[i][j]));
        assert_true(masked && i == n_in - 1 ? big == 0 : big > 1e-3); /* the mask's: zeros */
        free(xs[i]), free(dxc[i]), free(dxd[i]);
    }
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(w, sizeof w, "%s, %s: %s's gradient", cell_names[k], what, l->weights[i].name);
        tu_assert_close(l->weights[i].grad, gc[i], tnt_shape_numel(l->weights[i].shape), RTOL, ATOL, w);
        free(gc[i]), free(l->weights[i].value), free(l->weights[i].grad);
        l->weights[i].value = l->weights[i].grad = NULL;
    }
    tnt_layer_free(l);
}

static void compare_states(cell_kind k, tnt_rnn_opts o, bool init, const char *what) {
    compare_in_full(k, o, init, false, false, what);
}

/* a sequence mask (Embedding mask_zero, Masking): masked steps keep the state, output it or zeros
 * (zero_output_for_mask; Bidirectional's with return_sequences), pass the gradient through */
static void test_masks_equal_cpu(void **state) {
    (void)state;
    for (int k = LSTM; k <= SIMPLE; k++) {
        compare_in_full((cell_kind)k, (tnt_rnn_opts){0}, false, true, false, "mask");
        compare_in_full((cell_kind)k, (tnt_rnn_opts){.return_sequences = true, .go_backwards = true}, false, true, false,
                        "mask, return_sequences, go_backwards");
        compare_in_full((cell_kind)k, (tnt_rnn_opts){.return_sequences = true, .zero_output_for_mask = true,
                                                     .recurrent_dropout = 0.2f},
                        false, true, false, "mask, zero_output_for_mask, recurrent dropout");
        compare_in_full((cell_kind)k, (tnt_rnn_opts){.return_state = true}, true, true, false,
                        "mask, initial states, return_state");
        compare_in_full((cell_kind)k, (tnt_rnn_opts){.return_sequences = true}, false, true, true,
                        "mask, in a Bidirectional, return_sequences");
        compare_in_full((cell_kind)k, (tnt_rnn_opts){0}, false, true, true, "mask, in a Bidirectional");
    }
}

/* Keras's initial_state and return_state (the encoder-decoder pattern), every cell, both
 * directions, with recurrent dropout in one case */
static void test_states_equal_cpu(void **state) {
    (void)state;
    for (int k = LSTM; k <= SIMPLE; k++) {
        compare_states((cell_kind)k, (tnt_rnn_opts){.return_state = true}, false, "return_state");
        compare_states((cell_kind)k, (tnt_rnn_opts){.return_sequences = true}, true, "initial states, return_sequences");
        compare_states((cell_kind)k, (tnt_rnn_opts){.return_state = true, .go_backwards = true}, true,
                       "initial states, return_state, go_backwards");
        compare_states((cell_kind)k, (tnt_rnn_opts){.return_state = true, .return_sequences = true, .recurrent_dropout = 0.3f,
                                                    .dropout = 0.2f},
                       true, "initial states, return_state, return_sequences, dropout");
    }
}

/* a layer of one input on both sides (the wrappers and RepeatVector): output, dx, weight gradients */
static void single(tnt_layer *l, tnt_shape in, const char *what) {
    enum { B = 3 };
    assert_non_null(l);
    l->in_shape = in;
    tu_ok(l->ops->build(l, in, &l->out_shape));
    const int64_t nx = B * tnt_shape_numel(in), ny = B * tnt_shape_numel(l->out_shape);
    float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
    float *yc = malloc(ny * sizeof(float)), *dxc = malloc(nx * sizeof(float));
    float *yd = malloc(ny * sizeof(float)), *dxd = malloc(nx * sizeof(float));
    tu_fill(x, nx, 27);
    tu_fill(dy, ny, 28);
    weights(l);
    layer_step(l, false, B, x, dy, yc, dxc);
    float *gc[TNT_MAX_LAYER_WEIGHTS] = {NULL};
    for (int i = 0; i < l->n_weights; i++)
        gc[i] = l->weights[i].grad, l->weights[i].grad = calloc((size_t)tnt_shape_numel(l->weights[i].shape), sizeof(float));
    layer_step(l, true, B, x, dy, yd, dxd);
    char w[200];
    snprintf(w, sizeof w, "%s: output", what);
    tu_assert_close(yd, yc, ny, RTOL, ATOL, w);
    snprintf(w, sizeof w, "%s: dx", what);
    tu_assert_close(dxd, dxc, nx, RTOL, ATOL, w);
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(w, sizeof w, "%s: %s's gradient", what, l->weights[i].name);
        tu_assert_close(l->weights[i].grad, gc[i], tnt_shape_numel(l->weights[i].shape), RTOL, ATOL, w);
        free(gc[i]), free(l->weights[i].value), free(l->weights[i].grad);
        l->weights[i].value = l->weights[i].grad = NULL;
    }
    free(x), free(dy), free(yc), free(dxc), free(yd), free(dxd);
    tnt_layer_free(l);
}

/* TimeDistributed over Dense, an LSTM (on batch * steps sequences) and Flatten (a view: a copy);
 * RepeatVector forward and its sum over the copies */
static void test_time_distributed_repeat_vector(void **state) {
    (void)state;
    single(tnt_time_distributed(tnt_dense(5, &(tnt_layer_opts){.activation = TNT_ACT_RELU}), NULL), TNT_SHAPE(4, 6),
           "TimeDistributed(Dense(5, relu))");
    single(tnt_time_distributed(tnt_lstm(4, &(tnt_rnn_opts){.go_backwards = true}), NULL), TNT_SHAPE(3, 5, 2),
           "TimeDistributed(LSTM(4, go_backwards))");
    single(tnt_time_distributed(tnt_flatten(NULL), NULL), TNT_SHAPE(3, 2, 4), "TimeDistributed(Flatten)");
    single(tnt_repeat_vector(4, NULL), TNT_SHAPE(7), "RepeatVector(4)");
    single(tnt_repeat_vector(1, NULL), TNT_SHAPE(3), "RepeatVector(1)");
}

/* the options without a device path: supported() is false and says which */
static void refused(tnt_layer *l, int n_in, const char *reason) {
    assert_non_null(l);
    tnt_shape in[4] = {TNT_SHAPE(5, 4), TNT_SHAPE(6), TNT_SHAPE(6)};
    if (l->mask_input) in[n_in++] = TNT_SHAPE(5);
    l->n_inputs = n_in;
    for (int i = 0; i < n_in; i++) l->in_shapes[i] = in[i];
    l->in_shape = in[0];
    tu_ok(l->ops->build_multi(l, n_in, in, &l->out_shape));
    const char *why = NULL;
    assert_false(l->ops->gpu->supported(l, &why));
    assert_non_null(why);
    print_message("%s: %s\n", l->ops->class_name, why);
    assert_non_null(strstr(why, reason));
    tnt_layer_free(l);
}

static void test_unsupported_options_refused(void **state) {
    (void)state;
    refused(tnt_gru(6, &(tnt_rnn_opts){.stateful = true}), 1, "stateful");
    refused(tnt_bidirectional(tnt_lstm(6, &(tnt_rnn_opts){.return_state = true}), NULL, TNT_MERGE_CONCAT, NULL), 1,
            "return_state");
    refused(tnt_cudnn_lstm(6, NULL), 1, "CuDNNLSTM");
    tnt_layer *bf16 = tnt_gru(6, NULL);
    bf16->dtype_policy = TNT__POLICY_MIXED_BF16;
    refused(bf16, 1, "mixed_bfloat16");
    refused(tnt_bidirectional(tnt_lstm(6, NULL), NULL, TNT_MERGE_NONE, NULL), 1, "merge_mode None");
    refused(tnt_bidirectional(tnt_lstm(6, &(tnt_rnn_opts){.stateful = true}), NULL, TNT_MERGE_CONCAT, NULL), 1,
            "stateful");

    /* and the plain layers are supported */
    tnt_layer *plain[] = {tnt_lstm(6, NULL), tnt_gru(6, &(tnt_rnn_opts){.dropout = 0.1f}), tnt_simple_rnn(6, NULL)};
    for (size_t i = 0; i < TNT_ARRAY_LEN(plain); i++) {
        tu_ok(plain[i]->ops->build(plain[i], TNT_SHAPE(5, 4), &plain[i]->out_shape));
        assert_true(plain[i]->ops->gpu->supported(plain[i], NULL));
        tnt_layer_free(plain[i]);
    }
}

/* ---- models trained on the device ------------------------------------------------------------- */

enum { N = 64, BATCH = 16, STEPS = 10, VOCAB = 30, FEATURES = 5, OUT_STEPS = 4 };
static float ids[N * STEPS], labels[N], series[N * STEPS * FEATURES], seq_labels[N * OUT_STEPS];

typedef struct run {
    float *w;
    int64_t n;
    double loss;
} run;

static tnt_model *rnn_model(int which) {
    tnt_model *m = tnt_sequential(which == 3 ? "seq2seq" : which == 2 ? "bidirectional" : which ? "gru_stack" : "embedding_lstm");
    if (which == 3) { /* addition_rnn's shape: encoder, RepeatVector, decoder, TimeDistributed(Dense) */
        tnt_model_add(m, tnt_input_layer(TNT_SHAPE(STEPS, FEATURES), NULL));
        tnt_model_add(m, tnt_lstm(8, NULL));
        tnt_model_add(m, tnt_repeat_vector(OUT_STEPS, NULL));
        tnt_model_add(m, tnt_lstm(8, &(tnt_rnn_opts){.return_sequences = true}));
        tnt_model_add(m, tnt_time_distributed(tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), NULL));
        return m;
    }
    tnt_model_add(m, tnt_input_layer(TNT_SHAPE(STEPS), NULL));
    tnt_model_add(m, tnt_embedding(VOCAB, 8, false, NULL));
    if (!which) {
        tnt_model_add(m, tnt_lstm(12, NULL));
    } else if (which == 2) {
        tnt_model_add(m, tnt_bidirectional(tnt_lstm(8, &(tnt_rnn_opts){.return_sequences = true}), NULL,
                                           TNT_MERGE_CONCAT, NULL));
        tnt_model_add(m, tnt_bidirectional(tnt_gru(6, &(tnt_rnn_opts){.dropout = 0.1f}), NULL, TNT_MERGE_AVE, NULL));
    } else {
        tnt_model_add(m, tnt_gru(10, &(tnt_rnn_opts){.return_sequences = true, .dropout = 0.2f, .recurrent_dropout = 0.2f}));
        tnt_model_add(m, tnt_simple_rnn(8, &(tnt_rnn_opts){.return_sequences = true, .go_backwards = true}));
        tnt_model_add(m, tnt_gru(6, &(tnt_rnn_opts){.reset_before = true}));
    }
    tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    return m;
}

/* Embedding -> LSTM -> Dense as a graph, whose Embedding(mask_zero) hands the LSTM the sequence mask */
static tnt_model *graph_model(bool mask_zero) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(STEPS), NULL);
    tnt_ktensor e = tnt_call(g, tnt_embedding(VOCAB, 8, mask_zero, NULL), in);
    tnt_ktensor h = tnt_call(g, tnt_lstm(12, NULL), e);
    tnt_ktensor y = tnt_call(g, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), h);
    tnt_model *m = tnt_functional(g, 1, &in, 1, &y, NULL);
    assert_non_null(m);
    tnt_graph_free(g);
    return m;
}

static run train(int which, tnt_device dev) {
    tnt_model *m = rnn_model(which);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_optimizer_new("sgd", &(tnt_optimizer_opts){
                                                 .learning_rate = 0.3f}),
                                             .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY, .seed = 7, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(
        which == 3 ? tnt_dataset_from_arrays(series, TNT_SHAPE(STEPS, FEATURES), seq_labels, TNT_SHAPE(OUT_STEPS), N, false)
                   : tnt_dataset_from_arrays(ids, TNT_SHAPE(STEPS), labels, TNT_SHAPE(), N, false),
        BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    run r = {.n = tnt_model_count_params(m), .loss = tnt_history_get(h, "loss", 1)};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

/* test_gpu_conv_few_taps's measures: emulated, each weight within 1e-4; on a GPU the largest
 * difference within 1e-3 of the largest weight; the loss within 1e-4; a second run bitwise */
static void model_equals_cpu(int which) {
    const char *name = which == 3   ? "LSTM -> RepeatVector -> LSTM -> TimeDistributed(Dense)"
                       : which == 2 ? "Embedding -> Bidirectional(LSTM) -> Bidirectional(GRU) -> Dense"
                       : which ? "Embedding -> GRU -> SimpleRNN -> GRU -> Dense" : "Embedding -> LSTM -> Dense";
    run cpu = train(which, TNT_DEVICE_CPU), dev = train(which, TNT_DEVICE_GPU), again = train(which, TNT_DEVICE_GPU);
    print_message("%s, 8 steps: loss %.7f on the CPU, %.7f on the device\n", name, cpu.loss, dev.loss);
    if (tnt__gpu_emulated()) tu_assert_close(dev.w, cpu.w, cpu.n, 1e-4, 1e-5, name);
    double d = 0, big = 1e-30;
    for (int64_t i = 0; i < cpu.n; i++) d = fmax(d, fabs((double)dev.w[i] - cpu.w[i])), big = fmax(big, fabs(cpu.w[i]));
    print_message("%s: the largest difference %.3g of the largest weight\n", name, d / big);
    assert_true(d / big < 1e-3);
    assert_true(fabs(dev.loss - cpu.loss) < 1e-4 * (1 + fabs(cpu.loss)));
    tu_assert_bitwise(again.w, dev.w, dev.n, "a second device run");
    free(cpu.w), free(dev.w), free(again.w);
}

static void test_embedding_lstm_dense_equals_cpu(void **state) {
    (void)state;
    model_equals_cpu(0);
}

static void test_gru_stack_equals_cpu(void **state) {
    (void)state;
    model_equals_cpu(1);
}

static void test_bidirectional_model_equals_cpu(void **state) {
    (void)state;
    model_equals_cpu(2);
}

static void test_seq2seq_model_equals_cpu(void **state) {
    (void)state;
    model_equals_cpu(3);
}

/* lstm_seq2seq's pattern: the encoder's final states start the decoder (return_state, initial
 * states), two packed inputs, 8 steps of SGD on the device == CPU */
enum { T1 = 6, F1 = 3, T2 = 4, F2 = 2, V = 3 };
static float s2s_x[N * (T1 * F1 + T2 * F2)], s2s_y[N * T2 * V];

static run train_s2s(tnt_device dev) {
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor ins[2] = {tnt_graph_input(g, TNT_SHAPE(T1, F1), "enc_in"), tnt_graph_input(g, TNT_SHAPE(T2, F2), "dec_in")};
    tnt_ktensor enc[3], dec[3];
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(8, &(tnt_rnn_opts){.return_state = true}), 1, ins, 3, enc), 3);
    assert_int_equal(tnt_call_outputs(g, tnt_lstm(8, &(tnt_rnn_opts){.return_sequences = true, .return_state = true}), 3,
                                      (tnt_ktensor[]){ins[1], enc[1], enc[2]}, 3, dec),
                     3);
    tnt_ktensor y = tnt_call(g, tnt_dense(V, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}), dec[0]);
    tnt_model *m = tnt_functional(g, 2, ins, 1, &y, "s2s");
    tnt_graph_free(g);
    assert_non_null(m);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.5f), .loss = TNT_MEAN_SQUARED_ERROR, .seed = 4,
                                             .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(
        tnt_dataset_from_arrays(s2s_x, TNT_SHAPE(T1 * F1 + T2 * F2), s2s_y, TNT_SHAPE(T2, V), N, false), BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    assert_int_equal(m->on_device, dev == TNT_DEVICE_GPU);
    run r = {.n = tnt_model_count_params(m), .loss = tnt_history_get(h, "loss", 1)};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static void test_encoder_decoder_equals_cpu(void **state) {
    (void)state;
    tu_fill(s2s_x, TNT_ARRAY_LEN(s2s_x), 81);
    for (int i = 0; i < N * T2; i++)
        for (int v = 0; v < V; v++) s2s_y[i * V + v] = v == (i * 7 + i / T2) % V ? 1.0f : 0.0f;
    run cpu = train_s2s(TNT_DEVICE_CPU), dev = train_s2s(TNT_DEVICE_GPU);
    print_message("encoder-decoder, 8 steps: loss %.7f on the CPU, %.7f on the device\n", cpu.loss, dev.loss);
    if (tnt__gpu_emulated()) tu_assert_close(dev.w, cpu.w, cpu.n, 1e-4, 1e-5, "encoder-decoder");
    double d = 0, big = 1e-30;
    for (int64_t i = 0; i < cpu.n; i++) d = fmax(d, fabs((double)dev.w[i] - cpu.w[i])), big = fmax(big, fabs(cpu.w[i]));
    assert_true(d / big < 1e-3);
    assert_true(fabs(dev.loss - cpu.loss) < 1e-4 * (1 + fabs(cpu.loss)));
    free(cpu.w), free(dev.w);
}

/* Embedding(mask_zero) -> LSTM -> Dense as a graph (the mask a hidden node, the LSTM's last
 * input), on pre-padded ids: trained on the device == CPU (device auto takes the GPU); without the
 * mask alike */
static run train_graph(bool mask_zero, tnt_device dev) {
    tnt_model *m = graph_model(mask_zero);
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.3f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .seed = 5, .device = dev}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(ids, TNT_SHAPE(STEPS), labels, TNT_SHAPE(), N, false),
                                        BATCH, false);
    tnt_history *h = NULL;
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 2}, &h));
    assert_int_equal(m->on_device, dev != TNT_DEVICE_CPU);
    run r = {.n = tnt_model_count_params(m), .loss = tnt_history_get(h, "loss", 1)};
    r.w = malloc((size_t)r.n * sizeof(float));
    tu_ok(tnt_get_weights(m, r.w, r.n));
    tnt_history_free(h);
    tnt_dataset_free(ds);
    tnt_model_free(m);
    return r;
}

static void test_masked_model_equals_cpu(void **state) {
    (void)state;
    for (int masked = 1; masked >= 0; masked--) {
        run cpu = train_graph(masked, TNT_DEVICE_CPU), dev = train_graph(masked, TNT_DEVICE_AUTO);
        print_message("Embedding(mask_zero %d) -> LSTM -> Dense, 8 steps: loss %.7f on the CPU, %.7f on the device\n",
                      masked, cpu.loss, dev.loss);
        if (tnt__gpu_emulated()) tu_assert_close(dev.w, cpu.w, cpu.n, 1e-4, 1e-5, "masked model");
        double d = 0, big = 1e-30;
        for (int64_t i = 0; i < cpu.n; i++) d = fmax(d, fabs((double)dev.w[i] - cpu.w[i])), big = fmax(big, fabs(cpu.w[i]));
        assert_true(d / big < 1e-3);
        assert_true(fabs(dev.loss - cpu.loss) < 1e-4 * (1 + fabs(cpu.loss)));
        free(cpu.w), free(dev.w);
    }
}

/* a stateful LSTM keeps the model on the CPU (device auto), and the reason says so */
static void test_stateful_model_stays_on_cpu(void **state) {
    (void)state;
    tnt_model *m = tnt_sequential("stateful");
    tnt_model_add(m, tnt_input_layer(TNT_SHAPE(STEPS), NULL));
    tnt_model_add(m, tnt_embedding(VOCAB, 8, false, NULL));
    tnt_model_add(m, tnt_lstm(6, &(tnt_rnn_opts){.stateful = true}));
    tnt_model_add(m, tnt_dense(3, &(tnt_layer_opts){.activation = TNT_ACT_SOFTMAX}));
    tu_ok(tnt_compile(m, &(tnt_compile_opts){.optimizer = tnt_sgd(0.05f), .loss = TNT_SPARSE_CATEGORICAL_CROSSENTROPY,
                                             .device = TNT_DEVICE_AUTO}));
    tnt_dataset *ds = tnt_dataset_batch(tnt_dataset_from_arrays(ids, TNT_SHAPE(STEPS), labels, TNT_SHAPE(), N, false),
                                        BATCH, false);
    tu_ok(tnt_fit(m, ds, &(tnt_fit_opts){.epochs = 1}, NULL));
    assert_false(m->on_device);
    char why[256] = "";
    assert_false(tnt__model_device_check(m, why, sizeof why));
    print_message("%s\n", why);
    assert_non_null(strstr(why, "(LSTM): a stateful recurrent layer has no device path yet"));
    tnt_dataset_free(ds);
    tnt_model_free(m);
}

int main(void) {
    /* ctest: the emulated device; scripts/gpu_check.sh runs it on a GPU with TNT_GPU_EMULATE=0 */
    if (!getenv("TNT_GPU_EMULATE")) setenv("TNT_GPU_EMULATE", "1", 1);
    if (tnt_init(NULL, NULL) != TNT_OK) return fprintf(stderr, "tnt_init: %s\n", tnt_last_error()), 1;
    const char *why = NULL;
    if (!tnt__gpu_available(&why)) return printf("test_gpu_rnn: no device: %s\n", why), 77;
    if (!tnt__gpu_emulated()) RTOL = 1e-3, ATOL = 1e-4; /* a real GPU (GPU-DESIGN.md section 5) */
    for (int i = 0; i < N * STEPS; i++) ids[i] = (float)((i * 7 + i / STEPS * 3) % VOCAB);
    for (int n = 0; n < N; n++) /* pre-padding: the first n % 4 ids 0 */
        for (int j = 0; j < n % 4; j++) ids[n * STEPS + j] = 0.0f;
    tu_fill(series, N * STEPS * FEATURES, 31);
    for (int i = 0; i < N * OUT_STEPS; i++) seq_labels[i] = (float)((i * 5 + i / OUT_STEPS) % 3);
    for (int i = 0; i < N; i++) labels[i] = (float)((int)ids[i * STEPS + STEPS - 1] % 3); /* the last id decides */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_equals_cpu),
        cmocka_unit_test(test_gru_equals_cpu),
        cmocka_unit_test(test_simple_rnn_equals_cpu),
        cmocka_unit_test(test_states_equal_cpu),
        cmocka_unit_test(test_masks_equal_cpu),
        cmocka_unit_test(test_bidirectional_equals_cpu),
        cmocka_unit_test(test_time_distributed_repeat_vector),
        cmocka_unit_test(test_unsupported_options_refused),
        cmocka_unit_test(test_embedding_lstm_dense_equals_cpu),
        cmocka_unit_test(test_gru_stack_equals_cpu),
        cmocka_unit_test(test_bidirectional_model_equals_cpu),
        cmocka_unit_test(test_seq2seq_model_equals_cpu),
        cmocka_unit_test(test_encoder_decoder_equals_cpu),
        cmocka_unit_test(test_masked_model_equals_cpu),
        cmocka_unit_test(test_stateful_model_stays_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
