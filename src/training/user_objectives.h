/* user_objectives.h: the user's losses and metrics in a pass over data (fit.c): a loss function
 * (a traced graph) on an output, with the built-in metrics on that output, and the user's metric
 * functions and Metric classes. */
#ifndef TNT_TRAINING_USER_OBJECTIVES_H
#define TNT_TRAINING_USER_OBJECTIVES_H

#include "model/model.h"
#include "objectives/metrics.h"

/* The batch's sample weights (each sample's labels end with its weight, at column per of stride),
 * or NULL when unweighted or on failure (*s then set); the caller frees. */
float *tnt__sample_weights(const tnt_batch *b, int64_t stride, int64_t per, bool weighted, tnt_status *s);

/* Output k's loss function on n samples (numel output values each, positions rows of c for the
 * metrics, lk label values): *loss_sum += sum_i w_i loss_i, grad (may be NULL) the gradient times
 * scale; the built-in metrics on output k (mets, with this output's label layout) add to sum,
 * count and the AUC curves, the weighted ones (Keras's weighted_metrics) by sw (NULL: 1). */
tnt_status tnt__user_loss(tnt_model *m, int k, const tnt__metric *mets, int64_t n, int64_t positions, int64_t c,
                          int64_t lk, const float *in, const float *pred, const float *y, const float *sw, double scale,
                          float *grad, double *loss_sum, double *sum, double *count,
                          double (*curve)[TNT__CURVE_SIZE]);

/* The user's metric functions (their per-sample means, the weighted ones' weighted by sw) and
 * Metric classes (their state) on output k. */
tnt_status tnt__user_metrics(tnt_model *m, int k, const tnt__metric *mets, int64_t n, int64_t lk, const float *pred,
                             const float *y, const float *sw, double *sum, double *count, double *state);

/* Metric j is the user's (a traced function or a Metric class), not a built-in one. */
static inline bool tnt__user_metric(const tnt_model *m, int j) { return m->traced_metric[j] || m->state_metric[j]; }

#endif
