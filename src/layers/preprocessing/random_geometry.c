/* random_geometry.c: Keras's random geometric image augmentations on (height, width, channels):
 * RandomFlip, RandomTranslation, RandomRotation and RandomZoom. Active only in training (identity
 * at inference, as Keras). Each sample gets one affine map from output pixel (x, y) to input
 * coordinates, Keras's matrices (rotation about the image center by factor * 2 pi, zoom about the
 * center by 1 + factor, translation by factor * size, positive shifting right/down), sampled as
 * TensorFlow's ImageProjectiveTransformV3: the fill mode maps a coordinate outside the image
 * (reflect: d c b a | a b c d | d c b a; wrap; nearest: the edge; constant: fill_value), then
 * bilinear or nearest (rounded) reads.
 *
 * As Dropout, draws are never stored: a sample's numbers come from the counter-based generator at
 * (step seed, global sample index), so any split of the batch over ranks draws the same, and
 * backward recomputes the map and scatters dy through the same reads (the adjoint). */
#include "layers/layer.h"
#include "layers/keras_config.h"

#include <math.h>

typedef enum geo_kind { GEO_FLIP, GEO_TRANSLATION, GEO_ROTATION, GEO_ZOOM } geo_kind;
typedef enum fill_mode { FILL_REFLECT, FILL_WRAP, FILL_NEAREST, FILL_CONSTANT } fill_mode;
static const char *const fill_names[] = {"reflect", "wrap", "nearest", "constant"};
static const char *const flip_names[] = {"horizontal", "vertical", "horizontal_and_vertical"};

typedef struct geo_cfg {
    geo_kind kind;
    float lo[2], hi[2]; /* factor ranges: [0] height (rotation: the only one), [1] width */
    bool width_set;     /* RandomZoom: width_factor given (else the height's zoom, aspect kept) */
    int flip;           /* RandomFlip: 1 horizontal, 2 vertical, 3 both */
    fill_mode fill;
    bool nearest;       /* interpolation */
    float fill_value;
    uint64_t seed;      /* 0: derive from the model's seed */
} geo_cfg;

static tnt_status geo_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    if (in.ndim != 3) {
        char b[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s (expected (height, width, channels))",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    }
    *out = in;
    return TNT_OK;
}

static size_t geo_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return sizeof(uint64_t);
}

/* The map of one sample: x_in = m[0] x + m[1] y + m[2], y_in = m[3] x + m[4] y + m[5]. */
static void sample_map(const geo_cfg *c, uint64_t seed, uint64_t sample, int64_t h, int64_t w, double m[6]) {
    double u0 = tnt__rand_uniform(seed, sample * 4), u1 = tnt__rand_uniform(seed, sample * 4 + 1);
    double H1 = (double)(h - 1), W1 = (double)(w - 1);
    m[0] = 1, m[1] = 0, m[2] = 0, m[3] = 0, m[4] = 1, m[5] = 0;
    switch (c->kind) {
    case GEO_FLIP: /* each axis flipped with probability 1/2 */
        if ((c->flip & 1) && u0 < 0.5) m[0] = -1, m[2] = W1;
        if ((c->flip & 2) && u1 < 0.5) m[4] = -1, m[5] = H1;
        break;
    case GEO_TRANSLATION: {
        double dy = (c->lo[0] + u0 * (c->hi[0] - c->lo[0])) * (double)h;
        double dx = (c->lo[1] + u1 * (c->hi[1] - c->lo[1])) * (double)w;
        m[2] = -dx, m[5] = -dy;
        break;
    }
    case GEO_ROTATION: {
        double a = (c->lo[0] + u0 * (c->hi[0] - c->lo[0])) * 2.0 * M_PI, cs = cos(a), sn = sin(a);
        m[0] = cs, m[1] = -sn, m[2] = (W1 - (cs * W1 - sn * H1)) / 2;
        m[3] = sn, m[4] = cs, m[5] = (H1 - (sn * W1 + cs * H1)) / 2;
        break;
    }
    case GEO_ZOOM: {
        double zy = 1.0 + c->lo[0] + u0 * (c->hi[0] - c->lo[0]);
        double zx = c->width_set ? 1.0 + c->lo[1] + u1 * (c->hi[1] - c->lo[1]) : zy;
        m[0] = zx, m[2] = W1 / 2 * (1 - zx);
        m[4] = zy, m[5] = H1 / 2 * (1 - zy);
        break;
    }
    }
}

/* TensorFlow's map of a coordinate outside [0, len - 1] by the fill mode (constant: unchanged). */
static double map_coord(double v, int64_t len, fill_mode f) {
    double n = (double)len;
    switch (f) {
    case FILL_REFLECT:
        if (v < 0) {
            if (len <= 1) return 0;
            double sz2 = 2 * n;
            if (v < -sz2) v += sz2 * (double)(int64_t)(-v / sz2);
            v = v < -n ? v + sz2 : -v - 1;
        } else if (v > n - 1) {
            if (len <= 1) return 0;
            double sz2 = 2 * n;
            v -= sz2 * (double)(int64_t)(v / sz2);
            if (v >= n) v = sz2 - v - 1;
        }
        break;
    case FILL_WRAP:
        if (v < 0) {
            if (len <= 1) return 0;
            v += n * (double)((int64_t)(-v / (n - 1)) + 1);
        } else if (v > n - 1) {
            if (len <= 1) return 0;
            v -= n * (double)(int64_t)(v / (n - 1));
        }
        break;
    case FILL_NEAREST:
        break;
    case FILL_CONSTANT:
        return v;
    }
    return v < 0 ? 0 : v > n - 1 ? n - 1 : v;
}

/* Up to 4 reads of one output pixel: the pixel offsets (-1: outside, fill_value) and weights. */
typedef struct reads {
    int64_t at[4];
    float wt[4];
} reads;

static reads pixel_reads(const geo_cfg *c, const double m[6], int64_t ox, int64_t oy, int64_t h, int64_t w) {
    double x = map_coord(m[0] * ox + m[1] * oy + m[2], w, c->fill);
    double y = map_coord(m[3] * ox + m[4] * oy + m[5], h, c->fill);
    reads r = {{-1, -1, -1, -1}, {0, 0, 0, 0}};
    if (c->nearest) {
        double rx = round(x), ry = round(y);
        if (rx >= 0 && rx < w && ry >= 0 && ry < h) r.at[0] = (int64_t)ry * w + (int64_t)rx;
        r.wt[0] = 1;
        return r;
    }
    double x0 = floor(x), y0 = floor(y), fx = x - x0, fy = y - y0;
    for (int k = 0; k < 4; k++) {
        double yy = y0 + (k >> 1), xx = x0 + (k & 1);
        r.wt[k] = (float)((k >> 1 ? fy : 1 - fy) * (k & 1 ? fx : 1 - fx));
        if (xx >= 0 && xx < w && yy >= 0 && yy < h) r.at[k] = (int64_t)yy * w + (int64_t)xx;
    }
    return r;
}

/* forward: src x -> dst y; adjoint: src dy -> dst dx (zeroed here). */
static void transform(const tnt_layer *l, uint64_t seed, int64_t batch, int64_t offset, const float *src, float *dst,
                      bool adjoint) {
    const geo_cfg *c = l->priv;
    const int64_t h = l->in_shape.dim[0], w = l->in_shape.dim[1], ch = l->in_shape.dim[2], per = h * w * ch;
    if (adjoint) memset(dst, 0, (size_t)(batch * per) * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < batch; b++) {
        double m[6];
        sample_map(c, seed, (uint64_t)(offset + b), h, w, m);
        const float *s = src + b * per;
        float *d = dst + b * per;
        for (int64_t oy = 0; oy < h; oy++)
            for (int64_t ox = 0; ox < w; ox++) {
                reads r = pixel_reads(c, m, ox, oy, h, w);
                const int64_t o = (oy * w + ox) * ch;
                for (int64_t k = 0; k < ch; k++) {
                    if (adjoint) {
                        for (int t = 0; t < 4; t++)
                            if (r.at[t] >= 0 && r.wt[t] != 0) d[r.at[t] * ch + k] += r.wt[t] * s[o + k];
                        continue;
                    }
                    float v = 0;
                    for (int t = 0; t < 4; t++)
                        if (r.wt[t] != 0) v += r.wt[t] * (r.at[t] >= 0 ? s[r.at[t] * ch + k] : c->fill_value);
                    d[o + k] = v;
                }
            }
    }
}

static tnt_status geo_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const geo_cfg *c = l->priv;
    const int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    uint64_t seed = a->training ? tnt__hash64((c->seed ? c->seed : l->seed) ^ a->seed) | 1 : 0;
    *(uint64_t *)a->workspace = seed;
    if (!seed) {
        if (a->y != a->x) memcpy(a->y, a->x, (size_t)n * sizeof(float));
    } else {
        transform(l, seed, a->batch, a->sample_offset, a->x, a->y, false);
    }
    if (a->preact) memcpy(a->preact, a->y, (size_t)n * sizeof(float));
    return TNT_OK;
}

static tnt_status geo_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    uint64_t seed = *(const uint64_t *)a->workspace;
    const int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    if (!seed) {
        if (a->dx != a->dy) memcpy(a->dx, a->dy, (size_t)n * sizeof(float));
    } else {
        transform(l, seed, a->batch, a->sample_offset, a->dy, a->dx, true);
    }
    return TNT_OK;
}

static void geo_destroy(tnt_layer *l) { free(l->priv); }

/* ---- config ------------------------------------------------------------------------------- */

static tnt_status add_factor(cJSON *c, const char *key, float lo, float hi) {
    cJSON *v = cJSON_AddArrayToObject(c, key);
    TNT_KJ(v);
    TNT_KJ(cJSON_AddItemToArray(v, cJSON_CreateNumber(tnt__kj_f(lo))) ? v : NULL);
    TNT_KJ(cJSON_AddItemToArray(v, cJSON_CreateNumber(tnt__kj_f(hi))) ? v : NULL);
    return TNT_OK;
}

static tnt_status geo_get_config(const tnt_layer *l, cJSON *c) {
    const geo_cfg *p = l->priv;
    switch (p->kind) {
    case GEO_FLIP:
        TNT_KJ(cJSON_AddStringToObject(c, "mode", flip_names[p->flip - 1]));
        break;
    case GEO_ROTATION:
        TNT_KJ_S(add_factor(c, "factor", p->lo[0], p->hi[0]));
        break;
    default:
        TNT_KJ_S(add_factor(c, "height_factor", p->lo[0], p->hi[0]));
        if (p->kind == GEO_TRANSLATION || p->width_set) TNT_KJ_S(add_factor(c, "width_factor", p->lo[1], p->hi[1]));
        else TNT_KJ(cJSON_AddNullToObject(c, "width_factor"));
    }
    if (p->kind != GEO_FLIP) {
        TNT_KJ(cJSON_AddStringToObject(c, "fill_mode", fill_names[p->fill]));
        TNT_KJ(cJSON_AddNumberToObject(c, "fill_value", tnt__kj_f(p->fill_value)));
        TNT_KJ(cJSON_AddStringToObject(c, "interpolation", p->nearest ? "nearest" : "bilinear"));
    }
    if (p->seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)p->seed));
    else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    return TNT_OK;
}

/* fill_mode, interpolation, fill_value, seed and channels_last data_format into opts. */
static tnt_status read_common(const cJSON *c, tnt_image_fill *f, uint64_t *seed, const tnt__kj_ctx *k) {
    bool bad = false;
    double v = 0;
    f->fill_mode = tnt__kj_str(c, "fill_mode", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    f->interpolation = tnt__kj_str(c, "interpolation", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    TNT_KJ_S(tnt__kj_num(c, "fill_value", false, 0, &v, k));
    f->fill_value = (float)v;
    TNT_KJ_S(tnt__kj_check_data_format(c, k));
    if (tnt__kj_channels_first(c))
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "data_format \"channels_first\" (expected \"channels_last\")");
    return tnt__kj_seed(c, seed, k);
}

static tnt_layer *flip_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    bool bad = false;
    uint64_t seed = 0;
    const char *mode = tnt__kj_str(c, "mode", &bad, k);
    if (bad) return NULL;
    TNT_KJ_READ(tnt__kj_seed(c, &seed, k));
    return tnt__kj_built(tnt_random_flip(mode, seed, k->name), k);
}

static tnt_layer *translation_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    float f[4] = {0};
    bool set = false;
    tnt_image_fill fill = {0};
    uint64_t seed = 0;
    TNT_KJ_READ(tnt__kj_factor(c, "height_factor", true, true, &f[0], &f[1], &set, k));
    TNT_KJ_READ(tnt__kj_factor(c, "width_factor", true, true, &f[2], &f[3], &set, k));
    TNT_KJ_READ(read_common(c, &fill, &seed, k));
    return tnt__kj_built(tnt_random_translation(f[0], f[1], f[2], f[3], &fill, seed, k->name), k);
}

static tnt_layer *rotation_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    float lo = 0, hi = 0;
    bool set = false;
    tnt_image_fill fill = {0};
    uint64_t seed = 0;
    TNT_KJ_READ(tnt__kj_factor(c, "factor", true, true, &lo, &hi, &set, k));
    TNT_KJ_READ(read_common(c, &fill, &seed, k));
    return tnt__kj_built(tnt_random_rotation(lo, hi, &fill, seed, k->name), k);
}

static tnt_layer *zoom_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    float f[4] = {0};
    bool set = false;
    tnt_image_fill fill = {0};
    uint64_t seed = 0;
    TNT_KJ_READ(tnt__kj_factor(c, "height_factor", true, true, &f[0], &f[1], &set, k));
    TNT_KJ_READ(tnt__kj_factor(c, "width_factor", false, true, &f[2], &f[3], &set, k));
    if (!set) f[2] = f[3] = NAN;
    TNT_KJ_READ(read_common(c, &fill, &seed, k));
    return tnt__kj_built(tnt_random_zoom(f[0], f[1], f[2], f[3], &fill, seed, k->name), k);
}

#define GEO_OPS(fn, cls)                                                                           \
    const tnt__layer_ops tnt__random_##fn##_ops = {                                               \
        .class_name = cls,                                                                         \
        .get_config = geo_get_config,                                                              \
        .from_config = fn##_from_config,                                                           \
        .build = geo_build,                                                                        \
        .workspace_size = geo_workspace,                                                           \
        .forward = geo_forward,                                                                    \
        .backward = geo_backward,                                                                  \
        .destroy = geo_destroy,                                                                    \
    };

GEO_OPS(flip, "RandomFlip")
GEO_OPS(translation, "RandomTranslation")
GEO_OPS(rotation, "RandomRotation")
GEO_OPS(zoom, "RandomZoom")

/* ---- constructors ------------------------------------------------------------------------- */

static tnt_layer *geo_new(const tnt__layer_ops *ops, geo_cfg cfg, const char *name) {
    geo_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

/* fill options into cfg; false with the error set when a name or value is not Keras's. */
static bool take_fill(const char *cls, const tnt_image_fill *f, geo_cfg *cfg) {
    const char *mode = f && f->fill_mode ? f->fill_mode : "reflect";
    const char *interp = f && f->interpolation ? f->interpolation : "bilinear";
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(mode, fill_names[i])) m = i;
    if (m < 0) {
        tnt__error(TNT_ERR_ARG, "%s: fill_mode \"%.32s\" (expected reflect, wrap, nearest or constant)", cls, mode);
        return false;
    }
    if (strcmp(interp, "bilinear") && strcmp(interp, "nearest")) {
        tnt__error(TNT_ERR_ARG, "%s: interpolation \"%.32s\" (expected bilinear or nearest)", cls, interp);
        return false;
    }
    if (f && !isfinite(f->fill_value)) {
        tnt__error(TNT_ERR_ARG, "%s: fill_value %g (expected a finite value)", cls, (double)f->fill_value);
        return false;
    }
    cfg->fill = (fill_mode)m;
    cfg->nearest = !strcmp(interp, "nearest");
    cfg->fill_value = f ? f->fill_value : 0.0f;
    return true;
}

/* lo <= hi, both finite and within [min, max]. */
static bool range_ok(const char *cls, const char *key, float lo, float hi, float min, float max) {
    if (isfinite(lo) && isfinite(hi) && lo <= hi && lo >= min && hi <= max) return true;
    tnt__error(TNT_ERR_ARG, "%s: %s (%g, %g) (expected lower <= upper within [%g, %g])", cls, key, (double)lo,
               (double)hi, (double)min, (double)max);
    return false;
}

tnt_layer *tnt_random_flip(const char *mode, uint64_t seed, const char *name) {
    const char *m = mode ? mode : "horizontal_and_vertical";
    int flip = 0;
    for (int i = 0; i < 3; i++)
        if (!strcmp(m, flip_names[i])) flip = i + 1;
    if (!flip) {
        tnt__error(TNT_ERR_ARG, "RandomFlip: mode \"%.40s\" (expected horizontal, vertical or horizontal_and_vertical)",
                   m);
        return NULL;
    }
    return geo_new(&tnt__random_flip_ops, (geo_cfg){.kind = GEO_FLIP, .flip = flip, .seed = seed}, name);
}

tnt_layer *tnt_random_translation(float height_lo, float height_hi, float width_lo, float width_hi,
                                  const tnt_image_fill *fill, uint64_t seed, const char *name) {
    geo_cfg c = {.kind = GEO_TRANSLATION, .lo = {height_lo, width_lo}, .hi = {height_hi, width_hi}, .seed = seed};
    if (!range_ok("RandomTranslation", "height_factor", height_lo, height_hi, -1, 1) ||
        !range_ok("RandomTranslation", "width_factor", width_lo, width_hi, -1, 1) ||
        !take_fill("RandomTranslation", fill, &c))
        return NULL;
    return geo_new(&tnt__random_translation_ops, c, name);
}

tnt_layer *tnt_random_rotation(float lo, float hi, const tnt_image_fill *fill, uint64_t seed, const char *name) {
    geo_cfg c = {.kind = GEO_ROTATION, .lo = {lo, 0}, .hi = {hi, 0}, .seed = seed};
    if (!range_ok("RandomRotation", "factor", lo, hi, -1e6f, 1e6f) || !take_fill("RandomRotation", fill, &c))
        return NULL;
    return geo_new(&tnt__random_rotation_ops, c, name);
}

tnt_layer *tnt_random_zoom(float height_lo, float height_hi, float width_lo, float width_hi,
                           const tnt_image_fill *fill, uint64_t seed, const char *name) {
    bool width_set = !isnan(width_lo) || !isnan(width_hi);
    geo_cfg c = {.kind = GEO_ZOOM, .lo = {height_lo, width_set ? width_lo : 0},
                 .hi = {height_hi, width_set ? width_hi : 0}, .width_set = width_set, .seed = seed};
    if (!range_ok("RandomZoom", "height_factor", height_lo, height_hi, -1, 1e6f) ||
        (width_set && !range_ok("RandomZoom", "width_factor", width_lo, width_hi, -1, 1e6f)) ||
        !take_fill("RandomZoom", fill, &c))
        return NULL;
    return geo_new(&tnt__random_zoom_ops, c, name);
}
