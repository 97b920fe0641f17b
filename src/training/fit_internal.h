/* fit_internal.h: what fit.c (fit) and inference.c (evaluate, predict) share: the running
 * loss/metric sums, the batch checks and the callback-calling macros. Internal to training/. */
#ifndef TNT_FIT_INTERNAL_H
#define TNT_FIT_INTERNAL_H

#include "core/timeline.h"
#include "data/dataset.h"
#include "model/model.h"
#include "training/history.h"

/* Running sums of one pass over data: the loss and each metric of each output as (sum, count).
 * With several outputs the loss is the sum of the outputs' losses times their loss_weights, and
 * out_loss the unweighted loss of each output, as Keras's. */
typedef struct accum {
    double loss_sum, loss_count;
    double out_loss[TNT_MAX_IO];
    double sum[TNT_MAX_IO][TNT_MAX_METRICS], count[TNT_MAX_IO][TNT_MAX_METRICS];
    double state[TNT__METRIC_STATE_MAX]; /* the user's Metric classes' state (m->state_metric) */
    double curve[TNT__CURVE_SLOTS][TNT__CURVE_SIZE]; /* AUC counts (m->curve_slot) */
} accum;

/* master_only callbacks (Tarantella's run_on_all_ranks=False) run on the master rank only. */
/* As CALL_CB for (model, index, logs) callbacks, giving callbacks with local_logs this rank's
 * own figures (Tarantella's aggregate_logs=False) instead of the global ones. */
#define CALL_CB_LOGS(cbs, n, fn, model, index, global, local)                                     \
    do {                                                                                          \
        double tl0_ = TNT_TL_BEGIN();                                                             \
        for (int i_ = 0; i_ < (n); i_++)                                                          \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank())) {               \
                tnt_status cs_ = (cbs)[i_].fn(model, index, (cbs)[i_].local_logs ? (local) : (global), \
                                              (cbs)[i_].user);                                    \
                if (cs_ != TNT_OK) {                                                              \
                    s = cs_;                                                                      \
                    goto done;                                                                    \
                }                                                                                 \
            }                                                                                     \
        if (n) TNT_TL_END("callback", #fn, -1, tl0_);                                            \
    } while (0)

#define CALL_CB(cbs, n, fn, ...)                                                                  \
    do {                                                                                          \
        double tl0_ = TNT_TL_BEGIN();                                                             \
        for (int i_ = 0; i_ < (n); i_++)                                                          \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank())) {               \
                tnt_status cs_ = (cbs)[i_].fn(__VA_ARGS__, (cbs)[i_].user);                       \
                if (cs_ != TNT_OK) {                                                              \
                    s = cs_;                                                                      \
                    goto done;                                                                    \
                }                                                                                 \
            }                                                                                     \
        if (n) TNT_TL_END("callback", #fn, -1, tl0_);                                            \
    } while (0)

/* As CALL_CB, inside a loop that must reach the ranks' agreement: the first failure lands in
 * status and the remaining callbacks are skipped (the caller breaks out). */
#define CALL_CB_SOFT(status, cbs, n, fn, ...)                                                     \
    do {                                                                                          \
        for (int i_ = 0; i_ < (n) && (status) == TNT_OK; i_++)                                    \
            if ((cbs)[i_].fn && (!(cbs)[i_].master_only || tnt_is_master_rank()))                 \
                (status) = (cbs)[i_].fn(__VA_ARGS__, (cbs)[i_].user);                             \
    } while (0)

/* Figures of a (sum, count) pass as Keras's logs: "loss", then each output's metrics. */
void tnt__accum_logs(const tnt_model *m, const accum *a, tnt_logs *logs);
/* Sums of all ranks (exact aggregation: sums and counts, never means of means). */
tnt_status tnt__accum_global(const tnt_model *m, const accum *local, accum *global, bool parallel);
/* A model with None input dimensions takes the shapes of data before a pass over it. */
tnt_status tnt__instance_for(tnt_model *m, const tnt_dataset *data, const char *who);
/* Checks a batch against the model: input shape and label count per sample. */
tnt_status tnt__check_batch(tnt_model *m, const tnt_batch *b, bool need_labels, bool weighted, const char *who);
/* Loss and metrics of one forward pass added to acc; with_grad: the loss gradients too. */
tnt_status tnt__loss_and_metrics(tnt_model *m, tnt__plan *p, const float *x, const tnt_batch *b,
                                 double inv_batch, bool with_grad, bool weighted, accum *acc);
/* The weight regularizers' penalty. */
double tnt__weight_penalty(const tnt_model *m);
/* Adds the regularization penalties for the counted samples of the last forward over n. */
void tnt__add_penalties(const tnt_model *m, accum *a, double counted, int64_t n, double weights);
/* An unbatched dataset with a micro-batch size as a batched view (*view freed by the caller). */
tnt_dataset *tnt__batched(tnt_dataset *ds, int64_t micro, tnt_dataset **view);
tnt_status tnt__require_compiled(const tnt_model *m, const char *who);
/* Forward-only pass over data: loss/metrics into logs (labels) or the outputs into *out. */
tnt_status tnt__run_inference(tnt_model *m, tnt_dataset *data, const tnt_eval_opts *o, bool labels,
                              tnt_logs *logs, tnt_tensor **out, const char *who);

#endif
