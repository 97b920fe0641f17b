/* fused.h: the activation fused into a linear layer (Dense, Conv2D, Conv1D): forward with the
 * pre-activation kept where backward or the loss needs it, backward's gradient before the
 * activation, and the workspace both use. The layer supplies how to run its linear op. */
#ifndef TNT_FUSED_H
#define TNT_FUSED_H

#include "kernels/activation.h"
#include "layers/layer.h"

/* Runs the layer's linear op on a->x into out (batch, out_shape...), with the activation as a
 * oneDNN post-op when post_op is true (only asked when the layer said `fused`). */
typedef tnt_status (*tnt__linear_run)(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op,
                                      float *out);

/* Workspace: [dpre][pre-activation when the activation's backward needs its input], each the size
 * of the output; 0 for a linear layer. */
size_t tnt__fused_workspace_size(const tnt_layer *l, int64_t batch);
/* y = act(linear(x)); also writes a->preact when asked. fused: the post-op variant exists. */
tnt_status tnt__fused_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool fused, tnt__act *act,
                              tnt__linear_run run);
/* *dpre: the gradient before the activation, a->dy itself or a workspace buffer. */
tnt_status tnt__fused_backward(tnt_layer *l, const tnt__bwd_args *a, tnt__act *act, const float **dpre);

/* ---- on the device (fused_gpu.c): device pointers throughout, the same workspace layout ---- */

/* The device has kernels for act (the softmax-like ones as row kernels over the last axis). */
bool tnt__gpu_act_supported(tnt_activation act);
/* y = act(x) over (rows, cols); y may be x. */
tnt_status tnt__gpu_act_forward(tnt_activation act, float alpha, int64_t rows, int64_t cols, const float *x, float *y);
/* dx = dy act'(.) from x (when tnt__act_backward_needs_src) or y; dx may be dy. */
tnt_status tnt__gpu_act_backward(tnt_activation act, float alpha, int64_t rows, int64_t cols, const float *x,
                                 const float *y, const float *dy, float *dx);
/* The linear op on the device: out = linear(a->x), no activation. */
typedef tnt_status (*tnt__gpu_linear_run)(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out);
/* As tnt__fused_forward / tnt__fused_backward, on the device (workspace: tnt__fused_workspace_size). */
tnt_status tnt__gpu_fused_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a, tnt__gpu_linear_run run);
tnt_status tnt__gpu_fused_backward(tnt_layer *l, const tnt__bwd_args *a, const float **dpre);

#endif
