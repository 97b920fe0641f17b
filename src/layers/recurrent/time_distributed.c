/* time_distributed.c: Keras TimeDistributed. (batch, T, ...) is (batch*T, ...) in memory, so the
 * inner layer runs once on batch*T samples with its own plan and workspace for that count; its
 * weights are the wrapper's. Sample offsets scale by T, so that the inner layer's random masks
 * (Dropout) stay those of the global batch on any split. */
#include "layers/wrapper.h"

#include "gpu/gpu.h"
#include "layers/keras_config.h"

#include <stdio.h>

extern const tnt__layer_ops tnt__time_distributed_ops;

typedef struct td {
    tnt_layer *inner;
    int64_t steps;
} td;

static tnt_status td_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    td *t = l->priv;
    char b[96];
    if (in.ndim < 2)
        return tnt__error(TNT_ERR_SHAPE, "TimeDistributed \"%s\": input shape %s (expected (timesteps, ...), rank >= 2)",
                          l->name, tnt_shape_str(in, b, sizeof b));
    tnt_shape step = {.ndim = in.ndim - 1};
    for (int i = 1; i < in.ndim; i++) step.dim[i - 1] = in.dim[i];
    tnt_status s = tnt__wrapper_build_inner(l, t->inner, 1, &step);
    if (s != TNT_OK) return s;
    if (t->inner->out_shape.ndim + 1 > TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_SHAPE, "TimeDistributed \"%s\": the inner output has too many axes", l->name);
    t->steps = in.dim[0];
    l->n_weights = 0;
    if ((s = tnt__wrapper_adopt_weights(l, t->inner, NULL)) != TNT_OK) return s;
    *out = (tnt_shape){.ndim = t->inner->out_shape.ndim + 1};
    out->dim[0] = t->steps;
    for (int i = 0; i < t->inner->out_shape.ndim; i++) out->dim[i + 1] = t->inner->out_shape.dim[i];
    return TNT_OK;
}

/* The inner layer's plan for batch * steps samples (plan_destroy gets no layer: keep it). */
typedef struct td_plan {
    tnt_layer *inner;
    void *inner_plan;
} td_plan;

/* the inner layer's plan functions, of its host or its device path */
static void *(*inner_create(const tnt_layer *inner, bool device))(tnt_layer *, int64_t) {
    return device ? (inner->ops->gpu ? inner->ops->gpu->plan_create : NULL) : inner->ops->plan_create;
}
static void (*inner_destroy(const tnt_layer *inner, bool device))(void *) {
    return device ? (inner->ops->gpu ? inner->ops->gpu->plan_destroy : NULL) : inner->ops->plan_destroy;
}

static void plan_free(void *plan, bool device) {
    td_plan *p = plan;
    void (*destroy)(void *) = p ? inner_destroy(p->inner, device) : NULL;
    if (p && p->inner_plan && destroy) destroy(p->inner_plan);
    free(p);
}

static void *plan_make(tnt_layer *l, int64_t batch, bool device) {
    td *t = l->priv;
    td_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->inner = t->inner;
    void *(*create)(tnt_layer *, int64_t) = inner_create(t->inner, device);
    if (create && !(p->inner_plan = create(t->inner, batch * t->steps))) {
        free(p);
        return NULL;
    }
    return p;
}

static void td_plan_destroy(void *plan) { plan_free(plan, false); }
static void *td_plan_create(tnt_layer *l, int64_t batch) { return plan_make(l, batch, false); }

static size_t td_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    td *t = l->priv;
    td_plan *p = plan;
    return t->inner->ops->workspace_size ? t->inner->ops->workspace_size(t->inner, p->inner_plan, batch * t->steps) : 0;
}

static tnt_status td_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    td *t = l->priv;
    td_plan *p = plan;
    tnt__wrapper_bind(l, 0, t->inner, 0);
    const float *xs[1] = {a->x};
    tnt__fwd_args ia = *a;
    ia.batch = a->batch * t->steps, ia.sample_offset = a->sample_offset * t->steps;
    ia.preact = NULL, ia.n_inputs = 1, ia.xs = xs;
    if (t->inner->ops->is_view) { /* Flatten, Reshape: the model never runs them, the data stays */
        memcpy(a->y, a->x, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
        return TNT_OK;
    }
    return t->inner->ops->forward(t->inner, p->inner_plan, &ia);
}

static tnt_status td_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    td *t = l->priv;
    td_plan *p = plan;
    tnt__wrapper_bind(l, 0, t->inner, 0);
    const float *xs[1] = {a->x};
    float *dxs[1] = {a->dx};
    tnt__bwd_args ia = *a;
    ia.batch = a->batch * t->steps, ia.sample_offset = a->sample_offset * t->steps;
    ia.n_inputs = 1, ia.xs = xs, ia.dxs = dxs;
    if (t->inner->ops->is_view) {
        if (a->dx) memcpy(a->dx, a->dy, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
        return TNT_OK;
    }
    return t->inner->ops->backward(t->inner, p->inner_plan, &ia);
}

/* ---- on the device: the inner layer's device path on batch * steps samples, as above ---------- */

static bool td_gpu_supported(const tnt_layer *l, const char **why) {
    const td *t = l->priv;
    const tnt__gpu_ops *g = t->inner->ops->gpu;
    if (t->inner->ops->is_view) return true;
    if (!g) {
        *why = "its inner layer has no GPU path";
        return false;
    }
    return !g->supported || g->supported(t->inner, why);
}

static void td_gpu_plan_destroy(void *plan) { plan_free(plan, true); }
static void *td_gpu_plan_create(tnt_layer *l, int64_t batch) { return plan_make(l, batch, true); }

static size_t td_gpu_size(tnt_layer *l, void *plan, int64_t batch, bool scratch) {
    td *t = l->priv;
    const tnt__gpu_ops *g = t->inner->ops->gpu;
    size_t (*size)(tnt_layer *, void *, int64_t) = !g ? NULL : scratch ? g->scratch_size : g->workspace_size;
    return size ? size(t->inner, ((td_plan *)plan)->inner_plan, batch * t->steps) : 0;
}
static size_t td_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) { return td_gpu_size(l, plan, batch, false); }
static size_t td_gpu_scratch(tnt_layer *l, void *plan, int64_t batch) { return td_gpu_size(l, plan, batch, true); }

static tnt_status td_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    td *t = l->priv;
    td_plan *p = plan;
    const size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    if (t->inner->ops->is_view) return tnt__gpu_copy_on_device(a->y, a->x, bytes, TNT__GPU_COMPUTE);
    tnt__wrapper_bind(l, 0, t->inner, 0);
    const float *xs[1] = {a->x};
    tnt__fwd_args ia = *a;
    ia.batch = a->batch * t->steps, ia.sample_offset = a->sample_offset * t->steps;
    ia.preact = NULL, ia.n_inputs = 1, ia.xs = xs;
    return t->inner->ops->gpu->forward(t->inner, p->inner_plan, &ia);
}

static tnt_status td_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    td *t = l->priv;
    td_plan *p = plan;
    const size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float);
    if (t->inner->ops->is_view) return a->dx ? tnt__gpu_copy_on_device(a->dx, a->dy, bytes, TNT__GPU_COMPUTE) : TNT_OK;
    tnt__wrapper_bind(l, 0, t->inner, 0);
    const float *xs[1] = {a->x};
    float *dxs[1] = {a->dx};
    tnt__bwd_args ia = *a;
    ia.batch = a->batch * t->steps, ia.sample_offset = a->sample_offset * t->steps;
    ia.n_inputs = 1, ia.xs = xs, ia.dxs = dxs;
    return t->inner->ops->gpu->backward(t->inner, p->inner_plan, &ia);
}

static const tnt__gpu_ops td_gpu_ops = {
    .supported = td_gpu_supported,
    .plan_create = td_gpu_plan_create,
    .plan_destroy = td_gpu_plan_destroy,
    .workspace_size = td_gpu_workspace,
    .scratch_size = td_gpu_scratch,
    .forward = td_gpu_forward,
    .backward = td_gpu_backward,
};

static void td_destroy(tnt_layer *l) {
    td *t = l->priv;
    tnt_layer_free(t->inner);
    free(t);
}

static tnt_status td_get_config(const tnt_layer *l, cJSON *c) {
    const td *t = l->priv;
    return tnt__wrapper_inner_config(l, t->inner, t->inner->name, c, "layer");
}

static tnt_layer *td_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer *inner = tnt__wrapper_inner_from_config(c, "layer", k);
    return inner ? tnt__kj_built(tnt_time_distributed(inner, k->name), k) : NULL;
}

const tnt__layer_ops tnt__time_distributed_ops = {
    .class_name = "TimeDistributed",
    .build = td_build,
    .plan_create = td_plan_create,
    .plan_destroy = td_plan_destroy,
    .workspace_size = td_workspace_size,
    .forward = td_forward,
    .backward = td_backward,
    .destroy = td_destroy,
    .get_config = td_get_config,
    .from_config = td_from_config,
    .supports_masking = true,
    .gpu = &td_gpu_ops,
};

tnt_layer *tnt_time_distributed(tnt_layer *inner, const char *name) {
    const char *bad = !inner ? "the inner layer is NULL (its constructor failed?)"
                      : inner->refs > 0 || inner->built ? "the inner layer must be new (not in a model or graph)"
                      : inner->ops->build_multi && !inner->ops->build ? "the inner layer takes several inputs"
                      : inner->ops->collective ? "the inner layer runs collectives (SyncBatchNormalization)"
                      : inner->n_outputs > 1   ? "the inner layer has several outputs (return_state)"
                                               : NULL;
    if (bad) {
        tnt__error(TNT_ERR_ARG, "TimeDistributed: %s", bad);
        tnt_layer_free(inner);
        return NULL;
    }
    td *t = tnt__calloc(1, sizeof *t);
    tnt_layer *l = t ? tnt__layer_new(&tnt__time_distributed_ops, name, t) : NULL;
    if (!l) {
        free(t);
        tnt_layer_free(inner);
        return NULL;
    }
    t->inner = inner;
    if (inner->auto_name) tnt__layer_base_name(inner->ops->class_name, inner->name, sizeof inner->name);
    inner->auto_name = false;
    if (tnt__wrapper_take_rules(l, inner, "TimeDistributed") != TNT_OK) {
        tnt_layer_free(l);
        return NULL;
    }
    return l;
}
