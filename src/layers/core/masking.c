/* masking.c: Keras Masking. A step (one vector along the last axis) whose features all equal
 * mask_value is masked: the output zeroes it, and the graph derives from the input the sequence
 * mask (1 = kept) that later layers consume (src/model/graph.c asks tnt__masking_value). No
 * weights and no plan; backward recomputes which steps are kept from x. */
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>

typedef struct masking_cfg {
    float mask_value;
    int64_t features; /* from build: the last axis */
} masking_cfg;

static tnt_status masking_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    masking_cfg *c = l->priv;
    char b[96];
    if (in.ndim < 2 || tnt_shape_numel(in) <= 0)
        return tnt__error(TNT_ERR_SHAPE, "Masking \"%s\": input shape %s (expected (steps, features) or more "
                          "axes, none empty)", l->name, tnt_shape_str(in, b, sizeof b));
    c->features = in.dim[in.ndim - 1];
    *out = in;
    return TNT_OK;
}

bool tnt__masking_step_kept(const float *step, int64_t features, float mask_value) {
    for (int64_t f = 0; f < features; f++)
        if (step[f] != mask_value) return true;
    return false;
}

/* y = x at kept steps, 0 at masked ones; dx likewise from dy (kept is 1 or 0). */
static void masking_apply(const tnt_layer *l, int64_t batch, const float *x, const float *src, float *dst) {
    const masking_cfg *c = l->priv;
    const int64_t F = c->features, steps = batch * tnt_shape_numel(l->in_shape) / F;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < steps; s++) {
        bool kept = tnt__masking_step_kept(x + s * F, F, c->mask_value);
        for (int64_t f = 0; f < F; f++) dst[s * F + f] = kept ? src[s * F + f] : 0.0f;
    }
}

static tnt_status masking_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    masking_apply(l, a->batch, a->x, a->x, a->y);
    if (a->preact) memcpy(a->preact, a->y, (size_t)(a->batch * tnt_shape_numel(l->in_shape)) * sizeof(float));
    return TNT_OK;
}

static tnt_status masking_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (a->dx) masking_apply(l, a->batch, a->x, a->dy, a->dx);
    return TNT_OK;
}

static void masking_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status masking_get_config(const tnt_layer *l, cJSON *c) {
    const masking_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "mask_value", tnt__kj_f(p->mask_value)));
    return TNT_OK;
}

static tnt_layer *masking_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double mask_value = 0;
    TNT_KJ_READ(tnt__kj_num(c, "mask_value", false, 0, &mask_value, k));
    return tnt__kj_built(tnt_masking((float)mask_value, k->name), k);
}

const tnt__layer_ops tnt__masking_ops = {
    .class_name = "Masking",
    .get_config = masking_get_config,
    .from_config = masking_from_config,
    .build = masking_build,
    .forward = masking_forward,
    .backward = masking_backward,
    .destroy = masking_destroy,
};

bool tnt__masking_value(const tnt_layer *l, float *mask_value) {
    if (!l || l->ops != &tnt__masking_ops) return false;
    *mask_value = ((const masking_cfg *)l->priv)->mask_value;
    return true;
}

tnt_layer *tnt_masking(float mask_value, const char *name) {
    if (!isfinite(mask_value)) {
        tnt__error(TNT_ERR_ARG, "Masking: mask_value %g (expected a finite value)", (double)mask_value);
        return NULL;
    }
    masking_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mask_value = mask_value;
    tnt_layer *l = tnt__layer_new(&tnt__masking_ops, name, c);
    if (!l) free(c);
    return l;
}
