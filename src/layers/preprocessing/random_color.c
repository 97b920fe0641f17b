/* random_color.c: Keras's random color augmentations on (height, width, channels), active only in
 * training (identity at inference, as Keras):
 *   RandomContrast: per image a factor f uniform in [1 - lower, 1 + upper]; each channel becomes
 *     (x - mean) * f + mean (mean over the image's pixels of that channel), clipped to value_range;
 *   RandomBrightness: per image a delta uniform in [lower, upper] times the width of value_range,
 *     added to every value, then clipped to value_range.
 * Backward passes dy where the clip did not bind (as clip_by_value's gradient); contrast also
 * through the mean: dx = f g + (1 - f) mean(g) per channel. As Dropout, draws are keyed on (step
 * seed, global sample index), never stored: backward recomputes them, and any split of the batch
 * over ranks draws the same. */
#include "layers/layer.h"
#include "layers/keras_config.h"

#include <math.h>

typedef struct color_cfg {
    bool contrast;       /* else brightness */
    float lower, upper;  /* Keras's factor */
    float vmin, vmax;    /* value_range */
    uint64_t seed;       /* 0: derive from the model's seed */
} color_cfg;

static tnt_status color_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    if (in.ndim != 3) {
        char b[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s (expected (height, width, channels))",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    }
    *out = in;
    return TNT_OK;
}

static size_t color_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return sizeof(uint64_t);
}

/* The sample's contrast factor or brightness delta. */
static double draw(const color_cfg *c, uint64_t seed, uint64_t sample) {
    double u = tnt__rand_uniform(seed, sample);
    if (c->contrast) return (1.0 - c->lower) + u * (c->upper + c->lower);
    return (c->lower + u * (c->upper - c->lower)) * (c->vmax - c->vmin);
}

/* One sample (pixels p of ch channels): y (and the per-value clip mask in pass) from x; the
 * channel means into mean[ch]. */
static void channel_means(const float *x, int64_t p, int64_t ch, double *mean) {
    for (int64_t k = 0; k < ch; k++) mean[k] = 0;
    for (int64_t i = 0; i < p; i++)
        for (int64_t k = 0; k < ch; k++) mean[k] += x[i * ch + k];
    for (int64_t k = 0; k < ch; k++) mean[k] /= (double)p;
}

static inline double unclipped(const color_cfg *c, double v, double f, double mean) {
    return c->contrast ? (v - mean) * f + mean : v + f;
}

static tnt_status color_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const color_cfg *c = l->priv;
    const int64_t p = l->in_shape.dim[0] * l->in_shape.dim[1], ch = l->in_shape.dim[2], per = p * ch;
    const int64_t n = a->batch * per;
    uint64_t seed = a->training ? tnt__hash64((c->seed ? c->seed : l->seed) ^ a->seed) | 1 : 0;
    *(uint64_t *)a->workspace = seed;
    if (!seed) {
        if (a->y != a->x) memcpy(a->y, a->x, (size_t)n * sizeof(float));
    } else {
        tnt_status st = TNT_OK;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < a->batch; b++) {
            double *mean = c->contrast ? malloc((size_t)ch * sizeof(double)) : NULL;
            if (c->contrast && !mean) {
                st = TNT_ERR_NOMEM;
                continue;
            }
            const float *x = a->x + b * per;
            float *y = a->y + b * per;
            double f = draw(c, seed, (uint64_t)(a->sample_offset + b));
            if (mean) channel_means(x, p, ch, mean);
            for (int64_t i = 0; i < per; i++) {
                double v = unclipped(c, x[i], f, mean ? mean[i % ch] : 0);
                y[i] = (float)(v < c->vmin ? c->vmin : v > c->vmax ? c->vmax : v);
            }
            free(mean);
        }
        if (st) return tnt__error(st, "%s \"%s\": out of memory", l->ops->class_name, l->name);
    }
    if (a->preact) memcpy(a->preact, a->y, (size_t)n * sizeof(float));
    return TNT_OK;
}

static tnt_status color_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const color_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t p = l->in_shape.dim[0] * l->in_shape.dim[1], ch = l->in_shape.dim[2], per = p * ch;
    uint64_t seed = *(const uint64_t *)a->workspace;
    if (!seed) {
        if (a->dx != a->dy) memcpy(a->dx, a->dy, (size_t)(a->batch * per) * sizeof(float));
        return TNT_OK;
    }
    tnt_status st = TNT_OK;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < a->batch; b++) {
        double *mean = c->contrast ? malloc(2 * (size_t)ch * sizeof(double)) : NULL;
        if (c->contrast && !mean) {
            st = TNT_ERR_NOMEM;
            continue;
        }
        const float *x = a->x + b * per, *dy = a->dy + b * per;
        float *dx = a->dx + b * per;
        double f = draw(c, seed, (uint64_t)(a->sample_offset + b)), *gmean = mean ? mean + ch : NULL;
        if (mean) {
            channel_means(x, p, ch, mean);
            for (int64_t k = 0; k < ch; k++) gmean[k] = 0;
        }
        for (int64_t i = 0; i < per; i++) {
            double v = unclipped(c, x[i], f, mean ? mean[i % ch] : 0);
            float g = v < c->vmin || v > c->vmax ? 0.0f : dy[i];
            dx[i] = c->contrast ? (float)(f * g) : g;
            if (gmean) gmean[i % ch] += g;
        }
        if (gmean)
            for (int64_t i = 0; i < per; i++) dx[i] += (float)((1 - f) * gmean[i % ch] / (double)p);
        free(mean);
    }
    if (st) return tnt__error(st, "%s \"%s\": out of memory", l->ops->class_name, l->name);
    return TNT_OK;
}

static void color_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status add_pair(cJSON *c, const char *key, float a, float b) {
    cJSON *v = cJSON_AddArrayToObject(c, key);
    TNT_KJ(v);
    TNT_KJ(cJSON_AddItemToArray(v, cJSON_CreateNumber(tnt__kj_f(a))) ? v : NULL);
    TNT_KJ(cJSON_AddItemToArray(v, cJSON_CreateNumber(tnt__kj_f(b))) ? v : NULL);
    return TNT_OK;
}

static tnt_status color_get_config(const tnt_layer *l, cJSON *c) {
    const color_cfg *p = l->priv;
    TNT_KJ_S(add_pair(c, "factor", p->lower, p->upper));
    TNT_KJ_S(add_pair(c, "value_range", p->vmin, p->vmax));
    if (p->seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)p->seed));
    else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    return TNT_OK;
}

static tnt_layer *color_from_config(const cJSON *c, const tnt__kj_ctx *k, bool contrast) {
    float lo = 0, hi = 0, vmin = 0, vmax = 255;
    uint64_t seed = 0;
    TNT_KJ_READ(tnt__kj_factor(c, "factor", true, !contrast, &lo, &hi, NULL, k));
    TNT_KJ_READ(tnt__kj_factor(c, "value_range", false, false, &vmin, &vmax, NULL, k));
    TNT_KJ_READ(tnt__kj_seed(c, &seed, k));
    TNT_KJ_READ(tnt__kj_check_data_format(c, k));
    if (tnt__kj_channels_first(c))
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "data_format \"channels_first\" (expected \"channels_last\")");
    return tnt__kj_built(contrast ? tnt_random_contrast(lo, hi, vmin, vmax, seed, k->name)
                                  : tnt_random_brightness(lo, hi, vmin, vmax, seed, k->name),
                         k);
}

static tnt_layer *contrast_from_config(const cJSON *c, const tnt__kj_ctx *k) { return color_from_config(c, k, true); }
static tnt_layer *brightness_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return color_from_config(c, k, false);
}

const tnt__layer_ops tnt__random_contrast_ops = {
    .class_name = "RandomContrast",
    .get_config = color_get_config,
    .from_config = contrast_from_config,
    .build = color_build,
    .workspace_size = color_workspace,
    .forward = color_forward,
    .backward = color_backward,
    .destroy = color_destroy,
};

const tnt__layer_ops tnt__random_brightness_ops = {
    .class_name = "RandomBrightness",
    .get_config = color_get_config,
    .from_config = brightness_from_config,
    .build = color_build,
    .workspace_size = color_workspace,
    .forward = color_forward,
    .backward = color_backward,
    .destroy = color_destroy,
};

static tnt_layer *color_new(const tnt__layer_ops *ops, color_cfg cfg, const char *name) {
    if (!(isfinite(cfg.vmin) && isfinite(cfg.vmax) && cfg.vmin < cfg.vmax)) {
        tnt__error(TNT_ERR_ARG, "%s: value_range (%g, %g) (expected finite low < high)", ops->class_name,
                   (double)cfg.vmin, (double)cfg.vmax);
        return NULL;
    }
    color_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_random_contrast(float lower, float upper, float value_min, float value_max, uint64_t seed,
                               const char *name) {
    if (!(lower >= 0 && lower <= 1 && upper >= 0 && isfinite(upper))) {
        tnt__error(TNT_ERR_ARG, "RandomContrast: factor (%g, %g) (expected 0 <= lower <= 1 and upper >= 0)",
                   (double)lower, (double)upper);
        return NULL;
    }
    return color_new(&tnt__random_contrast_ops,
                     (color_cfg){.contrast = true, .lower = lower, .upper = upper, .vmin = value_min,
                                 .vmax = value_max, .seed = seed},
                     name);
}

tnt_layer *tnt_random_brightness(float lower, float upper, float value_min, float value_max, uint64_t seed,
                                 const char *name) {
    if (!(lower >= -1 && upper <= 1 && lower <= upper)) {
        tnt__error(TNT_ERR_ARG, "RandomBrightness: factor (%g, %g) (expected -1 <= lower <= upper <= 1)",
                   (double)lower, (double)upper);
        return NULL;
    }
    return color_new(&tnt__random_brightness_ops,
                     (color_cfg){.lower = lower, .upper = upper, .vmin = value_min, .vmax = value_max, .seed = seed},
                     name);
}
