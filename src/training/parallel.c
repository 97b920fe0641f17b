/* parallel.c: what makes a model data-parallel: the rank's data feed, the configuration
 * fingerprints every rank must share, the weight broadcast and the gradient reducer's plan. */
#include "training/parallel.h"
#include "data/dataset.h"
#include "comm/comm.h"
#include "optimizers/optimizer.h"

#include <stdio.h>

tnt_status tnt_distribute(tnt_model *m) {
    if (!m) return tnt__error(TNT_ERR_ARG, "distribute: model is NULL");
    m->distributed = true;
    return TNT_OK;
}

bool tnt__model_has_collective_layers(const tnt_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->ops->collective) return true;
    return false;
}

bool tnt__is_parallel(const tnt_model *m) { return m->distributed && tnt__world_active(); }

int tnt__feed_next(tnt__feed *f, tnt_batch *b, int64_t *global_n) {
    if (f->split)
        return tnt__dataset_iter_next_part(f->it, tnt_get_rank(), tnt_get_size(), b, global_n);
    int r = tnt_dataset_iter_next(f->it, b);
    *global_n = r == 1 ? b->n : 0;
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
        h = hash_shape(hash_shape(h, l->in_shape), l->out_shape);
        h = tnt__fnv1a(h, &l->activation, sizeof l->activation);
        for (int j = 0; j < l->n_weights; j++) h = hash_shape(h, l->weights[j].shape);
    }
    return h;
}

static uint64_t compile_fingerprint(const tnt_model *m) {
    const tnt_optimizer *o = m->optimizer;
    uint64_t h = tnt__fnv1a(0, &m->loss, sizeof m->loss);
    h = tnt__fnv1a(h, &m->from_logits, sizeof m->from_logits);
    for (int k = 0; k < m->n_metrics; k++) h = tnt__fnv1a(h, m->metrics[k].name, strlen(m->metrics[k].name));
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

tnt_status tnt__prepare_parallel(tnt_model *m, const char *who, const tnt_dataset *data,
                                   const tnt_dataset *val, const tnt_fit_opts *fit) {
    if (!tnt__is_parallel(m)) return TNT_OK;
    const char *names[5] = {"model", "compile configuration", "dataset", "validation dataset", "fit configuration"};
    uint64_t v[5] = {model_fingerprint(m), m->compiled ? compile_fingerprint(m) : 0,
                     dataset_fingerprint(data), dataset_fingerprint(val), 0};
    if (fit) {
        int64_t f[6] = {fit->epochs, fit->initial_epoch, fit->steps_per_epoch, fit->validation_freq,
                        fit->no_distribute, fit->no_distribute_validation};
        v[4] = tnt__fnv1a(0, f, sizeof f);
    }
    tnt_status s = tnt__check_same(who, names, v, 5);
    if (s != TNT_OK) return s;
    if (!m->weights_synced) {
        if ((s = tnt__bcast_f32(m->params, m->n_params)) != TNT_OK) return s;
        if ((s = tnt__bcast_f32(m->state, m->n_state)) != TNT_OK) return s;
        m->weights_synced = true;
    }
    if (fit && !m->reducer) {
        /* bucket boundaries: where each layer's gradients are complete, in backward order */
        int64_t *ends = tnt__calloc((size_t)m->n_nodes, sizeof *ends);
        if (!ends) return TNT_ERR_NOMEM;
        int k = 0;
        for (int i = m->n_nodes - 1; i >= 0; i--)
            if (m->nodes[i].grad_end > (k ? ends[k - 1] : 0)) ends[k++] = m->nodes[i].grad_end;
        /* MPI runs serialized: a layer's own collectives (SyncBatchNormalization) cannot share
         * the communicator with a comm thread, so the gradient allreduces are then nonblocking
         * calls on the compute thread, issued in the same order on every rank */
        tnt__comm_mode mode = tnt__model_has_collective_layers(m) ? TNT_COMM_NONBLOCKING : tnt__comm_mode_from_env();
        m->reducer = tnt__reducer_new(m->grads, m->n_params, ends, k, tnt__fusion_threshold_bytes(), mode);
        free(ends);
        if (!m->reducer) return TNT_ERR_NOMEM;
        tnt_log(TNT_LOG_INFO, "model \"%s\": %d gradient buckets over %lld parameters (fusion threshold %zu bytes)",
                m->name, tnt__reducer_num_buckets(m->reducer), (long long)m->n_params, tnt__fusion_threshold_bytes());
    }
    return TNT_OK;
}

void tnt__warn_small_micro_batch(tnt_model *m, int64_t micro) {
    if (m->warned_small_batch || micro >= 16) return;
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->ops->class_name, "BatchNormalization")) { /* Sync... needs no warning */
            tnt_log(TNT_LOG_WARNING, "model \"%s\": micro-batch of %lld samples per rank with BatchNormalization "
                    "(statistics are per rank; below 16 they get noisy)", m->name, (long long)micro);
            m->warned_small_batch = true;
            return;
        }
}

