/* activation_layer.c: the Activation layer: y = act(x) over the last axis (softmax) or
 * elementwise, on the shared activation kernels. */
#include "kernels/activation.h"
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
