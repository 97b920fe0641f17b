/* conv1d.c: Conv1D (Keras): 1-D convolution of NWC input (batch, steps, in_ch) with a kernel in
 * Keras layout (kernel_size, in_ch, filters) (oneDNN's "wio"), optional bias and a fused
 * activation, on oneDNN 1-D convolution primitives (forward, backward-data, backward-weights
 * with the bias gradient).
 *
 * As in conv2d.c (which this follows; see there for the layout timings): activations stay in the
 * model's plain NWC, the weights use oneDNN's preferred layout (format any) and are reordered
 * from the Keras buffer once per forward (and per backward when backward-data prefers another
 * layout); the weight gradient is reordered back into the Keras gradient buffer.
 * Padding: "same" is TensorFlow's, total = max((ceil(in/s)-1)*s + (k-1)*d+1 - in, 0), the extra
 * step on the right; "causal" pads (k-1)*d steps on the left only (output ceil(in/s) steps).
 * oneDNN dilation is 0-based (d-1). */
#include "kernels/activation.h"
#include "layers/layer.h"

#include <stdio.h>

/* ---- configuration ------------------------------------------------------------------------ */

typedef struct conv1d_cfg {
    int filters, k, s, d; /* kernel size, stride, dilation (1-based, Keras) */
    tnt_padding padding;
    bool use_bias;
    tnt_initializer kernel_init, bias_init;
    /* from build */
    int64_t iw, ic, ow, pad_l, pad_r;
} conv1d_cfg;

static const char *padding_name(tnt_padding p) {
    return p == TNT_PADDING_SAME ? "same" : p == TNT_PADDING_CAUSAL ? "causal" : "valid";
}

static tnt_status conv1d_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    conv1d_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 2)
        return tnt__error(TNT_ERR_SHAPE,
                          "Conv1D \"%s\": input shape %s has rank %d (expected 2: steps, channels)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "Conv1D \"%s\": input shape %s has an empty dimension",
                          l->name, tnt_shape_str(in, b, sizeof b));
    c->iw = in.dim[0];
    c->ic = in.dim[1];
    int64_t ek = (int64_t)(c->k - 1) * c->d + 1; /* effective (dilated) kernel extent */
    if (c->padding == TNT_PADDING_SAME) {
        c->ow = (c->iw + c->s - 1) / c->s;
        int64_t total = TNT_MAX((c->ow - 1) * c->s + ek - c->iw, 0);
        c->pad_l = total / 2;
        c->pad_r = total - c->pad_l;
    } else if (c->padding == TNT_PADDING_CAUSAL) {
        c->pad_l = ek - 1;
        c->pad_r = 0;
        c->ow = (c->iw - 1) / c->s + 1;
    } else {
        c->pad_l = c->pad_r = 0;
        c->ow = c->iw >= ek ? (c->iw - ek) / c->s + 1 : 0;
    }
    if (c->ow <= 0)
        return tnt__error(TNT_ERR_SHAPE,
                          "Conv1D \"%s\": input shape %s is smaller than the kernel (%d) with "
                          "dilation %d and padding \"%s\": output would be (%lld, %d)",
                          l->name, tnt_shape_str(in, b, sizeof b), c->k, c->d,
                          padding_name(c->padding), (long long)c->ow, c->filters);
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", TNT_SHAPE(c->k, c->ic, c->filters), c->kernel_init,
                              (int64_t)c->k * c->ic, (int64_t)c->k * c->filters) < 0)
        return TNT_ERR_ARG;
    if (c->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(c->filters), c->bias_init, 0, 0) < 0)
        return TNT_ERR_ARG;
    *out = TNT_SHAPE(c->ow, c->filters);
    return TNT_OK;
}

/* ---- plan: primitives for one batch size -------------------------------------------------- */

typedef struct conv1d_plan {
    int64_t batch;
    bool fused;          /* fwd applies the activation as a post-op */
    tnt__prim fwd;       /* convolution (+ bias, + post-op when fused) */
    tnt__prim fwd_plain; /* without the post-op, made on the first forward that asks for the
                            pre-activation while `fused`; same weights layout as fwd */
    tnt__prim bwd_data, bwd_weights;
    tnt__act act;        /* activation forward (when not fused) and backward */
    /* Keras wio <-> the primitives' weight layouts; a NULL prim means the layouts agree and the
     * Keras buffer is used directly. */
    tnt__reorder w_fwd, w_bwd, dw_out;
    float *w_fwd_buf, *w_bwd_buf, *dw_buf;
    bool bwd_uses_fwd_weights;
    dnnl_memory_t x, y, b, db; /* NWC activations and the bias */
    dnnl_memory_t wf, wb, dw;  /* weights in each primitive's layout */
} conv1d_plan;

/* x (batch, ic, iw) and y (batch, filters, ow) as nwc; weights (filters, ic, k) as any and as
 * wio (Keras's buffer); bias (filters). */
typedef struct conv1d_mds {
    dnnl_memory_desc_t x, y, w, w_wio, b;
    dnnl_dims_t strides, dil, pl, pr;
} conv1d_mds;

static tnt_status conv1d_mds_init(const conv1d_cfg *c, int64_t batch, conv1d_mds *m) {
    tnt_status status = TNT_OK;
    dnnl_dims_t xd = {batch, c->ic, c->iw}, yd = {batch, c->filters, c->ow},
                wd = {c->filters, c->ic, c->k}, bd = {c->filters};
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->x, 3, xd, dnnl_f32, dnnl_nwc));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->y, 3, yd, dnnl_f32, dnnl_nwc));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w, 3, wd, dnnl_f32, dnnl_format_tag_any));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w_wio, 3, wd, dnnl_f32, dnnl_wio));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->b, 1, bd, dnnl_f32, dnnl_a));
    memset(m->strides, 0, sizeof m->strides);
    memset(m->dil, 0, sizeof m->dil);
    memset(m->pl, 0, sizeof m->pl);
    memset(m->pr, 0, sizeof m->pr);
    m->strides[0] = c->s;
    m->dil[0] = c->d - 1;
    m->pl[0] = c->pad_l;
    m->pr[0] = c->pad_r;
fail:
    return status;
}

/* The forward primitive; wmd: the weights descriptor (any, or the fused primitive's layout). */
static tnt_status create_fwd(tnt_layer *l, const conv1d_mds *m, const dnnl_memory_desc_t *wmd,
                             bool fuse_act, tnt__prim *prim) {
    conv1d_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_convolution_desc_t d;
    TNT_DNNL(dnnl_dilated_convolution_forward_desc_init(
        &d, dnnl_forward_training, dnnl_convolution_direct, &m->x, wmd, c->use_bias ? &m->b : NULL,
        &m->y, m->strides, m->dil, m->pl, m->pr));
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

static void conv1d_plan_destroy(void *plan) {
    conv1d_plan *p = plan;
    if (!p) return;
    tnt__prim_destroy(&p->fwd);
    tnt__prim_destroy(&p->fwd_plain);
    tnt__prim_destroy(&p->bwd_data);
    tnt__prim_destroy(&p->bwd_weights);
    tnt__act_destroy(&p->act);
    tnt__reorder_destroy(&p->w_fwd);
    tnt__reorder_destroy(&p->w_bwd);
    tnt__reorder_destroy(&p->dw_out);
    tnt__free(p->w_fwd_buf);
    tnt__free(p->w_bwd_buf);
    tnt__free(p->dw_buf);
    dnnl_memory_t *mems[] = {&p->x, &p->y, &p->b, &p->db, &p->wf, &p->wb, &p->dw};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    free(p);
}

/* A reorder between Keras's wio and a primitive's layout (from or to), with its buffer. */
static tnt_status weight_reorder(tnt__reorder *r, float **buf, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, const dnnl_memory_desc_t *prim_md) {
    tnt_status status = tnt__reorder_create(r, from, to);
    if (status != TNT_OK || !r->prim) return status;
    *buf = tnt__alloc(dnnl_memory_desc_get_size(prim_md));
    return *buf ? TNT_OK : TNT_ERR_NOMEM;
}

static void *conv1d_plan_create(tnt_layer *l, int64_t batch) {
    conv1d_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    conv1d_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = batch;
    conv1d_mds m;
    if ((status = conv1d_mds_init(c, batch, &m)) != TNT_OK) goto fail;
    dnnl_alg_kind_t alg;
    float alpha;
    p->fused = tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
    if ((status = create_fwd(l, &m, &m.w, p->fused, &p->fwd)) != TNT_OK) goto fail;

    dnnl_convolution_desc_t bd, bw;
    TNT_DNNL(dnnl_dilated_convolution_backward_data_desc_init(
        &bd, dnnl_convolution_direct, &m.x, &m.w, &m.y, m.strides, m.dil, m.pl, m.pr));
    if ((status = tnt__prim_create(&p->bwd_data, &bd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    TNT_DNNL(dnnl_dilated_convolution_backward_weights_desc_init(
        &bw, dnnl_convolution_direct, &m.x, &m.w, c->use_bias ? &m.b : NULL, &m.y, m.strides,
        m.dil, m.pl, m.pr));
    if ((status = tnt__prim_create(&p->bwd_weights, &bw, NULL, p->fwd.pd)) != TNT_OK) goto fail;

    const dnnl_memory_desc_t *wf = tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *wb = tnt__prim_md(&p->bwd_data, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dw = tnt__prim_md(&p->bwd_weights, dnnl_query_diff_weights_md, 0);
    p->bwd_uses_fwd_weights = dnnl_memory_desc_equal(wf, wb);
    if ((status = weight_reorder(&p->w_fwd, &p->w_fwd_buf, &m.w_wio, wf, wf)) ||
        (!p->bwd_uses_fwd_weights &&
         (status = weight_reorder(&p->w_bwd, &p->w_bwd_buf, &m.w_wio, wb, wb))) ||
        (status = weight_reorder(&p->dw_out, &p->dw_buf, dw, &m.w_wio, dw)))
        goto fail;

    if ((status = tnt__memory(&p->x, &m.x, NULL, false)) ||
        (status = tnt__memory(&p->y, &m.y, NULL, false)) ||
        (status = tnt__memory(&p->wf, wf, NULL, false)) ||
        (status = tnt__memory(&p->wb, wb, NULL, false)) ||
        (status = tnt__memory(&p->dw, dw, NULL, false)) ||
        (c->use_bias && (status = tnt__memory(&p->b, &m.b, NULL, false))) ||
        (c->use_bias && (status = tnt__memory(&p->db, &m.b, NULL, false))))
        goto fail;
    if (l->activation != TNT_ACT_LINEAR &&
        (status = tnt__act_create(&p->act, l->activation, l->activation_alpha, batch * c->ow,
                                  c->filters)) != TNT_OK)
        goto fail;
    return p;
fail:
    (void)status;
    conv1d_plan_destroy(p);
    return NULL;
}

/* ---- workspace ---------------------------------------------------------------------------- */

/* [dpre: batch*ow*filters floats, when there is an activation][preact: as large, when the
 * activation's backward needs its input] */
static size_t out_bytes(const conv1d_cfg *c, int64_t batch) {
    return ((size_t)(batch * c->ow * c->filters) * sizeof(float) + 63) & ~(size_t)63;
}

static size_t conv1d_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    if (l->activation == TNT_ACT_LINEAR) return 0;
    size_t blk = out_bytes(l->priv, batch);
    return tnt__act_backward_needs_src(l->activation) ? 2 * blk : blk;
}

static float *ws_preact(const tnt_layer *l, void *ws, int64_t batch) {
    return (float *)((char *)ws + out_bytes(l->priv, batch));
}

/* ---- forward ------------------------------------------------------------------------------ */

/* x: (batch, iw, ic) -> out: (batch, ow, filters), with the weights in the forward layout (w). */
static tnt_status run_fwd(tnt_layer *l, conv1d_plan *p, const tnt__prim *prim, const float *w,
                          const float *x, float *out) {
    conv1d_cfg *c = l->priv;
    tnt__set_data(p->x, x);
    tnt__set_data(p->wf, w);
    tnt__set_data(p->y, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_WEIGHTS, p->wf}, {DNNL_ARG_DST, p->y}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->b, l->weights[1].value);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
    }
    return tnt__prim_exec(prim, n, args);
}

/* x: (batch, iw, ic); y, preact: (batch, ow, filters) */
static tnt_status conv1d_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    conv1d_plan *p = plan;
    conv1d_cfg *c = l->priv;
    tnt_status status;
    const float *w = l->weights[0].value;
    if (p->w_fwd.prim) {
        if ((status = tnt__reorder_run(&p->w_fwd, w, p->w_fwd_buf)) != TNT_OK) return status;
        w = p->w_fwd_buf;
    }
    size_t bytes = (size_t)(p->batch * c->ow * c->filters) * sizeof(float);
    if (l->activation == TNT_ACT_LINEAR) {
        if ((status = run_fwd(l, p, &p->fwd, w, a->x, a->y)) != TNT_OK) return status;
        if (a->preact) memcpy(a->preact, a->y, bytes);
        return TNT_OK;
    }
    if (p->fused && !a->preact) return run_fwd(l, p, &p->fwd, w, a->x, a->y);

    /* Unfused: the convolution writes the pre-activation, then the activation runs. */
    const tnt__prim *prim = &p->fwd;
    if (p->fused) {
        if (!p->fwd_plain.prim) {
            conv1d_mds m;
            if ((status = conv1d_mds_init(c, p->batch, &m)) != TNT_OK ||
                (status = create_fwd(l, &m, tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0), false,
                                     &p->fwd_plain)) != TNT_OK)
                return status;
        }
        prim = &p->fwd_plain;
    }
    bool keep = tnt__act_backward_needs_src(l->activation);
    float *pre = keep ? ws_preact(l, a->workspace, p->batch) : a->preact ? a->preact : a->y;
    if ((status = run_fwd(l, p, prim, w, a->x, pre)) != TNT_OK) return status;
    if (keep && a->preact) memcpy(a->preact, pre, bytes);
    return tnt__act_forward(&p->act, pre, a->y);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* x: (batch, iw, ic); y, dy: (batch, ow, filters); dx: like x, or NULL */
static tnt_status conv1d_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    conv1d_plan *p = plan;
    conv1d_cfg *c = l->priv;
    tnt_status status;

    /* dpre (batch, ow, filters): the gradient before the activation. */
    const float *dpre = a->dy;
    if (l->activation != TNT_ACT_LINEAR && !a->dy_is_preact) {
        float *buf = a->workspace;
        const float *pre = tnt__act_backward_needs_src(l->activation)
                               ? ws_preact(l, a->workspace, p->batch) : NULL;
        if ((status = tnt__act_backward(&p->act, pre, a->y, a->dy, buf)) != TNT_OK) return status;
        dpre = buf;
    }

    /* Weight and bias gradients (overwritten), then dx. */
    tnt__weight *k = &l->weights[0];
    tnt__set_data(p->x, a->x);
    tnt__set_data(p->y, dpre);
    tnt__set_data(p->dw, p->dw_out.prim ? p->dw_buf : k->grad);
    dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_DIFF_WEIGHTS, p->dw}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->db, l->weights[1].grad);
        wargs[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, p->db};
    }
    if ((status = tnt__prim_exec(&p->bwd_weights, n, wargs)) != TNT_OK) return status;
    if (p->dw_out.prim && (status = tnt__reorder_run(&p->dw_out, p->dw_buf, k->grad)) != TNT_OK)
        return status;

    if (!a->dx) return TNT_OK; /* first layer: no data gradient needed */
    /* The weights in bwd_data's layout: the forward's copy when the layouts agree (weights do not
     * change between forward and backward of a step), else a fresh reorder. */
    const float *w = k->value;
    if (p->bwd_uses_fwd_weights) {
        if (p->w_fwd.prim) w = p->w_fwd_buf;
    } else if (p->w_bwd.prim) {
        if ((status = tnt__reorder_run(&p->w_bwd, w, p->w_bwd_buf)) != TNT_OK) return status;
        w = p->w_bwd_buf;
    }
    tnt__set_data(p->wb, w);
    tnt__set_data(p->x, a->dx);
    dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_WEIGHTS, p->wb}, {DNNL_ARG_DIFF_SRC, p->x}};
    return tnt__prim_exec(&p->bwd_data, 3, dargs);
}

/* ---- constructor -------------------------------------------------------------------------- */

static void conv1d_destroy(tnt_layer *l) { free(l->priv); }

static const tnt__layer_ops conv1d_ops = {
    .class_name = "Conv1D",
    .build = conv1d_build,
    .plan_create = conv1d_plan_create,
    .plan_destroy = conv1d_plan_destroy,
    .workspace_size = conv1d_workspace_size,
    .forward = conv1d_forward,
    .backward = conv1d_backward,
    .destroy = conv1d_destroy,
};

tnt_layer *tnt_conv1d(int filters, int kernel_size, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (filters <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: filters %d (expected > 0)", filters);
        return NULL;
    }
    if (kernel_size <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: kernel_size %d (expected > 0)", kernel_size);
        return NULL;
    }
    if (o->strides[0] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: strides %d (expected > 0, or 0 for the default 1)",
                   o->strides[0]);
        return NULL;
    }
    if (o->dilation[0] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: dilation_rate %d (expected > 0, or 0 for the default 1)",
                   o->dilation[0]);
        return NULL;
    }
    int s = o->strides[0] ? o->strides[0] : 1, d = o->dilation[0] ? o->dilation[0] : 1;
    if (s > 1 && d > 1) {
        tnt__error(TNT_ERR_ARG,
                   "Conv1D: strides %d with dilation_rate %d (Keras allows strides > 1 or "
                   "dilation_rate > 1, not both)", s, d);
        return NULL;
    }
    if (o->padding != TNT_PADDING_VALID && o->padding != TNT_PADDING_SAME &&
        o->padding != TNT_PADDING_CAUSAL) {
        tnt__error(TNT_ERR_ARG,
                   "Conv1D: padding %d (expected TNT_PADDING_VALID, TNT_PADDING_SAME or "
                   "TNT_PADDING_CAUSAL)", (int)o->padding);
        return NULL;
    }
    if ((unsigned)o->activation >= TNT_ACT_COUNT) {
        tnt__error(TNT_ERR_ARG, "Conv1D: activation %d (expected 0..%d)", (int)o->activation,
                   TNT_ACT_COUNT - 1);
        return NULL;
    }
    if ((unsigned)o->kernel_initializer > TNT_INIT_ONES || (unsigned)o->bias_initializer > TNT_INIT_ONES) {
        tnt__error(TNT_ERR_ARG, "Conv1D: initializer %d/%d (expected 0..%d)", (int)o->kernel_initializer,
                   (int)o->bias_initializer, (int)TNT_INIT_ONES);
        return NULL;
    }
    conv1d_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (conv1d_cfg){
        .filters = filters, .k = kernel_size, .s = s, .d = d, .padding = o->padding,
        .use_bias = !o->no_bias,
        .kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM,
        .bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS,
    };
    tnt_layer *l = tnt__layer_new(&conv1d_ops, o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}
