/* upsampling.c: UpSampling1D, UpSampling2D and UpSampling3D (Keras), each spatial axis enlarged
 * by an integer size: (steps, c) -> (steps*s, c), (h, w, c) -> (h*sh, w*sw, c), (d, h, w, c)
 * likewise. One code for all three: the spatial axes are (d, h, w) with the missing leading ones
 * of size 1.
 *   nearest (all three): each cell repeated over a block; backward sums the gradient of each block.
 *   bilinear (UpSampling2D): TensorFlow 2's tf.image.resize (tf.keras 2.x, Keras 3), half-pixel
 *     centres: output o reads input position (o + 0.5) / s - 0.5, clamped to the first cell, and
 *     interpolates its two neighbours (the second clamped to the last cell); the same as PyTorch's
 *     interpolate(mode="bilinear", align_corners=False). Backward scatters each gradient back with
 *     the same weights, in parallel over samples.
 * channels_first (2D, 3D): (c, spatial...) of n samples is n * c single-channel images in memory
 * (tnt__channels_last_view), run by the same loops. No plan and no workspace. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <string.h>

typedef struct up_cfg {
    int spatial;  /* 1, 2 or 3 */
    int size[3];  /* per axis d, h, w */
    bool bilinear;
    /* from build: (d, h, w, c), c = 1 and planes = channels when channels first */
    int64_t in[3], out[3], c, planes;
    /* bilinear: per output row and column, the two input cells and the second one's weight */
    int64_t *lo_h, *hi_h, *lo_w, *hi_w;
    float *t_h, *t_w;
} up_cfg;

static void free_tables(up_cfg *c) {
    free(c->lo_h), free(c->hi_h), free(c->lo_w), free(c->hi_w), free(c->t_h), free(c->t_w);
    c->lo_h = c->hi_h = c->lo_w = c->hi_w = NULL;
    c->t_h = c->t_w = NULL;
}

/* Half-pixel source positions of n_out outputs from n_in inputs at scale s. */
static void bilinear_table(int64_t n_in, int s, int64_t n_out, int64_t *lo, int64_t *hi, float *t) {
    for (int64_t o = 0; o < n_out; o++) {
        double src = fmax(((double)o + 0.5) / s - 0.5, 0.0);
        int64_t i0 = TNT_MIN((int64_t)src, n_in - 1);
        lo[o] = i0;
        hi[o] = TNT_MIN(i0 + 1, n_in - 1);
        t[o] = (float)(src - (double)i0);
    }
}

static tnt_status up_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    up_cfg *c = l->priv;
    static const char *const axes[] = {"", "steps, channels", "height, width, channels", "depth, height, width, channels"};
    char b[96];
    if (in.ndim != c->spatial + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s%s)", l->ops->class_name,
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1, axes[c->spatial],
                          l->channels_first ? ", channels first" : "");
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension", l->ops->class_name,
                              l->name, tnt_shape_str(in, b, sizeof b));
    tnt_shape v = tnt__channels_last_view(l, in, &c->planes), o = v;
    for (int a = 0; a < 3; a++) {
        int i = a - (3 - c->spatial);
        c->in[a] = i < 0 ? 1 : v.dim[i];
        c->out[a] = c->in[a] * c->size[a];
        if (i >= 0) o.dim[i] = c->out[a];
    }
    c->c = v.dim[c->spatial];
    free_tables(c);
    if (c->bilinear) {
        size_t nh = (size_t)c->out[1], nw = (size_t)c->out[2];
        c->lo_h = malloc(nh * sizeof(int64_t)), c->hi_h = malloc(nh * sizeof(int64_t));
        c->lo_w = malloc(nw * sizeof(int64_t)), c->hi_w = malloc(nw * sizeof(int64_t));
        c->t_h = malloc(nh * sizeof(float)), c->t_w = malloc(nw * sizeof(float));
        if (!c->lo_h || !c->hi_h || !c->lo_w || !c->hi_w || !c->t_h || !c->t_w) {
            free_tables(c);
            return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory", l->ops->class_name, l->name);
        }
        bilinear_table(c->in[1], c->size[1], c->out[1], c->lo_h, c->hi_h, c->t_h);
        bilinear_table(c->in[2], c->size[2], c->out[2], c->lo_w, c->hi_w, c->t_w);
    }
    *out = tnt__channels_first_shape(l, o, c->planes);
    return TNT_OK;
}

/* ---- nearest ------------------------------------------------------------------------------ */

/* x: (n, d, h, w, C) -> y: (n, d*sd, h*sh, w*sw, C), y[i][j][k] = x[i/sd][j/sh][k/sw] */
static void nearest_forward(const up_cfg *c, int64_t n_img, const float *x, float *y) {
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->out[0] * c->out[1];
    const int sw = c->size[2];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_img * rows; r++) {
        int64_t n = r / rows, i = r % rows / c->out[1] / c->size[0], j = r % c->out[1] / c->size[1];
        const float *xi = x + ((n * c->in[0] + i) * c->in[1] + j) * row_in;
        float *yo = y + r * row_out;
        for (int64_t k = 0; k < c->in[2]; k++)
            for (int s = 0; s < sw; s++)
                for (int64_t ch = 0; ch < C; ch++) yo[(k * sw + s) * C + ch] = xi[k * C + ch];
    }
}

/* dy: (n, d*sd, h*sh, w*sw, C) -> dx: (n, d, h, w, C), the sum of each block */
static void nearest_backward(const up_cfg *c, int64_t n_img, const float *dy, float *dx) {
    const int64_t C = c->c, row_in = c->in[2] * C, row_out = c->out[2] * C, rows = c->in[0] * c->in[1];
    const int sw = c->size[2];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_img * rows; r++) {
        int64_t n = r / rows, i = r % rows / c->in[1], j = r % c->in[1];
        float *gi = dx + r * row_in;
        memset(gi, 0, (size_t)row_in * sizeof(float));
        for (int td = 0; td < c->size[0]; td++)
            for (int th = 0; th < c->size[1]; th++) {
                const float *go = dy + ((n * c->out[0] + i * c->size[0] + td) * c->out[1] + j * c->size[1] + th) * row_out;
                for (int64_t k = 0; k < c->in[2]; k++)
                    for (int s = 0; s < sw; s++)
                        for (int64_t ch = 0; ch < C; ch++) gi[k * C + ch] += go[(k * sw + s) * C + ch];
            }
    }
}

/* ---- bilinear (2-D: d = 1) ---------------------------------------------------------------- */

/* x: (n, h, w, C) -> y: (n, h*sh, w*sw, C) */
static void bilinear_forward(const up_cfg *c, int64_t n_img, const float *x, float *y) {
    const int64_t C = c->c, H = c->in[1], W = c->in[2], OH = c->out[1], OW = c->out[2];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n_img * OH; r++) {
        int64_t n = r / OH, i = r % OH;
        const float *x0 = x + (n * H + c->lo_h[i]) * W * C, *x1 = x + (n * H + c->hi_h[i]) * W * C;
        float th = c->t_h[i], *yo = y + r * OW * C;
        for (int64_t j = 0; j < OW; j++) {
            int64_t a = c->lo_w[j] * C, b = c->hi_w[j] * C;
            float tw = c->t_w[j];
            for (int64_t ch = 0; ch < C; ch++) {
                float top = x0[a + ch] + tw * (x0[b + ch] - x0[a + ch]);
                float bot = x1[a + ch] + tw * (x1[b + ch] - x1[a + ch]);
                yo[j * C + ch] = top + th * (bot - top);
            }
        }
    }
}

/* dy: (n, h*sh, w*sw, C) -> dx: (n, h, w, C); each image by one thread (its outputs overlap) */
static void bilinear_backward(const up_cfg *c, int64_t n_img, const float *dy, float *dx) {
    const int64_t C = c->c, H = c->in[1], W = c->in[2], OH = c->out[1], OW = c->out[2];
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_img; n++) {
        float *g = dx + n * H * W * C;
        memset(g, 0, (size_t)(H * W * C) * sizeof(float));
        for (int64_t i = 0; i < OH; i++) {
            float *g0 = g + c->lo_h[i] * W * C, *g1 = g + c->hi_h[i] * W * C, th = c->t_h[i];
            const float *go = dy + (n * OH + i) * OW * C;
            for (int64_t j = 0; j < OW; j++) {
                int64_t a = c->lo_w[j] * C, b = c->hi_w[j] * C;
                float tw = c->t_w[j];
                for (int64_t ch = 0; ch < C; ch++) {
                    float v = go[j * C + ch], top = v * (1 - th), bot = v * th;
                    g0[a + ch] += top * (1 - tw);
                    g0[b + ch] += top * tw;
                    g1[a + ch] += bot * (1 - tw);
                    g1[b + ch] += bot * tw;
                }
            }
        }
    }
}

/* ---- layer ops ---------------------------------------------------------------------------- */

static tnt_status up_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const up_cfg *c = l->priv;
    int64_t n_img = a->batch * c->planes;
    if (c->bilinear) bilinear_forward(c, n_img, a->x, a->y);
    else nearest_forward(c, n_img, a->x, a->y);
    if (a->preact) /* no activation: the pre-activation is the output */
        memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

static tnt_status up_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const up_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    int64_t n_img = a->batch * c->planes;
    if (c->bilinear) bilinear_backward(c, n_img, a->dy, a->dx);
    else nearest_backward(c, n_img, a->dy, a->dx);
    return TNT_OK;
}

static void up_destroy(tnt_layer *l) {
    free_tables(l->priv);
    free(l->priv);
}

static tnt_status up_get_config(const tnt_layer *l, cJSON *c) {
    const up_cfg *p = l->priv;
    if (p->spatial == 1) {
        TNT_KJ(cJSON_AddNumberToObject(c, "size", p->size[2]));
        return TNT_OK;
    }
    TNT_KJ_S(tnt__kj_add_ints(c, "size", p->spatial, p->size + 3 - p->spatial));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    if (p->spatial == 2) TNT_KJ(cJSON_AddStringToObject(c, "interpolation", p->bilinear ? "bilinear" : "nearest"));
    return TNT_OK;
}

static tnt_layer *up_from_config(const cJSON *c, const tnt__kj_ctx *k, int spatial) {
    static const int twos[3] = {2, 2, 2};
    int sz[3] = {0};
    bool bad = false;
    TNT_KJ_READ(tnt__kj_sizes(c, "size", false, spatial, twos, sz, k));
    if (spatial == 1) return tnt__kj_built(tnt_upsampling1d(sz[0], k->name), k);
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    if (spatial == 3) return tnt__kj_built(tnt_upsampling3d(sz, k->name), k);
    const char *interp = tnt__kj_str(c, "interpolation", &bad, k);
    if (bad) return NULL;
    return tnt__kj_built(tnt_upsampling2d(sz[0], sz[1], interp, k->name), k);
}

static tnt_layer *up1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return up_from_config(c, k, 1); }
static tnt_layer *up2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return up_from_config(c, k, 2); }
static tnt_layer *up3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return up_from_config(c, k, 3); }

/* ---- on the device: nearest, the CPU's loops one element a thread (gpu/kernels/pooling.cu) ---- */

static bool up_gpu_supported(const tnt_layer *l, const char **why) {
    if (!((const up_cfg *)l->priv)->bilinear) return true;
    *why = "bilinear interpolation has no device path yet";
    return false;
}

static tnt_k_pool up_geometry(const up_cfg *c, int64_t batch) {
    tnt_k_pool g = {.n = batch * c->planes, .c = c->c};
    for (int a = 0; a < 3; a++) g.in[a] = (int)c->in[a], g.out[a] = (int)c->out[a], g.k[a] = c->size[a];
    return g;
}

static tnt_status up_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    tnt_k_pool g = up_geometry(l->priv, a->batch);
    const int64_t n = a->batch * tnt_shape_numel(l->out_shape);
    const float *x = a->x;
    float *y = a->y;
    void *args[] = {&g, &x, &y};
    tnt_status s = tnt__gpu_launch("tnt_k_upsample_fwd", tnt__gpu_grid_for(n, 256), 256, 0, args);
    if (s == TNT_OK && a->preact) s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status up_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    tnt_k_pool g = up_geometry(l->priv, a->batch);
    const float *dy = a->dy;
    float *dx = a->dx;
    void *args[] = {&g, &dy, &dx};
    return tnt__gpu_launch("tnt_k_upsample_bwd", tnt__gpu_grid_for(a->batch * tnt_shape_numel(l->in_shape), 256), 256, 0,
                           args);
}

static const tnt__gpu_ops up_gpu_ops = {
    .supported = up_gpu_supported, .forward = up_gpu_forward, .backward = up_gpu_backward};

#define UP_OPS(var, cls, fromcfg, fmt)                                                            \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .from_config = fromcfg,                                                                   \
        .get_config = up_get_config,                                                              \
        .build = up_build,                                                                        \
        .forward = up_forward,                                                                    \
        .backward = up_backward,                                                                  \
        .destroy = up_destroy,                                                                    \
        .set_data_format = fmt,                                                                   \
        .gpu = &up_gpu_ops,                                                                       \
    };
UP_OPS(tnt__upsampling1d_ops, "UpSampling1D", up1d_from_config, NULL)
UP_OPS(tnt__upsampling2d_ops, "UpSampling2D", up2d_from_config, tnt__layer_take_data_format)
UP_OPS(tnt__upsampling3d_ops, "UpSampling3D", up3d_from_config, tnt__layer_take_data_format)

/* size: one per spatial axis, the last ones of (d, h, w) */
static tnt_layer *up_new(const tnt__layer_ops *ops, int spatial, const int *size, bool bilinear, const char *name) {
    for (int i = 0; i < spatial; i++)
        if (size[i] <= 0) {
            char b[64] = "";
            for (int j = 0, n = 0; j < spatial; j++)
                n += snprintf(b + n, sizeof b - (size_t)n, "%s%d", j ? ", " : "", size[j]);
            tnt__error(TNT_ERR_ARG, spatial == 1 ? "%s \"%s\": size %s (expected > 0)" : "%s \"%s\": size (%s) (expected > 0)",
                       ops->class_name, name ? name : "", b);
            return NULL;
        }
    up_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->spatial = spatial;
    c->size[0] = c->size[1] = c->size[2] = 1;
    memcpy(c->size + 3 - spatial, size, (size_t)spatial * sizeof(int));
    c->bilinear = bilinear;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_upsampling2d(int size_h, int size_w, const char *interpolation, const char *name) {
    bool bilinear = interpolation && !strcmp(interpolation, "bilinear");
    if (interpolation && !bilinear && strcmp(interpolation, "nearest") != 0) {
        tnt__error(TNT_ERR_UNSUPPORTED, "UpSampling2D \"%s\": interpolation \"%.32s\" (expected \"nearest\" or \"bilinear\")",
                   name ? name : "", interpolation);
        return NULL;
    }
    return up_new(&tnt__upsampling2d_ops, 2, (int[]){size_h, size_w}, bilinear, name);
}

tnt_layer *tnt_upsampling1d(int size, const char *name) { return up_new(&tnt__upsampling1d_ops, 1, &size, false, name); }

tnt_layer *tnt_upsampling3d(const int size[3], const char *name) {
    if (!size) {
        tnt__error(TNT_ERR_ARG, "UpSampling3D \"%s\": size is NULL", name ? name : "");
        return NULL;
    }
    return up_new(&tnt__upsampling3d_ops, 3, size, false, name);
}
