/* rnn_common.c: the recurrent engine of LSTM, GRU and SimpleRNN, Keras semantics and layouts.
 *
 * Input x (batch, T, I), units U, g gates (LSTM 4: i f c o; GRU 3: z r h; SimpleRNN 1).
 *   zx = drop(x) · kernel + b_in            one (batch*T, I) x (I, gU) GEMM for all steps
 *   per step, in order (reversed with go_backwards):
 *     p  = h_prev * recurrent dropout mask   (the dropped state feeds the matmuls only)
 *     LSTM   z = zx + p·R; i f o = ra(.), c~ = act(.); c = f c_prev + i c~; h = o act(c)
 *     GRU reset_after (Keras 2.3+, CuDNNGRU):  rh = p·R + b_rec;
 *            z r = ra(zx + rh); hh = act(zx_h + r rh_h); h = z h_prev + (1-z) hh
 *     GRU reset_before (Keras <= 2.2):  z r = ra(zx + p·R_zr); hh = act(zx_h + (r p)·R_h)
 *     SimpleRNN  h = act(zx + p·R)
 *   a masked step (mask 0) keeps h and c, and outputs h (or zeros with zero_output_for_mask).
 * The state before the first step is zeros, or the initial-state inputs (Keras's initial_state:
 * inputs 1 (h) and 2 (c) after the sequence); with return_state the final h (and c) are outputs
 * 1 (and 2), and backward takes their gradients and gives the initial states' gradients. The
 * sequence mask, when the graph appends one (l->mask_input), is the last input.
 * Backward runs the steps in reverse, turning the saved gate values into gate gradients in place,
 * then makes the weight gradients in three GEMMs over all steps at once.
 *
 * Everything per step is stored in the workspace, batch-major (batch, T, ...) and indexed by the
 * input step t, so that a step's rows are one strided matrix for sgemm. Dropout masks are drawn
 * per global sample (sample_offset) and kept in the workspace for backward. */
#include "layers/recurrent/rnn_common.h"

#include "kernels/sgemm.h"

#include "layers/keras_config.h"
#include "kernels/dnnl_util.h"
#include "kernels/vexp.h"

#include <math.h>
#include <stdio.h>

/* ---- activations ----------------------------------------------------------------------- */

static const struct {
    tnt__rnn_act act;
    const char *name;
} act_names[] = {
    {TNT__RNN_TANH, "tanh"},          {TNT__RNN_SIGMOID, "sigmoid"},
    {TNT__RNN_HARD_SIGMOID, "hard_sigmoid"}, {TNT__RNN_HARD_SIGMOID_V3, "hard_sigmoid_v3"},
    {TNT__RNN_RELU, "relu"},          {TNT__RNN_LINEAR, "linear"},
    {TNT__RNN_HARD_SIGMOID, "hard_sigmoid_keras2"}, /* Keras 2's, in the .keras files we write (keras_zip.c) */
};

const char *tnt__rnn_act_name(tnt__rnn_act a) {
    for (size_t i = 0; i < TNT_ARRAY_LEN(act_names); i++)
        if (act_names[i].act == a) return act_names[i].name;
    return "?";
}

bool tnt__rnn_act_from_name(const char *name, tnt__rnn_act *a) {
    for (size_t i = 0; i < TNT_ARRAY_LEN(act_names); i++)
        if (!strcmp(act_names[i].name, name)) {
            *a = act_names[i].act;
            return true;
        }
    return false;
}

/* sigmoid and tanh from exp(-|x|) (vexp.h; libm's expf and tanhf took a fifth of an LSTM step):
 * sigmoid = 1 / (1 + e) or e / (1 + e); tanh = (1 - e) / (1 + e) with e = exp(-2|x|), and its
 * Taylor series below |x| = 1/16, where 1 - e would lose digits. Lanes and tails compute alike. */
#define TANH_SERIES_BELOW 0.0625f
static inline float sigmoid_s(float x) {
    const float e = tnt__exp_ps(-fabsf(x)), s = 1.0f / (1.0f + e);
    return x < 0.0f ? e * s : s;
}
static inline float tanh_s(float x) {
    const float ax = fabsf(x), x2 = x * x;
    if (ax < TANH_SERIES_BELOW) return x + x * x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f)));
    const float e = tnt__exp_ps(-2.0f * ax), t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}
#ifdef __AVX2__
static inline __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 e = tnt__exp8_ps(_mm256_or_ps(x, sign)); /* exp(-|x|) */
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    return _mm256_blendv_ps(s, _mm256_mul_ps(e, s), x); /* by x's sign bit */
}
static inline __m256 tanh8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x), x2 = _mm256_mul_ps(x, x);
    const __m256 e = tnt__exp8_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), ax));
    const __m256 t = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)), _mm256_and_ps(x, sign));
    __m256 p = _mm256_add_ps(_mm256_set1_ps(2.0f / 15.0f), _mm256_mul_ps(x2, _mm256_set1_ps(-17.0f / 315.0f)));
    p = _mm256_add_ps(_mm256_set1_ps(-1.0f / 3.0f), _mm256_mul_ps(x2, p));
    p = _mm256_add_ps(x, _mm256_mul_ps(_mm256_mul_ps(x, x2), p));
    return _mm256_blendv_ps(t, p, _mm256_cmp_ps(ax, _mm256_set1_ps(TANH_SERIES_BELOW), _CMP_LT_OQ));
}
#endif

void tnt__rnn_act_apply(tnt__rnn_act a, float *v, int64_t n) {
    int64_t i = 0;
    switch (a) {
    case TNT__RNN_TANH:
#ifdef __AVX2__
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(v + i, tanh8(_mm256_loadu_ps(v + i)));
#endif
        for (; i < n; i++) v[i] = tanh_s(v[i]);
        break;
    case TNT__RNN_SIGMOID:
#ifdef __AVX2__
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(v + i, sigmoid8(_mm256_loadu_ps(v + i)));
#endif
        for (; i < n; i++) v[i] = sigmoid_s(v[i]);
        break;
    case TNT__RNN_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) v[i] = fminf(fmaxf(0.2f * v[i] + 0.5f, 0.0f), 1.0f);
        break;
    case TNT__RNN_HARD_SIGMOID_V3:
        for (int64_t i = 0; i < n; i++) v[i] = fminf(fmaxf(v[i] + 3.0f, 0.0f), 6.0f) / 6.0f;
        break;
    case TNT__RNN_RELU:
        for (int64_t i = 0; i < n; i++) v[i] = fmaxf(v[i], 0.0f);
        break;
    case TNT__RNN_LINEAR:
        break;
    }
}

/* ---- configuration and build ------------------------------------------------------------ */


tnt__rnn *tnt__rnn_of(const tnt_layer *l) {
    return l && (l->ops->build_multi == tnt__rnn_build_multi || tnt__is_conv_lstm2d(l)) ? l->priv : NULL;
}

bool tnt__rnn_returns_sequences(const tnt_layer *l) { return ((const tnt__rnn *)l->priv)->return_sequences; }

tnt_layer *tnt__rnn_new(const tnt__layer_ops *ops, tnt__rnn_cell cell, bool cudnn, int units, const tnt_rnn_opts *opts) {
    static const tnt_rnn_opts defaults;
    const tnt_rnn_opts *o = opts ? opts : &defaults;
    const char *cls = ops->class_name;
    tnt__rnn c = {.cell = cell, .cudnn = cudnn, .units = units, .act = TNT__RNN_TANH,
                  .rec_act = cell == TNT__RNN_SIMPLE ? TNT__RNN_TANH : TNT__RNN_SIGMOID, .use_bias = !o->no_bias,
                  .return_sequences = o->return_sequences, .go_backwards = o->go_backwards,
                  .unit_forget_bias = cell == TNT__RNN_LSTM && !o->no_unit_forget_bias,
                  .reset_after = cell == TNT__RNN_GRU && !o->reset_before,
                  .zero_output_for_mask = o->zero_output_for_mask, .return_state = o->return_state,
                  .stateful = o->stateful,
                  .dropout = o->dropout,
                  .recurrent_dropout = o->recurrent_dropout,
                  .kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM,
                  .recurrent_init = o->recurrent_initializer ? o->recurrent_initializer : TNT_INIT_ORTHOGONAL,
                  .bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS};
    const char *bad = NULL;
    if (units <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: units %d (expected > 0)", cls, units);
        return NULL;
    }
    if (o->activation && !tnt__rnn_act_from_name(o->activation, &c.act)) bad = o->activation;
    else if (o->recurrent_activation && !tnt__rnn_act_from_name(o->recurrent_activation, &c.rec_act)) bad = o->recurrent_activation;
    if (bad) {
        tnt__error(TNT_ERR_UNSUPPORTED, "%s: activation \"%.64s\" (expected tanh, sigmoid, hard_sigmoid, "
                   "hard_sigmoid_v3, relu or linear)", cls, bad);
        return NULL;
    }
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f) || !(o->recurrent_dropout >= 0.0f && o->recurrent_dropout < 1.0f)) {
        tnt__error(TNT_ERR_ARG, "%s: dropout %g, recurrent_dropout %g (expected each in [0, 1))", cls,
                   (double)o->dropout, (double)o->recurrent_dropout);
        return NULL;
    }
    if (cudnn && (o->activation || o->recurrent_activation || o->dropout || o->recurrent_dropout || o->no_bias ||
                  o->reset_before)) {
        tnt__error(TNT_ERR_ARG, "%s: activations, dropout, use_bias and reset_after are fixed by cuDNN", cls);
        return NULL;
    }
    if (!tnt__init_valid(c.kernel_init, TNT_INIT_ORTHOGONAL) || !tnt__init_valid(c.recurrent_init, TNT_INIT_ORTHOGONAL) ||
        !tnt__init_valid(c.bias_init, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "%s: initializer %d/%d/%d (expected 0..%d)", cls, (int)c.kernel_init,
                   (int)c.recurrent_init, (int)c.bias_init, (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    tnt__rnn *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    *p = c;
    tnt_layer *l = tnt__layer_new(ops, o->name, p);
    if (!l) free(p);
    else if (c.return_state) l->n_outputs = 1 + tnt__rnn_n_states(&c);
    return l;
}

tnt_layer *tnt__rnn_clone(const tnt_layer *l, const char *name) {
    if (tnt__is_conv_lstm2d(l)) return tnt__conv_lstm2d_clone(l); /* Bidirectional names it */
    tnt__rnn *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    *p = *(const tnt__rnn *)l->priv;
    p->state = NULL, p->state_rows = 0; /* its own states */
    tnt_layer *c = tnt__layer_new(l->ops, name, p);
    if (!c) free(p);
    else c->n_outputs = l->n_outputs;
    return c;
}

void tnt__rnn_destroy(tnt_layer *l) {
    tnt__rnn *r = l->priv;
    if (r) free(r->state);
    free(r);
}

void tnt__rnn_reset_states(tnt_layer *l) {
    tnt__rnn *r = l->priv;
    if (r->state) memset(r->state, 0, (size_t)(r->state_rows * r->units * tnt__rnn_n_states(r)) * sizeof(float));
}

/* in[0]: (steps, features); then the initial states (units) each, when given; then the sequence
 * mask (steps) when l->mask_input */
tnt_status tnt__rnn_build_multi(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    tnt__rnn *r = l->priv;
    char b[96];
    const int ns = tnt__rnn_n_states(r), n_init = n - 1 - (l->mask_input ? 1 : 0);
    if (n_init != 0 && n_init != ns)
        return tnt__error(TNT_ERR_ARG, "%s \"%s\": called on %d inputs (expected the sequence, then %d initial state%s "
                          "or none%s)", l->ops->class_name, l->name, n, ns, ns > 1 ? "s" : "",
                          l->mask_input ? ", then the sequence mask" : "");
    if (in[0].ndim != 2 || in[0].dim[0] <= 0 || in[0].dim[1] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s (expected (timesteps, features), both > 0)",
                          l->ops->class_name, l->name, tnt_shape_str(in[0], b, sizeof b));
    if (l->mask_input && (in[n - 1].ndim != 1 || in[n - 1].dim[0] != in[0].dim[0]))
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": mask shape %s (expected (%lld))", l->ops->class_name, l->name,
                          tnt_shape_str(in[n - 1], b, sizeof b), (long long)in[0].dim[0]);
    for (int k = 1; k <= n_init; k++)
        if (in[k].ndim != 1 || in[k].dim[0] != r->units)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": initial state %d has shape %s (expected (%d): the units)",
                              l->ops->class_name, l->name, k - 1, tnt_shape_str(in[k], b, sizeof b), r->units);
    r->n_init = n_init;
    for (int k = 1; k < l->n_outputs; k++) l->out_shapes[k] = TNT_SHAPE(r->units);
    r->steps = in[0].dim[0];
    r->features = in[0].dim[1];
    const int64_t U = r->units, gu = tnt__rnn_gate_units(r);
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", TNT_SHAPE(r->features, gu), r->kernel_init, r->features, gu) < 0 ||
        tnt__layer_add_weight(l, "recurrent_kernel", TNT_SHAPE(U, gu), r->recurrent_init, U, gu) < 0)
        return TNT_ERR_ARG;
    if (r->use_bias) {
        bool two = r->cudnn || r->reset_after; /* input and recurrent biases */
        tnt_shape bs = r->cudnn ? TNT_SHAPE(2 * gu) : two ? TNT_SHAPE(2, gu) : TNT_SHAPE(gu);
        tnt_initializer init = r->unit_forget_bias ? TNT__INIT_UNIT_FORGET_BIAS : r->bias_init;
        /* unit_forget_bias: ones in the forget slice [U, 2U) (CuDNNLSTM: of the recurrent half, as Keras) */
        int64_t from = r->cudnn ? gu + U : U;
        int bi = tnt__layer_add_weight(l, "bias", bs, init, from, from + U);
        if (bi < 0) return TNT_ERR_ARG;
        l->weights[bi].ufb_base = r->bias_init;
    }
    *out = r->return_sequences ? TNT_SHAPE(r->steps, U) : TNT_SHAPE(U);
    return TNT_OK;
}

tnt_status tnt__rnn_build(tnt_layer *l, tnt_shape in, tnt_shape *out) { return tnt__rnn_build_multi(l, 1, &in, out); }

/* ---- workspace ---------------------------------------------------------------------------- */

typedef struct rnn_ws {
    uint64_t *flags; /* bit 0: input dropout applied, bit 1: recurrent dropout applied */
    float *z;        /* (B, T, gU): gate pre-activations, then values, then (backward) gradients */
    float *h;        /* (B, T, U): the state after each step */
    float *p;        /* (B, T, U): the (dropped) previous state each step's matmul read */
    float *c, *ac;   /* LSTM (B, T, U): cell state after each step and act(c) */
    float *rh;       /* GRU (B, T, 3U) reset_after: p·R + b_rec; (B, T, U) reset_before: r * p */
    float *xd;       /* (B, T, I) dropped input, with input dropout */
    float *xmask;    /* (B, I) input dropout scale (0 or 1/(1-rate)) */
    float *rmask;    /* (B, U) recurrent dropout scale */
    float *dh, *dc, *dp; /* (B, U) backward carries and the recurrent matmul's result */
    const float *h0, *c0; /* (B, U) the initial-state inputs, or NULL (zeros): not in the workspace */
    float *sh, *sc;       /* stateful: (B, U) the carried states this batch starts from */
} rnn_ws;

/* Row b of the state before step t: the state after step tprev, or the initial state. */
static inline const float *prev_row(const float *seq, const float *init, int64_t T, int64_t U, int64_t b, int64_t tprev) {
    return tprev >= 0 ? seq + (b * T + tprev) * U : init ? init + b * U : NULL;
}

/* The sequence mask input (batch, T), or NULL. */
static const float *mask_of(const tnt_layer *l, int n_inputs, const float *const *xs) {
    return l->mask_input && xs && n_inputs > 1 ? xs[n_inputs - 1] : NULL;
}

/* Carves the workspace (or with base NULL only counts it): returns its bytes. A part of no size
 * is NULL (start_from_state tells an LSTM's carried c by it: a stateful GRU's empty sc pointed
 * past the workspace and received the c state the layer does not have). */
static size_t ws_layout(const tnt__rnn *r, int64_t B, void *base, rnn_ws *w) {
    const int64_t T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    size_t off = 64;
    char *at = base;
    rnn_ws dummy;
    if (!w) w = &dummy;
    w->flags = base ? (uint64_t *)at : NULL;
    w->h0 = w->c0 = NULL;
#define CARVE(field, n)                                                                          \
    do {                                                                                         \
        w->field = base && (n) > 0 ? (float *)(at + off) : NULL;                                 \
        off += ((size_t)(n) * sizeof(float) + 63) / 64 * 64;                                     \
    } while (0)
    CARVE(z, B * T * gu);
    CARVE(h, B * T * U);
    CARVE(p, B * T * U);
    bool lstm = r->cell == TNT__RNN_LSTM, gru = r->cell == TNT__RNN_GRU;
    CARVE(c, lstm ? B * T * U : 0);
    CARVE(ac, lstm ? B * T * U : 0);
    CARVE(rh, gru ? B * T * (r->reset_after ? gu : U) : 0);
    CARVE(xd, r->dropout > 0 ? B * T * I : 0);
    CARVE(xmask, r->dropout > 0 ? B * I : 0);
    CARVE(rmask, r->recurrent_dropout > 0 ? B * U : 0);
    CARVE(dh, B * U);
    CARVE(dc, B * U);
    CARVE(dp, B * U);
    bool carried = r->stateful && !r->n_init;
    CARVE(sh, carried ? B * U : 0);
    CARVE(sc, carried && lstm ? B * U : 0);
#undef CARVE
    return off;
}

size_t tnt__rnn_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return ws_layout(l->priv, batch, NULL, NULL);
}

void tnt__rnn_dropout_scales(float *scale, int64_t B, int64_t n, float rate, uint64_t seed, int64_t sample_offset) {
    float keep = 1.0f / (1.0f - rate);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < n; j++)
            scale[b * n + j] = tnt__rand_uniform(seed, (uint64_t)((sample_offset + b) * n + j)) >= rate ? keep : 0.0f;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* The input-side bias of gate column j..: b_in, plus the recurrent half for CuDNNLSTM. */
static void fill_input_bias(const tnt__rnn *r, const float *bias, float *z, int64_t rows) {
    const int64_t gu = tnt__rnn_gate_units(r);
    for (int64_t i = 0; i < rows; i++) {
        float *zr = z + i * gu;
        if (!bias) {
            memset(zr, 0, (size_t)gu * sizeof(float));
            continue;
        }
        for (int64_t j = 0; j < gu; j++)
            zr[j] = bias[j] + (r->cudnn && r->cell == TNT__RNN_LSTM ? bias[gu + j] : 0.0f);
    }
}

static inline bool is_masked(const float *mask, int64_t T, int64_t b, int64_t t) {
    return mask && mask[b * T + t] == 0.0f;
}

/* One step's elementwise cell update for the unmasked rows; a masked row copies h (and c). */
static void cell_step(const tnt__rnn *r, rnn_ws *w, const float *mask, int64_t B, int64_t t, int64_t tprev) {
    const int64_t T = r->steps, U = r->units, gu = tnt__rnn_gate_units(r);
    for (int64_t b = 0; b < B; b++) {
        float *z = w->z + (b * T + t) * gu, *h = w->h + (b * T + t) * U;
        const float *hp = prev_row(w->h, w->h0, T, U, b, tprev);
        const float *cp = r->cell == TNT__RNN_LSTM ? prev_row(w->c, w->c0, T, U, b, tprev) : NULL;
        if (is_masked(mask, T, b, t)) {
            for (int64_t u = 0; u < U; u++) h[u] = hp ? hp[u] : 0.0f;
            if (r->cell == TNT__RNN_LSTM)
                for (int64_t u = 0; u < U; u++) w->c[(b * T + t) * U + u] = cp ? cp[u] : 0.0f;
            continue;
        }
        if (r->cell == TNT__RNN_SIMPLE) {
            tnt__rnn_act_apply(r->act, z, U);
            memcpy(h, z, (size_t)U * sizeof(float));
        } else if (r->cell == TNT__RNN_LSTM) {
            float *c = w->c + (b * T + t) * U, *ac = w->ac + (b * T + t) * U;
            tnt__rnn_act_apply(r->rec_act, z, 2 * U);
            tnt__rnn_act_apply(r->act, z + 2 * U, U);
            tnt__rnn_act_apply(r->rec_act, z + 3 * U, U);
            for (int64_t u = 0; u < U; u++) c[u] = z[U + u] * (cp ? cp[u] : 0.0f) + z[u] * z[2 * U + u];
            memcpy(ac, c, (size_t)U * sizeof(float));
            tnt__rnn_act_apply(r->act, ac, U);
            for (int64_t u = 0; u < U; u++) h[u] = z[3 * U + u] * ac[u];
        } else { /* GRU: z and r are already activated by the caller for reset_before */
            if (r->reset_after) {
                const float *rh = w->rh + (b * T + t) * gu;
                for (int64_t j = 0; j < 2 * U; j++) z[j] += rh[j];
                tnt__rnn_act_apply(r->rec_act, z, 2 * U);
                for (int64_t u = 0; u < U; u++) z[2 * U + u] += z[U + u] * rh[2 * U + u];
            }
            tnt__rnn_act_apply(r->act, z + 2 * U, U);
            for (int64_t u = 0; u < U; u++) h[u] = z[u] * (hp ? hp[u] : 0.0f) + (1.0f - z[u]) * z[2 * U + u];
        }
    }
}

/* stateful: this batch starts from the states the last batch of the same size left (Keras's
 * stateful layers need a fixed batch size; another size starts from zeros). Copied into the
 * workspace, as backward reads them after forward has stored the new ones. */
static void start_from_state(const tnt__rnn *r, rnn_ws *w, int64_t B) {
    const int64_t U = r->units;
    bool have = r->state && r->state_rows == B;
    if (have) memcpy(w->sh, r->state, (size_t)(B * U) * sizeof(float));
    else memset(w->sh, 0, (size_t)(B * U) * sizeof(float));
    if (w->sc) {
        if (have) memcpy(w->sc, r->state + B * U, (size_t)(B * U) * sizeof(float));
        else memset(w->sc, 0, (size_t)(B * U) * sizeof(float));
    }
    w->h0 = w->sh, w->c0 = w->sc;
}

/* stateful: the final states of this batch's rows, for the next batch */
static tnt_status keep_state(tnt__rnn *r, const rnn_ws *w, int64_t B, int64_t tlast) {
    const int64_t T = r->steps, U = r->units;
    const int ns = tnt__rnn_n_states(r);
    if (r->state_rows != B) {
        free(r->state);
        r->state_rows = 0;
        if (!(r->state = tnt__calloc((size_t)(B * U * ns), sizeof(float))))
            return tnt__error(TNT_ERR_NOMEM, "stateful recurrent layer: out of memory for %lld states", (long long)B);
        r->state_rows = B;
    }
    for (int64_t b = 0; b < B; b++) {
        memcpy(r->state + b * U, w->h + (b * T + tlast) * U, (size_t)U * sizeof(float));
        if (ns > 1) memcpy(r->state + (B + b) * U, w->c + (b * T + tlast) * U, (size_t)U * sizeof(float));
    }
    return TNT_OK;
}

tnt_status tnt__rnn_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const tnt__rnn *r = l->priv;
    tnt_status status = TNT_OK;
    const int64_t B = a->batch, T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    const float *W = l->weights[0].value, *R = l->weights[1].value, *bias = r->use_bias ? l->weights[2].value : NULL;
    const float *mask = mask_of(l, a->n_inputs, a->xs);
    rnn_ws w;
    ws_layout(r, B, a->workspace, &w);
    if (r->n_init) w.h0 = a->xs[1], w.c0 = r->n_init > 1 ? a->xs[2] : NULL;
    else if (r->stateful) start_from_state(r, &w, B);
    uint64_t seed = tnt__hash64(l->seed ^ a->seed);
    bool drop_in = a->training && r->dropout > 0, drop_rec = a->training && r->recurrent_dropout > 0;
    *w.flags = (drop_in ? 1u : 0u) | (drop_rec ? 2u : 0u);

    const float *xin = a->x;
    if (drop_in) {
        tnt__rnn_dropout_scales(w.xmask, B, I, r->dropout, seed, a->sample_offset);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < I; i++) w.xd[(b * T + t) * I + i] = a->x[(b * T + t) * I + i] * w.xmask[b * I + i];
        xin = w.xd;
    }
    if (drop_rec) tnt__rnn_dropout_scales(w.rmask, B, U, r->recurrent_dropout, tnt__hash64(seed ^ 0x5EC0DEull), a->sample_offset);

    /* zx for every step: (B*T, I) · (I, gU) + b_in */
    fill_input_bias(r, bias, w.z, B * T);
    TNT_DNNL(dnnl_sgemm('N', 'N', B * T, gu, I, 1.0f, xin, I, W, gu, 1.0f, w.z, gu));

    int64_t tprev = -1;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = r->go_backwards ? T - 1 - s : s;
        float *p = w.p + t * U, *z = w.z + t * gu; /* row b at + b * T * (U or gu) */
        for (int64_t b = 0; b < B; b++) {
            const float *hp = prev_row(w.h, w.h0, T, U, b, tprev);
            for (int64_t u = 0; u < U; u++)
                p[b * T * U + u] = hp ? hp[u] * (drop_rec ? w.rmask[b * U + u] : 1.0f) : 0.0f;
        }
        if (r->cell != TNT__RNN_GRU) {
            TNT_DNNL(dnnl_sgemm('N', 'N', B, gu, U, 1.0f, p, T * U, R, gu, 1.0f, z, T * gu));
        } else if (r->reset_after) {
            float *rh = w.rh + t * gu;
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < gu; j++) rh[b * T * gu + j] = bias ? bias[gu + j] : 0.0f;
            TNT_DNNL(dnnl_sgemm('N', 'N', B, gu, U, 1.0f, p, T * U, R, gu, 1.0f, rh, T * gu));
        } else {
            /* z, r from p·R_zr; then hh reads (r * p)·R_h */
            TNT_DNNL(dnnl_sgemm('N', 'N', B, 2 * U, U, 1.0f, p, T * U, R, gu, 1.0f, z, T * gu));
            float *rp = w.rh + t * U;
            for (int64_t b = 0; b < B; b++) {
                float *zb = z + b * T * gu;
                tnt__rnn_act_apply(r->rec_act, zb, 2 * U);
                for (int64_t u = 0; u < U; u++) rp[b * T * U + u] = zb[U + u] * p[b * T * U + u];
            }
            TNT_DNNL(dnnl_sgemm('N', 'N', B, U, U, 1.0f, rp, T * U, R + 2 * U, gu, 1.0f, z + 2 * U, T * gu));
        }
        cell_step(r, &w, mask, B, t, tprev);
        tprev = t;
    }

    /* outputs: every step (in processing order) or the last */
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = r->return_sequences ? 0 : T - 1; s < T; s++) {
            int64_t t = r->go_backwards ? T - 1 - s : s;
            float *y = a->y + (r->return_sequences ? (b * T + s) * U : b * U);
            if (is_masked(mask, T, b, t) && r->zero_output_for_mask) memset(y, 0, (size_t)U * sizeof(float));
            else memcpy(y, w.h + (b * T + t) * U, (size_t)U * sizeof(float));
        }
    /* return_state: the final h (and c), which masked last steps carry over */
    const int64_t tlast = r->go_backwards ? 0 : T - 1;
    for (int k = 1; k < a->n_outputs; k++)
        for (int64_t b = 0; b < B; b++)
            memcpy(a->ys[k] + b * U, (k == 1 ? w.h : w.c) + (b * T + tlast) * U, (size_t)U * sizeof(float));
    if (r->stateful && !r->n_init && B > 0) status = keep_state(l->priv, &w, B, tlast);
fail:
    return status;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* Turns step t's saved gate values into gate gradients (in place in z, and rh for reset_after),
 * given dh (B, U), which becomes the part of dh_prev that does not pass the recurrent matmul; dc
 * likewise. GRU reset_before also needs d(r p) = dhh_pre · R_h^T, computed here. */
static tnt_status cell_grad(const tnt__rnn *r, rnn_ws *w, const float *mask, int64_t B, int64_t t, int64_t tprev,
                            const float *R) {
    tnt_status status = TNT_OK;
    const int64_t T = r->steps, U = r->units, gu = tnt__rnn_gate_units(r);
    for (int64_t b = 0; b < B; b++) {
        float *z = w->z + (b * T + t) * gu, *dh = w->dh + b * U;
        const float *hp = prev_row(w->h, w->h0, T, U, b, tprev);
        if (is_masked(mask, T, b, t)) { /* state passes through: no gate gradient */
            memset(z, 0, (size_t)gu * sizeof(float));
            if (r->cell == TNT__RNN_GRU && r->reset_after) memset(w->rh + (b * T + t) * gu, 0, (size_t)gu * sizeof(float));
            continue;
        }
        if (r->cell == TNT__RNN_SIMPLE) {
            for (int64_t u = 0; u < U; u++) z[u] = dh[u] * tnt__rnn_act_grad(r->act, z[u]), dh[u] = 0.0f;
        } else if (r->cell == TNT__RNN_LSTM) {
            const float *ac = w->ac + (b * T + t) * U, *cprev = prev_row(w->c, w->c0, T, U, b, tprev);
            float *dc = w->dc + b * U;
            for (int64_t u = 0; u < U; u++) {
                float i = z[u], f = z[U + u], g = z[2 * U + u], o = z[3 * U + u];
                float cp = cprev ? cprev[u] : 0.0f;
                float dct = dc[u] + dh[u] * o * tnt__rnn_act_grad(r->act, ac[u]);
                z[3 * U + u] = dh[u] * ac[u] * tnt__rnn_act_grad(r->rec_act, o);
                z[u] = dct * g * tnt__rnn_act_grad(r->rec_act, i);
                z[U + u] = dct * cp * tnt__rnn_act_grad(r->rec_act, f);
                z[2 * U + u] = dct * i * tnt__rnn_act_grad(r->act, g);
                dc[u] = dct * f;
                dh[u] = 0.0f;
            }
        } else {
            for (int64_t u = 0; u < U; u++) {
                float zz = z[u], hh = z[2 * U + u], hpu = hp ? hp[u] : 0.0f;
                z[2 * U + u] = dh[u] * (1.0f - zz) * tnt__rnn_act_grad(r->act, hh); /* d pre(hh) */
                z[u] = dh[u] * (hpu - hh) * tnt__rnn_act_grad(r->rec_act, zz);
                dh[u] *= zz;
            }
            if (r->reset_after) {
                float *rh = w->rh + (b * T + t) * gu;
                for (int64_t u = 0; u < U; u++) {
                    float rr = z[U + u], da = z[2 * U + u];
                    z[U + u] = da * rh[2 * U + u] * tnt__rnn_act_grad(r->rec_act, rr);
                    rh[u] = z[u], rh[U + u] = z[U + u], rh[2 * U + u] = da * rr;
                }
            }
        }
    }
    if (r->cell == TNT__RNN_GRU && !r->reset_after) {
        /* d(r p) (B, U) = d pre(hh) · R_h^T, then dr and the direct part of dp */
        TNT_DNNL(dnnl_sgemm('N', 'T', B, U, U, 1.0f, w->z + t * gu + 2 * U, T * gu, R + 2 * U, gu, 0.0f, w->dp, U));
        for (int64_t b = 0; b < B; b++) {
            if (is_masked(mask, T, b, t)) continue;
            float *z = w->z + (b * T + t) * gu, *drp = w->dp + b * U;
            const float *p = w->p + (b * T + t) * U;
            for (int64_t u = 0; u < U; u++) {
                float rr = z[U + u];
                z[U + u] = drp[u] * p[u] * tnt__rnn_act_grad(r->rec_act, rr);
                drp[u] *= rr; /* d p through r p */
            }
        }
    }
fail:
    return status;
}

/* Column sums of m (rows, n) with row stride ld into out (n), in row order. */
static void col_sums(const float *m, int64_t rows, int64_t n, int64_t ld, float *out) {
    memset(out, 0, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) out[j] += m[i * ld + j];
}

tnt_status tnt__rnn_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const tnt__rnn *r = l->priv;
    tnt_status status = TNT_OK;
    const int64_t B = a->batch, T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    const float *W = l->weights[0].value, *R = l->weights[1].value;
    const float *mask = mask_of(l, a->n_inputs, a->xs);
    rnn_ws w;
    ws_layout(r, B, a->workspace, &w);
    if (r->n_init) w.h0 = a->xs[1], w.c0 = r->n_init > 1 ? a->xs[2] : NULL;
    else if (r->stateful) w.h0 = w.sh, w.c0 = w.sc; /* what forward started from */
    float *dh0 = r->n_init && a->dxs ? a->dxs[1] : NULL, *dc0 = r->n_init > 1 && a->dxs ? a->dxs[2] : NULL;
    bool drop_in = *w.flags & 1u, drop_rec = *w.flags & 2u;
    bool split = r->cell == TNT__RNN_GRU && !r->reset_after; /* R_zr reads p, R_h reads r p */
    /* the carries start from the final states' gradients (return_state), else zeros */
    const float *dhT = a->n_outputs > 1 && a->dys ? a->dys[1] : NULL, *dcT = a->n_outputs > 2 && a->dys ? a->dys[2] : NULL;
    if (dhT) memcpy(w.dh, dhT, (size_t)(B * U) * sizeof(float));
    else memset(w.dh, 0, (size_t)(B * U) * sizeof(float));
    if (dcT) memcpy(w.dc, dcT, (size_t)(B * U) * sizeof(float));
    else memset(w.dc, 0, (size_t)(B * U) * sizeof(float));

    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = r->go_backwards ? T - 1 - s : s;
        int64_t tprev = s == 0 ? -1 : r->go_backwards ? t + 1 : t - 1;
        for (int64_t b = 0; b < B && a->dy; b++) {
            const float *dy = r->return_sequences ? a->dy + (b * T + s) * U : s == T - 1 ? a->dy + b * U : NULL;
            if (dy && !(r->zero_output_for_mask && is_masked(mask, T, b, t)))
                for (int64_t u = 0; u < U; u++) w.dh[b * U + u] += dy[u];
        }
        if ((status = cell_grad(r, &w, mask, B, t, tprev, R)) != TNT_OK) return status;
        if (tprev < 0 && !dh0 && !dc0) continue; /* the initial state is a constant */
        /* dh_prev = direct part + (gate gradients · R^T) * recurrent dropout */
        const float *dzr = r->cell == TNT__RNN_GRU && r->reset_after ? w.rh + t * gu : w.z + t * gu;
        TNT_DNNL(dnnl_sgemm('N', 'T', B, U, split ? 2 * U : gu, 1.0f, dzr, T * gu, R, gu, split ? 1.0f : 0.0f, w.dp, U));
        for (int64_t b = 0; b < B; b++)
            for (int64_t u = 0; u < U; u++) w.dh[b * U + u] += w.dp[b * U + u] * (drop_rec ? w.rmask[b * U + u] : 1.0f);
    }

    /* weight gradients over all steps at once */
    const float *xin = drop_in ? w.xd : a->x;
    if ((status = tnt__sgemm_tn(I, gu, B * T, xin, w.z, 0.0f, l->weights[0].grad)) != TNT_OK) goto fail;
    float *dR = l->weights[1].grad;
    if (r->cell == TNT__RNN_GRU && r->reset_after) {
        if ((status = tnt__sgemm_tn(U, gu, B * T, w.p, w.rh, 0.0f, dR)) != TNT_OK) goto fail;
    } else if (split) {
        TNT_DNNL(dnnl_sgemm('T', 'N', U, 2 * U, B * T, 1.0f, w.p, U, w.z, gu, 0.0f, dR, gu));
        TNT_DNNL(dnnl_sgemm('T', 'N', U, U, B * T, 1.0f, w.rh, U, w.z + 2 * U, gu, 0.0f, dR + 2 * U, gu));
    } else if ((status = tnt__sgemm_tn(U, gu, B * T, w.p, w.z, 0.0f, dR)) != TNT_OK) {
        goto fail;
    }
    if (r->use_bias) {
        float *db = l->weights[2].grad;
        col_sums(w.z, B * T, gu, gu, db);
        if (r->cell == TNT__RNN_GRU && r->reset_after) col_sums(w.rh, B * T, gu, gu, db + gu);
        else if (r->cudnn) memcpy(db + gu, db, (size_t)gu * sizeof(float));
    }
    if (a->dx) {
        TNT_DNNL(dnnl_sgemm('N', 'T', B * T, I, gu, 1.0f, w.z, gu, W, gu, 0.0f, a->dx, I));
        if (drop_in)
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < T * I; i++) a->dx[b * T * I + i] *= w.xmask[b * I + i % I];
    }
    if (dh0) memcpy(dh0, w.dh, (size_t)(B * U) * sizeof(float)); /* what reached the state before step 0 */
    if (dc0) memcpy(dc0, w.dc, (size_t)(B * U) * sizeof(float));
    if (mask && a->dxs && a->dxs[a->n_inputs - 1]) memset(a->dxs[a->n_inputs - 1], 0, (size_t)(B * T) * sizeof(float));
fail:
    return status;
}

/* ---- Keras config ------------------------------------------------------------------------- */

static const char *const rnn_nulls[] = {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                                        "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                                        "bias_constraint", NULL};

tnt_status tnt__rnn_get_config(const tnt_layer *l, cJSON *c) {
    const tnt__rnn *r = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "units", r->units));
    TNT_KJ(cJSON_AddBoolToObject(c, "return_sequences", r->return_sequences));
    TNT_KJ(cJSON_AddBoolToObject(c, "return_state", r->return_state));
    TNT_KJ(cJSON_AddBoolToObject(c, "go_backwards", r->go_backwards));
    TNT_KJ(cJSON_AddBoolToObject(c, "stateful", r->stateful));
    TNT_KJ(cJSON_AddBoolToObject(c, "unroll", false));
    TNT_KJ(cJSON_AddBoolToObject(c, "time_major", false));
    if (r->zero_output_for_mask) TNT_KJ(cJSON_AddBoolToObject(c, "zero_output_for_mask", true));
    if (!r->cudnn) {
        TNT_KJ(cJSON_AddStringToObject(c, "activation", tnt__rnn_act_name(r->act)));
        if (r->cell != TNT__RNN_SIMPLE)
            TNT_KJ(cJSON_AddStringToObject(c, "recurrent_activation", tnt__rnn_act_name(r->rec_act)));
        TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", r->use_bias));
    }
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", r->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "recurrent_initializer", r->recurrent_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", r->bias_init));
    if (r->cell == TNT__RNN_LSTM) TNT_KJ(cJSON_AddBoolToObject(c, "unit_forget_bias", r->unit_forget_bias));
    TNT_KJ_S(tnt__kj_add_nulls(c, rnn_nulls));
    if (!r->cudnn) {
        TNT_KJ(cJSON_AddNumberToObject(c, "dropout", tnt__kj_f(r->dropout)));
        TNT_KJ(cJSON_AddNumberToObject(c, "recurrent_dropout", tnt__kj_f(r->recurrent_dropout)));
        TNT_KJ(cJSON_AddNumberToObject(c, "implementation", 2));
    }
    if (r->cell == TNT__RNN_GRU && !r->cudnn) TNT_KJ(cJSON_AddBoolToObject(c, "reset_after", r->reset_after));
    return TNT_OK;
}

tnt_layer *tnt__rnn_from_config(const cJSON *c, const tnt__kj_ctx *k, const tnt__layer_ops *ops, tnt__rnn_cell cell,
                                bool cudnn) {
    tnt_rnn_opts o = {.name = k->name};
    int units = 0;
    bool bad = false, use_bias = true, unit_forget_bias = true, reset_after = false, time_major = false;
    double dropout = 0, recurrent_dropout = 0;
    TNT_KJ_READ(tnt__kj_int(c, "units", true, 0, &units, k));
    TNT_KJ_READ(tnt__kj_bool(c, "return_sequences", false, &o.return_sequences, k));
    TNT_KJ_READ(tnt__kj_bool(c, "return_state", false, &o.return_state, k));
    TNT_KJ_READ(tnt__kj_bool(c, "go_backwards", false, &o.go_backwards, k));
    TNT_KJ_READ(tnt__kj_bool(c, "stateful", false, &o.stateful, k));
    TNT_KJ_READ(tnt__kj_bool(c, "time_major", false, &time_major, k));
    TNT_KJ_READ(tnt__kj_bool(c, "zero_output_for_mask", false, &o.zero_output_for_mask, k));
    if (time_major) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "time_major=true is not supported (batch-major only)");
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "recurrent_initializer", TNT_INIT_ORTHOGONAL, &o.recurrent_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.bias_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, rnn_nulls, k));
    if (cell == TNT__RNN_LSTM) TNT_KJ_READ(tnt__kj_bool(c, "unit_forget_bias", true, &unit_forget_bias, k));
    o.no_unit_forget_bias = !unit_forget_bias;
    if (!cudnn) {
        /* Keras <= 2.2 wrote GRU without reset_after: the reset gate then acts before the matmul */
        if (cell == TNT__RNN_GRU) TNT_KJ_READ(tnt__kj_bool(c, "reset_after", false, &reset_after, k));
        o.reset_before = !reset_after;
        TNT_KJ_READ(tnt__kj_bool(c, "use_bias", true, &use_bias, k));
        o.no_bias = !use_bias;
        TNT_KJ_READ(tnt__kj_num(c, "dropout", false, 0.0, &dropout, k));
        TNT_KJ_READ(tnt__kj_num(c, "recurrent_dropout", false, 0.0, &recurrent_dropout, k));
        o.dropout = (float)dropout;
        o.recurrent_dropout = (float)recurrent_dropout;
        o.activation = tnt__kj_str(c, "activation", &bad, k);
        if (!bad && cell != TNT__RNN_SIMPLE) o.recurrent_activation = tnt__kj_str(c, "recurrent_activation", &bad, k);
        if (bad) return NULL;
    }
    return tnt__kj_built(tnt__rnn_new(ops, cell, cudnn, units, &o), k);
}
