/* attention_bf16.c: MultiHeadAttention's bf16 engine under mixed_bfloat16 (attention.h). Every
 * matrix product of attention.c runs as a oneDNN matmul on bf16 operands with float32 results:
 * the four projections and their gradients over (batch x steps) rows, the scores and the context
 * batched over (batch, head) with each head read in place as a strided submatrix (as the float32
 * engine does; brgemm takes the strides: 128 x 128 x 64 blocks at ~300 GFLOP/s against ~150 for
 * float32). The masks, the softmax, its gradient and dropout run in float32 on float32 scores,
 * as do the biases and their gradients; the weights stay float32 and are converted per forward.
 *
 * Workspace (kept from forward to backward): the step seed, the bf16 inputs (one copy when query,
 * key and value are one tensor), q (scaled by 1/sqrt(key_dim)), k, v in bf16, P (float32, before
 * dropout), P after dropout in bf16, and ctx in bf16. Temporaries of one call live in the plan. */
#include "kernels/matmul.h"
#include "layers/attention/attention.h"

#include <math.h>
#include <omp.h>

enum { MM_Q, MM_K, MM_V, MM_O, MM_S, MM_CTX, MM_DWQ, MM_DWK, MM_DWV, MM_DWO, MM_DXQ, MM_DXK, MM_DXV, MM_DXO,
       MM_DV, MM_DP, MM_DQ, MM_DK, MM_COUNT };

typedef struct bf_plan {
    bool bf16; /* false: the float32 engine's (empty) plan */
    int64_t batch;
    tnt__mm mm[MM_COUNT];
    char *tmp; /* temporaries of one forward or backward */
} bf_plan;

static size_t r64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Workspace regions, in order, in bytes. */
enum { WS_SEED, WS_XQ, WS_XK, WS_XV, WS_Q, WS_K, WS_V, WS_P, WS_PD, WS_CTX, WS_COUNT };
static void ws_sizes(const tnt__mha_cfg *c, int64_t B, size_t s[WS_COUNT]) {
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim, bf = 2;
    s[WS_SEED] = 64;
    s[WS_XQ] = r64((size_t)(B * c->tq * c->dq * bf));
    s[WS_XK] = r64((size_t)(B * c->tv * c->dk * bf));
    s[WS_XV] = r64((size_t)(B * c->tv * c->dv * bf));
    s[WS_Q] = r64((size_t)(B * c->tq * H * kd * bf));
    s[WS_K] = r64((size_t)(B * c->tv * H * kd * bf));
    s[WS_V] = r64((size_t)(B * c->tv * H * vd * bf));
    s[WS_P] = r64((size_t)(B * H * c->tq * c->tv) * sizeof(float));
    s[WS_PD] = r64((size_t)(B * H * c->tq * c->tv * bf));
    s[WS_CTX] = r64((size_t)(B * c->tq * H * vd * bf));
}
static void *ws_at(const tnt__mha_cfg *c, int64_t B, void *base, int region) {
    size_t s[WS_COUNT], off = 0;
    ws_sizes(c, B, s);
    for (int i = 0; i < region; i++) off += s[i];
    return (char *)base + off;
}

size_t tnt__mha_bf16_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    size_t s[WS_COUNT], t = 0;
    ws_sizes(l->priv, batch, s);
    for (int i = 0; i < WS_COUNT; i++) t += s[i];
    return t;
}

/* Temporaries (plan->tmp): backward's dv, dq, dk and dP in float32, a projection gradient, dS and
 * dctx in bf16; both passes' per-thread mask rows and dropout blocks. */
enum { T_F32B, T_F32C, T_F32D, T_DP, T_B16A, T_B16B, T_B16C, T_THREADS, T_COUNT };
static void tmp_sizes(const tnt__mha_cfg *c, int64_t B, size_t s[T_COUNT]) {
    const int64_t H = c->heads, kd = c->key_dim, vd = c->value_dim, Tq = c->tq, Tv = c->tv;
    const int64_t big = TNT_MAX(TNT_MAX(B * Tq * H * kd, B * Tv * H * kd), TNT_MAX(B * Tq * H * vd, B * Tv * H * vd));
    const int64_t rows = TNT_MAX(B * Tq * c->out, big);
    s[T_F32B] = s[T_F32C] = s[T_F32D] = r64((size_t)big * sizeof(float));
    s[T_DP] = r64((size_t)(B * H * Tq * Tv) * sizeof(float));
    s[T_B16A] = s[T_B16C] = r64((size_t)rows * 2);
    s[T_B16B] = r64((size_t)(B * H * Tq * Tv) * 2);
    s[T_THREADS] = r64((size_t)(Tv + 2 * Tq * Tv) * sizeof(float)) * (size_t)omp_get_max_threads();
}
static void *tmp_at(const bf_plan *p, const tnt__mha_cfg *c, int region) {
    size_t s[T_COUNT], off = 0;
    tmp_sizes(c, p->batch, s);
    for (int i = 0; i < region; i++) off += s[i];
    return p->tmp + off;
}

bool tnt__mha_plan_bf16(const void *plan) { return plan && ((const bf_plan *)plan)->bf16; }

void tnt__mha_plan_destroy(void *plan) {
    bf_plan *p = plan;
    if (!p) return;
    for (int i = 0; i < MM_COUNT; i++) tnt__mm_destroy(&p->mm[i]);
    tnt__free(p->tmp);
    free(p);
}

void *tnt__mha_plan_create(tnt_layer *l, int64_t batch) {
    tnt__mha_cfg *c = l->priv;
    bf_plan *p = tnt__calloc(1, sizeof *p);
    if (!p || !tnt__layer_bf16(l)) return p;
    const int64_t B = batch, H = c->heads, kd = c->key_dim, vd = c->value_dim, Tq = c->tq, Tv = c->tv, O = c->out;
    const float qscale = 1.0f / sqrtf((float)kd);
    const dnnl_data_type_t bf = dnnl_bf16;
    const bool bias = c->use_bias;
    const tnt__mm_desc d[MM_COUNT] = {
        /* q, k, v straight into bf16; q = (x·Wq + bq) / sqrt(kd) as attention.c */
        [MM_Q] = {.dt = bf, .m = B * Tq, .k = c->dq, .n = H * kd, .bias = bias, .c_bf16 = true,
                  .eltwise = dnnl_eltwise_linear, .eltwise_alpha = qscale},
        [MM_K] = {.dt = bf, .m = B * Tv, .k = c->dk, .n = H * kd, .bias = bias, .c_bf16 = true},
        [MM_V] = {.dt = bf, .m = B * Tv, .k = c->dv, .n = H * vd, .bias = bias, .c_bf16 = true},
        [MM_O] = {.dt = bf, .m = B * Tq, .k = H * vd, .n = O, .bias = bias},
        /* S (B,H,Tq,Tv) = q · k^T, heads read in place */
        [MM_S] = {.dt = bf, .batch = {B, H}, .m = Tq, .n = Tv, .k = kd, .lda = H * kd, .sa = {Tq * H * kd, kd},
                  .tb = true, .ldb = H * kd, .sb = {Tv * H * kd, kd}},
        /* ctx (B,Tq,H,vd) = Pd · v */
        [MM_CTX] = {.dt = bf, .batch = {B, H}, .m = Tq, .n = vd, .k = Tv, .ldb = H * vd, .sb = {Tv * H * vd, vd},
                    .ldc = H * vd, .sc = {Tq * H * vd, vd}, .c_bf16 = true},
        [MM_DWQ] = {.dt = bf, .m = c->dq, .k = B * Tq, .n = H * kd, .ta = true},
        [MM_DWK] = {.dt = bf, .m = c->dk, .k = B * Tv, .n = H * kd, .ta = true},
        [MM_DWV] = {.dt = bf, .m = c->dv, .k = B * Tv, .n = H * vd, .ta = true},
        [MM_DWO] = {.dt = bf, .m = H * vd, .k = B * Tq, .n = O, .ta = true},
        [MM_DXQ] = {.dt = bf, .m = B * Tq, .k = H * kd, .n = c->dq, .tb = true},
        [MM_DXK] = {.dt = bf, .m = B * Tv, .k = H * kd, .n = c->dk, .tb = true},
        [MM_DXV] = {.dt = bf, .m = B * Tv, .k = H * vd, .n = c->dv, .tb = true},
        [MM_DXO] = {.dt = bf, .m = B * Tq, .k = O, .n = H * vd, .tb = true, .c_bf16 = true}, /* dctx */
        /* dv (B,Tv,H,vd) = Pd^T · dctx */
        [MM_DV] = {.dt = bf, .batch = {B, H}, .m = Tv, .n = vd, .k = Tq, .ta = true, .ldb = H * vd,
                   .sb = {Tq * H * vd, vd}, .ldc = H * vd, .sc = {Tv * H * vd, vd}},
        /* dPd (B,H,Tq,Tv) = dctx · v^T */
        [MM_DP] = {.dt = bf, .batch = {B, H}, .m = Tq, .n = Tv, .k = vd, .lda = H * vd, .sa = {Tq * H * vd, vd},
                   .tb = true, .ldb = H * vd, .sb = {Tv * H * vd, vd}},
        /* dq (B,Tq,H,kd) = dS · k / sqrt(kd) (the gradient before the scaling of q) */
        [MM_DQ] = {.dt = bf, .batch = {B, H}, .m = Tq, .n = kd, .k = Tv, .ldb = H * kd, .sb = {Tv * H * kd, kd},
                   .ldc = H * kd, .sc = {Tq * H * kd, kd}, .alpha = qscale},
        /* dk (B,Tv,H,kd) = dS^T · q_scaled */
        [MM_DK] = {.dt = bf, .batch = {B, H}, .m = Tv, .n = kd, .k = Tq, .ta = true, .ldb = H * kd,
                   .sb = {Tq * H * kd, kd}, .ldc = H * kd, .sc = {Tv * H * kd, kd}},
    };
    p->batch = batch;
    bool reference = false;
    for (int i = 0; i < MM_COUNT; i++) {
        if (tnt__mm_create(&p->mm[i], &d[i]) != TNT_OK) {
            tnt__error_prefix(TNT_ERR_BACKEND, "MultiHeadAttention \"%s\": ", l->name);
            tnt__mha_plan_destroy(p);
            return NULL;
        }
        reference |= tnt__mm_reference(&p->mm[i]);
    }
    if (reference) { /* oneDNN has only reference bf16 kernels for some product: float32 */
        tnt_log(TNT_LOG_DEBUG, "MultiHeadAttention \"%s\": reference bf16 kernels only: float32 instead", l->name);
        for (int i = 0; i < MM_COUNT; i++) tnt__mm_destroy(&p->mm[i]);
        return p;
    }
    size_t s[T_COUNT], t = 0, nw = 0;
    tmp_sizes(c, B, s);
    for (int i = 0; i < T_COUNT; i++) t += s[i];
    for (int r = WT_QK; r <= WT_OK; r += 2) nw += (size_t)tnt_shape_numel(l->weights[c->widx[r]].shape);
    if (!(p->tmp = tnt__alloc(t)) || (!c->w16 && !(c->w16 = tnt__alloc(nw * 2)))) {
        tnt__mha_plan_destroy(p);
        return NULL;
    }
    p->bf16 = true;
    return p;
}

/* The bf16 kernel of a role (WT_QK, WT_KK, WT_VK, WT_OK) in c->w16. */
static tnt__bf16 *w16(tnt_layer *l, int role) {
    tnt__mha_cfg *c = l->priv;
    size_t off = 0;
    for (int r = WT_QK; r < role; r += 2) off += (size_t)tnt_shape_numel(l->weights[c->widx[r]].shape);
    return c->w16 + off;
}

/* db (n) = column sums of dz (rows, n), in row order */
static void column_sums(const float *dz, int64_t rows, int64_t n, float *db) {
    if (!db) return;
    memcpy(db, dz, (size_t)n * sizeof(float));
    for (int64_t i = 1; i < rows; i++)
        for (int64_t j = 0; j < n; j++) db[j] += dz[i * n + j];
}

tnt_status tnt__mha_bf16_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    bf_plan *p = plan;
    tnt__mha_cfg *c = l->priv;
    tnt_status s;
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads;
    void *ws = a->workspace;
    const float *am, *qm, *vm;
    tnt__mha_mask_inputs(c, a->xs, &am, &qm, &vm);
    const bool drop = a->training && c->dropout > 0.0f;
    uint64_t seed = 0;
    if (drop && !(seed = tnt__hash64(l->seed ^ a->seed))) seed = 1;
    *(uint64_t *)ws_at(c, B, ws, WS_SEED) = seed;

    /* inputs and kernels in bf16; self-attention converts its one input once */
    tnt__bf16 *xq = ws_at(c, B, ws, WS_XQ), *xk = ws_at(c, B, ws, WS_XK), *xv = ws_at(c, B, ws, WS_XV);
    tnt__f32_to_bf16(a->xs[0], xq, B * Tq * c->dq);
    if (a->xs[2] == a->xs[0]) xk = xq;
    else tnt__f32_to_bf16(a->xs[2], xk, B * Tv * c->dk);
    if (a->xs[1] == a->xs[0]) xv = xq;
    else if (a->xs[1] == a->xs[2]) xv = xk;
    else tnt__f32_to_bf16(a->xs[1], xv, B * Tv * c->dv);
    for (int r = WT_QK; r <= WT_OK; r += 2)
        tnt__f32_to_bf16(tnt__mha_wval(l, r), w16(l, r), tnt_shape_numel(l->weights[c->widx[r]].shape));

    /* projections */
    tnt__bf16 *q = ws_at(c, B, ws, WS_Q), *k = ws_at(c, B, ws, WS_K), *v = ws_at(c, B, ws, WS_V);
    if ((s = tnt__mm_run(&p->mm[MM_Q], xq, w16(l, WT_QK), tnt__mha_wval(l, WT_QB), q)) ||
        (s = tnt__mm_run(&p->mm[MM_K], xk, w16(l, WT_KK), tnt__mha_wval(l, WT_KB), k)) ||
        (s = tnt__mm_run(&p->mm[MM_V], xv, w16(l, WT_VK), tnt__mha_wval(l, WT_VB), v)))
        return s;

    /* scores, then the float32 softmax (and dropout) of each (b, h) block, P kept */
    float *P = ws_at(c, B, ws, WS_P);
    tnt__bf16 *Pd = ws_at(c, B, ws, WS_PD);
    if ((s = tnt__mm_run(&p->mm[MM_S], q, k, NULL, P))) return s;
    char *thr = tmp_at(p, c, T_THREADS);
    const size_t per = r64((size_t)(Tv + 2 * Tq * Tv) * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        float *mrow = (float *)(thr + per * (size_t)omp_get_thread_num()), *pd = mrow + Tv;
        float *pb = P + bh * Tq * Tv;
        for (int64_t t = 0; t < Tq; t++)
            tnt__mha_softmax_row(pb + t * Tv, tnt__mha_mask_row(c, am, qm, vm, b, t, mrow) ? mrow : NULL, Tv);
        const float *src = pb;
        if (drop) {
            tnt__mha_dropout_block(c, seed, a->sample_offset + b, h, pb, pd);
            src = pd;
        }
        tnt__f32_to_bf16(src, Pd + bh * Tq * Tv, Tq * Tv);
    }

    /* context and output projection */
    tnt__bf16 *ctx16 = ws_at(c, B, ws, WS_CTX);
    if ((s = tnt__mm_run(&p->mm[MM_CTX], Pd, v, NULL, ctx16))) return s;
    return tnt__mm_run(&p->mm[MM_O], ctx16, w16(l, WT_OK), tnt__mha_wval(l, WT_OB), a->y);
}

/* The gradients of one projection z = x·W + b from dz (rows, n) float32: dW, db and, when asked,
 * dx (rows, din) (float32, or bf16 for the output projection's dctx); dz16 is room for dz in bf16. */
static tnt_status project_backward(tnt_layer *l, bf_plan *p, int mm_dw, int mm_dx, int role, int64_t rows,
                                   int64_t n, const tnt__bf16 *x16, const float *dz, tnt__bf16 *dz16, void *dx) {
    tnt_status s;
    tnt__f32_to_bf16(dz, dz16, rows * n);
    if ((s = tnt__mm_run(&p->mm[mm_dw], x16, dz16, NULL, tnt__mha_wgrad(l, role)))) return s;
    column_sums(dz, rows, n, tnt__mha_wgrad(l, role + 1)); /* the bias follows its kernel */
    return dx ? tnt__mm_run(&p->mm[mm_dx], dz16, w16(l, role), NULL, dx) : TNT_OK;
}

tnt_status tnt__mha_bf16_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    bf_plan *p = plan;
    tnt__mha_cfg *c = l->priv;
    tnt_status s;
    const int64_t B = a->batch, Tq = c->tq, Tv = c->tv, H = c->heads, kd = c->key_dim, vd = c->value_dim, O = c->out;
    void *ws = a->workspace;
    const uint64_t seed = *(uint64_t *)ws_at(c, B, ws, WS_SEED);
    const bool drop = seed != 0 && c->dropout > 0.0f;
    float *dv = tmp_at(p, c, T_F32B), *dq = tmp_at(p, c, T_F32C),
          *dk = tmp_at(p, c, T_F32D), *dP = tmp_at(p, c, T_DP);
    tnt__bf16 *b16 = tmp_at(p, c, T_B16A), *dS16 = tmp_at(p, c, T_B16B), *dctx16 = tmp_at(p, c, T_B16C);
    const tnt__bf16 *q = ws_at(c, B, ws, WS_Q), *k = ws_at(c, B, ws, WS_K), *v = ws_at(c, B, ws, WS_V),
                    *Pd = ws_at(c, B, ws, WS_PD), *ctx16 = ws_at(c, B, ws, WS_CTX);
    const float *P = ws_at(c, B, ws, WS_P);

    /* output projection: dWo, dbo, dctx */
    if ((s = project_backward(l, p, MM_DWO, MM_DXO, WT_OK, B * Tq, O, ctx16, a->dy, b16, dctx16))) return s;
    /* dv = Pd^T · dctx;  dPd = dctx · v^T */
    if ((s = tnt__mm_run(&p->mm[MM_DV], Pd, dctx16, NULL, dv)) || (s = tnt__mm_run(&p->mm[MM_DP], dctx16, v, NULL, dP)))
        return s;
    /* dP = dPd * dropout factor; dS = P * (dP - sum_s P*dP), float32, then bf16 */
    const float dscale = drop ? 1.0f / (1.0f - c->dropout) : 1.0f;
    char *thr = tmp_at(p, c, T_THREADS);
    const size_t per = r64((size_t)(Tv + 2 * Tq * Tv) * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < B * H; bh++) {
        const int64_t b = bh / H, h = bh % H;
        float *pd = (float *)(thr + per * (size_t)omp_get_thread_num()) + Tv;
        const float *pb = P + bh * Tq * Tv;
        if (drop) tnt__mha_dropout_block(c, seed, a->sample_offset + b, h, pb, pd);
        for (int64_t t = 0; t < Tq; t++) {
            float *g = dP + bh * Tq * Tv + t * Tv;
            const float *pr = pb + t * Tv;
            if (drop) {
                const float *pdr = pd + t * Tv;
                for (int64_t j = 0; j < Tv; j++) g[j] = pdr[j] != 0.0f || pr[j] == 0.0f ? g[j] * dscale : 0.0f;
            }
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t j = 0; j < Tv; j++) dot += pr[j] * g[j];
            tnt__bf16 *o = dS16 + bh * Tq * Tv + t * Tv;
            for (int64_t j = 0; j < Tv; j++) o[j] = tnt__bf16_from_float(pr[j] * (g[j] - dot));
        }
    }
    /* dq (before the scaling) = dS · k / sqrt(kd);  dk = dS^T · q_scaled */
    if ((s = tnt__mm_run(&p->mm[MM_DQ], dS16, k, NULL, dq)) || (s = tnt__mm_run(&p->mm[MM_DK], dS16, q, NULL, dk)))
        return s;

    float *const *dxs = a->dxs;
    float *dquery = dxs ? dxs[0] : a->dx, *dvalue = dxs ? dxs[1] : NULL, *dkey = dxs ? dxs[2] : NULL;
    const tnt__bf16 *xq = ws_at(c, B, ws, WS_XQ), *xk = ws_at(c, B, ws, WS_XK), *xv = ws_at(c, B, ws, WS_XV);
    if (a->xs[2] == a->xs[0]) xk = xq;
    if (a->xs[1] == a->xs[0]) xv = xq;
    else if (a->xs[1] == a->xs[2]) xv = xk;
    if ((s = project_backward(l, p, MM_DWQ, MM_DXQ, WT_QK, B * Tq, H * kd, xq, dq, b16, dquery)) ||
        (s = project_backward(l, p, MM_DWK, MM_DXK, WT_KK, B * Tv, H * kd, xk, dk, b16, dkey)) ||
        (s = project_backward(l, p, MM_DWV, MM_DXV, WT_VK, B * Tv, H * vd, xv, dv, b16, dvalue)))
        return s;
    if (dxs) { /* masks: no gradient; zeros where one is asked for anyway */
        const int64_t mn[3] = {Tq * Tv, Tq, Tv};
        const bool on[3] = {c->has_attention_mask, c->has_query_mask, c->has_value_mask};
        for (int i = 0, j = 3; i < 3; i++)
            if (on[i] && dxs[j++]) memset(dxs[j - 1], 0, (size_t)(B * mn[i]) * sizeof(float));
    }
    return TNT_OK;
}
