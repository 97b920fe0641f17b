/* parallel.h: the data-parallel side of fit/evaluate/predict (see parallel.c). */
#ifndef TNT_PARALLEL_H
#define TNT_PARALLEL_H

#include "model/model.h"

/* A training or inference data feed: a rank's share of each global batch (split), or the
 * rank's own batches (not split, or one rank). */
typedef struct tnt__feed {
    tnt_dataset_iter *it;
    bool split;
} tnt__feed;

/* The next local share of a global batch (split) or the rank's own batch; *global_n receives the
 * whole batch's size. Returns 1/0/<0 like tnt_dataset_iter_next. */
int tnt__feed_next(tnt__feed *f, tnt_batch *b, int64_t *global_n);
/* The model is distributed and more than one rank runs. */
/* Some layer runs MPI collectives itself (SyncBatchNormalization). */
bool tnt__model_has_collective_layers(const tnt_model *m);
bool tnt__is_parallel(const tnt_model *m);
/* Before the first distributed use: every rank must run the same configuration (checked by
 * fingerprints, which fail on every rank instead of hanging), then the master's weights are
 * broadcast, and (for fit) the gradient reducer is planned. */
tnt_status tnt__prepare_parallel(tnt_model *m, const char *who, const tnt_dataset *data,
                                 const tnt_dataset *val, const tnt_fit_opts *fit);
/* Once per model: warn when BatchNormalization sees micro-batches below 16. */
void tnt__warn_small_micro_batch(tnt_model *m, int64_t micro);

#endif
