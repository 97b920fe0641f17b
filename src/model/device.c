/* device.c: see device.h. The device buffers mirror the host's flat buffers one to one (the
 * weights' d_value and d_grad are the same offsets into them), so moving the weights either way is
 * one copy per buffer, and the reducer's buckets are slices of both. */
#include "model/device.h"
#include "model/window.h"
#include "model/device_rules.h"

#include "comm/comm.h"
#include "core/config.h"
#include "optimizers/optimizer.h"

#include <stdio.h>
#include <string.h>

#define BLOCK 256

/* ---- dispatch -------------------------------------------------------------------------------- */

/* The sharded optimizer asked for by name (auto picks it on the CPU only). */
static bool sharded_reducer(const tnt_model *m) {
    if (!m->distributed) return false;
    int kind = m->distribute_opts.reducer != TNT_REDUCER_DEFAULT ? (int)m->distribute_opts.reducer
                                                                 : tnt__config_get()->reducer;
    return kind == TNT_REDUCER_SHARDED;
}

bool tnt__model_device_check(const tnt_model *m, char *why, size_t size) {
    const char *r = NULL;
    if (!tnt__gpu_available(&r)) {
        snprintf(why, size, "no usable GPU (%s)", r ? r : "unknown reason");
        return false;
    }
    /* variable (None) input dimensions: the model is rebuilt for each input shape and a device
     * plan made per shape as on the host (plan.c's cache; the arena grows to the largest); the
     * layers are checked here for the shapes they have now (other sizes: variable_sizes_check) */
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        const tnt_layer *l = n->layer;
        const char *what = NULL;
        if (l->rules && !tnt__dev_rules_supported(l, &what)) {
        } else if (tnt__node_is_alias(n)) continue; /* a view, or an activation its producer applies */
        else if (!l->ops->gpu) what = "has no GPU path";
        else if (l->ops->gpu->supported && !l->ops->gpu->supported(l, &what)) {
        } else continue;
        snprintf(why, size, "layer \"%s\" (%s): %s", l->name, l->ops->class_name, what ? what : "no GPU path");
        return false;
    }
    if (!tnt__optimizer_gpu_supported(m->optimizer, &r)) {
        snprintf(why, size, "optimizer %s: %s", m->optimizer ? m->optimizer->name : "(none)", r);
        return false;
    }
    if (sharded_reducer(m)) {
        snprintf(why, size, "the sharded optimizer (reducer sharded) has no device path");
        return false;
    }
    return true;
}

/* A model with None dimensions meets the sizes its data bring, and a layer's device path may
 * depend on them (a strided "same" convolution pads unlike on the two sides at some sizes only,
 * and cuDNN takes the others): the layers are asked again at stand-in sizes of every remainder
 * of 2, 3 and 4, then built again for the present shapes. A size the model cannot be built for
 * is no device matter (no data can have it). */
static bool variable_sizes_check(tnt_model *m, char *why, size_t size) {
    tnt_shape cur[TNT_MAX_IO], other[TNT_MAX_IO];
    for (int k = 0; k < m->n_inputs; k++) cur[k] = m->tensor_shape[m->inputs[k]];
    const bool known = m->inst_known;
    const int64_t base = tnt__probe_dim();
    bool ok = true;
    for (int64_t v = base; v < base + 4 && ok; v++) {
        for (int k = 0; k < m->n_inputs; k++) {
            other[k] = m->input_decl[k];
            for (int d = 0; d < other[k].ndim; d++)
                if (other[k].dim[d] < 0) other[k].dim[d] = v;
        }
        if (tnt__model_instantiate(m, other, "device check") != TNT_OK) {
            tnt__error_clear();
            continue;
        }
        char at[400];
        if (!tnt__model_device_check(m, at, sizeof at)) {
            snprintf(why, size, "at a None dimension of %lld, %s", (long long)v, at);
            ok = false;
        }
    }
    if (tnt__model_instantiate(m, cur, "device check") != TNT_OK) { /* built for these before: cannot fail */
        tnt_log(TNT_LOG_ERROR, "model \"%s\": could not restore its input shapes: %s", m->name, tnt_last_error());
        ok = false;
        snprintf(why, size, "its input shapes could not be restored");
    }
    m->inst_known = known;
    return ok;
}

/* compile's request, else the TNT_DEVICE setting */
static tnt_device requested(const tnt_model *m) {
    if (m->device_request != TNT_DEVICE_DEFAULT) return (tnt_device)m->device_request;
    switch (tnt__config_get()->device) {
    case TNT__DEVICE_AUTO: return TNT_DEVICE_AUTO;
    case TNT__DEVICE_GPU: return TNT_DEVICE_GPU;
    default: return TNT_DEVICE_CPU;
    }
}

/* The weights' device views: the host views' offsets into the device buffers. */
static void set_views(tnt_model *m, bool on) {
    for (int i = 0; i < m->n_layers; i++) {
        tnt_layer *l = m->layers[i];
        for (int j = 0; j < l->n_weights; j++) {
            tnt__weight *w = &l->weights[j];
            w->d_value = w->d_grad = NULL;
            if (!on || !w->value) continue;
            if (w->trainable) {
                w->d_value = m->dev->params + (w->value - m->params);
                w->d_grad = m->dev->grads + (w->value - m->params);
            } else {
                w->d_value = m->dev->state + (w->value - m->state);
            }
        }
    }
}

/* Copies the weights, the state and the optimizer's slots one way. */
static tnt_status move_weights(tnt_model *m, bool up) {
    tnt__model_dev *d = m->dev;
    struct { float *host, *dev; int64_t n; } bufs[] = {{m->params, d->params, m->n_params}, {m->state, d->state, m->n_state}};
    tnt_status s = TNT_OK;
    for (size_t i = 0; i < TNT_ARRAY_LEN(bufs) && s == TNT_OK; i++) {
        size_t bytes = (size_t)bufs[i].n * sizeof(float);
        if (!bytes) continue;
        s = up ? tnt__gpu_copy_to_device(bufs[i].dev, bufs[i].host, bytes, TNT__GPU_COMPUTE)
               : tnt__gpu_copy_to_host(bufs[i].host, bufs[i].dev, bytes, TNT__GPU_COMPUTE);
    }
    if (s == TNT_OK) s = up ? tnt__optimizer_gpu_upload(m->optimizer) : tnt__optimizer_gpu_download(m->optimizer);
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (s != TNT_OK) return tnt__error_prefix(s, "model \"%s\": weights %s the GPU: ", m->name, up ? "to" : "from");
    return TNT_OK;
}

static tnt_status dev_alloc(tnt_model *m) {
    tnt__model_dev *d = tnt__calloc(1, sizeof *d);
    if (!d) return TNT_ERR_NOMEM;
    m->dev = d;
    int64_t scratch = 0; /* the largest shared layer's trainable weights, as the host's scratch */
    for (int i = 0; i < m->n_layers; i++) {
        int calls = 0;
        int64_t mine = 0;
        for (int n = 0; n < m->n_nodes; n++) calls += m->nodes[n].layer == m->layers[i];
        for (int j = 0; j < m->layers[i]->n_weights; j++)
            if (m->layers[i]->weights[j].trainable) mine += tnt_shape_numel(m->layers[i]->weights[j].shape);
        if (calls > 1) scratch = TNT_MAX(scratch, mine);
    }
    size_t np = (size_t)(m->n_params ? m->n_params : 1) * sizeof(float);
    d->params = tnt__gpu_malloc(np);
    d->grads = d->params ? tnt__gpu_malloc(np) : NULL;
    d->state = d->grads ? tnt__gpu_malloc((size_t)(m->n_state ? m->n_state : 1) * sizeof(float)) : NULL;
    d->shared_scratch = d->state && scratch ? tnt__gpu_malloc((size_t)scratch * sizeof(float)) : NULL;
    d->bucket_done = d->state && (!scratch || d->shared_scratch) ? tnt__gpu_event_create() : NULL;
    if (!d->bucket_done) {
        tnt_status s = tnt__error_prefix(TNT_ERR_NOMEM, "model \"%s\": GPU buffers for %lld parameters: ", m->name,
                                         (long long)m->n_params);
        tnt__model_dev_free(m);
        return s;
    }
    return TNT_OK;
}

void tnt__model_dev_free(tnt_model *m) {
    tnt__model_dev *d = m->dev;
    if (!d) return;
    tnt__model_clear_plans(m); /* the device plans (the host ones are made again as needed) */
    set_views(m, false);
    tnt__optimizer_gpu_free(m->optimizer);
    tnt__gpu_free(d->params);
    tnt__gpu_free(d->grads);
    tnt__gpu_free(d->state);
    tnt__gpu_free(d->shared_scratch);
    tnt__gpu_free(d->arena);
    tnt__gpu_event_destroy(d->bucket_done);
    if (d->staging) tnt__gpu_sync(TNT__GPU_COPY); /* no copy still writes it */
    tnt__gpu_host_free(d->staging);
    tnt__gpu_event_destroy(d->copied[0]);
    tnt__gpu_event_destroy(d->copied[1]);
    if (d->reduced) tnt__gpu_sync(TNT__GPU_COPY); /* no sum still writes the gradients */
    tnt__gpu_event_destroy(d->reduced);
    if (d->batch) tnt__gpu_sync(TNT__GPU_COPY); /* no copy still writes it */
    tnt__gpu_free(d->batch);
    tnt__gpu_event_destroy(d->batch_up);
    tnt__gpu_event_destroy(d->batch_used);
    free(d);
    m->dev = NULL;
    m->on_device = false;
}

/* The device, opened once per process (tnt_init chooses it per local rank; a program that did not
 * call tnt_init gets the first). */
static tnt_status open_device(void) {
    if (tnt__gpu_is_open()) return TNT_OK;
    int64_t ordinal = tnt__config_get()->gpu_ordinal;
    return tnt__gpu_open(ordinal >= 0 ? (int)ordinal : 0);
}

tnt_status tnt__model_choose_device(tnt_model *m, const char *who) {
    tnt_device req = requested(m);
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    bool gpu = false;
    if (req != TNT_DEVICE_CPU) {
        char why[512];
        gpu = tnt__model_device_check(m, why, sizeof why);
        if (gpu && m->variable) gpu = variable_sizes_check(m, why, sizeof why);
        /* TNT_DEVICE chose for every rank in tnt_init: a GPU it left closed (another rank has none,
         * it did not open) stays closed, so that all ranks run alike */
        const char *status = tnt_gpu_status();
        if (gpu && m->device_request == TNT_DEVICE_DEFAULT && !tnt__gpu_is_open() && !strncmp(status, "cpu: ", 5) &&
            !strstr(status, "has not chosen")) {
            snprintf(why, sizeof why, "tnt_init chose the CPU (%s)", status + 5);
            gpu = false;
        }
        if (!gpu && req == TNT_DEVICE_GPU)
            return tnt__error(TNT_ERR_UNSUPPORTED, "%s: model \"%s\" cannot train on the GPU (device gpu): %s", who,
                              m->name, why);
        if (!gpu && !m->device_reason_logged) {
            tnt_log(TNT_LOG_INFO, "model \"%s\" trains on the CPU: %s", m->name, why);
            m->device_reason_logged = true;
        }
    }
    if (gpu && (s = open_device()) != TNT_OK) {
        if (req == TNT_DEVICE_GPU) return tnt__error_prefix(s, "%s: model \"%s\": ", who, m->name);
        tnt_log(TNT_LOG_INFO, "model \"%s\" trains on the CPU: the GPU did not open (%s)", m->name, tnt_last_error());
        gpu = false;
    }
    if (!gpu) {
        if (m->dev && (s = tnt__model_host_weights(m)) != TNT_OK) return s;
        tnt__model_dev_free(m);
        return TNT_OK;
    }
    for (int i = 0; i < m->n_layers && !m->host_path_logged; i++) {
        const tnt_layer *l = m->layers[i];
        if (l->ops->gpu && l->ops->gpu->via_host)
            tnt_log(TNT_LOG_INFO, "model \"%s\": layer \"%s\" (%s) runs its own host code: its inputs, weights "
                    "and gradients go through the host every step", m->name, l->name, l->ops->class_name);
    }
    m->host_path_logged = true;
    if (!m->dev && (s = dev_alloc(m)) != TNT_OK) return s;
    if (m->optimizer && ((!m->optimizer->d_slots[0] && m->optimizer->n_slots) ||
                         (m->optimizer->clipvalue > 0 && !m->optimizer->d_clip_buf)) &&
        (s = tnt__optimizer_gpu_prepare(m->optimizer)) != TNT_OK)
        return s;
    if (!m->on_device) { /* the host's weights are the newer ones */
        tnt__model_clear_plans(m);
        m->dev->device_stale = true;
        m->dev->host_stale = false;
        m->on_device = true;
    }
    set_views(m, true);
    return tnt__model_dev_ready(m);
}

/* ---- who owns the weights -------------------------------------------------------------------- */

tnt_status tnt__model_host_weights(tnt_model *m) {
    if (!m || !m->dev || !m->dev->host_stale) return TNT_OK;
    tnt_status s = move_weights(m, false);
    if (s == TNT_OK) m->dev->host_stale = false;
    return s;
}

tnt_status tnt__model_host_written(tnt_model *m) {
    tnt_status s = tnt__model_host_weights(m);
    /* outside a fit, a write to one rank's weights is that rank's alone */
    if (s == TNT_OK && m && !m->in_fit) tnt__model_own_weights(m);
    if (s == TNT_OK && m && m->dev) m->dev->device_stale = true;
    return s;
}

tnt_status tnt__model_dev_ready(tnt_model *m) {
    if (!m->dev || !m->dev->device_stale) return TNT_OK;
    tnt_status s = move_weights(m, true);
    if (s == TNT_OK) m->dev->device_stale = false;
    return s;
}

void *tnt__model_dev_arena(tnt_model *m, size_t bytes) {
    tnt__model_dev *d = m->dev;
    if (!d) {
        tnt__error(TNT_ERR_STATE, "model \"%s\": a device plan without device buffers", m->name);
        return NULL;
    }
    if (bytes <= d->arena_bytes && d->arena) return d->arena;
    /* nothing queued still reads the old one: the compute stream, and the copy stream that takes
     * the outputs down (a plan for a new input shape grows it between steps) */
    tnt__gpu_sync(TNT__GPU_COPY);
    tnt__gpu_sync(TNT__GPU_COMPUTE);
    tnt__gpu_free(d->arena);
    d->arena_bytes = 0;
    if (!(d->arena = tnt__gpu_malloc(bytes ? bytes : 64))) {
        tnt__error_prefix(TNT_ERR_NOMEM, "model \"%s\": a %zu-byte GPU arena: ", m->name, bytes);
        return NULL;
    }
    d->arena_bytes = bytes;
    return d->arena;
}

/* ---- the step's device side ------------------------------------------------------------------ */

tnt_status tnt__dev_add_into(float *dst, const float *src, int64_t n) {
    long long len = n;
    if (len == 0) return TNT_OK;
    const float *a = dst;
    void *args[] = {&a, &src, &dst, &len};
    return tnt__gpu_launch("tnt_k_add", tnt__gpu_grid_for(len, BLOCK), BLOCK, 0, args);
}

/* ---- the batch's way up ---------------------------------------------------------------------- */

static tnt_status batch_buffer(tnt_model *m, size_t bytes) {
    tnt__model_dev *d = m->dev;
    if (!d->batch_up) {
        d->batch_up = tnt__gpu_event_create();
        d->batch_used = d->batch_up ? tnt__gpu_event_create() : NULL;
        /* recorded once, so the first copy's wait for it has something to wait for */
        if (!d->batch_used || tnt__gpu_event_record(d->batch_used, TNT__GPU_COMPUTE) != TNT_OK) return TNT_ERR_NOMEM;
    }
    if (bytes <= d->batch_bytes) return TNT_OK;
    tnt__gpu_sync(TNT__GPU_COPY); /* nothing queued still reads or writes the old one */
    tnt__gpu_sync(TNT__GPU_COMPUTE);
    tnt__gpu_free(d->batch);
    d->batch_bytes = 0;
    if (!(d->batch = tnt__gpu_malloc(bytes))) return TNT_ERR_NOMEM;
    d->batch_bytes = bytes;
    return TNT_OK;
}

tnt_status tnt__dev_batch_up(tnt_model *m, const float *host, size_t bytes, const float **device) {
    tnt__model_dev *d = m->dev;
    tnt_status s = batch_buffer(m, bytes);
    if (s != TNT_OK) return tnt__error_prefix(s, "model \"%s\": a %zu-byte device buffer for the batch: ", m->name, bytes);
    if (!tnt__config_get()->gpu_staged_input) {
        s = tnt__gpu_copy_to_device(d->batch, host, bytes, TNT__GPU_COMPUTE);
    } else { /* the copy stream fills it once the last pass has taken the batch before */
        s = tnt__gpu_stream_wait(TNT__GPU_COPY, d->batch_used);
        if (s == TNT_OK) s = tnt__gpu_copy_to_device(d->batch, host, bytes, TNT__GPU_COPY);
        if (s == TNT_OK) s = tnt__gpu_event_record(d->batch_up, TNT__GPU_COPY);
        if (s == TNT_OK) s = tnt__gpu_stream_wait(TNT__GPU_COMPUTE, d->batch_up);
    }
    *device = d->batch;
    return s;
}

tnt_status tnt__dev_batch_taken(tnt_model *m) { return tnt__gpu_event_record(m->dev->batch_used, TNT__GPU_COMPUTE); }

/* ---- the gradients' way down (host staging) -------------------------------------------------- */

bool tnt__dev_pinned_staging = true;

static tnt_status bucket_error(tnt_model *m, tnt_status s, int64_t begin, int64_t end) {
    return tnt__error_prefix(s, "model \"%s\": gradients [%lld, %lld) to the host: ", m->name, (long long)begin,
                             (long long)end);
}

/* The staging buffer and its events, once per model on the device. */
static tnt_status staging_ready(tnt_model *m) {
    tnt__model_dev *d = m->dev;
    if (d->staging) return TNT_OK;
    d->copied[0] = tnt__gpu_event_create();
    d->copied[1] = d->copied[0] ? tnt__gpu_event_create() : NULL;
    d->staging = d->copied[1] ? tnt__gpu_host_malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(float)) : NULL;
    if (d->staging) return TNT_OK;
    tnt__gpu_event_destroy(d->copied[0]), tnt__gpu_event_destroy(d->copied[1]);
    d->copied[0] = d->copied[1] = NULL;
    return tnt__error_prefix(TNT_ERR_NOMEM, "model \"%s\": page-locked staging of %lld gradients: ", m->name,
                             (long long)m->n_params);
}

/* The bucket in flight: waited for, then (hand_over) moved from staging into the reducer's
 * gradients, which may be MPI's shared window and so cannot be page-locked themselves. */
static tnt_status hand_over_pending(tnt_model *m, tnt__reducer *r, bool hand_over) {
    tnt__model_dev *d = m->dev;
    const int64_t b = d->pending_begin, e = d->pending_end;
    if (e == 0) return TNT_OK;
    d->pending_end = 0;
    tnt_status s = tnt__gpu_event_sync(d->copied[d->pending_slot]);
    if (s != TNT_OK) return bucket_error(m, s, b, e);
    if (!hand_over) return TNT_OK;
    memcpy(m->grads + b, d->staging + b, (size_t)(e - b) * sizeof(float));
    tnt__reducer_ready(r, e);
    return TNT_OK;
}

/* ---- NCCL: the reducer's buckets summed on the device ---------------------------------------- */

tnt_status tnt__dev_comm_prepare(tnt_model *m) {
    tnt__model_dev *d = m->dev;
    int comm = TNT__GPU_COMM_HOST;
    tnt_status s = tnt__gpu_comm_open(&comm);
    if (s != TNT_OK) return s;
    d->nccl = comm == TNT__GPU_COMM_NCCL;
    d->nccl_next = 0;
    if (d->nccl && !d->reduced && !(d->reduced = tnt__gpu_event_create())) {
        d->nccl = false;
        return tnt__error_prefix(TNT_ERR_NOMEM, "model \"%s\": NCCL's event: ", m->name);
    }
    return TNT_OK;
}

/* Issues the sums of the plan's buckets that end at or before `end`, in order, on the copy stream
 * once the compute stream has written them. */
static tnt_status nccl_issue(tnt_model *m, tnt__reducer *r, int64_t end) {
    tnt__model_dev *d = m->dev;
    tnt_status s = TNT_OK;
    int64_t b, e;
    bool waited = false;
    while (s == TNT_OK && d->nccl_next < tnt__reducer_num_buckets(r)) {
        tnt__reducer_bucket(r, d->nccl_next, &b, &e);
        if (e > end) break;
        if (!waited) {
            s = tnt__gpu_event_record(d->bucket_done, TNT__GPU_COMPUTE);
            if (s == TNT_OK) s = tnt__gpu_stream_wait(TNT__GPU_COPY, d->bucket_done);
            waited = true;
        }
        if (s == TNT_OK) s = tnt__gpu_nccl_allreduce(d->grads + b, e - b, TNT__GPU_COPY);
        if (s != TNT_OK)
            return tnt__error_prefix(s, "model \"%s\": NCCL sum of gradients [%lld, %lld): ", m->name, (long long)b,
                                     (long long)e);
        d->nccl_next++;
    }
    return s;
}

tnt_status tnt__dev_bucket_ready(tnt_model *m, struct tnt__reducer *r, int64_t begin, int64_t end) {
    tnt__model_dev *d = m->dev;
    if (d->nccl) return nccl_issue(m, r, end);
    size_t bytes = (size_t)(end - begin) * sizeof(float);
    /* the copy stream takes the bucket once the compute stream has written it */
    tnt_status s = tnt__gpu_event_record(d->bucket_done, TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = tnt__gpu_stream_wait(TNT__GPU_COPY, d->bucket_done);
    if (s == TNT_OK && !tnt__dev_pinned_staging) { /* pageable: the host waits for each copy */
        s = tnt__gpu_copy_to_host(m->grads + begin, d->grads + begin, bytes, TNT__GPU_COPY);
        if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COPY);
        if (s != TNT_OK) return bucket_error(m, s, begin, end);
        tnt__reducer_ready(r, end);
        return TNT_OK;
    }
    if (s == TNT_OK) s = staging_ready(m);
    if (s != TNT_OK) return bucket_error(m, s, begin, end);
    const int slot = d->pending_end ? 1 - d->pending_slot : 0;
    s = tnt__gpu_copy_to_host(d->staging + begin, d->grads + begin, bytes, TNT__GPU_COPY);
    if (s == TNT_OK) s = tnt__gpu_event_record(d->copied[slot], TNT__GPU_COPY);
    if (s != TNT_OK) return bucket_error(m, s, begin, end);
    /* the previous bucket's copy ran while this one's layers computed: its turn now */
    if ((s = hand_over_pending(m, r, true)) != TNT_OK) return s;
    d->pending_begin = begin, d->pending_end = end, d->pending_slot = slot;
    return TNT_OK;
}

tnt_status tnt__dev_bucket_flush(tnt_model *m, struct tnt__reducer *r, bool hand_over) {
    tnt__model_dev *d = m->dev;
    if (!d || !d->nccl) return d ? hand_over_pending(m, r, hand_over) : TNT_OK;
    tnt_status s = nccl_issue(m, r, m->n_params); /* whatever backward did, every rank issues them all */
    d->nccl_next = 0;
    d->nccl_flushed = true;
    if (s == TNT_OK) s = tnt__gpu_event_record(d->reduced, TNT__GPU_COPY);
    return s;
}

tnt_status tnt__dev_step_sums(tnt_model *m, struct tnt__reducer *r) {
    tnt__model_dev *d = m->dev;
    if (!d || !d->nccl || d->nccl_flushed) return TNT_OK;
    tnt_status s = tnt__gpu_memset_zero(d->grads, (size_t)m->n_params * sizeof(float), TNT__GPU_COMPUTE);
    d->nccl_next = 0;
    if (s == TNT_OK) s = tnt__dev_bucket_flush(m, r, true);
    return s;
}

tnt_status tnt__dev_optimizer_step(tnt_model *m, const tnt__step *st) {
    tnt__model_dev *d = m->dev;
    tnt__reducer *r = st->parallel ? st->reducer : NULL;
    tnt_status s = TNT_OK;
    if (r && d->nccl) { /* the sums are on the device once the copy stream's last one is done */
        s = tnt__gpu_stream_wait(TNT__GPU_COMPUTE, d->reduced);
    } else if (r) { /* the sums come back up: the host-staged allreduce left them on the host */
        if (tnt__reducer_kind(r) == TNT_REDUCER_SHARDED)
            return tnt__error(TNT_ERR_UNSUPPORTED, "model \"%s\": the sharded optimizer has no device path", m->name);
        s = tnt__gpu_copy_to_device(d->grads, tnt__reducer_sums(r), (size_t)m->n_params * sizeof(float),
                                    TNT__GPU_COMPUTE);
    }
    /* the weight penalties' gradients join the sums (every rank the same: fit.c) */
    if (s == TNT_OK) s = tnt__dev_penalty_grads(m);
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) /* frozen: out of the update, as on the host */
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights && s == TNT_OK; j++) {
            const tnt__weight *w = &m->layers[i]->weights[j];
            if (w->d_grad) s = tnt__gpu_memset_zero(w->d_grad, (size_t)tnt_shape_numel(w->shape) * sizeof(float),
                                                    TNT__GPU_COMPUTE);
        }
    if (s == TNT_OK) s = tnt__optimizer_apply_gpu(m->optimizer, d->params, d->grads, 0, m->n_params);
    if (s == TNT_OK) d->host_stale = true;
    return s;
}

/* Copies the trainable weights of the frozen layers, in order, into copy (save) or back from it;
 * returns their total size (copy NULL: counts only). */
static int64_t frozen_weights(tnt_model *m, float *copy, bool save, tnt_status *s) {
    int64_t o = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++) {
            tnt__weight *w = &m->layers[i]->weights[j];
            if (!w->d_grad) continue;
            int64_t k = tnt_shape_numel(w->shape);
            if (copy && *s == TNT_OK)
                *s = save ? tnt__gpu_copy_on_device(copy + o, w->d_value, (size_t)k * sizeof(float), TNT__GPU_COMPUTE)
                          : tnt__gpu_copy_on_device(w->d_value, copy + o, (size_t)k * sizeof(float), TNT__GPU_COMPUTE);
            o += k;
        }
    return o;
}

tnt_status tnt__dev_freeze(tnt_model *m, float **copy) {
    tnt_status s = TNT_OK;
    *copy = NULL;
    int64_t n = frozen_weights(m, NULL, true, &s);
    if (n == 0) return TNT_OK;
    if (!(*copy = tnt__gpu_malloc((size_t)n * sizeof(float)))) return tnt__error_prefix(TNT_ERR_NOMEM, "fit: ");
    frozen_weights(m, *copy, true, &s);
    return s;
}

void tnt__dev_thaw(tnt_model *m, float *copy) {
    if (!copy) return;
    tnt_status s = TNT_OK;
    frozen_weights(m, copy, false, &s);
    tnt__gpu_sync(TNT__GPU_COMPUTE); /* the copies back are done before the buffer goes */
    tnt__gpu_free(copy);
}
