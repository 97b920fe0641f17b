/* attention.c: MultiHeadAttention (Keras 2 semantics).
 *
 * Inputs (graph order): query (B,Tq,dq), value (B,Tv,dv), key (B,Tv,dk), then the configured
 * masks: attention_mask (B,Tq,Tv), query_mask (B,Tq), value_mask (B,Tv); 1 = attend, 0 = masked.
 *
 *   q = (query·Wq + bq) / sqrt(kd)        (B,Tq,H,kd)   one GEMM over B*Tq rows
 *   k = key·Wk + bk, v = value·Wv + bv    (B,Tv,H,kd|vd)
 *   S[b,h] = q[b,:,h,:] · k[b,:,h,:]^T    (Tq,Tv)       per (b,h), OpenMP over b*h
 *   S += (1 - M) * -1e9 (float32 add, as Keras's Softmax with a mask); P = softmax over s
 *   Pd = dropout(P) (training only; mask from the step seed and the global sample index)
 *   ctx[b,:,h,:] = Pd[b,h] · v[b,:,h,:]   (B,Tq,H,vd)
 *   y = ctx·Wo + bo                       (B,Tq,out)
 * Every tensor keeps the (rows, H*dim) layout of the projections: the per-head GEMMs read a head
 * as a strided submatrix (leading dimension H*dim), so nothing is ever transposed or copied.
 *
 * Workspace (kept from forward to backward): q, k, v, P (before dropout), ctx and the step seed.
 * Backward leaves it intact (it can run twice) and takes its scratch (dctx, dq, dk, dv and the
 * per-thread (Tq,Tv) blocks) from the process-wide oneDNN scratchpad.
 *
 * Kernel fans follow Keras's VarianceScaling for rank-3 kernels (receptive field = leading axis):
 * (d, H, kd): fan_in = d*H, fan_out = d*kd; (H, vd, out): fan_in = H*vd, fan_out = H*out. */
#include "kernels/dnnl_util.h"
#include "kernels/sgemm.h"
#include "kernels/vexp.h"
#include "layers/keras_config.h"
#include "layers/attention/attention.h"
#include "layers/layer.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>

typedef tnt__mha_cfg mha_cfg; /* attention.h */

extern const tnt__layer_ops tnt__multi_head_attention_ops;

tnt_status tnt__attention_configure(tnt_layer *l, bool has_attention_mask, bool has_query_mask,
                                    bool has_value_mask, bool use_causal_mask) {
    if (!l || l->ops != &tnt__multi_head_attention_ops)
        return tnt__error(TNT_ERR_ARG, "layer \"%s\" (%s) is not a MultiHeadAttention layer",
                          l ? l->name : "(null)", l ? l->ops->class_name : "-");
    mha_cfg *c = l->priv;
    c->has_attention_mask = has_attention_mask;
    c->has_query_mask = has_query_mask;
    c->has_value_mask = has_value_mask;
    c->causal = use_causal_mask;
    return TNT_OK;
}

int tnt__mha_n_masks(const mha_cfg *c) {
    return (int)c->has_attention_mask + (int)c->has_query_mask + (int)c->has_value_mask;
}

/* ---- build -------------------------------------------------------------------------------- */

static tnt_status mha_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    mha_cfg *c = l->priv;
    char b1[96], b2[96];
    const int want = 3 + tnt__mha_n_masks(c);
    if (n != want)
        return tnt__error(TNT_ERR_SHAPE,
                          "MultiHeadAttention \"%s\": %d inputs; expected %d (query, value, key%s%s%s)",
                          l->name, n, want, c->has_attention_mask ? ", attention_mask" : "",
                          c->has_query_mask ? ", query_mask" : "", c->has_value_mask ? ", value_mask" : "");
    static const char *names[3] = {"query", "value", "key"};
    for (int i = 0; i < 3; i++) {
        if (in[i].ndim != 2)
            return tnt__error(TNT_ERR_SHAPE,
                              "MultiHeadAttention \"%s\": %s shape %s has rank %d; expected (batch, "
                              "steps, features), i.e. rank 2 without the batch axis",
                              l->name, names[i], tnt_shape_str(in[i], b1, sizeof b1), in[i].ndim);
        if (in[i].dim[0] <= 0 || in[i].dim[1] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "MultiHeadAttention \"%s\": %s shape %s is empty", l->name,
                              names[i], tnt_shape_str(in[i], b1, sizeof b1));
    }
    if (in[2].dim[0] != in[1].dim[0])
        return tnt__error(TNT_ERR_SHAPE,
                          "MultiHeadAttention \"%s\": key shape %s has %lld steps; expected the value's "
                          "%lld (value shape %s)",
                          l->name, tnt_shape_str(in[2], b1, sizeof b1), (long long)in[2].dim[0],
                          (long long)in[1].dim[0], tnt_shape_str(in[1], b2, sizeof b2));
    const int64_t tq = in[0].dim[0], tv = in[1].dim[0];
    int k = 3;
    struct { bool on; const char *name; tnt_shape want; } m[3] = {
        {c->has_attention_mask, "attention_mask", TNT_SHAPE(tq, tv)},
        {c->has_query_mask, "query_mask", TNT_SHAPE(tq)},
        {c->has_value_mask, "value_mask", TNT_SHAPE(tv)},
    };
    for (int i = 0; i < 3; i++) {
        if (!m[i].on) continue;
        if (!tnt__shape_equal(in[k], m[i].want))
            return tnt__error(TNT_ERR_SHAPE, "MultiHeadAttention \"%s\": %s shape %s; expected %s",
                              l->name, m[i].name, tnt_shape_str(in[k], b1, sizeof b1),
                              tnt_shape_str(m[i].want, b2, sizeof b2));
        k++;
    }
    c->tq = tq, c->tv = tv;
    c->dq = in[0].dim[1], c->dv = in[1].dim[1], c->dk = in[2].dim[1];
    c->out = c->output_dim > 0 ? c->output_dim : c->dq;
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim, o = c->out;

    struct { int role; const char *name; tnt_shape shape; bool bias; int64_t fi, fo; } w[WT_COUNT] = {
        {WT_QK, "query/kernel", TNT_SHAPE(c->dq, H, kd), false, c->dq * H, c->dq * kd},
        {WT_QB, "query/bias", TNT_SHAPE(H, kd), true, H, kd},
        {WT_KK, "key/kernel", TNT_SHAPE(c->dk, H, kd), false, c->dk * H, c->dk * kd},
        {WT_KB, "key/bias", TNT_SHAPE(H, kd), true, H, kd},
        {WT_VK, "value/kernel", TNT_SHAPE(c->dv, H, vd), false, c->dv * H, c->dv * vd},
        {WT_VB, "value/bias", TNT_SHAPE(H, vd), true, H, vd},
        {WT_OK, "attention_output/kernel", TNT_SHAPE(H, vd, o), false, H * vd, H * o},
        {WT_OB, "attention_output/bias", TNT_SHAPE(o), true, o, o},
    };
    l->n_weights = 0;
    for (int i = 0; i < WT_COUNT; i++) {
        c->widx[w[i].role] = -1;
        if (w[i].bias && !c->use_bias) continue;
        int idx = tnt__layer_add_weight(l, w[i].name, w[i].shape, w[i].bias ? c->bias_init : c->kernel_init,
                                        w[i].fi, w[i].fo);
        if (idx < 0) return TNT_ERR_ARG;
        c->widx[w[i].role] = idx;
    }
    *out = TNT_SHAPE(tq, o);
    return TNT_OK;
}

/* ---- workspace ---------------------------------------------------------------------------- */

typedef struct mha_ws {
    uint64_t *seed; /* 0: no dropout was applied */
    float *q, *k, *v, *p, *ctx;
} mha_ws;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Sizes in bytes of the workspace regions, in order. */
static void ws_sizes(const mha_cfg *c, int64_t B, size_t s[6]) {
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim;
    s[0] = 64;
    s[1] = round64((size_t)(B * c->tq * H * kd) * sizeof(float));
    s[2] = round64((size_t)(B * c->tv * H * kd) * sizeof(float));
    s[3] = round64((size_t)(B * c->tv * H * vd) * sizeof(float));
    s[4] = round64((size_t)(B * H * c->tq * c->tv) * sizeof(float));
    s[5] = round64((size_t)(B * c->tq * H * vd) * sizeof(float));
}

static size_t mha_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    if (tnt__mha_plan_bf16(plan)) return tnt__mha_bf16_workspace_size(l, plan, batch);
    size_t s[6], t = 0;
    ws_sizes(l->priv, batch, s);
    for (int i = 0; i < 6; i++) t += s[i];
    return t;
}

static mha_ws ws_map(const mha_cfg *c, int64_t B, void *base) {
    size_t s[6];
    ws_sizes(c, B, s);
    char *p = base;
    mha_ws w;
    w.seed = (uint64_t *)p, p += s[0];
    w.q = (float *)p, p += s[1];
    w.k = (float *)p, p += s[2];
    w.v = (float *)p, p += s[3];
    w.p = (float *)p, p += s[4];
    w.ctx = (float *)p;
    return w;
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* One row of the masked softmax in place: s (Tv) scores -> probabilities. m (Tv) is 1/0 or
 * NULL (no mask). Masked scores get -1e9 added in float32, as Keras; a fully masked row becomes
 * (nearly) uniform for the same reason it does in Keras. */
void tnt__mha_softmax_row(float *s, const float *m, int64_t n) {
    if (m)
        for (int64_t j = 0; j < n; j++) s[j] = m[j] != 0.0f ? s[j] : s[j] + -1e9f;
    float mx = s[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    const float inv = 1.0f / tnt__exp_shifted_sum(s, s, n, mx);
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
}

/* The combined mask row for (b, t) into m (Tv) as 1/0; false when nothing is masked (m unused). */
bool tnt__mha_mask_row(const mha_cfg *c, const float *am, const float *qm, const float *vm, int64_t b,
                     int64_t t, float *m) {
    const int64_t Tq = c->tq, Tv = c->tv;
    if (!am && !qm && !vm && (!c->causal || t >= Tv - 1)) return false;
    const float qv = qm ? (qm[b * Tq + t] != 0.0f ? 1.0f : 0.0f) : 1.0f;
    for (int64_t s = 0; s < Tv; s++) {
        bool on = qv != 0.0f;
        if (am) on = on && am[(b * Tq + t) * Tv + s] != 0.0f;
        if (vm) on = on && vm[b * Tv + s] != 0.0f;
        if (c->causal) on = on && s <= t;
        m[s] = on ? 1.0f : 0.0f;
    }
    return true;
}

/* The inverted-dropout factor of P[b,h,t,s] for this step: 0 or 1/(1-rate). */
static inline uint64_t drop_index(const mha_cfg *c, int64_t gb, int64_t h, int64_t t, int64_t s) {
    return (uint64_t)(((gb * c->heads + h) * c->tq + t) * c->tv + s);
}

/* Pd = dropout(P) of one (b,h) block. */
void tnt__mha_dropout_block(const mha_cfg *c, uint64_t seed, int64_t gb, int64_t h, const float *p,
                          float *pd) {
    const float scale = 1.0f / (1.0f - c->dropout), rate = c->dropout;
    const int64_t Tq = c->tq, Tv = c->tv;
    for (int64_t t = 0; t < Tq; t++) {
        uint64_t base = drop_index(c, gb, h, t, 0);
        for (int64_t s = 0; s < Tv; s++)
            pd[t * Tv + s] = tnt__rand_uniform(seed, base + (uint64_t)s) >= rate ? p[t * Tv + s] * scale : 0.0f;
    }
}

/* out (rows, n) = alpha * (x (rows, din) · W (din, n) + b (n)), b may be NULL. */
static tnt_status project(int64_t rows, int64_t din, int64_t n, const float *x, const float *w,
                          const float *bias, float alpha, float *out) {
    tnt_status status = TNT_OK;
    if (bias) {
#pragma omp parallel for schedule(static) if (rows * n > 65536)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++) out[i * n + j] = alpha * bias[j];
    }
    TNT_DNNL(dnnl_sgemm('N', 'N', rows, n, din, alpha, x, din, w, n, bias ? 1.0f : 0.0f, out, n));
fail:
    return status;
}

/* Gradients of a projection z = x·W + b from dz (rows, n): dW (din, n), db (n) (if bias),
 * dx (rows, din) (if dx). */
static tnt_status project_backward(int64_t rows, int64_t din, int64_t n, const float *x, const float *w,
                                   const float *dz, float *dw, float *db, float *dx) {
    tnt_status status = TNT_OK;
    if ((status = tnt__sgemm_tn(din, n, rows, x, dz, 0.0f, dw)) != TNT_OK) return status;
    if (db) {
        memcpy(db, dz, (size_t)n * sizeof(float));
        for (int64_t i = 1; i < rows; i++) {
            const float *r = dz + i * n;
            for (int64_t j = 0; j < n; j++) db[j] += r[j];
        }
    }
    if (dx) TNT_DNNL(dnnl_sgemm('N', 'T', rows, din, n, 1.0f, dz, n, w, n, 0.0f, dx, din));
fail:
    return status;
}

const float *tnt__mha_wval(tnt_layer *l, int role) {
    int i = ((mha_cfg *)l->priv)->widx[role];
    return i < 0 ? NULL : l->weights[i].value;
}
float *tnt__mha_wgrad(tnt_layer *l, int role) {
    int i = ((mha_cfg *)l->priv)->widx[role];
    return i < 0 ? NULL : l->weights[i].grad;
}

/* The optional mask inputs, NULL where absent. */
void tnt__mha_mask_inputs(const mha_cfg *c, const float *const *xs, const float **am, const float **qm,
                        const float **vm) {
    int k = 3;
    *am = c->has_attention_mask ? xs[k++] : NULL;
    *qm = c->has_query_mask ? xs[k++] : NULL;
    *vm = c->has_value_mask ? xs[k++] : NULL;
}

/* Per-thread scratch of `per` floats from the shared scratchpad, after `skip` bytes. */
static float *scratch(size_t skip, size_t per, int nthreads) {
    dnnl_memory_t m = tnt__scratchpad(skip + round64(per * sizeof(float)) * (size_t)nthreads + 64);
    if (!m) return NULL;
    void *h = NULL;
    if (dnnl_memory_get_data_handle(m, &h) != dnnl_success || !h) {
        tnt__error(TNT_ERR_NOMEM, "MultiHeadAttention: scratchpad unavailable");
        return NULL;
    }
    return (float *)((char *)h + skip);
}

/* ---- forward ------------------------------------------------------------------------------ */

static tnt_status mha_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    mha_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    const int want = 3 + tnt__mha_n_masks(c);
    if (a->n_inputs != want || !a->xs)
        return tnt__error(TNT_ERR_ARG, "MultiHeadAttention \"%s\": forward with %d inputs; expected %d",
                          l->name, a->n_inputs, want);
    if (tnt__mha_plan_bf16(plan)) return tnt__mha_bf16_forward(l, plan, a);
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim,
                  vd = c->value_dim;
    mha_ws w = ws_map(c, B, a->workspace);
    const float *am, *qm, *vm;
    tnt__mha_mask_inputs(c, a->xs, &am, &qm, &vm);
    const bool drop = a->training && c->dropout > 0.0f;
    uint64_t seed = 0;
    if (drop) {
        seed = tnt__hash64(l->seed ^ a->seed);
        if (!seed) seed = 1;
    }
    *w.seed = seed;

    const float qscale = 1.0f / sqrtf((float)kd);
    if ((status = project(B * Tq, c->dq, H * kd, a->xs[0], tnt__mha_wval(l, WT_QK), tnt__mha_wval(l, WT_QB), qscale, w.q)) ||
        (status = project(B * Tv, c->dk, H * kd, a->xs[2], tnt__mha_wval(l, WT_KK), tnt__mha_wval(l, WT_KB), 1.0f, w.k)) ||
        (status = project(B * Tv, c->dv, H * vd, a->xs[1], tnt__mha_wval(l, WT_VK), tnt__mha_wval(l, WT_VB), 1.0f, w.v)))
        return status;

    /* per thread: a mask row (Tv) and, with dropout, Pd (Tq*Tv) */
    const int nt = omp_get_max_threads();
    const size_t per = (size_t)(Tv + (drop ? Tq * Tv : 0));
    float *scr = scratch(0, per, nt);
    if (!scr) return TNT_ERR_NOMEM;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        float *mine = scr + (size_t)omp_get_thread_num() * (round64(per * sizeof(float)) / sizeof(float));
        float *mrow = mine, *pd = mine + Tv;
        float *p = w.p + bh * Tq * Tv;
        const float *qb = w.q + b * Tq * H * kd + h * kd, *kb = w.k + b * Tv * H * kd + h * kd;
        const float *vb = w.v + b * Tv * H * vd + h * vd;
        if (dnnl_sgemm('N', 'T', Tq, Tv, kd, 1.0f, qb, H * kd, kb, H * kd, 0.0f, p, Tv) != dnnl_success) {
            failed = 1;
            continue;
        }
        for (int64_t t = 0; t < Tq; t++)
            tnt__mha_softmax_row(p + t * Tv, tnt__mha_mask_row(c, am, qm, vm, b, t, mrow) ? mrow : NULL, Tv);
        const float *pv = p;
        if (drop) {
            tnt__mha_dropout_block(c, seed, a->sample_offset + b, h, p, pd);
            pv = pd;
        }
        if (dnnl_sgemm('N', 'N', Tq, vd, Tv, 1.0f, pv, Tv, vb, H * vd, 0.0f, w.ctx + b * Tq * H * vd + h * vd,
                       H * vd) != dnnl_success)
            failed = 1;
    }
    if (failed) return tnt__error(TNT_ERR_BACKEND, "MultiHeadAttention \"%s\": dnnl_sgemm failed", l->name);

    return project(B * Tq, H * vd, c->out, w.ctx, tnt__mha_wval(l, WT_OK), tnt__mha_wval(l, WT_OB), 1.0f, a->y);
}

/* ---- backward ----------------------------------------------------------------------------- */

static tnt_status mha_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    mha_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    const int want = 3 + tnt__mha_n_masks(c);
    if (a->n_inputs != want || !a->xs)
        return tnt__error(TNT_ERR_ARG, "MultiHeadAttention \"%s\": backward with %d inputs; expected %d",
                          l->name, a->n_inputs, want);
    if (tnt__mha_plan_bf16(plan)) return tnt__mha_bf16_backward(l, plan, a);
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim,
                  vd = c->value_dim, O = c->out;
    mha_ws w = ws_map(c, B, a->workspace);
    const uint64_t seed = *w.seed;
    const bool drop = seed != 0 && c->dropout > 0.0f;

    /* scratch: dctx (B,Tq,H,vd), dq (B,Tq,H,kd), dk (B,Tv,H,kd), dv (B,Tv,H,vd), then per thread
     * dP (Tq*Tv) and, with dropout, Pd (Tq*Tv) */
    const size_t nctx = round64((size_t)(B * Tq * H * vd) * sizeof(float)),
                 nq = round64((size_t)(B * Tq * H * kd) * sizeof(float)),
                 nk = round64((size_t)(B * Tv * H * kd) * sizeof(float)),
                 nv = round64((size_t)(B * Tv * H * vd) * sizeof(float));
    const int nt = omp_get_max_threads();
    const size_t per = (size_t)(Tq * Tv * (drop ? 2 : 1));
    float *scr = scratch(nctx + nq + nk + nv, per, nt);
    if (!scr) return TNT_ERR_NOMEM;
    char *base = (char *)scr - (nctx + nq + nk + nv);
    float *dctx = (float *)base, *dq = (float *)(base + nctx), *dk = (float *)(base + nctx + nq),
          *dv = (float *)(base + nctx + nq + nk);

    /* output projection */
    if ((status = project_backward(B * Tq, H * vd, O, w.ctx, tnt__mha_wval(l, WT_OK), a->dy, tnt__mha_wgrad(l, WT_OK),
                                   tnt__mha_wgrad(l, WT_OB), dctx)))
        return status;

    const float qscale = 1.0f / sqrtf((float)kd), dscale = drop ? 1.0f / (1.0f - c->dropout) : 1.0f;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        float *dp = scr + (size_t)omp_get_thread_num() * (round64(per * sizeof(float)) / sizeof(float));
        float *pd = dp + Tq * Tv;
        const float *p = w.p + bh * Tq * Tv;
        const int64_t oq = b * Tq * H * kd + h * kd, ok = b * Tv * H * kd + h * kd,
                      ov = b * Tv * H * vd + h * vd, oc = b * Tq * H * vd + h * vd;
        const float *pv = p;
        if (drop) {
            tnt__mha_dropout_block(c, seed, a->sample_offset + b, h, p, pd);
            pv = pd;
        }
        /* dv = Pd^T · dctx;  dPd = dctx · v^T */
        if (dnnl_sgemm('T', 'N', Tv, vd, Tq, 1.0f, pv, Tv, dctx + oc, H * vd, 0.0f, dv + ov, H * vd) ||
            dnnl_sgemm('N', 'T', Tq, Tv, vd, 1.0f, dctx + oc, H * vd, w.v + ov, H * vd, 0.0f, dp, Tv)) {
            failed = 1;
            continue;
        }
        /* dP = dPd * dropout factor; dS = P * (dP - sum_s P*dP) */
        for (int64_t t = 0; t < Tq; t++) {
            float *g = dp + t * Tv;
            const float *pr = p + t * Tv;
            if (drop) {
                const float *pdr = pd + t * Tv;
                for (int64_t s = 0; s < Tv; s++) g[s] = pdr[s] != 0.0f || pr[s] == 0.0f ? g[s] * dscale : 0.0f;
            }
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t s = 0; s < Tv; s++) dot += pr[s] * g[s];
            for (int64_t s = 0; s < Tv; s++) g[s] = pr[s] * (g[s] - dot);
        }
        /* dq (before the 1/sqrt(kd) scaling) = scale * dS · k;  dk = dS^T · q_scaled */
        if (dnnl_sgemm('N', 'N', Tq, kd, Tv, qscale, dp, Tv, w.k + ok, H * kd, 0.0f, dq + oq, H * kd) ||
            dnnl_sgemm('T', 'N', Tv, kd, Tq, 1.0f, dp, Tv, w.q + oq, H * kd, 0.0f, dk + ok, H * kd))
            failed = 1;
    }
    if (failed) return tnt__error(TNT_ERR_BACKEND, "MultiHeadAttention \"%s\": dnnl_sgemm failed", l->name);

    float *const *dxs = a->dxs;
    float *dquery = dxs ? dxs[0] : a->dx, *dvalue = dxs ? dxs[1] : NULL, *dkey = dxs ? dxs[2] : NULL;
    if ((status = project_backward(B * Tq, c->dq, H * kd, a->xs[0], tnt__mha_wval(l, WT_QK), dq, tnt__mha_wgrad(l, WT_QK),
                                   tnt__mha_wgrad(l, WT_QB), dquery)) ||
        (status = project_backward(B * Tv, c->dk, H * kd, a->xs[2], tnt__mha_wval(l, WT_KK), dk, tnt__mha_wgrad(l, WT_KK),
                                   tnt__mha_wgrad(l, WT_KB), dkey)) ||
        (status = project_backward(B * Tv, c->dv, H * vd, a->xs[1], tnt__mha_wval(l, WT_VK), dv, tnt__mha_wgrad(l, WT_VK),
                                   tnt__mha_wgrad(l, WT_VB), dvalue)))
        return status;
    if (dxs) { /* masks: no gradient; zeros where one is asked for anyway */
        const int64_t mn[3] = {Tq * Tv, Tq, Tv};
        const bool on[3] = {c->has_attention_mask, c->has_query_mask, c->has_value_mask};
        for (int i = 0, k = 3; i < 3; i++)
            if (on[i] && dxs[k++]) memset(dxs[k - 1], 0, (size_t)(B * mn[i]) * sizeof(float));
    }
    return TNT_OK;
}

/* ---- constructor -------------------------------------------------------------------------- */

static void mha_destroy(tnt_layer *l) {
    mha_cfg *c = l->priv;
    if (c) tnt__free(c->w16);
    free(c);
}

void tnt__attention_call_info(const tnt_layer *l, bool *has_attention_mask, bool *use_causal_mask) {
    const mha_cfg *c = l->priv;
    *has_attention_mask = c->has_attention_mask;
    *use_causal_mask = c->causal;
}

/* [null, steps, features], or null before build */
static tnt_status mha_add_shape(const tnt_layer *l, cJSON *c, const char *key, int64_t t, int64_t d) {
    if (!l->built) {
        TNT_KJ(cJSON_AddNullToObject(c, key));
        return TNT_OK;
    }
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNull()));
    TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t)));
    TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d)));
    return TNT_OK;
}

/* Keras 2.11's keys; attention_axes becomes [1] at build (the sequence axis). */
static tnt_status mha_get_config(const tnt_layer *l, cJSON *c) {
    const mha_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "num_heads", p->heads));
    TNT_KJ(cJSON_AddNumberToObject(c, "key_dim", p->key_dim));
    TNT_KJ(cJSON_AddNumberToObject(c, "value_dim", p->value_dim));
    TNT_KJ(cJSON_AddNumberToObject(c, "dropout", tnt__kj_f(p->dropout)));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", p->use_bias));
    if (p->output_dim) TNT_KJ(cJSON_AddNumberToObject(c, "output_shape", p->output_dim));
    else TNT_KJ(cJSON_AddNullToObject(c, "output_shape"));
    if (l->built) TNT_KJ_S(tnt__kj_add_ints(c, "attention_axes", 1, (int[]){1}));
    else TNT_KJ(cJSON_AddNullToObject(c, "attention_axes"));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", p->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", p->bias_init));
    TNT_KJ_S(tnt__kj_add_nulls(c, tnt__kj_kernel_nulls));
    TNT_KJ_S(mha_add_shape(l, c, "query_shape", p->tq, p->dq));
    TNT_KJ_S(mha_add_shape(l, c, "key_shape", p->tv, p->dk));
    return mha_add_shape(l, c, "value_shape", p->tv, p->dv);
}

static tnt_layer *mha_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_attention_opts o = {.name = k->name};
    int heads = 0, key_dim = 0, a = 0;
    double dropout = 0;
    bool use_bias = false;
    TNT_KJ_READ(tnt__kj_int(c, "num_heads", true, 0, &heads, k));
    TNT_KJ_READ(tnt__kj_int(c, "key_dim", true, 0, &key_dim, k));
    TNT_KJ_READ(tnt__kj_int(c, "value_dim", false, 0, &o.value_dim, k));
    TNT_KJ_READ(tnt__kj_num(c, "dropout", false, 0, &dropout, k));
    TNT_KJ_READ(tnt__kj_bool(c, "use_bias", true, &use_bias, k));
    const cJSON *os = tnt__kj_item(c, "output_shape"), *os_list = tnt__kj_list(os);
    if (!tnt__kj_absent(os) && !tnt__kj_as_int(os, &o.output_dim) &&
        !(cJSON_GetArraySize(os_list) == 1 && tnt__kj_as_int(cJSON_GetArrayItem(os_list, 0), &o.output_dim)))
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "output_shape: only an integer (or a list of one) is supported");
    const cJSON *ax = tnt__kj_item(c, "attention_axes"), *ax_list = tnt__kj_list(ax);
    if (!tnt__kj_absent(ax) && !(tnt__kj_as_int(ax, &a) && a == 1) &&
        !(cJSON_GetArraySize(ax_list) == 1 && tnt__kj_as_int(cJSON_GetArrayItem(ax_list, 0), &a) && a == 1))
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED,
                            "attention_axes: only null or [1] (the sequence axis) is supported");
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.bias_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, tnt__kj_kernel_nulls, k));
    o.dropout = (float)dropout;
    o.no_bias = !use_bias;
    return tnt__kj_built(tnt_multi_head_attention(heads, key_dim, &o), k);
}

const tnt__layer_ops tnt__multi_head_attention_ops = {
    .class_name = "MultiHeadAttention",
    .from_config = mha_from_config,
    .get_config = mha_get_config,
    .build_multi = mha_build,
    .plan_create = tnt__mha_plan_create,
    .plan_destroy = tnt__mha_plan_destroy,
    .workspace_size = mha_workspace_size,
    .forward = mha_forward,
    .backward = mha_backward,
    .destroy = mha_destroy,
    .supports_masking = true,
    .gpu = &tnt__mha_gpu_ops,
};

tnt_layer *tnt_multi_head_attention(int num_heads, int key_dim, const tnt_attention_opts *opts) {
    static const tnt_attention_opts defaults;
    const tnt_attention_opts *o = opts ? opts : &defaults;
    if (num_heads <= 0) {
        tnt__error(TNT_ERR_ARG, "MultiHeadAttention: num_heads %d (expected > 0)", num_heads);
        return NULL;
    }
    if (key_dim <= 0) {
        tnt__error(TNT_ERR_ARG, "MultiHeadAttention: key_dim %d (expected > 0)", key_dim);
        return NULL;
    }
    if (o->value_dim < 0) {
        tnt__error(TNT_ERR_ARG, "MultiHeadAttention: value_dim %d (expected > 0, or 0 for key_dim)",
                   o->value_dim);
        return NULL;
    }
    if (o->output_dim < 0) {
        tnt__error(TNT_ERR_ARG,
                   "MultiHeadAttention: output_dim %d (expected > 0, or 0 for the query's last dimension)",
                   o->output_dim);
        return NULL;
    }
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f)) {
        tnt__error(TNT_ERR_ARG, "MultiHeadAttention: dropout %g (expected 0 <= dropout < 1)", (double)o->dropout);
        return NULL;
    }
    if (!tnt__init_valid(o->kernel_initializer, TNT_INIT_ORTHOGONAL) ||
        !tnt__init_valid(o->bias_initializer, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "MultiHeadAttention: initializer %d/%d (expected 0..%d)",
                   (int)o->kernel_initializer, (int)o->bias_initializer, (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    mha_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->heads = num_heads;
    c->key_dim = key_dim;
    c->value_dim = o->value_dim ? o->value_dim : key_dim;
    c->output_dim = o->output_dim;
    c->dropout = o->dropout;
    c->use_bias = !o->no_bias;
    c->kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM;
    c->bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS;
    tnt_layer *l = tnt__layer_new(&tnt__multi_head_attention_ops, o->name, c);
    if (!l) free(c);
    return l;
}
