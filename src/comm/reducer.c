/* reducer.c: the gradient reducer's plan, its public calls (which dispatch to the implementation,
 * reducer.h), the comm thread that runs bucket reductions one after the other, and bfloat16 on
 * the wire.
 *
 * The plan walks the flat gradient buffer in backward order and cuts a bucket at a layer
 * boundary once it holds threshold bytes; a bucket over 16 MiB goes as several collectives.
 * During backward the compute thread reports the finished prefix of the buffer; each bucket
 * inside it is started at once, in plan order. Every rank has the same plan and issues the same
 * collectives in the same order. */
#include "comm/reducer.h"
#include "core/timeline.h"

#include <stdio.h>
#include <string.h>

/* ---- bfloat16 ---------------------------------------------------------------------------- */

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

void tnt__bf16_compress(uint16_t *wire, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) wire[i] = to_bf16(x[i]);
}

void tnt__bf16_decompress(float *x, const uint16_t *wire, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = from_bf16(wire[i]);
}

int tnt__bf16_sum_op(MPI_Op *op) { return MPI_Op_create(bf16_sum, 1, op); }

/* ---- the comm thread --------------------------------------------------------------------- */

static void *comm_thread(void *arg) {
    tnt__reducer *r = arg;
    tnt__comm_queue *q = &r->queue;
    tnt__timeline_lane(1);
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && q->completed >= q->queued) pthread_cond_wait(&q->cv_work, &q->mu);
        if (q->stop) break;
        int i = q->completed;
        pthread_mutex_unlock(&q->mu);
        double t0 = tnt__now(), tl0 = TNT_TL_BEGIN();
        int rc = q->run(r, i);
        double dt = tnt__now() - t0;
        TNT_TL_END("reduction", "bucket", i, tl0);
        pthread_mutex_lock(&q->mu);
        r->comm_seconds += dt;
        if (rc != MPI_SUCCESS && !q->error_code) q->error_code = rc;
        q->completed++;
        pthread_cond_broadcast(&q->cv_done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

bool tnt__comm_queue_start(tnt__reducer *r, int (*run)(tnt__reducer *r, int i)) {
    tnt__comm_queue *q = &r->queue;
    q->run = run;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_work, NULL);
    pthread_cond_init(&q->cv_done, NULL);
    if (pthread_create(&q->thread, NULL, comm_thread, r) != 0) {
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv_work);
        pthread_cond_destroy(&q->cv_done);
        tnt__error(TNT_ERR_NOMEM, "reducer: cannot start the comm thread");
        return false;
    }
    q->running = true;
    return true;
}

void tnt__comm_queue_stop(tnt__reducer *r) {
    tnt__comm_queue *q = &r->queue;
    if (!q->running) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv_work);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv_work);
    pthread_cond_destroy(&q->cv_done);
    q->running = false;
}

void tnt__comm_queue_begin_step(tnt__reducer *r) {
    tnt__comm_queue *q = &r->queue;
    pthread_mutex_lock(&q->mu);
    q->queued = q->completed = 0;
    q->error_code = 0;
    pthread_mutex_unlock(&q->mu);
}

void tnt__comm_queue_push(tnt__reducer *r, int i) {
    tnt__comm_queue *q = &r->queue;
    pthread_mutex_lock(&q->mu);
    q->queued = i + 1;
    pthread_cond_signal(&q->cv_work);
    pthread_mutex_unlock(&q->mu);
}

int tnt__comm_queue_wait(tnt__reducer *r, int upto) {
    tnt__comm_queue *q = &r->queue;
    pthread_mutex_lock(&q->mu);
    while (q->completed < upto) pthread_cond_wait(&q->cv_done, &q->mu);
    int err = q->error_code;
    pthread_mutex_unlock(&q->mu);
    return err;
}

/* ---- plan and public calls ---------------------------------------------------------------- */

static bool plan(tnt__reducer *r, const int64_t *layer_end, int n_layers, size_t threshold_bytes) {
    tnt__bucket *groups = tnt__calloc((size_t)(n_layers ? n_layers : 1), sizeof *groups);
    if (!groups) return false;
    int n_groups = 0;
    int64_t begin = 0;
    for (int i = 0; i < n_layers; i++) {
        int64_t end = layer_end[i];
        bool big = (size_t)(end - begin) * sizeof(float) >= threshold_bytes;
        if (end > begin && (big || i == n_layers - 1)) {
            groups[n_groups++] = (tnt__bucket){begin, end, false};
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
        return false;
    }
    for (int i = 0; i < n_groups; i++)
        for (int64_t at = groups[i].begin; at < groups[i].end; at += TNT__COLLECTIVE_MAX_FLOATS)
            r->buckets[r->n_buckets++] = (tnt__bucket){at, TNT_MIN(groups[i].end, at + TNT__COLLECTIVE_MAX_FLOATS), false};
    free(groups);
    return true;
}

tnt__reducer *tnt__reducer_new(float *grads, int64_t n, const int64_t *layer_end, int n_layers,
                               size_t threshold_bytes, tnt_comm_mode mode, tnt_compression compression,
                               tnt_reducer_kind kind, int n_slots) {
    tnt__reducer *r = tnt__calloc(1, sizeof *r);
    if (!r) return NULL;
    r->grads = grads;
    r->n = n;
    r->mode = mode;
    r->compression = compression;
    r->kind = kind;
    r->n_slots = n_slots;
    r->active = tnt__world_active();
    if (!plan(r, layer_end, n_layers, threshold_bytes)) goto fail;
    if (!r->active) {
        r->kind = TNT_REDUCER_FLAT;
        return r;
    }
    if (kind == TNT_REDUCER_NODE || kind == TNT_REDUCER_SHARDED) {
        if (tnt__reducer_node_init(r)) return r;
        if (r->ops) goto fail; /* it applied and failed: the error says why */
    }
    if (!tnt__reducer_flat_init(r)) goto fail;
    return r;
fail:
    tnt__reducer_free(r);
    return NULL;
}

tnt_reducer_kind tnt__reducer_kind(const tnt__reducer *r) { return r->kind; }

float *tnt__reducer_grads(const tnt__reducer *r) {
    return r->kind == TNT_REDUCER_FLAT ? r->grads : tnt__reducer_node_grads(r);
}

void tnt__reducer_owned(const tnt__reducer *r, int i, int64_t *begin, int64_t *end) {
    if (r->ops && r->ops->owned) r->ops->owned(r, i, begin, end);
    else *begin = r->buckets[i].begin, *end = r->buckets[i].end;
}

void tnt__reducer_set_land(tnt__reducer *r, bool land) {
    if (r->kind == TNT_REDUCER_NODE) tnt__reducer_node_set_land(r, land);
}

const float *tnt__reducer_sums(const tnt__reducer *r) {
    const float *sums = r->kind == TNT_REDUCER_NODE ? tnt__reducer_node_sums(r) : NULL;
    return sums ? sums : tnt__reducer_grads(r);
}

void tnt__reducer_copy_sums(const tnt__reducer *r, float *to) {
    if (r->kind != TNT_REDUCER_FLAT) tnt__reducer_node_copy_sums(r, to);
    else if (to != r->grads) memcpy(to, r->grads, (size_t)r->n * sizeof(float));
}

float *tnt__reducer_weights(const tnt__reducer *r) {
    return r->kind == TNT_REDUCER_SHARDED ? tnt__reducer_node_weights(r) : NULL;
}

float *tnt__reducer_slot(const tnt__reducer *r, int k) {
    return r->kind == TNT_REDUCER_SHARDED ? tnt__reducer_node_slot(r, k) : NULL;
}

tnt_status tnt__reducer_share_weights(tnt__reducer *r, float *params) {
    if (!r->ops || !r->ops->share_weights) return TNT_OK;
    int err = r->ops->share_weights(r, params);
    return err == MPI_SUCCESS ? TNT_OK : tnt__error(TNT_ERR_MPI, "weight exchange failed on rank %d (MPI error %d)",
                                                    tnt__world_rank(), err);
}

tnt_status tnt__reducer_sync(tnt__reducer *r, const char *what) {
    int err = r->ops && r->ops->sync ? r->ops->sync(r, what) : MPI_SUCCESS;
    return err == MPI_SUCCESS ? TNT_OK : tnt__error(TNT_ERR_MPI, "%s failed on rank %d (MPI error %d)", what,
                                                    tnt__world_rank(), err);
}

void tnt__reducer_free(tnt__reducer *r) {
    if (!r) return;
    if (r->ops) r->ops->destroy(r);
    free(r->buckets);
    free(r);
}

int tnt__reducer_num_buckets(const tnt__reducer *r) { return r->n_buckets; }
tnt_comm_mode tnt__reducer_mode(const tnt__reducer *r) { return r->mode; }

void tnt__reducer_begin_step(tnt__reducer *r) {
    r->started = 0;
    tnt__node_dw *dw = tnt__reducer_node_dw_get(r);
    if (dw) tnt__node_dw_begin_step(dw);
    if (r->queue.running) tnt__comm_queue_begin_step(r);
}

void tnt__reducer_set_update(tnt__reducer *r, tnt__slice_update update, void *ctx) {
    bool ok = r->kind == TNT_REDUCER_SHARDED && r->started == 0;
    r->update = ok ? update : NULL;
    r->update_ctx = ok ? ctx : NULL;
}

bool tnt__reducer_updates(const tnt__reducer *r) { return r->update != NULL; }

void tnt__reducer_set_frozen(tnt__reducer *r, const int64_t *frozen, int n) {
    if (r->started) return;
    int k = 0;
    for (int i = 0; i < r->n_buckets; i++) {
        tnt__bucket *b = &r->buckets[i];
        while (k < n && frozen[2 * k + 1] <= b->begin) k++; /* ranges and buckets both ascend */
        b->frozen = k < n && frozen[2 * k] <= b->begin && b->end <= frozen[2 * k + 1];
    }
}

void tnt__reducer_ready(tnt__reducer *r, int64_t prefix) {
    if (!r->active) return;
    while (r->started < r->n_buckets && r->buckets[r->started].end <= prefix) r->ops->start_bucket(r, r->started++);
    if (r->ops->poll && r->started) r->ops->poll(r);
}

void tnt__reducer_start_bucket(tnt__reducer *r, int i) {
    if (!r->active || i != r->started || i >= r->n_buckets) return; /* plan order only */
    r->ops->start_bucket(r, r->started++);
}

void tnt__reducer_bucket(const tnt__reducer *r, int i, int64_t *begin, int64_t *end) {
    *begin = r->buckets[i].begin;
    *end = r->buckets[i].end;
}

static tnt_status reduce_error(int err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return tnt__error(TNT_ERR_MPI, "gradient allreduce failed on rank %d: %.*s", tnt__world_rank(), len, msg);
}

tnt_status tnt__reducer_wait_bucket(tnt__reducer *r, int i) {
    if (!r->active) return TNT_OK;
    if (i < 0 || i >= r->started)
        return tnt__error(TNT_ERR_STATE, "reducer: bucket %d waited for before it was started (%d started)", i, r->started);
    int err = r->ops->wait_bucket(r, i);
    return err == MPI_SUCCESS ? TNT_OK : reduce_error(err);
}

tnt_status tnt__reducer_finish_step(tnt__reducer *r) {
    if (!r->active) return TNT_OK;
    tnt__reducer_ready(r, r->n);
    double t0 = tnt__now(), tl0 = TNT_TL_BEGIN();
    int err = r->ops->finish_step(r);
    r->exposed_seconds += tnt__now() - t0;
    TNT_TL_END("exposed", "reduction wait", -1, tl0);
    r->steps++;
    return err == MPI_SUCCESS ? TNT_OK : reduce_error(err);
}

void tnt__reducer_stats(const tnt__reducer *r, double *comm_seconds, double *exposed_seconds, int64_t *steps) {
    if (comm_seconds) *comm_seconds = r->comm_seconds;
    if (exposed_seconds) *exposed_seconds = r->exposed_seconds;
    if (steps) *steps = r->steps;
}
