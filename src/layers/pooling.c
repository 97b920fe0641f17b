/* pooling.c: MaxPooling2D and AveragePooling2D (Keras) over NHWC input, in plain C.
 * Padding "same" is TensorFlow's: total = max((ceil(in/s)-1)*s + k - in, 0), the extra row/column
 * at the bottom/right; padded cells never win a max, and an average divides by the number of
 * real cells only (as oneDNN's pooling_avg_exclude_padding and TensorFlow).
 * Max pooling keeps the argmax of each window from forward to backward in the layer's per-step
 * workspace, so backward needs neither x nor y.
 * Why not oneDNN pooling: its 2.6 jit kernels took 1.9 / 1.8 ms (fwd / bwd) for LeNet-5's
 * 2x2 max pool of 64x28x28x20 at 1 thread, the loops below 0.45 / 0.65 ms (and 0.9 / 1.0 against
 * 0.2 / 0.35 ms for 64x14x14x50): these layers are memory-bound and the loops touch each byte
 * once. No plan is needed. */
#include "layers/keras_config.h"
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

/* ---- kernels ------------------------------------------------------------------------------
 * Windows are clipped to the real cells, which gives TensorFlow's "same" semantics: a padded
 * cell never wins a max and is not counted in an average. The channel loops are contiguous in
 * NHWC and vectorize. Forward parallelizes over output rows; backward over samples, since the
 * windows of one sample may overlap (stride < pool size) and add into the same dx cells. */

/* The window of output (i, j): rows [*h0, *h1), cols [*w0, *w1) of the input, and the offset of
 * (h0, w0) inside the unclipped window (for the max index). */
typedef struct pool_win {
    int64_t h0, h1, w0, w1, kh0, kw0;
} pool_win;

static pool_win window(const pool_cfg *c, int64_t i, int64_t j) {
    int64_t hs = i * c->sh - c->pad_t, ws = j * c->sw - c->pad_l;
    pool_win w = {.h0 = TNT_MAX(hs, 0), .h1 = TNT_MIN(hs + c->ph, c->ih),
                  .w0 = TNT_MAX(ws, 0), .w1 = TNT_MIN(ws + c->pw, c->iw)};
    w.kh0 = w.h0 - hs;
    w.kw0 = w.w0 - ws;
    return w;
}

/* x: (batch, ih, iw, C) -> y: (batch, oh, ow, C); arg: (batch, oh, ow, C), the index kh*pw+kw of
 * each maximum inside its window (the first one on ties, as oneDNN and TensorFlow). */
static void max_forward(const pool_cfg *c, int64_t batch, const float *x, float *y, uint16_t *arg) {
    const int64_t C = c->c;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < batch * c->oh; r++) {
        int64_t n = r / c->oh, i = r % c->oh;
        for (int64_t j = 0; j < c->ow; j++) {
            pool_win w = window(c, i, j);
            float *yo = y + ((r * c->ow) + j) * C;
            uint16_t *ao = arg + ((r * c->ow) + j) * C;
            bool first = true;
            for (int64_t h = w.h0; h < w.h1; h++)
                for (int64_t v = w.w0; v < w.w1; v++) {
                    const float *xi = x + ((n * c->ih + h) * c->iw + v) * C;
                    uint16_t k = (uint16_t)((h - w.h0 + w.kh0) * c->pw + (v - w.w0 + w.kw0));
                    if (first) {
                        for (int64_t ch = 0; ch < C; ch++) yo[ch] = xi[ch], ao[ch] = k;
                        first = false;
                    } else {
                        /* unconditional stores: vectorized with AVX2 blends too, where the
                         * conditional ones needed AVX-512's masked stores (2.5x slower without) */
                        for (int64_t ch = 0; ch < C; ch++) {
                            bool gt = xi[ch] > yo[ch];
                            yo[ch] = gt ? xi[ch] : yo[ch];
                            ao[ch] = gt ? k : ao[ch];
                        }
                    }
                }
        }
    }
}

/* dy: (batch, oh, ow, C), arg from max_forward -> dx: (batch, ih, iw, C) */
static void max_backward(const pool_cfg *c, int64_t batch, const float *dy, const uint16_t *arg,
                         float *dx) {
    const int64_t C = c->c, in_sample = c->ih * c->iw * C;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < batch; n++) {
        memset(dx + n * in_sample, 0, (size_t)in_sample * sizeof(float));
        for (int64_t i = 0; i < c->oh; i++)
            for (int64_t j = 0; j < c->ow; j++) {
                pool_win w = window(c, i, j);
                int64_t o = ((n * c->oh + i) * c->ow + j) * C;
                const float *go = dy + o;
                const uint16_t *ao = arg + o;
                for (int64_t h = w.h0; h < w.h1; h++)
                    for (int64_t v = w.w0; v < w.w1; v++) {
                        float *gi = dx + ((n * c->ih + h) * c->iw + v) * C;
                        uint16_t k = (uint16_t)((h - w.h0 + w.kh0) * c->pw + (v - w.w0 + w.kw0));
                        for (int64_t ch = 0; ch < C; ch++) gi[ch] += ao[ch] == k ? go[ch] : 0.0f;
                    }
            }
    }
}

/* x: (batch, ih, iw, C) -> y: (batch, oh, ow, C), the mean over the real cells of each window */
static void avg_forward(const pool_cfg *c, int64_t batch, const float *x, float *y) {
    const int64_t C = c->c;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < batch * c->oh; r++) {
        int64_t n = r / c->oh, i = r % c->oh;
        for (int64_t j = 0; j < c->ow; j++) {
            pool_win w = window(c, i, j);
            float *yo = y + ((r * c->ow) + j) * C;
            for (int64_t ch = 0; ch < C; ch++) yo[ch] = 0.0f;
            for (int64_t h = w.h0; h < w.h1; h++)
                for (int64_t v = w.w0; v < w.w1; v++) {
                    const float *xi = x + ((n * c->ih + h) * c->iw + v) * C;
                    for (int64_t ch = 0; ch < C; ch++) yo[ch] += xi[ch];
                }
            float inv = 1.0f / (float)((w.h1 - w.h0) * (w.w1 - w.w0));
            for (int64_t ch = 0; ch < C; ch++) yo[ch] *= inv;
        }
    }
}

/* dy: (batch, oh, ow, C) -> dx: (batch, ih, iw, C) */
static void avg_backward(const pool_cfg *c, int64_t batch, const float *dy, float *dx) {
    const int64_t C = c->c, in_sample = c->ih * c->iw * C;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < batch; n++) {
        memset(dx + n * in_sample, 0, (size_t)in_sample * sizeof(float));
        for (int64_t i = 0; i < c->oh; i++)
            for (int64_t j = 0; j < c->ow; j++) {
                pool_win w = window(c, i, j);
                const float *go = dy + ((n * c->oh + i) * c->ow + j) * C;
                float inv = 1.0f / (float)((w.h1 - w.h0) * (w.w1 - w.w0));
                for (int64_t h = w.h0; h < w.h1; h++)
                    for (int64_t v = w.w0; v < w.w1; v++) {
                        float *gi = dx + ((n * c->ih + h) * c->iw + v) * C;
                        for (int64_t ch = 0; ch < C; ch++) gi[ch] += go[ch] * inv;
                    }
            }
    }
}

/* ---- layer ops ---------------------------------------------------------------------------- */

/* Max pooling keeps the window index of each output's maximum (uint16) until backward. */
static size_t max_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return (size_t)(batch * tnt_shape_numel(l->out_shape)) * sizeof(uint16_t);
}

/* x: (batch, ih, iw, c) -> y: (batch, oh, ow, c) */
static tnt_status pool_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    if (c->is_max) max_forward(c, a->batch, a->x, a->y, a->workspace);
    else avg_forward(c, a->batch, a->x, a->y);
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, oh, ow, c) -> dx: (batch, ih, iw, c), or nothing when dx is NULL (no weights) */
static tnt_status pool_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    if (c->is_max) max_backward(c, a->batch, a->dy, a->workspace, a->dx);
    else avg_backward(c, a->batch, a->dy, a->dx);
    return TNT_OK;
}

/* ---- constructors ------------------------------------------------------------------------- */

static void pool_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status pool_get_config(const tnt_layer *l, cJSON *c) {
    const pool_cfg *p = l->priv;
    TNT_KJ_S(tnt__kj_add_ints(c, "pool_size", 2, (int[]){p->ph, p->pw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(p->padding)));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 2, (int[]){p->sh, p->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "data_format", "channels_last"));
    return TNT_OK;
}

static tnt_layer *pool2d_from_config(const cJSON *c, const tnt__kj_ctx *k, bool is_max) {
    static const int two[2] = {2, 2};
    tnt_layer_opts o = {.name = k->name};
    int ps[2] = {0};
    TNT_KJ_READ(tnt__kj_sizes(c, "pool_size", false, 2, two, ps, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "strides", false, 2, ps, o.strides, k));
    TNT_KJ_READ(tnt__kj_padding(c, &o.padding, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    return tnt__kj_built(is_max ? tnt_max_pooling2d(ps[0], ps[1], &o) : tnt_average_pooling2d(ps[0], ps[1], &o), k);
}

static tnt_layer *max_pool2d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return pool2d_from_config(c, k, true);
}

static tnt_layer *avg_pool2d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return pool2d_from_config(c, k, false);
}

const tnt__layer_ops tnt__max_pooling2d_ops = {
    .class_name = "MaxPooling2D",
    .from_config = max_pool2d_from_config,
    .get_config = pool_get_config,
    .build = pool_build,
    .workspace_size = max_workspace_size,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

const tnt__layer_ops tnt__average_pooling2d_ops = {
    .class_name = "AveragePooling2D",
    .from_config = avg_pool2d_from_config,
    .get_config = pool_get_config,
    .build = pool_build,
    .forward = pool_forward,
    .backward = pool_backward,
    .destroy = pool_destroy,
};

static tnt_layer *pool_new(bool is_max, int ph, int pw, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    const char *cls = is_max ? "MaxPooling2D" : "AveragePooling2D";
    if (ph <= 0 || pw <= 0 || (int64_t)ph * pw > 65536) {
        tnt__error(TNT_ERR_ARG, "%s: pool_size (%d, %d) (expected > 0, at most 65536 cells)", cls, ph, pw);
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
    tnt_layer *l = tnt__layer_new(is_max ? &tnt__max_pooling2d_ops : &tnt__average_pooling2d_ops, o->name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_max_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(true, pool_h, pool_w, opts);
}

tnt_layer *tnt_average_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(false, pool_h, pool_w, opts);
}
