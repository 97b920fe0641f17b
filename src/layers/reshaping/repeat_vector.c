/* repeat_vector.c: RepeatVector (Keras): (features) -> (n, features), n copies of each sample's
 * vector. Backward sums dy over the n copies (in copy order, float32, as the copies are few); the
 * device path does the same in one kernel each way. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <stdio.h>

typedef struct repeat_cfg {
    int n;
    int64_t features; /* from build */
} repeat_cfg;

static tnt_status repeat_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    repeat_cfg *c = l->priv;
    char b[96];
    if (in.ndim != 1)
        return tnt__error(TNT_ERR_SHAPE,
                          "RepeatVector \"%s\": input shape %s has rank %d (expected 1: features)",
                          l->name, tnt_shape_str(in, b, sizeof b), in.ndim);
    if (in.dim[0] <= 0)
        return tnt__error(TNT_ERR_SHAPE, "RepeatVector \"%s\": input shape %s has no features",
                          l->name, tnt_shape_str(in, b, sizeof b));
    c->features = in.dim[0];
    *out = TNT_SHAPE(c->n, c->features);
    return TNT_OK;
}

/* x: (batch, F) -> y: (batch, n, F) */
static tnt_status repeat_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const repeat_cfg *c = l->priv;
    const int64_t F = c->features, n = c->n;
#pragma omp parallel for schedule(static) if (a->batch * n * F > 65536)
    for (int64_t s = 0; s < a->batch; s++)
        for (int64_t r = 0; r < n; r++)
            memcpy(a->y + (s * n + r) * F, a->x + s * F, (size_t)F * sizeof(float));
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(a->batch * n * F) * sizeof(float));
    return TNT_OK;
}

/* dy: (batch, n, F) -> dx: (batch, F), the sum over the n copies */
static tnt_status repeat_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    const repeat_cfg *c = l->priv;
    const int64_t F = c->features, n = c->n;
#pragma omp parallel for schedule(static) if (a->batch * n * F > 65536)
    for (int64_t s = 0; s < a->batch; s++) {
        float *dx = a->dx + s * F;
        const float *dy = a->dy + s * n * F;
        memcpy(dx, dy, (size_t)F * sizeof(float));
        for (int64_t r = 1; r < n; r++)
            for (int64_t k = 0; k < F; k++) dx[k] += dy[r * F + k];
    }
    return TNT_OK;
}

/* ---- on the device: one kernel each way (gpu/kernels/rnn.cu), the CPU's order of the sum ---- */

static tnt_status repeat_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const repeat_cfg *c = l->priv;
    long long B = a->batch, n = c->n, F = c->features;
    float *y = a->y;
    void *args[] = {(void *)&a->x, &y, &B, &n, &F};
    tnt_status s = tnt__gpu_launch("tnt_k_repeat_fwd", tnt__gpu_grid_for(B * n * F, 256), 256, 0, args);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(B * n * F) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status repeat_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    if (!a->dx) return TNT_OK;
    const repeat_cfg *c = l->priv;
    long long B = a->batch, n = c->n, F = c->features;
    void *args[] = {(void *)&a->dy, (void *)&a->dx, &B, &n, &F};
    return tnt__gpu_launch("tnt_k_repeat_bwd", tnt__gpu_grid_for(B * F, 256), 256, 0, args);
}

static const tnt__gpu_ops repeat_gpu_ops = {
    .forward = repeat_gpu_forward,
    .backward = repeat_gpu_backward,
};

static void repeat_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status repeat_get_config(const tnt_layer *l, cJSON *c) {
    const repeat_cfg *p = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "n", p->n));
    return TNT_OK;
}

static tnt_layer *repeat_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int n = 0;
    TNT_KJ_READ(tnt__kj_int(c, "n", true, 0, &n, k));
    return tnt__kj_built(tnt_repeat_vector(n, k->name), k);
}

const tnt__layer_ops tnt__repeat_vector_ops = {
    .class_name = "RepeatVector",
    .from_config = repeat_from_config,
    .get_config = repeat_get_config,
    .build = repeat_build,
    .forward = repeat_forward,
    .backward = repeat_backward,
    .destroy = repeat_destroy,
    .gpu = &repeat_gpu_ops,
};

tnt_layer *tnt_repeat_vector(int n, const char *name) {
    if (n < 1) {
        tnt__error(TNT_ERR_ARG, "RepeatVector: n %d (expected >= 1 copies)", n);
        return NULL;
    }
    repeat_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n = n;
    tnt_layer *l = tnt__layer_new(&tnt__repeat_vector_ops, name, c);
    if (!l) free(c);
    return l;
}
