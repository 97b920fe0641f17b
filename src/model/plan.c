/* plan.c: execution plans and the forward and backward passes over the model's graph.
 *
 * A plan fixes, for one batch size, each node's layer plan and workspace and the arena offsets of
 * every tensor's value and gradient. Forward values that some backward reads (the layers declare
 * which: backward_reads) are kept to the end of the step; the others live from their producer's
 * forward to their last reader's and lend their storage to later ones (ResNet's
 * BatchNormalization outputs that only an Add reads: a fifth of its values). Gradients live only
 * from the backward of a tensor's last consumer to that of its producer, so their storage is
 * assigned by simulating backward once with a first-fit allocator: for a chain this gives the two
 * ping-pong buffers of a Sequential model, and for ResNet-style graphs a few more. A tensor read
 * by several nodes gets its gradient summed: the first consumer in backward order writes it in
 * place, later ones write a temporary that is added. */
#include "model/model.h"
#include "model/device.h"
#include "core/timeline.h"
#include "comm/comm.h"
#include "layers/regularizer.h"
#include "model/device_rules.h"

#include <stdio.h>

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t tensor_bytes(const tnt_model *m, int t, int64_t batch) {
    return (size_t)(batch * tnt_shape_numel(m->tensor_shape[t])) * sizeof(float);
}

static void plan_free(tnt_model *m, tnt__plan *p) {
    if (p->layer_plans)
        for (int i = 0; i < m->n_nodes; i++) {
            const tnt__layer_ops *o = m->nodes[i].layer->ops;
            void (*destroy)(void *) = p->device ? (o->gpu ? o->gpu->plan_destroy : NULL) : o->plan_destroy;
            if (p->layer_plans[i] && destroy) destroy(p->layer_plans[i]);
        }
    /* a device plan's page-locked buffers may still feed a queued copy (the labels' upload):
     * done first (a plan for another input shape evicts one mid-fit) */
    if (p->device && p->host_buf) tnt__gpu_sync(TNT__GPU_COPY), tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (p->host_pinned) tnt__gpu_host_free(p->host_buf);
    else free(p->host_buf);
    tnt__dev_penalty_plan_free(p);
    tnt__gpu_event_destroy(p->outputs_ready);
    tnt__gpu_event_destroy(p->labels_sent);
    tnt__gpu_event_destroy(p->forward_done);
    free(p->layer_plans);
    free(p->ws_offset);
    free(p->act_offset);
    free(p->act_is_input);
    free(p->grad_offset);
    free(p->dx_offset);
    free(p->dx_mode);
    memset(p, 0, sizeof *p);
}

void tnt__model_clear_plans(tnt_model *m) {
    for (int i = 0; i < TNT_PLAN_CACHE; i++) plan_free(m, &m->plans[i]);
}

/* ---- first-fit allocator of gradient storage --------------------------------------------- */

typedef struct block {
    size_t off, size;
} block;

typedef struct galloc {
    block *live; /* sorted by offset */
    int n, cap;
    size_t peak;
} galloc;

static bool galloc_take(galloc *g, size_t size, size_t *off) {
    size = align64(size ? size : 1);
    size_t at = 0;
    int i = 0;
    for (; i < g->n; i++) {
        if (g->live[i].off >= at + size) break;
        at = TNT_MAX(at, g->live[i].off + g->live[i].size);
    }
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        block *nb = realloc(g->live, (size_t)cap * sizeof *nb);
        if (!nb) return false;
        g->live = nb;
        g->cap = cap;
    }
    memmove(g->live + i + 1, g->live + i, (size_t)(g->n - i) * sizeof *g->live);
    g->live[i] = (block){at, size};
    g->n++;
    g->peak = TNT_MAX(g->peak, at + size);
    *off = at;
    return true;
}

static void galloc_release(galloc *g, size_t off) {
    for (int i = 0; i < g->n; i++)
        if (g->live[i].off == off) {
            memmove(g->live + i, g->live + i + 1, (size_t)(g->n - i - 1) * sizeof *g->live);
            g->n--;
            return;
        }
}

/* needs_grad[t]: some trainable weight lies upstream of tensor t, so backward must reach it. */
static void compute_needs_grad(const tnt_model *m, bool *needs_grad) {
    memset(needs_grad, 0, (size_t)m->n_tensors * sizeof *needs_grad);
    for (int k = 0; m->input_grads && k < m->n_inputs; k++) needs_grad[m->inputs[k]] = true;
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        /* a frozen layer's weights are none of the optimizer's (Keras): backward stops below the
         * last layer that trains (a frozen base under a new head runs forward only) */
        bool need = tnt__layer_has_trainable(n->layer) && !n->layer->frozen;
        for (int k = 0; k < n->n_in; k++) need |= needs_grad[n->in[k]];
        for (int k = 0; k < tnt__node_n_out(n); k++) needs_grad[n->out + k] = need;
    }
}

#define DX(p, node, k) ((size_t)(node) * TNT_MAX_LAYER_INPUTS + (size_t)(k))

/* grad_offset of a tensor whose gradient nobody makes: an output of a layer with several
 * outputs that nothing reads (the layer gets NULL for it: a zero gradient). */
#define NO_GRAD ((size_t)-1)

/* Assigns gradient storage by walking backward; offsets are relative to base. */
static tnt_status plan_gradients(tnt_model *m, tnt__plan *p, size_t base, size_t *bytes) {
    bool *needs = tnt__calloc((size_t)m->n_tensors, 2 * sizeof(bool));
    if (!needs) return TNT_ERR_NOMEM;
    bool *assigned = needs + m->n_tensors;
    compute_needs_grad(m, needs);
    galloc g = {0};
    tnt_status s = TNT_OK;
    size_t off;
    for (int k = 0; k < m->n_outputs; k++) {
        int t = m->outputs[k];
        if (!galloc_take(&g, tensor_bytes(m, t, p->batch), &off)) goto nomem;
        p->grad_offset[t] = off;
        assigned[t] = true;
    }
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const tnt__node *n = &m->nodes[i];
        if (!needs[n->out]) continue;
        bool read = false; /* some output's gradient is made (else the node is skipped, as in backward) */
        for (int k = 0; k < tnt__node_n_out(n); k++) read |= assigned[n->out + k];
        if (!read) continue;
        size_t temps[TNT_MAX_LAYER_INPUTS];
        int n_temps = 0;
        bool transferred = false;
        for (int k = 0; k < n->n_in; k++) {
            int t = n->in[k];
            signed char *mode = &p->dx_mode[DX(p, i, k)];
            if (!needs[t]) {
                *mode = 0;
            } else if (tnt__node_is_alias(n) && !assigned[t] && assigned[n->out]) {
                *mode = 3; /* dx is dy: the input takes over the output's gradient storage */
                p->grad_offset[t] = p->grad_offset[n->out];
                assigned[t] = transferred = true;
            } else if (!assigned[t]) {
                if (!galloc_take(&g, tensor_bytes(m, t, p->batch), &off)) goto nomem;
                *mode = 1;
                p->grad_offset[t] = p->dx_offset[DX(p, i, k)] = off;
                assigned[t] = true;
            } else {
                *mode = 2;
                if (!tnt__node_is_alias(n)) {
                    if (!galloc_take(&g, tensor_bytes(m, t, p->batch), &off)) goto nomem;
                    p->dx_offset[DX(p, i, k)] = temps[n_temps++] = off;
                }
            }
        }
        for (int k = 0; k < n_temps; k++) galloc_release(&g, temps[k]);
        if (!transferred && assigned[n->out]) galloc_release(&g, p->grad_offset[n->out]);
        for (int k = 1; k < tnt__node_n_out(n); k++)
            if (assigned[n->out + k]) galloc_release(&g, p->grad_offset[n->out + k]);
    }
    for (int t = 0; t < m->n_tensors; t++) p->grad_offset[t] = assigned[t] ? p->grad_offset[t] + base : NO_GRAD;
    for (int i = 0; i < m->n_nodes * TNT_MAX_LAYER_INPUTS; i++) p->dx_offset[i] += base;
    *bytes = g.peak;
    goto done;
nomem:
    s = tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory planning gradients", m->name);
done:
    free(g.live);
    free(needs);
    return s;
}

bool tnt__plan_keep_values = false;

/* Does node n's backward read its inputs (its outputs)? Only when it runs: when something
 * upstream of it trains. */
static bool backward_reads(const tnt__node *n, const bool *needs, unsigned what) {
    const tnt_layer *l = n->layer;
    if (what == TNT__READS_OUTPUTS && tnt__layer_has_activity_rule(l)) return true; /* its gradient reads y */
    if (tnt__node_is_alias(n) || !needs[n->out]) return false;
    if (what == TNT__READS_OUTPUTS && l->activation != TNT_ACT_LINEAR) return true;
    return !l->ops->backward_reads || (l->ops->backward_reads(l) & what);
}

/* Forward values' storage from off on: first those kept to the end of the step (the model's
 * inputs and outputs, what a backward reads), then the others by a first-fit allocator over the
 * forward order, each taken before its producer runs and given back after its last reader. A
 * single input on the host is read from the caller's buffer; several are unpacked. */
static tnt_status plan_values(tnt_model *m, tnt__plan *p, size_t *off) {
    const int T = m->n_tensors;
    bool *needs = tnt__calloc((size_t)T, 4 * sizeof(bool));
    int *last = tnt__calloc((size_t)T, sizeof(int));
    if (!needs || !last) {
        free(needs), free(last);
        return TNT_ERR_NOMEM;
    }
    bool *keep = needs + T, *live = needs + 2 * T, *made = needs + 3 * T;
    compute_needs_grad(m, needs);
    const int *root = m->tensor_alias;
    for (int t = 0; t < T; t++) last[t] = -1;
    for (int k = 0; k < m->n_inputs; k++) keep[root[m->inputs[k]]] = true;
    for (int k = 0; k < m->n_outputs; k++) keep[root[m->outputs[k]]] = true;
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            last[root[n->in[k]]] = i;
            keep[root[n->in[k]]] |= backward_reads(n, needs, TNT__READS_INPUTS);
        }
        for (int k = 0; k < tnt__node_n_out(n); k++) {
            keep[root[n->out + k]] |= backward_reads(n, needs, TNT__READS_OUTPUTS);
            made[n->out + k] |= !tnt__node_is_alias(n);
        }
    }
    for (int t = 0; t < T; t++) {
        if (root[t] != t || !(keep[t] || !made[t] || tnt__plan_keep_values)) continue;
        bool single_input = m->n_inputs == 1 && m->inputs[0] == t && !p->device;
        keep[t] = true;
        p->act_is_input[t] = single_input;
        if (single_input) continue;
        p->act_offset[t] = *off;
        *off += align64(tensor_bytes(m, t, p->batch));
    }
    galloc g = {0};
    size_t at;
    tnt_status s = TNT_OK;
    for (int i = 0; i < m->n_nodes && s == TNT_OK; i++) {
        const tnt__node *n = &m->nodes[i];
        for (int k = 0; k < tnt__node_n_out(n); k++) {
            int t = n->out + k;
            if (root[t] != t || keep[t]) continue;
            if (!galloc_take(&g, tensor_bytes(m, t, p->batch), &at)) s = TNT_ERR_NOMEM;
            p->act_offset[t] = *off + at;
            live[t] = true;
        }
        /* given back after the last reader, or at once when nothing reads it */
        for (int k = 0; k < n->n_in + tnt__node_n_out(n); k++) {
            int t = root[k < n->n_in ? n->in[k] : n->out + k - n->n_in];
            if (live[t] && last[t] == (k < n->n_in ? i : -1)) {
                galloc_release(&g, p->act_offset[t] - *off);
                live[t] = false;
            }
        }
    }
    *off += g.peak;
    for (int t = 0; t < T; t++) {
        p->act_offset[t] = p->act_offset[root[t]];
        p->act_is_input[t] = p->act_is_input[root[t]];
    }
    free(g.live);
    free(needs), free(last);
    return s == TNT_OK ? TNT_OK : tnt__error(s, "model \"%s\": out of memory planning forward values", m->name);
}

static tnt_status plan_init(tnt_model *m, tnt__plan *p, int64_t batch) {
    int N = m->n_nodes, T = m->n_tensors;
    p->batch = batch;
    p->layer_plans = tnt__calloc((size_t)N, sizeof(void *));
    p->ws_offset = tnt__calloc((size_t)N, sizeof(size_t));
    p->act_offset = tnt__calloc((size_t)T, sizeof(size_t));
    p->act_is_input = tnt__calloc((size_t)T, sizeof(bool));
    p->grad_offset = tnt__calloc((size_t)T, sizeof(size_t));
    p->dx_offset = tnt__calloc((size_t)N * TNT_MAX_LAYER_INPUTS, sizeof(size_t));
    p->dx_mode = tnt__calloc((size_t)N * TNT_MAX_LAYER_INPUTS, 1);
    if (!p->layer_plans || !p->ws_offset || !p->act_offset || !p->act_is_input || !p->grad_offset ||
        !p->dx_offset || !p->dx_mode)
        return TNT_ERR_NOMEM;
    size_t off = 0;
    p->device = m->on_device;
    tnt_status s = plan_values(m, p, &off);
    if (s != TNT_OK) return s;
    for (int i = 0; i < N; i++) {
        tnt_layer *l = m->nodes[i].layer;
        if (m->nodes[i].folded || (p->device && tnt__node_is_alias(&m->nodes[i]))) continue;
        if (p->device && !l->ops->gpu)
            return tnt__error(TNT_ERR_UNSUPPORTED, "model \"%s\": layer \"%s\" (%s) has no GPU path", m->name, l->name,
                              l->ops->class_name);
        /* a device plan takes the layer's GPU path's functions */
        void *(*create)(tnt_layer *, int64_t) = p->device ? l->ops->gpu->plan_create : l->ops->plan_create;
        if (create) {
            p->layer_plans[i] = create(l, batch);
            if (!p->layer_plans[i])
                return tnt__error_prefix(TNT_ERR_BACKEND, "model \"%s\": layer \"%s\" (%s), batch %lld: ",
                                         m->name, l->name, l->ops->class_name, (long long)batch);
        }
        size_t (*ws)(tnt_layer *, void *, int64_t) = p->device ? l->ops->gpu->workspace_size : l->ops->workspace_size;
        if (ws) {
            p->ws_offset[i] = off;
            off += align64(ws(l, p->layer_plans[i], batch));
        }
    }
    if (p->device) { /* one scratch region for every layer's calls */
        size_t scratch = 0;
        for (int i = 0; i < N; i++) {
            const tnt__node *n = &m->nodes[i];
            const tnt__gpu_ops *g = n->layer->ops->gpu;
            if (!n->folded && !tnt__node_is_alias(n) && g && g->scratch_size)
                scratch = TNT_MAX(scratch, g->scratch_size(n->layer, p->layer_plans[i], batch));
        }
        p->scratch_offset = off;
        off += align64(scratch);
    }
    for (int k = 0; k < m->n_outputs; k++) {
        p->preact_offset[k] = off;
        off += align64(tensor_bytes(m, m->outputs[k], batch));
    }
    p->packed_offset = off;
    if (m->n_outputs > 1) off += align64((size_t)(batch * tnt__model_output_size(m)) * sizeof(float));
    size_t label_floats = (size_t)(batch * tnt__model_output_size(m)); /* at most one label per output value */
    if (p->device) { /* the labels of a loss computed on the device */
        p->labels_offset = off;
        off += align64(label_floats * sizeof(float));
        p->penalty_offset = off;
        off += align64(tnt__dev_penalty_bytes(m));
    }
    size_t grad_bytes = 0;
    s = plan_gradients(m, p, off, &grad_bytes);
    if (s != TNT_OK) return s;
    off += grad_bytes;
    p->arena_bytes = off;
    if (p->device) { /* the arena on the device; the loss's tensors mirrored on the host, page-locked
                      * where it can be (else the copies wait for the device: as correct, slower) */
        size_t total = 0;
        for (int k = 0; k < m->n_outputs; k++) total += (size_t)(batch * tnt_shape_numel(m->tensor_shape[m->outputs[k]]));
        size_t floats = 4 * total + label_floats + 1;
        if ((p->host_buf = tnt__gpu_host_malloc(floats * sizeof(float)))) {
            p->host_pinned = true;
            memset(p->host_buf, 0, floats * sizeof(float));
        } else {
            tnt__error_clear();
            if (!(p->host_buf = tnt__calloc(floats, sizeof(float)))) return TNT_ERR_NOMEM;
        }
        if (!(p->outputs_ready = tnt__gpu_event_create()) || !(p->labels_sent = tnt__gpu_event_create()) ||
            !(p->forward_done = tnt__gpu_event_create()))
            return TNT_ERR_BACKEND;
        p->host_labels = p->host_buf + 4 * total;
        float *h = p->host_buf;
        for (int k = 0; k < m->n_outputs; k++) {
            size_t n = (size_t)(batch * tnt_shape_numel(m->tensor_shape[m->outputs[k]]));
            p->host_out[k] = h, p->host_loss_in[k] = h + n, p->host_out_grad[k] = h + 2 * n;
            h += 3 * n;
        }
        p->host_packed = h;
        if ((s = tnt__dev_penalty_plan(m, p)) != TNT_OK) return s;
        return tnt__model_dev_arena(m, off) ? TNT_OK : TNT_ERR_NOMEM;
    }
    if (off > m->arena_bytes) {
        tnt__free(m->arena);
        m->arena_bytes = 0;
        m->arena = tnt__alloc(off);
        if (!m->arena) return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory for a %zu-byte arena (batch %lld)",
                                         m->name, off, (long long)batch);
        m->arena_bytes = off;
    }
    return TNT_OK;
}

tnt__plan *tnt__model_plan(tnt_model *m, int64_t batch) {
    uint64_t frozen = tnt__model_frozen_signature(m);
    if (frozen != m->plans_frozen) { /* a layer frozen or thawed since: other tensors need gradients */
        tnt__model_clear_plans(m);
        m->plans_frozen = frozen;
    }
    tnt__plan *victim = &m->plans[0];
    /* a device plan holds a slot per penalty: a regularizer set since makes it again */
    const int penalty_terms = m->on_device ? tnt__dev_penalty_terms(m) : 0;
    for (int i = 0; i < TNT_PLAN_CACHE; i++) {
        tnt__plan *p = &m->plans[i];
        bool shapes = true; /* the input shapes matter for models with None dimensions */
        for (int k = 0; k < m->n_inputs && shapes; k++) shapes = tnt__shape_equal(p->in_shapes[k], m->tensor_shape[m->inputs[k]]);
        if (p->batch == batch && p->layer_plans && shapes && p->device == m->on_device &&
            (!p->device || p->penalty_terms == penalty_terms)) {
            p->last_use = ++m->plan_clock;
            return p;
        }
        if (p->last_use < victim->last_use) victim = p;
    }
    plan_free(m, victim);
    if (plan_init(m, victim, batch) != TNT_OK) {
        plan_free(m, victim);
        return NULL;
    }
    victim->last_use = ++m->plan_clock;
    for (int k = 0; k < m->n_inputs; k++) victim->in_shapes[k] = m->tensor_shape[m->inputs[k]];
    return victim;
}

/* ---- execution --------------------------------------------------------------------------- */

/* An arena address: the device's for a device plan. */
static float *at(tnt_model *m, const tnt__plan *p, size_t off) {
    return (float *)((char *)(p->device ? m->dev->arena : m->arena) + off);
}

static float *act(tnt_model *m, tnt__plan *p, int t, const float *x) {
    return p->act_is_input[t] ? (float *)x : at(m, p, p->act_offset[t]);
}

static int output_index(const tnt_model *m, int t) {
    for (int k = 0; k < m->n_outputs; k++)
        if (m->outputs[k] == t) return k;
    return -1;
}

/* On a device plan these are the host copies (the loss and the metrics run on the host). */
float *tnt__plan_output(tnt_model *m, tnt__plan *p, int k, const float *x) {
    return p->device ? p->host_out[k] : act(m, p, m->outputs[k], x);
}
float *tnt__plan_output_grad(tnt_model *m, tnt__plan *p, int k) {
    return p->device ? p->host_out_grad[k] : at(m, p, p->grad_offset[m->outputs[k]]);
}
float *tnt__plan_input_grad(tnt_model *m, tnt__plan *p, int k) {
    size_t off = p->grad_offset[m->inputs[k]];
    return p->device || !m->input_grads || off == NO_GRAD ? NULL : at(m, p, off);
}
float *tnt__plan_loss_input(tnt_model *m, tnt__plan *p, int k, const float *x) {
    if (p->device) return m->fused_output_loss[k] ? p->host_loss_in[k] : p->host_out[k];
    return m->fused_output_loss[k] ? at(m, p, p->preact_offset[k]) : tnt__plan_output(m, p, k, x);
}

/* Copies between the per-sample packed layout and one (batch, numel) array per tensor. */
static void repack(tnt_model *m, tnt__plan *p, int n, const int *ids, float *packed, const float *x, bool unpack) {
    int64_t total = 0;
    for (int k = 0; k < n; k++) total += tnt_shape_numel(m->tensor_shape[ids[k]]);
    int64_t col = 0;
    for (int k = 0; k < n; k++) {
        int64_t c = tnt_shape_numel(m->tensor_shape[ids[k]]);
        float *t = act(m, p, ids[k], x);
        for (int64_t i = 0; i < p->batch; i++) {
            if (unpack) memcpy(t + i * c, packed + i * total + col, (size_t)c * sizeof(float));
            else memcpy(packed + i * total + col, t + i * c, (size_t)c * sizeof(float));
        }
        col += c;
    }
}

uint64_t tnt__model_training_seed(tnt_model *m) {
    int64_t step = m->optimizer ? tnt_optimizer_iterations(m->optimizer) : m->step;
    m->step++;
    return tnt__hash64(m->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(step + 1)));
}

/* Keras adds a layer's activity penalty at every call, in inference too (on the device: its sums
 * come down with the outputs, tnt__dev_penalties_read). */
static tnt_status add_activity_penalty(tnt_model *m, tnt__plan *p, int i, const float *x) {
    const tnt__node *n = &m->nodes[i];
    if (!n->layer->rules) return TNT_OK;
    const int64_t numel = p->batch * tnt_shape_numel(m->tensor_shape[n->out]);
    if (p->device) return tnt__dev_activity_sums(m, p, i, act(m, p, n->out, x), numel);
    m->activity_penalty += tnt__layer_activity_penalty(n->layer, act(m, p, n->out, x), numel);
    return TNT_OK;
}

static void *workspace(tnt_model *m, tnt__plan *p, int i) {
    const tnt__layer_ops *o = m->nodes[i].layer->ops;
    return (p->device ? o->gpu->workspace_size : o->workspace_size) ? at(m, p, p->ws_offset[i]) : NULL;
}
static void *layer_scratch(tnt_model *m, tnt__plan *p) { return p->device ? at(m, p, p->scratch_offset) : NULL; }

/* A device pass starts with the batch copied in (after the weights, when the host wrote them):
 * up into the model's batch buffer (tnt__dev_batch_up), then into the input tensors, one copy for
 * one input; several come packed per sample (repack's layout), and each input's columns go to its
 * own tensor. */
static tnt_status device_input(tnt_model *m, tnt__plan *p, const float *x) {
    tnt_status s = tnt__model_dev_ready(m);
    if (s != TNT_OK) return s;
    long long per = 0, col = 0, rows = p->batch;
    for (int k = 0; k < m->n_inputs; k++) per += tnt_shape_numel(m->tensor_shape[m->inputs[k]]);
    const float *packed = NULL;
    if ((s = tnt__dev_batch_up(m, x, (size_t)(rows * per) * sizeof(float), &packed)) != TNT_OK) return s;
    if (m->n_inputs == 1) {
        s = tnt__gpu_copy_on_device(at(m, p, p->act_offset[m->inputs[0]]), packed, (size_t)(rows * per) * sizeof(float),
                                    TNT__GPU_COMPUTE);
    }
    for (int k = 0; k < m->n_inputs && m->n_inputs > 1 && s == TNT_OK; k++) {
        long long cols = tnt_shape_numel(m->tensor_shape[m->inputs[k]]), zero = 0;
        float *dst = at(m, p, p->act_offset[m->inputs[k]]);
        int accumulate = 0;
        void *args[] = {&packed, &dst, &rows, &cols, &per, &col, &cols, &zero, &accumulate};
        s = tnt__gpu_launch("tnt_k_copy_cols", tnt__gpu_grid_for(rows * cols, 256), 256, 0, args);
        col += cols;
    }
    return s == TNT_OK ? tnt__dev_batch_taken(m) : s;
}

/* Several outputs packed per sample on the host, as the CPU engine returns them. */
static void pack_outputs(tnt_model *m, tnt__plan *p) {
    int64_t per = tnt__model_output_size(m), col = 0;
    for (int k = 0; k < m->n_outputs; k++) {
        int64_t c = tnt_shape_numel(m->tensor_shape[m->outputs[k]]);
        for (int64_t i = 0; i < p->batch; i++)
            memcpy(p->host_packed + i * per + col, p->host_out[k] + i * c, (size_t)c * sizeof(float));
        col += c;
    }
}

tnt_status tnt__plan_outputs_wait(tnt_model *m, tnt__plan *p) {
    tnt_status s = tnt__gpu_event_sync(p->outputs_ready);
    if (s == TNT_OK && m->n_outputs > 1) pack_outputs(m, p);
    if (s == TNT_OK) tnt__dev_penalties_read(m, p);
    return s;
}

/* ... and ends with each output (and the logits of a fused loss) copied out for the loss and
 * packed; with a loss on the device (async) the copies stay in flight: tnt__plan_outputs_wait. */
static tnt_status device_output(tnt_model *m, tnt__plan *p, bool async) {
    /* async: on the copy stream once forward is done, while the compute stream goes on (the
     * outputs and logits stay untouched to the end of the step) */
    const tnt__gpu_stream stream = async ? TNT__GPU_COPY : TNT__GPU_COMPUTE;
    tnt_status s = TNT_OK;
    if (async && (s = tnt__gpu_event_record(p->forward_done, TNT__GPU_COMPUTE)) == TNT_OK)
        s = tnt__gpu_stream_wait(TNT__GPU_COPY, p->forward_done);
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        int t = m->outputs[k];
        size_t bytes = tensor_bytes(m, t, p->batch);
        s = tnt__gpu_copy_to_host(p->host_out[k], at(m, p, p->act_offset[t]), bytes, stream);
        if (s == TNT_OK && m->fused_output_loss[k])
            s = tnt__gpu_copy_to_host(p->host_loss_in[k], at(m, p, p->preact_offset[k]), bytes, stream);
    }
    if (s == TNT_OK) s = tnt__dev_penalties_down(m, p, stream);
    if (async) return s == TNT_OK ? tnt__gpu_event_record(p->outputs_ready, TNT__GPU_COPY) : s;
    if (s == TNT_OK) s = tnt__gpu_sync(TNT__GPU_COMPUTE);
    if (s == TNT_OK && m->n_outputs > 1) pack_outputs(m, p);
    if (s == TNT_OK) tnt__dev_penalties_read(m, p);
    return s;
}

static tnt_status layer_forward(tnt_layer *l, const tnt__plan *p, void *plan, const tnt__fwd_args *a) {
    return p->device ? l->ops->gpu->forward(l, plan, a) : l->ops->forward(l, plan, a);
}

tnt_status tnt__model_forward(tnt_model *m, tnt__plan *p, const float *x, const tnt__step *st, float **out) {
    if (p->device) {
        tnt_status s = device_input(m, p, x);
        if (s != TNT_OK) return tnt__error_prefix(s, "model \"%s\": batch to the GPU: ", m->name);
        if ((s = tnt__dev_weight_sums(m, p)) != TNT_OK) return s;
    } else if (m->n_inputs > 1) {
        repack(m, p, m->n_inputs, m->inputs, (float *)x, x, true);
    }
    m->activity_penalty = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        tnt_layer *l = n->layer;
        if (tnt__node_is_alias(n)) {
            tnt_status s = add_activity_penalty(m, p, i, x);
            if (s != TNT_OK) return tnt__error_prefix(s, "layer \"%s\" (%s) activity penalty: ", l->name, l->ops->class_name);
            continue;
        }
        const float *xs[TNT_MAX_LAYER_INPUTS];
        float *ys[TNT_MAX_LAYER_OUTPUTS];
        for (int k = 0; k < n->n_in; k++) xs[k] = act(m, p, n->in[k], x);
        for (int k = 0; k < tnt__node_n_out(n); k++) ys[k] = act(m, p, n->out + k, x);
        int ok = output_index(m, n->out);
        tnt__fwd_args a = {
            .batch = p->batch,
            .x = xs[0],
            .n_inputs = n->n_in,
            .xs = xs,
            .y = ys[0],
            .n_outputs = tnt__node_n_out(n),
            .ys = ys,
            .preact = ok >= 0 && m->fused_output_loss[ok] ? at(m, p, p->preact_offset[ok]) : NULL,
            .workspace = workspace(m, p, i),
            .scratch = layer_scratch(m, p),
            .training = st->training,
            .seed = st->seed,
            .sample_offset = st->sample_offset,
            .parallel = st->parallel,
        };
        double t0 = TNT_TL_BEGIN();
        tnt_status s = layer_forward(l, p, p->layer_plans[i], &a);
        TNT_TL_END(st->training ? "forward" : "inference", l->name, -1, t0);
        if (s != TNT_OK) return tnt__error_prefix(s, "layer \"%s\" (%s) forward: ", l->name, l->ops->class_name);
        if ((s = add_activity_penalty(m, p, i, x)) != TNT_OK)
            return tnt__error_prefix(s, "layer \"%s\" (%s) activity penalty: ", l->name, l->ops->class_name);
        /* a batch's added loss L counts as L per sample: L over the batch, as Keras's (on p ranks,
         * each rank's L weighted by its share of the batch) */
        if (l->ops->added_loss) { /* through the host on a device: its host workspace holds the loss */
            const tnt__gpu_ops *g = l->ops->gpu;
            const void *ws = p->device && g && g->host_workspace ? g->host_workspace(p->layer_plans[i]) : a.workspace;
            m->activity_penalty += l->ops->added_loss(l, ws) * (double)p->batch;
        }
    }
    if (p->device) {
        tnt_status s = device_output(m, p, st->device_loss);
        if (s != TNT_OK) return tnt__error_prefix(s, "model \"%s\": outputs from the GPU: ", m->name);
        *out = m->n_outputs == 1 ? p->host_out[0] : p->host_packed;
    } else if (m->n_outputs == 1) {
        *out = tnt__plan_output(m, p, 0, x);
    } else {
        *out = at(m, p, p->packed_offset);
        repack(m, p, m->n_outputs, m->outputs, *out, x, false);
    }
    return TNT_OK;
}

static tnt_status add_into(const tnt__plan *p, float *dst, const float *src, int64_t n) {
    if (p->device) return tnt__dev_add_into(dst, src, n);
#pragma omp parallel for simd if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
    return TNT_OK;
}

static tnt_status layer_backward(tnt_layer *l, const tnt__plan *p, void *plan, const tnt__bwd_args *a) {
    return p->device ? l->ops->gpu->backward(l, plan, a) : l->ops->backward(l, plan, a);
}

/* Backward of one node whose weight gradients must be added to an earlier call's (a shared
 * layer): its trainable weights point at scratch during the call. */
static tnt_status backward_shared(tnt_model *m, const tnt__plan *p, tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    float *real[TNT_MAX_LAYER_WEIGHTS] = {0};
    float *scratch = p->device ? m->dev->shared_scratch : m->shared_scratch;
    int64_t off = 0;
    for (int j = 0; j < l->n_weights; j++) {
        tnt__weight *w = &l->weights[j];
        if (!w->trainable) continue;
        float **grad = p->device ? &w->d_grad : &w->grad;
        real[j] = *grad;
        *grad = scratch + off;
        off += tnt_shape_numel(w->shape);
    }
    tnt_status s = layer_backward(l, p, plan, a);
    for (int j = 0; j < l->n_weights; j++) {
        tnt__weight *w = &l->weights[j];
        if (!w->trainable) continue;
        float **grad = p->device ? &w->d_grad : &w->grad;
        if (s == TNT_OK) s = add_into(p, real[j], *grad, tnt_shape_numel(w->shape));
        *grad = real[j];
    }
    return s;
}

tnt_status tnt__model_backward(tnt_model *m, tnt__plan *p, const float *x, const tnt__step *st) {
    bool needs_stack[256];
    bool *needs = m->n_tensors <= 256 ? needs_stack : tnt__calloc((size_t)m->n_tensors, sizeof *needs);
    if (!needs) return TNT_ERR_NOMEM;
    compute_needs_grad(m, needs);
    tnt_status s = TNT_OK;
    int64_t ready = 0;
    if (p->device && !st->device_loss) /* the loss's gradients, written on the host, go up first */
        for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
            int t = m->outputs[k];
            s = tnt__gpu_copy_to_device(at(m, p, p->grad_offset[t]), p->host_out_grad[k],
                                        tensor_bytes(m, t, p->batch), TNT__GPU_COMPUTE);
        }
    for (int i = m->n_nodes - 1; i >= 0 && s == TNT_OK; i--) {
        const tnt__node *n = &m->nodes[i];
        tnt_layer *l = n->layer;
        if (!needs[n->out]) continue;
        const float *ys[TNT_MAX_LAYER_OUTPUTS], *dys[TNT_MAX_LAYER_OUTPUTS];
        bool any = false;
        for (int k = 0; k < tnt__node_n_out(n); k++) {
            ys[k] = act(m, p, n->out + k, x);
            dys[k] = p->grad_offset[n->out + k] == NO_GRAD ? NULL : at(m, p, p->grad_offset[n->out + k]);
            any |= dys[k] != NULL;
        }
        if (!any) continue; /* read by nothing */
        float *dy = (float *)dys[0];
        int64_t numel = p->batch * tnt_shape_numel(m->tensor_shape[n->out]);
        int ok = output_index(m, n->out);
        if (dy && l->rules && tnt__layer_has_activity_rule(l)) {
            if (ok >= 0 && m->fused_output_loss[ok]) { /* dy is w.r.t. the logits, not the output */
                s = tnt__error(TNT_ERR_ARG, "layer \"%s\": activity_regularizer set after compile on an output "
                               "whose loss runs on its logits (set it before compile)", l->name);
                break;
            }
            if (p->device) s = tnt__dev_activity_grad(l, act(m, p, n->out, x), dy, numel, st->activity_grad_scale);
            else tnt__layer_add_activity_grad(l, act(m, p, n->out, x), dy, numel, st->activity_grad_scale);
            if (s != TNT_OK) break;
        }
        if (tnt__node_is_alias(n)) { /* dx is dy, already in place unless it must be added */
            if (p->dx_mode[DX(p, i, 0)] == 2) s = add_into(p, at(m, p, p->grad_offset[n->in[0]]), dy, numel);
            continue;
        }
        const float *xs[TNT_MAX_LAYER_INPUTS];
        float *dxs[TNT_MAX_LAYER_INPUTS];
        for (int k = 0; k < n->n_in; k++) {
            xs[k] = act(m, p, n->in[k], x);
            dxs[k] = p->dx_mode[DX(p, i, k)] ? at(m, p, p->dx_offset[DX(p, i, k)]) : NULL;
        }
        tnt__bwd_args a = {
            .batch = p->batch,
            .x = xs[0],
            .y = ys[0],
            .dy = dy,
            .n_outputs = tnt__node_n_out(n),
            .ys = ys,
            .dys = dys,
            .dx = dxs[0],
            .workspace = workspace(m, p, i),
            .scratch = layer_scratch(m, p),
            .dy_is_preact = ok >= 0 && m->fused_output_loss[ok],
            .sample_offset = st->sample_offset,
            .n_inputs = n->n_in,
            .xs = xs,
            .dxs = dxs,
            .parallel = st->parallel,
            .added_loss_scale = st->activity_grad_scale * (double)p->batch,
        };
        /* a kernel gradient the node computes (comm.h): this rank only stashes its rows */
        tnt__dw_stash stash;
        int dw_kernel = -1;
        if (st->node_dw && n->first_backward && l->n_weights > 0 && l->weights[0].grad &&
            (dw_kernel = tnt__reducer_node_dw_find(st->reducer, l->weights[0].grad - tnt__reducer_grads(st->reducer))) >= 0) {
            stash = (tnt__dw_stash){0};
            tnt__reducer_node_dw_stash(st->reducer, dw_kernel, &stash.x, &stash.ldx, &stash.dpre, &stash.lddpre,
                                       &stash.cap_rows);
            a.dw_stash = &stash;
        }
        double t0 = TNT_TL_BEGIN();
        s = n->first_backward ? layer_backward(l, p, p->layer_plans[i], &a)
                              : backward_shared(m, p, l, p->layer_plans[i], &a);
        TNT_TL_END("backward", l->name, -1, t0);
        if (s == TNT_OK && dw_kernel >= 0) tnt__reducer_node_dw_stashed(st->reducer, dw_kernel, stash.rows);
        if (s != TNT_OK) {
            s = tnt__error_prefix(s, "layer \"%s\" (%s) backward: ", l->name, l->ops->class_name);
            break;
        }
        for (int k = 0; k < n->n_in && s == TNT_OK; k++)
            if (p->dx_mode[DX(p, i, k)] == 2)
                s = add_into(p, at(m, p, p->grad_offset[n->in[k]]), dxs[k],
                             p->batch * tnt_shape_numel(m->tensor_shape[n->in[k]]));
        if (s == TNT_OK && st->reducer && n->grad_end > ready) {
            if (p->device) s = tnt__dev_bucket_ready(m, st->reducer, ready, n->grad_end); /* host-staged */
            else tnt__reducer_ready(st->reducer, n->grad_end);
            ready = n->grad_end;
        }
    }
    /* host-staged: whatever backward did not hand over (gradients of weights no output reaches
     * stay as written) goes down before the reducer's finish_step starts it */
    if (s == TNT_OK && p->device && st->reducer && ready < m->n_params)
        s = tnt__dev_bucket_ready(m, st->reducer, ready, m->n_params);
    if (p->device && st->reducer) { /* the last bucket still in flight (after an error: waited for only) */
        tnt_status f = tnt__dev_bucket_flush(m, st->reducer, s == TNT_OK);
        if (s == TNT_OK) s = f;
    }
    if (needs != needs_stack) free(needs);
    return s;
}
