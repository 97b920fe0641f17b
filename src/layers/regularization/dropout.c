/* dropout.c: Dropout (Keras's inverted dropout). In training each value is kept with probability
 * 1-rate and scaled by 1/(1-rate); outside training it is the identity. The mask is not stored:
 * it is recomputed in backward from the step's seed (kept in an 8-byte workspace), since the
 * counter-based generator gives the same value for the same (seed, index). Keras's noise_shape
 * (an axis of size 1 shares one draw along it: (None, 1, 1, 1) drops whole samples, EfficientNet's
 * drop connect) draws one value per position of the noise shape, keyed on the global sample. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>

typedef struct dropout_priv {
    float rate;
    uint64_t seed;                   /* 0: derive from the model's seed (l->seed) */
    int noise_ndim;                  /* 0: no noise_shape (one draw per value) */
    int64_t noise[TNT_MAX_DIMS + 1]; /* Keras's noise_shape, batch first; -1: None (the input's size) */
    bool shared[TNT_MAX_DIMS + 1];   /* built: one draw shared along this axis (noise size 1) */
} dropout_priv;

static tnt_status dropout_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    dropout_priv *p = l->priv;
    *out = in;
    if (!p->noise_ndim) return TNT_OK;
    if (p->noise_ndim != in.ndim + 1)
        return tnt__error(TNT_ERR_SHAPE, "Dropout \"%s\": noise_shape has %d entries for an input of rank %d (with "
                          "the batch)", l->name, p->noise_ndim, in.ndim + 1);
    p->shared[0] = p->noise[0] == 1;
    for (int d = 0; d < in.ndim; d++) {
        int64_t v = p->noise[d + 1];
        if (v != -1 && v != 1 && v != in.dim[d])
            return tnt__error(TNT_ERR_SHAPE, "Dropout \"%s\": noise_shape entry %d is %lld for an axis of %lld "
                              "(expected 1, None or %lld)", l->name, d + 1, (long long)v, (long long)in.dim[d],
                              (long long)in.dim[d]);
        p->shared[d + 1] = v == 1 && in.dim[d] != 1;
    }
    return TNT_OK;
}

/* The draw index of value i of a sample (the position in the noise shape) and the draws per sample. */
static int64_t noise_index(const dropout_priv *p, tnt_shape in, int64_t i) {
    int64_t r = 0, stride = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        int64_t c = i % in.dim[d];
        i /= in.dim[d];
        if (!p->shared[d + 1]) r += c * stride, stride *= in.dim[d];
    }
    return r;
}

static int64_t noise_per_sample(const dropout_priv *p, tnt_shape in) {
    int64_t n = 1;
    for (int d = 0; d < in.ndim; d++)
        if (!p->shared[d + 1]) n *= in.dim[d];
    return n;
}

/* out = in * mask * scale with a noise_shape: the draw of (global sample, position in the noise) */
static void noise_apply(const tnt_layer *l, uint64_t seed, int64_t batch, int64_t sample_offset, const float *in,
                        float *out) {
    const dropout_priv *p = l->priv;
    int64_t per = tnt_shape_numel(l->in_shape), draws = noise_per_sample(p, l->in_shape);
    float scale = 1.0f / (1.0f - p->rate);
    for (int64_t s = 0; s < batch; s++) {
        uint64_t base = p->shared[0] ? 0 : (uint64_t)((sample_offset + s) * draws);
        for (int64_t i = 0; i < per; i++) {
            uint64_t k = base + (uint64_t)noise_index(p, l->in_shape, i);
            out[s * per + i] = tnt__rand_uniform(seed, k) >= p->rate ? in[s * per + i] * scale : 0.0f;
        }
    }
}

static size_t dropout_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)l, (void)plan, (void)batch;
    return sizeof(uint64_t);
}

static uint64_t step_seed(const tnt_layer *l, uint64_t model_step_seed) {
    const dropout_priv *p = l->priv;
    return tnt__hash64((p->seed ? p->seed : l->seed) ^ model_step_seed);
}

/* x, y: (batch, shape...) */
static tnt_status dropout_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const dropout_priv *p = l->priv;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    uint64_t seed = step_seed(l, a->seed);
    *(uint64_t *)a->workspace = seed;
    if (!a->training || p->rate == 0.0f) {
        if (a->y != a->x) memcpy(a->y, a->x, (size_t)n * sizeof(float));
        *(uint64_t *)a->workspace = 0;
        return TNT_OK;
    }
    if (p->noise_ndim) {
        noise_apply(l, seed, a->batch, a->sample_offset, a->x, a->y);
        return TNT_OK;
    }
    float scale = 1.0f / (1.0f - p->rate);
    uint64_t base = (uint64_t)(a->sample_offset * tnt_shape_numel(l->in_shape));
    for (int64_t i = 0; i < n; i++)
        a->y[i] = tnt__rand_uniform(seed, base + (uint64_t)i) >= p->rate ? a->x[i] * scale : 0.0f;
    return TNT_OK;
}

static tnt_status dropout_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const dropout_priv *p = l->priv;
    if (!a->dx) return TNT_OK;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    uint64_t seed = *(const uint64_t *)a->workspace;
    if (seed == 0 || p->rate == 0.0f) {
        if (a->dx != a->dy) memcpy(a->dx, a->dy, (size_t)n * sizeof(float));
        return TNT_OK;
    }
    if (p->noise_ndim) { /* the same mask times dy */
        noise_apply(l, seed, a->batch, a->sample_offset, a->dy, a->dx);
        return TNT_OK;
    }
    float scale = 1.0f / (1.0f - p->rate);
    uint64_t base = (uint64_t)(a->sample_offset * tnt_shape_numel(l->in_shape));
    for (int64_t i = 0; i < n; i++)
        a->dx[i] = tnt__rand_uniform(seed, base + (uint64_t)i) >= p->rate ? a->dy[i] * scale : 0.0f;
    return TNT_OK;
}

static void dropout_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status dropout_get_config(const tnt_layer *l, cJSON *c) {
    const dropout_priv *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "rate", tnt__kj_f(p->rate)));
    if (p->noise_ndim) {
        cJSON *ns = cJSON_AddArrayToObject(c, "noise_shape");
        TNT_KJ(ns);
        for (int d = 0; d < p->noise_ndim; d++)
            TNT_KJ(cJSON_AddItemToArray(ns, p->noise[d] < 0 ? cJSON_CreateNull()
                                                            : cJSON_CreateNumber((double)p->noise[d])));
    } else TNT_KJ(cJSON_AddNullToObject(c, "noise_shape"));
    if (p->seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)p->seed));
    else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    return TNT_OK;
}

static tnt_layer *dropout_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double rate = 0, seed = 0;
    TNT_KJ_READ(tnt__kj_num(c, "rate", true, 0, &rate, k));
    TNT_KJ_READ(tnt__kj_num(c, "seed", false, 0, &seed, k));
    if (!(seed >= 0 && seed < 9007199254740992.0) || seed != floor(seed))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "seed %g (expected a non-negative integer or null)", seed);
    const cJSON *ns = tnt__kj_item(c, "noise_shape");
    int n = cJSON_IsArray(ns) ? cJSON_GetArraySize(ns) : 0;
    if (ns && !cJSON_IsNull(ns) && (!cJSON_IsArray(ns) || n < 2 || n > TNT_MAX_DIMS + 1))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "noise_shape: expected null or a list of 2 to %d sizes (None for the "
                            "input's)", TNT_MAX_DIMS + 1);
    int64_t noise[TNT_MAX_DIMS + 1];
    for (int d = 0; d < n; d++) {
        const cJSON *v = cJSON_GetArrayItem(ns, d);
        if (cJSON_IsNull(v)) noise[d] = -1;
        else if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble == floor(v->valuedouble))
            noise[d] = (int64_t)v->valuedouble;
        else return tnt__kj_fail(k, TNT_ERR_FORMAT, "noise_shape entry %d: expected a positive integer or null", d);
    }
    tnt_layer *l = tnt_dropout((float)rate, (uint64_t)seed, k->name);
    if (l && n) {
        dropout_priv *p = l->priv;
        p->noise_ndim = n;
        memcpy(p->noise, noise, (size_t)n * sizeof *noise);
    }
    return tnt__kj_built(l, k);
}

/* ---- on the device: the same counter-based masks (tnt_k_dropout, keyed on the global index);
 * the step's seed stays on the host, in the plan that forward and backward of a step share ---- */

#define GPU_BLOCK 256

typedef struct dropout_gpu_plan {
    uint64_t seed; /* of the last forward; 0: it was the identity */
} dropout_gpu_plan;

static void *dropout_gpu_plan_create(tnt_layer *l, int64_t batch) {
    (void)l, (void)batch;
    return tnt__calloc(1, sizeof(dropout_gpu_plan));
}

static void dropout_gpu_plan_destroy(void *plan) { free(plan); }

/* out = in * scale where the draw keeps it, else 0 */
static tnt_status dropout_gpu_apply(const tnt_layer *l, uint64_t seed, int64_t batch, int64_t sample_offset,
                                    const float *in, float *out) {
    const dropout_priv *p = l->priv;
    long long n = batch * tnt_shape_numel(l->in_shape);
    long long s = (long long)seed, base = sample_offset * tnt_shape_numel(l->in_shape);
    float rate = p->rate, scale = 1.0f / (1.0f - p->rate);
    void *args[] = {&in, &out, &n, &s, &base, &rate, &scale};
    return tnt__gpu_launch("tnt_k_dropout", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static tnt_status dropout_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    dropout_gpu_plan *g = plan;
    const dropout_priv *p = l->priv;
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    g->seed = a->training && p->rate != 0.0f ? step_seed(l, a->seed) : 0;
    if (!g->seed) return a->y == a->x ? TNT_OK : tnt__gpu_copy_on_device(a->y, a->x, bytes, TNT__GPU_COMPUTE);
    return dropout_gpu_apply(l, g->seed, a->batch, a->sample_offset, a->x, a->y);
}

static tnt_status dropout_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const dropout_gpu_plan *g = plan;
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    if (!a->dx) return TNT_OK;
    if (!g->seed) return a->dx == a->dy ? TNT_OK : tnt__gpu_copy_on_device(a->dx, a->dy, bytes, TNT__GPU_COMPUTE);
    return dropout_gpu_apply(l, g->seed, a->batch, a->sample_offset, a->dy, a->dx);
}

static bool dropout_gpu_supported(const tnt_layer *l, const char **why) {
    const dropout_priv *p = l->priv;
    if (p->noise_ndim) *why = "Dropout with a noise_shape runs on the CPU only";
    return !p->noise_ndim;
}

static const tnt__gpu_ops dropout_gpu_ops = {
    .supported = dropout_gpu_supported,
    .plan_create = dropout_gpu_plan_create,
    .plan_destroy = dropout_gpu_plan_destroy,
    .forward = dropout_gpu_forward,
    .backward = dropout_gpu_backward,
};

const tnt__layer_ops tnt__dropout_ops = {
    .class_name = "Dropout",
    .from_config = dropout_from_config,
    .get_config = dropout_get_config,
    .build = dropout_build,
    .workspace_size = dropout_workspace,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .backward_reads = tnt__reads_nothing, /* the mask comes again from the step's seed */
    .destroy = dropout_destroy,
    .supports_masking = true,
    .gpu = &dropout_gpu_ops,
};

tnt_layer *tnt_dropout(float rate, uint64_t seed, const char *name) {
    if (!(rate >= 0.0f && rate < 1.0f)) {
        tnt__error(TNT_ERR_ARG, "Dropout: rate %g (expected 0 <= rate < 1)", (double)rate);
        return NULL;
    }
    dropout_priv *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->rate = rate;
    p->seed = seed;
    tnt_layer *l = tnt__layer_new(&tnt__dropout_ops, name, p);
    if (!l) free(p);
    return l;
}
