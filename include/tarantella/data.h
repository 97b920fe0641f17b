/* tarantella/data.h: datasets, a tf.data-like pipeline (sources, shuffle, batch, map, prefetch)
 * and their iterators. Included by tarantella.h, after tnt_tensor; not meant to be included on
 * its own. */
#ifndef TARANTELLA_DATA_H
#define TARANTELLA_DATA_H

/* ---------------------------------------------------------------------------------------------
 * Datasets: a tf.data-like pipeline. An element is (x, y): features and labels, both float32
 * (integer labels are stored as floats, exact up to 2^24). Ops consume their input dataset.
 * ------------------------------------------------------------------------------------------- */
typedef struct tnt_dataset tnt_dataset;
typedef struct tnt_dataset_iter tnt_dataset_iter;

/* n samples; x holds n*numel(x_shape) floats, y n*numel(y_shape) (y may be NULL: no labels).
 * copy=false borrows the arrays, which must outlive the dataset. */
TNT_API tnt_dataset *tnt_dataset_from_arrays(const float *x, tnt_shape x_shape, const float *y,
                                             tnt_shape y_shape, int64_t n, bool copy);
/* IDX files (MNIST format), plain or gzip-compressed. Images become float32 of shape (rows,
 * cols, 1) with raw values 0..255; labels become float32 of shape (). labels may be NULL. */
TNT_API tnt_dataset *tnt_dataset_from_idx(const char *images_path, const char *labels_path);
/* NPY files (version 1/2/3, little-endian, C order; float32/64, int8..int64, uint8..uint64,
 * bool). The first axis is the sample axis. y_path may be NULL. */
TNT_API tnt_dataset *tnt_dataset_from_npy(const char *x_path, const char *y_path);
/* Writes t as an NPY file (version 1.0, little-endian float32, C order), atomically. */
TNT_API tnt_status tnt_save_npy(const char *path, const tnt_tensor *t);

/* tf.data shuffle: a buffer of buffer_size elements, reshuffled each iteration (epoch) from
 * seed and the epoch number, so runs are reproducible. seed 0 means the default, 42 (as in
 * Tarantella: every rank must shuffle the same way). */
TNT_API tnt_dataset *tnt_dataset_shuffle(tnt_dataset *in, int64_t buffer_size, uint64_t seed);
TNT_API tnt_dataset *tnt_dataset_batch(tnt_dataset *in, int64_t batch_size, bool drop_remainder);
/* tf.data's padded_batch over a source whose samples are smaller than its element shape (their
 * extents: tnt_dataset_set_extents): each axis padded to padded_x->dim[i] (-1: the largest extent
 * in the global batch, so every rank's share has the shape of the whole batch) with fill_x; y
 * likewise. NULL: -1 on every axis. No map may come before it (nor after). */
TNT_API tnt_dataset *tnt_dataset_padded_batch(tnt_dataset *in, int64_t batch_size, bool drop_remainder,
                                              const tnt_shape *padded_x, const tnt_shape *padded_y, float fill_x,
                                              float fill_y);
/* Each sample's extent per axis of a source (n * ndim values each, copied; NULL: the whole shape). */
TNT_API tnt_status tnt_dataset_set_extents(tnt_dataset *source, const int32_t *x_ext, const int32_t *y_ext);
/* fn transforms one element in place or into new shapes: it reads x_in/y_in (shapes given at
 * creation) and writes x_out/y_out (x_out_shape/y_out_shape; NULL means unchanged). Returns 0
 * on success, nonzero to fail the iteration. Runs at materialization, possibly on the prefetch
 * thread. */
typedef int (*tnt_map_fn)(const float *x_in, const float *y_in, float *x_out, float *y_out,
                          void *user);
TNT_API tnt_dataset *tnt_dataset_map(tnt_dataset *in, tnt_map_fn fn, void *user,
                                     const tnt_shape *x_out_shape, const tnt_shape *y_out_shape);
/* count < 0: forever */
TNT_API tnt_dataset *tnt_dataset_repeat(tnt_dataset *in, int64_t count);
TNT_API tnt_dataset *tnt_dataset_take(tnt_dataset *in, int64_t count);
TNT_API tnt_dataset *tnt_dataset_skip(tnt_dataset *in, int64_t count);
/* Materializes up to buffer_size elements ahead on a background thread. */
TNT_API tnt_dataset *tnt_dataset_prefetch(tnt_dataset *in, int64_t buffer_size);
TNT_API void tnt_dataset_free(tnt_dataset *ds);

/* Number of elements one iteration yields; -1 when infinite. */
TNT_API int64_t tnt_dataset_cardinality(const tnt_dataset *ds);
/* x packs several inputs one after the other: their sample shapes, which a model with None
 * dimensions takes (kept through the ops but map); n 0 forgets them. */
TNT_API tnt_status tnt_dataset_set_x_parts(tnt_dataset *ds, int n, const tnt_shape *parts);
TNT_API int tnt_dataset_x_parts(const tnt_dataset *ds, const tnt_shape **parts);
/* Shapes of one element (for a batched dataset: without the batch dimension). */
TNT_API tnt_shape tnt_dataset_x_shape(const tnt_dataset *ds);
TNT_API tnt_shape tnt_dataset_y_shape(const tnt_dataset *ds);
TNT_API bool tnt_dataset_has_labels(const tnt_dataset *ds);
TNT_API bool tnt_dataset_is_batched(const tnt_dataset *ds);

/* One element or batch. The arrays belong to the iterator and stay valid until the next call.
 * For a batched dataset x has shape (n, x_shape...); otherwise n == 1 and the shapes are the
 * element shapes with a leading 1. */
typedef struct tnt_batch {
    int64_t n;
    tnt_tensor x, y; /* y.data NULL when the dataset has no labels */
} tnt_batch;
/* epoch selects the shuffle order of this iteration. */
TNT_API tnt_dataset_iter *tnt_dataset_iter_new(tnt_dataset *ds, int64_t epoch);
/* 1: an element was written; 0: end of data; <0: a tnt_status error. */
TNT_API int tnt_dataset_iter_next(tnt_dataset_iter *it, tnt_batch *out);
TNT_API void tnt_dataset_iter_free(tnt_dataset_iter *it);

#endif /* TARANTELLA_DATA_H */
