/* noise.c: Keras's training-time noise layers, identity at inference: SpatialDropout1D/2D/3D
 * (whole channels dropped per sample, kept ones scaled by 1/(1-rate); the channel axis is the last
 * one, or the first with data_format channels_first), GaussianNoise (x + stddev * n),
 * GaussianDropout (x * (1 + sqrt(rate/(1-rate)) * n)), AlphaDropout (dropped values set to SELU's
 * negative saturation, then an affine map that keeps mean and variance, Keras's formula), and
 * ActivityRegularization (identity forward and backward; its l1/l2 penalty is the layer's activity
 * regularizer, layers/regularizer.h).
 *
 * As Dropout (dropout.c), the noise is never stored: the counter-based generator gives the same
 * value for the same (step seed, global index), so backward recomputes it, and a value's noise
 * depends on its sample's index in the global batch (sample_offset), not on how the batch is split
 * across ranks. The step seed sits in an 8-byte workspace, 0 meaning "no noise this step". On the
 * device (gpu/kernels/noise.cu) the same draws, the seed in the layer's device plan. */
#include "layers/layer.h"
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/regularizer.h"

#include <math.h>

typedef enum noise_kind { SPATIAL_DROPOUT, GAUSSIAN_NOISE, GAUSSIAN_DROPOUT, ALPHA_DROPOUT, ACTIVITY_REG } noise_kind;

typedef struct noise_cfg {
    noise_kind kind;
    float rate;    /* dropout rates; GaussianNoise: stddev; ActivityRegularization: l1 */
    float l2;      /* ActivityRegularization */
    int spatial;   /* SpatialDropout: 1, 2 or 3 spatial axes */
    uint64_t seed; /* 0: derive from the model's seed */
} noise_cfg;

static tnt_status noise_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    const noise_cfg *c = l->priv;
    if (c->kind == SPATIAL_DROPOUT && in.ndim != c->spatial + 1) {
        char b[96];
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s%s%s)",
                          l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b), in.ndim, c->spatial + 1,
                          l->channels_first ? "channels, " : "",
                          c->spatial == 1 ? "steps" : c->spatial == 2 ? "height, width" : "depth, height, width",
                          l->channels_first ? "" : ", channels");
    }
    *out = in;
    return TNT_OK;
}

static size_t noise_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return sizeof(uint64_t);
}

/* Keras AlphaDropout's constants: SELU's negative saturation and the affine correction. */
static void alpha_affine(float rate, float *a, float *b, float *alpha_p) {
    const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    double ap = -alpha * scale;
    double av = 1.0 / sqrt((1.0 - rate) * (1.0 + rate * ap * ap));
    *a = (float)av;
    *b = (float)(-av * ap * rate);
    *alpha_p = (float)ap;
}

/* The multiplier of value i (global index g, channel ch) and whether it was kept. */
static inline float noise_factor(const noise_cfg *c, uint64_t seed, uint64_t g, uint64_t spatial_index, bool *kept) {
    switch (c->kind) {
    case SPATIAL_DROPOUT:
        *kept = tnt__rand_uniform(seed, spatial_index) >= c->rate;
        return *kept ? 1.0f / (1.0f - c->rate) : 0.0f;
    case GAUSSIAN_DROPOUT:
        return 1.0f + sqrtf(c->rate / (1.0f - c->rate)) * tnt__rand_normal(seed, g);
    case ALPHA_DROPOUT:
        *kept = tnt__rand_uniform(seed, g) >= c->rate;
        return *kept ? 1.0f : 0.0f;
    default:
        return 1.0f;
    }
}

/* The channel of value i (within its sample of per values) for SpatialDropout, and the count C. */
static inline uint64_t channel_of(int64_t i, int64_t per, int64_t C, bool channels_first) {
    return (uint64_t)(channels_first ? i % per / (per / C) : i % C);
}

static int64_t channel_count(const tnt_layer *l) {
    return l->channels_first ? l->in_shape.dim[0] : l->in_shape.dim[l->in_shape.ndim - 1];
}

/* x, y: (batch, shape...) */
static tnt_status noise_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const noise_cfg *c = l->priv;
    const int64_t per = tnt_shape_numel(l->in_shape), n = a->batch * per, C = channel_count(l);
    const bool cf = l->channels_first;
    bool active = a->training && c->kind != ACTIVITY_REG && c->rate > 0.0f;
    uint64_t seed = active ? tnt__hash64((c->seed ? c->seed : l->seed) ^ a->seed) | 1 : 0;
    *(uint64_t *)a->workspace = seed;
    if (!active) {
        if (a->y != a->x) memcpy(a->y, a->x, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    float ab = 0, ac = 0, alpha_p = 0;
    if (c->kind == ALPHA_DROPOUT) alpha_affine(c->rate, &ab, &ac, &alpha_p);
    const uint64_t base = (uint64_t)(a->sample_offset * per);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint64_t g = base + (uint64_t)i;
        uint64_t sample = (uint64_t)a->sample_offset + (uint64_t)(i / per);
        bool kept = true;
        if (c->kind == GAUSSIAN_NOISE) {
            a->y[i] = a->x[i] + c->rate * tnt__rand_normal(seed, g);
            continue;
        }
        float f = noise_factor(c, seed, g, sample * (uint64_t)C + channel_of(i, per, C, cf), &kept);
        a->y[i] = c->kind == ALPHA_DROPOUT ? ab * (kept ? a->x[i] : alpha_p) + ac : a->x[i] * f;
    }
    return TNT_OK;
}

/* dx = dy * the forward's multiplier (AlphaDropout: a where kept; GaussianNoise: 1) */
static tnt_status noise_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const noise_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t per = tnt_shape_numel(l->in_shape), n = a->batch * per, C = channel_count(l);
    const bool cf = l->channels_first;
    uint64_t seed = *(const uint64_t *)a->workspace;
    if (!seed || c->kind == GAUSSIAN_NOISE) {
        if (a->dx != a->dy) memcpy(a->dx, a->dy, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    float ab = 1, ac = 0, alpha_p = 0;
    if (c->kind == ALPHA_DROPOUT) alpha_affine(c->rate, &ab, &ac, &alpha_p);
    const uint64_t base = (uint64_t)(a->sample_offset * per);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint64_t sample = (uint64_t)a->sample_offset + (uint64_t)(i / per);
        bool kept = true;
        float f = noise_factor(c, seed, base + (uint64_t)i, sample * (uint64_t)C + channel_of(i, per, C, cf), &kept);
        a->dx[i] = a->dy[i] * (c->kind == ALPHA_DROPOUT ? ab * f : f);
    }
    return TNT_OK;
}

/* ---- on the device: the CPU's draws (gpu/kernels/noise.cu), the step's seed kept in the plan
 * that forward and backward of a step share ---- */

#define GPU_BLOCK 256

typedef struct noise_gpu_plan {
    uint64_t seed; /* of the last forward; 0: it was the identity */
} noise_gpu_plan;

static void *noise_gpu_plan_create(tnt_layer *l, int64_t batch) {
    (void)l, (void)batch;
    return tnt__calloc(1, sizeof(noise_gpu_plan));
}

static void noise_gpu_plan_destroy(void *plan) { free(plan); }

/* out = the noise of the step (seed) applied to in: forward on x, backward (gradient) on dy */
static tnt_status noise_gpu_apply(const tnt_layer *l, uint64_t seed, int64_t batch, int64_t sample_offset,
                                  const float *in, float *out, bool gradient) {
    const noise_cfg *c = l->priv;
    long long per = tnt_shape_numel(l->in_shape), n = batch * per, base = sample_offset * per, off = sample_offset;
    long long channels = channel_count(l);
    unsigned long long s = seed, b = (unsigned long long)base;
    unsigned grid = tnt__gpu_grid_for(n, GPU_BLOCK);
    float rate = c->rate;
    if (c->kind == GAUSSIAN_NOISE) {
        void *args[] = {&in, &out, &n, &s, &b, &rate};
        return tnt__gpu_launch("tnt_k_gaussian_noise", grid, GPU_BLOCK, 0, args);
    }
    if (c->kind == GAUSSIAN_DROPOUT) {
        float mult = sqrtf(c->rate / (1.0f - c->rate));
        void *args[] = {&in, &out, &n, &s, &b, &mult};
        return tnt__gpu_launch("tnt_k_gaussian_dropout", grid, GPU_BLOCK, 0, args);
    }
    if (c->kind == ALPHA_DROPOUT) {
        float a, ac, alpha_p;
        int backward = gradient;
        alpha_affine(c->rate, &a, &ac, &alpha_p);
        void *args[] = {&in, &out, &n, &s, &b, &rate, &a, &ac, &alpha_p, &backward};
        return tnt__gpu_launch("tnt_k_alpha_dropout", grid, GPU_BLOCK, 0, args);
    }
    int cf = l->channels_first;
    float scale = 1.0f / (1.0f - c->rate);
    void *args[] = {&in, &out, &n, &s, &per, &channels, &off, &cf, &rate, &scale};
    return tnt__gpu_launch("tnt_k_spatial_dropout", grid, GPU_BLOCK, 0, args);
}

static tnt_status noise_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    noise_gpu_plan *g = plan;
    const noise_cfg *c = l->priv;
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    bool active = a->training && c->kind != ACTIVITY_REG && c->rate > 0.0f;
    g->seed = active ? tnt__hash64((c->seed ? c->seed : l->seed) ^ a->seed) | 1 : 0;
    if (!g->seed) return a->y == a->x ? TNT_OK : tnt__gpu_copy_on_device(a->y, a->x, bytes, TNT__GPU_COMPUTE);
    return noise_gpu_apply(l, g->seed, a->batch, a->sample_offset, a->x, a->y, false);
}

static tnt_status noise_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const noise_gpu_plan *g = plan;
    const noise_cfg *c = l->priv;
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    if (!a->dx) return TNT_OK;
    if (!g->seed || c->kind == GAUSSIAN_NOISE) /* additive noise: the identity's gradient */
        return a->dx == a->dy ? TNT_OK : tnt__gpu_copy_on_device(a->dx, a->dy, bytes, TNT__GPU_COMPUTE);
    return noise_gpu_apply(l, g->seed, a->batch, a->sample_offset, a->dy, a->dx, true);
}

static const tnt__gpu_ops noise_gpu_ops = {
    .plan_create = noise_gpu_plan_create,
    .plan_destroy = noise_gpu_plan_destroy,
    .forward = noise_gpu_forward,
    .backward = noise_gpu_backward,
};

static void noise_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status add_seed(cJSON *c, uint64_t seed) {
    if (seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)seed));
    else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    return TNT_OK;
}

static tnt_status noise_get_config(const tnt_layer *l, cJSON *c) {
    const noise_cfg *p = l->priv;
    switch (p->kind) {
    case GAUSSIAN_NOISE:
        TNT_KJ(cJSON_AddNumberToObject(c, "stddev", tnt__kj_f(p->rate)));
        return add_seed(c, p->seed);
    case ACTIVITY_REG:
        TNT_KJ(cJSON_AddNumberToObject(c, "l1", tnt__kj_f(p->rate)));
        TNT_KJ(cJSON_AddNumberToObject(c, "l2", tnt__kj_f(p->l2)));
        return TNT_OK;
    default:
        TNT_KJ(cJSON_AddNumberToObject(c, "rate", tnt__kj_f(p->rate)));
        if (p->kind == ALPHA_DROPOUT) TNT_KJ(cJSON_AddNullToObject(c, "noise_shape"));
        if (p->kind == SPATIAL_DROPOUT && p->spatial >= 2) TNT_KJ_S(tnt__kj_add_data_format(c, l));
        return add_seed(c, p->seed);
    }
}

static tnt_layer *noise_new(const tnt__layer_ops *ops, noise_cfg cfg, const char *name) {
    noise_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

/* The seed key: null or absent (0 here: derived from the model), or a whole number. */
static tnt_status read_seed(const cJSON *c, uint64_t *seed, const tnt__kj_ctx *k) {
    double v = 0;
    *seed = 0;
    if (tnt__kj_absent(tnt__kj_item(c, "seed"))) return TNT_OK;
    tnt_status s = tnt__kj_num(c, "seed", true, 0, &v, k);
    if (s == TNT_OK && !(v >= 0 && v == floor(v)))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"seed\": %g (expected a whole number >= 0)", v);
    *seed = (uint64_t)v;
    return s;
}

/* One class: its ops table, from_config (reading key, then seed) and public constructor. */
#define NOISE_CLASS(fn, cls, key, kind_, spatial_, fmt)                                           \
    static tnt_layer *fn##_from_config(const cJSON *c, const tnt__kj_ctx *k);                   \
    const tnt__layer_ops tnt__##fn##_ops = {                                                     \
        .class_name = cls,                                                                        \
        .get_config = noise_get_config,                                                           \
        .from_config = fn##_from_config,                                                          \
        .build = noise_build,                                                                     \
        .workspace_size = noise_workspace,                                                        \
        .forward = noise_forward,                                                                 \
        .backward = noise_backward,                                                               \
        .destroy = noise_destroy,                                                                 \
        .supports_masking = true,                                                                 \
        .set_data_format = fmt,                                                                   \
        .gpu = &noise_gpu_ops,                                                                    \
    };                                                                                            \
    tnt_layer *tnt_##fn(float v, uint64_t seed, const char *name) {                              \
        if (!(v >= 0.0f) || !(kind_ == GAUSSIAN_NOISE ? isfinite(v) : v < 1.0f)) {               \
            tnt__error(TNT_ERR_ARG, "%s: %s %g (expected %s)", cls, key, (double)v,                \
                       kind_ == GAUSSIAN_NOISE ? "a finite value >= 0" : "0 <= rate < 1");       \
            return NULL;                                                                          \
        }                                                                                         \
        return noise_new(&tnt__##fn##_ops,                                                       \
                         (noise_cfg){.kind = kind_, .rate = v, .spatial = spatial_, .seed = seed}, name); \
    }                                                                                             \
    static tnt_layer *fn##_from_config(const cJSON *c, const tnt__kj_ctx *k) {                  \
        double v = 0;                                                                             \
        uint64_t seed = 0;                                                                        \
        TNT_KJ_READ(tnt__kj_num(c, key, true, 0, &v, k));                                        \
        TNT_KJ_READ(read_seed(c, &seed, k));                                                      \
        if (spatial_ >= 2) TNT_KJ_READ(tnt__kj_check_data_format(c, k));                        \
        return tnt__kj_built(tnt_##fn((float)v, seed, k->name), k);                              \
    }

NOISE_CLASS(spatial_dropout1d, "SpatialDropout1D", "rate", SPATIAL_DROPOUT, 1, NULL)
NOISE_CLASS(spatial_dropout2d, "SpatialDropout2D", "rate", SPATIAL_DROPOUT, 2, tnt__layer_take_data_format)
NOISE_CLASS(spatial_dropout3d, "SpatialDropout3D", "rate", SPATIAL_DROPOUT, 3, tnt__layer_take_data_format)
NOISE_CLASS(gaussian_noise, "GaussianNoise", "stddev", GAUSSIAN_NOISE, 0, NULL)
NOISE_CLASS(gaussian_dropout, "GaussianDropout", "rate", GAUSSIAN_DROPOUT, 0, NULL)
NOISE_CLASS(alpha_dropout, "AlphaDropout", "rate", ALPHA_DROPOUT, 0, NULL)

/* ---- ActivityRegularization --------------------------------------------------------------- */

static tnt_layer *activity_reg_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double l1 = 0, l2 = 0;
    TNT_KJ_READ(tnt__kj_num(c, "l1", false, 0, &l1, k));
    TNT_KJ_READ(tnt__kj_num(c, "l2", false, 0, &l2, k));
    return tnt__kj_built(tnt_activity_regularization((float)l1, (float)l2, k->name), k);
}

const tnt__layer_ops tnt__activity_regularization_ops = {
    .class_name = "ActivityRegularization",
    .get_config = noise_get_config,
    .from_config = activity_reg_from_config,
    .build = noise_build,
    .workspace_size = noise_workspace,
    .forward = noise_forward,
    .backward = noise_backward,
    .destroy = noise_destroy,
    .supports_masking = true,
    .gpu = &noise_gpu_ops,
};

tnt_layer *tnt_activity_regularization(float l1, float l2, const char *name) {
    if (!(l1 >= 0.0f) || !(l2 >= 0.0f) || isinf(l1) || isinf(l2)) {
        tnt__error(TNT_ERR_ARG, "ActivityRegularization: l1 %g, l2 %g (expected finite values >= 0)", (double)l1,
                   (double)l2);
        return NULL;
    }
    tnt_layer *l = noise_new(&tnt__activity_regularization_ops,
                             (noise_cfg){.kind = ACTIVITY_REG, .rate = l1, .l2 = l2}, name);
    tnt__rule penalty = {.key = "activity_regularizer", .reg = TNT_REG_L1L2, .l1 = l1, .l2 = l2};
    if (l && tnt__layer_set_rule(l, &penalty) != TNT_OK) {
        tnt_layer_free(l);
        return NULL;
    }
    return l;
}
