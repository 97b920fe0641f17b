/* device_rules.h: a model's regularizers and constraints (layers/regularizer.h) while it trains on
 * the device, with the host's semantics and order, without moving the weights:
 *  - the penalties' values: each forward launches, per regularized weight and per call of a layer
 *    with an activity regularizer, the sums of |v| and v^2 into partials (tnt_k_l1l2_sums_partial)
 *    that come down with the outputs; the host adds them up (m->activity_penalty, and the weights'
 *    penalty that tnt__weight_penalty returns on the device);
 *  - the activity penalty's gradient joins dy in backward (tnt_k_l1l2_grad on the layer's output);
 *  - the weight penalties' gradients join the summed gradients after the allreduce, before the
 *    optimizer (tnt__dev_optimizer_step);
 *  - the constraints project the weights after the update (tnt_k_non_neg, tnt_k_norm_constraint).
 * OrthogonalRegularizer has no device path (its Gram matrix stays on the host). */
#ifndef TNT_MODEL_DEVICE_RULES_H
#define TNT_MODEL_DEVICE_RULES_H

#include "model/model.h"
#include "gpu/gpu.h"

/* The layer's rules all have a device path; when not, *why says which does not. */
bool tnt__dev_rules_supported(const tnt_layer *l, const char **why);

/* The penalties the model has now (a device plan made for another count is made again). */
int tnt__dev_penalty_terms(const tnt_model *m);
/* The device plan's arena bytes for the penalties' partial sums (0: the model has no penalty). */
size_t tnt__dev_penalty_bytes(const tnt_model *m);
/* The plan's host copy of those partials (page-locked where it can be); freed by the next. */
tnt_status tnt__dev_penalty_plan(tnt_model *m, tnt__plan *p);
void tnt__dev_penalty_plan_free(tnt__plan *p);

/* At the start of a device forward (the weights are up): the regularized weights' sums. */
tnt_status tnt__dev_weight_sums(tnt_model *m, tnt__plan *p);
/* After node i's forward: the sums of its output y (n values) when its layer has an activity
 * regularizer. */
tnt_status tnt__dev_activity_sums(tnt_model *m, tnt__plan *p, int node, const float *y, int64_t n);
/* The partials to the host on stream (after the sums: the copy stream waits for forward first). */
tnt_status tnt__dev_penalties_down(tnt_model *m, tnt__plan *p, tnt__gpu_stream stream);
/* Once they are down: m->activity_penalty gains the activity penalties, m->device_weight_penalty
 * is the weights'. */
void tnt__dev_penalties_read(tnt_model *m, const tnt__plan *p);

/* dy += scale * the gradient of l's activity penalty at its output y (n values, device). */
tnt_status tnt__dev_activity_grad(const tnt_layer *l, const float *y, float *dy, int64_t n, double scale);
/* The weight penalties' gradients added to the device's summed gradients (d_grad). */
tnt_status tnt__dev_penalty_grads(tnt_model *m);
/* Each constraint projects its weights on the device (after the update; frozen layers and
 * non-trainable weights left out, as on the host). */
tnt_status tnt__dev_apply_constraints(tnt_model *m);

#endif
