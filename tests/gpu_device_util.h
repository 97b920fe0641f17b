/* gpu_device_util.h: moving test data to and from the device (real or emulated) in the tests of
 * the layers' device paths (test_gpu_attention.c, test_gpu_conv1x1.c, test_gpu_conv_few_taps.c),
 * and one layer's forward and backward on either side. */
#ifndef TNT_GPU_DEVICE_UTIL_H
#define TNT_GPU_DEVICE_UTIL_H

#include "testutil.h"

#include "gpu/gpu.h"
#include "layers/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n floats copied into new device memory (freed with tnt__gpu_free) */
static inline void *dev_up(const float *x, int64_t n) {
    void *d = tnt__gpu_malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(d);
    tu_ok(tnt__gpu_copy_to_device(d, x, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    return d;
}

/* n device floats copied into new host memory (freed with free), the copy finished */
static inline float *dev_down(const void *d, int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
    tu_ok(tnt__gpu_copy_to_host(x, d, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    return x;
}

/* Host weights for a built layer from fixed seeds (the kernel as its initializer, a nonzero bias
 * from tu_fill) and zeroed gradients, so that the CPU and the device runs start alike */
static inline void layer_weights(tnt_layer *l) {
    for (int i = 0; i < l->n_weights; i++) {
        const int64_t c = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].value = calloc((size_t)c, sizeof(float));
        l->weights[i].grad = calloc((size_t)c, sizeof(float));
        tnt__weight_init(&l->weights[i], 40 + (uint64_t)i);
        if (i == 1) tu_fill(l->weights[i].value, c, 71);
    }
}

/* One forward and backward of a built layer with host weights (value, grad) at batch: on the CPU
 * (its ops) or the device (its GPU path: the weights up, the gradients back into grad). y and dx
 * receive the results. On the device dx starts as NaNs (what the layer leaves unwritten shows),
 * and NaNs go over the scratch between forward and backward (it lives one call). */
static inline void layer_step(tnt_layer *l, bool device, int64_t batch, const float *x, const float *dy, float *y,
                              float *dx) {
    const int64_t nx = batch * tnt_shape_numel(l->in_shape), ny = batch * tnt_shape_numel(l->out_shape);
    if (!device) {
        void *plan = l->ops->plan_create(l, batch);
        assert_non_null(plan);
        void *ws = tnt__alloc(l->ops->workspace_size(l, plan, batch) + 64);
        tnt__fwd_args fa = {.batch = batch, .x = x, .y = y, .workspace = ws, .training = true, .seed = 1};
        tu_ok(l->ops->forward(l, plan, &fa));
        tnt__bwd_args ba = {.batch = batch, .x = x, .y = y, .dy = dy, .dx = dx, .workspace = ws};
        tu_ok(l->ops->backward(l, plan, &ba));
        l->ops->plan_destroy(plan);
        tnt__free(ws);
        return;
    }
    const tnt__gpu_ops *g = l->ops->gpu;
    assert_non_null(g);
    const char *why = "";
    if (g->supported && !g->supported(l, &why)) fail_msg("layer \"%s\": no device path: %s", l->name, why);
    for (int i = 0; i < l->n_weights; i++) {
        const int64_t c = tnt_shape_numel(l->weights[i].shape);
        l->weights[i].d_value = dev_up(l->weights[i].value, c);
        l->weights[i].d_grad = tnt__gpu_malloc((size_t)c * sizeof(float));
    }
    void *plan = g->plan_create(l, batch);
    assert_non_null(plan);
    const int64_t ns = (int64_t)((g->scratch_size ? g->scratch_size(l, plan, batch) : 0) / sizeof(float)) + 16;
    const int64_t nn = ns > nx ? ns : nx;
    float *nans = malloc((size_t)nn * sizeof(float));
    for (int64_t i = 0; i < nn; i++) nans[i] = NAN;
    void *x_dev = dev_up(x, nx), *dy_dev = dev_up(dy, ny), *y_dev = tnt__gpu_malloc((size_t)ny * sizeof(float));
    void *dx_dev = dev_up(nans, nx), *scratch = dev_up(nans, ns);
    void *ws = tnt__gpu_malloc((g->workspace_size ? g->workspace_size(l, plan, batch) : 0) + 64);
    tnt__fwd_args fa = {.batch = batch, .x = x_dev, .y = y_dev, .workspace = ws, .scratch = scratch, .training = true,
                        .seed = 1};
    tu_ok(g->forward(l, plan, &fa));
    tu_ok(tnt__gpu_copy_to_device(scratch, nans, (size_t)ns * sizeof(float), TNT__GPU_COMPUTE));
    tnt__bwd_args ba = {.batch = batch, .x = x_dev, .y = y_dev, .dy = dy_dev, .dx = dx_dev, .workspace = ws,
                        .scratch = scratch};
    tu_ok(g->backward(l, plan, &ba));
    if (g->plan_destroy) g->plan_destroy(plan);
    float *yh = dev_down(y_dev, ny), *dxh = dev_down(dx_dev, nx);
    memcpy(y, yh, (size_t)ny * sizeof(float)), memcpy(dx, dxh, (size_t)nx * sizeof(float));
    free(yh), free(dxh), free(nans);
    for (int i = 0; i < l->n_weights; i++) {
        float *gr = dev_down(l->weights[i].d_grad, tnt_shape_numel(l->weights[i].shape));
        memcpy(l->weights[i].grad, gr, (size_t)tnt_shape_numel(l->weights[i].shape) * sizeof(float));
        free(gr);
        tnt__gpu_free(l->weights[i].d_value), tnt__gpu_free(l->weights[i].d_grad);
        l->weights[i].d_value = l->weights[i].d_grad = NULL;
    }
    tnt__gpu_free(ws), tnt__gpu_free(scratch), tnt__gpu_free(x_dev), tnt__gpu_free(dy_dev), tnt__gpu_free(y_dev);
    tnt__gpu_free(dx_dev);
}

#endif
