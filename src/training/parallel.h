/* parallel.h: the data-parallel side of fit/evaluate/predict (see parallel.c). */
#ifndef TNT_PARALLEL_H
#define TNT_PARALLEL_H

#include "model/model.h"

/* A training or inference data feed: a rank's share of each global batch (split), or the
 * rank's own batches (not split, or one rank). */
typedef struct tnt__feed {
    tnt_dataset_iter *it;
    bool split;
    bool weighted; /* the labels end with each sample's weight */
} tnt__feed;

/* The next local share of a global batch (split) or the rank's own batch; st receives the whole
 * batch's size and the share's first sample in it. Returns 1/0/<0 like tnt_dataset_iter_next. */
int tnt__feed_next(tnt__feed *f, tnt_batch *b, tnt__step *st);
/* Some layer runs MPI collectives itself (SyncBatchNormalization). */
bool tnt__model_has_collective_layers(const tnt_model *m);
/* The model is distributed and more than one rank runs. */
bool tnt__is_parallel(const tnt_model *m);
/* Before the first distributed use: every rank must run the same configuration (checked by
 * fingerprints, which fail on every rank instead of hanging), then the master's weights are
 * broadcast, and (for fit) the gradient reducer is planned. */
tnt_status tnt__prepare_parallel(tnt_model *m, const char *who, const tnt_dataset *data,
                                 const tnt_dataset *val, const tnt_fit_opts *fit);
/* Once per model: warn when BatchNormalization sees micro-batches below 16. */
void tnt__warn_small_micro_batch(tnt_model *m, int64_t micro);

/* ---- one training step ----------------------------------------------------------------------
 * The MPI side of a step of st->parallel, in three calls that are no-ops on one process. Each
 * returns 1 to go on, 0 when the epoch ends here (a rank ran out of data), or a negative status,
 * the same on every rank: a rank that failed still takes part in the step's collectives. */

/* What a rank brings to a step; summed over the ranks by tnt__parallel_step_begin. */
typedef struct tnt__step_counts {
    int64_t batches;   /* 1: the rank drew a batch (its share may be empty) */
    int64_t samples;   /* samples in its share */
    int64_t positions; /* labelled positions its loss counted (those not ignored by ignore_class) */
} tnt__step_counts;

/* Before forward: a model with collective layers enters forward on every rank or on none, so
 * the ranks agree on errors and on every share having samples. */
int tnt__parallel_step_enter(const tnt_model *m, const tnt__step *st, tnt_status local, bool have_samples);
/* After forward and loss: the ranks agree on errors and sum *counts; then backward hands its
 * gradients to the allreduce (st->reducer). */
int tnt__parallel_step_begin(tnt_model *m, tnt__step *st, tnt_status local, tnt__step_counts *counts);
/* After backward (or instead of it, on a rank with an empty share): waits for the gradient
 * allreduces (under NCCL, issues the step's sums a rank did not issue in backward, of zeros); the
 * ranks agree on the outcome. */
tnt_status tnt__parallel_step_end(tnt_model *m, const tnt__step *st, tnt_status local);
/* The optimizer's update of the summed gradients: all of them, or sharded, this rank's slices,
 * then the weights shared across the node (every rank must call it). */
tnt_status tnt__parallel_optimizer_step(tnt_model *m, const tnt__step *st);

#endif
