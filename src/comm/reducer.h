/* reducer.h: inside the gradient reducer (comm/ only). A reducer is a plan (buckets of the flat
 * gradient buffer, the same on every rank) and an implementation behind four calls, so that the
 * flat allreduce, the node-aware reduction and host-staged device buffers plug in alike:
 *  - start_bucket(i): backward has written bucket i (buckets start in plan order);
 *  - wait_bucket(i): returns once bucket i holds the sum (an MPI error code);
 *  - finish_step: every bucket has been started; waits for all of them (an MPI error code);
 *  - destroy: frees what the implementation added (the plan is freed by the caller);
 *  - poll (optional): lets started buckets progress whenever backward reports. */
#ifndef TNT_COMM_REDUCER_H
#define TNT_COMM_REDUCER_H

#include "comm/wait.h"

#include <pthread.h>

typedef struct tnt__bucket {
    int64_t begin, end;
    bool frozen; /* this step: frozen layers' gradients only, not summed (tnt__reducer_set_frozen) */
} tnt__bucket;

typedef struct tnt__reducer_ops {
    const char *name;
    void (*start_bucket)(tnt__reducer *r, int i);
    int (*wait_bucket)(tnt__reducer *r, int i);
    int (*finish_step)(tnt__reducer *r);
    void (*destroy)(tnt__reducer *r);
    void (*poll)(tnt__reducer *r); /* NULL, or progress for started buckets at each report */
    /* node-aware only (NULL for flat) */
    void (*owned)(const tnt__reducer *r, int i, int64_t *begin, int64_t *end);
    int (*share_weights)(tnt__reducer *r, float *params);
    int (*sync)(tnt__reducer *r, const char *what);
} tnt__reducer_ops;

/* A comm thread that runs one bucket's reduction after the other, in plan order. */
typedef struct tnt__comm_queue {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int queued, completed; /* buckets handed over / finished this step */
    bool stop;
    int error_code; /* the step's first MPI error */
    int (*run)(tnt__reducer *r, int i); /* the reduction of bucket i, on the comm thread */
} tnt__comm_queue;

struct tnt__reducer {
    const tnt__reducer_ops *ops;
    float *grads;
    int64_t n;
    tnt__bucket *buckets;
    int n_buckets;
    int started; /* buckets started this step */
    tnt_comm_mode mode;
    tnt_compression compression;
    tnt_reducer_kind kind;
    int n_slots; /* sharded: optimizer slots to hold */
    /* sharded, set for a step (tnt__reducer_set_update): the optimizer's update of a slice this
     * rank owns, run on the comm thread once the slice's sum is there; NULL: after the step */
    tnt__slice_update update;
    void *update_ctx;
    bool active;
    tnt__comm_queue queue;
    void *impl; /* the implementation's own state */
    /* statistics */
    double comm_seconds, exposed_seconds;
    int64_t steps;
};

/* The implementations: each fills r->ops and r->impl (on failure: an error set, false). */
bool tnt__reducer_flat_init(tnt__reducer *r);
/* Node-aware: returns false with no error set when it does not apply (the caller runs flat);
 * on failure sets an error and r->ops (destroy frees what was made). */
bool tnt__reducer_node_init(tnt__reducer *r);
/* node-aware state the public calls read */
float *tnt__reducer_node_grads(const tnt__reducer *r);
float *tnt__reducer_node_slot(const tnt__reducer *r, int k);
float *tnt__reducer_node_sums(const tnt__reducer *r); /* NULL: the sums land in the grads */
float *tnt__reducer_node_weights(const tnt__reducer *r);
void tnt__reducer_node_set_land(tnt__reducer *r, bool land);
void tnt__reducer_node_copy_sums(const tnt__reducer *r, float *to);
/* node-computed kernel gradients (reducer_node_dw.c) */
typedef struct tnt__node_dw tnt__node_dw;
MPI_Comm tnt__reducer_node_local(const tnt__reducer *r, int *me, int *p);
tnt__node_dw *tnt__reducer_node_dw_get(const tnt__reducer *r); /* NULL: none set up */
void tnt__reducer_node_dw_attach(tnt__reducer *r, tnt__node_dw *d, MPI_Win win); /* win freed with the reducer's */
void tnt__node_dw_free(tnt__node_dw *d);
void tnt__node_dw_begin_step(tnt__node_dw *d);
void tnt__node_dw_sync(tnt__node_dw *d); /* MPI_Win_sync of its window (NULL: nothing) */
/* out[s, e) of bucket's slice: the kernels stashed this step computed from the stashes, the rest
 * summed by sum(ctx, out, from, to); with an update, each piece updated as soon as it is final
 * (a kernel's in blocks of ~1 MB, still in cache). An MPI error code. */
int tnt__node_dw_reduce(tnt__node_dw *d, float *out, int64_t s, int64_t e, int bucket,
                        void (*sum)(void *ctx, float *out, int64_t s, int64_t e), void *ctx,
                        tnt__slice_update update, void *update_ctx);
/* At tnt_finalize, once every rank is there: frees every shared window still held. */
void tnt__reducer_release_windows(void);

/* The comm queue: started with the bucket reduction it runs; joined by stop. */
bool tnt__comm_queue_start(tnt__reducer *r, int (*run)(tnt__reducer *r, int i));
void tnt__comm_queue_stop(tnt__reducer *r);
void tnt__comm_queue_begin_step(tnt__reducer *r);
void tnt__comm_queue_push(tnt__reducer *r, int i);   /* bucket i (the next in order) */
int tnt__comm_queue_wait(tnt__reducer *r, int upto); /* buckets [0, upto) done; the step's error */

/* bfloat16 on the wire: float32 -> bfloat16 rounded to nearest even, back, and a user MPI op
 * that sums bfloat16 buffers in float32 (created once). */
void tnt__bf16_compress(uint16_t *wire, const float *x, int64_t n);
void tnt__bf16_decompress(float *x, const uint16_t *wire, int64_t n);
int tnt__bf16_sum_op(MPI_Op *op);

#endif
