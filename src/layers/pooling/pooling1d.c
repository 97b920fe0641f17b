/* pooling1d.c: MaxPooling1D, AveragePooling1D and GlobalAveragePooling1D (Keras) over NWC input
 * (batch, steps, c), in plain C like pooling.c and global_pooling.c.
 * MaxPooling1D: padding "same" is TensorFlow's, total = max((ceil(in/s)-1)*s + k - in, 0), the
 * extra step on the right; windows are clipped to the real steps, so a padded step never wins.
 * The argmax of each window (its index inside the window, first one on ties as TensorFlow) is
 * kept in the per-step workspace from forward to backward. AveragePooling1D shares the windows; its
 * mean is over the window's real steps (TensorFlow's avg_pool never counts padding) and needs no
 * workspace.
 * GlobalAveragePooling1D: (steps, c) -> (c), the mean of each channel (keepdims=False); with a
 * sequence mask (Masking, Embedding mask_zero) the mean of the kept steps, as Keras (0, not Keras's
 * 0/0, for a sample whose steps are all masked).
 * channels_first: (c, steps) of n samples is n * c single-channel sequences in memory
 * (tnt__channels_last_view), run by the same loops (each with its sample's mask).
 * Neither layer needs a plan. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

/* ---- MaxPooling1D and AveragePooling1D ---------------------------------------------------- */

typedef struct mp1_cfg {
    bool average; /* AveragePooling1D */
    int k, s;     /* pool size, stride */
    tnt_padding padding;
    int64_t iw, c, ow, pad_l; /* from build */
    int64_t planes; /* channels first: c = 1 and planes single-channel sequences per sample */
} mp1_cfg;

static tnt_status mp1_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    mp1_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 2)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s has rank %d (expected 2: steps, "
                          "channels)", l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0 || in.dim[1] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in, &c->planes);
    c->iw = v.dim[0];
    c->c = v.dim[1];
    if (c->padding == TNT_PADDING_SAME) {
        c->ow = (c->iw + c->s - 1) / c->s;
        c->pad_l = TNT_MAX((c->ow - 1) * c->s + c->k - c->iw, 0) / 2;
    } else {
        c->ow = c->iw >= c->k ? (c->iw - c->k) / c->s + 1 : 0;
        c->pad_l = 0;
    }
    if (c->ow <= 0)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s is smaller than pool_size %d with "
                          "padding \"valid\": output would be (%lld, %lld)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), c->k, (long long)c->ow,
                          (long long)(c->c * c->planes));
    *out = tnt__channels_first_shape(l, TNT_SHAPE(c->ow, c->c), c->planes);
    return TNT_OK;
}

/* The window of output step j: input steps [*w0, *w1), and the offset of w0 inside the
 * unclipped window. */
static void mp1_window(const mp1_cfg *c, int64_t j, int64_t *w0, int64_t *w1, int64_t *k0) {
    int64_t ws = j * c->s - c->pad_l;
    *w0 = TNT_MAX(ws, 0);
    *w1 = TNT_MIN(ws + c->k, c->iw);
    *k0 = *w0 - ws;
}

/* The window index of each maximum (uint16: pool_size is at most 65536); none for the mean. */
static size_t mp1_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    if (((const mp1_cfg *)l->priv)->average) return 0;
    return (size_t)(batch * tnt_shape_numel(l->out_shape)) * sizeof(uint16_t);
}

/* x: (batch, iw, C) -> y: (batch, ow, C); workspace arg: (batch, ow, C) */
static tnt_status mp1_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const mp1_cfg *c = l->priv;
    const int64_t C = c->c;
    uint16_t *arg = a->workspace;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a->batch * c->planes * c->ow; r++) {
        int64_t n = r / c->ow, j = r % c->ow, w0, w1, k0;
        mp1_window(c, j, &w0, &w1, &k0);
        float *yo = a->y + r * C;
        if (c->average) {
            memset(yo, 0, (size_t)C * sizeof(float));
            for (int64_t v = w0; v < w1; v++)
                for (int64_t ch = 0; ch < C; ch++) yo[ch] += a->x[(n * c->iw + v) * C + ch];
            for (int64_t ch = 0; ch < C; ch++) yo[ch] /= (float)(w1 - w0);
            continue;
        }
        uint16_t *ao = arg + r * C;
        for (int64_t v = w0; v < w1; v++) {
            const float *xi = a->x + (n * c->iw + v) * C;
            uint16_t k = (uint16_t)(v - w0 + k0);
            if (v == w0) {
                for (int64_t ch = 0; ch < C; ch++) yo[ch] = xi[ch], ao[ch] = k;
            } else {
                for (int64_t ch = 0; ch < C; ch++)
                    if (xi[ch] > yo[ch]) yo[ch] = xi[ch], ao[ch] = k;
            }
        }
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * c->planes * c->ow * C) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, ow, C), the workspace's argmax (or the window means) -> dx: (batch, iw, C); parallel over samples since
 * windows of one sample may overlap (stride < pool_size). */
static tnt_status mp1_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const mp1_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c;
    const uint16_t *arg = a->workspace;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch * c->planes; n++) {
        memset(a->dx + n * c->iw * C, 0, (size_t)(c->iw * C) * sizeof(float));
        for (int64_t j = 0; j < c->ow; j++) {
            int64_t w0, w1, k0;
            mp1_window(c, j, &w0, &w1, &k0);
            const float *go = a->dy + (n * c->ow + j) * C;
            if (c->average) {
                for (int64_t v = w0; v < w1; v++)
                    for (int64_t ch = 0; ch < C; ch++) a->dx[(n * c->iw + v) * C + ch] += go[ch] / (float)(w1 - w0);
                continue;
            }
            const uint16_t *ao = arg + (n * c->ow + j) * C;
            for (int64_t v = w0; v < w1; v++) {
                float *gi = a->dx + (n * c->iw + v) * C;
                uint16_t k = (uint16_t)(v - w0 + k0);
                for (int64_t ch = 0; ch < C; ch++) gi[ch] += ao[ch] == k ? go[ch] : 0.0f;
            }
        }
    }
    return TNT_OK;
}

static void priv_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status mp1_get_config(const tnt_layer *l, cJSON *c) {
    const mp1_cfg *p = l->priv;
    TNT_KJ_S(tnt__kj_add_ints(c, "pool_size", 1, &p->k));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(p->padding)));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 1, &p->s));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    return TNT_OK;
}

static tnt_layer *pool1d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    static const int two[1] = {2};
    tnt_layer_opts o = {.name = k->name};
    int ps = 0;
    TNT_KJ_READ(tnt__kj_sizes(c, "pool_size", false, 1, two, &ps, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "strides", false, 1, &ps, o.strides, k));
    TNT_KJ_READ(tnt__kj_padding(c, &o.padding, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    bool average = !strcmp(k->cls, "AveragePooling1D") || !strcmp(k->cls, "AvgPool1D");
    return tnt__kj_built(average ? tnt_average_pooling1d(ps, &o) : tnt_max_pooling1d(ps, &o), k);
}

static tnt_layer *gap1d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    TNT_KJ_READ(tnt__kj_want_bool(c, "keepdims", false, k));
    return tnt__kj_built(tnt_global_average_pooling1d(k->name), k);
}

/* on the device: pooling.cu's 2-D/3-D kernels with depth and height 1 (the same windows, first
 * maximum, order of additions and argmax workspace as the loops above) */
static tnt_k_pool mp1_geometry(const mp1_cfg *c, int64_t batch) {
    return (tnt_k_pool){.n = batch * c->planes, .c = c->c, .in = {1, 1, (int)c->iw}, .out = {1, 1, (int)c->ow},
                        .k = {1, 1, c->k}, .s = {1, 1, c->s}, .pad = {0, 0, (int)c->pad_l}};
}

static tnt_status mp1_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const mp1_cfg *c = l->priv;
    tnt_k_pool g = mp1_geometry(c, a->batch);
    const int64_t n = a->batch * tnt_shape_numel(l->out_shape);
    const float *x = a->x;
    float *y = a->y;
    unsigned short *arg = a->workspace;
    void *max_args[] = {&g, &x, &y, &arg}, *avg_args[] = {&g, &x, &y};
    tnt_status s = tnt__gpu_launch(c->average ? "tnt_k_avg_pool_fwd" : "tnt_k_max_pool_fwd", tnt__gpu_grid_for(n, 256),
                                   256, 0, c->average ? avg_args : max_args);
    if (s == TNT_OK && a->preact) s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status mp1_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const mp1_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    tnt_k_pool g = mp1_geometry(c, a->batch);
    const int64_t n = a->batch * tnt_shape_numel(l->in_shape); /* one thread per input cell */
    const float *dy = a->dy;
    float *dx = a->dx;
    const unsigned short *arg = a->workspace;
    void *max_args[] = {&g, &dy, &arg, &dx}, *avg_args[] = {&g, &dy, &dx};
    return tnt__gpu_launch(c->average ? "tnt_k_avg_pool_bwd" : "tnt_k_max_pool_bwd", tnt__gpu_grid_for(n, 256), 256, 0,
                           c->average ? avg_args : max_args);
}

static const tnt__gpu_ops mp1_gpu_ops = {
    .workspace_size = mp1_workspace_size, .forward = mp1_gpu_forward, .backward = mp1_gpu_backward};

#define POOL1D_OPS(var, cls)                                                                     \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                       \
        .from_config = pool1d_from_config,                                                       \
        .get_config = mp1_get_config,                                                            \
        .build = mp1_build,                                                                      \
        .workspace_size = mp1_workspace_size,                                                    \
        .forward = mp1_forward,                                                                  \
        .backward = mp1_backward,                                                                \
        .destroy = priv_destroy,                                                                 \
        .set_data_format = tnt__layer_take_data_format,                                          \
        .gpu = &mp1_gpu_ops,                                                                     \
    };
POOL1D_OPS(tnt__max_pooling1d_ops, "MaxPooling1D")
POOL1D_OPS(tnt__average_pooling1d_ops, "AveragePooling1D")

static tnt_layer *pool1d_new(const tnt__layer_ops *ops, int pool_size, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const char *cls = ops->class_name;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (pool_size <= 0 || pool_size > 65536) {
        tnt__error(TNT_ERR_ARG, "%s: pool_size %d (expected 1..65536)", cls, pool_size);
        return NULL;
    }
    if (o->strides[0] < 0) {
        tnt__error(TNT_ERR_ARG, "%s: strides %d (expected > 0, or 0 for the default "
                   "pool_size)", cls, o->strides[0]);
        return NULL;
    }
    if (o->padding != TNT_PADDING_VALID && o->padding != TNT_PADDING_SAME) {
        tnt__error(TNT_ERR_ARG, "%s: padding %d (expected TNT_PADDING_VALID or "
                   "TNT_PADDING_SAME)", cls, (int)o->padding);
        return NULL;
    }
    /* Keras pooling layers have no activation and no dilation: refuse rather than ignore. */
    if (o->activation != TNT_ACT_LINEAR) {
        tnt__error(TNT_ERR_ARG, "%s: activation %d (pooling has no activation; expected "
                   "TNT_ACT_LINEAR)", cls, (int)o->activation);
        return NULL;
    }
    if (o->dilation[0] > 1 || o->dilation[0] < 0) {
        tnt__error(TNT_ERR_ARG, "%s: dilation %d (pooling has no dilation; expected 0 or 1)",
                   cls, o->dilation[0]);
        return NULL;
    }
    mp1_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (mp1_cfg){.average = ops == &tnt__average_pooling1d_ops, .k = pool_size, .s = o->strides[0] ? o->strides[0] : pool_size,
                   .padding = o->padding};
    tnt_layer *l = tnt__layer_new(ops, o->name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_max_pooling1d(int pool_size, const tnt_layer_opts *opts) {
    return pool1d_new(&tnt__max_pooling1d_ops, pool_size, opts);
}

tnt_layer *tnt_average_pooling1d(int pool_size, const tnt_layer_opts *opts) {
    return pool1d_new(&tnt__average_pooling1d_ops, pool_size, opts);
}

/* ---- GlobalAveragePooling1D --------------------------------------------------------------- */

typedef struct gap1_cfg {
    int64_t w, c; /* from build */
    int64_t planes; /* channels first: c = 1 and planes single-channel sequences per sample */
} gap1_cfg;

/* in[0]: (steps, channels); in[1], when the graph appends the sequence mask: (steps) */
static tnt_status gap1_build_multi(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    gap1_cfg *c = l->priv;
    char b[96];
    if (in[0].ndim != 2)
        return tnt__error(TNT_ERR_SHAPE,
                          "GlobalAveragePooling1D \"%s\": input shape %s has rank %d (expected 2: "
                          "steps, channels)", l->name, tnt_shape_str(in[0], b, sizeof b), in[0].ndim);
    if (in[0].dim[0] <= 0 || in[0].dim[1] <= 0)
        return tnt__error(TNT_ERR_SHAPE,
                          "GlobalAveragePooling1D \"%s\": input shape %s has an empty dimension",
                          l->name, tnt_shape_str(in[0], b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in[0], &c->planes);
    if (n > 2 || (n == 2 && !tnt__shape_equal(in[1], TNT_SHAPE(v.dim[0]))))
        return tnt__error(TNT_ERR_SHAPE, "GlobalAveragePooling1D \"%s\": %d inputs (expected the input and at "
                          "most its sequence mask of shape (%lld,))", l->name, n, (long long)v.dim[0]);
    c->w = v.dim[0];
    c->c = v.dim[1];
    *out = TNT_SHAPE(c->c * c->planes);
    return TNT_OK;
}

static tnt_status gap1_build(tnt_layer *l, tnt_shape in, tnt_shape *out) { return gap1_build_multi(l, 1, &in, out); }

/* The weight of step p of sample n in the mean: 1/W, or mask/kept with a sequence mask. */
static void gap1_step_weights(const gap1_cfg *c, const float *mask, int64_t n, float *weight) {
    const int64_t W = c->w;
    if (!mask) {
        for (int64_t p = 0; p < W; p++) weight[p] = 1.0f / (float)W;
        return;
    }
    float kept = 0;
    for (int64_t p = 0; p < W; p++) kept += mask[n * W + p];
    for (int64_t p = 0; p < W; p++) weight[p] = kept > 0 ? mask[n * W + p] / kept : 0.0f;
}

static const float *gap1_mask(int n_inputs, const float *const *xs) { return n_inputs > 1 && xs ? xs[1] : NULL; }

/* x: (n, w, C) for n = batch * planes, mask (batch, w) or none -> y: (n, C) */
static tnt_status gap1_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const gap1_cfg *c = l->priv;
    const int64_t C = c->c, W = c->w, n_img = a->batch * c->planes;
    const float *mask = gap1_mask(a->n_inputs, a->xs);
    float *weights = tnt__calloc((size_t)(n_img * W), sizeof(float));
    if (!weights) return TNT_ERR_NOMEM;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        const float *xs = a->x + n * W * C;
        float *yo = a->y + n * C, *wt = weights + n * W;
        gap1_step_weights(c, mask, n / c->planes, wt);
        if (!mask) { /* Keras's order without a mask: the sum, then / W */
            memcpy(yo, xs, (size_t)C * sizeof(float));
            for (int64_t p = 1; p < W; p++)
                for (int64_t ch = 0; ch < C; ch++) yo[ch] += xs[p * C + ch];
            for (int64_t ch = 0; ch < C; ch++) yo[ch] *= wt[0];
            continue;
        }
        memset(yo, 0, (size_t)C * sizeof(float));
        for (int64_t p = 0; p < W; p++)
            for (int64_t ch = 0; ch < C; ch++) yo[ch] += xs[p * C + ch] * wt[p];
    }
    free(weights);
    if (a->preact) memcpy(a->preact, a->y, (size_t)(n_img * C) * sizeof(float));
    return TNT_OK;
}

/* dy: (n, C) -> dx: (n, w, C), dy times each step's weight; the mask's gradient is 0 */
static tnt_status gap1_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const gap1_cfg *c = l->priv;
    const int64_t C = c->c, W = c->w, n_img = a->batch * c->planes;
    const float *mask = gap1_mask(a->n_inputs, a->xs);
    if (mask && a->dxs && a->dxs[1]) memset(a->dxs[1], 0, (size_t)(a->batch * W) * sizeof(float));
    if (!a->dx) return TNT_OK;
    float *weights = tnt__calloc((size_t)(n_img * W), sizeof(float));
    if (!weights) return TNT_ERR_NOMEM;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        const float *go = a->dy + n * C;
        float *gi = a->dx + n * W * C, *wt = weights + n * W;
        gap1_step_weights(c, mask, n / c->planes, wt);
        for (int64_t p = 0; p < W; p++)
            for (int64_t ch = 0; ch < C; ch++) gi[p * C + ch] = go[ch] * wt[p];
    }
    free(weights);
    return TNT_OK;
}

static tnt_status gap1_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ(cJSON_AddBoolToObject(c, "keepdims", false));
    return TNT_OK;
}

/* ---- on the device, without a sequence mask: tnt_k_global_pool_fwd / _avg_pool_bwd (the sum in
 * step order, then times 1/W, as above) ------------------------------------------------------- */

#define GPU_BLOCK 256

static bool gap1_gpu_supported(const tnt_layer *l, const char **why) {
    if (l->n_inputs <= 1 && !l->mask_input) return true;
    *why = "a sequence mask has no device path yet";
    return false;
}

static tnt_status gap1_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const gap1_cfg *c = l->priv;
    long long n = a->batch * c->planes, W = c->w, C = c->c;
    int is_max = 0;
    void *args[] = {(void *)&a->x, (void *)&a->y, &n, &W, &C, &is_max};
    tnt_status s = tnt__gpu_launch("tnt_k_global_pool_fwd", tnt__gpu_grid_for(n * C, GPU_BLOCK), GPU_BLOCK, 0, args);
    if (s == TNT_OK && a->preact)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(n * C) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status gap1_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const gap1_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    long long n = a->batch * c->planes, W = c->w, C = c->c;
    void *args[] = {(void *)&a->dy, (void *)&a->dx, &n, &W, &C};
    return tnt__gpu_launch("tnt_k_global_avg_pool_bwd", tnt__gpu_grid_for(n * W * C, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static const tnt__gpu_ops gap1_gpu_ops = {
    .supported = gap1_gpu_supported,
    .forward = gap1_gpu_forward,
    .backward = gap1_gpu_backward,
};

const tnt__layer_ops tnt__global_average_pooling1d_ops = {
    .class_name = "GlobalAveragePooling1D",
    .from_config = gap1d_from_config,
    .get_config = gap1_get_config,
    .build = gap1_build,
    .build_multi = gap1_build_multi,
    .forward = gap1_forward,
    .backward = gap1_backward,
    .destroy = priv_destroy,
    .consumes_mask = true,
    .set_data_format = tnt__layer_take_data_format,
    .gpu = &gap1_gpu_ops,
};

tnt_layer *tnt_global_average_pooling1d(const char *name) {
    gap1_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    tnt_layer *l = tnt__layer_new(&tnt__global_average_pooling1d_ops, name, c);
    if (!l) free(c);
    return l;
}
