/* resizing.c: Keras's deterministic image preprocessing layers on (height, width, channels):
 * Resizing (bilinear or nearest, as tf.image.resize with half-pixel centers and no antialias;
 * crop_to_aspect_ratio first takes the largest centered window of the target's aspect ratio, as
 * Keras's smart_resize) and CenterCrop (the centered window; an input smaller than the target is
 * resized to it after the aspect-ratio crop, as Keras) and RandomCrop (in training a window of the
 * target size at a random offset per image, drawn as Dropout's noise from (step seed, global sample
 * index) so any split over ranks draws the same; at inference, or when the input is smaller, the
 * largest centered window of the target's aspect ratio resized, as Keras). Backward is the adjoint of the same
 * gathers (a scatter of dy), so the layers can sit anywhere in a model. */
#include "layers/layer.h"
#include "layers/keras_config.h"

#include <math.h>

typedef struct resize_cfg {
    int height, width;
    bool nearest;      /* else bilinear */
    bool crop_aspect;  /* Resizing's crop_to_aspect_ratio */
    bool center_crop;  /* CenterCrop */
    bool random_crop;  /* RandomCrop */
    uint64_t seed;     /* RandomCrop's; 0: derive from the model's seed */
} resize_cfg;

/* The input window (top, left, rows, cols) that is resized to the output: the whole image, the
 * centered crop of the target size, or the centered crop of the target's aspect ratio. */
typedef struct window {
    int64_t top, left, rows, cols;
    bool resample; /* the window's size differs from the output's */
} window;

static window input_window(const resize_cfg *c, int64_t h, int64_t w) {
    window r = {0, 0, h, w, true};
    bool aspect = c->crop_aspect || c->random_crop;
    if (c->center_crop) {
        if (h >= c->height && w >= c->width)
            return (window){(h - c->height) / 2, (w - c->width) / 2, c->height, c->width, false};
        aspect = true; /* Keras: a too small input is resized, keeping the aspect ratio by a crop */
    }
    if (aspect) {
        int64_t ch = (int64_t)((double)w * c->height / c->width), cw = (int64_t)((double)h * c->width / c->height);
        r.rows = ch < h ? (ch < 1 ? 1 : ch) : h;
        r.cols = cw < w ? (cw < 1 ? 1 : cw) : w;
        r.top = (int64_t)((double)(h - r.rows) / 2);
        r.left = (int64_t)((double)(w - r.cols) / 2);
    }
    r.resample = r.rows != c->height || r.cols != c->width;
    return r;
}

static tnt_status resize_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    const resize_cfg *c = l->priv;
    if (in.ndim != 3) {
        char b[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s (expected (height, width, channels))",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    }
    *out = TNT_SHAPE(c->height, c->width, in.dim[2]);
    return TNT_OK;
}

/* One output coordinate's two source indices and the weight of the second, along an axis of
 * n_in window cells resized to n_out (tf.image.resize, half_pixel_centers). */
typedef struct tap {
    int64_t lo, hi;
    float frac;
} tap;

static tap axis_tap(int64_t o, int64_t n_in, int64_t n_out, bool nearest) {
    double scale = (double)n_in / (double)n_out;
    if (nearest) {
        int64_t i = (int64_t)floor(((double)o + 0.5) * scale);
        if (i > n_in - 1) i = n_in - 1;
        return (tap){i, i, 0.0f};
    }
    double src = ((double)o + 0.5) * scale - 0.5, f = floor(src);
    int64_t lo = (int64_t)f, hi = (int64_t)ceil(src);
    if (lo < 0) lo = 0;
    if (hi > n_in - 1) hi = n_in - 1;
    return (tap){lo, hi, (float)(src - f)};
}

/* x (batch, h, w, ch) -> y (batch, H, W, ch); with adjoint, dy -> dx instead (dx zeroed first).
 * seed (RandomCrop in training, else 0): each sample's window at a random offset, from sample
 * offset + b's draws. */
static void resample(const tnt_layer *l, int64_t batch, const float *src, float *dst, bool adjoint, uint64_t seed,
                     int64_t offset) {
    const resize_cfg *c = l->priv;
    const int64_t h = l->in_shape.dim[0], w = l->in_shape.dim[1], ch = l->in_shape.dim[2];
    const int64_t H = c->height, W = c->width;
    const window whole = input_window(c, h, w);
    const bool random = seed && h >= H && w >= W;
    if (adjoint) memset(dst, 0, (size_t)(batch * h * w * ch) * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < batch; b++) {
        const float *in = adjoint ? NULL : src + b * h * w * ch;
        float *out = adjoint ? NULL : dst + b * H * W * ch;
        const float *g = adjoint ? src + b * H * W * ch : NULL;
        float *gx = adjoint ? dst + b * h * w * ch : NULL;
        window win = whole;
        if (random) { /* Keras: offsets uniform in [0, h - height] and [0, w - width] */
            uint64_t sample = (uint64_t)(offset + b);
            int64_t top = (int64_t)(tnt__rand_uniform(seed, 2 * sample) * (double)(h - H + 1));
            int64_t left = (int64_t)(tnt__rand_uniform(seed, 2 * sample + 1) * (double)(w - W + 1));
            win = (window){top < h - H ? top : h - H, left < w - W ? left : w - W, H, W, false};
        }
        for (int64_t oy = 0; oy < H; oy++) {
            tap ty = win.resample ? axis_tap(oy, win.rows, H, c->nearest) : (tap){oy, oy, 0};
            for (int64_t ox = 0; ox < W; ox++) {
                tap tx = win.resample ? axis_tap(ox, win.cols, W, c->nearest) : (tap){ox, ox, 0};
                int64_t r0 = win.top + ty.lo, r1 = win.top + ty.hi, c0 = win.left + tx.lo, c1 = win.left + tx.hi;
                float w00 = (1 - ty.frac) * (1 - tx.frac), w01 = (1 - ty.frac) * tx.frac;
                float w10 = ty.frac * (1 - tx.frac), w11 = ty.frac * tx.frac;
                const int64_t i00 = (r0 * w + c0) * ch, i01 = (r0 * w + c1) * ch;
                const int64_t i10 = (r1 * w + c0) * ch, i11 = (r1 * w + c1) * ch, o = (oy * W + ox) * ch;
                for (int64_t k = 0; k < ch; k++) {
                    if (adjoint) {
                        float d = g[o + k];
                        gx[i00 + k] += w00 * d;
                        gx[i01 + k] += w01 * d;
                        gx[i10 + k] += w10 * d;
                        gx[i11 + k] += w11 * d;
                    } else {
                        /* TensorFlow's order: along the width, then the height */
                        float top = in[i00 + k] + (in[i01 + k] - in[i00 + k]) * tx.frac;
                        float bot = in[i10 + k] + (in[i11 + k] - in[i10 + k]) * tx.frac;
                        out[o + k] = top + (bot - top) * ty.frac;
                    }
                }
            }
        }
    }
}

static size_t crop_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return sizeof(uint64_t);
}

static tnt_status resize_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const resize_cfg *c = l->priv;
    uint64_t seed = 0;
    if (c->random_crop) {
        seed = a->training ? tnt__hash64((c->seed ? c->seed : l->seed) ^ a->seed) | 1 : 0;
        *(uint64_t *)a->workspace = seed;
    }
    resample(l, a->batch, a->x, a->y, false, seed, a->sample_offset);
    if (a->preact) memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float));
    return TNT_OK;
}

static tnt_status resize_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const resize_cfg *c = l->priv;
    uint64_t seed = c->random_crop ? *(const uint64_t *)a->workspace : 0;
    if (a->dx) resample(l, a->batch, a->dy, a->dx, true, seed, a->sample_offset);
    return TNT_OK;
}

static void resize_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status resize_get_config(const tnt_layer *l, cJSON *c) {
    const resize_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "height", p->height));
    TNT_KJ(cJSON_AddNumberToObject(c, "width", p->width));
    if (p->random_crop) {
        if (p->seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)p->seed));
        else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    }
    if (p->center_crop || p->random_crop) return TNT_OK;
    TNT_KJ(cJSON_AddStringToObject(c, "interpolation", p->nearest ? "nearest" : "bilinear"));
    TNT_KJ(cJSON_AddBoolToObject(c, "crop_to_aspect_ratio", p->crop_aspect));
    return TNT_OK;
}

/* Keras 3's data_format: only channels_last is run here. */
static tnt_status want_channels_last(const cJSON *c, const tnt__kj_ctx *k) {
    TNT_KJ_S(tnt__kj_check_data_format(c, k));
    if (tnt__kj_channels_first(c))
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "data_format \"channels_first\" (expected \"channels_last\")");
    return TNT_OK;
}

static tnt_layer *resize_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int h = 0, w = 0;
    bool crop = false, bad = false;
    TNT_KJ_READ(tnt__kj_int(c, "height", true, 0, &h, k));
    TNT_KJ_READ(tnt__kj_int(c, "width", true, 0, &w, k));
    TNT_KJ_READ(tnt__kj_bool(c, "crop_to_aspect_ratio", false, &crop, k));
    TNT_KJ_READ(tnt__kj_want_bool(c, "pad_to_aspect_ratio", false, k));
    TNT_KJ_READ(tnt__kj_want_bool(c, "antialias", false, k));
    TNT_KJ_READ(want_channels_last(c, k));
    const char *interp = tnt__kj_str(c, "interpolation", &bad, k);
    if (bad) return NULL;
    return tnt__kj_built(tnt_resizing(h, w, interp, crop, k->name), k);
}

static tnt_layer *center_crop_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int h = 0, w = 0;
    TNT_KJ_READ(tnt__kj_int(c, "height", true, 0, &h, k));
    TNT_KJ_READ(tnt__kj_int(c, "width", true, 0, &w, k));
    TNT_KJ_READ(want_channels_last(c, k));
    return tnt__kj_built(tnt_center_crop(h, w, k->name), k);
}

static tnt_layer *random_crop_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int h = 0, w = 0;
    double seed = 0;
    TNT_KJ_READ(tnt__kj_int(c, "height", true, 0, &h, k));
    TNT_KJ_READ(tnt__kj_int(c, "width", true, 0, &w, k));
    TNT_KJ_READ(want_channels_last(c, k));
    if (!tnt__kj_absent(tnt__kj_item(c, "seed"))) {
        TNT_KJ_READ(tnt__kj_num(c, "seed", true, 0, &seed, k));
        if (!(seed >= 0 && seed == floor(seed)))
            return tnt__kj_fail(k, TNT_ERR_FORMAT, "key \"seed\": %g (expected a whole number >= 0)", seed);
    }
    return tnt__kj_built(tnt_random_crop(h, w, (uint64_t)seed, k->name), k);
}

const tnt__layer_ops tnt__random_crop_ops = {
    .class_name = "RandomCrop",
    .get_config = resize_get_config,
    .from_config = random_crop_from_config,
    .build = resize_build,
    .workspace_size = crop_workspace,
    .forward = resize_forward,
    .backward = resize_backward,
    .destroy = resize_destroy,
};

const tnt__layer_ops tnt__resizing_ops = {
    .class_name = "Resizing",
    .get_config = resize_get_config,
    .from_config = resize_from_config,
    .build = resize_build,
    .forward = resize_forward,
    .backward = resize_backward,
    .destroy = resize_destroy,
};

const tnt__layer_ops tnt__center_crop_ops = {
    .class_name = "CenterCrop",
    .get_config = resize_get_config,
    .from_config = center_crop_from_config,
    .build = resize_build,
    .forward = resize_forward,
    .backward = resize_backward,
    .destroy = resize_destroy,
};

static tnt_layer *resize_new(const tnt__layer_ops *ops, resize_cfg cfg, const char *name) {
    if (cfg.height < 1 || cfg.width < 1) {
        tnt__error(TNT_ERR_ARG, "%s: height %d, width %d (expected both >= 1)", ops->class_name, cfg.height,
                   cfg.width);
        return NULL;
    }
    resize_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_resizing(int height, int width, const char *interpolation, bool crop_to_aspect_ratio,
                        const char *name) {
    bool nearest = interpolation && !strcmp(interpolation, "nearest");
    if (interpolation && !nearest && strcmp(interpolation, "bilinear")) {
        tnt__error(TNT_ERR_UNSUPPORTED, "Resizing: interpolation \"%.32s\" (expected \"bilinear\" or \"nearest\")",
                   interpolation);
        return NULL;
    }
    return resize_new(&tnt__resizing_ops,
                      (resize_cfg){.height = height, .width = width, .nearest = nearest,
                                   .crop_aspect = crop_to_aspect_ratio},
                      name);
}

tnt_layer *tnt_center_crop(int height, int width, const char *name) {
    return resize_new(&tnt__center_crop_ops, (resize_cfg){.height = height, .width = width, .center_crop = true},
                      name);
}

tnt_layer *tnt_random_crop(int height, int width, uint64_t seed, const char *name) {
    return resize_new(&tnt__random_crop_ops,
                      (resize_cfg){.height = height, .width = width, .random_crop = true, .seed = seed}, name);
}
