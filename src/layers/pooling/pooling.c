/* pooling.c: MaxPooling2D, AveragePooling2D, MaxPooling3D and AveragePooling3D (Keras) over
 * channels-last input (2-D runs as 3-D of depth 1), in plain C. channels_first: (c, spatial...) of
 * n samples is n * c single-channel images in memory (tnt__channels_last_view), pooled by the same
 * loops.
 * Padding "same" is TensorFlow's: total = max((ceil(in/s)-1)*s + k - in, 0), the extra row/column
 * at the bottom/right; padded cells never win a max, and an average divides by the number of
 * real cells only (as oneDNN's pooling_avg_exclude_padding and TensorFlow).
 * Max pooling keeps the argmax of each window from forward to backward in the layer's per-step
 * workspace, so backward needs neither x nor y.
 * Why not oneDNN pooling: its 2.6 jit kernels took 1.9 / 1.8 ms (fwd / bwd) for LeNet-5's
 * 2x2 max pool of 64x28x28x20 at 1 thread, the loops below 0.45 / 0.65 ms (and 0.9 / 1.0 against
 * 0.2 / 0.35 ms for 64x14x14x50): these layers are memory-bound and the loops touch each byte
 * once. No plan is needed. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

/* ---- configuration ------------------------------------------------------------------------ */

typedef struct pool_cfg {
    bool is_max;
    int spatial;     /* 2 or 3 */
    int k[3], s[3];  /* pool size and strides per axis d, h, w (d: 1 in 2-D) */
    tnt_padding padding;
    /* from build: (d, h, w, c), c = 1 and planes = channels when channels first */
    int64_t in[3], out[3], pad[3], c, planes;
} pool_cfg;

/* Output size and padding before along one axis; false when the output would be empty. */
static bool pool_axis(int64_t in, int k, int s, tnt_padding pad, int64_t *out, int64_t *pl) {
    if (pad == TNT_PADDING_SAME) {
        *out = (in + s - 1) / s;
        *pl = TNT_MAX((*out - 1) * s + k - in, 0) / 2;
    } else {
        *out = in >= k ? (in - k) / s + 1 : 0;
        *pl = 0;
    }
    return *out > 0;
}

static tnt_status pool_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    pool_cfg *c = l->priv;
    const char *cls = l->ops->class_name;
    char b[96];
    if (in.ndim != c->spatial + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s)", cls, l->name,
                          tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1,
                          c->spatial == 2 ? (l->channels_first ? "channels, height, width" : "height, width, channels")
                          : l->channels_first ? "channels, depth, height, width" : "depth, height, width, channels");
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension", cls, l->name,
                              tnt_shape_str(in, b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in, &c->planes), o = v;
    bool ok = true;
    for (int a = 0; a < 3; a++) {
        int i = a - (3 - c->spatial); /* axis of the view, < 0 for the missing depth of 2-D */
        c->in[a] = i < 0 ? 1 : v.dim[i];
        ok &= pool_axis(c->in[a], c->k[a], c->s[a], c->padding, &c->out[a], &c->pad[a]);
        if (i >= 0) o.dim[i] = c->out[a];
    }
    c->c = v.dim[c->spatial];
    if (!ok) {
        char ob[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s is smaller than pool_size %s with padding \"valid\": "
                          "output would be %s", cls, l->name, tnt_shape_str(in, b, sizeof b),
                          c->spatial == 2 ? (snprintf(ob, sizeof ob, "(%d, %d)", c->k[1], c->k[2]), ob)
                                          : (snprintf(ob, sizeof ob, "(%d, %d, %d)", c->k[0], c->k[1], c->k[2]), ob),
                          tnt_shape_str(tnt__channels_first_shape(l, o, c->planes), b, sizeof b));
    }
    *out = tnt__channels_first_shape(l, o, c->planes);
    return TNT_OK;
}

/* ---- kernels ------------------------------------------------------------------------------
 * Windows are clipped to the real cells, which gives TensorFlow's "same" semantics: a padded
 * cell never wins a max and is not counted in an average. The channel loops are contiguous in
 * NHWC and vectorize. Forward parallelizes over output rows; backward over images, since the
 * windows of one image may overlap (stride < pool size) and add into the same dx cells. */

/* The window of output (i, j, k) clipped to the input: [lo[a], hi[a]) per axis, and the offset of
 * lo inside the unclipped window (for the max index). */
typedef struct pool_win {
    int64_t lo[3], hi[3], off[3];
} pool_win;

static pool_win window(const pool_cfg *c, const int64_t o[3]) {
    pool_win w;
    for (int a = 0; a < 3; a++) {
        int64_t st = o[a] * c->s[a] - c->pad[a];
        w.lo[a] = TNT_MAX(st, 0);
        w.hi[a] = TNT_MIN(st + c->k[a], c->in[a]);
        w.off[a] = w.lo[a] - st;
    }
    return w;
}

/* The window of output cell o (counted over all images) */
static pool_win out_window(const pool_cfg *c, int64_t o) {
    return window(c, (int64_t[]){o / c->out[2] / c->out[1] % c->out[0], o / c->out[2] % c->out[1], o % c->out[2]});
}

/* Index of input cell (d, h, w) of image n, in cells */
static int64_t cell(const pool_cfg *c, int64_t n, int64_t d, int64_t h, int64_t w) {
    return ((n * c->in[0] + d) * c->in[1] + h) * c->in[2] + w;
}

/* The window index (kd * kh + kh') * kw + kw' of cell (d, h, w) in window w */
static uint16_t win_index(const pool_cfg *c, const pool_win *w, int64_t d, int64_t h, int64_t v) {
    return (uint16_t)(((d - w->lo[0] + w->off[0]) * c->k[1] + (h - w->lo[1] + w->off[1])) * c->k[2] +
                      (v - w->lo[2] + w->off[2]));
}

#define FOR_WINDOW(w, d, h, v)                                                                    \
    for (int64_t d = (w).lo[0]; d < (w).hi[0]; d++)                                               \
        for (int64_t h = (w).lo[1]; h < (w).hi[1]; h++)                                           \
            for (int64_t v = (w).lo[2]; v < (w).hi[2]; v++)

/* x: (n, d, h, w, C) -> y: (n, od, oh, ow, C); arg: like y, the window index of each maximum (the
 * first one on ties, as oneDNN and TensorFlow). */
static void max_forward(const pool_cfg *c, int64_t n_img, const float *x, float *y, uint16_t *arg) {
    const int64_t C = c->c, rows = c->out[0] * c->out[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_img * rows; r++) {
        int64_t n = r / rows;
        for (int64_t j = 0; j < c->out[2]; j++) {
            pool_win w = window(c, (int64_t[]){r % rows / c->out[1], r % c->out[1], j});
            float *yo = y + ((r * c->out[2]) + j) * C;
            uint16_t *ao = arg + ((r * c->out[2]) + j) * C;
            bool first = true;
            FOR_WINDOW(w, d, h, v) {
                const float *xi = x + cell(c, n, d, h, v) * C;
                uint16_t k = win_index(c, &w, d, h, v);
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

/* dy: (n, od, oh, ow, C), arg from max_forward -> dx: (n, d, h, w, C) */
static void max_backward(const pool_cfg *c, int64_t n_img, const float *dy, const uint16_t *arg, float *dx) {
    const int64_t C = c->c, in_img = c->in[0] * c->in[1] * c->in[2] * C;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        memset(dx + n * in_img, 0, (size_t)in_img * sizeof(float));
        for (int64_t o = n * c->out[0] * c->out[1] * c->out[2]; o < (n + 1) * c->out[0] * c->out[1] * c->out[2]; o++) {
            pool_win w = out_window(c, o);
            const float *go = dy + o * C;
            const uint16_t *ao = arg + o * C;
            FOR_WINDOW(w, d, h, v) {
                float *gi = dx + cell(c, n, d, h, v) * C;
                uint16_t k = win_index(c, &w, d, h, v);
                for (int64_t ch = 0; ch < C; ch++) gi[ch] += ao[ch] == k ? go[ch] : 0.0f;
            }
        }
    }
}

static float win_inv_count(const pool_win *w) {
    return 1.0f / (float)((w->hi[0] - w->lo[0]) * (w->hi[1] - w->lo[1]) * (w->hi[2] - w->lo[2]));
}

/* x: (n, d, h, w, C) -> y: (n, od, oh, ow, C), the mean over the real cells of each window */
static void avg_forward(const pool_cfg *c, int64_t n_img, const float *x, float *y) {
    const int64_t C = c->c, rows = c->out[0] * c->out[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_img * rows; r++) {
        int64_t n = r / rows;
        for (int64_t j = 0; j < c->out[2]; j++) {
            pool_win w = window(c, (int64_t[]){r % rows / c->out[1], r % c->out[1], j});
            float *yo = y + ((r * c->out[2]) + j) * C;
            for (int64_t ch = 0; ch < C; ch++) yo[ch] = 0.0f;
            FOR_WINDOW(w, d, h, v) {
                const float *xi = x + cell(c, n, d, h, v) * C;
                for (int64_t ch = 0; ch < C; ch++) yo[ch] += xi[ch];
            }
            float inv = win_inv_count(&w);
            for (int64_t ch = 0; ch < C; ch++) yo[ch] *= inv;
        }
    }
}

/* dy: (n, od, oh, ow, C) -> dx: (n, d, h, w, C) */
static void avg_backward(const pool_cfg *c, int64_t n_img, const float *dy, float *dx) {
    const int64_t C = c->c, in_img = c->in[0] * c->in[1] * c->in[2] * C;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        memset(dx + n * in_img, 0, (size_t)in_img * sizeof(float));
        for (int64_t o = n * c->out[0] * c->out[1] * c->out[2]; o < (n + 1) * c->out[0] * c->out[1] * c->out[2]; o++) {
            pool_win w = out_window(c, o);
            const float *go = dy + o * C;
            float inv = win_inv_count(&w);
            FOR_WINDOW(w, d, h, v) {
                float *gi = dx + cell(c, n, d, h, v) * C;
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

/* x: (batch, spatial..., c) -> y: (batch, spatial'..., c), or both channels first */
static tnt_status pool_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    if (c->is_max) max_forward(c, a->batch * c->planes, a->x, a->y, a->workspace);
    else avg_forward(c, a->batch * c->planes, a->x, a->y);
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

/* dy: like y -> dx: like x, or nothing when dx is NULL (no weights) */
static tnt_status pool_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    if (c->is_max) max_backward(c, a->batch * c->planes, a->dy, a->workspace, a->dx);
    else avg_backward(c, a->batch * c->planes, a->dy, a->dx);
    return TNT_OK;
}

/* ---- on the device: gpu/kernels/pooling.cu, bitwise these loops (the same windows, first
 * maximum and order of additions); the argmax in the same uint16 workspace -------------------- */

#define GPU_BLOCK 256

static tnt_k_pool gpu_geometry(const pool_cfg *c, int64_t batch) {
    tnt_k_pool g = {.n = batch * c->planes, .c = c->c};
    for (int a = 0; a < 3; a++)
        g.in[a] = (int)c->in[a], g.out[a] = (int)c->out[a], g.k[a] = c->k[a], g.s[a] = c->s[a], g.pad[a] = (int)c->pad[a];
    return g;
}

static tnt_status pool_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    tnt_k_pool g = gpu_geometry(c, a->batch);
    int64_t n = a->batch * tnt_shape_numel(l->out_shape);
    unsigned short *arg = a->workspace;
    void *max_args[] = {&g, (void *)&a->x, (void *)&a->y, &arg}, *avg_args[] = {&g, (void *)&a->x, (void *)&a->y};
    tnt_status s = tnt__gpu_launch(c->is_max ? "tnt_k_max_pool_fwd" : "tnt_k_avg_pool_fwd", tnt__gpu_grid_for(n, GPU_BLOCK),
                                   GPU_BLOCK, 0, c->is_max ? max_args : avg_args);
    if (s == TNT_OK && a->preact) s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status pool_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const pool_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    tnt_k_pool g = gpu_geometry(c, a->batch);
    int64_t n = a->batch * tnt_shape_numel(l->in_shape); /* one thread per input cell */
    const unsigned short *arg = a->workspace;
    void *max_args[] = {&g, (void *)&a->dy, &arg, (void *)&a->dx}, *avg_args[] = {&g, (void *)&a->dy, (void *)&a->dx};
    return tnt__gpu_launch(c->is_max ? "tnt_k_max_pool_bwd" : "tnt_k_avg_pool_bwd", tnt__gpu_grid_for(n, GPU_BLOCK),
                           GPU_BLOCK, 0, c->is_max ? max_args : avg_args);
}

static const tnt__gpu_ops max_pool_gpu_ops = {
    .workspace_size = max_workspace_size,
    .forward = pool_gpu_forward,
    .backward = pool_gpu_backward,
};
static const tnt__gpu_ops avg_pool_gpu_ops = {
    .forward = pool_gpu_forward,
    .backward = pool_gpu_backward,
};

/* ---- constructors ------------------------------------------------------------------------- */

static void pool_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status pool_get_config(const tnt_layer *l, cJSON *c) {
    const pool_cfg *p = l->priv;
    int first = 3 - p->spatial;
    TNT_KJ_S(tnt__kj_add_ints(c, "pool_size", p->spatial, p->k + first));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(p->padding)));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", p->spatial, p->s + first));
    return tnt__kj_add_data_format(c, l);
}

static tnt_layer *pool_from_config(const cJSON *c, const tnt__kj_ctx *k, bool is_max, int spatial) {
    static const int two[3] = {2, 2, 2};
    tnt_layer_opts o = {.name = k->name};
    int ps[3] = {0};
    TNT_KJ_READ(tnt__kj_sizes(c, "pool_size", false, spatial, two, ps, k));
    TNT_KJ_READ(tnt__kj_sizes(c, "strides", false, spatial, ps, o.strides, k));
    TNT_KJ_READ(tnt__kj_padding(c, &o.padding, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    if (spatial == 3) return tnt__kj_built(is_max ? tnt_max_pooling3d(ps, &o) : tnt_average_pooling3d(ps, &o), k);
    return tnt__kj_built(is_max ? tnt_max_pooling2d(ps[0], ps[1], &o) : tnt_average_pooling2d(ps[0], ps[1], &o), k);
}

static tnt_layer *max_pool2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return pool_from_config(c, k, true, 2); }
static tnt_layer *avg_pool2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return pool_from_config(c, k, false, 2); }
static tnt_layer *max_pool3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return pool_from_config(c, k, true, 3); }
static tnt_layer *avg_pool3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return pool_from_config(c, k, false, 3); }

#define POOL_OPS(var, cls, fromcfg, ws, gpu_ops)                                                  \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .from_config = fromcfg,                                                                   \
        .get_config = pool_get_config,                                                            \
        .build = pool_build,                                                                      \
        .workspace_size = ws,                                                                     \
        .forward = pool_forward,                                                                  \
        .backward = pool_backward,                                                                \
        .destroy = pool_destroy,                                                                  \
        .set_data_format = tnt__layer_take_data_format,                                           \
        .gpu = gpu_ops,                                                                           \
    };
POOL_OPS(tnt__max_pooling2d_ops, "MaxPooling2D", max_pool2d_from_config, max_workspace_size, &max_pool_gpu_ops)
POOL_OPS(tnt__average_pooling2d_ops, "AveragePooling2D", avg_pool2d_from_config, NULL, &avg_pool_gpu_ops)
POOL_OPS(tnt__max_pooling3d_ops, "MaxPooling3D", max_pool3d_from_config, max_workspace_size, &max_pool_gpu_ops)
POOL_OPS(tnt__average_pooling3d_ops, "AveragePooling3D", avg_pool3d_from_config, NULL, &avg_pool_gpu_ops)

/* "(a, b)" or "(a, b, c)": n values of v */
static const char *tuple_str(char *b, size_t size, int n, const int *v) {
    if (n == 2) snprintf(b, size, "(%d, %d)", v[0], v[1]);
    else snprintf(b, size, "(%d, %d, %d)", v[0], v[1], v[2]);
    return b;
}

/* ps: the pool size of each of the n spatial axes */
static tnt_layer *pool_new(const tnt__layer_ops *ops, bool is_max, int n, const int *ps, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    const char *cls = ops->class_name;
    char b[64];
    int64_t cells = 1;
    bool bad = false;
    for (int i = 0; i < n; i++) cells *= ps[i], bad |= ps[i] <= 0;
    if (bad || cells > 65536) {
        tnt__error(TNT_ERR_ARG, "%s: pool_size %s (expected > 0, at most 65536 cells)", cls, tuple_str(b, sizeof b, n, ps));
        return NULL;
    }
    for (int i = 0; i < n; i++) bad |= o->strides[i] < 0;
    if (bad) {
        tnt__error(TNT_ERR_ARG, "%s: strides %s (expected > 0, or 0 for the default pool_size)", cls,
                   tuple_str(b, sizeof b, n, o->strides));
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
    for (int i = 0; i < n; i++) bad |= o->dilation[i] > 1 || o->dilation[i] < 0;
    if (bad) {
        tnt__error(TNT_ERR_ARG, "%s: dilation %s (pooling has no dilation; expected 0 or 1)", cls,
                   tuple_str(b, sizeof b, n, o->dilation));
        return NULL;
    }
    pool_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (pool_cfg){.is_max = is_max, .spatial = n, .padding = o->padding, .k = {1, 1, 1}, .s = {1, 1, 1}};
    for (int i = 0; i < n; i++) {
        c->k[3 - n + i] = ps[i];
        c->s[3 - n + i] = o->strides[i] ? o->strides[i] : ps[i];
    }
    tnt_layer *l = tnt__layer_new(ops, o->name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_max_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(&tnt__max_pooling2d_ops, true, 2, (int[]){pool_h, pool_w}, opts);
}

tnt_layer *tnt_average_pooling2d(int pool_h, int pool_w, const tnt_layer_opts *opts) {
    return pool_new(&tnt__average_pooling2d_ops, false, 2, (int[]){pool_h, pool_w}, opts);
}

tnt_layer *tnt_max_pooling3d(const int pool_size[3], const tnt_layer_opts *opts) {
    if (!pool_size) {
        tnt__error(TNT_ERR_ARG, "MaxPooling3D: pool_size is NULL");
        return NULL;
    }
    return pool_new(&tnt__max_pooling3d_ops, true, 3, pool_size, opts);
}

tnt_layer *tnt_average_pooling3d(const int pool_size[3], const tnt_layer_opts *opts) {
    if (!pool_size) {
        tnt__error(TNT_ERR_ARG, "AveragePooling3D: pool_size is NULL");
        return NULL;
    }
    return pool_new(&tnt__average_pooling3d_ops, false, 3, pool_size, opts);
}
