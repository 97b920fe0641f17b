/* dataset.h: internal interface of the dataset pipeline for the other modules (fit loops, the
 * data-parallel runtime). The public calls are in tarantella.h; the pipeline's private
 * structures are in data/pipeline.h. */
#ifndef TNT_DATA_DATASET_H
#define TNT_DATA_DATASET_H

#include "core/core.h"

/* Advances to the next element (the next global batch of a batched dataset) and materializes
 * only the part-th contiguous share of it: shares hold n/nparts samples, the first n%nparts
 * shares one more, so a rank decodes only its own samples. *global_n (may be NULL) receives n,
 * the size of the whole batch. out->n may be 0 when n < nparts. part=0, nparts=1 is
 * tnt_dataset_iter_next. With prefetch, the background thread materializes only the share; an
 * iterator must keep the same (part, nparts) from its first call on. Unbatched datasets accept
 * only nparts=1. Returns 1 (element written), 0 (end of data) or a negative tnt_status. */
int tnt__dataset_iter_next_part(tnt_dataset_iter *it, int part, int nparts, tnt_batch *out,
                                int64_t *global_n);

/* A batch node over a borrowed unbatched dataset (in stays the caller's): the runtime batches an
 * unbatched dataset with micro_batch_size x ranks. Free it with tnt__dataset_view_free. */
tnt_dataset *tnt__dataset_batch_view(tnt_dataset *in, int64_t batch_size, bool drop_remainder);
void tnt__dataset_view_free(tnt_dataset *view);

/* The batch size of a batched dataset (the largest element), 0 when unbatched. */
int64_t tnt__dataset_batch_size(const tnt_dataset *ds);

#endif
