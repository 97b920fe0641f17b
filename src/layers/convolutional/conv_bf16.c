/* conv_bf16.c: the bf16 engine of Conv1D, Conv2D and DepthwiseConv2D under mixed_bfloat16
 * and Conv3D (conv2d.h; channels_last only: channels_first layers run float32): oneDNN convolutions on bf16 operands with float32 results.
 *   forward        src bf16 (x converted per call, kept in the workspace for backward-weights),
 *                  weights bf16 (reordered from Keras's float32 kernel per call), bias and dst f32
 *                  (the fused activation as a post-op, as the float32 engine);
 *   backward-data  diff_dst bf16 (dpre converted), weights bf16, diff_src f32;
 *   backward-weights src and diff_dst bf16, diff_weights and diff_bias f32, so the gradient the
 *                  allreduce and the optimizer see is float32.
 * The model's activations stay float32 NHWC between layers (the descriptors are the float32
 * engine's, tnt__conv_mds_init, with bf16 data types where the operand is bf16). */
#include "kernels/bf16.h"
#include "layers/convolutional/conv2d.h"
#include "layers/fused.h"

#include <stdio.h>

typedef struct bf_plan {
    int64_t batch;
    bool fused;
    tnt__prim fwd, fwd_plain, bwd_data, bwd_weights;
    tnt__act act;
    /* Keras HWIO float32 -> the primitives' bf16 weight layouts, and the float32 weight gradient
     * back to HWIO; a NULL prim: the layouts agree (w_fwd/w_bwd never do: the types differ) */
    tnt__reorder w_fwd, w_bwd, dw_out;
    void *w_fwd_buf, *w_bwd_buf, *dw_buf;
    tnt__bf16 *w_hwio16; /* the kernel in bf16, still HWIO: the reorders start from it */
    bool bwd_uses_fwd_weights;
    dnnl_memory_t x16, y, b, db, dx, dy16, wf, wb, dw;
} bf_plan;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* elements of x and y (Conv3D: with the depth axis) */
static int64_t x_numel(const tnt__conv_cfg *c, int64_t batch) { return batch * (c->kd ? c->id : 1) * c->ih * c->iw * c->ic; }
static int64_t y_numel(const tnt__conv_cfg *c, int64_t batch) {
    return batch * (c->kd ? c->od : 1) * c->oh * c->ow * c->filters;
}
static size_t x16_bytes(const tnt__conv_cfg *c, int64_t batch) { return align64((size_t)x_numel(c, batch) * sizeof(tnt__bf16)); }
static size_t y16_bytes(const tnt__conv_cfg *c, int64_t batch) { return align64((size_t)y_numel(c, batch) * sizeof(tnt__bf16)); }

/* workspace: [the fused activation's][x bf16][dpre bf16] */
size_t tnt__conv_bf16_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return align64(tnt__fused_workspace_size(l, batch)) + x16_bytes(l->priv, batch) + y16_bytes(l->priv, batch);
}
static tnt__bf16 *ws_x16(tnt_layer *l, void *ws, int64_t batch) {
    return (tnt__bf16 *)((char *)ws + align64(tnt__fused_workspace_size(l, batch)));
}
static tnt__bf16 *ws_y16(tnt_layer *l, void *ws, int64_t batch) {
    return (tnt__bf16 *)((char *)ws_x16(l, ws, batch) + x16_bytes(l->priv, batch));
}

static dnnl_memory_desc_t as_bf16(const dnnl_memory_desc_t *md) {
    dnnl_memory_desc_t r = *md; /* plain and "any" descriptors count in elements: only the type changes */
    r.data_type = dnnl_bf16;
    return r;
}

static bool is_reference(const tnt__prim *p) {
    const char *impl = "";
    dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &impl);
    return !strncmp(impl, "ref", 3);
}

void tnt__conv_bf16_plan_destroy(void *plan) {
    bf_plan *p = plan;
    if (!p) return;
    tnt__prim *prims[] = {&p->fwd, &p->fwd_plain, &p->bwd_data, &p->bwd_weights};
    for (size_t i = 0; i < TNT_ARRAY_LEN(prims); i++) tnt__prim_destroy(prims[i]);
    tnt__act_destroy(&p->act);
    tnt__reorder_destroy(&p->w_fwd);
    tnt__reorder_destroy(&p->w_bwd);
    tnt__reorder_destroy(&p->dw_out);
    tnt__free(p->w_fwd_buf);
    tnt__free(p->w_bwd_buf);
    tnt__free(p->dw_buf);
    tnt__free(p->w_hwio16);
    dnnl_memory_t *mems[] = {&p->x16, &p->y, &p->b, &p->db, &p->dx, &p->dy16, &p->wf, &p->wb, &p->dw};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    free(p);
}

/* A reorder from or to Keras's HWIO and the buffer of the primitive's side. */
static tnt_status weight_reorder(tnt__reorder *r, void **buf, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, const dnnl_memory_desc_t *prim_md) {
    tnt_status status = tnt__reorder_create(r, from, to);
    if (status != TNT_OK || !r->prim) return status;
    *buf = tnt__alloc(dnnl_memory_desc_get_size(prim_md));
    return *buf ? TNT_OK : TNT_ERR_NOMEM;
}

void *tnt__conv_bf16_plan_create(tnt_layer *l, int64_t batch, bool *use_f32) {
    const tnt__conv_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    *use_f32 = c->channels_first; /* the bf16 engine reads and writes channels-last tensors only */
    if (*use_f32) {
        tnt_log(TNT_LOG_DEBUG, "%s \"%s\": channels_first runs float32 under mixed_bfloat16", l->ops->class_name, l->name);
        return NULL;
    }
    bf_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = batch;
    tnt__conv_mds m;
    if ((status = tnt__conv_mds_init(c, batch, &m)) != TNT_OK) goto fail;
    dnnl_memory_desc_t x16 = as_bf16(&m.x), y16 = as_bf16(&m.y), w16 = as_bf16(&m.w);
    dnnl_alg_kind_t alg;
    float alpha;
    p->fused = tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
    if ((status = tnt__conv_create_fwd(l, &m, &x16, &w16, p->fused, &p->fwd)) != TNT_OK) goto fail;

    dnnl_convolution_desc_t bd, bw;
    TNT_DNNL(dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &m.x, &w16, &y16,
                                                              m.strides, m.dil, m.pl, m.pr));
    if ((status = tnt__prim_create(&p->bwd_data, &bd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    /* diff_weights float32 in the layout oneDNN picks (m.w is "any" float32) */
    TNT_DNNL(dnnl_dilated_convolution_backward_weights_desc_init(&bw, dnnl_convolution_direct, &x16, &m.w,
                                                                 c->use_bias ? &m.b : NULL, &y16, m.strides, m.dil,
                                                                 m.pl, m.pr));
    if ((status = tnt__prim_create(&p->bwd_weights, &bw, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    if (is_reference(&p->fwd) || is_reference(&p->bwd_data) || is_reference(&p->bwd_weights)) {
        tnt_log(TNT_LOG_DEBUG, "%s \"%s\": oneDNN has only reference bf16 kernels here: float32 instead",
                l->ops->class_name, l->name);
        *use_f32 = true;
        goto fail;
    }

    const dnnl_memory_desc_t *wf = tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *wb = tnt__prim_md(&p->bwd_data, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dw = tnt__prim_md(&p->bwd_weights, dnnl_query_diff_weights_md, 0);
    p->bwd_uses_fwd_weights = dnnl_memory_desc_equal(wf, wb);
    /* the weights reach the primitives' layouts from a bf16 copy of the HWIO kernel: our own
     * conversion, then oneDNN's bf16 -> bf16 reorder, about 4x faster than its f32 -> bf16 one */
    const dnnl_memory_desc_t w_hwio16 = as_bf16(&m.w_hwio);
    if (!(p->w_hwio16 = tnt__alloc(dnnl_memory_desc_get_size(&w_hwio16)))) {
        status = TNT_ERR_NOMEM;
        goto fail;
    }
    if ((status = weight_reorder(&p->w_fwd, &p->w_fwd_buf, &w_hwio16, wf, wf)) ||
        (!p->bwd_uses_fwd_weights && (status = weight_reorder(&p->w_bwd, &p->w_bwd_buf, &w_hwio16, wb, wb))) ||
        (status = weight_reorder(&p->dw_out, &p->dw_buf, dw, &m.w_hwio, dw)))
        goto fail;

    if ((status = tnt__memory(&p->x16, &x16, NULL, false)) || (status = tnt__memory(&p->y, &m.y, NULL, false)) ||
        (status = tnt__memory(&p->dx, &m.x, NULL, false)) || (status = tnt__memory(&p->dy16, &y16, NULL, false)) ||
        (status = tnt__memory(&p->wf, wf, NULL, false)) || (status = tnt__memory(&p->wb, wb, NULL, false)) ||
        (status = tnt__memory(&p->dw, dw, NULL, false)) ||
        (c->use_bias && (status = tnt__memory(&p->b, &m.b, NULL, false))) ||
        (c->use_bias && (status = tnt__memory(&p->db, &m.b, NULL, false))))
        goto fail;
    if (l->activation != TNT_ACT_LINEAR &&
        (status = tnt__act_create(&p->act, l->activation, l->activation_alpha, y_numel(c, batch) / c->filters, c->filters)))
        goto fail;
    return p;
fail:
    (void)status;
    tnt__conv_bf16_plan_destroy(p);
    if (*use_f32) tnt__error_clear();
    return NULL;
}

/* out (batch, oh, ow, filters) from the bf16 x in the workspace and the weights reordered by
 * forward; the variant without the post-op is made on first use, as in the float32 engine. */
static tnt_status run(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op, float *out) {
    bf_plan *p = plan;
    const tnt__conv_cfg *c = l->priv;
    tnt_status status;
    const tnt__prim *prim = &p->fwd;
    if (p->fused && !post_op) {
        if (!p->fwd_plain.prim) {
            tnt__conv_mds m;
            if ((status = tnt__conv_mds_init(c, p->batch, &m)) != TNT_OK) return status;
            const dnnl_memory_desc_t x16 = as_bf16(&m.x);
            if ((status = tnt__conv_create_fwd(l, &m, &x16, tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0), false,
                                               &p->fwd_plain)) != TNT_OK)
                return status;
        }
        prim = &p->fwd_plain;
    }
    tnt__set_data(p->x16, ws_x16(l, a->workspace, a->batch));
    tnt__set_data(p->wf, p->w_fwd_buf);
    tnt__set_data(p->y, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->x16}, {DNNL_ARG_WEIGHTS, p->wf}, {DNNL_ARG_DST, p->y}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->b, l->weights[1].value);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
    }
    return tnt__prim_exec(prim, n, args);
}

/* x: (batch, ih, iw, ic); y, preact: (batch, oh, ow, filters) */
tnt_status tnt__conv_bf16_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    bf_plan *p = plan;
    const tnt__conv_cfg *c = l->priv;
    tnt__f32_to_bf16(l->weights[0].value, p->w_hwio16, tnt_shape_numel(l->weights[0].shape));
    tnt_status status = tnt__reorder_run(&p->w_fwd, p->w_hwio16, p->w_fwd_buf);
    if (status != TNT_OK) return status;
    tnt__f32_to_bf16(a->x, ws_x16(l, a->workspace, a->batch), x_numel(c, a->batch));
    return tnt__fused_forward(l, plan, a, p->fused, &p->act, run);
}

/* x: (batch, ih, iw, ic); y, dy: (batch, oh, ow, filters); dx: like x, or NULL */
tnt_status tnt__conv_bf16_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    bf_plan *p = plan;
    const tnt__conv_cfg *c = l->priv;
    tnt_status status;
    const float *dpre;
    if ((status = tnt__fused_backward(l, a, &p->act, &dpre)) != TNT_OK) return status;
    tnt__bf16 *dy16 = ws_y16(l, a->workspace, a->batch);
    tnt__f32_to_bf16(dpre, dy16, y_numel(c, a->batch));

    /* weight and bias gradients first (the allreduce can start on them) */
    tnt__weight *k = &l->weights[0];
    tnt__set_data(p->x16, ws_x16(l, a->workspace, a->batch));
    tnt__set_data(p->dy16, dy16);
    tnt__set_data(p->dw, p->dw_out.prim ? p->dw_buf : k->grad);
    dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, p->x16}, {DNNL_ARG_DIFF_DST, p->dy16}, {DNNL_ARG_DIFF_WEIGHTS, p->dw}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->db, l->weights[1].grad);
        wargs[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, p->db};
    }
    if ((status = tnt__prim_exec(&p->bwd_weights, n, wargs)) != TNT_OK) return status;
    if (p->dw_out.prim && (status = tnt__reorder_run(&p->dw_out, p->dw_buf, k->grad)) != TNT_OK) return status;

    if (!a->dx) return TNT_OK;
    /* the weights in bwd_data's layout: forward's copy when the layouts agree (the weights do not
     * change between forward and backward of a step) */
    const void *w = p->w_fwd_buf;
    if (!p->bwd_uses_fwd_weights) {
        if ((status = tnt__reorder_run(&p->w_bwd, p->w_hwio16, p->w_bwd_buf)) != TNT_OK) return status;
        w = p->w_bwd_buf;
    }
    tnt__set_data(p->wb, w);
    tnt__set_data(p->dx, a->dx);
    dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_DST, p->dy16}, {DNNL_ARG_WEIGHTS, p->wb}, {DNNL_ARG_DIFF_SRC, p->dx}};
    return tnt__prim_exec(&p->bwd_data, 3, dargs);
}
