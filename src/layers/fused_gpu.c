/* fused_gpu.c: the activations and the activation fused into a linear layer, on the device
 * (gpu/kernels/activations.cu). The same steps and workspace layout as fused.c, so a layer's
 * device path keeps the pre-activation exactly where its CPU path does. */
#include "layers/fused.h"

#include "gpu/gpu.h"

#define BLOCK 256

static bool rowwise(tnt_activation act) {
    return act == TNT_ACT_SOFTMAX || act == TNT_ACT_LOG_SOFTMAX || act == TNT_ACT_SPARSEMAX;
}

static const char *row_kernel(tnt_activation act, bool backward) {
    switch (act) {
    case TNT_ACT_SOFTMAX: return backward ? "tnt_k_softmax_bwd" : "tnt_k_softmax_fwd";
    case TNT_ACT_LOG_SOFTMAX: return backward ? "tnt_k_log_softmax_bwd" : "tnt_k_log_softmax_fwd";
    default: return backward ? "tnt_k_sparsemax_bwd" : "tnt_k_sparsemax_fwd";
    }
}

/* One block per row (grid-strided when rows exceed the grid). */
static unsigned row_grid(int64_t rows) { return (unsigned)(rows < 1 ? 1 : rows > 65535 ? 65535 : rows); }

bool tnt__gpu_act_supported(tnt_activation act) { return (unsigned)act < TNT_ACT_COUNT; }

tnt_status tnt__gpu_act_forward(tnt_activation act, float alpha, int64_t rows, int64_t cols, const float *x, float *y) {
    long long r = rows, c = cols, n = rows * cols;
    if (n == 0) return TNT_OK;
    if (rowwise(act)) {
        void *args[] = {&x, &y, &r, &c};
        return tnt__gpu_launch(row_kernel(act, false), row_grid(rows), BLOCK, 0, args);
    }
    int a = (int)act;
    void *args[] = {&a, &alpha, &x, &y, &n};
    return tnt__gpu_launch("tnt_k_act_fwd", tnt__gpu_grid_for(n, BLOCK), BLOCK, 0, args);
}

tnt_status tnt__gpu_act_backward(tnt_activation act, float alpha, int64_t rows, int64_t cols, const float *x,
                                 const float *y, const float *dy, float *dx) {
    long long r = rows, c = cols, n = rows * cols;
    if (n == 0) return TNT_OK;
    if (rowwise(act)) {
        void *args[] = {&y, &dy, &dx, &r, &c};
        return tnt__gpu_launch(row_kernel(act, true), row_grid(rows), BLOCK, 0, args);
    }
    int a = (int)act;
    void *args[] = {&a, &alpha, &x, &y, &dy, &dx, &n};
    return tnt__gpu_launch("tnt_k_act_bwd", tnt__gpu_grid_for(n, BLOCK), BLOCK, 0, args);
}

static size_t block_bytes(const tnt_layer *l, int64_t batch) {
    return ((size_t)(batch * tnt_shape_numel(l->out_shape)) * sizeof(float) + 63) & ~(size_t)63;
}

static float *ws_preact(const tnt_layer *l, void *ws, int64_t batch) {
    return (float *)((char *)ws + block_bytes(l, batch));
}

/* rows and columns of the activation: the last axis is the one softmax runs over */
static void act_dims(const tnt_layer *l, int64_t batch, int64_t *rows, int64_t *cols) {
    tnt_shape o = l->out_shape;
    *cols = o.ndim ? o.dim[o.ndim - 1] : 1;
    *rows = batch * tnt_shape_numel(o) / (*cols ? *cols : 1);
}

tnt_status tnt__gpu_fused_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a, tnt__gpu_linear_run run) {
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float);
    tnt_status s;
    if (l->activation == TNT_ACT_LINEAR) {
        if ((s = run(l, plan, a, a->y)) != TNT_OK) return s;
        return a->preact ? tnt__gpu_copy_on_device(a->preact, a->y, bytes, TNT__GPU_COMPUTE) : TNT_OK;
    }
    bool keep = tnt__act_backward_needs_src(l->activation);
    float *pre = keep ? ws_preact(l, a->workspace, a->batch) : a->preact ? a->preact : a->y;
    if ((s = run(l, plan, a, pre)) != TNT_OK) return s;
    if (keep && a->preact && (s = tnt__gpu_copy_on_device(a->preact, pre, bytes, TNT__GPU_COMPUTE)) != TNT_OK) return s;
    int64_t rows, cols;
    act_dims(l, a->batch, &rows, &cols);
    return tnt__gpu_act_forward(l->activation, l->activation_alpha, rows, cols, pre, a->y);
}

tnt_status tnt__gpu_fused_backward(tnt_layer *l, const tnt__bwd_args *a, const float **dpre) {
    *dpre = a->dy;
    if (l->activation == TNT_ACT_LINEAR || a->dy_is_preact) return TNT_OK;
    float *buf = a->workspace;
    const float *pre = tnt__act_backward_needs_src(l->activation) ? ws_preact(l, a->workspace, a->batch) : NULL;
    int64_t rows, cols;
    act_dims(l, a->batch, &rows, &cols);
    tnt_status s = tnt__gpu_act_backward(l->activation, l->activation_alpha, rows, cols, pre, a->y, a->dy, buf);
    if (s == TNT_OK) *dpre = buf;
    return s;
}
