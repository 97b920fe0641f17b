/* rnn_gpu.c: the device path of the recurrent engine (LSTM, GRU reset_after true and false,
 * SimpleRNN; rnn_common.c is the CPU's), the same steps on the device:
 *   forward:  z = x W + b_in for all steps in one GEMM (GRU reset_after: rh = b_rec), then per step
 *             in processing order the recurrent GEMM p R into z (rh) and one cell kernel (gpu/kernels/
 *             rnn.cu tnt_k_rnn_fwd), which also writes the output row and the next step's p; GRU
 *             reset_before: p R_zr, tnt_k_rnn_gru_rp (r p), (r p) R_h, then the cell;
 *   backward: per step in reverse one gate-gradient kernel (tnt_k_rnn_bwd) and the GEMM dz R^T
 *             that carries dh to the step before (reset_before: dz_h R_h^T and tnt_k_rnn_gru_rp_bwd
 *             first); then dW, dR over all steps at once as GEMMs, db as column sums in a fixed
 *             order (tnt__gpu_col_sums), dx = dz W^T: deterministic, no atomics.
 * Dropout and recurrent dropout draw the CPU's masks (tnt_k_dropout over ones: the CPU's
 * tnt__rnn_dropout_scales), so a step drops what the CPU drops. The workspace holds, batch-major
 * and indexed by the input step as the CPU's: z (B, T, gU), h, p (B, T, U), LSTM's c and act(c),
 * GRU's rh, the dropout masks and dropped input, and backward's carries dh, dc, dp (B, U). The plan
 * (host memory) keeps whether forward dropped, which backward reads.
 * return_state: the final h (and c) are copied out of the workspace's rows; initial states (inputs 1
 * and 2) are the state before the first step, and backward gives their gradients as the CPU's.
 * A sequence mask (the last input) keeps a masked row's state through the step, as the CPU's.
 * Not here (supported() says so, and the model trains on the CPU): stateful, CuDNNLSTM /
 * CuDNNGRU, the mixed_bfloat16 policy. */
#include "layers/recurrent/rnn_common.h"

#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"

#define BLOCK 256

_Static_assert((int)K_RNN_SIMPLE == (int)TNT__RNN_SIMPLE && (int)K_RNN_LSTM == (int)TNT__RNN_LSTM &&
                   (int)K_RNN_GRU == (int)TNT__RNN_GRU,
               "kargs.h K_RNN_* cells must follow tnt__rnn_cell");
_Static_assert((int)K_RNN_TANH == (int)TNT__RNN_TANH && (int)K_RNN_SIGMOID == (int)TNT__RNN_SIGMOID &&
                   (int)K_RNN_HARD_SIGMOID == (int)TNT__RNN_HARD_SIGMOID &&
                   (int)K_RNN_HARD_SIGMOID_V3 == (int)TNT__RNN_HARD_SIGMOID_V3 && (int)K_RNN_RELU == (int)TNT__RNN_RELU &&
                   (int)K_RNN_LINEAR == (int)TNT__RNN_LINEAR,
               "kargs.h K_RNN_* activations must follow tnt__rnn_act");

static bool rnn_gpu_supported(const tnt_layer *l, const char **why) {
    const tnt__rnn *r = l->priv;
    const char *no = NULL;
    if (r->cudnn) no = "CuDNNLSTM / CuDNNGRU (cuDNN's double bias) have no device path yet";
    else if (r->stateful) no = "a stateful recurrent layer has no device path yet";
    else if (l->dtype_policy == TNT__POLICY_MIXED_BF16) no = "a recurrent layer under mixed_bfloat16 has no device path yet";
    if (no && why) *why = no;
    return !no;
}

typedef struct rnn_gpu_plan {
    bool drop_in, drop_rec; /* what the last forward applied (backward follows it) */
} rnn_gpu_plan;

static void *rnn_gpu_plan_create(tnt_layer *l, int64_t batch) {
    (void)l, (void)batch;
    return tnt__calloc(1, sizeof(rnn_gpu_plan));
}

static void rnn_gpu_plan_destroy(void *plan) { free(plan); }

typedef struct rnn_dws {
    float *z, *h, *p, *c, *ac, *rh, *xd, *xmask, *rmask, *dh, *dc, *dp;
} rnn_dws;

/* Carves the device workspace (base NULL: only counts it); returns its bytes. */
static size_t dws_layout(const tnt__rnn *r, int64_t B, void *base, rnn_dws *w) {
    const int64_t T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    const bool lstm = r->cell == TNT__RNN_LSTM, gru = r->cell == TNT__RNN_GRU;
    size_t off = 0;
    char *at = base;
#define CARVE(field, n)                                                                          \
    do {                                                                                         \
        w->field = base && (n) > 0 ? (float *)(at + off) : NULL;                                 \
        off += ((size_t)(n) * sizeof(float) + 255) / 256 * 256;                                  \
    } while (0)
    CARVE(z, B * T * gu);
    CARVE(h, B * T * U);
    CARVE(p, B * T * U);
    CARVE(c, lstm ? B * T * U : 0);
    CARVE(ac, lstm ? B * T * U : 0);
    CARVE(rh, gru ? B * T * (r->reset_after ? gu : U) : 0);
    CARVE(xd, r->dropout > 0 ? B * T * I : 0);
    CARVE(xmask, r->dropout > 0 ? B * I : 0);
    CARVE(rmask, r->recurrent_dropout > 0 ? B * U : 0);
    CARVE(dh, B * U);
    CARVE(dc, lstm ? B * U : 0);
    CARVE(dp, B * U);
#undef CARVE
    return off;
}

static size_t rnn_gpu_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    rnn_dws w;
    return dws_layout(l->priv, batch, NULL, &w);
}

static tnt_status launch(const char *name, int64_t n, void **args) {
    return tnt__gpu_launch(name, tnt__gpu_grid_for(n, BLOCK), BLOCK, 0, args);
}

/* rows (rows, cols) = bias, or zeros without one */
static tnt_status set_rows(float *rows, const float *bias, long long n_rows, long long cols) {
    if (!bias) return tnt__gpu_memset_zero(rows, (size_t)(n_rows * cols) * sizeof(float), TNT__GPU_COMPUTE);
    void *args[] = {&rows, &bias, &n_rows, &cols};
    return launch("tnt_k_bias_set", n_rows * cols, args);
}

/* scale (rows, n) = the CPU's dropout scales (tnt__rnn_dropout_scales): ones through tnt_k_dropout */
static tnt_status dropout_scales(float *scale, int64_t rows, int64_t n, float rate, uint64_t seed, int64_t sample_offset) {
    long long count = rows * n;
    float one = 1.0f, keep = 1.0f / (1.0f - rate);
    unsigned long long s = seed, base = (unsigned long long)(sample_offset * n);
    void *fill[] = {&scale, &count, &one};
    tnt_status st = launch("tnt_k_fill", count, fill);
    void *drop[] = {&scale, &scale, &count, &s, &base, &rate, &keep};
    return st == TNT_OK ? launch("tnt_k_dropout", count, drop) : st;
}

/* y (B, T, I) = x times mask (B, I) at every step */
static tnt_status drop_rows(const float *x, const float *mask, float *y, long long B, long long T, long long I) {
    void *args[] = {&x, &mask, &y, &B, &T, &I};
    return launch("tnt_k_rnn_drop_in", B * T * I, args);
}

/* the geometry of processing step s */
static tnt_k_rnn step_args(const tnt__rnn *r, int64_t B, int64_t s) {
    const int64_t T = r->steps, t = r->go_backwards ? T - 1 - s : s;
    tnt_k_rnn g = {.B = B, .T = T, .U = r->units, .t = t, .cell = (int)r->cell, .act = (int)r->act,
                   .rec_act = (int)r->rec_act, .reset_after = r->reset_after, .has_init = r->n_init > 0,
                   .zero_output = r->zero_output_for_mask};
    g.tprev = s == 0 ? -1 : r->go_backwards ? t + 1 : t - 1;
    g.tnext = s == T - 1 ? -1 : r->go_backwards ? t - 1 : t + 1;
    return g;
}

/* the row of output 0 (or its gradient) processing step s writes (reads), and its stride */
static const float *step_row(const tnt__rnn *r, const float *y, int64_t s, long long *ld) {
    const int64_t T = r->steps, U = r->units;
    *ld = r->return_sequences ? T * U : U;
    if (!y) return NULL;
    return r->return_sequences ? y + s * U : s == T - 1 ? y : NULL;
}

/* out (B, U) = row tlast of each sample of seq (B, T, U): a final state (return_state) */
static tnt_status copy_step(const float *seq, float *out, long long B, long long T, long long U, long long tlast) {
    long long zero = 0, ld = T * U, off = tlast * U;
    int acc = 0;
    void *args[] = {&seq, &out, &B, &U, &ld, &off, &U, &zero, &acc};
    return launch("tnt_k_copy_cols", B * U, args);
}

static tnt_status rnn_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    const tnt__rnn *r = l->priv;
    rnn_gpu_plan *pl = plan;
    const int64_t B = a->batch, T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    const float *W = l->weights[0].d_value, *R = l->weights[1].d_value, *bias = r->use_bias ? l->weights[2].d_value : NULL;
    const bool gru = r->cell == TNT__RNN_GRU, split = gru && !r->reset_after;
    rnn_dws w;
    dws_layout(r, B, a->workspace, &w);
    const uint64_t seed = tnt__hash64(l->seed ^ a->seed);
    pl->drop_in = a->training && r->dropout > 0, pl->drop_rec = a->training && r->recurrent_dropout > 0;
    tnt_status s = TNT_OK;
    const float *xin = a->x;
    if (pl->drop_in) {
        if ((s = dropout_scales(w.xmask, B, I, r->dropout, seed, a->sample_offset)) != TNT_OK ||
            (s = drop_rows(a->x, w.xmask, w.xd, B, T, I)) != TNT_OK)
            return s;
        xin = w.xd;
    }
    if (pl->drop_rec &&
        (s = dropout_scales(w.rmask, B, U, r->recurrent_dropout, tnt__hash64(seed ^ 0x5EC0DEull), a->sample_offset)) != TNT_OK)
        return s;
    const float *rmask = pl->drop_rec ? w.rmask : NULL;
    const float *h0 = r->n_init ? a->xs[1] : NULL, *c0 = r->n_init > 1 ? a->xs[2] : NULL;
    const float *mask = l->mask_input && a->xs && a->n_inputs > 1 ? a->xs[a->n_inputs - 1] : NULL;
    if (h0) { /* p of the first step: the initial h (dropped) */
        tnt_k_rnn g0 = step_args(r, B, 0);
        void *args[] = {&g0, &h0, &rmask, &w.p};
        if ((s = launch("tnt_k_rnn_init", B * U, args)) != TNT_OK) return s;
    }
    /* zx for every step: (B T, I) x (I, gU) + b_in; GRU reset_after's rh starts as b_rec */
    if ((s = set_rows(w.z, bias, B * T, gu)) != TNT_OK ||
        (s = tnt__gpu_sgemm(false, false, B * T, gu, I, 1.0f, xin, I, W, gu, 1.0f, w.z, gu)) != TNT_OK)
        return s;
    if (gru && r->reset_after && (s = set_rows(w.rh, bias ? bias + gu : NULL, B * T, gu)) != TNT_OK) return s;
    for (int64_t st = 0; st < T && s == TNT_OK; st++) {
        tnt_k_rnn g = step_args(r, B, st);
        const int64_t t = g.t;
        float *zt = w.z + t * gu, *pt = w.p + t * U;
        /* the recurrent matmul; the state before the first step is zeros without initial states */
        if (g.tprev >= 0 || g.has_init) {
            float *dst = gru && r->reset_after ? w.rh + t * gu : zt;
            s = tnt__gpu_sgemm(false, false, B, split ? 2 * U : gu, U, 1.0f, pt, T * U, R, gu, 1.0f, dst, T * gu);
        }
        if (s == TNT_OK && split) { /* z, r activated, then (r p) R_h into z_h */
            float *rp = w.rh;
            void *args[] = {&g, &w.z, &w.p, &rp};
            s = launch("tnt_k_rnn_gru_rp", B * U, args);
            if (s == TNT_OK && (g.tprev >= 0 || g.has_init))
                s = tnt__gpu_sgemm(false, false, B, U, U, 1.0f, w.rh + t * U, T * U, R + 2 * U, gu, 1.0f, zt + 2 * U,
                                   T * gu);
        }
        if (s != TNT_OK) break;
        float *y = (float *)step_row(r, a->y, st, &g.ld_y);
        void *args[] = {&g, &w.z, &w.rh, &w.h, &w.p, &w.c, &w.ac, &y, &rmask, &h0, &c0, &mask};
        s = launch("tnt_k_rnn_fwd", B * U, args);
    }
    /* return_state: the final h (and c) */
    const int64_t tlast = r->go_backwards ? 0 : T - 1;
    for (int k = 1; k < a->n_outputs && s == TNT_OK; k++) s = copy_step(k == 1 ? w.h : w.c, a->ys[k], B, T, U, tlast);
    return s;
}

static tnt_status rnn_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const tnt__rnn *r = l->priv;
    const rnn_gpu_plan *pl = plan;
    const int64_t B = a->batch, T = r->steps, U = r->units, I = r->features, gu = tnt__rnn_gate_units(r);
    const float *W = l->weights[0].d_value, *R = l->weights[1].d_value;
    const bool gru = r->cell == TNT__RNN_GRU, split = gru && !r->reset_after;
    rnn_dws w;
    dws_layout(r, B, a->workspace, &w);
    const float *rmask = pl->drop_rec ? w.rmask : NULL;
    const float *h0 = r->n_init ? a->xs[1] : NULL, *c0 = r->n_init > 1 ? a->xs[2] : NULL;
    float *dh0 = r->n_init && a->dxs ? a->dxs[1] : NULL, *dc0 = r->n_init > 1 && a->dxs ? a->dxs[2] : NULL;
    const float *mask = l->mask_input && a->xs && a->n_inputs > 1 ? a->xs[a->n_inputs - 1] : NULL;
    /* the carries start from the final states' gradients (return_state), else zeros */
    const size_t bu = (size_t)(B * U) * sizeof(float);
    const float *dhT = a->n_outputs > 1 && a->dys ? a->dys[1] : NULL, *dcT = a->n_outputs > 2 && a->dys ? a->dys[2] : NULL;
    tnt_status s = dhT ? tnt__gpu_copy_on_device(w.dh, dhT, bu, TNT__GPU_COMPUTE)
                       : tnt__gpu_memset_zero(w.dh, bu, TNT__GPU_COMPUTE);
    if (s == TNT_OK && w.dc)
        s = dcT ? tnt__gpu_copy_on_device(w.dc, dcT, bu, TNT__GPU_COMPUTE) : tnt__gpu_memset_zero(w.dc, bu, TNT__GPU_COMPUTE);
    for (int64_t st = T - 1; st >= 0 && s == TNT_OK; st--) {
        tnt_k_rnn g = step_args(r, B, st);
        const int64_t t = g.t;
        const float *dy = step_row(r, a->dy, st, &g.ld_y);
        const float *dp = st < T - 1 ? w.dp : NULL; /* the later step's dz R^T */
        void *args[] = {&g, &w.z, &w.rh, &w.h, &w.c, &w.ac, &w.dh, &w.dc, &dp, &rmask, &dy, &h0, &c0, &mask};
        if ((s = launch("tnt_k_rnn_bwd", B * U, args)) != TNT_OK) break;
        if (split) { /* d(r p) = d pre(hh) R_h^T, then dr and the part of dp through r p */
            s = tnt__gpu_sgemm(false, true, B, U, U, 1.0f, w.z + t * gu + 2 * U, T * gu, R + 2 * U, gu, 0.0f, w.dp, U);
            void *rargs[] = {&g, &w.z, &w.p, &w.dp};
            if (s == TNT_OK) s = launch("tnt_k_rnn_gru_rp_bwd", B * U, rargs);
        }
        if (s != TNT_OK || (g.tprev < 0 && !dh0 && !dc0)) continue; /* the initial state is a constant */
        const float *dzr = gru && r->reset_after ? w.rh + t * gu : w.z + t * gu;
        s = tnt__gpu_sgemm(false, true, B, U, split ? 2 * U : gu, 1.0f, dzr, T * gu, R, gu, split ? 1.0f : 0.0f, w.dp, U);
    }
    /* the initial states' gradients: what reached the state before the first step */
    if (s == TNT_OK && dh0) {
        long long n = B * U;
        void *args[] = {&w.dh, &w.dp, &rmask, &dh0, &n};
        s = launch("tnt_k_rnn_carry", n, args);
    }
    if (s == TNT_OK && dc0) s = tnt__gpu_copy_on_device(dc0, w.dc, bu, TNT__GPU_COMPUTE);
    if (s == TNT_OK && mask && a->dxs && a->dxs[a->n_inputs - 1]) /* the mask has no gradient */
        s = tnt__gpu_memset_zero(a->dxs[a->n_inputs - 1], (size_t)(B * T) * sizeof(float), TNT__GPU_COMPUTE);
    if (s != TNT_OK) return s;
    /* weight gradients over all steps at once */
    const float *xin = pl->drop_in ? w.xd : a->x;
    float *dR = l->weights[1].d_grad;
    s = tnt__gpu_sgemm(true, false, I, gu, B * T, 1.0f, xin, I, w.z, gu, 0.0f, l->weights[0].d_grad, gu);
    if (s == TNT_OK && gru && r->reset_after) {
        s = tnt__gpu_sgemm(true, false, U, gu, B * T, 1.0f, w.p, U, w.rh, gu, 0.0f, dR, gu);
    } else if (s == TNT_OK && split) {
        s = tnt__gpu_sgemm(true, false, U, 2 * U, B * T, 1.0f, w.p, U, w.z, gu, 0.0f, dR, gu);
        if (s == TNT_OK) s = tnt__gpu_sgemm(true, false, U, U, B * T, 1.0f, w.rh, U, w.z + 2 * U, gu, 0.0f, dR + 2 * U, gu);
    } else if (s == TNT_OK) {
        s = tnt__gpu_sgemm(true, false, U, gu, B * T, 1.0f, w.p, U, w.z, gu, 0.0f, dR, gu);
    }
    if (s == TNT_OK && r->use_bias) {
        float *db = l->weights[2].d_grad;
        s = tnt__gpu_col_sums(w.z, db, B * T, gu);
        if (s == TNT_OK && gru && r->reset_after) s = tnt__gpu_col_sums(w.rh, db + gu, B * T, gu);
    }
    if (s == TNT_OK && a->dx) {
        s = tnt__gpu_sgemm(false, true, B * T, I, gu, 1.0f, w.z, gu, W, gu, 0.0f, a->dx, I);
        if (s == TNT_OK && pl->drop_in) s = drop_rows(a->dx, w.xmask, a->dx, B, T, I);
    }
    return s;
}

const tnt__gpu_ops tnt__rnn_gpu_ops = {
    .supported = rnn_gpu_supported,
    .plan_create = rnn_gpu_plan_create,
    .plan_destroy = rnn_gpu_plan_destroy,
    .workspace_size = rnn_gpu_workspace_size,
    .forward = rnn_gpu_forward,
    .backward = rnn_gpu_backward,
};
