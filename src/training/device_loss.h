/* device_loss.h: the built-in losses' gradients computed on the device (kernels/loss.cu), so that
 * a device training step runs forward, the loss gradient and backward with no host work between
 * them; the host computes the loss value and the metrics (objectives/loss.c, no gradient) from
 * the outputs copied down asynchronously while the device runs backward (fit.c's train_step). */
#ifndef TNT_TRAIN_DEVICE_LOSS_H
#define TNT_TRAIN_DEVICE_LOSS_H

#include "data/dataset.h"
#include "model/model.h"

/* Whether a step of m on device plan p takes the device's loss gradient: TNT_GPU_DEVICE_LOSS is
 * on, the batch is not weighted, and every output's loss is built in (sparse and categorical
 * cross-entropy, binary cross-entropy, MSE, MAE) without ignore_class or label smoothing; else
 * the host computes the gradient as before. The same for every step of a fit (the model, its
 * compile options and the setting decide). */
bool tnt__device_loss_applies(const tnt_model *m, const tnt__plan *p, bool weighted);
/* Queued on the compute stream after forward: the batch's labels go up, then each output's loss
 * gradient is written to its gradient buffer, scaled by its loss weight times inv_batch (the
 * mean over the global batch, and over the positions of an output of rank > 1). The labels are
 * read as given (a bad sparse label gives a zero gradient row: the host's loss value names it). */
tnt_status tnt__device_loss_grad(tnt_model *m, tnt__plan *p, const tnt_batch *b, double inv_batch);
/* Tests: the steps that took the device's loss gradient so far in this process. */
extern int64_t tnt__device_loss_launches;

#endif
