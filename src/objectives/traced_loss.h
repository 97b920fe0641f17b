/* traced_loss.h: a loss of the user's own (a Keras loss function of (y_true, y_pred), traced into
 * an operation graph by the Python package): its forward is the graph's forward and the
 * gradient w.r.t. y_pred the graph's backward. */
#ifndef TNT_OBJECTIVES_TRACED_LOSS_H
#define TNT_OBJECTIVES_TRACED_LOSS_H

#include "tarantella.h"

typedef struct tnt__traced_loss tnt__traced_loss;

/* The graph of json: two inputs, y_true then y_pred (axis 0 the batch), one float output.
 * pred_shape: the model output's shape per sample, which y_pred's must fit. NULL with an error
 * naming what does not fit (who prefixes it). */
tnt__traced_loss *tnt__traced_loss_new(const char *json, tnt_shape pred_shape, const char *who);
void tnt__traced_loss_free(tnt__traced_loss *t);
/* Label values per sample (y_true's shape without the batch axis). */
int64_t tnt__traced_loss_labels(const tnt__traced_loss *t);
/* The graph's JSON (owned by t), and its "name" (the user's function's; "traced_loss" if none). */
const char *tnt__traced_loss_json(const tnt__traced_loss *t);
const char *tnt__traced_loss_name(const tnt__traced_loss *t);

/* n samples: pred (n, pred_shape), y (n, labels). The graph's result is the loss per sample
 * ((n,)), per position ((n, ...): sample i's loss is the mean over its positions, as Keras's
 * sum-over-batch-size reduction), or a scalar (the batch's mean loss, counted for each of its n
 * samples). *loss_sum += sum_i w_i loss_i (w NULL: all 1); dpred (may be NULL) receives
 * scale * d(sum_i w_i loss_i)/d(pred), overwritten. */
tnt_status tnt__traced_loss_compute(tnt__traced_loss *t, int64_t n, const float *pred, const float *y, const float *w,
                                    double scale, float *dpred, double *loss_sum);


/* A metric of the user's own with state (a keras.metrics.Metric subclass): update graph (inputs
 * y_true, y_pred and, traced with update_state's sample_weight, the sample weights (None,); one
 * output per state variable: the batch's increment, no batch axis) and result
 * graph (one input per state variable, one scalar output). The state is the sum of the increments
 * over batches and ranks (doubles). */
typedef struct tnt__state_metric tnt__state_metric;
tnt__state_metric *tnt__state_metric_new(const char *update_json, const char *result_json, tnt_shape pred_shape,
                                         const char *who);
void tnt__state_metric_free(tnt__state_metric *t);
int64_t tnt__state_metric_labels(const tnt__state_metric *t);
int64_t tnt__state_metric_size(const tnt__state_metric *t); /* doubles of state */
/* The update graph takes the sample weights. */
bool tnt__state_metric_takes_weights(const tnt__state_metric *t);
/* state += the increments of n samples, weighted by sw (NULL: ones, for a graph that takes them). */
tnt_status tnt__state_metric_update(tnt__state_metric *t, int64_t n, const float *pred, const float *y, const float *sw,
                                    double *state);
/* The result on state (NaN with an error when the graph fails). */
double tnt__state_metric_result(tnt__state_metric *t, const double *state);

#endif
