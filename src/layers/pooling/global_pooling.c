/* global_pooling.c: GlobalMaxPooling1D/2D/3D and GlobalAveragePooling2D/3D (Keras,
 * keepdims=False) over channels-last input: (spatial..., c) -> (c), the mean or maximum of each
 * channel over all cells. channels_first: (c, spatial...) of n samples is n * c single-channel
 * images in memory (tnt__channels_last_view), whose n * c results are the (n, c) output. (GlobalAveragePooling1D, which follows the sequence mask, is in
 * pooling1d.c.)
 * Max backward splits each gradient equally among the cells that tie for the maximum, as
 * TensorFlow's reduce_max gradient (and torch.amax); the maximum is recomputed from x, which the
 * model keeps alive until backward, so neither a plan nor a workspace is needed. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

typedef struct gpool_cfg {
    bool is_max;
    int spatial;   /* 1, 2 or 3 spatial axes */
    int64_t hw, c; /* from build: hw cells of c channels */
    int64_t planes; /* channels first: c = 1 and planes images per sample */
} gpool_cfg;

static tnt_status gpool_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    gpool_cfg *c = l->priv;
    static const char *const axes[] = {"", "steps, channels", "height, width, channels",
                                       "depth, height, width, channels"};
    char b[96];
    if (in.ndim != c->spatial + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1,
                          axes[c->spatial]);
    c->hw = 1;
    for (int d = 0; d < in.ndim; d++)
        if (in.dim[d] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension",
                              l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in, &c->planes);
    for (int d = 0; d < c->spatial; d++) c->hw *= v.dim[d];
    c->c = v.dim[c->spatial];
    *out = TNT_SHAPE(c->c * c->planes);
    return TNT_OK;
}

/* x: (n, h, w, C) -> y: (n, C) for n = batch * planes, the per-channel mean or maximum over h*w cells */
static tnt_status gpool_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const gpool_cfg *c = l->priv;
    const int64_t C = c->c, hw = c->hw;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch * c->planes; n++) {
        const float *xs = a->x + n * hw * C;
        float *yo = a->y + n * C;
        memcpy(yo, xs, (size_t)C * sizeof(float));
        if (c->is_max) {
            for (int64_t p = 1; p < hw; p++)
                for (int64_t ch = 0; ch < C; ch++)
                    if (xs[p * C + ch] > yo[ch]) yo[ch] = xs[p * C + ch];
        } else {
            for (int64_t p = 1; p < hw; p++)
                for (int64_t ch = 0; ch < C; ch++) yo[ch] += xs[p * C + ch];
            float inv = 1.0f / (float)hw;
            for (int64_t ch = 0; ch < C; ch++) yo[ch] *= inv;
        }
    }
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * c->planes * C) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, C) -> dx: (batch, h, w, C); x: (batch, h, w, C) is the forward input */
static tnt_status gpool_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const gpool_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t C = c->c, hw = c->hw, n_img = a->batch * c->planes;
    if (!c->is_max) {
        float inv = 1.0f / (float)hw;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < n_img; n++) {
            const float *go = a->dy + n * C;
            float *gi = a->dx + n * hw * C;
            for (int64_t p = 0; p < hw; p++)
                for (int64_t ch = 0; ch < C; ch++) gi[p * C + ch] = go[ch] * inv;
        }
        return TNT_OK;
    }
    /* scratch: (batch, 2, C), the maximum and the number of cells that reach it */
    float *scratch = tnt__calloc((size_t)(n_img * 2 * C), sizeof(float));
    if (!scratch) return TNT_ERR_NOMEM;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        const float *xs = a->x + n * hw * C, *go = a->dy + n * C;
        float *gi = a->dx + n * hw * C;
        float *mx = scratch + n * 2 * C, *cnt = mx + C;
        memcpy(mx, xs, (size_t)C * sizeof(float));
        for (int64_t p = 1; p < hw; p++)
            for (int64_t ch = 0; ch < C; ch++)
                if (xs[p * C + ch] > mx[ch]) mx[ch] = xs[p * C + ch];
        for (int64_t p = 0; p < hw; p++)
            for (int64_t ch = 0; ch < C; ch++) cnt[ch] += xs[p * C + ch] == mx[ch] ? 1.0f : 0.0f;
        for (int64_t ch = 0; ch < C; ch++) cnt[ch] = cnt[ch] > 0.0f ? go[ch] / cnt[ch] : 0.0f;
        for (int64_t p = 0; p < hw; p++)
            for (int64_t ch = 0; ch < C; ch++)
                gi[p * C + ch] = xs[p * C + ch] == mx[ch] ? cnt[ch] : 0.0f;
    }
    free(scratch);
    return TNT_OK;
}

/* ---- on the device: gpu/kernels/pooling.cu, one thread per (image, channel) ---------------- */

#define GPU_BLOCK 256

static tnt_status gpool_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const gpool_cfg *c = l->priv;
    long long n = a->batch * c->planes, hw = c->hw, C = c->c;
    int is_max = c->is_max;
    void *args[] = {(void *)&a->x, (void *)&a->y, &n, &hw, &C, &is_max};
    tnt_status s = tnt__gpu_launch("tnt_k_global_pool_fwd", tnt__gpu_grid_for(n * C, GPU_BLOCK), GPU_BLOCK, 0, args);
    if (s == TNT_OK && a->preact)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(n * C) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status gpool_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const gpool_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    long long n = a->batch * c->planes, hw = c->hw, C = c->c;
    if (c->is_max) {
        void *args[] = {(void *)&a->x, (void *)&a->dy, (void *)&a->dx, &n, &hw, &C};
        return tnt__gpu_launch("tnt_k_global_max_pool_bwd", tnt__gpu_grid_for(n * C, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    void *args[] = {(void *)&a->dy, (void *)&a->dx, &n, &hw, &C};
    return tnt__gpu_launch("tnt_k_global_avg_pool_bwd", tnt__gpu_grid_for(n * hw * C, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static const tnt__gpu_ops gpool_gpu_ops = {.forward = gpool_gpu_forward, .backward = gpool_gpu_backward};

static void gpool_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status gpool_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ(cJSON_AddBoolToObject(c, "keepdims", false));
    return TNT_OK;
}

static tnt_layer *gpool_new(const tnt__layer_ops *ops, bool is_max, int spatial, const char *name) {
    gpool_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->is_max = is_max;
    c->spatial = spatial;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

/* One class: its ops table, from_config and public constructor. */
#define GPOOL_CLASS(fn, cls, is_max, spatial)                                                     \
    static tnt_layer *fn##_from_config(const cJSON *c, const tnt__kj_ctx *k) {                  \
        TNT_KJ_READ(tnt__kj_check_data_format(c, k));                                            \
        TNT_KJ_READ(tnt__kj_want_bool(c, "keepdims", false, k));                                 \
        return tnt__kj_built(tnt_##fn(k->name), k);                                              \
    }                                                                                             \
    const tnt__layer_ops tnt__##fn##_ops = {                                                     \
        .class_name = cls,                                                                        \
        .from_config = fn##_from_config,                                                          \
        .get_config = gpool_get_config,                                                           \
        .build = gpool_build,                                                                     \
        .forward = gpool_forward,                                                                 \
        .backward = gpool_backward,                                                               \
        .destroy = gpool_destroy,                                                                 \
        .set_data_format = tnt__layer_take_data_format,                                           \
        .gpu = &gpool_gpu_ops,                                                                    \
    };                                                                                            \
    tnt_layer *tnt_##fn(const char *name) { return gpool_new(&tnt__##fn##_ops, is_max, spatial, name); }

GPOOL_CLASS(global_max_pooling1d, "GlobalMaxPooling1D", true, 1)
GPOOL_CLASS(global_average_pooling2d, "GlobalAveragePooling2D", false, 2)
GPOOL_CLASS(global_max_pooling2d, "GlobalMaxPooling2D", true, 2)
GPOOL_CLASS(global_average_pooling3d, "GlobalAveragePooling3D", false, 3)
GPOOL_CLASS(global_max_pooling3d, "GlobalMaxPooling3D", true, 3)
