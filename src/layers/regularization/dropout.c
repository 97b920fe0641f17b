/* dropout.c: Dropout (Keras's inverted dropout). In training each value is kept with probability
 * 1-rate and scaled by 1/(1-rate); outside training it is the identity. The mask is not stored:
 * it is recomputed in backward from the step's seed (kept in an 8-byte workspace), since the
 * counter-based generator gives the same value for the same (seed, index). */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>

typedef struct dropout_priv {
    float rate;
    uint64_t seed; /* 0: derive from the model's seed (l->seed) */
} dropout_priv;

static tnt_status dropout_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = in;
    return TNT_OK;
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
    TNT_KJ(cJSON_AddNullToObject(c, "noise_shape"));
    if (p->seed) TNT_KJ(cJSON_AddNumberToObject(c, "seed", (double)p->seed));
    else TNT_KJ(cJSON_AddNullToObject(c, "seed"));
    return TNT_OK;
}

static tnt_layer *dropout_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double rate = 0, seed = 0;
    TNT_KJ_READ(tnt__kj_num(c, "rate", true, 0, &rate, k));
    TNT_KJ_READ(tnt__kj_num(c, "seed", false, 0, &seed, k));
    static const char *const nulls[] = {"noise_shape", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    if (!(seed >= 0 && seed < 9007199254740992.0) || seed != floor(seed))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "seed %g (expected a non-negative integer or null)", seed);
    return tnt__kj_built(tnt_dropout((float)rate, (uint64_t)seed, k->name), k);
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

static const tnt__gpu_ops dropout_gpu_ops = {
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
