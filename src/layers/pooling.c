/* pooling.c: MaxPooling2D and AveragePooling2D (Keras) over NHWC input, on oneDNN pooling
 * primitives in the model's plain NHWC layout (no reorders).
 * Padding "same" is TensorFlow's: total = max((ceil(in/s)-1)*s + k - in, 0), the extra row/column
 * at the bottom/right; padded cells never win a max, and an average divides by the number of
 * real cells only (oneDNN pooling_avg_exclude_padding), as TensorFlow does.
 * Max pooling keeps oneDNN's workspace (the argmax of each window) from forward to backward in the
 * layer's per-step workspace, so backward needs neither x nor y. */
#include "kernels/dnnl_util.h"
#include "layers/layer.h"

#include <stdio.h>

/* ---- configuration ------------------------------------------------------------------------ */

typedef struct pool_cfg {
    bool is_max;
    int ph, pw;  /* pool size */
    int sh, sw;  /* strides */
    tnt_padding padding;
    /* from build */
    int64_t ih, iw, c, oh, ow;
    int64_t pad_t, pad_l, pad_b, pad_r;
} pool_cfg;

static const char *pool_class(const pool_cfg *c) {
    return c->is_max ? "MaxPooling2D" : "AveragePooling2D";
}

/* Output size and padding along one axis; false when the output would be empty. */
static bool pool_axis(int64_t in, int k, int s, tnt_padding pad, int64_t *out, int64_t *pl, int64_t *pr) {
    if (pad == TNT_PADDING_SAME) {
        *out = (in + s - 1) / s;
        int64_t total = TNT_MAX((*out - 1) * s + k - in, 0);
        *pl = total / 2;
        *pr = total - *pl;
    } else {
        *out = in >= k ? (in - k) / s + 1 : 0;
        *pl = *pr = 0;
    }
    return *out > 0;
}

static tnt_status pool_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    pool_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 3)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s has rank %d (expected 3: height, width, channels)",
                          pool_class(c), l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0 || in.dim[2] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension",
                          pool_class(c), l->name, tnt_shape_str(in, b, sizeof b));
    c->ih = in.dim[0];
    c->iw = in.dim[1];
    c->c = in.dim[2];
    if (!pool_axis(c->ih, c->ph, c->sh, c->padding, &c->oh, &c->pad_t, &c->pad_b) ||
        !pool_axis(c->iw, c->pw, c->sw, c->padding, &c->ow, &c->pad_l, &c->pad_r))
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s is smaller than pool_size (%d, %d) with padding "
                          "\"valid\": output would be (%lld, %lld, %lld)",
                          pool_class(c), l->name, tnt_shape_str(in, b, sizeof b), c->ph, c->pw,
                          (long long)c->oh, (long long)c->ow, (long long)c->c);
    *out = TNT_SHAPE(c->oh, c->ow, c->c);
    return TNT_OK;
}

/* ---- plan --------------------------------------------------------------------------------- */

typedef struct pool_plan {
    tnt__prim fwd, bwd;
    dnnl_memory_t x, y, ws; /* x/dx and y/dy (nhwc), the max-pooling workspace */
    size_t ws_bytes;
} pool_plan;

static void pool_plan_destroy(void *plan) {
    pool_plan *p = plan;
    if (!p) return;
    tnt__prim_destroy(&p->fwd);
    tnt__prim_destroy(&p->bwd);
    if (p->x) dnnl_memory_destroy(p->x);
    if (p->y) dnnl_memory_destroy(p->y);
    if (p->ws) dnnl_memory_destroy(p->ws);
    free(p);
}

static void *pool_plan_create(tnt_layer *l, int64_t batch) {
    pool_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    pool_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    dnnl_memory_desc_t xmd, ymd;
    dnnl_dims_t xd = {batch, c->c, c->ih, c->iw}, yd = {batch, c->c, c->oh, c->ow};
    dnnl_dims_t strides = {c->sh, c->sw}, kernel = {c->ph, c->pw}, dil = {0, 0},
                pl = {c->pad_t, c->pad_l}, pr = {c->pad_b, c->pad_r};
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&xmd, 4, xd, dnnl_f32, dnnl_nhwc));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&ymd, 4, yd, dnnl_f32, dnnl_nhwc));
    dnnl_alg_kind_t alg = c->is_max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fd, bd;
    TNT_DNNL(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, &xmd, &ymd, strides,
                                               kernel, dil, pl, pr));
    if ((status = tnt__prim_create(&p->fwd, &fd, NULL, NULL)) != TNT_OK) goto fail;
    TNT_DNNL(dnnl_pooling_v2_backward_desc_init(&bd, alg, &xmd, &ymd, strides, kernel, dil, pl, pr));
    if ((status = tnt__prim_create(&p->bwd, &bd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    if ((status = tnt__memory(&p->x, &xmd, NULL, false)) != TNT_OK ||
        (status = tnt__memory(&p->y, &ymd, NULL, false)) != TNT_OK)
        goto fail;
    const dnnl_memory_desc_t *wsmd = tnt__prim_md(&p->fwd, dnnl_query_workspace_md, 0);
    if (wsmd && (p->ws_bytes = dnnl_memory_desc_get_size(wsmd)) > 0 &&
        (status = tnt__memory(&p->ws, wsmd, NULL, false)) != TNT_OK)
        goto fail;
    return p;
fail:
    (void)status;
    pool_plan_destroy(p);
    return NULL;
}

static size_t pool_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)batch;
    return plan ? ((pool_plan *)plan)->ws_bytes : 0;
}

/* ---- forward and backward ----------------------------------------------------------------- */

/* x: (batch, ih, iw, c) -> y: (batch, oh, ow, c) */
static tnt_status pool_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)l;
    pool_plan *p = plan;
    tnt__set_data(p->x, a->x);
    tnt__set_data(p->y, a->y);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_DST, p->y}};
    int n = 2;
    if (p->ws) {
        tnt__set_data(p->ws, a->workspace);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, p->ws};
    }
    tnt_status status = tnt__prim_exec(&p->fwd, n, args);
    if (status == TNT_OK && a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return status;
}

/* dy: (batch, oh, ow, c) -> dx: (batch, ih, iw, c), or nothing when dx is NULL */
static tnt_status pool_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)l;
    pool_plan *p = plan;
    if (!a->dx) return TNT_OK; /* no weights: nothing else to compute */
    tnt__set_data(p->y, a->dy);
    tnt__set_data(p->x, a->dx);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_DIFF_SRC, p->x}};
    int n = 2;
    if (p->ws) {
        tnt__set_data(p->ws, a->workspace);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, p->ws};
    }
    return tnt__prim_exec(&p->bwd, n, args);
}

/* ---- constructors ------------------------------------------------------------------------- */

static void pool_destroy(tnt_layer *l) { free(l->priv); }

static const tnt__layer_ops max_pool_ops = {
    .class_name = "MaxPooling2D",
    .build = pool_build,
    .plan_create = pool_plan_create,
    .plan_destroy = pool_plan_destroy,
    .workspace_size = pool_workspace_size,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

static const tnt__layer_ops avg_pool_ops = {
    .class_name = "AveragePooling2D",
    .build = pool_build,
    .plan_create = pool_plan_create,
    .plan_destroy = pool_plan_destroy,
    .workspace_size = pool_workspace_size,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

static tnt_layer *pool_new(bool is_max, int ph, int pw, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    const char *cls = is_max ? "MaxPooling2D" : "AveragePooling2D";
    if (ph <= 0 || pw <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: pool_size (%d, %d) (expected > 0)", cls, ph, pw);
        return NULL;
    }
    if (o->strides[0] < 0 || o->strides[1] < 0) {
        tnt__error(TNT_ERR_ARG, "%s: strides (%d, %d) (expected > 0, or 0 for the default pool_size)",
                   cls, o->strides[0], o->strides[1]);
        return NULL;
    }
    if (o->padding != TNT_PADDING_VALID && o->padding != TNT_PADDING_SAME) {
        tnt__error(TNT_ERR_ARG, "%s: padding %d (expected TNT_PADDING_VALID or TNT_PADDING_SAME)", cls,
                   (int)o->padding);
        return NULL;
    }
    /* Keras pooling layers have no activation and no dilation: refuse rather than ignore. */
    if (o->activation != TNT_ACT_LINEAR) {
        tnt__error(TNT_ERR_ARG, "%s: activation %d (pooling has no activation; expected TNT_ACT_LINEAR)",
                   cls, (int)o->activation);
        return NULL;
    }
    if (o->dilation[0] > 1 || o->dilation[1] > 1 || o->dilation[0] < 0 || o->dilation[1] < 0) {
        tnt__error(TNT_ERR_ARG, "%s: dilation (%d, %d) (pooling has no dilation; expected 0 or 1)", cls,
                   o->dilation[0], o->dilation[1]);
        return NULL;
    }
    pool_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (pool_cfg){
        .is_max = is_max, .ph = ph, .pw = pw,
        .sh = o->strides[0] ? o->strides[0] : ph, .sw = o->strides[1] ? o->strides[1] : pw,
        .padding = o->padding,
    };
    tnt_layer *l = tnt__layer_new(is_max ? &max_pool_ops : &avg_pool_ops, o->name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_max_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(true, pool_h, pool_w, opts);
}

tnt_layer *tnt_average_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(false, pool_h, pool_w, opts);
}
