/* rescaling.c: Keras Rescaling: y = x * scale + offset (scalars), so dx = dy * scale. No weights
 * and no plan; a preprocessing step that models often begin with (Rescaling(1/255)). */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>

typedef struct rescale_cfg {
    float scale, offset;
} rescale_cfg;

static tnt_status rescale_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = in;
    return TNT_OK;
}

/* x, y: (batch, shape...) */
static tnt_status rescale_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const rescale_cfg *c = l->priv;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    for (int64_t i = 0; i < n; i++) a->y[i] = a->x[i] * c->scale + c->offset;
    if (a->preact) memcpy(a->preact, a->y, (size_t)n * sizeof(float));
    return TNT_OK;
}

static tnt_status rescale_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const rescale_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
    for (int64_t i = 0; i < n; i++) a->dx[i] = a->dy[i] * c->scale;
    return TNT_OK;
}

/* on the device: the same products and sums (a GPU may fuse them into one rounding) */
static tnt_status rescale_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const rescale_cfg *c = l->priv;
    long long n = a->batch * tnt_shape_numel(l->in_shape);
    const float *x = a->x;
    float *y = a->y, sc = c->scale, off = c->offset;
    void *args[] = {&x, &y, &n, &sc, &off};
    tnt_status s = tnt__gpu_launch("tnt_k_affine", tnt__gpu_grid_for(n, 256), 256, 0, args);
    if (s == TNT_OK && a->preact) s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status rescale_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const rescale_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    long long n = a->batch * tnt_shape_numel(l->in_shape);
    const float *dy = a->dy;
    float *dx = a->dx, sc = c->scale;
    void *args[] = {&dy, &dx, &n, &sc};
    return tnt__gpu_launch("tnt_k_scale", tnt__gpu_grid_for(n, 256), 256, 0, args);
}

static const tnt__gpu_ops rescale_gpu_ops = {.forward = rescale_gpu_forward, .backward = rescale_gpu_backward};

static void rescale_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status rescale_get_config(const tnt_layer *l, cJSON *c) {
    const rescale_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "scale", tnt__kj_f(p->scale)));
    TNT_KJ(cJSON_AddNumberToObject(c, "offset", tnt__kj_f(p->offset)));
    return TNT_OK;
}

static tnt_layer *rescale_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double scale = 1, offset = 0;
    TNT_KJ_READ(tnt__kj_num(c, "scale", true, 1, &scale, k));
    TNT_KJ_READ(tnt__kj_num(c, "offset", false, 0, &offset, k));
    return tnt__kj_built(tnt_rescaling((float)scale, (float)offset, k->name), k);
}

const tnt__layer_ops tnt__rescaling_ops = {
    .class_name = "Rescaling",
    .get_config = rescale_get_config,
    .from_config = rescale_from_config,
    .build = rescale_build,
    .forward = rescale_forward,
    .backward = rescale_backward,
    .gpu = &rescale_gpu_ops,
    .destroy = rescale_destroy,
    .supports_masking = true,
};

tnt_layer *tnt_rescaling(float scale, float offset, const char *name) {
    if (!isfinite(scale) || !isfinite(offset)) {
        tnt__error(TNT_ERR_ARG, "Rescaling: scale %g, offset %g (expected finite values)", (double)scale,
                   (double)offset);
        return NULL;
    }
    rescale_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (rescale_cfg){scale, offset};
    tnt_layer *l = tnt__layer_new(&tnt__rescaling_ops, name, c);
    if (!l) free(c);
    return l;
}
