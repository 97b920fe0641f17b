/* parallel.c: what makes a model data-parallel: the rank's data feed, the configuration
 * fingerprints every rank must share, the weight broadcast, the gradient reducer's plan, and
 * the collectives of a training step. */
#include "training/parallel.h"
#include "core/config.h"
#include "data/dataset.h"
#include "comm/comm.h"
#include "core/timeline.h"
#include "optimizers/optimizer.h"
#include "layers/regularizer.h"
#include "model/device.h"
#include "model/window.h"

#include <stdio.h>

tnt_status tnt_distribute_with(tnt_model *m, const tnt_distribute_opts *opts) {
    if (!m) return tnt__error(TNT_ERR_ARG, "distribute: model is NULL");
    tnt_distribute_opts o = opts ? *opts : (tnt_distribute_opts){0};
    if (o.has_fusion_threshold && (o.fusion_threshold_kb < 0 || o.fusion_threshold_kb > INT32_MAX))
        return tnt__error(TNT_ERR_ARG, "distribute: model \"%s\": fusion_threshold_kb %lld (expected 0 to %d)",
                          m->name, (long long)o.fusion_threshold_kb, INT32_MAX);
    if (o.comm_mode < TNT_COMM_MODE_DEFAULT || o.comm_mode > TNT_COMM_MODE_NONBLOCKING)
        return tnt__error(TNT_ERR_ARG, "distribute: model \"%s\": comm_mode %d (expected a tnt_comm_mode)",
                          m->name, (int)o.comm_mode);
    if (o.compression < TNT_COMPRESSION_DEFAULT || o.compression > TNT_COMPRESSION_BF16)
        return tnt__error(TNT_ERR_ARG, "distribute: model \"%s\": compression %d (expected a tnt_compression)",
                          m->name, (int)o.compression);
    if (o.reducer < TNT_REDUCER_DEFAULT || o.reducer > TNT_REDUCER_SHARDED)
        return tnt__error(TNT_ERR_ARG, "distribute: model \"%s\": reducer %d (expected a tnt_reducer_kind)",
                          m->name, (int)o.reducer);
    tnt_status s = tnt__model_detach_window(m);
    if (s != TNT_OK) return s;
    m->distributed = true;
    m->distribute_opts = o;
    tnt__reducer_free(m->reducer); /* planned again, with these options, at the next fit */
    m->reducer = NULL;
    return TNT_OK;
}

tnt_status tnt_distribute(tnt_model *m) { return tnt_distribute_with(m, NULL); }

bool tnt__model_has_collective_layers(const tnt_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->ops->collective) return true;
    return false;
}

bool tnt__is_parallel(const tnt_model *m) { return m->distributed && tnt__world_active(); }

int tnt__feed_next(tnt__feed *f, tnt_batch *b, tnt__step *st) {
    st->sample_offset = 0;
    if (!f->split) {
        int r = tnt_dataset_iter_next(f->it, b);
        st->global_n = r == 1 ? b->n : 0;
        return r;
    }
    int rank = tnt_get_rank(), size = tnt_get_size();
    int r = tnt__dataset_iter_next_part(f->it, rank, size, b, &st->global_n);
    /* shares are contiguous: global_n / size samples, one more on the first global_n % size ranks */
    if (r == 1) st->sample_offset = rank * (st->global_n / size) + TNT_MIN(rank, st->global_n % size);
    return r;
}

static uint64_t hash_shape(uint64_t h, tnt_shape s) {
    h = tnt__fnv1a(h, &s.ndim, sizeof s.ndim);
    return tnt__fnv1a(h, s.dim, (size_t)s.ndim * sizeof s.dim[0]);
}

static uint64_t model_fingerprint(const tnt_model *m) {
    uint64_t h = tnt__fnv1a(0, &m->n_nodes, sizeof m->n_nodes);
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        const tnt_layer *l = n->layer;
        h = tnt__fnv1a(h, l->ops->class_name, strlen(l->ops->class_name));
        h = tnt__fnv1a(h, n->in, (size_t)n->n_in * sizeof n->in[0]);
        /* the model, not the shapes the data gave it: None dimensions stay None */
        if (m->variable) h = hash_shape(hash_shape(h, tnt__model_tensor_decl(m, n->in[0])), tnt__model_tensor_decl(m, n->out));
        else h = hash_shape(hash_shape(h, l->in_shape), l->out_shape);
        h = tnt__fnv1a(h, &l->activation, sizeof l->activation);
        h = tnt__fnv1a(h, &l->frozen, sizeof l->frozen); /* the update and backward leave it out */
        for (int j = 0; j < l->n_weights; j++) h = hash_shape(h, l->weights[j].shape);
        h = tnt__layer_rules_hash(l, h);
    }
    return h;
}

static uint64_t compile_fingerprint(const tnt_model *m) {
    const tnt_optimizer *o = m->optimizer;
    uint64_t h = tnt__fnv1a(0, &m->loss, sizeof m->loss);
    h = tnt__fnv1a(h, m->output_loss, (size_t)m->n_outputs * sizeof m->output_loss[0]);
    h = tnt__fnv1a(h, &m->from_logits, sizeof m->from_logits);
    for (int k = 0; k < m->n_metrics; k++) h = tnt__fnv1a(h, m->metrics[k].name, strlen(m->metrics[k].name));
    h = tnt__fnv1a(h, m->loss_weights, (size_t)m->n_outputs * sizeof m->loss_weights[0]);
    h = tnt__fnv1a(h, &o->kind, sizeof o->kind);
    float hyper[] = {o->learning_rate, o->momentum, o->beta_1, o->beta_2, o->epsilon, o->rho,
                     o->initial_accumulator_value, o->weight_decay,
                     (float)o->nesterov, (float)o->amsgrad, (float)o->centered};
    return tnt__fnv1a(h, hyper, sizeof hyper);
}

static uint64_t dataset_fingerprint(const tnt_dataset *ds) {
    if (!ds) return 0;
    int64_t v[2] = {tnt_dataset_cardinality(ds), tnt__dataset_batch_size(ds)};
    uint64_t h = tnt__fnv1a(0, v, sizeof v);
    return hash_shape(hash_shape(h, tnt_dataset_x_shape(ds)), tnt_dataset_y_shape(ds));
}

/* Dense kernels whose gradient the node computes once (comm.h, tnt__node_dw_kernel): float32
 * Dense layers called once, whose rows a rank stashes (x and dpre) are small beside the kernel
 * (the MLP's 4096 x 4096 at 32 rows: 1 MB against 64 MB). Not for GPUs nor None dimensions. */
static tnt_status setup_node_dw(tnt_model *m, const tnt_dataset *data, bool split) {
    m->node_dw_samples = 0;
    int64_t batch = data ? tnt__dataset_batch_size(data) : 0;
    if (!tnt__config_get()->node_gradients || m->variable || m->on_device || batch <= 0 ||
        tnt__reducer_kind(m->reducer) == TNT_REDUCER_FLAT)
        return TNT_OK;
    int size = tnt_get_size();
    int64_t samples = split ? (batch + size - 1) / size : batch; /* a rank's share at most */
    tnt__node_dw_kernel *kernels = tnt__calloc((size_t)m->n_nodes, sizeof *kernels);
    int n = 0;
    for (int i = 0; i < m->n_nodes && kernels; i++) {
        const tnt_layer *l = m->nodes[i].layer;
        if (strcmp(l->ops->class_name, "Dense") || tnt__layer_bf16(l) || l->frozen || l->n_weights < 1 ||
            !l->weights[0].grad || l->weights[0].shape.ndim != 2)
            continue;
        int uses = 0;
        for (int j = 0; j < m->n_nodes; j++) uses += m->nodes[j].layer == l;
        int64_t in = l->weights[0].shape.dim[0], units = l->weights[0].shape.dim[1];
        int64_t rows = samples * (tnt_shape_numel(l->in_shape) / in);
        if (uses != 1 || in * units < 65536 || in * units < 8 * rows * (in + units)) continue;
        kernels[n++] = (tnt__node_dw_kernel){l->weights[0].grad - m->grads, in, units, rows};
    }
    tnt_status s = tnt__reducer_node_dw_setup(m->reducer, kernels, kernels ? n : -1); /* collective */
    free(kernels);
    if (s == TNT_OK && n > 0) m->node_dw_samples = samples;
    return s;
}

tnt_status tnt__prepare_parallel(tnt_model *m, const char *who, const tnt_dataset *data,
                                   const tnt_dataset *val, const tnt_fit_opts *fit) {
    if (!tnt__is_parallel(m)) return TNT_OK;
    /* the gradient reducer's settings: the options given, else the configuration's */
    const tnt_distribute_opts *o = &m->distribute_opts;
    const tnt__config *c = tnt__config_get();
    int64_t kb = o->has_fusion_threshold ? o->fusion_threshold_kb : c->fusion_threshold_kb;
    int64_t reducer_cfg[6] = {kb, o->comm_mode != TNT_COMM_MODE_DEFAULT ? (int)o->comm_mode : c->comm_mode,
                              o->compression != TNT_COMPRESSION_DEFAULT ? (int)o->compression : c->compression,
                              o->reducer != TNT_REDUCER_DEFAULT ? (int)o->reducer : c->reducer, c->cross_node,
                              c->node_gradients};
    /* MPI runs serialized: a layer's own collectives (SyncBatchNormalization) cannot share the
     * communicator with a comm thread, so the gradient allreduces are then nonblocking calls on
     * the compute thread, issued in the same order on every rank */
    if (tnt__model_has_collective_layers(m)) reducer_cfg[1] = TNT_COMM_MODE_NONBLOCKING;
    /* below MPI_THREAD_SERIALIZED (tnt_init said so once) only the main thread calls MPI */
    if (!tnt__world_comm_thread_ok()) reducer_cfg[1] = TNT_COMM_MODE_NONBLOCKING;
    const char *names[7] = {"model", "compile configuration", "dataset", "validation dataset", "fit configuration",
                            "gradient allreduce settings (fusion threshold, comm mode, compression, reducer, "
                            "TNT_CROSS_NODE, TNT_NODE_GRADIENTS)",
                            "training device and TNT_GPU_COMM (fingerprint 1: cpu; 2, 6, 10: gpu with TNT_GPU_COMM "
                            "auto, mpi, nccl; see TNT_DEVICE)"};
    /* mixed CPU and GPU ranks would step differently (and the GPU's gradients are staged) */
    uint64_t v[7] = {model_fingerprint(m), m->compiled ? compile_fingerprint(m) : 0,
                     dataset_fingerprint(data), dataset_fingerprint(val), 0,
                     fit ? tnt__fnv1a(0, reducer_cfg, sizeof reducer_cfg) : 0,
                     m->on_device ? 2 + 4 * (uint64_t)c->gpu_comm : 1};
    if (fit) {
        int64_t f[6] = {fit->epochs, fit->initial_epoch, fit->steps_per_epoch, fit->validation_freq,
                        fit->no_distribute, fit->no_distribute_validation};
        v[4] = tnt__fnv1a(0, f, sizeof f);
    }
    tnt_status s = tnt__check_same(who, names, v, 7);
    if (s != TNT_OK) return s;
    if (!m->weights_synced) { /* the broadcast writes each rank's own copy */
        if ((s = tnt__model_host_written(m)) != TNT_OK) return s; /* each rank's own weights (model/window.h) */
        if ((s = tnt__bcast_f32(m->params, m->n_params)) != TNT_OK) return s;
        if ((s = tnt__bcast_f32(m->state, m->n_state)) != TNT_OK) return s;
        m->weights_synced = true;
    }
    int n_slots = m->optimizer ? tnt__optimizer_num_slots(m->optimizer) : 0;
    /* auto: the sharded optimizer on the CPU, node-aware on a GPU (no device path for the former) */
    if (reducer_cfg[3] == TNT_REDUCER_DEFAULT) reducer_cfg[3] = m->on_device ? TNT_REDUCER_NODE : TNT_REDUCER_SHARDED;
    if (fit && m->reducer && tnt__reducer_kind(m->reducer) == TNT_REDUCER_SHARDED &&
        ((n_slots && !tnt__reducer_slot(m->reducer, n_slots - 1)) || /* compiled again with more slots */
         m->on_device)) { /* compiled again for the GPU */
        if ((s = tnt__model_detach_window(m)) != TNT_OK) return s;
        tnt__reducer_free(m->reducer);
        m->reducer = NULL;
    }
    if (fit && !m->reducer) {
        /* bucket boundaries: where each layer's gradients are complete, in backward order */
        int64_t *ends = tnt__calloc((size_t)m->n_nodes, sizeof *ends);
        if (!ends) return TNT_ERR_NOMEM;
        int k = 0;
        for (int i = m->n_nodes - 1; i >= 0; i--)
            if (m->nodes[i].grad_end > (k ? ends[k - 1] : 0)) ends[k++] = m->nodes[i].grad_end;
        tnt_comm_mode mode = (tnt_comm_mode)reducer_cfg[1];
        tnt_compression compression = (tnt_compression)reducer_cfg[2];
        m->reducer = tnt__reducer_new(m->grads, m->n_params, ends, k, (size_t)kb * 1024, mode, compression,
                                      (tnt_reducer_kind)reducer_cfg[3], n_slots);
        free(ends);
        if (!m->reducer) return TNT_ERR_MPI; /* tnt_last_error says why (memory, MPI or size) */
        if ((s = setup_node_dw(m, data, !fit->no_distribute)) != TNT_OK) return s;
        static const char *const kinds[] = {"", "flat", "node-aware", "node-aware, sharded optimizer"};
        tnt_log(TNT_LOG_INFO, "model \"%s\": %d gradient buckets over %lld parameters (fusion threshold %lld KB, %s, %s%s)",
                m->name, tnt__reducer_num_buckets(m->reducer), (long long)m->n_params, (long long)kb,
                kinds[tnt__reducer_kind(m->reducer)], mode == TNT_COMM_MODE_THREAD ? "comm thread" : "nonblocking",
                compression == TNT_COMPRESSION_BF16 ? ", bfloat16 compression" : "");
    }
    /* GPU ranks: NCCL or host staging, chosen alike on every rank (collective) */
    if (fit && m->on_device && (s = tnt__dev_comm_prepare(m)) != TNT_OK) return s;
    return fit ? tnt__model_attach_window(m) : TNT_OK;
}

/* The update of [begin, end) but the frozen layers' weights (m->frozen): Keras's trainable =
 * False leaves them out of the optimizer's variables, their values, slots and weight decay. */
static tnt_status apply_trainable(tnt_model *m, const float *grads, int64_t begin, int64_t end) {
    tnt_status s = tnt__optimizer_apply(m->optimizer, m->params, grads, begin, begin); /* per-step state */
    for (int i = 0; i < m->n_frozen && s == TNT_OK && begin < end; i++) {
        int64_t fb = m->frozen[2 * i], fe = m->frozen[2 * i + 1];
        if (fe <= begin) continue;
        if (fb >= end) break;
        if (fb > begin) s = tnt__optimizer_apply(m->optimizer, m->params, grads, begin, fb);
        begin = fe;
    }
    return s == TNT_OK && begin < end ? tnt__optimizer_apply(m->optimizer, m->params, grads, begin, end) : s;
}

tnt_status tnt__parallel_optimizer_step(tnt_model *m, const tnt__step *st) {
    if (m->on_device) return tnt__dev_optimizer_step(m, st); /* the summed gradients go up first */
    tnt__reducer *r = st->parallel ? st->reducer : NULL;
    if (st->update_overlaps) return tnt__reducer_share_weights(r, m->params); /* the comm thread updated */
    if (!r || tnt__reducer_kind(r) != TNT_REDUCER_SHARDED) /* node-aware: the sums may be the node's */
        return apply_trainable(m, r ? tnt__reducer_sums(r) : m->grads, 0, m->n_params);
    /* this rank's slices, whose summed gradients it holds; the others' come through the window */
    tnt_status s = apply_trainable(m, m->grads, 0, 0);
    for (int i = 0; i < tnt__reducer_num_buckets(r) && s == TNT_OK; i++) {
        int64_t b, e;
        tnt__reducer_owned(r, i, &b, &e);
        s = apply_trainable(m, m->grads, b, e);
    }
    tnt_status x = tnt__reducer_share_weights(r, m->params); /* every rank takes part */
    return s != TNT_OK ? s : x;
}

/* The optimizer's update of a slice this rank owns, on the comm thread (tnt__reducer_set_update). */
static tnt_status update_slice(void *model, int64_t begin, int64_t end) {
    tnt_model *m = model;
    tnt_status s = apply_trainable(m, m->grads, begin, end);
    if (s != TNT_OK) tnt_log(TNT_LOG_ERROR, "sharded optimizer: %s", tnt_last_error());
    return s;
}

/* Whether the sharded update may run during backward: the weights live once in the node's window
 * (no penalty reads them after the reduction, no constraint rewrites them) and the step runs on
 * the CPU (frozen layers' weights stay out of it: m->frozen, noted before the step). The update
 * then reads what it would after the step: a bucket starts once backward has passed every layer
 * whose weights it holds, and no rank reads them again before the step's closing barrier. */
static bool update_can_overlap(const tnt_model *m, const tnt__step *st) {
    return tnt__config_get()->overlap_optimizer && !m->on_device && m->params_home && st->reducer &&
           !st->device_reduces && tnt__reducer_kind(st->reducer) == TNT_REDUCER_SHARDED;
}

void tnt__warn_small_micro_batch(tnt_model *m, int64_t micro) {
    if (m->warned_small_batch || micro >= 16) return;
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->ops->class_name, "BatchNormalization") && /* Sync... needs no warning */
            !m->layers[i]->frozen) { /* nor a frozen one: it uses its moving statistics */
            tnt_log(TNT_LOG_WARNING, "model \"%s\": micro-batch of %lld samples per rank with BatchNormalization "
                    "(statistics are per rank; below 16 they get noisy)", m->name, (long long)micro);
            m->warned_small_batch = true;
            return;
        }
}

/* Both agreements of a step end the epoch for every rank when one ran out of data. */
static int epoch_goes_on(int64_t ranks_with_data, const char *hint) {
    if (ranks_with_data == tnt_get_size()) return 1;
    if (ranks_with_data > 0)
        tnt_log(TNT_LOG_WARNING, "fit: %lld of %d ranks ran out of data; the epoch ends here%s",
                (long long)(tnt_get_size() - ranks_with_data), tnt_get_size(), hint);
    return 0;
}

int tnt__parallel_step_enter(const tnt_model *m, const tnt__step *st, tnt_status local, bool have_samples) {
    if (!st->parallel || !tnt__model_has_collective_layers(m)) return 1;
    int64_t ready = have_samples;
    tnt_status s = tnt__agree(local, &ready, 1);
    return s != TNT_OK ? s : epoch_goes_on(ready, "");
}

int tnt__parallel_step_begin(tnt_model *m, tnt__step *st, tnt_status local, tnt__step_counts *counts) {
    if (!st->parallel) {
        if (local != TNT_OK) return local;
        return counts->batches > 0;
    }
    /* the node computes its Dense kernel gradients when every rank's rows fit its stash */
    bool node_dw = m->node_dw_samples > 0 && m->reducer && tnt__reducer_kind(m->reducer) != TNT_REDUCER_FLAT;
    int64_t sums[4] = {counts->batches, counts->samples, counts->positions, counts->samples > m->node_dw_samples};
    double t0 = TNT_TL_BEGIN();
    tnt_status s = tnt__agree(local, sums, 4); /* where ranks wait for the slowest forward */
    TNT_TL_END("agreement", "step agreement", -1, t0);
    if (s != TNT_OK) return s;
    *counts = (tnt__step_counts){sums[0], sums[1], sums[2]};
    int go = epoch_goes_on(counts->batches, " (hand-sharded datasets need the same number of batches on every rank)");
    if (go <= 0) return go;
    st->reducer = m->reducer;
    st->device_reduces = m->on_device && m->dev && m->dev->nccl;
    st->node_dw = !st->device_reduces && node_dw && sums[3] == 0;
    if (st->device_reduces) m->dev->nccl_flushed = false;
    else tnt__reducer_begin_step(st->reducer);
    /* frozen layers' gradients: nobody reads their sums (every rank freezes the same: fingerprint) */
    if (st->reducer && !st->device_reduces) tnt__reducer_set_frozen(st->reducer, m->frozen, m->n_frozen);
    st->update_overlaps = update_can_overlap(m, st);
    /* the learning rate of this step, set here, before the comm thread reads it (a failure here
     * fails the slices' updates too, and so the reduction, which the step's agreement shares) */
    if (st->update_overlaps) (void)tnt__optimizer_apply(m->optimizer, m->params, m->grads, 0, 0);
    if (st->reducer) tnt__reducer_set_update(st->reducer, st->update_overlaps ? update_slice : NULL, m);
    return 1;
}

tnt_status tnt__parallel_step_end(tnt_model *m, const tnt__step *st, tnt_status local) {
    if (!st->parallel) return local;
    /* a rank whose backward failed still completes the step's collectives, and all ranks agree
     * on the outcome (8 bytes: negligible next to the gradients) */
    tnt_status rs = st->device_reduces ? tnt__dev_step_sums(m, st->reducer) : tnt__reducer_finish_step(st->reducer);
    return tnt__agree(local != TNT_OK ? local : rs, NULL, 0);
}
