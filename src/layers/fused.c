/* fused.c: see fused.h. */
#include "layers/fused.h"

static size_t block_bytes(const tnt_layer *l, int64_t batch) {
    return ((size_t)(batch * tnt_shape_numel(l->out_shape)) * sizeof(float) + 63) & ~(size_t)63;
}

size_t tnt__fused_workspace_size(const tnt_layer *l, int64_t batch) {
    if (l->activation == TNT_ACT_LINEAR) return 0;
    size_t blk = block_bytes(l, batch);
    return tnt__act_backward_needs_src(l->activation) ? 2 * blk : blk;
}

static float *ws_preact(const tnt_layer *l, void *ws, int64_t batch) {
    return (float *)((char *)ws + block_bytes(l, batch));
}

tnt_status tnt__fused_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool fused, tnt__act *act,
                              tnt__linear_run run) {
    size_t bytes = (size_t)(a->batch * tnt_shape_numel(l->out_shape)) * sizeof(float);
    tnt_status status;
    if (l->activation == TNT_ACT_LINEAR) {
        if ((status = run(l, plan, a, false, a->y)) != TNT_OK) return status;
        if (a->preact) memcpy(a->preact, a->y, bytes);
        return TNT_OK;
    }
    if (fused && !a->preact) return run(l, plan, a, true, a->y);
    /* Unfused: the linear op writes the pre-activation, then the activation runs. */
    bool keep = tnt__act_backward_needs_src(l->activation);
    float *pre = keep ? ws_preact(l, a->workspace, a->batch) : a->preact ? a->preact : a->y;
    if ((status = run(l, plan, a, false, pre)) != TNT_OK) return status;
    if (keep && a->preact) memcpy(a->preact, pre, bytes);
    return tnt__act_forward(act, pre, a->y);
}

tnt_status tnt__fused_backward(tnt_layer *l, const tnt__bwd_args *a, tnt__act *act, const float **dpre) {
    *dpre = a->dy;
    if (l->activation == TNT_ACT_LINEAR || a->dy_is_preact) return TNT_OK;
    float *buf = a->workspace;
    const float *pre = tnt__act_backward_needs_src(l->activation) ? ws_preact(l, a->workspace, a->batch) : NULL;
    tnt_status status = tnt__act_backward(act, pre, a->y, a->dy, buf);
    if (status == TNT_OK) *dpre = buf;
    return status;
}
