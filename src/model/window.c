/* window.c: a model's buffers in its node-aware reducer's shared window (window.h). */
#include "model/window.h"
#include "comm/comm.h"
#include "core/timeline.h"
#include "optimizers/optimizer.h"
#include "layers/regularizer.h"

#include <string.h>

/* Some layer has weight penalties (which add to the gradients after the reduction and read the
 * weights before the update) or constraints (which rewrite whole weights after it). */
static bool has_rules(const tnt_model *m) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rules) return true;
    return false;
}

/* Copies this rank's owned slices of from into the node's shared to. */
static void put_owned(const tnt__reducer *r, float *to, const float *from) {
    for (int i = 0; i < tnt__reducer_num_buckets(r); i++) {
        int64_t b, e;
        tnt__reducer_owned(r, i, &b, &e);
        memcpy(to + b, from + b, (size_t)(e - b) * sizeof(float));
    }
}

/* Sharded: the weights once per node, unless penalties or constraints read or rewrite them whole
 * on every rank (then each rank keeps its own copy and the slices are exchanged). */
static void share_weights(tnt_model *m, tnt__reducer *r) {
    if (tnt__reducer_kind(r) != TNT_REDUCER_SHARDED || m->params_home || has_rules(m)) return;
    float *shared = tnt__reducer_weights(r);
    put_owned(r, shared, m->params);
    m->params_home = m->params;
    tnt__model_bind_params(m, shared);
}

static void attach(tnt_model *m, tnt__reducer *r) {
    m->grads_home = m->grads;
    tnt__model_bind_grads(m, tnt__reducer_grads(r));
    tnt__reducer_set_land(r, has_rules(m));
    m->attached = true;
    if (tnt__reducer_kind(r) != TNT_REDUCER_SHARDED) return;
    share_weights(m, r);
    /* each rank's own slots go: the node holds each slice once (a rank touches only its own);
     * every rank brings its own slices (every rank holds the same values) */
    tnt_optimizer *o = m->optimizer;
    for (int k = 0; k < o->n_slots; k++) {
        float *shared = tnt__reducer_slot(r, k);
        put_owned(r, shared, o->slots[k]);
        tnt__free(o->slots[k]);
        o->slots[k] = shared;
    }
    m->n_slots_shared = o->n_slots;
}

tnt_status tnt__model_attach_window(tnt_model *m) {
    tnt__reducer *r = m->reducer;
    if (!r || tnt__reducer_kind(r) == TNT_REDUCER_FLAT) return TNT_OK;
    double t0 = TNT_TL_BEGIN();
    bool moves = !m->attached || !m->params_home;
    if (!m->attached) attach(m, r);
    else share_weights(m, r); /* the weights, if written since */
    if (moves) TNT_TL_END("fit", "attach to the node's window", -1, t0);
    /* a rank that left put its slices back: the others read them only after this */
    return tnt__reducer_kind(r) == TNT_REDUCER_SHARDED ? tnt__reducer_sync(r, "optimizer slots") : TNT_OK;
}

void tnt__model_own_weights(tnt_model *m) {
    if (!m->attached || !m->params_home) return;
    double t0 = TNT_TL_BEGIN();
    memcpy(m->params_home, m->params, (size_t)m->n_params * sizeof(float));
    tnt__model_bind_params(m, m->params_home);
    m->params_home = NULL;
    TNT_TL_END("fit", "weights out of the node's window", -1, t0);
}

tnt_status tnt__model_detach_window(tnt_model *m) {
    if (!m->attached) return TNT_OK;
    double t0 = TNT_TL_BEGIN();
    tnt__reducer_copy_sums(m->reducer, m->grads_home);
    tnt__model_bind_grads(m, m->grads_home);
    if (m->params_home) {
        memcpy(m->params_home, m->params, (size_t)m->n_params * sizeof(float));
        tnt__model_bind_params(m, m->params_home);
        m->params_home = NULL;
    }
    /* the slots' whole values, every rank's slices, into buffers of this rank's own (the window
     * stays until the reducer goes) */
    tnt_optimizer *o = m->optimizer;
    tnt_status s = TNT_OK;
    for (int k = 0; k < m->n_slots_shared; k++) {
        float *own = tnt__alloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(float));
        if (own) memcpy(own, o->slots[k], (size_t)m->n_params * sizeof(float));
        else if (s == TNT_OK)
            s = tnt__error(TNT_ERR_NOMEM, "model \"%s\": no memory to take back optimizer %s's slots from the node's "
                           "window (%lld parameters); its state starts again", m->name, o->name, (long long)m->n_params);
        o->slots[k] = own;
    }
    if (s != TNT_OK) { /* fresh, zeroed slots at the next use */
        for (int k = 0; k < m->n_slots_shared; k++) tnt__free(o->slots[k]), o->slots[k] = NULL;
        o->n_params = -1;
    }
    m->n_slots_shared = 0;
    m->attached = false;
    TNT_TL_END("fit", "detach from the node's window", -1, t0);
    return s;
}

void tnt__model_drop_window(tnt_model *m) {
    if (!m->attached) return;
    m->grads = m->grads_home;
    if (m->params_home) m->params = m->params_home, m->params_home = NULL;
    for (int k = 0; k < m->n_slots_shared; k++) m->optimizer->slots[k] = NULL; /* the window's */
    m->n_slots_shared = 0;
    m->attached = false;
}
