/* dataset.c: dataset nodes: the array source, the ops (shuffle, batch, map, repeat, take, skip,
 * prefetch), cardinality and accessors. Ops only record parameters and derive shapes and
 * cardinality; the work happens per iteration in iter.c. */
#include "data/pipeline.h"

#include <sys/mman.h>

/* Largest number of values a source or element may hold; keeps byte counts far from overflow. */
#define MAX_VALUES ((int64_t)1 << 40)

size_t tnt__dtype_size(tnt__dtype dt) {
    switch (dt) {
    case TNT__I8: case TNT__U8: case TNT__BOOL: return 1;
    case TNT__I16: case TNT__U16: return 2;
    case TNT__F32: case TNT__I32: case TNT__U32: return 4;
    case TNT__F64: case TNT__I64: case TNT__U64: return 8;
    }
    return 1;
}

/* memcpy per value: NPY data need not be aligned, and this compiles to a plain load. */
#define CONVERT(T)                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T v;                                                                                      \
        memcpy(&v, src + (size_t)i * sizeof(T), sizeof(T));                                       \
        dst[i] = (float)v;                                                                        \
    }                                                                                             \
    return

void tnt__convert_to_f32(const unsigned char *src, tnt__dtype dt, int64_t n, float *dst) {
    switch (dt) {
    case TNT__F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case TNT__U8: for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i]; return;
    case TNT__BOOL: for (int64_t i = 0; i < n; i++) dst[i] = src[i] ? 1.0f : 0.0f; return;
    case TNT__I8: CONVERT(int8_t);
    case TNT__I16: CONVERT(int16_t);
    case TNT__U16: CONVERT(uint16_t);
    case TNT__I32: CONVERT(int32_t);
    case TNT__U32: CONVERT(uint32_t);
    case TNT__I64: CONVERT(int64_t);
    case TNT__U64: CONVERT(uint64_t);
    case TNT__F64: CONVERT(double);
    }
}

void tnt__column_release(tnt__column *c) {
    if (!c) return;
    if (c->own == TNT__OWN_FREE) free(c->base);
    else if (c->own == TNT__OWN_MUNMAP && c->base) munmap(c->base, c->base_len);
    c->own = TNT__OWN_NONE;
    c->base = NULL;
}

/* An element shape must leave room for the batch dimension. */
static tnt_status check_shape(const char *who, const char *what, tnt_shape s) {
    char b[160];
    if (s.ndim < 0 || s.ndim > TNT_MAX_DIMS - 1)
        return tnt__error(TNT_ERR_SHAPE, "%s: %s has %d dimensions (expected 0..%d)", who, what,
                          s.ndim, TNT_MAX_DIMS - 1);
    int64_t numel = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.dim[i] <= 0) /* 0: an epoch of empty samples that runs for ever and computes nothing */
            return tnt__error(TNT_ERR_SHAPE, "%s: %s %s has dimension %d of size %lld (expected >= 1)", who, what,
                              tnt_shape_str(s, b, sizeof b), i, (long long)s.dim[i]);
        if (s.dim[i] > 0 && numel > MAX_VALUES / s.dim[i])
            return tnt__error(TNT_ERR_SHAPE, "%s: %s %s is too large", who, what,
                              tnt_shape_str(s, b, sizeof b));
        numel *= s.dim[i];
    }
    return TNT_OK;
}

static tnt_status check_count(const char *who, const char *what, int64_t n, int64_t numel) {
    if (numel > 0 && n > MAX_VALUES / numel)
        return tnt__error(TNT_ERR_SHAPE, "%s: %lld %s of %lld values each are too many", who,
                          (long long)n, what, (long long)numel);
    return TNT_OK;
}

tnt_dataset *tnt__dataset_source(const char *who, int64_t n, tnt__column *x, tnt__column *y) {
    tnt_dataset *ds = NULL;
    if (check_shape(who, "x sample shape", x->shape) || (y && check_shape(who, "y sample shape", y->shape)))
        goto fail;
    x->numel = tnt_shape_numel(x->shape);
    if (y) y->numel = tnt_shape_numel(y->shape);
    if (check_count(who, "samples", n, x->numel) || (y && check_count(who, "labels", n, y->numel)))
        goto fail;
    if (!(ds = tnt__calloc(1, sizeof *ds))) goto fail;
    *ds = (tnt_dataset){.op = TNT__OP_SOURCE, .depth = 1, .x_shape = x->shape, .has_y = y != NULL,
                        .width = 1, .card = n, .n = n, .x = *x};
    if (y) {
        ds->y = *y;
        ds->y_shape = y->shape;
    }
    return ds;
fail:
    tnt__column_release(x);
    tnt__column_release(y);
    return NULL;
}

tnt_dataset *tnt_dataset_from_arrays(const float *x, tnt_shape x_shape, const float *y,
                                     tnt_shape y_shape, int64_t n, bool copy) {
    const char *who = "dataset_from_arrays";
    if (n < 0) {
        tnt__error(TNT_ERR_ARG, "%s: n %lld (expected >= 0)", who, (long long)n);
        return NULL;
    }
    if (!x && n > 0) {
        tnt__error(TNT_ERR_ARG, "%s: x is NULL with n %lld", who, (long long)n);
        return NULL;
    }
    tnt__column cx = {.data = (const unsigned char *)x, .dtype = TNT__F32, .shape = x_shape};
    tnt__column cy = {.data = (const unsigned char *)y, .dtype = TNT__F32, .shape = y_shape};
    if (check_shape(who, "x_shape", x_shape) || (y && check_shape(who, "y_shape", y_shape)) ||
        check_count(who, "samples", n, tnt_shape_numel(x_shape)) ||
        (y && check_count(who, "labels", n, tnt_shape_numel(y_shape))))
        return NULL;
    if (copy) {
        tnt__column *cols[2] = {&cx, y ? &cy : NULL};
        for (int k = 0; k < 2; k++) {
            if (!cols[k]) continue;
            size_t bytes = (size_t)(n * tnt_shape_numel(cols[k]->shape)) * sizeof(float);
            void *p = malloc(bytes ? bytes : 1);
            if (!p) {
                tnt__column_release(&cx);
                tnt__error(TNT_ERR_NOMEM, "%s: out of memory copying %zu bytes", who, bytes);
                return NULL;
            }
            if (bytes) memcpy(p, cols[k]->data, bytes);
            *cols[k] = (tnt__column){.data = p, .dtype = TNT__F32, .shape = cols[k]->shape,
                                     .own = TNT__OWN_FREE, .base = p};
        }
    }
    return tnt__dataset_source(who, n, &cx, y ? &cy : NULL);
}

/* A new node over in, inheriting its element description; frees in on failure. */
static tnt_dataset *new_node(tnt_dataset *in, tnt__op op) {
    tnt_dataset *ds = tnt__calloc(1, sizeof *ds);
    if (!ds) {
        tnt_dataset_free(in);
        return NULL;
    }
    *ds = (tnt_dataset){.op = op, .in = in, .depth = in->depth + 1, .x_shape = in->x_shape,
                        .y_shape = in->y_shape, .has_y = in->has_y, .batched = in->batched,
                        .width = in->width, .card = in->card, .n_parts = in->n_parts};
    memcpy(ds->parts, in->parts, sizeof ds->parts);
    return ds;
}

/* Reports an op's own failure: the input is consumed. */
static tnt_dataset *fail_op(tnt_dataset *in) {
    tnt_dataset_free(in);
    return NULL;
}

tnt_dataset *tnt_dataset_shuffle(tnt_dataset *in, int64_t buffer_size, uint64_t seed) {
    if (!in) return NULL; /* keep the error of the constructor that failed */
    if (buffer_size <= 0) {
        tnt__error(TNT_ERR_ARG, "shuffle: buffer_size %lld (expected > 0)", (long long)buffer_size);
        return fail_op(in);
    }
    tnt_dataset *ds = new_node(in, TNT__OP_SHUFFLE);
    /* no seed given: 42 as in Tarantella, so that every rank shuffles the same way */
    if (ds) ds->count = buffer_size, ds->seed = seed ? seed : 42;
    return ds;
}

tnt_dataset *tnt_dataset_batch(tnt_dataset *in, int64_t batch_size, bool drop_remainder) {
    if (!in) return NULL;
    if (batch_size <= 0) {
        tnt__error(TNT_ERR_ARG, "batch: batch_size %lld (expected > 0)", (long long)batch_size);
        return fail_op(in);
    }
    if (in->batched) {
        tnt__error(TNT_ERR_UNSUPPORTED,
                   "batch: the dataset is already batched (batch size %lld); batching batches is not supported",
                   (long long)in->width);
        return fail_op(in);
    }
    if (check_count("batch", "samples per batch", batch_size,
                    TNT_MAX(tnt_shape_numel(in->x_shape), tnt_shape_numel(in->y_shape))))
        return fail_op(in);
    tnt_dataset *ds = new_node(in, TNT__OP_BATCH);
    if (!ds) return NULL;
    ds->count = batch_size;
    ds->drop_remainder = drop_remainder;
    ds->batched = true;
    ds->width = batch_size;
    if (in->card >= 0)
        ds->card = drop_remainder ? in->card / batch_size : (in->card + batch_size - 1) / batch_size;
    return ds;
}

tnt_dataset *tnt_dataset_map(tnt_dataset *in, tnt_map_fn fn, void *user,
                             const tnt_shape *x_out_shape, const tnt_shape *y_out_shape) {
    if (!in) return NULL;
    if (!fn) {
        tnt__error(TNT_ERR_ARG, "map: fn is NULL");
        return fail_op(in);
    }
    if (y_out_shape && !in->has_y) {
        tnt__error(TNT_ERR_ARG, "map: y_out_shape given but the dataset has no labels");
        return fail_op(in);
    }
    if (tnt__chain_has(in, TNT__OP_BATCH) && in->batched) {
        const tnt_dataset *b = in;
        while (b && b->op != TNT__OP_BATCH) b = b->in;
        if (b && b->padded) {
            tnt__error(TNT_ERR_UNSUPPORTED, "map: after padded_batch (its batches have shapes of their own)");
            return fail_op(in);
        }
    }
    if ((x_out_shape && check_shape("map", "x_out_shape", *x_out_shape)) ||
        (y_out_shape && check_shape("map", "y_out_shape", *y_out_shape)))
        return fail_op(in);
    tnt_dataset *ds = new_node(in, TNT__OP_MAP);
    if (!ds) return NULL;
    ds->fn = fn;
    ds->user = user;
    if (x_out_shape) ds->x_shape = *x_out_shape, ds->n_parts = 0;
    if (y_out_shape) ds->y_shape = *y_out_shape;
    return ds;
}

tnt_dataset *tnt_dataset_repeat(tnt_dataset *in, int64_t count) {
    if (!in) return NULL;
    tnt_dataset *ds = new_node(in, TNT__OP_REPEAT);
    if (!ds) return NULL;
    ds->count = count < 0 ? -1 : count;
    if (count == 0 || in->card == 0) ds->card = 0;
    else if (count < 0 || in->card < 0) ds->card = -1;
    else ds->card = in->card > INT64_MAX / count ? -1 : in->card * count;
    return ds;
}

tnt_dataset *tnt_dataset_take(tnt_dataset *in, int64_t count) {
    if (!in) return NULL;
    tnt_dataset *ds = new_node(in, TNT__OP_TAKE);
    if (!ds) return NULL;
    ds->count = count < 0 ? -1 : count; /* -1: all, as tf.data */
    if (count >= 0) ds->card = in->card < 0 ? count : TNT_MIN(in->card, count);
    return ds;
}

tnt_dataset *tnt_dataset_skip(tnt_dataset *in, int64_t count) {
    if (!in) return NULL;
    tnt_dataset *ds = new_node(in, TNT__OP_SKIP);
    if (!ds) return NULL;
    ds->count = count < 0 ? -1 : count; /* -1: everything, as tf.data */
    if (count < 0) ds->card = in->card < 0 ? -1 : 0;
    else if (in->card >= 0) ds->card = TNT_MAX(in->card - count, 0);
    return ds;
}

tnt_dataset *tnt_dataset_prefetch(tnt_dataset *in, int64_t buffer_size) {
    if (!in) return NULL;
    if (buffer_size == -1) buffer_size = 2; /* tf.data.AUTOTUNE */
    if (buffer_size <= 0) {
        tnt__error(TNT_ERR_ARG, "prefetch: buffer_size %lld (expected > 0, or -1 for automatic)",
                   (long long)buffer_size);
        return fail_op(in);
    }
    tnt_dataset *ds = new_node(in, TNT__OP_PREFETCH);
    if (ds) ds->count = buffer_size;
    return ds;
}

void tnt_dataset_free(tnt_dataset *ds) {
    while (ds) {
        tnt_dataset *in = ds->in;
        if (ds->op == TNT__OP_SOURCE) {
            tnt__column_release(&ds->x);
            tnt__column_release(&ds->y);
            free(ds->x_ext);
            free(ds->y_ext);
        }
        free(ds);
        ds = in;
    }
}

int64_t tnt_dataset_cardinality(const tnt_dataset *ds) { return ds ? ds->card : 0; }

tnt_status tnt_dataset_set_x_parts(tnt_dataset *ds, int n, const tnt_shape *parts) {
    if (!ds || (n && !parts)) return tnt__error(TNT_ERR_ARG, "dataset_set_x_parts: NULL argument");
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += tnt_shape_numel(parts[i]);
    if (n < 0 || n > 8 || (n && total != tnt_shape_numel(ds->x_shape)))
        return tnt__error(TNT_ERR_ARG, "dataset_set_x_parts: %d parts of %lld values for elements of %lld (expected 0..8 "
                          "parts that add up)", n, (long long)total, (long long)tnt_shape_numel(ds->x_shape));
    ds->n_parts = n;
    for (int i = 0; i < n; i++) ds->parts[i] = parts[i];
    return TNT_OK;
}

int tnt_dataset_x_parts(const tnt_dataset *ds, const tnt_shape **parts) {
    if (parts) *parts = ds ? ds->parts : NULL;
    return ds ? ds->n_parts : 0;
}
tnt_shape tnt_dataset_x_shape(const tnt_dataset *ds) { return ds ? ds->x_shape : (tnt_shape){0}; }
tnt_shape tnt_dataset_y_shape(const tnt_dataset *ds) { return ds ? ds->y_shape : (tnt_shape){0}; }
bool tnt_dataset_has_labels(const tnt_dataset *ds) { return ds && ds->has_y; }
bool tnt_dataset_is_batched(const tnt_dataset *ds) { return ds && ds->batched; }

tnt_dataset *tnt__dataset_batch_view(tnt_dataset *in, int64_t batch_size, bool drop_remainder) {
    if (!in || in->batched || batch_size <= 0) {
        tnt__error(TNT_ERR_ARG, "batch view: needs an unbatched dataset and batch_size %lld > 0",
                   (long long)batch_size);
        return NULL;
    }
    tnt_dataset *ds = tnt__calloc(1, sizeof *ds);
    if (!ds) return NULL;
    *ds = (tnt_dataset){.op = TNT__OP_BATCH, .in = in, .depth = in->depth + 1, .x_shape = in->x_shape,
                        .y_shape = in->y_shape, .has_y = in->has_y, .batched = true, .n_parts = in->n_parts,
                        .width = batch_size, .count = batch_size, .drop_remainder = drop_remainder,
                        .card = in->card < 0 ? -1
                                : drop_remainder ? in->card / batch_size
                                                 : (in->card + batch_size - 1) / batch_size};
    memcpy(ds->parts, in->parts, sizeof ds->parts);
    return ds;
}

void tnt__dataset_view_free(tnt_dataset *view) { free(view); }

int64_t tnt__dataset_batch_size(const tnt_dataset *ds) { return ds && ds->batched ? ds->width : 0; }
