/* reducer.c: gradient allreduce fused into buckets and overlapped with backward.
 *
 * The plan walks the flat gradient buffer in backward order and cuts a bucket at a layer
 * boundary once it holds threshold bytes. During backward the compute thread reports the
 * finished prefix of the buffer; each bucket inside it is started at once, in plan order, with
 * MPI_Allreduce(MPI_IN_PLACE) on its slice: no packing copy. Two engines:
 *  - thread: a comm thread runs the allreduces of a queue one after the other, each waited for
 *    by tnt__wait (MPI_THREAD_SERIALIZED: only it calls MPI during backward; the compute thread
 *    calls MPI again only after finish_step);
 *  - nonblocking: MPI_Iallreduce, progressed with MPI_Testall whenever backward reports.
 * Waits sleep between polls and feed the stall inspector (wait.c).
 * Every rank has the same plan and issues the same collectives in the same order. */
#include "comm/wait.h"

#include <pthread.h>
#include <stdio.h>

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

static void *comm_thread(void *arg) {
    tnt__reducer *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->completed >= r->started) pthread_cond_wait(&r->cv_work, &r->mu);
        if (r->stop) break;
        bucket b = r->buckets[r->completed];
        pthread_mutex_unlock(&r->mu);
        double t0 = tnt__now();
        MPI_Request rq;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, r->grads + b.begin, (int)(b.end - b.begin), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD, &rq);
        if (rc == MPI_SUCCESS) rc = tnt__wait(1, &rq, "gradient allreduce");
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
                               size_t threshold_bytes, tnt_comm_mode mode) {
    tnt__reducer *r = tnt__calloc(1, sizeof *r);
    if (!r) return NULL;
    r->grads = grads;
    r->n = n;
    r->mode = mode;
    r->active = tnt__world_active();
    r->buckets = tnt__calloc((size_t)(n_layers ? n_layers : 1), sizeof *r->buckets);
    if (!r->buckets) goto fail;
    /* MPI counts are int: a bucket never exceeds 2^30 floats */
    const int64_t max_floats = (int64_t)1 << 30;
    int64_t begin = 0;
    for (int i = 0; i < n_layers; i++) {
        int64_t end = layer_end[i];
        bool last = i == n_layers - 1;
        bool big = (size_t)(end - begin) * sizeof(float) >= threshold_bytes;
        bool next_too_big = !last && layer_end[i + 1] - begin > max_floats;
        if (end > begin && (big || last || next_too_big)) {
            r->buckets[r->n_buckets++] = (bucket){begin, end};
            begin = end;
        }
    }
    /* a small last bucket (the first layers, e.g. a first conv's few weights) joins the one
     * before: one collective's latency less for a few bytes' later start */
    if (r->n_buckets >= 2) {
        bucket *last = &r->buckets[r->n_buckets - 1], *prev = last - 1;
        if ((size_t)(last->end - last->begin) * sizeof(float) < threshold_bytes &&
            last->end - prev->begin <= max_floats) {
            prev->end = last->end;
            r->n_buckets--;
        }
    }
    for (int i = 0; i < r->n_buckets; i++)
        if (r->buckets[i].end - r->buckets[i].begin > max_floats) {
            tnt__error(TNT_ERR_UNSUPPORTED, "reducer: one layer has %lld gradient values (at most 2^30)",
                       (long long)(r->buckets[i].end - r->buckets[i].begin));
            goto fail;
        }
    if (!r->active) return r;
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
            bucket b = r->buckets[r->started];
            const void *from = MPI_IN_PLACE;
#ifdef TNT_SMPI
            /* SimGrid 3.32's MPI_Iallreduce frees its copy of an in-place buffer before the
             * request completes (a crash over ~2.5 MB): a send buffer of our own */
            memcpy(r->send + b.begin, r->grads + b.begin, (size_t)(b.end - b.begin) * sizeof(float));
            from = r->send + b.begin;
#endif
            MPI_Iallreduce(from, r->grads + b.begin, (int)(b.end - b.begin), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &r->requests[r->started]);
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
