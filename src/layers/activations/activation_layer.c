/* activation_layer.c: the Activation layer: y = act(x) over the last axis (softmax) or
 * elementwise, on the shared activation kernels. */
#include "kernels/activation.h"
#include "gpu/gpu.h"
#include "layers/fused.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

static tnt_status act_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = in;
    return TNT_OK;
}

static void *act_plan_create(tnt_layer *l, int64_t batch) {
    tnt__act *a = tnt__calloc(1, sizeof *a);
    if (!a) return NULL;
    int64_t cols = l->in_shape.ndim ? l->in_shape.dim[l->in_shape.ndim - 1] : 1;
    int64_t rows = batch * tnt_shape_numel(l->in_shape) / (cols ? cols : 1);
    if (tnt__act_create(a, l->activation, l->activation_alpha, rows, cols) != TNT_OK) {
        free(a);
        return NULL;
    }
    return a;
}

static void act_plan_destroy(void *plan) {
    tnt__act_destroy(plan);
    free(plan);
}

static tnt_status act_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    if (a->preact)
        memcpy(a->preact, a->x, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
    return tnt__act_forward(plan, a->x, a->y);
}

static tnt_status act_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    if (!a->dx) return TNT_OK;
    if (a->dy_is_preact) {
        memcpy(a->dx, a->dy, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
        return TNT_OK;
    }
    return tnt__act_backward(plan, a->x, a->y, a->dy, a->dx);
}

static tnt_status act_get_config(const tnt_layer *l, cJSON *c) {
    return tnt__kj_add_activation(c, l->activation, l->activation_alpha);
}

static tnt_layer *activation_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer_opts o = {.name = k->name};
    if (tnt__kj_absent(tnt__kj_item(c, "activation")))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "missing required key \"activation\"");
    TNT_KJ_READ(tnt__kj_activation(c, &o.activation, k));
    return tnt__kj_built(tnt_activation_layer(o.activation, &o), k);
}

/* ---- on the device: the activation kernels over (rows, the last axis) ---------------------- */

static void act_dims(const tnt_layer *l, int64_t batch, int64_t *rows, int64_t *cols) {
    *cols = l->in_shape.ndim ? l->in_shape.dim[l->in_shape.ndim - 1] : 1;
    *rows = batch * tnt_shape_numel(l->in_shape) / (*cols ? *cols : 1);
}

static bool act_gpu_supported(const tnt_layer *l, const char **why) {
    if (tnt__gpu_act_supported(l->activation)) return true;
    *why = "its activation has no device kernel";
    return false;
}

static tnt_status act_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    int64_t rows, cols;
    act_dims(l, a->batch, &rows, &cols);
    if (a->preact) {
        tnt_status s = tnt__gpu_copy_on_device(a->preact, a->x, (size_t)(rows * cols) * sizeof(float), TNT__GPU_COMPUTE);
        if (s != TNT_OK) return s;
    }
    return tnt__gpu_act_forward(l->activation, l->activation_alpha, rows, cols, a->x, a->y);
}

static tnt_status act_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    int64_t rows, cols;
    act_dims(l, a->batch, &rows, &cols);
    if (a->dy_is_preact)
        return tnt__gpu_copy_on_device(a->dx, a->dy, (size_t)(rows * cols) * sizeof(float), TNT__GPU_COMPUTE);
    return tnt__gpu_act_backward(l->activation, l->activation_alpha, rows, cols, a->x, a->y, a->dy, a->dx);
}

static const tnt__gpu_ops act_gpu_ops = {
    .supported = act_gpu_supported,
    .forward = act_gpu_forward,
    .backward = act_gpu_backward,
};

const tnt__layer_ops tnt__activation_ops = {
    .class_name = "Activation",
    .from_config = activation_from_config,
    .get_config = act_get_config,
    .build = act_build,
    .plan_create = act_plan_create,
    .plan_destroy = act_plan_destroy,
    .forward = act_forward,
    .backward = act_backward,
    .supports_masking = true,
    .gpu = &act_gpu_ops,
};

tnt_layer *tnt_activation_layer(tnt_activation act, const tnt_layer_opts *opts) {
    if ((unsigned)act >= TNT_ACT_COUNT) {
        tnt__error(TNT_ERR_ARG, "Activation: activation %d (expected 0..%d)", (int)act, TNT_ACT_COUNT - 1);
        return NULL;
    }
    tnt_layer *l = tnt__layer_new(&tnt__activation_ops, opts ? opts->name : NULL, NULL);
    if (!l) return NULL;
    l->activation = act;
    l->activation_alpha = opts ? opts->activation_alpha : 0.0f;
    return l;
}
