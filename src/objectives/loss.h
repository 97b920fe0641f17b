/* loss.h: Keras losses on a batch of n samples with c outputs each, returning the SUM of the
 * per-sample losses (so that sums over ranks and batches stay exact) and the gradient of that
 * sum scaled by the caller's 1/global_batch. */
#ifndef TNT_TRAIN_LOSS_H
#define TNT_TRAIN_LOSS_H

#include "tarantella.h"

/* pred: (n, c) row-major. y_true: for sparse categorical cross-entropy n class indices stored as
 * floats (each must be an integer in [0, c), else TNT_ERR_ARG naming the value, the sample and
 * the range); for every other loss (n, c).
 *
 * *loss_sum receives the sum over the n samples of Keras's per-sample loss:
 *   sparse / categorical CE: -sum_j y_j log p_j over the c outputs;
 *   binary CE, MSE, MAE:     the mean over the c outputs.
 * dpred (may be NULL) receives d(loss_sum * inv_batch) / d(pred).
 *
 * from_logits=true with (sparse) categorical CE: pred are logits; a max-shifted log-softmax,
 * dpred = (softmax * sum_j y_j - y) * inv_batch (softmax - onehot for one-hot or normalized
 * labels). The model takes this path for a fused softmax output layer, as Keras does in graph
 * mode. from_logits=false follows Keras's backend exactly, clipping included, and dpred is the
 * gradient of the clipped formula (zero where the clip is active):
 *   categorical: q = p / sum(p), clipped to [1e-7, 1 - 1e-7], loss -sum y log q;
 *   sparse:      r = clip(p) (not renormalized first), loss log(sum r) - log r_y, which is what
 *                sparse_softmax_cross_entropy_with_logits(log r) computes;
 *   binary:      r = clip(p), loss -(y log(r + 1e-7) + (1 - y) log(1 - r + 1e-7)), mean over c;
 *   binary from logits: max(x, 0) - x y + log(1 + exp(-|x|)), gradient sigmoid(x) - y.
 * MSE: mean (p - y)^2; MAE: mean |p - y| with gradient sign(p - y) (0 at 0). */
tnt_status tnt__loss_compute(tnt_loss_kind kind, bool from_logits, int64_t n, int64_t c, const float *pred,
                             const float *y_true, double inv_batch, float *dpred, double *loss_sum);

/* Keras's options of the cross-entropies. */
typedef struct tnt__loss_opts {
    float label_smoothing; /* targets y * (1 - s) + s / c (binary: + s / 2) */
    bool has_ignore_class; /* sparse CE: rows labelled ignore_class add no loss and no gradient */
    int ignore_class;
    float huber_delta; /* TNT_HUBER; 0 = 1.0 */
} tnt__loss_opts;
/* As tnt__loss_compute with options (NULL: none); *valid (may be NULL) receives the number of rows
 * not ignored. Label smoothing of a sparse label needs logits (from_logits or a fused softmax). */
tnt_status tnt__loss_compute_opts(tnt_loss_kind kind, bool from_logits, const tnt__loss_opts *opts, int64_t n,
                                  int64_t c, const float *pred, const float *y_true, double inv_batch, float *dpred,
                                  double *loss_sum, int64_t *valid);

/* The losses of loss_more.c, on one row of c values: the row's loss; d (may be NULL) receives
 * scale * d(loss)/d(p). to_pm1: hinge labels in {0, 1}, mapped to {-1, 1} (Keras decides that
 * for the whole batch: tnt__hinge_labels_binary). */
double tnt__loss_more_row(tnt_loss_kind kind, const float *p, const float *y, int64_t c, double delta, bool to_pm1,
                          double scale, float *d);
bool tnt__loss_is_hinge(tnt_loss_kind kind);
bool tnt__hinge_labels_binary(const float *y, int64_t count);

#endif
