/* conv_lstm2d.c: Keras ConvLSTM2D: an LSTM whose input and recurrent transforms are 2-D
 * convolutions. Input (T, H, W, C) (channels first: (T, C, H, W)); per step, with * a convolution,
 *   z = x_t * kernel + bias + h_{t-1} * recurrent_kernel          (4F channels: gates i f c o)
 *   i, f, o = rec_act(z_i, z_f, z_o), g = act(z_c), c = f c_{t-1} + i g, h = o act(c)
 * The input convolution has the layer's strides, padding and dilation; the recurrent one is "same"
 * with stride 1, as in Keras. Output (T, H', W', F) with return_sequences (in processing order, as
 * Keras with go_backwards), else the last h (H', W', F); channels first (T, F, H', W') / (F, H', W').
 * Weights as Keras: kernel (kh, kw, C, 4F), recurrent_kernel (kh, kw, F, 4F), bias (4F).
 *
 * The convolutions run on two inner Conv2D layers of the engine (conv2d.h), whose weights point at
 * this layer's: the input one once on all B*T steps (the input (B, T, ...) is (B*T, ...) in memory),
 * the recurrent one per step on the B previous states. Backward through time keeps each step's
 * gate gradients; the recurrent convolution's data gradient runs per step, and both weight
 * gradients (and dx) run once over all steps afterwards. The elementwise cell is the LSTM's
 * (rnn_common.h activations). dropout scales the input (one mask per sample over (H, W, C), the
 * same at every step), recurrent_dropout the state the recurrent convolution reads (one mask per
 * sample over (H', W', F)), both drawn per global sample index as the LSTM's. return_state adds
 * the final h and c as outputs 1 and 2. Masks and initial states are not supported (a mask is
 * dropped as by any layer without masking). */
#include "layers/convolutional/conv2d.h"
#include "layers/keras_config.h"
#include "layers/recurrent/rnn_common.h"

#include <stdio.h>

typedef struct clstm {
    tnt__rnn r; /* first: the recurrent flags Bidirectional reads (tnt__rnn_of); units = filters */
    int filters, kh, kw, sh, sw, dh, dw;
    tnt_padding padding;
    tnt_layer *xconv, *hconv; /* inner Conv2D layers: input (4F, bias) and recurrent (4F, same, no bias) */
    int64_t T, P;             /* from build: steps and output cells H' * W' */
    int64_t in_step;          /* from build: input values per step H * W * C */
} clstm;

extern const tnt__layer_ops tnt__conv_lstm2d_ops;

static tnt_status clstm_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    clstm *c = l->priv;
    char b[96];
    if (in.ndim != 4)
        return tnt__error(TNT_ERR_SHAPE, "ConvLSTM2D \"%s\": input shape %s has rank %d (expected 4: timesteps, %s)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim,
                          l->channels_first ? "channels, height, width" : "height, width, channels");
    tnt_shape step = {.ndim = 3, .dim = {in.dim[1], in.dim[2], in.dim[3]}}, mid, hout;
    tnt_status s;
    snprintf(c->xconv->name, sizeof c->xconv->name, "%s", l->name);
    snprintf(c->hconv->name, sizeof c->hconv->name, "%s", l->name);
    if ((s = c->xconv->ops->build(c->xconv, step, &mid)) != TNT_OK)
        return tnt__error_prefix(s, "ConvLSTM2D \"%s\": ", l->name);
    c->xconv->in_shape = step, c->xconv->out_shape = mid;
    const tnt__conv_cfg *xc = c->xconv->priv;
    int64_t oh = xc->oh, ow = xc->ow, F = c->filters;
    tnt_shape hs = tnt__conv_output(l, 2, (int64_t[]){oh, ow}, F);
    if ((s = c->hconv->ops->build(c->hconv, hs, &hout)) != TNT_OK)
        return tnt__error_prefix(s, "ConvLSTM2D \"%s\": ", l->name);
    c->hconv->in_shape = hs, c->hconv->out_shape = hout;
    c->T = in.dim[0];
    c->P = oh * ow;
    c->in_step = tnt_shape_numel(step);
    int64_t k2 = (int64_t)c->kh * c->kw, cin = xc->ic;
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", TNT_SHAPE(c->kh, c->kw, cin, 4 * F), c->r.kernel_init, k2 * cin, k2 * 4 * F) < 0 ||
        tnt__layer_add_weight(l, "recurrent_kernel", TNT_SHAPE(c->kh, c->kw, F, 4 * F), c->r.recurrent_init, k2 * F,
                              k2 * 4 * F) < 0)
        return TNT_ERR_ARG;
    if (c->r.use_bias) {
        /* unit_forget_bias: ones on the forget gate's slice [F, 2F) */
        bool ufb = c->r.unit_forget_bias;
        int bi = tnt__layer_add_weight(l, "bias", TNT_SHAPE(4 * F), ufb ? TNT__INIT_UNIT_FORGET_BIAS : c->r.bias_init,
                                       ufb ? F : 0, ufb ? 2 * F : 0);
        if (bi < 0) return TNT_ERR_ARG;
        l->weights[bi].ufb_base = c->r.bias_init;
    }
    l->out_shapes[1] = l->out_shapes[2] = hs; /* return_state: h and c */
    if (c->r.return_sequences) {
        *out = (tnt_shape){.ndim = 4, .dim = {c->T}};
        for (int i = 0; i < 3; i++) out->dim[i + 1] = hs.dim[i];
    } else {
        *out = hs;
    }
    return TNT_OK;
}

/* ---- plan and workspace ------------------------------------------------------------------- */

typedef struct clstm_plan {
    const clstm *c;
    void *x_all; /* xconv on batch * T */
    void *h_one; /* hconv on batch (one step) */
    void *h_all; /* hconv on batch * T (its weight gradient) */
} clstm_plan;

static void clstm_plan_destroy(void *plan) {
    clstm_plan *p = plan;
    if (!p) return;
    if (p->x_all) tnt__conv_plan_destroy(p->x_all);
    if (p->h_one) tnt__conv_plan_destroy(p->h_one);
    if (p->h_all) tnt__conv_plan_destroy(p->h_all);
    free(p);
}

static void *clstm_plan_create(tnt_layer *l, int64_t batch) {
    clstm *c = l->priv;
    clstm_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->c = c;
    if (!(p->x_all = tnt__conv_plan_create(c->xconv, batch * c->T)) || !(p->h_one = tnt__conv_plan_create(c->hconv, batch)) ||
        !(p->h_all = tnt__conv_plan_create(c->hconv, batch * c->T))) {
        tnt__error_prefix(TNT_ERR_BACKEND, "ConvLSTM2D \"%s\": ", l->name);
        clstm_plan_destroy(p);
        return NULL;
    }
    return p;
}

typedef struct clstm_ws {
    float *z;        /* (B, T, 4FP): gate pre-activations, then values, then gradients */
    float *cs, *ac;  /* (B, T, FP): cell state after each step and act(c) */
    float *h;        /* (B, T, FP): the state after each step */
    float *p;        /* (B, T, FP): the state each step's recurrent convolution read (0 at the first) */
    float *hp, *zh;  /* (B, FP), (B, 4FP): one step's previous state and recurrent convolution */
    float *dh, *dc;  /* (B, FP) backward carries */
    float *wx, *w1, *wall; /* the inner convolutions' workspaces (channels first: their copies) */
    float *flags;    /* [0]: input dropout applied, [1]: recurrent dropout applied */
    float *xd, *xmask, *rmask; /* dropout: (B, T, HWC) dropped input, (B, HWC), (B, FP) scales */
} clstm_ws;

static size_t clstm_layout(const clstm *c, int64_t B, void *base, clstm_ws *w) {
    const int64_t n = c->filters * c->P, BT = B * c->T, f = (int64_t)sizeof(float);
    const int64_t sizes[] = {BT * 4 * n, BT * n, BT * n, BT * n, BT * n, B * n, B * 4 * n, B * n, B * n,
                             (int64_t)tnt__conv_workspace_size(c->xconv, NULL, BT) / f + 1,
                             (int64_t)tnt__conv_workspace_size(c->hconv, NULL, B) / f + 1,
                             (int64_t)tnt__conv_workspace_size(c->hconv, NULL, BT) / f + 1, 2,
                             c->r.dropout > 0 ? BT * c->in_step : 0, c->r.dropout > 0 ? B * c->in_step : 0,
                             c->r.recurrent_dropout > 0 ? B * n : 0};
    float **fields[] = {&w->z, &w->cs, &w->ac, &w->h, &w->p, &w->hp, &w->zh, &w->dh, &w->dc, &w->wx, &w->w1, &w->wall,
                        &w->flags, &w->xd, &w->xmask, &w->rmask};
    size_t off = 0;
    for (size_t i = 0; i < TNT_ARRAY_LEN(sizes); i++) {
        if (base) *fields[i] = (float *)((char *)base + off);
        off += ((size_t)sizes[i] * sizeof(float) + 63) / 64 * 64;
    }
    return off;
}

static size_t clstm_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    clstm_ws w;
    return clstm_layout(l->priv, batch, NULL, &w);
}

/* Points the inner convolutions' weights at this layer's. */
static void clstm_bind(tnt_layer *l) {
    clstm *c = l->priv;
    c->xconv->weights[0].value = l->weights[0].value, c->xconv->weights[0].grad = l->weights[0].grad;
    c->hconv->weights[0].value = l->weights[1].value, c->hconv->weights[0].grad = l->weights[1].grad;
    if (c->r.use_bias) c->xconv->weights[1].value = l->weights[2].value, c->xconv->weights[1].grad = l->weights[2].grad;
}

/* Index in a step's gate block (4FP) of gate g for state value j (of FP, in the state's layout):
 * channels last (P, 4F) against (P, F); channels first (4F, P) against (F, P). */
static inline int64_t zidx(bool cf, int64_t F, int64_t P, int g, int64_t j) {
    return cf ? g * F * P + j : (j / F) * 4 * F + g * F + j % F;
}

/* ---- forward ------------------------------------------------------------------------------ */

static tnt_status clstm_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    clstm *c = l->priv;
    clstm_plan *pl = plan;
    clstm_ws w;
    const int64_t B = a->batch, T = c->T, F = c->filters, P = c->P, n = F * P;
    const bool cf = l->channels_first;
    tnt_status s;
    clstm_layout(c, B, a->workspace, &w);
    clstm_bind(l);
    uint64_t seed = tnt__hash64(l->seed ^ a->seed);
    bool drop_in = a->training && c->r.dropout > 0, drop_rec = a->training && c->r.recurrent_dropout > 0;
    w.flags[0] = drop_in, w.flags[1] = drop_rec;
    const float *xin = a->x;
    if (drop_in) { /* one mask per sample, the same at every step */
        const int64_t m = c->in_step;
        tnt__rnn_dropout_scales(w.xmask, B, m, c->r.dropout, seed, a->sample_offset);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < T * m; i++) w.xd[b * T * m + i] = a->x[b * T * m + i] * w.xmask[b * m + i % m];
        xin = w.xd;
    }
    if (drop_rec)
        tnt__rnn_dropout_scales(w.rmask, B, n, c->r.recurrent_dropout, tnt__hash64(seed ^ 0x5EC0DEull), a->sample_offset);
    tnt__fwd_args xa = {.batch = B * T, .x = xin, .n_inputs = 1, .xs = &xin, .y = w.z, .training = a->training,
                        .workspace = w.wx};
    if ((s = tnt__conv_forward(c->xconv, pl->x_all, &xa)) != TNT_OK) return s;
    int64_t tprev = -1;
    for (int64_t st = 0; st < T; st++) {
        int64_t t = c->r.go_backwards ? T - 1 - st : st;
        for (int64_t b = 0; b < B; b++) {
            float *pb = w.p + (b * T + t) * n;
            if (tprev < 0) memset(pb, 0, (size_t)n * sizeof(float));
            else memcpy(pb, w.h + (b * T + tprev) * n, (size_t)n * sizeof(float));
            for (int64_t j = 0; drop_rec && j < n; j++) pb[j] *= w.rmask[b * n + j];
            memcpy(w.hp + b * n, pb, (size_t)n * sizeof(float));
        }
        if (tprev >= 0) { /* the first step's recurrent term is zero */
            const float *hp = w.hp;
            tnt__fwd_args ha = {.batch = B, .x = hp, .n_inputs = 1, .xs = &hp, .y = w.zh, .training = a->training,
                                .workspace = w.w1};
            if ((s = tnt__conv_forward(c->hconv, pl->h_one, &ha)) != TNT_OK) return s;
            for (int64_t b = 0; b < B; b++) {
                float *z = w.z + (b * T + t) * 4 * n;
                const float *zh = w.zh + b * 4 * n;
                for (int64_t i = 0; i < 4 * n; i++) z[i] += zh[i];
            }
        }
        for (int64_t b = 0; b < B; b++) {
            float *z = w.z + (b * T + t) * 4 * n, *cs = w.cs + (b * T + t) * n, *ac = w.ac + (b * T + t) * n;
            float *h = w.h + (b * T + t) * n;
            const float *cp = tprev >= 0 ? w.cs + (b * T + tprev) * n : NULL;
            /* the gates are contiguous runs in either layout: activate the whole block per gate */
            if (cf) {
                tnt__rnn_act_apply(c->r.rec_act, z, 2 * n);
                tnt__rnn_act_apply(c->r.act, z + 2 * n, n);
                tnt__rnn_act_apply(c->r.rec_act, z + 3 * n, n);
            } else {
                for (int64_t q = 0; q < P; q++) {
                    float *zq = z + q * 4 * F;
                    tnt__rnn_act_apply(c->r.rec_act, zq, 2 * F);
                    tnt__rnn_act_apply(c->r.act, zq + 2 * F, F);
                    tnt__rnn_act_apply(c->r.rec_act, zq + 3 * F, F);
                }
            }
            for (int64_t j = 0; j < n; j++) {
                float i = z[zidx(cf, F, P, 0, j)], f = z[zidx(cf, F, P, 1, j)], g = z[zidx(cf, F, P, 2, j)];
                cs[j] = f * (cp ? cp[j] : 0.0f) + i * g;
            }
            memcpy(ac, cs, (size_t)n * sizeof(float));
            tnt__rnn_act_apply(c->r.act, ac, n);
            for (int64_t j = 0; j < n; j++) h[j] = z[zidx(cf, F, P, 3, j)] * ac[j];
        }
        tprev = t;
    }
    for (int64_t b = 0; b < B; b++) /* every step in processing order, or the last */
        for (int64_t st = c->r.return_sequences ? 0 : T - 1; st < T; st++) {
            int64_t t = c->r.go_backwards ? T - 1 - st : st;
            memcpy(a->y + (c->r.return_sequences ? (b * T + st) * n : b * n), w.h + (b * T + t) * n, (size_t)n * sizeof(float));
        }
    const int64_t tlast = c->r.go_backwards ? 0 : T - 1; /* return_state: the final h and c */
    for (int k = 1; k < a->n_outputs; k++)
        for (int64_t b = 0; b < B; b++)
            memcpy(a->ys[k] + b * n, (k == 1 ? w.h : w.cs) + (b * T + tlast) * n, (size_t)n * sizeof(float));
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(B * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

/* ---- backward ----------------------------------------------------------------------------- */

static tnt_status clstm_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    clstm *c = l->priv;
    clstm_plan *pl = plan;
    clstm_ws w;
    const int64_t B = a->batch, T = c->T, F = c->filters, P = c->P, n = F * P;
    const bool cf = l->channels_first;
    tnt_status s;
    clstm_layout(c, B, a->workspace, &w);
    clstm_bind(l);
    bool drop_in = w.flags[0] != 0.0f, drop_rec = w.flags[1] != 0.0f;
    /* the carries start from the final states' gradients (return_state), else zeros */
    const float *dhT = a->n_outputs > 1 && a->dys ? a->dys[1] : NULL, *dcT = a->n_outputs > 2 && a->dys ? a->dys[2] : NULL;
    if (dhT) memcpy(w.dh, dhT, (size_t)(B * n) * sizeof(float));
    else memset(w.dh, 0, (size_t)(B * n) * sizeof(float));
    if (dcT) memcpy(w.dc, dcT, (size_t)(B * n) * sizeof(float));
    else memset(w.dc, 0, (size_t)(B * n) * sizeof(float));
    for (int64_t st = T - 1; st >= 0; st--) {
        int64_t t = c->r.go_backwards ? T - 1 - st : st;
        int64_t tprev = st == 0 ? -1 : c->r.go_backwards ? t + 1 : t - 1;
        for (int64_t b = 0; b < B; b++) {
            const float *dy = !a->dy                ? NULL
                              : c->r.return_sequences ? a->dy + (b * T + st) * n
                              : st == T - 1           ? a->dy + b * n
                                                      : NULL;
            float *dh = w.dh + b * n, *dc = w.dc + b * n, *z = w.z + (b * T + t) * 4 * n;
            const float *ac = w.ac + (b * T + t) * n, *cp = tprev >= 0 ? w.cs + (b * T + tprev) * n : NULL;
            for (int64_t j = 0; j < n; j++) {
                float g_h = dh[j] + (dy ? dy[j] : 0.0f);
                int64_t ii = zidx(cf, F, P, 0, j), fi = zidx(cf, F, P, 1, j), gi = zidx(cf, F, P, 2, j),
                        oi = zidx(cf, F, P, 3, j);
                float i = z[ii], f = z[fi], g = z[gi], o = z[oi];
                float dct = dc[j] + g_h * o * tnt__rnn_act_grad(c->r.act, ac[j]);
                z[oi] = g_h * ac[j] * tnt__rnn_act_grad(c->r.rec_act, o);
                z[ii] = dct * g * tnt__rnn_act_grad(c->r.rec_act, i);
                z[fi] = dct * (cp ? cp[j] : 0.0f) * tnt__rnn_act_grad(c->r.rec_act, f);
                z[gi] = dct * i * tnt__rnn_act_grad(c->r.act, g);
                dc[j] = dct * f;
            }
        }
        if (tprev < 0) continue; /* the initial state is a constant */
        for (int64_t b = 0; b < B; b++) memcpy(w.zh + b * 4 * n, w.z + (b * T + t) * 4 * n, (size_t)(4 * n) * sizeof(float));
        /* dh_prev = the recurrent convolution's data gradient (LSTM's h has no direct path) */
        if ((s = tnt__conv_backward_data(c->hconv, pl->h_one, w.zh, w.dh, w.w1)) != TNT_OK) return s;
        for (int64_t i = 0; drop_rec && i < B * n; i++) w.dh[i] *= w.rmask[i];
    }
    /* weight gradients and dx over all steps at once: z now holds the gate gradients */
    const float *p = w.p;
    tnt__bwd_args hb = {.batch = B * T, .x = p, .n_inputs = 1, .xs = &p, .dy = w.z, .workspace = w.wall};
    if ((s = tnt__conv_backward(c->hconv, pl->h_all, &hb)) != TNT_OK) return s;
    float *dx = a->dx;
    const float *xin = drop_in ? w.xd : a->x;
    tnt__bwd_args xb = {.batch = B * T, .x = xin, .n_inputs = 1, .xs = &xin, .dy = w.z, .dx = dx, .dxs = &dx,
                        .workspace = w.wx};
    if ((s = tnt__conv_backward(c->xconv, pl->x_all, &xb)) != TNT_OK) return s;
    const int64_t m = c->in_step;
    if (dx && drop_in)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < T * m; i++) dx[b * T * m + i] *= w.xmask[b * m + i % m];
    return TNT_OK;
}

/* ---- Keras config ------------------------------------------------------------------------- */

static void clstm_destroy(tnt_layer *l) {
    clstm *c = l->priv;
    tnt_layer_free(c->xconv);
    tnt_layer_free(c->hconv);
    free(c);
}

static tnt_status clstm_set_data_format(tnt_layer *l, bool channels_first) {
    clstm *c = l->priv;
    l->channels_first = c->xconv->channels_first = c->hconv->channels_first = channels_first;
    return TNT_OK;
}

static const char *const clstm_nulls[] = {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                                          "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                                          "bias_constraint", NULL};

static tnt_status clstm_get_config(const tnt_layer *l, cJSON *c) {
    const clstm *k = l->priv;
    TNT_KJ(cJSON_AddBoolToObject(c, "return_sequences", k->r.return_sequences));
    TNT_KJ(cJSON_AddBoolToObject(c, "return_state", k->r.return_state));
    TNT_KJ(cJSON_AddBoolToObject(c, "go_backwards", k->r.go_backwards));
    TNT_KJ(cJSON_AddBoolToObject(c, "stateful", false));
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", k->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", 2, (int[]){k->kh, k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 2, (int[]){k->sh, k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", 2, (int[]){k->dh, k->dw}));
    TNT_KJ(cJSON_AddStringToObject(c, "activation", tnt__rnn_act_name(k->r.act)));
    TNT_KJ(cJSON_AddStringToObject(c, "recurrent_activation", tnt__rnn_act_name(k->r.rec_act)));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->r.use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", k->r.kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "recurrent_initializer", k->r.recurrent_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->r.bias_init));
    TNT_KJ(cJSON_AddBoolToObject(c, "unit_forget_bias", k->r.unit_forget_bias));
    TNT_KJ_S(tnt__kj_add_nulls(c, clstm_nulls));
    TNT_KJ(cJSON_AddNumberToObject(c, "dropout", tnt__kj_f(k->r.dropout)));
    TNT_KJ(cJSON_AddNumberToObject(c, "recurrent_dropout", tnt__kj_f(k->r.recurrent_dropout)));
    return TNT_OK;
}

static tnt_layer *clstm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_conv_lstm_opts o = {.rnn.name = k->name};
    static const int ones[2] = {1, 1};
    int filters = 0, ks[2] = {0};
    bool bad = false, use_bias = true, ufb = true, time_major = false;
    double dropout = 0, recurrent_dropout = 0;
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "kernel_size", true, 2, NULL, ks, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "strides", false, 2, ones, o.strides, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "dilation_rate", false, 2, ones, o.dilation, k));
    TNT_KJ_READ(tnt__kj_padding(c, &o.padding, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    TNT_KJ_READ(tnt__kj_bool(c, "return_sequences", false, &o.rnn.return_sequences, k));
    TNT_KJ_READ(tnt__kj_bool(c, "return_state", false, &o.rnn.return_state, k));
    TNT_KJ_READ(tnt__kj_bool(c, "go_backwards", false, &o.rnn.go_backwards, k));
    TNT_KJ_READ(tnt__kj_bool(c, "stateful", false, &o.rnn.stateful, k));
    TNT_KJ_READ(tnt__kj_bool(c, "time_major", false, &time_major, k));
    if (time_major) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "time_major=true is not supported (batch-major only)");
    TNT_KJ_READ(tnt__kj_bool(c, "use_bias", true, &use_bias, k));
    TNT_KJ_READ(tnt__kj_bool(c, "unit_forget_bias", true, &ufb, k));
    TNT_KJ_READ(tnt__kj_num(c, "dropout", false, 0.0, &dropout, k));
    TNT_KJ_READ(tnt__kj_num(c, "recurrent_dropout", false, 0.0, &recurrent_dropout, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.rnn.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "recurrent_initializer", TNT_INIT_ORTHOGONAL, &o.rnn.recurrent_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.rnn.bias_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, clstm_nulls, k));
    o.rnn.activation = tnt__kj_str(c, "activation", &bad, k);
    if (!bad) o.rnn.recurrent_activation = tnt__kj_str(c, "recurrent_activation", &bad, k);
    if (bad) return NULL;
    o.rnn.no_bias = !use_bias, o.rnn.no_unit_forget_bias = !ufb;
    o.rnn.dropout = (float)dropout, o.rnn.recurrent_dropout = (float)recurrent_dropout;
    return tnt__kj_built(tnt_conv_lstm2d(filters, ks[0], ks[1], &o), k);
}

const tnt__layer_ops tnt__conv_lstm2d_ops = {
    .class_name = "ConvLSTM2D",
    .from_config = clstm_from_config,
    .get_config = clstm_get_config,
    .build = clstm_build,
    .plan_create = clstm_plan_create,
    .plan_destroy = clstm_plan_destroy,
    .workspace_size = clstm_workspace_size,
    .forward = clstm_forward,
    .backward = clstm_backward,
    .destroy = clstm_destroy,
    .set_data_format = clstm_set_data_format,
};

tnt_layer *tnt_conv_lstm2d(int filters, int kernel_h, int kernel_w, const tnt_conv_lstm_opts *opts) {
    static const tnt_conv_lstm_opts defaults;
    const tnt_conv_lstm_opts *o = opts ? opts : &defaults;
    const tnt_rnn_opts *r = &o->rnn;
    const char *bad = NULL;
    tnt__rnn_act act = TNT__RNN_TANH, rec = TNT__RNN_SIGMOID;
    if (filters <= 0 || kernel_h <= 0 || kernel_w <= 0) bad = "filters and kernel_size must be > 0";
    else if (r->activation && !tnt__rnn_act_from_name(r->activation, &act)) bad = "activation";
    else if (r->recurrent_activation && !tnt__rnn_act_from_name(r->recurrent_activation, &rec)) bad = "recurrent_activation";
    if (bad) {
        tnt__error(TNT_ERR_ARG, "ConvLSTM2D: %s (filters %d, kernel_size (%d, %d), activation \"%s\", recurrent_activation "
                   "\"%s\"; activations: tanh, sigmoid, hard_sigmoid, hard_sigmoid_v3, relu or linear)", bad, filters,
                   kernel_h, kernel_w, r->activation ? r->activation : "tanh",
                   r->recurrent_activation ? r->recurrent_activation : "sigmoid");
        return NULL;
    }
    if (r->stateful) {
        tnt__error(TNT_ERR_UNSUPPORTED, "ConvLSTM2D: stateful true is not supported (each batch starts from zero states)");
        return NULL;
    }
    if (!(r->dropout >= 0.0f && r->dropout < 1.0f) || !(r->recurrent_dropout >= 0.0f && r->recurrent_dropout < 1.0f)) {
        tnt__error(TNT_ERR_ARG, "ConvLSTM2D: dropout %g, recurrent_dropout %g (expected each in [0, 1))", (double)r->dropout,
                   (double)r->recurrent_dropout);
        return NULL;
    }
    /* the convolutions: the input one has the layer's geometry and the bias, the recurrent one is
     * "same" with stride 1 and no bias (Keras's recurrent_conv) */
    tnt_layer_opts xo = {.strides = {o->strides[0], o->strides[1]}, .dilation = {o->dilation[0], o->dilation[1]},
                         .padding = o->padding, .no_bias = r->no_bias};
    tnt_layer *xconv = tnt_conv2d(4 * filters, kernel_h, kernel_w, &xo);
    tnt_layer *hconv = xconv ? tnt_conv2d(4 * filters, kernel_h, kernel_w,
                                          &(tnt_layer_opts){.padding = TNT_PADDING_SAME, .no_bias = true})
                             : NULL;
    clstm *c = hconv ? tnt__calloc(1, sizeof *c) : NULL;
    tnt_layer *l = c ? tnt__layer_new(&tnt__conv_lstm2d_ops, r->name, c) : NULL;
    if (!l) {
        if (xconv || hconv) tnt__error_prefix(TNT_ERR_ARG, "ConvLSTM2D: ");
        tnt_layer_free(xconv);
        tnt_layer_free(hconv);
        free(c);
        return NULL;
    }
    const tnt__conv_cfg *xc = xconv->priv;
    c->r = (tnt__rnn){.cell = TNT__RNN_LSTM, .units = filters, .act = act, .rec_act = rec, .use_bias = !r->no_bias,
                      .unit_forget_bias = !r->no_unit_forget_bias, .return_sequences = r->return_sequences,
                      .go_backwards = r->go_backwards, .return_state = r->return_state, .dropout = r->dropout,
                      .recurrent_dropout = r->recurrent_dropout,
                      .kernel_init = r->kernel_initializer ? r->kernel_initializer : TNT_INIT_GLOROT_UNIFORM,
                      .recurrent_init = r->recurrent_initializer ? r->recurrent_initializer : TNT_INIT_ORTHOGONAL,
                      .bias_init = r->bias_initializer ? r->bias_initializer : TNT_INIT_ZEROS};
    c->filters = filters, c->kh = kernel_h, c->kw = kernel_w, c->sh = xc->sh, c->sw = xc->sw, c->dh = xc->dh;
    c->dw = xc->dw, c->padding = o->padding, c->xconv = xconv, c->hconv = hconv;
    if (r->return_state) l->n_outputs = 3;
    return l;
}

bool tnt__is_conv_lstm2d(const tnt_layer *l) { return l && l->ops == &tnt__conv_lstm2d_ops; }

tnt_layer *tnt__conv_lstm2d_clone(const tnt_layer *l) {
    const clstm *c = l->priv;
    tnt_conv_lstm_opts o = {.rnn = {.activation = tnt__rnn_act_name(c->r.act),
                                    .recurrent_activation = tnt__rnn_act_name(c->r.rec_act),
                                    .return_sequences = c->r.return_sequences, .go_backwards = c->r.go_backwards,
                                    .return_state = c->r.return_state, .dropout = c->r.dropout,
                                    .recurrent_dropout = c->r.recurrent_dropout,
                                    .no_bias = !c->r.use_bias, .no_unit_forget_bias = !c->r.unit_forget_bias,
                                    .kernel_initializer = c->r.kernel_init, .recurrent_initializer = c->r.recurrent_init,
                                    .bias_initializer = c->r.bias_init},
                            .strides = {c->sh, c->sw}, .dilation = {c->dh, c->dw}, .padding = c->padding};
    tnt_layer *k = tnt_conv_lstm2d(c->filters, c->kh, c->kw, &o);
    if (k && l->channels_first) clstm_set_data_format(k, true);
    return k;
}
