/* attention_gpu.c: MultiHeadAttention on the device (the layer's gpu table), the CPU's steps of
 * attention.c in the same order and layouts:
 *   projections         cuBLAS sgemm over all rows, the bias set first (times 1/sqrt(kd) for q)
 *   per-head products   strided-batched sgemm, one call per head over the batch: a head is a
 *                       (steps, dim) submatrix with leading dimension H*dim, and the next sample's
 *                       is steps*H*dim further on, so no copy or transpose is needed
 *   masked softmax      tnt_k_mha_softmax (attention.cu), dropout tnt_k_dropout over the whole
 *                       (B, H, Tq, Tv) buffer with base = sample offset * H Tq Tv (the CPU's
 *                       drop_index); backward tnt_k_mha_softmax_bwd
 * Device workspace: q, k, v, P, Pd (dropout only), ctx kept from forward to backward, then
 * backward's scratch dctx, dq, dk, dv, dP. The step seed lives in the host plan, as Dropout's.
 *
 * mixed_bfloat16 (attention_bf16.c's rounding points, whatever the host CPU): every product takes
 * bf16 operands and sums in float32 (cublasGemmEx, strided batched per head): the inputs and the
 * four kernels converted per forward, q (scaled), k, v, P after dropout and ctx rounded once
 * computed; backward rounds dy, dctx, dS and each projection's dz before its products. Masks,
 * softmax, dropout, biases and their gradients stay float32. The bf16 copies follow the float32
 * regions in the workspace. */
#include "gpu/gpu.h"
#include "layers/attention/attention.h"
#include "layers/layer.h"

#include <math.h>

#define GPU_BLOCK 256
#define SOFTMAX_BLOCK 128

typedef tnt__mha_cfg mha_cfg;

typedef struct mha_gpu_plan {
    uint64_t seed; /* of the last forward; 0: no dropout was applied */
} mha_gpu_plan;

enum { R_Q, R_K, R_V, R_P, R_PD, R_CTX, R_DCTX, R_DQ, R_DK, R_DV, R_DP, R_COUNT };

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Sizes in bytes of the workspace regions, in the order of the enum (Pd empty without dropout). */
static void gws_sizes(const mha_cfg *c, int64_t B, size_t s[R_COUNT]) {
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim;
    const size_t f = sizeof(float), nq = (size_t)(B * c->tq * H * kd) * f, nk = (size_t)(B * c->tv * H * kd) * f,
                 nv = (size_t)(B * c->tv * H * vd) * f, np = (size_t)(B * H * c->tq * c->tv) * f,
                 nc = (size_t)(B * c->tq * H * vd) * f;
    const size_t all[R_COUNT] = {nq, nk, nv, np, c->dropout > 0.0f ? np : 0, nc, nc, nq, nk, nv, np};
    for (int i = 0; i < R_COUNT; i++) s[i] = round256(all[i]);
}

static void gws_map(const mha_cfg *c, int64_t B, void *base, float *r[R_COUNT]) {
    size_t s[R_COUNT];
    gws_sizes(c, B, s);
    char *p = base;
    for (int i = 0; i < R_COUNT; i++) r[i] = (float *)p, p += s[i];
}

/* bf16 regions (mixed_bfloat16 only), after the float32 ones */
enum { H_XQ, H_XK, H_XV, H_WQ, H_WK, H_WV, H_WO, H_Q, H_K, H_V, H_PD, H_CTX, H_DY, H_DCTX, H_DS, H_DZ, H_COUNT };

static bool mha_bf16(const tnt_layer *l) { return l->dtype_policy == TNT__POLICY_MIXED_BF16; }

static void hws_sizes(const mha_cfg *c, int64_t B, size_t s[H_COUNT]) {
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim, Tq = c->tq, Tv = c->tv, O = c->out;
    const int64_t dz = TNT_MAX(TNT_MAX(B * Tq * H * kd, B * Tv * H * kd), B * Tv * H * vd);
    const int64_t n[H_COUNT] = {B * Tq * c->dq, B * Tv * c->dk, B * Tv * c->dv, c->dq * H * kd, c->dk * H * kd,
                                c->dv * H * vd, H * vd * O,     B * Tq * H * kd, B * Tv * H * kd, B * Tv * H * vd,
                                B * H * Tq * Tv, B * Tq * H * vd, B * Tq * O,    B * Tq * H * vd, B * H * Tq * Tv, dz};
    for (int i = 0; i < H_COUNT; i++) s[i] = round256((size_t)n[i] * sizeof(uint16_t));
}

static void hws_map(const mha_cfg *c, int64_t B, void *base, uint16_t *h[H_COUNT]) {
    size_t f[R_COUNT], s[H_COUNT];
    gws_sizes(c, B, f);
    hws_sizes(c, B, s);
    char *p = base;
    for (int i = 0; i < R_COUNT; i++) p += f[i];
    for (int i = 0; i < H_COUNT; i++) h[i] = (uint16_t *)p, p += s[i];
}

static void *mha_gpu_plan_create(tnt_layer *l, int64_t batch) {
    (void)l, (void)batch;
    return tnt__calloc(1, sizeof(mha_gpu_plan));
}

static void mha_gpu_plan_destroy(void *plan) { free(plan); }

static size_t mha_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    size_t s[R_COUNT], h[H_COUNT], t = 0;
    gws_sizes(l->priv, batch, s);
    for (int i = 0; i < R_COUNT; i++) t += s[i];
    if (!mha_bf16(l)) return t;
    hws_sizes(l->priv, batch, h);
    for (int i = 0; i < H_COUNT; i++) t += h[i];
    return t;
}

/* out (rows, n) = alpha * (x (rows, din) · W (din, n) + b (n)), b may be NULL: attention.c's
 * project (the bias times alpha first, then the product added with alpha). */
static tnt_status gpu_project(long long rows, long long din, long long n, const float *x, const float *w,
                              const float *bias, float alpha, float *out);
/* The bias rows (times alpha) of gpu_project */
static tnt_status gpu_bias_rows(long long rows, long long n, const float *bias, float alpha, float *out) {
    tnt_status s = TNT_OK;
    if (bias) {
        void *args[] = {&out, &bias, &rows, &n};
        s = tnt__gpu_launch("tnt_k_bias_set", tnt__gpu_grid_for(rows * n, GPU_BLOCK), GPU_BLOCK, 0, args);
        if (s == TNT_OK && alpha != 1.0f) {
            long long total = rows * n;
            const float *in = out;
            void *sargs[] = {&in, &out, &total, &alpha};
            s = tnt__gpu_launch("tnt_k_scale", tnt__gpu_grid_for(total, GPU_BLOCK), GPU_BLOCK, 0, sargs);
        }
    }
    return s;
}

static tnt_status gpu_project(long long rows, long long din, long long n, const float *x, const float *w,
                              const float *bias, float alpha, float *out) {
    tnt_status s = gpu_bias_rows(rows, n, bias, alpha, out);
    if (s != TNT_OK) return s;
    return tnt__gpu_sgemm(false, false, rows, n, din, alpha, x, din, w, n, bias ? 1.0f : 0.0f, out, n);
}

/* gpu_project on bf16 x and W */
static tnt_status gpu_project16(long long rows, long long din, long long n, const uint16_t *x, const uint16_t *w,
                                const float *bias, float alpha, float *out) {
    tnt_status s = gpu_bias_rows(rows, n, bias, alpha, out);
    if (s != TNT_OK) return s;
    return tnt__gpu_gemm_bf16(false, false, rows, n, din, alpha, x, din, w, n, bias ? 1.0f : 0.0f, out, n);
}

/* dW (din, n) = x^T dz, db (n) = column sums of dz (fixed order, in double), dx (rows,
 * din) = dz W^T; db and dx may be NULL. */
static tnt_status gpu_project_backward(long long rows, long long din, long long n, const float *x, const float *w,
                                       const float *dz, float *dw, float *db, float *dx) {
    tnt_status s = tnt__gpu_sgemm(true, false, din, n, rows, 1.0f, x, din, dz, n, 0.0f, dw, n);
    if (s == TNT_OK && db) s = tnt__gpu_col_sums(dz, db, rows, n);
    if (s == TNT_OK && dx) s = tnt__gpu_sgemm(false, true, rows, din, n, 1.0f, dz, n, w, n, 0.0f, dx, din);
    return s;
}

/* gpu_project_backward on bf16 x and W: dz rounded to bf16 (into dz16) for dW and dx; db from the
 * float32 dz */
static tnt_status gpu_project_backward16(long long rows, long long din, long long n, const uint16_t *x,
                                         const uint16_t *w, const float *dz, uint16_t *dz16, float *dw, float *db,
                                         float *dx) {
    tnt_status s = tnt__gpu_to_bf16(dz, dz16, rows * n);
    if (s == TNT_OK) s = tnt__gpu_gemm_bf16(true, false, din, n, rows, 1.0f, x, din, dz16, n, 0.0f, dw, n);
    if (s == TNT_OK && db) s = tnt__gpu_col_sums(dz, db, rows, n);
    if (s == TNT_OK && dx) s = tnt__gpu_gemm_bf16(false, true, rows, din, n, 1.0f, dz16, n, w, n, 0.0f, dx, din);
    return s;
}

static const float *dval(tnt_layer *l, int role) {
    int i = ((mha_cfg *)l->priv)->widx[role];
    return i < 0 ? NULL : l->weights[i].d_value;
}
static float *dgrad(tnt_layer *l, int role) {
    int i = ((mha_cfg *)l->priv)->widx[role];
    return i < 0 ? NULL : l->weights[i].d_grad;
}

/* Pd = dropout(P) over the whole (B, H, Tq, Tv) buffer */
static tnt_status gpu_dropout(const mha_cfg *c, uint64_t seed, int64_t B, int64_t sample_offset, const float *p,
                              float *pd) {
    const int64_t per = c->heads * c->tq * c->tv;
    long long n = B * per, s = (long long)seed, base = sample_offset * per;
    float rate = c->dropout, scale = 1.0f / (1.0f - c->dropout);
    void *args[] = {&p, &pd, &n, &s, &base, &rate, &scale};
    return tnt__gpu_launch("tnt_k_dropout", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static unsigned rows_grid(int64_t rows) { return tnt__gpu_grid_for(rows * SOFTMAX_BLOCK, SOFTMAX_BLOCK); }

/* The scores in r[R_P] to attention weights: the masked (and causal) softmax in place, then, when
 * training, dropout into r[R_PD]; *pv: the weights the context multiplies. */
static tnt_status gpu_scores_to_weights(const mha_cfg *c, const mha_gpu_plan *g, const tnt__fwd_args *a,
                                        float *const *r, const float *am, const float *qm, const float *vm,
                                        const float **pv) {
    long long lB = a->batch, lH = c->heads, lTq = c->tq, lTv = c->tv;
    int causal = c->causal;
    float *pbuf = r[R_P];
    void *sargs[] = {&pbuf, &am, &qm, &vm, &lB, &lH, &lTq, &lTv, &causal};
    tnt_status s =
        tnt__gpu_launch("tnt_k_mha_softmax", rows_grid(a->batch * c->heads * c->tq), SOFTMAX_BLOCK, 0, sargs);
    if (s != TNT_OK) return s;
    *pv = r[R_P];
    if (g->seed) {
        if ((s = gpu_dropout(c, g->seed, a->batch, a->sample_offset, r[R_P], r[R_PD]))) return s;
        *pv = r[R_PD];
    }
    return TNT_OK;
}

/* masks: no gradient; zeros where one is asked for anyway */
static tnt_status zero_mask_grads(const mha_cfg *c, int64_t B, float *const *dxs) {
    tnt_status s = TNT_OK;
    if (!dxs) return s;
    const int64_t mn[3] = {c->tq * c->tv, c->tq, c->tv};
    const bool on[3] = {c->has_attention_mask, c->has_query_mask, c->has_value_mask};
    for (int i = 0, k = 3; i < 3 && s == TNT_OK; i++)
        if (on[i] && dxs[k++]) s = tnt__gpu_memset_zero(dxs[k - 1], (size_t)(B * mn[i]) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

/* ---- mixed_bfloat16 ---------------------------------------------------------------------------- */

static tnt_status mha_gpu_forward16(tnt_layer *l, const mha_gpu_plan *g, const tnt__fwd_args *a, float *const *r,
                                    const float *am, const float *qm, const float *vm) {
    mha_cfg *c = l->priv;
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim, vd = c->value_dim, O = c->out;
    uint16_t *h[H_COUNT];
    hws_map(c, B, a->workspace, h);
    const float qscale = 1.0f / sqrtf((float)kd);
    tnt_status s;
    /* the inputs and kernels in bf16, then q (scaled), k, v computed and rounded */
    if ((s = tnt__gpu_to_bf16(a->xs[0], h[H_XQ], B * Tq * c->dq)) ||
        (s = tnt__gpu_to_bf16(a->xs[2], h[H_XK], B * Tv * c->dk)) ||
        (s = tnt__gpu_to_bf16(a->xs[1], h[H_XV], B * Tv * c->dv)) ||
        (s = tnt__gpu_to_bf16(dval(l, WT_QK), h[H_WQ], c->dq * H * kd)) ||
        (s = tnt__gpu_to_bf16(dval(l, WT_KK), h[H_WK], c->dk * H * kd)) ||
        (s = tnt__gpu_to_bf16(dval(l, WT_VK), h[H_WV], c->dv * H * vd)) ||
        (s = tnt__gpu_to_bf16(dval(l, WT_OK), h[H_WO], H * vd * O)) ||
        (s = gpu_project16(B * Tq, c->dq, H * kd, h[H_XQ], h[H_WQ], dval(l, WT_QB), qscale, r[R_Q])) ||
        (s = gpu_project16(B * Tv, c->dk, H * kd, h[H_XK], h[H_WK], dval(l, WT_KB), 1.0f, r[R_K])) ||
        (s = gpu_project16(B * Tv, c->dv, H * vd, h[H_XV], h[H_WV], dval(l, WT_VB), 1.0f, r[R_V])) ||
        (s = tnt__gpu_to_bf16(r[R_Q], h[H_Q], B * Tq * H * kd)) || (s = tnt__gpu_to_bf16(r[R_K], h[H_K], B * Tv * H * kd)) ||
        (s = tnt__gpu_to_bf16(r[R_V], h[H_V], B * Tv * H * vd)))
        return s;
    for (int64_t i = 0; i < H && s == TNT_OK; i++)
        s = tnt__gpu_gemm_bf16_strided(false, true, Tq, Tv, kd, 1.0f, h[H_Q] + i * kd, H * kd, Tq * H * kd,
                                       h[H_K] + i * kd, H * kd, Tv * H * kd, 0.0f, r[R_P] + i * Tq * Tv, Tv,
                                       H * Tq * Tv, B);
    if (s != TNT_OK) return s;
    const float *pv;
    if ((s = gpu_scores_to_weights(c, g, a, r, am, qm, vm, &pv))) return s;
    if ((s = tnt__gpu_to_bf16(pv, h[H_PD], B * H * Tq * Tv))) return s;
    for (int64_t i = 0; i < H && s == TNT_OK; i++)
        s = tnt__gpu_gemm_bf16_strided(false, false, Tq, vd, Tv, 1.0f, h[H_PD] + i * Tq * Tv, Tv, H * Tq * Tv,
                                       h[H_V] + i * vd, H * vd, Tv * H * vd, 0.0f, r[R_CTX] + i * vd, H * vd,
                                       Tq * H * vd, B);
    if (s == TNT_OK) s = tnt__gpu_to_bf16(r[R_CTX], h[H_CTX], B * Tq * H * vd);
    if (s != TNT_OK) return s;
    return gpu_project16(B * Tq, H * vd, O, h[H_CTX], h[H_WO], dval(l, WT_OB), 1.0f, a->y);
}

static tnt_status mha_gpu_backward16(tnt_layer *l, const mha_gpu_plan *g, const tnt__bwd_args *a, float *const *r,
                                     float *dquery, float *dkey, float *dvalue) {
    mha_cfg *c = l->priv;
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim, vd = c->value_dim, O = c->out;
    uint16_t *h[H_COUNT];
    hws_map(c, B, a->workspace, h);
    const bool drop = g->seed != 0;
    float *dctx = r[R_DCTX], *dq = r[R_DQ], *dk = r[R_DK], *dv = r[R_DV], *dp = r[R_DP];
    /* output projection: dWo, dbo, dctx (rounded for the products below) */
    tnt_status s = gpu_project_backward16(B * Tq, H * vd, O, h[H_CTX], h[H_WO], a->dy, h[H_DY], dgrad(l, WT_OK),
                                          dgrad(l, WT_OB), dctx);
    if (s == TNT_OK) s = tnt__gpu_to_bf16(dctx, h[H_DCTX], B * Tq * H * vd);
    for (int64_t i = 0; i < H && s == TNT_OK; i++) {
        s = tnt__gpu_gemm_bf16_strided(true, false, Tv, vd, Tq, 1.0f, h[H_PD] + i * Tq * Tv, Tv, H * Tq * Tv,
                                       h[H_DCTX] + i * vd, H * vd, Tq * H * vd, 0.0f, dv + i * vd, H * vd,
                                       Tv * H * vd, B);
        if (s == TNT_OK)
            s = tnt__gpu_gemm_bf16_strided(false, true, Tq, Tv, vd, 1.0f, h[H_DCTX] + i * vd, H * vd, Tq * H * vd,
                                           h[H_V] + i * vd, H * vd, Tv * H * vd, 0.0f, dp + i * Tq * Tv, Tv,
                                           H * Tq * Tv, B);
    }
    if (s != TNT_OK) return s;
    const float *p = r[R_P], *pd = drop ? r[R_PD] : NULL;
    long long rows = B * H * Tq, lTv = Tv;
    float dscale = drop ? 1.0f / (1.0f - c->dropout) : 1.0f;
    void *bargs[] = {&p, &pd, &dp, &rows, &lTv, &dscale};
    if ((s = tnt__gpu_launch("tnt_k_mha_softmax_bwd", rows_grid(rows), SOFTMAX_BLOCK, 0, bargs)) ||
        (s = tnt__gpu_to_bf16(dp, h[H_DS], B * H * Tq * Tv)))
        return s;
    const float qscale = 1.0f / sqrtf((float)kd);
    for (int64_t i = 0; i < H && s == TNT_OK; i++) {
        s = tnt__gpu_gemm_bf16_strided(false, false, Tq, kd, Tv, qscale, h[H_DS] + i * Tq * Tv, Tv, H * Tq * Tv,
                                       h[H_K] + i * kd, H * kd, Tv * H * kd, 0.0f, dq + i * kd, H * kd, Tq * H * kd, B);
        if (s == TNT_OK)
            s = tnt__gpu_gemm_bf16_strided(true, false, Tv, kd, Tq, 1.0f, h[H_DS] + i * Tq * Tv, Tv, H * Tq * Tv,
                                           h[H_Q] + i * kd, H * kd, Tq * H * kd, 0.0f, dk + i * kd, H * kd,
                                           Tv * H * kd, B);
    }
    if (s == TNT_OK)
        s = gpu_project_backward16(B * Tq, c->dq, H * kd, h[H_XQ], h[H_WQ], dq, h[H_DZ], dgrad(l, WT_QK),
                                   dgrad(l, WT_QB), dquery);
    if (s == TNT_OK)
        s = gpu_project_backward16(B * Tv, c->dk, H * kd, h[H_XK], h[H_WK], dk, h[H_DZ], dgrad(l, WT_KK),
                                   dgrad(l, WT_KB), dkey);
    if (s == TNT_OK)
        s = gpu_project_backward16(B * Tv, c->dv, H * vd, h[H_XV], h[H_WV], dv, h[H_DZ], dgrad(l, WT_VK),
                                   dgrad(l, WT_VB), dvalue);
    return s;
}

static tnt_status mha_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    mha_cfg *c = l->priv;
    mha_gpu_plan *g = plan;
    const int want = 3 + tnt__mha_n_masks(c);
    if (a->n_inputs != want || !a->xs)
        return tnt__error(TNT_ERR_ARG, "MultiHeadAttention \"%s\": forward with %d inputs; expected %d", l->name,
                          a->n_inputs, want);
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim, vd = c->value_dim;
    float *r[R_COUNT];
    gws_map(c, B, a->workspace, r);
    const float *am, *qm, *vm;
    tnt__mha_mask_inputs(c, a->xs, &am, &qm, &vm);
    g->seed = 0;
    if (a->training && c->dropout > 0.0f) {
        g->seed = tnt__hash64(l->seed ^ a->seed);
        if (!g->seed) g->seed = 1;
    }

    if (mha_bf16(l)) return mha_gpu_forward16(l, g, a, r, am, qm, vm);
    const float qscale = 1.0f / sqrtf((float)kd);
    tnt_status s;
    if ((s = gpu_project(B * Tq, c->dq, H * kd, a->xs[0], dval(l, WT_QK), dval(l, WT_QB), qscale, r[R_Q])) ||
        (s = gpu_project(B * Tv, c->dk, H * kd, a->xs[2], dval(l, WT_KK), dval(l, WT_KB), 1.0f, r[R_K])) ||
        (s = gpu_project(B * Tv, c->dv, H * vd, a->xs[1], dval(l, WT_VK), dval(l, WT_VB), 1.0f, r[R_V])))
        return s;
    /* S[b,h] = q[b,:,h,:] k[b,:,h,:]^T, per head over the batch */
    for (int64_t h = 0; h < H && s == TNT_OK; h++)
        s = tnt__gpu_sgemm_strided(false, true, Tq, Tv, kd, 1.0f, r[R_Q] + h * kd, H * kd, Tq * H * kd,
                                   r[R_K] + h * kd, H * kd, Tv * H * kd, 0.0f, r[R_P] + h * Tq * Tv, Tv,
                                   H * Tq * Tv, B);
    if (s != TNT_OK) return s;
    const float *pv;
    if ((s = gpu_scores_to_weights(c, g, a, r, am, qm, vm, &pv))) return s;
    /* ctx[b,:,h,:] = Pd[b,h] v[b,:,h,:] */
    for (int64_t h = 0; h < H && s == TNT_OK; h++)
        s = tnt__gpu_sgemm_strided(false, false, Tq, vd, Tv, 1.0f, pv + h * Tq * Tv, Tv, H * Tq * Tv, r[R_V] + h * vd,
                                   H * vd, Tv * H * vd, 0.0f, r[R_CTX] + h * vd, H * vd, Tq * H * vd, B);
    if (s != TNT_OK) return s;
    return gpu_project(B * Tq, H * vd, c->out, r[R_CTX], dval(l, WT_OK), dval(l, WT_OB), 1.0f, a->y);
}

static tnt_status mha_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    mha_cfg *c = l->priv;
    const mha_gpu_plan *g = plan;
    const int want = 3 + tnt__mha_n_masks(c);
    if (a->n_inputs != want || !a->xs)
        return tnt__error(TNT_ERR_ARG, "MultiHeadAttention \"%s\": backward with %d inputs; expected %d", l->name,
                          a->n_inputs, want);
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim, vd = c->value_dim, O = c->out;
    float *r[R_COUNT];
    gws_map(c, B, a->workspace, r);
    const bool drop = g->seed != 0;
    const float *pv = drop ? r[R_PD] : r[R_P];
    float *dctx = r[R_DCTX], *dq = r[R_DQ], *dk = r[R_DK], *dv = r[R_DV], *dp = r[R_DP];
    float *const *dxs = a->dxs;
    float *dquery = dxs ? dxs[0] : a->dx, *dvalue = dxs ? dxs[1] : NULL, *dkey = dxs ? dxs[2] : NULL;
    if (mha_bf16(l)) {
        tnt_status s = mha_gpu_backward16(l, g, a, r, dquery, dkey, dvalue);
        return s == TNT_OK ? zero_mask_grads(c, B, dxs) : s;
    }

    tnt_status s = gpu_project_backward(B * Tq, H * vd, O, r[R_CTX], dval(l, WT_OK), a->dy, dgrad(l, WT_OK),
                                        dgrad(l, WT_OB), dctx);
    /* dv = Pd^T dctx; dPd = dctx v^T */
    for (int64_t h = 0; h < H && s == TNT_OK; h++) {
        s = tnt__gpu_sgemm_strided(true, false, Tv, vd, Tq, 1.0f, pv + h * Tq * Tv, Tv, H * Tq * Tv, dctx + h * vd,
                                   H * vd, Tq * H * vd, 0.0f, dv + h * vd, H * vd, Tv * H * vd, B);
        if (s == TNT_OK)
            s = tnt__gpu_sgemm_strided(false, true, Tq, Tv, vd, 1.0f, dctx + h * vd, H * vd, Tq * H * vd,
                                       r[R_V] + h * vd, H * vd, Tv * H * vd, 0.0f, dp + h * Tq * Tv, Tv,
                                       H * Tq * Tv, B);
    }
    if (s != TNT_OK) return s;
    /* dS = P (dP - sum P dP), dP = dPd through the dropout mask */
    const float *p = r[R_P], *pd = drop ? r[R_PD] : NULL;
    long long rows = B * H * Tq, lTv = Tv;
    float dscale = drop ? 1.0f / (1.0f - c->dropout) : 1.0f;
    void *bargs[] = {&p, &pd, &dp, &rows, &lTv, &dscale};
    if ((s = tnt__gpu_launch("tnt_k_mha_softmax_bwd", rows_grid(rows), SOFTMAX_BLOCK, 0, bargs))) return s;
    /* dq (before the 1/sqrt(kd) scaling) = scale dS k;  dk = dS^T q_scaled */
    const float qscale = 1.0f / sqrtf((float)kd);
    for (int64_t h = 0; h < H && s == TNT_OK; h++) {
        s = tnt__gpu_sgemm_strided(false, false, Tq, kd, Tv, qscale, dp + h * Tq * Tv, Tv, H * Tq * Tv,
                                   r[R_K] + h * kd, H * kd, Tv * H * kd, 0.0f, dq + h * kd, H * kd, Tq * H * kd, B);
        if (s == TNT_OK)
            s = tnt__gpu_sgemm_strided(true, false, Tv, kd, Tq, 1.0f, dp + h * Tq * Tv, Tv, H * Tq * Tv,
                                       r[R_Q] + h * kd, H * kd, Tq * H * kd, 0.0f, dk + h * kd, H * kd,
                                       Tv * H * kd, B);
    }
    if (s != TNT_OK) return s;

    if ((s = gpu_project_backward(B * Tq, c->dq, H * kd, a->xs[0], dval(l, WT_QK), dq, dgrad(l, WT_QK),
                                  dgrad(l, WT_QB), dquery)) ||
        (s = gpu_project_backward(B * Tv, c->dk, H * kd, a->xs[2], dval(l, WT_KK), dk, dgrad(l, WT_KK),
                                  dgrad(l, WT_KB), dkey)) ||
        (s = gpu_project_backward(B * Tv, c->dv, H * vd, a->xs[1], dval(l, WT_VK), dv, dgrad(l, WT_VK),
                                  dgrad(l, WT_VB), dvalue)))
        return s;
    return zero_mask_grads(c, B, dxs);
}

const tnt__gpu_ops tnt__mha_gpu_ops = {
    .plan_create = mha_gpu_plan_create,
    .plan_destroy = mha_gpu_plan_destroy,
    .workspace_size = mha_gpu_workspace,
    .forward = mha_gpu_forward,
    .backward = mha_gpu_backward,
};
