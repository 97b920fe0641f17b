/* host_bridge.c: a device path for a layer that has only its host code (a traced Lambda or custom
 * Layer, whose operation graph runs in C on the CPU): on a device plan its inputs, weights and
 * output gradients come down into host buffers of its plan (one per batch size), its own forward
 * and backward run there on its own host plan and workspace (kept from forward to backward), and
 * its outputs, input gradients, weight gradients and the state weights forward may have changed go
 * back up. The stream is drained around each call, so the rest of the model stays on the device
 * while this layer costs two round trips a step; model/device.c says once per model which layers
 * go through the host (via_host). C custom layers (layers/custom.c) and traced layers take it. */
#include "gpu/gpu.h"
#include "layers/layer.h"

typedef struct bridge_plan {
    void *plan; /* the layer's own host plan (NULL: it has none) */
    void (*plan_destroy)(void *plan);
    void *workspace; /* its host workspace, forward to backward */
    float *x[TNT_MAX_LAYER_INPUTS], *dx[TNT_MAX_LAYER_INPUTS];
    float *y[TNT_MAX_LAYER_OUTPUTS], *dy[TNT_MAX_LAYER_OUTPUTS];
} bridge_plan;

/* input / output k's bytes (in_shape and out_shape are the first ones' for every layer) */
static size_t in_bytes(const tnt_layer *l, int k, int64_t batch) {
    return (size_t)(batch * tnt_shape_numel(k == 0 ? l->in_shape : l->in_shapes[k])) * sizeof(float);
}
static size_t out_bytes(const tnt_layer *l, int k, int64_t batch) {
    return (size_t)(batch * tnt_shape_numel(k == 0 ? l->out_shape : l->out_shapes[k])) * sizeof(float);
}
static int n_in(const tnt_layer *l) { return l->n_inputs > 0 ? l->n_inputs : 1; }
static int n_out(const tnt_layer *l) { return l->n_outputs > 0 ? l->n_outputs : 1; }

/* its added losses (a traced layer's add_loss) are read from its workspace by the model, on the host */
static bool bridge_supported(const tnt_layer *l, const char **why) {
    if (l->ops->added_loss) *why = "a layer that adds losses (add_loss) has no device path yet";
    else if (l->mask_input) *why = "a layer that takes a sequence mask has no device path through the host yet";
    else return true;
    return false;
}

static void bridge_plan_destroy(void *plan) {
    bridge_plan *b = plan;
    if (!b) return;
    if (b->plan && b->plan_destroy) b->plan_destroy(b->plan);
    tnt__free(b->workspace);
    for (int k = 0; k < TNT_MAX_LAYER_INPUTS; k++) tnt__free(b->x[k]), tnt__free(b->dx[k]);
    for (int k = 0; k < TNT_MAX_LAYER_OUTPUTS; k++) tnt__free(b->y[k]), tnt__free(b->dy[k]);
    free(b);
}

static void *bridge_plan_create(tnt_layer *l, int64_t batch) {
    bridge_plan *b = tnt__calloc(1, sizeof *b);
    if (!b) return NULL;
    b->plan_destroy = l->ops->plan_destroy;
    if (l->ops->plan_create && !(b->plan = l->ops->plan_create(l, batch))) {
        free(b);
        return NULL;
    }
    bool ok = !!(b->workspace = tnt__alloc((l->ops->workspace_size ? l->ops->workspace_size(l, b->plan, batch) : 0) + 64));
    for (int k = 0; k < n_in(l) && ok; k++)
        ok = (b->x[k] = tnt__alloc(in_bytes(l, k, batch) + 4)) && (b->dx[k] = tnt__alloc(in_bytes(l, k, batch) + 4));
    for (int k = 0; k < n_out(l) && ok; k++)
        ok = (b->y[k] = tnt__alloc(out_bytes(l, k, batch) + 4)) && (b->dy[k] = tnt__alloc(out_bytes(l, k, batch) + 4));
    if (ok) return b;
    bridge_plan_destroy(b);
    tnt__error(TNT_ERR_NOMEM, "layer \"%s\" (%s): host buffers for a batch of %lld", l->name, l->ops->class_name,
               (long long)batch);
    return NULL;
}

/* every weight's value down to its host view (trainable and state alike) */
static tnt_status weights_down(tnt_layer *l) {
    tnt_status s = TNT_OK;
    for (int j = 0; j < l->n_weights && s == TNT_OK; j++) {
        const tnt__weight *w = &l->weights[j];
        if (w->value && w->d_value)
            s = tnt__gpu_copy_to_host(w->value, w->d_value, (size_t)tnt_shape_numel(w->shape) * sizeof(float),
                                      TNT__GPU_COMPUTE);
    }
    return s;
}

/* the weights' host values (state: what forward changed) or gradients (trainable) back up */
static tnt_status weights_up(tnt_layer *l, bool grads) {
    tnt_status s = TNT_OK;
    for (int j = 0; j < l->n_weights && s == TNT_OK; j++) {
        const tnt__weight *w = &l->weights[j];
        const size_t bytes = (size_t)tnt_shape_numel(w->shape) * sizeof(float);
        if (grads && w->trainable && w->grad && w->d_grad)
            s = tnt__gpu_copy_to_device(w->d_grad, w->grad, bytes, TNT__GPU_COMPUTE);
        else if (!grads && !w->trainable && w->value && w->d_value)
            s = tnt__gpu_copy_to_device(w->d_value, w->value, bytes, TNT__GPU_COMPUTE);
    }
    return s;
}

static tnt_status bridge_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    bridge_plan *b = plan;
    tnt_status s = TNT_OK;
    for (int k = 0; k < n_in(l) && s == TNT_OK; k++)
        s = tnt__gpu_copy_to_host(b->x[k], a->xs ? a->xs[k] : a->x, in_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = weights_down(l);
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (s != TNT_OK) return s;
    tnt__fwd_args h = *a;
    h.x = b->x[0], h.xs = (const float *const *)b->x, h.y = b->y[0], h.ys = b->y, h.workspace = b->workspace;
    h.scratch = NULL, h.preact = NULL;
    if ((s = l->ops->forward(l, b->plan, &h)) != TNT_OK) return s;
    for (int k = 0; k < n_out(l) && s == TNT_OK; k++)
        s = tnt__gpu_copy_to_device(a->ys ? a->ys[k] : a->y, b->y[k], out_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = weights_up(l, false);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, out_bytes(l, 0, a->batch), TNT__GPU_COMPUTE);
    return s == TNT_OK ? tnt__gpu_sync(TNT__GPU_COMPUTE) : s; /* the host buffers are free again */
}

static tnt_status bridge_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    bridge_plan *b = plan;
    bool needed = false; /* nothing to compute: an inference-only layer may sit where no gradient flows */
    for (int k = 0; k < n_in(l) && !needed; k++) needed = a->dxs ? a->dxs[k] != NULL : a->dx != NULL;
    for (int j = 0; j < l->n_weights && !needed; j++) needed = l->weights[j].trainable && l->weights[j].d_grad;
    if (!needed) return TNT_OK;
    float *dxs[TNT_MAX_LAYER_INPUTS] = {NULL};
    const float *dys[TNT_MAX_LAYER_OUTPUTS] = {NULL};
    tnt_status s = TNT_OK;
    for (int k = 0; k < n_in(l) && s == TNT_OK; k++) {
        s = tnt__gpu_copy_to_host(b->x[k], a->xs ? a->xs[k] : a->x, in_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
        if (a->dxs ? a->dxs[k] != NULL : k == 0 && a->dx) dxs[k] = b->dx[k];
    }
    for (int k = 0; k < n_out(l) && s == TNT_OK; k++) {
        const float *d = a->dys ? a->dys[k] : k == 0 ? a->dy : NULL;
        s = tnt__gpu_copy_to_host(b->y[k], a->ys ? a->ys[k] : a->y, out_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
        if (s == TNT_OK && d) s = tnt__gpu_copy_to_host(b->dy[k], d, out_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
        if (d) dys[k] = b->dy[k];
    }
    if (s == TNT_OK) s = weights_down(l); /* as forward saw them */
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (s != TNT_OK) return s;
    tnt__bwd_args h = *a;
    h.x = b->x[0], h.xs = (const float *const *)b->x, h.y = b->y[0], h.ys = (const float *const *)b->y;
    h.dy = dys[0], h.dys = dys, h.dx = dxs[0], h.dxs = dxs, h.workspace = b->workspace, h.scratch = NULL;
    h.dw_stash = NULL;
    if ((s = l->ops->backward(l, b->plan, &h)) != TNT_OK) return s;
    for (int k = 0; k < n_in(l) && s == TNT_OK; k++)
        if (dxs[k])
            s = tnt__gpu_copy_to_device(a->dxs ? a->dxs[k] : a->dx, dxs[k], in_bytes(l, k, a->batch), TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = weights_up(l, true);
    return s == TNT_OK ? tnt__gpu_sync(TNT__GPU_COMPUTE) : s;
}

const tnt__gpu_ops tnt__host_bridge_gpu_ops = {
    .supported = bridge_supported,
    .plan_create = bridge_plan_create,
    .plan_destroy = bridge_plan_destroy,
    .forward = bridge_forward,
    .backward = bridge_backward,
    .via_host = true,
};
