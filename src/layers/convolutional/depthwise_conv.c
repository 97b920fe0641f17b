/* depthwise_conv.c: Keras DepthwiseConv2D and SeparableConv2D on the Conv2D engine (conv2d.h).
 *
 * DepthwiseConv2D is a grouped convolution with groups = in_channels and filters =
 * in_channels * depth_multiplier: output channel c * dm + m reads input channel c only. Keras's
 * depthwise_kernel (kh, kw, c, dm) has exactly the memory of the grouped HWIO kernel
 * (kh, kw, 1, c * dm), oneDNN's hwigo, so the Conv2D plans run it unchanged: NHWC activations,
 * the kernel reordered once per step into oneDNN's preferred (blocked) layout, the fused
 * activation of fused.c, TensorFlow's "same" padding.
 *
 * data_format channels_first: the engine's NCHW descriptors (conv2d.c); the kernels are the same.
 *
 * SeparableConv2D is two inner layers: a DepthwiseConv2D (no bias, no activation) and a 1x1
 * Conv2D (the bias and the activation). Its weights depthwise_kernel, pointwise_kernel
 * (1, 1, c * dm, filters) and bias are the views the model gives it; the inner layers' weights
 * point at them for each step. The depthwise output lives in the workspace from forward to
 * backward, with its gradient after it:
 *   [pointwise workspace (fused activation)][depthwise workspace][mid][dmid], each 64-aligned. */
#include "layers/convolutional/conv2d.h"
#include "layers/keras_config.h"

#include <limits.h>
#include <stdio.h>

typedef struct dw_cfg {
    tnt__conv_cfg conv; /* first: the engine reads l->priv as its configuration */
    int dm;             /* depth_multiplier */
} dw_cfg;

/* ---- DepthwiseConv2D ---------------------------------------------------------------------- */

/* Checks in (messages name class cls and layer name), sets the geometry of l's engine and
 * declares its depthwise_kernel and bias; *out = (oh, ow, c * dm). */
static tnt_status dw_build_as(tnt_layer *l, const char *cls, const char *name, tnt_shape in,
                              tnt_shape *out) {
    dw_cfg *d = l->priv;
    tnt__conv_cfg *c = &d->conv;
    char b[96];
    int64_t sp[2] = {0};
    tnt_status s = tnt__conv_input(l, cls, in, 2, sp, &c->ic);
    if (s != TNT_OK) return s;
    if (c->ic > INT_MAX / d->dm)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": %lld channels times depth_multiplier %d "
                          "(expected at most %d output channels)", cls, name, (long long)c->ic,
                          d->dm, INT_MAX);
    c->channels_first = l->channels_first;
    c->ih = sp[0];
    c->iw = sp[1];
    c->groups = (int)c->ic;
    c->filters = (int)c->ic * d->dm;
    if (!tnt__conv_axis(c->ih, c->kh, c->sh, c->dh, c->padding, &c->oh, &c->pad_t, &c->pad_b) ||
        !tnt__conv_axis(c->iw, c->kw, c->sw, c->dw, c->padding, &c->ow, &c->pad_l, &c->pad_r))
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s is smaller than the kernel (%d, %d) with "
                          "dilation (%d, %d) and padding \"valid\": output would be (%lld, %lld, %d)",
                          cls, name, tnt_shape_str(in, b, sizeof b), c->kh, c->kw, c->dh, c->dw,
                          (long long)c->oh, (long long)c->ow, c->filters);
    /* Keras's fans for the kernel shape (kh, kw, c, dm): receptive field kh * kw */
    int64_t k2 = (int64_t)c->kh * c->kw;
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "depthwise_kernel", TNT_SHAPE(c->kh, c->kw, c->ic, d->dm), c->kernel_init,
                              k2 * c->ic, k2 * d->dm) < 0)
        return TNT_ERR_ARG;
    if (c->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(c->filters), c->bias_init, 0, 0) < 0)
        return TNT_ERR_ARG;
    *out = tnt__conv_output(l, 2, (int64_t[]){c->oh, c->ow}, c->filters);
    return TNT_OK;
}

static tnt_status dw_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    return dw_build_as(l, l->ops->class_name, l->name, in, out);
}

static void free_priv(tnt_layer *l) { free(l->priv); }

/* Keras DepthwiseConv2D: Conv2D's keys less filters and kernel_*, plus depth_multiplier and
 * depthwise_* (in Keras's order). */
static tnt_status dw_get_config(const tnt_layer *l, cJSON *c) {
    const dw_cfg *d = l->priv;
    const tnt__conv_cfg *k = &d->conv;
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", 2, (int[]){k->kh, k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 2, (int[]){k->sh, k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", 2, (int[]){k->dh, k->dw}));
    TNT_KJ(cJSON_AddNumberToObject(c, "groups", 1));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->bias_init));
    static const char *const nulls[] = {"bias_regularizer", "activity_regularizer", "bias_constraint", NULL};
    TNT_KJ_S(tnt__kj_add_nulls(c, nulls));
    TNT_KJ(cJSON_AddNumberToObject(c, "depth_multiplier", d->dm));
    TNT_KJ_S(tnt__kj_add_initializer(c, "depthwise_initializer", k->kernel_init));
    static const char *const dnulls[] = {"depthwise_regularizer", "depthwise_constraint", NULL};
    return tnt__kj_add_nulls(c, dnulls);
}

static tnt_layer *depthwise_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int ks[2] = {0}, dm = 0;
    TNT_KJ_READ(tnt__conv_read_config(c, 2, ks, &o, k));
    TNT_KJ_READ(tnt__kj_int(c, "depth_multiplier", false, 1, &dm, k));
    TNT_KJ_READ(tnt__kj_init(c, "depthwise_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    static const char *const nulls[] = {"depthwise_regularizer", "depthwise_constraint", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    if (dm <= 0)
        return tnt__kj_fail(k, TNT_ERR_ARG, "depth_multiplier %d (expected > 0)", dm);
    return tnt__kj_built(tnt_depthwise_conv2d(ks[0], ks[1], dm, &o), k);
}

static tnt_layer *separable_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[2] = {0}, dm = 0;
    tnt_initializer dwi, pwi;
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__conv_read_config(c, 2, ks, &o, k));
    TNT_KJ_READ(tnt__kj_int(c, "depth_multiplier", false, 1, &dm, k));
    TNT_KJ_READ(tnt__kj_init(c, "depthwise_initializer", TNT_INIT_GLOROT_UNIFORM, &dwi, k));
    TNT_KJ_READ(tnt__kj_init(c, "pointwise_initializer", TNT_INIT_GLOROT_UNIFORM, &pwi, k));
    static const char *const nulls[] = {"depthwise_regularizer", "pointwise_regularizer", "depthwise_constraint",
                                        "pointwise_constraint", "kernel_regularizer", "kernel_constraint", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    if (dwi != pwi)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED,
                            "depthwise_initializer and pointwise_initializer differ (only one initializer "
                            "for both kernels is supported)");
    if (dm <= 0)
        return tnt__kj_fail(k, TNT_ERR_ARG, "depth_multiplier %d (expected > 0)", dm);
    o.kernel_initializer = dwi;
    return tnt__kj_built(tnt_separable_conv2d(filters, ks[0], ks[1], dm, &o), k);
}

const tnt__layer_ops tnt__depthwise_conv2d_ops = {
    .class_name = "DepthwiseConv2D",
    .from_config = depthwise_from_config,
    .get_config = dw_get_config,
    .build = dw_build,
    .plan_create = tnt__conv_plan_create,
    .plan_destroy = tnt__conv_plan_destroy,
    .workspace_size = tnt__conv_workspace_size,
    .forward = tnt__conv_forward,
    .backward = tnt__conv_backward,
    .destroy = free_priv,
    .set_data_format = tnt__layer_take_data_format,
    .gpu = &tnt__conv2d_device_ops, /* the direct kernels (groups): conv2d_gemm_gpu.c */
};

/* The argument checks both constructors share; fills the engine configuration. */
static tnt_status dw_args(const char *cls, int kh, int kw, int dm, const tnt_layer_opts *o,
                          tnt__conv_cfg *c) {
    if (kh <= 0 || kw <= 0)
        return tnt__error(TNT_ERR_ARG, "%s: kernel_size (%d, %d) (expected > 0)", cls, kh, kw);
    if (dm < 0)
        return tnt__error(TNT_ERR_ARG, "%s: depth_multiplier %d (expected > 0, or 0 for the default 1)",
                          cls, dm);
    if (o->strides[0] < 0 || o->strides[1] < 0)
        return tnt__error(TNT_ERR_ARG, "%s: strides (%d, %d) (expected > 0, or 0 for the default 1)", cls,
                          o->strides[0], o->strides[1]);
    if (o->dilation[0] < 0 || o->dilation[1] < 0)
        return tnt__error(TNT_ERR_ARG, "%s: dilation_rate (%d, %d) (expected > 0, or 0 for the default 1)",
                          cls, o->dilation[0], o->dilation[1]);
    *c = (tnt__conv_cfg){.kh = kh, .kw = kw,
                         .sh = o->strides[0] ? o->strides[0] : 1, .sw = o->strides[1] ? o->strides[1] : 1,
                         .dh = o->dilation[0] ? o->dilation[0] : 1, .dw = o->dilation[1] ? o->dilation[1] : 1};
    return tnt__conv_opts(cls, c, o); /* strides with dilation, padding, activation, initializers */
}

tnt_layer *tnt_depthwise_conv2d(int kernel_h, int kernel_w, int depth_multiplier, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    tnt__conv_cfg cfg;
    if (dw_args("DepthwiseConv2D", kernel_h, kernel_w, depth_multiplier, o, &cfg) != TNT_OK) return NULL;
    dw_cfg *d = tnt__calloc(1, sizeof *d);
    if (!d) return NULL;
    d->conv = cfg;
    d->dm = depth_multiplier ? depth_multiplier : 1;
    tnt_layer *l = tnt__layer_new(&tnt__depthwise_conv2d_ops, o->name, d);
    if (!l) {
        free(d);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}

/* ---- SeparableConv2D ---------------------------------------------------------------------- */

typedef struct sep_cfg {
    int filters, dm;
    bool use_bias;
    tnt_initializer kernel_init, bias_init; /* kernel_init: depthwise and pointwise kernels */
    tnt_layer *dw; /* DepthwiseConv2D: strides, padding, dilation; no bias, linear */
    tnt_layer *pw; /* Conv2D 1x1: bias, activation */
} sep_cfg;

typedef struct sep_plan {
    void *dw, *pw;
    size_t dw_off, mid_off, dmid_off, size; /* workspace layout (bytes) */
} sep_plan;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static tnt_status sep_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    sep_cfg *s = l->priv;
    tnt_status status;
    tnt_shape mid;
    /* the inner layers carry the outer name in their runtime messages */
    snprintf(s->dw->name, sizeof s->dw->name, "%s", l->name);
    snprintf(s->pw->name, sizeof s->pw->name, "%s", l->name);
    if ((status = dw_build_as(s->dw, "SeparableConv2D", l->name, in, &mid)) != TNT_OK) return status;
    s->dw->in_shape = in;
    s->dw->out_shape = mid;
    if ((status = s->pw->ops->build(s->pw, mid, out)) != TNT_OK) return status;
    s->pw->in_shape = mid;
    s->pw->out_shape = *out;
    const tnt__conv_cfg *c = &((dw_cfg *)s->dw->priv)->conv;
    int64_t k2 = (int64_t)c->kh * c->kw, cm = c->filters; /* c * dm */
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "depthwise_kernel", TNT_SHAPE(c->kh, c->kw, c->ic, s->dm), s->kernel_init,
                              k2 * c->ic, k2 * s->dm) < 0 ||
        tnt__layer_add_weight(l, "pointwise_kernel", TNT_SHAPE(1, 1, cm, s->filters), s->kernel_init, cm,
                              s->filters) < 0 ||
        (s->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(s->filters), s->bias_init, 0, 0) < 0))
        return TNT_ERR_ARG;
    return TNT_OK;
}

static void sep_plan_destroy(void *plan) {
    sep_plan *p = plan;
    if (!p) return;
    if (p->dw) tnt__conv_plan_destroy(p->dw);
    if (p->pw) tnt__conv_plan_destroy(p->pw);
    free(p);
}

static void *sep_plan_create(tnt_layer *l, int64_t batch) {
    sep_cfg *s = l->priv;
    sep_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    if (!(p->dw = tnt__conv_plan_create(s->dw, batch)) || !(p->pw = tnt__conv_plan_create(s->pw, batch))) {
        sep_plan_destroy(p);
        return NULL;
    }
    size_t mid = (size_t)(batch * tnt_shape_numel(s->dw->out_shape)) * sizeof(float);
    p->dw_off = align64(tnt__conv_workspace_size(s->pw, p->pw, batch));
    p->mid_off = p->dw_off + align64(tnt__conv_workspace_size(s->dw, p->dw, batch));
    p->dmid_off = p->mid_off + align64(mid);
    p->size = p->dmid_off + mid;
    return p;
}

static size_t sep_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)batch;
    return ((sep_plan *)plan)->size;
}

/* Points the inner layers' weights at this layer's views (the model may move them between
 * steps, e.g. when it reloads parameters). */
static void sep_bind(tnt_layer *l) {
    sep_cfg *s = l->priv;
    s->dw->weights[0].value = l->weights[0].value;
    s->dw->weights[0].grad = l->weights[0].grad;
    s->pw->weights[0].value = l->weights[1].value;
    s->pw->weights[0].grad = l->weights[1].grad;
    if (s->use_bias) {
        s->pw->weights[1].value = l->weights[2].value;
        s->pw->weights[1].grad = l->weights[2].grad;
    }
}

/* x: (batch, h, w, c) -> mid (batch, oh, ow, c * dm) -> y, preact: (batch, oh, ow, filters) */
static tnt_status sep_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    sep_cfg *s = l->priv;
    sep_plan *p = plan;
    char *ws = a->workspace;
    float *mid = (float *)(ws + p->mid_off);
    const float *cmid = mid;
    tnt_status status;
    sep_bind(l);
    tnt__fwd_args da = *a;
    da.n_inputs = 1, da.xs = &a->x;
    da.y = mid, da.preact = NULL, da.workspace = ws + p->dw_off;
    if ((status = tnt__conv_forward(s->dw, p->dw, &da)) != TNT_OK) return status;
    tnt__fwd_args pa = *a;
    pa.x = cmid, pa.n_inputs = 1, pa.xs = &cmid, pa.workspace = ws;
    return tnt__conv_forward(s->pw, p->pw, &pa);
}

/* dy (or dpre) -> dmid, pointwise_kernel and bias gradients -> dx and depthwise_kernel gradient */
static tnt_status sep_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    sep_cfg *s = l->priv;
    sep_plan *p = plan;
    char *ws = a->workspace;
    const float *mid = (float *)(ws + p->mid_off);
    float *dmid = (float *)(ws + p->dmid_off);
    tnt_status status;
    sep_bind(l);
    tnt__bwd_args pb = *a;
    pb.x = mid, pb.n_inputs = 1, pb.xs = &mid, pb.dx = dmid, pb.dxs = &dmid, pb.workspace = ws;
    if ((status = tnt__conv_backward(s->pw, p->pw, &pb)) != TNT_OK) return status;
    float *dx = a->dx;
    tnt__bwd_args db = *a;
    db.n_inputs = 1, db.xs = &a->x, db.dxs = &dx;
    db.y = mid, db.dy = dmid, db.dy_is_preact = false, db.workspace = ws + p->dw_off;
    return tnt__conv_backward(s->dw, p->dw, &db);
}

static void sep_destroy(tnt_layer *l) {
    sep_cfg *s = l->priv;
    if (!s) return;
    tnt_layer_free(s->dw);
    tnt_layer_free(s->pw);
    free(s);
}

/* Keras SeparableConv2D: Conv2D's keys, then depth_multiplier and the depthwise and pointwise
 * keys. */
static tnt_status sep_get_config(const tnt_layer *l, cJSON *c) {
    const sep_cfg *s = l->priv;
    const tnt__conv_cfg *k = &((const dw_cfg *)s->dw->priv)->conv;
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", s->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", 2, (int[]){k->kh, k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 2, (int[]){k->sh, k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", 2, (int[]){k->dh, k->dw}));
    TNT_KJ(cJSON_AddNumberToObject(c, "groups", 1));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", s->use_bias));
    /* Keras leaves Conv's kernel_initializer at its default; the kernels use the two below */
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", s->bias_init));
    TNT_KJ_S(tnt__kj_add_nulls(c, tnt__kj_kernel_nulls));
    TNT_KJ(cJSON_AddNumberToObject(c, "depth_multiplier", s->dm));
    TNT_KJ_S(tnt__kj_add_initializer(c, "depthwise_initializer", s->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "pointwise_initializer", s->kernel_init));
    static const char *const nulls[] = {"depthwise_regularizer", "pointwise_regularizer", "depthwise_constraint",
                                        "pointwise_constraint", NULL};
    return tnt__kj_add_nulls(c, nulls);
}

/* The format of both inner layers too: the depthwise output stays in it between them. */
static tnt_status sep_set_data_format(tnt_layer *l, bool channels_first) {
    sep_cfg *s = l->priv;
    l->channels_first = s->dw->channels_first = s->pw->channels_first = channels_first;
    return TNT_OK;
}

const tnt__layer_ops tnt__separable_conv2d_ops = {
    .class_name = "SeparableConv2D",
    .from_config = separable_from_config,
    .get_config = sep_get_config,
    .build = sep_build,
    .plan_create = sep_plan_create,
    .plan_destroy = sep_plan_destroy,
    .workspace_size = sep_workspace_size,
    .forward = sep_forward,
    .backward = sep_backward,
    .destroy = sep_destroy,
    .set_data_format = sep_set_data_format,
};

tnt_layer *tnt_separable_conv2d(int filters, int kernel_h, int kernel_w, int depth_multiplier,
                                const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (filters <= 0) {
        tnt__error(TNT_ERR_ARG, "SeparableConv2D: filters %d (expected > 0)", filters);
        return NULL;
    }
    tnt__conv_cfg cfg;
    if (dw_args("SeparableConv2D", kernel_h, kernel_w, depth_multiplier, o, &cfg) != TNT_OK) return NULL;
    sep_cfg *s = tnt__calloc(1, sizeof *s);
    if (!s) return NULL;
    s->filters = filters;
    s->dm = depth_multiplier ? depth_multiplier : 1;
    s->use_bias = cfg.use_bias;
    s->kernel_init = cfg.kernel_init;
    s->bias_init = cfg.bias_init;
    tnt_layer_opts dwo = {.strides = {cfg.sh, cfg.sw}, .dilation = {cfg.dh, cfg.dw}, .padding = o->padding,
                          .no_bias = true};
    tnt_layer_opts pwo = {.activation = o->activation, .activation_alpha = o->activation_alpha,
                          .no_bias = o->no_bias};
    tnt_layer *l = NULL;
    if (!(s->dw = tnt_depthwise_conv2d(kernel_h, kernel_w, s->dm, &dwo)) ||
        !(s->pw = tnt_conv2d(filters, 1, 1, &pwo)) || !(l = tnt__layer_new(&tnt__separable_conv2d_ops, o->name, s))) {
        tnt_layer_free(s->dw);
        tnt_layer_free(s->pw);
        free(s);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}
