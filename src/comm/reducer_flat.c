/* reducer_flat.c: the flat reducer: each bucket is one MPI_Allreduce(MPI_IN_PLACE) on its slice
 * of the gradient buffer across all ranks (no packing copy). Two engines:
 *  - thread: the comm thread (reducer.c) runs the allreduces one after the other, each a
 *    blocking MPI_Allreduce once every rank has arrived (tnt__wait_arrival: a stalled rank is
 *    reported and nobody spins on it). MPI_THREAD_SERIALIZED: only this thread calls MPI during
 *    backward; the compute thread calls MPI again only after finish_step;
 *  - nonblocking: MPI_Iallreduce, progressed with MPI_Testall whenever backward reports.
 * Waits sleep between polls and feed the stall inspector (wait.c). With bf16 compression a
 * bucket is rounded to bfloat16 into a wire buffer of half the bytes, summed there by a user
 * MPI op that adds in float32, and widened back into grads. */
#include "comm/reducer.h"
#include "core/timeline.h"

#include <string.h>

typedef struct flat {
    uint16_t *wire; /* bf16 compression: the buckets as they travel; NULL without */
    MPI_Op bf16_sum;
    MPI_Request *requests; /* nonblocking engine */
    float *send;           /* SimGrid's SMPI only: a send copy of grads */
} flat;

/* Starts (rq given) or runs the allreduce of one bucket. */
static int allreduce_bucket(tnt__reducer *r, tnt__bucket b, MPI_Request *rq) {
    flat *f = r->impl;
    int count = (int)(b.end - b.begin);
    void *buf = r->grads + b.begin;
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (f->wire) {
        tnt__bf16_compress(f->wire + b.begin, r->grads + b.begin, count);
        buf = f->wire + b.begin, type = MPI_UINT16_T, op = f->bf16_sum;
    }
    if (rq) {
        const void *from = MPI_IN_PLACE;
#ifdef TNT_SMPI
        /* SimGrid 3.32's MPI_Iallreduce frees its copy of an in-place buffer before the request
         * completes (a crash over ~2.5 MB): a send buffer of our own */
        size_t bytes = (size_t)count * (f->wire ? sizeof *f->wire : sizeof(float));
        from = memcpy((char *)f->send + (size_t)b.begin * sizeof(float), buf, bytes);
#endif
        return MPI_Iallreduce(from, buf, count, type, op, MPI_COMM_WORLD, rq);
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, type, op, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && f->wire) tnt__bf16_decompress(r->grads + b.begin, f->wire + b.begin, count);
    return rc;
}

/* ---- thread engine ---- */

static int run_bucket(tnt__reducer *r, int i) {
    double t0 = TNT_TL_BEGIN();
    int rc = tnt__wait_arrival("gradient allreduce");
    double t1 = TNT_TL_BEGIN();
    TNT_TL_END("reduction.wait", "arrival", i, t0);
    if (rc == MPI_SUCCESS && !r->buckets[i].frozen) rc = allreduce_bucket(r, r->buckets[i], NULL);
    TNT_TL_END("reduction.allreduce", "allreduce", i, t1);
    return rc;
}

static void thread_start(tnt__reducer *r, int i) { tnt__comm_queue_push(r, i); }
static int thread_wait(tnt__reducer *r, int i) { return tnt__comm_queue_wait(r, i + 1); }
static int thread_finish(tnt__reducer *r) { return tnt__comm_queue_wait(r, r->started); }

/* ---- nonblocking engine ---- */

static void nb_start(tnt__reducer *r, int i) {
    flat *f = r->impl;
    if (r->buckets[i].frozen) f->requests[i] = MPI_REQUEST_NULL;
    else allreduce_bucket(r, r->buckets[i], &f->requests[i]);
}

static void nb_poll(tnt__reducer *r) {
    flat *f = r->impl;
    int flag;
    MPI_Testall(r->started, f->requests, &flag, MPI_STATUSES_IGNORE);
}

static int nb_wait_upto(tnt__reducer *r, int upto) {
    flat *f = r->impl;
    double t0 = tnt__now();
    int err = tnt__wait(upto, f->requests, "gradient allreduce");
    if (err == MPI_SUCCESS && f->wire)
        for (int i = 0; i < upto; i++) {
            tnt__bucket b = r->buckets[i];
            if (!b.frozen) tnt__bf16_decompress(r->grads + b.begin, f->wire + b.begin, b.end - b.begin);
        }
    r->comm_seconds += tnt__now() - t0; /* only the waited part is measurable here */
    return err;
}

static int nb_wait(tnt__reducer *r, int i) { return nb_wait_upto(r, i + 1); }
static int nb_finish(tnt__reducer *r) { return nb_wait_upto(r, r->started); }

static void destroy(tnt__reducer *r) {
    flat *f = r->impl;
    tnt__comm_queue_stop(r);
    if (!f) return;
    if (f->wire) MPI_Op_free(&f->bf16_sum);
    free(f->wire);
    free(f->requests);
    free(f->send);
    free(f);
    r->impl = NULL;
}

static const tnt__reducer_ops thread_ops = {"flat", thread_start, thread_wait, thread_finish, destroy, NULL, NULL, NULL, NULL};
static const tnt__reducer_ops nonblocking_ops = {"flat", nb_start, nb_wait, nb_finish, destroy, nb_poll, NULL, NULL, NULL};

bool tnt__reducer_flat_init(tnt__reducer *r) {
    flat *f = tnt__calloc(1, sizeof *f);
    if (!f) return false;
    r->impl = f;
    r->kind = TNT_REDUCER_FLAT;
    r->ops = r->mode == TNT_COMM_MODE_NONBLOCKING ? &nonblocking_ops : &thread_ops;
    if (r->compression == TNT_COMPRESSION_BF16) {
        if (!(f->wire = tnt__calloc((size_t)(r->n ? r->n : 1), sizeof *f->wire))) return false;
        if (tnt__bf16_sum_op(&f->bf16_sum) != MPI_SUCCESS) {
            free(f->wire);
            f->wire = NULL;
            tnt__error(TNT_ERR_MPI, "reducer: cannot create the bfloat16 sum");
            return false;
        }
    }
    if (r->mode == TNT_COMM_MODE_NONBLOCKING) {
        if (!(f->requests = tnt__calloc((size_t)(r->n_buckets ? r->n_buckets : 1), sizeof(MPI_Request)))) return false;
        for (int i = 0; i < r->n_buckets; i++) f->requests[i] = MPI_REQUEST_NULL;
#ifdef TNT_SMPI
        if (!(f->send = tnt__calloc((size_t)(r->n ? r->n : 1), sizeof(float)))) return false;
#endif
        return true;
    }
    return tnt__comm_queue_start(r, run_bucket);
}
