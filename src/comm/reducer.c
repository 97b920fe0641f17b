/* reducer.c: gradient allreduce fused into buckets and overlapped with backward.
 *
 * The plan walks the flat gradient buffer in backward order and cuts a bucket at a layer
 * boundary once it holds threshold bytes; a bucket over 16 MiB goes as several collectives. During backward the compute thread reports the
 * finished prefix of the buffer; each bucket inside it is started at once, in plan order, with
 * MPI_Allreduce(MPI_IN_PLACE) on its slice: no packing copy. Two engines:
 *  - thread: a comm thread runs the allreduces of a queue one after the other, each a blocking
 *    MPI_Allreduce once every rank has arrived (tnt__wait_arrival: a stalled rank is reported
 *    and nobody spins on it). MPI_THREAD_SERIALIZED: only this thread calls MPI during backward;
 *    the compute thread calls MPI again only after finish_step;
 *  - nonblocking: MPI_Iallreduce, progressed with MPI_Testall whenever backward reports.
 * Waits sleep between polls and feed the stall inspector (wait.c). With bf16 compression a
 * bucket is rounded to bfloat16 into a wire buffer of half the bytes, summed there by a user
 * MPI op that adds in float32, and widened back into grads.
 * Every rank has the same plan and issues the same collectives in the same order. */
#include "comm/wait.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct bucket {
    int64_t begin, end;
} bucket;

struct tnt__reducer {
    float *grads;
    int64_t n;
    bucket *buckets;
    int n_buckets;
    tnt_comm_mode mode;
    bool active;
    uint16_t *wire; /* bf16 compression: the buckets as they travel; NULL without */
    MPI_Op bf16_sum;

    /* per step */
    int started;   /* buckets handed to the engine */
    /* thread engine */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int completed;
    bool stop;
    int error_code;
    /* nonblocking engine */
    MPI_Request *requests;
    float *send; /* SimGrid's SMPI only: a send copy of grads (start_upto) */

    /* statistics */
    double comm_seconds, exposed_seconds;
    int64_t steps;
};

/* float32 -> bfloat16, rounded to nearest even; a NaN stays a (quiet) NaN */
static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

static inline float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

static void compress(const tnt__reducer *r, bucket b) {
    for (int64_t i = b.begin; i < b.end; i++) r->wire[i] = to_bf16(r->grads[i]);
}

static void decompress(const tnt__reducer *r, bucket b) {
    for (int64_t i = b.begin; i < b.end; i++) r->grads[i] = from_bf16(r->wire[i]);
}

/* Starts (rq given) or runs the allreduce of one bucket. */
static int allreduce_bucket(const tnt__reducer *r, bucket b, MPI_Request *rq) {
    int count = (int)(b.end - b.begin);
    void *buf = r->grads + b.begin;
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (r->wire) {
        compress(r, b);
        buf = r->wire + b.begin, type = MPI_UINT16_T, op = r->bf16_sum;
    }
    if (rq) {
        const void *from = MPI_IN_PLACE;
#ifdef TNT_SMPI
        /* SimGrid 3.32's MPI_Iallreduce frees its copy of an in-place buffer before the request
         * completes (a crash over ~2.5 MB): a send buffer of our own */
        size_t bytes = (size_t)count * (r->wire ? sizeof *r->wire : sizeof(float));
        from = memcpy((char *)r->send + (size_t)b.begin * sizeof(float), buf, bytes);
#endif
        return MPI_Iallreduce(from, buf, count, type, op, MPI_COMM_WORLD, rq);
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, type, op, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && r->wire) decompress(r, b);
    return rc;
}

static void *comm_thread(void *arg) {
    tnt__reducer *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->completed >= r->started) pthread_cond_wait(&r->cv_work, &r->mu);
        if (r->stop) break;
        bucket b = r->buckets[r->completed];
        pthread_mutex_unlock(&r->mu);
        double t0 = tnt__now();
        int rc = tnt__wait_arrival("gradient allreduce");
        if (rc == MPI_SUCCESS) rc = allreduce_bucket(r, b, NULL);
        double dt = tnt__now() - t0;
        pthread_mutex_lock(&r->mu);
        r->comm_seconds += dt;
        if (rc != MPI_SUCCESS && !r->error_code) r->error_code = rc;
        r->completed++;
        pthread_cond_broadcast(&r->cv_done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

tnt__reducer *tnt__reducer_new(float *grads, int64_t n, const int64_t *layer_end, int n_layers,
                               size_t threshold_bytes, tnt_comm_mode mode, tnt_compression compression) {
    tnt__reducer *r = tnt__calloc(1, sizeof *r);
    if (!r) return NULL;
    r->grads = grads;
    r->n = n;
    r->mode = mode;
    r->active = tnt__world_active();
    bucket *groups = tnt__calloc((size_t)(n_layers ? n_layers : 1), sizeof *groups);
    if (!groups) goto fail;
    int n_groups = 0;
    int64_t begin = 0;
    for (int i = 0; i < n_layers; i++) {
        int64_t end = layer_end[i];
        bool big = (size_t)(end - begin) * sizeof(float) >= threshold_bytes;
        if (end > begin && (big || i == n_layers - 1)) {
            groups[n_groups++] = (bucket){begin, end};
            begin = end;
        }
    }
    /* a small last group (the first layers, e.g. a first conv's few weights) joins the one
     * before: one collective's latency less for a few bytes' later start */
    if (n_groups >= 2 && (size_t)(groups[n_groups - 1].end - groups[n_groups - 1].begin) * sizeof(float) < threshold_bytes) {
        groups[n_groups - 2].end = groups[n_groups - 1].end;
        n_groups--;
    }
    /* a group over TNT__COLLECTIVE_MAX_FLOATS goes as several collectives */
    int64_t pieces = 0;
    for (int i = 0; i < n_groups; i++)
        pieces += (groups[i].end - groups[i].begin + TNT__COLLECTIVE_MAX_FLOATS - 1) / TNT__COLLECTIVE_MAX_FLOATS;
    if (pieces > INT32_MAX || !(r->buckets = tnt__calloc((size_t)(pieces ? pieces : 1), sizeof *r->buckets))) {
        free(groups);
        goto fail;
    }
    for (int i = 0; i < n_groups; i++)
        for (int64_t at = groups[i].begin; at < groups[i].end; at += TNT__COLLECTIVE_MAX_FLOATS)
            r->buckets[r->n_buckets++] = (bucket){at, TNT_MIN(groups[i].end, at + TNT__COLLECTIVE_MAX_FLOATS)};
    free(groups);
    if (!r->active) return r;
    if (compression == TNT_COMPRESSION_BF16) {
        if (!(r->wire = tnt__calloc((size_t)(n ? n : 1), sizeof *r->wire))) goto fail;
        if (MPI_Op_create(bf16_sum, 1, &r->bf16_sum) != MPI_SUCCESS) {
            free(r->wire);
            r->wire = NULL;
            tnt__error(TNT_ERR_MPI, "reducer: cannot create the bfloat16 sum");
            goto fail;
        }
    }
    if (mode == TNT_COMM_MODE_NONBLOCKING) {
        r->requests = tnt__calloc((size_t)(r->n_buckets ? r->n_buckets : 1), sizeof(MPI_Request));
        if (!r->requests) goto fail;
        for (int i = 0; i < r->n_buckets; i++) r->requests[i] = MPI_REQUEST_NULL;
#ifdef TNT_SMPI
        if (!(r->send = tnt__calloc((size_t)(n ? n : 1), sizeof(float)))) goto fail;
#endif
        return r;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_work, NULL);
    pthread_cond_init(&r->cv_done, NULL);
    if (pthread_create(&r->thread, NULL, comm_thread, r) != 0) {
        tnt__error(TNT_ERR_NOMEM, "reducer: cannot start the comm thread");
        goto fail;
    }
    r->thread_started = true;
    return r;
fail:
    tnt__reducer_free(r);
    return NULL;
}

void tnt__reducer_free(tnt__reducer *r) {
    if (!r) return;
    if (r->thread_started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_broadcast(&r->cv_work);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv_work);
        pthread_cond_destroy(&r->cv_done);
    }
    if (r->wire) MPI_Op_free(&r->bf16_sum);
    free(r->wire);
    free(r->requests);
    free(r->send);
    free(r->buckets);
    free(r);
}

int tnt__reducer_num_buckets(const tnt__reducer *r) { return r->n_buckets; }
tnt_comm_mode tnt__reducer_mode(const tnt__reducer *r) { return r->mode; }

void tnt__reducer_begin_step(tnt__reducer *r) {
    if (r->mode == TNT_COMM_MODE_THREAD && r->thread_started) {
        pthread_mutex_lock(&r->mu);
        r->started = 0;
        r->completed = 0;
        pthread_mutex_unlock(&r->mu);
    } else {
        r->started = 0;
    }
}

static void start_upto(tnt__reducer *r, int64_t prefix) {
    if (!r->active) return;
    if (r->mode == TNT_COMM_MODE_NONBLOCKING) {
        while (r->started < r->n_buckets && r->buckets[r->started].end <= prefix) {
            allreduce_bucket(r, r->buckets[r->started], &r->requests[r->started]);
            r->started++;
        }
        if (r->started) {
            int flag;
            MPI_Testall(r->started, r->requests, &flag, MPI_STATUSES_IGNORE);
        }
        return;
    }
    pthread_mutex_lock(&r->mu);
    int before = r->started;
    while (r->started < r->n_buckets && r->buckets[r->started].end <= prefix) r->started++;
    if (r->started != before) pthread_cond_signal(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
}

void tnt__reducer_ready(tnt__reducer *r, int64_t prefix) { start_upto(r, prefix); }

tnt_status tnt__reducer_finish_step(tnt__reducer *r) {
    if (!r->active) return TNT_OK;
    start_upto(r, r->n);
    double t0 = tnt__now();
    int err = 0;
    if (r->mode == TNT_COMM_MODE_NONBLOCKING) {
        err = tnt__wait(r->started, r->requests, "gradient allreduce");
        if (err == MPI_SUCCESS && r->wire)
            for (int i = 0; i < r->started; i++) decompress(r, r->buckets[i]);
        r->comm_seconds += tnt__now() - t0; /* only the waited part is measurable here */
    } else {
        pthread_mutex_lock(&r->mu);
        while (r->completed < r->started) pthread_cond_wait(&r->cv_done, &r->mu);
        err = r->error_code;
        r->error_code = 0;
        pthread_mutex_unlock(&r->mu);
    }
    r->exposed_seconds += tnt__now() - t0;
    r->steps++;
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        return tnt__error(TNT_ERR_MPI, "gradient allreduce failed on rank %d: %.*s", tnt__world_rank(), len, msg);
    }
    return TNT_OK;
}

void tnt__reducer_stats(const tnt__reducer *r, double *comm_seconds, double *exposed_seconds, int64_t *steps) {
    if (comm_seconds) *comm_seconds = r->comm_seconds;
    if (exposed_seconds) *exposed_seconds = r->exposed_seconds;
    if (steps) *steps = r->steps;
}
