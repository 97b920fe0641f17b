/* activation.h: forward and backward of Keras activations over a (rows, cols) float array, on
 * oneDNN eltwise/softmax primitives (softmax runs over cols); SELU and the activations oneDNN lacks
 * in plain C (activation_c.c; log_softmax and sparsemax over cols too). */
#ifndef TNT_ACTIVATION_H
#define TNT_ACTIVATION_H

#include "kernels/dnnl_util.h"

typedef struct tnt__act {
    tnt_activation act;
    float alpha;
    int64_t rows, cols;
    tnt__prim fwd, bwd;
    dnnl_memory_t src, dst, diff_dst, diff_src;
} tnt__act;

/* The default alpha of an activation when alpha == 0 (leaky relu 0.2, elu 1). */
float tnt__act_default_alpha(tnt_activation act);
/* The oneDNN eltwise post-op that fuses act into a conv or matmul, for the activations whose
 * backward needs only the output (y), so that y is all backward keeps; false for the others
 * (softmax is not elementwise; gelu, swish, softplus and selu need their input). alpha 0 means
 * the default. */
bool tnt__act_post_op(tnt_activation act, float alpha, dnnl_alg_kind_t *alg, float *post_alpha);
/* True when backward needs the activation's input (x); otherwise its output (y) suffices. */
bool tnt__act_backward_needs_src(tnt_activation act);

tnt_status tnt__act_create(tnt__act *a, tnt_activation act, float alpha, int64_t rows, int64_t cols);
/* y = act(x); y may equal x. */
tnt_status tnt__act_forward(tnt__act *a, const float *x, float *y);
/* dx = dy * act'(.) using x (pre-activation, may be NULL if not needed) or y; dx may equal dy. */
tnt_status tnt__act_backward(tnt__act *a, const float *x, const float *y, const float *dy, float *dx);
void tnt__act_destroy(tnt__act *a);

/* activation_c.c: the activations run in plain C (SELU and the ones after TNT_ACT_LEAKY_RELU). */
bool tnt__act_is_c(tnt_activation act);
/* Over each row of cols values (log_softmax, sparsemax), backward from y; the others elementwise,
 * backward from x. */
bool tnt__act_c_rowwise(tnt_activation act);
tnt_status tnt__act_c_forward(tnt_activation act, int64_t rows, int64_t cols, const float *x, float *y);
tnt_status tnt__act_c_backward(tnt_activation act, int64_t rows, int64_t cols, const float *x, const float *y,
                               const float *dy, float *dx);

#endif
