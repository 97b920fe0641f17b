/* test_layers_rnn_state.c: recurrent layers with several outputs and inputs: return_state (the
 * final h and c as outputs 1 and 2) and initial_state (inputs after the sequence) of LSTM, GRU and
 * SimpleRNN against PyTorch's nn.LSTM/GRU/RNN given h0 (c0) and returning h_n (c_n), and against
 * the Keras port where PyTorch has no form (masks, go_backwards) (tests/fixtures/gen_layers_rnn.py,
 * state_case), including outputs whose gradient is missing (nothing reads them). Finite
 * differences through every input and output of LSTM, GRU, SimpleRNN (with dropout),
 * Bidirectional (merge_mode None, return_state, initial states) and ConvLSTM2D (return_state,
 * dropout, recurrent_dropout); ConvLSTM2D's dropout masks do not depend on the split of the
 * batch; argument errors. */
#include "layer_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/recurrent/rnn_common.h"

/* ---- fixtures ----------------------------------------------------------------------------- */

/* Fixture case rnn_NAME on l (consumed, built with return_state): inputs x (h0, c0) (mask);
 * outputs y, hT (cT); the gradients of the outputs the fixture has (dy, dh, dc), NULL for the
 * others. */
static void state_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs, s;
    float *in[4] = {0}, *din[4] = {0}, *out[3] = {0}, *dout[3] = {0};
    int n_in = 0;
    tnt_shape shapes[4];
    snprintf(f, sizeof f, "rnn_%s_x", name);
    in[n_in] = tu_load(f, &xs);
    const int64_t B = xs.dim[0], T = xs.dim[1];
    shapes[n_in++] = TNT_SHAPE(xs.dim[1], xs.dim[2]);
    const char *init_names[2] = {"h0", "c0"};
    for (int k = 0; k < 2; k++) {
        snprintf(f, sizeof f, "rnn_%s_%s", name, init_names[k]);
        if (!fixture_exists(f)) continue;
        in[n_in] = tu_load(f, &s);
        shapes[n_in++] = TNT_SHAPE(s.dim[1]);
    }
    snprintf(f, sizeof f, "rnn_%s_mask", name);
    if (fixture_exists(f)) {
        in[n_in] = tu_load(f, &s);
        shapes[n_in++] = TNT_SHAPE(T);
        l->mask_input = true;
    }
    tu_ok(l->ops->build_multi(l, n_in, shapes, &l->out_shape));
    l->out_shapes[0] = l->out_shape;
    for (int k = 0; k < n_in; k++) {
        l->in_shapes[k] = shapes[k];
        din[k] = calloc((size_t)(B * tnt_shape_numel(shapes[k])), sizeof(float));
    }
    l->in_shape = shapes[0];
    for (int i = 0; i < l->n_weights; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)n, sizeof(float));
        l->weights[i].grad = calloc((size_t)n, sizeof(float));
        snprintf(f, sizeof f, "rnn_%s_w%d", name, i);
        load_into(l->weights[i].value, f, n);
    }
    const char *out_names[3] = {"y", "hT", "cT"}, *grad_names[3] = {"dy", "dh", "dc"};
    for (int k = 0; k < l->n_outputs; k++) {
        int64_t n = B * tnt_shape_numel(l->out_shapes[k]);
        out[k] = calloc((size_t)n, sizeof(float));
        snprintf(f, sizeof f, "rnn_%s_%s", name, grad_names[k]);
        if (fixture_exists(f)) dout[k] = tu_load(f, &s);
    }
    void *ws = calloc(1, l->ops->workspace_size(l, NULL, B));
    tnt__fwd_args fa = {.batch = B, .x = in[0], .y = out[0], .n_inputs = n_in, .xs = (const float *const *)in,
                        .n_outputs = l->n_outputs, .ys = out, .workspace = ws, .training = true};
    tu_ok(l->ops->forward(l, NULL, &fa));
    for (int k = 0; k < l->n_outputs; k++) {
        snprintf(f, sizeof f, "rnn_%s_%s", name, out_names[k]);
        check(out[k], f, B * tnt_shape_numel(l->out_shapes[k]), out_names[k]);
    }
    poison_grads(l);
    tnt__bwd_args ba = {.batch = B, .x = in[0], .y = out[0], .dy = dout[0], .dx = din[0], .workspace = ws,
                        .n_inputs = n_in, .xs = (const float *const *)in, .dxs = din, .n_outputs = l->n_outputs,
                        .ys = (const float *const *)out, .dys = (const float *const *)dout};
    tu_ok(l->ops->backward(l, NULL, &ba));
    snprintf(f, sizeof f, "rnn_%s_dx", name);
    check(din[0], f, B * tnt_shape_numel(shapes[0]), "dx");
    for (int k = 1; k < n_in; k++) {
        if (l->mask_input && k == n_in - 1) {
            for (int64_t i = 0; i < B * T; i++) assert_true(din[k][i] == 0.0f); /* the mask has none */
            continue;
        }
        snprintf(f, sizeof f, "rnn_%s_d%s", name, init_names[k - 1]);
        check(din[k], f, B * tnt_shape_numel(shapes[k]), init_names[k - 1]);
    }
    for (int i = 0; i < l->n_weights; i++) {
        snprintf(f, sizeof f, "rnn_%s_dw%d", name, i);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), l->weights[i].name);
    }
    for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
    for (int k = 0; k < 4; k++) free(in[k]), free(din[k]);
    for (int k = 0; k < 3; k++) free(out[k]), free(dout[k]);
    free(ws);
    tnt_layer_free(l);
}

static const tnt_rnn_opts st_last = {.return_state = true}, st_seq = {.return_state = true, .return_sequences = true};

static void test_lstm_state_fixtures(void **state) {
    (void)state;
    state_case("st_lstm", tnt_lstm(3, &st_last));
    state_case("st_lstm_seq", tnt_lstm(3, &st_seq));
    state_case("st_lstm_noinit", tnt_lstm(3, &st_seq));
    state_case("st_lstm_only_states", tnt_lstm(3, &st_last));
    state_case("st_lstm_only_c", tnt_lstm(3, &st_seq));
    state_case("st_lstm_mask_back",
               tnt_lstm(3, &(tnt_rnn_opts){.return_state = true, .return_sequences = true, .go_backwards = true}));
}

static void test_gru_rnn_state_fixtures(void **state) {
    (void)state;
    state_case("st_gru", tnt_gru(3, &st_seq));
    state_case("st_gru_only_h", tnt_gru(7, &st_last));
    state_case("st_gru_mask", tnt_gru(3, &st_last));
    state_case("st_rnn", tnt_simple_rnn(3, &st_seq));
}

/* ---- finite differences over several inputs and outputs ------------------------------------ */

typedef struct multi {
    tnt_layer *l;
    int64_t B;
    int n_in;
    tnt_shape in_shapes[6];
    float *xs[6], *dxs[6], *ys[TNT_MAX_LAYER_OUTPUTS], *rs[TNT_MAX_LAYER_OUTPUTS];
    bool has_r[TNT_MAX_LAYER_OUTPUTS];
    void *plan, *ws;
} multi;

static int64_t nin(const multi *m, int k) { return m->B * tnt_shape_numel(m->in_shapes[k]); }
static int64_t nout(const multi *m, int k) { return m->B * tnt_shape_numel(m->l->out_shapes[k]); }

/* L = sum over the outputs with a gradient of sum(y_k * r_k), in double. */
static double multi_loss(multi *m) {
    tnt__fwd_args a = {.batch = m->B, .x = m->xs[0], .y = m->ys[0], .n_inputs = m->n_in,
                       .xs = (const float *const *)m->xs, .n_outputs = m->l->n_outputs, .ys = m->ys,
                       .workspace = m->ws, .training = true, .seed = 5, .sample_offset = 3};
    tu_ok(m->l->ops->forward(m->l, m->plan, &a));
    double s = 0;
    for (int k = 0; k < m->l->n_outputs; k++)
        for (int64_t i = 0; m->has_r[k] && i < nout(m, k); i++) s += (double)m->ys[k][i] * m->rs[k][i];
    return s;
}

/* Builds l (consumed) on n inputs, runs forward and backward (output k's gradient given when bit
 * k of grads is set, else NULL) and compares every input and weight gradient with central
 * differences. */
static void fd_multi(tnt_layer *l, int n, const tnt_shape *shapes, bool mask, unsigned grads) {
    multi m = {.l = l, .B = 3, .n_in = n + (mask ? 1 : 0)};
    tnt_shape all[6];
    memcpy(all, shapes, (size_t)n * sizeof *shapes);
    if (mask) all[n] = TNT_SHAPE(shapes[0].dim[0]);
    l->mask_input = mask;
    tu_ok(l->ops->build_multi ? l->ops->build_multi(l, m.n_in, all, &l->out_shape)
                              : l->ops->build(l, all[0], &l->out_shape));
    l->out_shapes[0] = l->out_shape;
    l->in_shape = all[0];
    l->n_inputs = m.n_in;
    for (int k = 0; k < m.n_in; k++) {
        l->in_shapes[k] = m.in_shapes[k] = all[k];
        m.xs[k] = calloc((size_t)nin(&m, k), sizeof(float));
        m.dxs[k] = calloc((size_t)nin(&m, k), sizeof(float));
        tu_fill(m.xs[k], nin(&m, k), 21 + (uint64_t)k);
    }
    if (mask) { /* pre-padding on sample 0, a masked last step on sample 1 */
        int64_t T = all[0].dim[0];
        for (int64_t i = 0; i < m.B * T; i++) m.xs[n][i] = (i == 0 || i == 1 || i == 2 * T - 1) ? 0.0f : 1.0f;
    }
    for (int k = 0; k < l->n_outputs; k++) {
        m.ys[k] = calloc((size_t)nout(&m, k), sizeof(float));
        m.rs[k] = calloc((size_t)nout(&m, k), sizeof(float));
        m.has_r[k] = grads >> k & 1u;
        tu_fill(m.rs[k], nout(&m, k), 31 + (uint64_t)k);
    }
    for (int i = 0; i < l->n_weights; i++) {
        int64_t k = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)k, sizeof(float));
        l->weights[i].grad = calloc((size_t)k, sizeof(float));
        tu_fill(l->weights[i].value, k, 41 + (uint64_t)i);
    }
    if (l->ops->plan_create) assert_non_null(m.plan = l->ops->plan_create(l, m.B));
    m.ws = tnt__alloc(l->ops->workspace_size ? l->ops->workspace_size(l, m.plan, m.B) + 64 : 64);
    multi_loss(&m);
    const float *dys[TNT_MAX_LAYER_OUTPUTS];
    for (int k = 0; k < l->n_outputs; k++) dys[k] = m.has_r[k] ? m.rs[k] : NULL;
    tnt__bwd_args a = {.batch = m.B, .x = m.xs[0], .y = m.ys[0], .dy = dys[0], .dx = m.dxs[0], .workspace = m.ws,
                       .n_inputs = m.n_in, .xs = (const float *const *)m.xs, .dxs = m.dxs, .n_outputs = l->n_outputs,
                       .ys = (const float *const *)m.ys, .dys = dys, .sample_offset = 3};
    tu_ok(l->ops->backward(l, m.plan, &a));
    const float h = 1e-2f;
    for (int t = 0; t < n + l->n_weights; t++) { /* the inputs (not the mask), then the weights */
        float *v = t < n ? m.xs[t] : l->weights[t - n].value, *g = t < n ? m.dxs[t] : l->weights[t - n].grad;
        int64_t cnt = t < n ? nin(&m, t) : tnt_shape_numel(l->weights[t - n].shape);
        for (int64_t i = 0; i < cnt; i++) {
            float keep = v[i];
            v[i] = keep + h;
            double lp = multi_loss(&m);
            v[i] = keep - h;
            double lm = multi_loss(&m);
            v[i] = keep;
            double num = (lp - lm) / (2.0 * h);
            if (!(fabs(num - g[i]) <= 2e-2 * fmax(1.0, fabs(num))))
                fail_msg("%s \"%s\": %s %d [%lld]: backward %.6g, finite differences %.6g", l->ops->class_name, l->name,
                         t < n ? "input" : "weight", t < n ? t : t - n, (long long)i, g[i], num);
        }
    }
    if (mask)
        for (int64_t i = 0; i < nin(&m, n); i++) assert_true(m.dxs[n][i] == 0.0f);
    if (m.plan && l->ops->plan_destroy) l->ops->plan_destroy(m.plan);
    tnt__free(m.ws);
    for (int k = 0; k < m.n_in; k++) free(m.xs[k]), free(m.dxs[k]);
    for (int k = 0; k < l->n_outputs; k++) free(m.ys[k]), free(m.rs[k]);
    for (int i = 0; i < l->n_weights; i++) free(l->weights[i].value), free(l->weights[i].grad);
    tnt_layer_free(l);
}

static void test_finite_differences(void **state) {
    (void)state;
    tnt_shape lstm_in[3] = {TNT_SHAPE(4, 3), TNT_SHAPE(3), TNT_SHAPE(3)};
    tnt_rnn_opts o = {.return_state = true, .return_sequences = true, .dropout = 0.3f, .recurrent_dropout = 0.4f};
    fd_multi(tnt_lstm(3, &o), 3, lstm_in, false, 7u);
    fd_multi(tnt_lstm(3, &o), 3, lstm_in, true, 6u); /* masked, output 0 unread */
    fd_multi(tnt_gru(3, &o), 2, lstm_in, false, 3u);
    o.reset_before = true, o.go_backwards = true;
    fd_multi(tnt_gru(3, &o), 2, lstm_in, true, 2u);
    fd_multi(tnt_simple_rnn(3, &(tnt_rnn_opts){.return_state = true}), 2, lstm_in, false, 3u);
    /* initial states without return_state, and return_state without initial states */
    fd_multi(tnt_lstm(3, &(tnt_rnn_opts){.go_backwards = true}), 3, lstm_in, false, 1u);
    fd_multi(tnt_gru(3, &(tnt_rnn_opts){.return_state = true}), 1, lstm_in, false, 2u);
}

static void test_bidirectional_finite_differences(void **state) {
    (void)state;
    tnt_shape in[5] = {TNT_SHAPE(4, 3), TNT_SHAPE(2), TNT_SHAPE(2), TNT_SHAPE(2), TNT_SHAPE(2)};
    /* merge_mode None: two outputs, either may be unread */
    fd_multi(tnt_bidirectional(tnt_lstm(2, &(tnt_rnn_opts){.return_sequences = true}), NULL, TNT_MERGE_NONE, NULL), 1,
             in, true, 3u);
    fd_multi(tnt_bidirectional(tnt_gru(2, NULL), NULL, TNT_MERGE_NONE, NULL), 1, in, false, 2u);
    /* return_state: output, forward h c, backward h c; initial states in the same order */
    tnt_layer *b = tnt_bidirectional(tnt_lstm(2, &(tnt_rnn_opts){.return_state = true}), NULL, TNT_MERGE_CONCAT, NULL);
    assert_int_equal(b->n_outputs, 5);
    fd_multi(b, 5, in, false, 0x1Bu);
    b = tnt_bidirectional(tnt_gru(2, &(tnt_rnn_opts){.return_state = true, .return_sequences = true}), NULL,
                          TNT_MERGE_NONE, NULL);
    assert_int_equal(b->n_outputs, 4);
    fd_multi(b, 3, in, true, 0xEu);
}

static void test_conv_lstm2d(void **state) {
    (void)state;
    tnt_conv_lstm_opts o = {.rnn = {.return_state = true, .return_sequences = true}, .padding = TNT_PADDING_SAME};
    tnt_shape in = TNT_SHAPE(3, 3, 2, 2);
    tnt_layer *l = tnt_conv_lstm2d(2, 2, 2, &o);
    assert_int_equal(l->n_outputs, 3);
    fd_multi(l, 1, &in, false, 7u);
    o.rnn.return_sequences = false, o.rnn.dropout = 0.3f, o.rnn.recurrent_dropout = 0.4f, o.rnn.go_backwards = true;
    fd_multi(tnt_conv_lstm2d(2, 2, 2, &o), 1, &in, false, 6u);
    o.rnn.return_state = false;
    fd_multi(tnt_conv_lstm2d(2, 2, 2, &o), 1, &in, false, 1u);
    /* in Bidirectional: merge_mode None, then both directions' h and c */
    o = (tnt_conv_lstm_opts){.rnn = {.return_state = true}, .padding = TNT_PADDING_SAME};
    tnt_layer *b = tnt_bidirectional(tnt_conv_lstm2d(2, 2, 2, &o), NULL, TNT_MERGE_NONE, NULL);
    assert_int_equal(b->n_outputs, 6);
    fd_multi(b, 1, &in, false, 0x2Du);
}

/* ConvLSTM2D with return_state on the PyTorch fixtures of test_layers_cf.c (gen_layers_cf.py,
 * which also writes the final cell state cT): y as without return_state, h the last step's (the
 * last one processed with go_backwards), c the fixture's cT; backward with dy only equals the
 * fixture's gradients. */
static void clstm_state_case(const char *name, tnt_layer *l) {
    char f[128];
    tnt_shape xs;
    snprintf(f, sizeof f, "%s_x", name);
    float *x = tu_load(f, &xs);
    tnt_shape in = {.ndim = xs.ndim - 1};
    for (int i = 1; i < xs.ndim; i++) in.dim[i - 1] = xs.dim[i];
    const int64_t B = xs.dim[0];
    tu_ok(l->ops->build(l, in, &l->out_shape));
    l->in_shape = l->in_shapes[0] = in, l->out_shapes[0] = l->out_shape;
    assert_int_equal(l->n_outputs, 3);
    for (int i = 0; i < 3; i++) {
        int64_t n = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)n, sizeof(float));
        l->weights[i].grad = calloc((size_t)n, sizeof(float));
        snprintf(f, sizeof f, "%s_w%d", name, i);
        load_into(l->weights[i].value, f, n);
    }
    void *plan = l->ops->plan_create(l, B);
    assert_non_null(plan);
    void *ws = tnt__alloc(l->ops->workspace_size(l, plan, B) + 64);
    float *ys[3], *dx = calloc((size_t)(B * tnt_shape_numel(in)), sizeof(float));
    for (int k = 0; k < 3; k++) ys[k] = calloc((size_t)(B * tnt_shape_numel(l->out_shapes[k])), sizeof(float));
    tnt__fwd_args a = {.batch = B, .x = x, .xs = (const float *const *)&x, .n_inputs = 1, .y = ys[0], .ys = ys,
                       .n_outputs = 3, .workspace = ws, .training = true};
    tu_ok(l->ops->forward(l, plan, &a));
    const int64_t n0 = B * tnt_shape_numel(l->out_shape), ns = B * tnt_shape_numel(l->out_shapes[1]);
    snprintf(f, sizeof f, "%s_y", name);
    check(ys[0], f, n0, "y");
    snprintf(f, sizeof f, "%s_cT", name);
    check(ys[2], f, ns, "c");
    const tnt__rnn *r = tnt__rnn_of(l);
    int64_t T = in.dim[0], per = ns / B;
    for (int64_t b = 0; b < B; b++) /* h is y's last step (y itself without return_sequences) */
        tu_assert_close(ys[1] + b * per, ys[0] + (r->return_sequences ? (b * T + T - 1) * per : b * per), per, 0, 0, "h");
    float *dy = calloc((size_t)n0, sizeof(float));
    snprintf(f, sizeof f, "%s_dy", name);
    load_into(dy, f, n0);
    const float *dys[3] = {dy, NULL, NULL};
    tnt__bwd_args ba = {.batch = B, .x = x, .xs = (const float *const *)&x, .n_inputs = 1, .dy = dy, .dx = dx,
                        .dxs = &dx, .n_outputs = 3, .ys = (const float *const *)ys, .dys = dys, .workspace = ws};
    tu_ok(l->ops->backward(l, plan, &ba));
    snprintf(f, sizeof f, "%s_dx", name);
    check(dx, f, B * tnt_shape_numel(in), "dx");
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s_dw%d", name, i);
        check(l->weights[i].grad, f, tnt_shape_numel(l->weights[i].shape), l->weights[i].name);
        free(l->weights[i].value), free(l->weights[i].grad);
    }
    l->ops->plan_destroy(plan);
    tnt__free(ws);
    for (int k = 0; k < 3; k++) free(ys[k]);
    free(x), free(dx), free(dy);
    tnt_layer_free(l);
}

static void test_conv_lstm2d_state_fixtures(void **state) {
    (void)state;
    tnt_conv_lstm_opts o = {.rnn = {.return_sequences = true, .return_state = true}, .padding = TNT_PADDING_SAME};
    clstm_state_case("clstm_seq", tnt_conv_lstm2d(3, 3, 2, &o));
    o = (tnt_conv_lstm_opts){.rnn = {.go_backwards = true, .recurrent_activation = "hard_sigmoid", .return_state = true}};
    tnt_layer *l = tnt_conv_lstm2d(2, 3, 3, &o);
    tu_ok(tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST));
    clstm_state_case("clstm_back_cf", l);
    o = (tnt_conv_lstm_opts){.rnn = {.go_backwards = true, .return_sequences = true, .activation = "relu",
                                     .return_state = true},
                             .strides = {2, 2}, .padding = TNT_PADDING_SAME};
    clstm_state_case("clstm_s2", tnt_conv_lstm2d(2, 2, 2, &o));
}

/* ConvLSTM2D dropout: the masks follow the global sample index (one batch of 4 equals two of 2
 * at offsets 0 and 2), dropout changes the training output, and inference ignores it. */
static void test_conv_lstm2d_dropout_split(void **state) {
    (void)state;
    tnt_conv_lstm_opts o = {.rnn = {.return_sequences = true, .dropout = 0.4f, .recurrent_dropout = 0.3f},
                            .padding = TNT_PADDING_SAME};
    tnt_shape in = TNT_SHAPE(3, 3, 2, 2);
    drv d4, d2;
    drv_init(&d4, tnt_conv_lstm2d(2, 2, 2, &o), in, 4);
    /* the same layer (and weights) on batches of 2: drv_init builds again, so its weight arrays
     * replace those of d4, which are freed here */
    float *old[3];
    for (int i = 0; i < 3; i++) old[i] = d4.l->weights[i].value, free(d4.l->weights[i].grad);
    drv_init(&d2, d4.l, in, 2);
    for (int i = 0; i < 3; i++) free(old[i]);
    for (int i = 0; i < d4.l->n_weights; i++)
        tu_fill(d4.l->weights[i].value, tnt_shape_numel(d4.l->weights[i].shape), 7 + (uint64_t)i);
    tu_fill(d4.x, in_numel(&d4), 3);
    tnt__fwd_args a = {.batch = 4, .x = d4.x, .y = d4.y, .workspace = d4.ws, .training = true, .seed = 11};
    tu_ok(d4.l->ops->forward(d4.l, d4.plan, &a));
    const int64_t half = out_numel(&d2);
    for (int part = 0; part < 2; part++) {
        memcpy(d2.x, d4.x + part * in_numel(&d2), (size_t)in_numel(&d2) * sizeof(float));
        tnt__fwd_args b = {.batch = 2, .x = d2.x, .y = d2.y, .workspace = d2.ws, .training = true, .seed = 11,
                           .sample_offset = 2 * part};
        tu_ok(d2.l->ops->forward(d2.l, d2.plan, &b));
        /* the masks must match (else ~1e-1 apart); the convolutions' blocking may depend on the
         * batch size on some ISAs, so within 1e-6 rather than bit for bit */
        tu_assert_close(d2.y, d4.y + part * half, half, 0, 1e-6, "split batch equals whole batch");
    }
    float *train = malloc((size_t)out_numel(&d4) * sizeof(float));
    memcpy(train, d4.y, (size_t)out_numel(&d4) * sizeof(float));
    a.training = false;
    tu_ok(d4.l->ops->forward(d4.l, d4.plan, &a));
    bool differs = false;
    for (int64_t i = 0; i < out_numel(&d4); i++) differs |= train[i] != d4.y[i];
    assert_true(differs);
    free(train);
    drv_free(&d2, false);
    drv_free(&d4, true);
}

/* ---- Keras JSON ---------------------------------------------------------------------------- */

/* ConvLSTM2D's and GRU's return_state, dropout and recurrent_dropout survive a JSON round trip; a
 * Keras Sequential model with a return_state layer is refused, naming it. */
static void test_json(void **state) {
    (void)state;
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor in = tnt_graph_input(g, TNT_SHAPE(3, 4, 4, 2), "frames"), o[3], r[2];
    tnt_conv_lstm_opts co = {.rnn = {.return_state = true, .dropout = 0.25f, .recurrent_dropout = 0.5f, .name = "clstm"},
                             .padding = TNT_PADDING_SAME};
    assert_int_equal(tnt_call_outputs(g, tnt_conv_lstm2d(2, 3, 3, &co), 1, &in, 3, o), 3);
    tnt_ktensor flat = tnt_call(g, tnt_flatten(NULL), o[2]);
    tnt_ktensor seq = tnt_call(g, tnt_reshape(TNT_SHAPE(4, 8), NULL), flat);
    assert_int_equal(tnt_call_outputs(g, tnt_gru(3, &(tnt_rnn_opts){.return_state = true, .recurrent_dropout = 0.2f,
                                                                     .name = "gru"}),
                                      1, &seq, 2, r), 2);
    tnt_model *m = tnt_functional(g, 1, &in, 2, (tnt_ktensor[]){o[1], r[1]}, NULL);
    tnt_graph_free(g);
    assert_non_null(m);
    char *a = NULL, *b = NULL;
    tu_ok(tnt_model_to_json(m, &a));
    assert_non_null(strstr(a, "\"return_state\":true"));
    assert_non_null(strstr(a, "\"dropout\":0.25,\"recurrent_dropout\":0.5"));
    assert_non_null(strstr(a, "[[[\"clstm\",0,2,{}]]]"));
    assert_non_null(strstr(a, "\"output_layers\":[[\"clstm\",0,1],[\"gru\",0,1]]"));
    tnt_model *r2 = tnt_model_from_json(a);
    assert_non_null(r2);
    tu_ok(tnt_model_to_json(r2, &b));
    assert_string_equal(a, b);
    free(a), free(b);
    tnt_model_free(m), tnt_model_free(r2);
    static const char *seq_json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"LSTM\","
        " \"config\": {\"name\": \"enc\", \"units\": 3, \"return_state\": true, \"batch_input_shape\": [null, 4, 2]}}]}}";
    assert_null(tnt_model_from_json(seq_json));
    tu_error_contains("layer \"enc\" (LSTM) has 3 outputs");
}

/* ---- errors -------------------------------------------------------------------------------- */

static void test_errors(void **state) {
    (void)state;
    tnt_layer *l = tnt_lstm(3, &st_last);
    tnt_shape out, in[2] = {TNT_SHAPE(4, 2), TNT_SHAPE(3)};
    assert_int_equal(l->ops->build_multi(l, 2, in, &out), TNT_ERR_ARG); /* h0 without c0 */
    tu_error_contains("expected the sequence, then 2 initial states or none");
    in[1] = TNT_SHAPE(4);
    tnt_layer_free(l);
    l = tnt_gru(3, NULL);
    assert_int_equal(l->ops->build_multi(l, 2, in, &out), TNT_ERR_SHAPE);
    tu_error_contains("initial state 0 has shape (4,) (expected (3): the units)");
    tnt_layer_free(l);
    /* a Sequential model's layers have one output */
    tnt_model *m = tnt_sequential(NULL);
    assert_int_equal(tnt_model_add(m, tnt_lstm(3, &st_last)), TNT_ERR_ARG);
    tu_error_contains("has 3 outputs");
    tnt_model_free(m);
    /* ConvLSTM2D takes no initial state */
    tnt_graph *g = tnt_graph_new();
    tnt_ktensor x = tnt_graph_input(g, TNT_SHAPE(2, 4, 4, 1), NULL), h = tnt_graph_input(g, TNT_SHAPE(4, 4, 2), NULL);
    tnt_ktensor outs[3];
    assert_int_equal(tnt_call_outputs(g, tnt_conv_lstm2d(2, 3, 3, &(tnt_conv_lstm_opts){.padding = TNT_PADDING_SAME}),
                                      2, (tnt_ktensor[]){x, h}, 3, outs), -1);
    tu_error_contains("ConvLSTM2D");
    tnt_graph_free(g);
    assert_null(tnt_bidirectional(tnt_lstm(3, &st_last), tnt_lstm(3, &(tnt_rnn_opts){.go_backwards = true}),
                                  TNT_MERGE_NONE, NULL));
    tu_error_contains("differ in return_state");
    assert_null(tnt_time_distributed(tnt_gru(3, &st_last), NULL));
    tu_error_contains("TimeDistributed: the inner layer has several outputs (return_state)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_state_fixtures),
        cmocka_unit_test(test_gru_rnn_state_fixtures),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_bidirectional_finite_differences),
        cmocka_unit_test(test_conv_lstm2d),
        cmocka_unit_test(test_conv_lstm2d_state_fixtures),
        cmocka_unit_test(test_conv_lstm2d_dropout_split),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
