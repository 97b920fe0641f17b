/* dense.c: Dense (Keras): y = act(x·W + b) over the last axis, W in Keras layout (in, units).
 * Input of any rank >= 1: the leading axes of every sample are rows of one (rows, in) matmul.
 *
 * Algorithms, chosen by the thread CPU time of the alternatives at 1 thread (AVX-512; batch 64:
 * 2450->500 of LeNet-5, 784->4096 and 4096->4096 of the MLP; 4096 rows: the Transformer's
 * 256<->1024):
 *   forward   rows <= SGEMM_FWD_MAX_ROWS: dnnl_sgemm "NN" over rows filled with the bias, the
 *             activation after it (12.5 ms against 19 ms for matmul at 64 x 4096->4096: brgemm
 *             with few rows streams the plain weights badly); more rows: oneDNN matmul (brgemm)
 *             with the bias and, where possible, the activation fused as an eltwise post-op
 *             (14 ms against 20 ms for sgemm at 4096 x 256->1024).
 *   dx        oneDNN matmul with W read transposed in place (tag ba): 2.2 ms / 29 ms against
 *             2.6 ms / 33 ms for dnnl_sgemm "NT".
 *   dW        dnnl_sgemm "TN" (x^T · dpre): 2.2 ms / 32 ms against 3.0 ms / 32 ms for matmul;
 *             through padded panels where a pitch aliases (kernels/sgemm.h: AVX2 4096 x 256->1024
 *             17.8 ms against 33.8 ms in place).
 *   db        column sums of dpre in a plain loop (vectorized over units, fixed order).
 * Weights are read where they lie in the model's flat buffer: no reorder.
 *
 * mixed_bfloat16 (tnt__layer_bf16): the three products run as oneDNN matmuls on bf16 operands with
 * float32 results: x and dpre are converted per call (kept in the workspace: x from forward to dW),
 * W once per forward, into a plain bf16 copy that dx reads again as W^T (the weights do not change
 * between forward and backward of a step). The bias, its gradient and the activation stay float32.
 * Plain bf16 weights against weights packed into the primitives' own layouts, at 64 x 4096 -> 4096,
 * 1 thread, ms of CPU time per step: conversion 4 + forward 10 + dx 7 = 21, against packing 6 +
 * forward 6.4 + packing W^T 9 + dx 6.2 = 27.6 (float32: forward 13.8, dx 14.9). */
#include "kernels/matmul.h"
#include "kernels/sgemm.h"
#include "layers/fused.h"
#include "layers/keras_config.h"
#include "layers/layer.h"
#include "gpu/gpu.h"

#include <stdio.h>

/* ---- configuration ------------------------------------------------------------------------ */

typedef struct dense_cfg {
    int units;
    bool use_bias;
    tnt_initializer kernel_init, bias_init;
    int64_t in;   /* input features (the last axis), from build */
    int64_t lead; /* rows per sample: the product of the leading axes (1 for rank-1 input) */
    tnt__bf16 *w16; /* bf16: W (in, units), converted by each forward (shared by the plans) */
} dense_cfg;

static tnt_status dense_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    dense_cfg *c = l->priv;
    char b[96];
    /* Keras applies Dense to the last axis of any rank: (..., features) -> (..., units), every
     * leading position a row of one matmul. */
    if (in.ndim < 1)
        return tnt__error(TNT_ERR_SHAPE,
                          "Dense \"%s\": input shape %s has rank 0 (expected at least 1: ..., features)",
                          l->name, tnt_shape_str(in, b, sizeof b));
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "Dense \"%s\": input shape %s has an empty dimension",
                              l->name, tnt_shape_str(in, b, sizeof b));
    c->in = in.dim[in.ndim - 1];
    c->lead = tnt_shape_numel(in) / c->in;
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", TNT_SHAPE(c->in, c->units), c->kernel_init, c->in,
                              c->units) < 0)
        return TNT_ERR_ARG;
    if (c->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(c->units), c->bias_init, 0, 0) < 0)
        return TNT_ERR_ARG;
    *out = in;
    out->dim[in.ndim - 1] = c->units;
    return TNT_OK;
}

/* ---- plan: primitives for one batch size -------------------------------------------------- */

#define SGEMM_FWD_MAX_ROWS 128

typedef struct dense_plan {
    int64_t rows;       /* samples times the leading axes of each sample */
    bool fwd_sgemm;     /* forward by dnnl_sgemm (few rows); no fwd primitives then */
    tnt__prim fwd;      /* matmul with bias and, when `fused`, the activation as a post-op */
    tnt__prim fwd_plain; /* without the activation: created on the first forward that needs the
                            pre-activation (a->preact) while `fused` */
    bool fused;
    tnt__prim bwd_data; /* dx = dpre · W^T */
    tnt__act act;       /* activation forward (when not fused) and backward */
    dnnl_memory_t x, w, b, y;  /* forward arguments */
    dnnl_memory_t dy, wt, dx;  /* backward-data arguments */
    bool bf16;          /* mixed_bfloat16: the mm_* products below instead of all the above */
    tnt__mm mm_fwd, mm_fwd_plain, mm_dx, mm_dw;
} dense_plan;

/* A matmul y(rows, units) = x(rows, in) · W(in, units) + b(1, units), with post-ops from attr. */
static tnt_status create_fwd(tnt_layer *l, dense_plan *p, tnt__prim *prim, bool fuse_act) {
    dense_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_memory_desc_t xmd, wmd, bmd, ymd;
    dnnl_dims_t xd = {p->rows, c->in}, wd = {c->in, c->units}, bd = {1, c->units},
                yd = {p->rows, c->units};
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&xmd, 2, xd, dnnl_f32, dnnl_ab));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&wmd, 2, wd, dnnl_f32, dnnl_ab));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_f32, dnnl_ab));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&ymd, 2, yd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t d;
    TNT_DNNL(dnnl_matmul_desc_init(&d, &xmd, &wmd, c->use_bias ? &bmd : NULL, &ymd));
    TNT_DNNL(dnnl_primitive_attr_create(&attr));
    if (fuse_act) {
        dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
        float alpha;
        tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
        TNT_DNNL(dnnl_post_ops_create(&ops));
        TNT_DNNL(dnnl_post_ops_append_eltwise(ops, 1.0f, alg, alpha, 0.0f));
        TNT_DNNL(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    status = tnt__prim_create(prim, &d, attr, NULL);
fail:
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return status;
}

static void dense_plan_destroy(void *plan) {
    dense_plan *p = plan;
    if (!p) return;
    tnt__prim_destroy(&p->fwd);
    tnt__prim_destroy(&p->fwd_plain);
    tnt__prim_destroy(&p->bwd_data);
    tnt__act_destroy(&p->act);
    tnt__mm_destroy(&p->mm_fwd);
    tnt__mm_destroy(&p->mm_fwd_plain);
    tnt__mm_destroy(&p->mm_dx);
    tnt__mm_destroy(&p->mm_dw);
    dnnl_memory_t *mems[] = {&p->x, &p->w, &p->b, &p->y, &p->dy, &p->wt, &p->dx};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    free(p);
}

/* The bf16 products (rows = batch x leading axes): forward y = x · W (+ b, + the activation when
 * fused), dx = dpre · W^T, dW = x^T · dpre. Where oneDNN has only reference bf16 kernels for a
 * shape, none are kept (p->bf16 false) and the layer runs float32. */
static tnt_status bf16_plan(tnt_layer *l, dense_plan *p) {
    dense_cfg *c = l->priv;
    tnt_status status;
    dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
    float alpha = 0.0f;
    p->fused = tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
    tnt__mm_desc f = {.dt = dnnl_bf16, .m = p->rows, .k = c->in, .n = c->units, .bias = c->use_bias,
                      .eltwise = p->fused ? alg : dnnl_alg_kind_undef, .eltwise_alpha = alpha};
    tnt__mm_desc dx = {.dt = dnnl_bf16, .m = p->rows, .k = c->units, .n = c->in, .tb = true};
    tnt__mm_desc dw = {.dt = dnnl_bf16, .m = c->in, .k = p->rows, .n = c->units, .ta = true};
    if ((status = tnt__mm_create(&p->mm_fwd, &f)) || (status = tnt__mm_create(&p->mm_dx, &dx)) ||
        (status = tnt__mm_create(&p->mm_dw, &dw)))
        return status;
    if (tnt__mm_reference(&p->mm_fwd) || tnt__mm_reference(&p->mm_dx) || tnt__mm_reference(&p->mm_dw)) {
        tnt_log(TNT_LOG_DEBUG, "Dense \"%s\": oneDNN has only reference bf16 kernels here: float32 instead", l->name);
        tnt__mm_destroy(&p->mm_fwd);
        tnt__mm_destroy(&p->mm_dx);
        tnt__mm_destroy(&p->mm_dw);
        p->fused = false;
        return TNT_OK;
    }
    if (!c->w16 && !(c->w16 = tnt__alloc((size_t)(c->in * c->units) * sizeof(tnt__bf16)))) return TNT_ERR_NOMEM;
    p->bf16 = true;
    return TNT_OK;
}

static void *dense_plan_create(tnt_layer *l, int64_t batch) {
    dense_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    dense_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->rows = batch * c->lead;
    if (tnt__layer_bf16(l) && (status = bf16_plan(l, p)) != TNT_OK) goto fail;
    if (p->bf16) {
        if (l->activation != TNT_ACT_LINEAR &&
            (status = tnt__act_create(&p->act, l->activation, l->activation_alpha, p->rows, c->units)) != TNT_OK)
            goto fail;
        return p;
    }
    p->fwd_sgemm = p->rows <= SGEMM_FWD_MAX_ROWS;
    dnnl_alg_kind_t alg;
    float alpha;
    p->fused = !p->fwd_sgemm && tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
    if (!p->fwd_sgemm && (status = create_fwd(l, p, &p->fwd, p->fused)) != TNT_OK) goto fail;
    if (l->activation != TNT_ACT_LINEAR &&
        (status = tnt__act_create(&p->act, l->activation, l->activation_alpha, p->rows, c->units)) != TNT_OK)
        goto fail;

    /* dx(rows, in) = dpre(rows, units) · W^T(units, in): W^T is W's buffer read with tag ba. */
    dnnl_memory_desc_t dymd, wtmd, dxmd;
    dnnl_dims_t dyd = {p->rows, c->units}, wtd = {c->units, c->in}, dxd = {p->rows, c->in};
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&dymd, 2, dyd, dnnl_f32, dnnl_ab));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&wtmd, 2, wtd, dnnl_f32, dnnl_ba));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&dxmd, 2, dxd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t bd;
    TNT_DNNL(dnnl_matmul_desc_init(&bd, &dymd, &wtmd, NULL, &dxmd));
    if ((status = tnt__prim_create(&p->bwd_data, &bd, NULL, NULL)) != TNT_OK) goto fail;

    const tnt__prim *f = &p->fwd;
    if ((!p->fwd_sgemm &&
         ((status = tnt__memory(&p->x, tnt__prim_md(f, dnnl_query_src_md, 0), NULL, false)) ||
          (status = tnt__memory(&p->w, tnt__prim_md(f, dnnl_query_weights_md, 0), NULL, false)) ||
          (c->use_bias &&
           (status = tnt__memory(&p->b, tnt__prim_md(f, dnnl_query_weights_md, 1), NULL, false))) ||
          (status = tnt__memory(&p->y, tnt__prim_md(f, dnnl_query_dst_md, 0), NULL, false)))) ||
        (status = tnt__memory(&p->dy, &dymd, NULL, false)) ||
        (status = tnt__memory(&p->wt, &wtmd, NULL, false)) ||
        (status = tnt__memory(&p->dx, &dxmd, NULL, false)))
        goto fail;
    return p;
fail:
    (void)status;
    dense_plan_destroy(p);
    return NULL;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* bf16 regions after the fused workspace: x (rows, in) from forward to dW, dpre (rows, units). */
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }
static size_t off_x16(tnt_layer *l, int64_t batch) { return align64(tnt__fused_workspace_size(l, batch)); }
static size_t off_dpre16(tnt_layer *l, int64_t batch) {
    const dense_cfg *c = l->priv;
    return off_x16(l, batch) + align64((size_t)(batch * c->lead * c->in) * sizeof(tnt__bf16));
}
static tnt__bf16 *ws_x16(tnt_layer *l, void *ws, int64_t batch) { return (tnt__bf16 *)((char *)ws + off_x16(l, batch)); }
static tnt__bf16 *ws_dpre16(tnt_layer *l, void *ws, int64_t batch) {
    return (tnt__bf16 *)((char *)ws + off_dpre16(l, batch));
}

static size_t dense_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    const dense_plan *p = plan;
    const dense_cfg *c = l->priv;
    if (!(p ? p->bf16 : tnt__layer_bf16(l))) return tnt__fused_workspace_size(l, batch);
    return off_dpre16(l, batch) + align64((size_t)(batch * c->lead * c->units) * sizeof(tnt__bf16));
}

/* Runs the matmul: out(rows, units) = x(rows, in) · W + b, with the fused post-op or, for a fused
 * plan asked for its pre-activation, without it (that primitive is made on first use). */
static tnt_status dense_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op, float *out) {
    dense_plan *p = plan;
    dense_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    if (p->bf16) { /* x and W are converted and packed by dense_forward */
        tnt__mm *mm = &p->mm_fwd;
        if (p->fused && !post_op) {
            tnt__mm_desc d = p->mm_fwd.d;
            d.eltwise = dnnl_alg_kind_undef;
            if (!p->mm_fwd_plain.prim.prim && (status = tnt__mm_create(&p->mm_fwd_plain, &d)) != TNT_OK) return status;
            mm = &p->mm_fwd_plain;
        }
        return tnt__mm_run(mm, ws_x16(l, a->workspace, a->batch), c->w16, c->use_bias ? l->weights[1].value : NULL, out);
    }
    if (p->fwd_sgemm) { /* out = rows of b (or zeros), then out += x · W */
        const size_t row_bytes = (size_t)c->units * sizeof(float);
        for (int64_t i = 0; i < p->rows; i++) {
            if (c->use_bias) memcpy(out + i * c->units, l->weights[1].value, row_bytes);
            else memset(out + i * c->units, 0, row_bytes);
        }
        TNT_DNNL(dnnl_sgemm('N', 'N', p->rows, c->units, c->in, 1.0f, a->x, c->in, l->weights[0].value,
                            c->units, 1.0f, out, c->units));
        return TNT_OK;
    }
    const tnt__prim *prim = &p->fwd;
    if (p->fused && !post_op) {
        if (!p->fwd_plain.prim && (status = create_fwd(l, p, &p->fwd_plain, false)) != TNT_OK)
            return status;
        prim = &p->fwd_plain;
    }
    tnt__set_data(p->x, a->x);
    tnt__set_data(p->w, l->weights[0].value);
    tnt__set_data(p->y, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DST, p->y}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->b, l->weights[1].value);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
    }
    return tnt__prim_exec(prim, n, args);
fail:
    return status;
}

/* x: (batch, ..., in); y, preact: (batch, ..., units), as (rows, in) and (rows, units) */
static tnt_status dense_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    dense_plan *p = plan;
    if (p->bf16) {
        dense_cfg *c = l->priv;
        tnt__f32_to_bf16(l->weights[0].value, c->w16, c->in * c->units);
        tnt__f32_to_bf16(a->x, ws_x16(l, a->workspace, a->batch), p->rows * c->in);
    }
    return tnt__fused_forward(l, plan, a, p->fused, &p->act, dense_run);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* x: (rows, in); y, dy: (rows, units); dx: (rows, in) or NULL; rows = batch * lead */
static tnt_status dense_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    dense_plan *p = plan;
    dense_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    const int64_t rows = p->rows, units = c->units, in = c->in;

    /* dpre (rows, units): the gradient before the activation. */
    const float *dpre;
    if ((status = tnt__fused_backward(l, a, &p->act, &dpre)) != TNT_OK) return status;

    /* dW (in, units) = x^T (in, rows) · dpre (rows, units), written over the old gradient. */
    tnt__weight *k = &l->weights[0];
    tnt__bf16 *dpre16 = NULL;
    if (p->bf16) {
        if (a->dw_stash) return tnt__error(TNT_ERR_STATE, "node gradient stash handed to a mixed_bfloat16 Dense");
        dpre16 = ws_dpre16(l, a->workspace, a->batch);
        tnt__f32_to_bf16(dpre, dpre16, rows * units);
        if ((status = tnt__mm_run(&p->mm_dw, ws_x16(l, a->workspace, a->batch), dpre16, NULL, k->grad)) != TNT_OK)
            return status;
    } else if (a->dw_stash) { /* the node computes dW from every rank's rows (tnt__dw_stash) */
        tnt__dw_stash *st = a->dw_stash;
        if (rows > st->cap_rows || st->ldx < in || st->lddpre < units)
            return tnt__error(TNT_ERR_STATE, "node gradient stash of %lld rows (pitches %lld, %lld) for %lld rows "
                              "of %lld -> %lld", (long long)st->cap_rows, (long long)st->ldx, (long long)st->lddpre,
                              (long long)rows, (long long)in, (long long)units);
        for (int64_t r = 0; r < rows; r++) {
            memcpy(st->x + r * st->ldx, a->x + r * in, (size_t)in * sizeof(float));
            memcpy(st->dpre + r * st->lddpre, dpre + r * units, (size_t)units * sizeof(float));
        }
        st->rows = rows;
    } else {
        if ((status = tnt__sgemm_tn(in, units, rows, a->x, dpre, 0.0f, k->grad)) != TNT_OK) return status;
    }

    /* db (units) = column sums of dpre, in row order (deterministic). */
    if (c->use_bias) {
        float *db = l->weights[1].grad;
        memcpy(db, dpre, (size_t)units * sizeof(float));
        for (int64_t i = 1; i < rows; i++) {
            const float *r = dpre + i * units;
            for (int64_t j = 0; j < units; j++) db[j] += r[j];
        }
    }

    if (a->dx && p->bf16) /* dx (rows, in) = dpre · W^T: forward's bf16 W read transposed */
        return tnt__mm_run(&p->mm_dx, dpre16, c->w16, NULL, a->dx);
    if (a->dx) {
        tnt__set_data(p->dy, dpre);
        tnt__set_data(p->wt, k->value);
        tnt__set_data(p->dx, a->dx);
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->dy}, {DNNL_ARG_WEIGHTS, p->wt}, {DNNL_ARG_DST, p->dx}};
        status = tnt__prim_exec(&p->bwd_data, 3, args);
    }
    return status;
}

/* ---- constructor -------------------------------------------------------------------------- */

static void dense_destroy(tnt_layer *l) {
    dense_cfg *c = l->priv;
    if (c) tnt__free(c->w16);
    free(c);
}

static tnt_status dense_get_config(const tnt_layer *l, cJSON *c) {
    const dense_cfg *d = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "units", d->units));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", d->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", d->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", d->bias_init));
    return tnt__kj_add_nulls(c, tnt__kj_kernel_nulls);
}

static tnt_layer *dense_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int units = 0;
    bool use_bias = false;
    TNT_KJ_READ(tnt__kj_int(c, "units", true, 0, &units, k));
    TNT_KJ_READ(tnt__kj_activation(c, &o.activation, k));
    TNT_KJ_READ(tnt__kj_bool(c, "use_bias", true, &use_bias, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.bias_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, tnt__kj_kernel_nulls, k));
    o.no_bias = !use_bias;
    return tnt__kj_built(tnt_dense(units, &o), k);
}

/* ---- on the device (GPU-DESIGN.md 4.4): three sgemms, the bias, the activation ------------- */

/* mixed_bfloat16 on the device: the CPU's bf16 engine (above) with cuBLAS's GemmEx, whatever the
 * host CPU: x, W and dpre are converted to bf16 (tnt_k_f32_to_bf16) into the workspace after the
 * fused region, x16 and W16 kept from forward to backward; the three products take bf16 operands
 * and accumulate and write float32; the bias, its gradient and the activation stay float32. */

#define GPU_BLOCK 256

static bool dense_gpu_bf16(const tnt_layer *l) { return l->dtype_policy == TNT__POLICY_MIXED_BF16; }

/* bf16 W (in, units) after x16 and dpre16 */
static size_t off_w16(tnt_layer *l, int64_t batch) {
    const dense_cfg *c = l->priv;
    return off_dpre16(l, batch) + align64((size_t)(batch * c->lead * c->units) * sizeof(tnt__bf16));
}
static tnt__bf16 *ws_w16(tnt_layer *l, void *ws, int64_t batch) { return (tnt__bf16 *)((char *)ws + off_w16(l, batch)); }

static size_t dense_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const dense_cfg *c = l->priv;
    if (!dense_gpu_bf16(l)) return tnt__fused_workspace_size(l, batch);
    return off_w16(l, batch) + align64((size_t)(c->in * c->units) * sizeof(tnt__bf16));
}

/* out (rows, units) = rows of b (or zeros), then out += x · W: the CPU's sgemm path */
static tnt_status dense_gpu_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    (void)plan;
    const dense_cfg *c = l->priv;
    long long rows = a->batch * c->lead, units = c->units;
    tnt_status s = TNT_OK;
    if (c->use_bias) {
        const float *b = l->weights[1].d_value;
        void *args[] = {&out, &b, &rows, &units};
        s = tnt__gpu_launch("tnt_k_bias_set", tnt__gpu_grid_for(rows * units, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    if (s != TNT_OK) return s;
    if (dense_gpu_bf16(l)) {
        tnt__bf16 *x16 = ws_x16(l, a->workspace, a->batch), *w16 = ws_w16(l, a->workspace, a->batch);
        if ((s = tnt__gpu_to_bf16(a->x, x16, rows * c->in)) != TNT_OK ||
            (s = tnt__gpu_to_bf16(l->weights[0].d_value, w16, c->in * units)) != TNT_OK)
            return s;
        return tnt__gpu_gemm_bf16(false, false, rows, units, c->in, 1.0f, x16, c->in, w16, units,
                                  c->use_bias ? 1.0f : 0.0f, out, units);
    }
    return tnt__gpu_sgemm(false, false, rows, units, c->in, 1.0f, a->x, c->in, l->weights[0].d_value, units,
                          c->use_bias ? 1.0f : 0.0f, out, units);
}

static tnt_status dense_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, dense_gpu_run);
}

/* dW (in, units) = x^T · dpre and dx (rows, in) = dpre · W^T on bf16 operands (forward's x16, W16) */
static tnt_status dense_gpu_products_bf16(tnt_layer *l, const tnt__bwd_args *a, const float *dpre) {
    const dense_cfg *c = l->priv;
    const int64_t rows = a->batch * c->lead, units = c->units;
    tnt__bf16 *dpre16 = ws_dpre16(l, a->workspace, a->batch);
    tnt_status s = tnt__gpu_to_bf16(dpre, dpre16, rows * units);
    if (s == TNT_OK)
        s = tnt__gpu_gemm_bf16(true, false, c->in, units, rows, 1.0f, ws_x16(l, a->workspace, a->batch), c->in, dpre16,
                               units, 0.0f, l->weights[0].d_grad, units);
    if (s == TNT_OK && a->dx)
        s = tnt__gpu_gemm_bf16(false, true, rows, c->in, units, 1.0f, dpre16, units, ws_w16(l, a->workspace, a->batch),
                               units, 0.0f, a->dx, c->in);
    return s;
}

static tnt_status dense_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const dense_cfg *c = l->priv;
    long long rows = a->batch * c->lead, units = c->units;
    const float *dpre;
    tnt_status s = tnt__gpu_fused_backward(l, a, &dpre);
    if (s == TNT_OK && c->use_bias) { /* db: column sums, in a fixed order in double, rounded once */
        s = tnt__gpu_col_sums(dpre, l->weights[1].d_grad, rows, units);
    }
    if (s != TNT_OK || dense_gpu_bf16(l)) return s == TNT_OK ? dense_gpu_products_bf16(l, a, dpre) : s;
    /* dW (in, units) = x^T · dpre */
    s = tnt__gpu_sgemm(true, false, c->in, units, rows, 1.0f, a->x, c->in, dpre, units, 0.0f, l->weights[0].d_grad,
                       units);
    if (s == TNT_OK && a->dx) /* dx (rows, in) = dpre · W^T */
        s = tnt__gpu_sgemm(false, true, rows, c->in, units, 1.0f, dpre, units, l->weights[0].d_value, units, 0.0f,
                           a->dx, c->in);
    return s;
}

static const tnt__gpu_ops dense_gpu_ops = {
    .workspace_size = dense_gpu_workspace,
    .forward = dense_gpu_forward,
    .backward = dense_gpu_backward,
};

const tnt__layer_ops tnt__dense_ops = {
    .class_name = "Dense",
    .get_config = dense_get_config,
    .from_config = dense_from_config,
    .build = dense_build,
    .plan_create = dense_plan_create,
    .plan_destroy = dense_plan_destroy,
    .workspace_size = dense_workspace_size,
    .forward = dense_forward,
    .backward = dense_backward,
    .backward_reads = tnt__reads_inputs,
    .destroy = dense_destroy,
    .supports_masking = true,
    .gpu = &dense_gpu_ops,
};

tnt_layer *tnt_dense(int units, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (units <= 0) {
        tnt__error(TNT_ERR_ARG, "Dense: units %d (expected > 0)", units);
        return NULL;
    }
    if ((unsigned)o->activation >= TNT_ACT_COUNT) {
        tnt__error(TNT_ERR_ARG, "Dense: activation %d (expected 0..%d)", (int)o->activation,
                   TNT_ACT_COUNT - 1);
        return NULL;
    }
    if (!tnt__init_valid(o->kernel_initializer, TNT_INIT_ORTHOGONAL) || !tnt__init_valid(o->bias_initializer, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "Dense: initializer %d/%d (expected 0..%d)", (int)o->kernel_initializer,
                   (int)o->bias_initializer, (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    dense_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->units = units;
    c->use_bias = !o->no_bias;
    c->kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM;
    c->bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS;
    tnt_layer *l = tnt__layer_new(&tnt__dense_ops, o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}
