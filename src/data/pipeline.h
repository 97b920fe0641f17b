/* pipeline.h: private structures of the dataset pipeline, shared by the files in src/data/.
 *
 * The pipeline works on sample indices: a dataset is a chain of nodes ending in one source that
 * gives random access to sample i. Iterating runs the chain on index streams (an element is a
 * list of source indices: one for a sample, up to batch_size for a batch); samples are decoded
 * from the source and passed through the chain's maps only when an element is materialized. */
#ifndef TNT_DATA_PIPELINE_H
#define TNT_DATA_PIPELINE_H

#include "data/dataset.h"

/* Element types a source column may store; converted to float32 at materialization. */
typedef enum tnt__dtype {
    TNT__F32, TNT__F64, TNT__I8, TNT__I16, TNT__I32, TNT__I64,
    TNT__U8, TNT__U16, TNT__U32, TNT__U64, TNT__BOOL,
} tnt__dtype;
size_t tnt__dtype_size(tnt__dtype dt);
/* Converts n little-endian values at src (any alignment) to float32. */
void tnt__convert_to_f32(const unsigned char *src, tnt__dtype dt, int64_t n, float *dst);

typedef enum tnt__own { TNT__OWN_NONE, TNT__OWN_FREE, TNT__OWN_MUNMAP } tnt__own;

/* One array of a source: n samples of `shape`, stored contiguously from data. base/base_len is
 * what to release (malloc'd block or mapping) per own. */
typedef struct tnt__column {
    const unsigned char *data;
    tnt__dtype dtype;
    tnt_shape shape;
    int64_t numel;
    tnt__own own;
    void *base;
    size_t base_len;
} tnt__column;
void tnt__column_release(tnt__column *c);

typedef enum tnt__op {
    TNT__OP_SOURCE, TNT__OP_SHUFFLE, TNT__OP_BATCH, TNT__OP_MAP,
    TNT__OP_REPEAT, TNT__OP_TAKE, TNT__OP_SKIP, TNT__OP_PREFETCH,
} tnt__op;

struct tnt_dataset {
    tnt__op op;
    tnt_dataset *in;  /* input node, owned; NULL for the source */
    int depth;        /* nodes from here down to the source, inclusive */
    tnt_shape x_shape, y_shape; /* one element, without a batch dimension */
    int n_parts;                /* x packs several inputs: their sample shapes (0: unknown) */
    tnt_shape parts[8];
    bool has_y, batched;
    int64_t width;    /* most source indices in one element: the batch size, or 1 */
    int64_t card;     /* elements per iteration, -1 infinite */
    int64_t count;    /* batch size, repeat/take/skip count, shuffle/prefetch buffer size */
    bool drop_remainder;
    uint64_t seed;
    tnt_map_fn fn;
    void *user;
    int64_t n;        /* source: samples */
    tnt__column x, y; /* source: arrays (y unused without labels) */
    /* source: each sample's own extent per axis when the arrays hold samples of different shapes
     * padded to a common one (n * ndim values; NULL: every sample fills the whole shape) */
    int32_t *x_ext, *y_ext;
    /* padded batch (tf.data's padded_batch): each axis padded to pad_x/pad_y, -1 there: to the
     * largest extent of the global batch; the rest filled with fill_x/fill_y */
    bool padded;
    int64_t pad_x[TNT_MAX_DIMS], pad_y[TNT_MAX_DIMS];
    float fill_x, fill_y;
};

/* A source node owning the columns; they are released on failure too. y may be NULL. */
tnt_dataset *tnt__dataset_source(const char *who, int64_t n, tnt__column *x, tnt__column *y);

/* Per-iteration state of one node. */
typedef struct tnt__node_it {
    const tnt_dataset *ds;
    uint64_t key;    /* iteration key: the epoch, remixed per repetition of an enclosing repeat */
    int64_t pos;     /* source: next index; take/skip: elements seen; repeat: repetition */
    bool flag;       /* repeat: the repetition produced something; shuffle: input ended */
    bool done;       /* repeat: finished; skip: skipping done; shuffle: buffer filled */
    uint64_t seed, draws;        /* shuffle: generator key and draws so far */
    int64_t cap, count, *buf, *len; /* shuffle: cap elements of width indices, count held */
} tnt__node_it;

/* Output buffers of one materialized element (or share of a batch). */
typedef struct tnt__slot {
    float *x, *y;
    int64_t n, global_n;
    bool shaped;      /* a padded batch: its element shapes are xs, ys (each batch its own) */
    tnt_shape xs, ys;
    int status; /* 1, 0 or a negative tnt_status */
    char msg[1024];
} tnt__slot;

typedef struct tnt__prefetch tnt__prefetch;

struct tnt_dataset_iter {
    const tnt_dataset *ds, *src;
    int depth;
    tnt__node_it *nodes; /* nodes[0] is ds, nodes[depth-1] the source */
    int64_t *item;       /* indices of the current element */
    const tnt_dataset **maps; /* map nodes, innermost first */
    int nmaps;
    float *sx[2], *sy[2]; /* scratch for the map chain */
    tnt__slot direct;     /* output without prefetch */
    bool finished;        /* direct mode: the end or an error was reached; repeat it */
    tnt__prefetch *pf;    /* NULL without a prefetch node */
    const tnt_dataset *padded; /* the padded batch node of the chain, NULL: none */
    float *pad_sx, *pad_sy;    /* one source sample, decoded before it is placed */
};

/* Allocates the buffers of one output slot for the iterator's dataset. */
tnt_status tnt__slot_init(const tnt_dataset_iter *it, tnt__slot *s);
void tnt__slot_release(tnt__slot *s);
/* Advances the index stream by one element and materializes share `part` of it into slot.
 * Returns 1/0/<0. Runs on the prefetch thread when there is one. */
int tnt__iter_produce(tnt_dataset_iter *it, int part, int nparts, tnt__slot *slot);

/* Padded batches (padded.c): the element shapes of the global batch idx[0..n) (the same on every
 * rank, whatever its share), and the share's samples placed into them. */
tnt_status tnt__padded_shapes(const tnt_dataset_iter *it, const int64_t *idx, int64_t n, tnt_shape *xs,
                              tnt_shape *ys);
tnt_status tnt__materialize_padded(const tnt_dataset_iter *it, const int64_t *idx, int64_t n, tnt_shape xs,
                                   tnt_shape ys, float *x, float *y);
/* The chain below ds (ds included) has a node of op. */
bool tnt__chain_has(const tnt_dataset *ds, tnt__op op);

tnt__prefetch *tnt__prefetch_new(tnt_dataset_iter *it, int64_t buffer_size);
/* Next slot from the background thread (started on the first call). Returns 1/0/<0 with the
 * thread's message re-raised on this thread. */
int tnt__prefetch_next(tnt__prefetch *pf, int part, int nparts, const tnt__slot **out);
/* Stops and joins the thread, frees the slots. */
void tnt__prefetch_free(tnt__prefetch *pf);

#endif
