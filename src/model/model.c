/* model.c: the model's graph (nodes and tensors), Sequential models, the flat parameter and
 * gradient buffers and weight access. Functional graphs are made in graph.c; plans and the forward
 * and backward passes live in plan.c; the summary table in summary.c. */
#include "model/model.h"
#include "model/device.h"
#include "model/window.h"
#include "comm/comm.h"
#include "objectives/loss.h"
#include "objectives/traced_loss.h"
#include "optimizers/optimizer.h"

#include <stdio.h>

static tnt_model *model_new(const char *name, const char *default_name) {
    const char *n = name && name[0] ? name : default_name;
    if (strlen(n) >= TNT_NAME_MAX) {
        tnt__error(TNT_ERR_ARG, "model: name \"%.40s...\" is %zu characters (at most %d)", n, strlen(n),
                   TNT_NAME_MAX - 1);
        return NULL;
    }
    tnt_model *m = tnt__calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->name, sizeof m->name, "%s", n);
    m->seed = 42;
    return m;
}

tnt_model *tnt_sequential(const char *name) {
    tnt_model *m = model_new(name, "sequential");
    if (!m) return NULL;
    m->n_inputs = m->n_outputs = 1;
    if (tnt__model_add_tensor(m, (tnt_shape){0}) < 0) {
        tnt_model_free(m);
        return NULL;
    }
    return m;
}

tnt_model *tnt__functional_new(const char *name) {
    tnt_model *m = model_new(name, "model");
    if (m) m->functional = true;
    return m;
}

/* A layer that outlives this model (shared with a graph or another model) keeps its values. */
static void detach_weights(tnt_layer *l) {
    for (int j = 0; j < l->n_weights; j++) {
        tnt__weight *w = &l->weights[j];
        if (w->value && !w->saved) {
            size_t bytes = (size_t)tnt_shape_numel(w->shape) * sizeof(float);
            w->saved = malloc(bytes ? bytes : 1);
            if (w->saved) memcpy(w->saved, w->value, bytes);
        }
        w->value = w->grad = NULL;
    }
}

/* The layer's weights are views into this model's buffers (not into a later model's). */
static bool owns_values(const tnt_model *m, const tnt_layer *l) {
    for (int j = 0; j < l->n_weights; j++) {
        const float *v = l->weights[j].value;
        uintptr_t a = (uintptr_t)v, p = (uintptr_t)m->params, st = (uintptr_t)m->state;
        if (v && !(a >= p && a < p + (uintptr_t)m->n_params * sizeof(float)) &&
            !(a >= st && a < st + (uintptr_t)m->n_state * sizeof(float)))
            return false;
    }
    return true;
}

void tnt_model_free(tnt_model *m) {
    if (!m) return;
    if (tnt__model_host_weights(m) != TNT_OK) /* layers that outlive the model keep the newest values */
        tnt_log(TNT_LOG_WARNING, "model \"%s\": weights from the GPU: %s", m->name, tnt_last_error());
    tnt__model_dev_free(m);
    if (m->tape_free) m->tape_free(m->tape);
    tnt__model_clear_plans(m);
    tnt__free(m->arena);
    tnt__scopes_free(m); /* first: their shadows' references to the layers */
    for (int i = 0; i < m->n_layers; i++) {
        tnt_layer *l = m->layers[i];
        if (l->refs > 1 && m->weights_ready && owns_values(m, l)) detach_weights(l);
        tnt_layer_free(l);
    }
    for (int i = 0; i < m->n_hidden; i++) tnt_layer_free(m->hidden[i]);
    free(m->layers);
    free(m->hidden);
    free(m->nodes);
    free(m->tensor_shape);
    free(m->tensor_alias);
    free(m->tensor_var);
    tnt__model_drop_window(m); /* the layers took what they keep from it */
    tnt__free(m->params);
    tnt__free(m->grads);
    tnt__free(m->state);
    tnt__free(m->shared_scratch);
    free(m->frozen);
    tnt__reducer_free(m->reducer);
    tnt_optimizer_free(m->optimizer);
    free(m->loss_opts);
    for (int k = 0; k < TNT_MAX_IO; k++) tnt__traced_loss_free(m->traced_loss[k]);
    for (int j = 0; j < TNT_MAX_METRICS; j++) tnt__traced_loss_free(m->traced_metric[j]);
    for (int j = 0; j < TNT_MAX_METRICS; j++) tnt__state_metric_free(m->state_metric[j]);
    free(m);
}

/* ---- graph storage ----------------------------------------------------------------------- */

static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *n = realloc(*arr, (size_t)c * elem);
    if (!n) return false;
    *arr = n;
    *cap = c;
    return true;
}

int tnt__model_add_tensor(tnt_model *m, tnt_shape shape) {
    int cap = m->cap_tensors;
    if (!grow((void **)&m->tensor_shape, &cap, m->n_tensors + 1, sizeof *m->tensor_shape)) goto nomem;
    cap = m->cap_tensors;
    if (!grow((void **)&m->tensor_alias, &cap, m->n_tensors + 1, sizeof *m->tensor_alias)) goto nomem;
    m->cap_tensors = cap;
    m->tensor_shape[m->n_tensors] = shape;
    m->tensor_alias[m->n_tensors] = m->n_tensors;
    free(m->tensor_var); /* analysed again once the inputs are fixed (tnt__model_analyse) */
    m->tensor_var = NULL;
    return m->n_tensors++;
nomem:
    tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory adding a tensor", m->name);
    return -1;
}

tnt_status tnt__model_own_layer(tnt_model *m, tnt_layer *l, bool hidden) {
    tnt_layer ***list = hidden ? &m->hidden : &m->layers;
    int *n = hidden ? &m->n_hidden : &m->n_layers;
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == l) return TNT_OK;
    int cap = hidden ? m->n_hidden : m->cap_layers;
    if (!grow((void **)list, &cap, *n + 1, sizeof **list))
        return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory adding a layer", m->name);
    if (!hidden) m->cap_layers = cap;
    (*list)[(*n)++] = l;
    l->refs++;
    return TNT_OK;
}

bool tnt__layer_has_trainable(const tnt_layer *l) {
    for (int j = 0; j < l->n_weights; j++)
        if (l->weights[j].trainable) return true;
    return false;
}

tnt_status tnt__layer_build(tnt_layer *l, int n_in, const tnt_shape *in, const char *who) {
    char a[96], b[96];
    if (l->built) {
        bool same = n_in == l->n_inputs;
        for (int k = 0; same && k < n_in; k++) same = tnt__shape_equal(in[k], l->in_shapes[k]);
        if (!same)
            return tnt__error(TNT_ERR_SHAPE, "%slayer \"%s\" (%s) was built for %d input(s) of shape %s%s, "
                              "called again on %d of shape %s (a shared layer needs the same input shapes)",
                              who, l->name, l->ops->class_name, l->n_inputs, tnt_shape_str(l->in_shapes[0], a, sizeof a),
                              l->n_inputs > 1 ? ", ..." : "", n_in, tnt_shape_str(in[0], b, sizeof b));
        return TNT_OK;
    }
    if (n_in < 1 || n_in > TNT_MAX_LAYER_INPUTS)
        return tnt__error(TNT_ERR_ARG, "%slayer \"%s\" (%s): called on %d inputs (expected 1..%d)", who, l->name,
                          l->ops->class_name, n_in, TNT_MAX_LAYER_INPUTS);
    tnt_status s;
    if (l->ops->build_multi) s = l->ops->build_multi(l, n_in, in, &l->out_shape);
    else if (n_in != 1)
        s = tnt__error(TNT_ERR_ARG, "layer \"%s\" (%s) takes one input, called on %d", l->name, l->ops->class_name, n_in);
    else s = l->ops->build(l, in[0], &l->out_shape);
    if (s != TNT_OK)
        return tnt__error_prefix(s, "%slayer \"%s\" (%s) with input shape %s: ", who, l->name, l->ops->class_name,
                                 tnt_shape_str(in[0], a, sizeof a));
    l->n_inputs = n_in;
    for (int k = 0; k < n_in; k++) l->in_shapes[k] = in[k];
    l->in_shape = in[0];
    l->out_shapes[0] = l->out_shape;
    l->built = true;
    return TNT_OK;
}

int tnt__model_add_node(tnt_model *m, tnt_layer *l, int n_in, const int *in) {
    tnt_shape shapes[TNT_MAX_LAYER_INPUTS];
    for (int k = 0; k < n_in && k < TNT_MAX_LAYER_INPUTS; k++) shapes[k] = m->tensor_shape[in[k]];
    char who[TNT_NAME_MAX + 32];
    snprintf(who, sizeof who, "model \"%s\": ", m->name);
    if (tnt__layer_build(l, n_in, shapes, who) != TNT_OK) return -1;
    if (!grow((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes)) {
        tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory adding a node", m->name);
        return -1;
    }
    int out = tnt__model_add_tensor(m, l->out_shape);
    if (out < 0) return -1;
    for (int k = 1; k < l->n_outputs; k++) /* the other outputs follow output 0 */
        if (tnt__model_add_tensor(m, l->out_shapes[k]) < 0) return -1;
    tnt__node *n = &m->nodes[m->n_nodes++];
    memset(n, 0, sizeof *n);
    n->layer = l;
    n->n_in = n_in;
    memcpy(n->in, in, (size_t)n_in * sizeof *in);
    n->out = out;
    n->n_out = l->n_outputs;
    if (l->ops->is_view) m->tensor_alias[out] = m->tensor_alias[in[0]];
    return out;
}

static tnt_shape packed_shape(const tnt_model *m, int n, const int *ids) {
    if (n == 1) return m->tensor_shape[ids[0]];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += tnt_shape_numel(m->tensor_shape[ids[i]]);
    return TNT_SHAPE(total);
}

void tnt__model_set_io_shapes(tnt_model *m) {
    m->input_shape = packed_shape(m, m->n_inputs, m->inputs);
    m->output_shape = packed_shape(m, m->n_outputs, m->outputs);
    m->has_input_shape = true;
}

/* ---- Sequential -------------------------------------------------------------------------- */

/* Keras-style automatic name: "dense", then "dense_1", "dense_2", ... unique in the model. */
static void assign_name(tnt_model *m, tnt_layer *l) {
    char base[TNT_NAME_MAX];
    tnt__layer_base_name(l->ops->class_name, base, sizeof base);
    for (int k = 0;; k++) {
        char cand[TNT_NAME_MAX];
        if (k == 0) snprintf(cand, sizeof cand, "%.*s", TNT_NAME_MAX - 1, base);
        else snprintf(cand, sizeof cand, "%.*s_%d", TNT_NAME_MAX - 12, base, k);
        if (!tnt_model_get_layer(m, cand)) {
            memcpy(l->name, cand, sizeof cand);
            l->auto_name = false;
            return;
        }
    }
}

/* Builds the chain from node `from` on; Sequential's error names the layer's index. */
static tnt_status build_chain(tnt_model *m, int from) {
    for (int i = from; i < m->n_nodes; i++) {
        tnt__node *n = &m->nodes[i];
        tnt_layer *l = n->layer;
        char who[TNT_NAME_MAX + 32];
        snprintf(who, sizeof who, "model \"%s\": layer %d ", m->name, i);
        tnt_status s = tnt__layer_build(l, 1, &m->tensor_shape[n->in[0]], who);
        if (s != TNT_OK) return s;
        m->tensor_shape[n->out] = l->out_shape;
    }
    return TNT_OK;
}

tnt_status tnt_model_add(tnt_model *m, tnt_layer *l) {
    if (!l) return tnt__error_prefix(TNT_ERR_ARG, "model_add: layer is NULL (its constructor failed?): ");
    if (l->refs > 0) /* not ours to consume */
        return tnt__error(TNT_ERR_ARG, "model_add: layer \"%s\" already belongs to a model or graph", l->name);
    tnt_status s = TNT_OK;
    if (!m) s = tnt__error(TNT_ERR_ARG, "model_add: model is NULL");
    else if (m->functional) s = tnt__error(TNT_ERR_STATE, "model \"%s\": tnt_model_add is for Sequential models", m->name);
    else if (m->compiled || m->weights_ready)
        s = tnt__error(TNT_ERR_STATE, "model \"%s\": cannot add layers after compile or first use", m->name);
    else if (l->n_outputs > 1)
        s = tnt__error(TNT_ERR_ARG, "model \"%s\": layer \"%s\" (%s) has %d outputs (return_state or merge_mode None); "
                       "a Sequential model's layers have one (use a functional model)", m->name, l->name,
                       l->ops->class_name, l->n_outputs);
    else if (l->auto_name) assign_name(m, l);
    else if (tnt_model_get_layer(m, l->name))
        s = tnt__error(TNT_ERR_ARG, "model \"%s\": a layer named \"%s\" already exists (names must be unique)",
                       m->name, l->name);
    if (s == TNT_OK && tnt__is_input_layer(l)) {
        if (m->n_nodes > 0) s = tnt__error(TNT_ERR_ARG, "model \"%s\": InputLayer \"%s\" must be the first layer", m->name, l->name);
        else {
            m->has_input_shape = true;
            m->input_decl[0] = tnt__input_layer_shape(l);
            m->tensor_shape[0] = tnt__probe_shape(m->input_decl[0]);
        }
    }
    if (s != TNT_OK) {
        tnt_layer_free(l);
        return s;
    }
    int in = m->n_tensors - 1;
    int out = -1;
    if (!grow((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes) ||
        (out = tnt__model_add_tensor(m, (tnt_shape){0})) < 0 || tnt__model_own_layer(m, l, false) != TNT_OK) {
        if (out >= 0) m->n_tensors--;
        tnt_layer_free(l);
        return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory adding a layer", m->name);
    }
    l->refs = 1; /* the user's reference is consumed: the model is the only owner */
    tnt__node *n = &m->nodes[m->n_nodes++];
    memset(n, 0, sizeof *n);
    *n = (tnt__node){.layer = l, .n_in = 1, .in = {in}, .out = out};
    if (l->ops->is_view) m->tensor_alias[out] = m->tensor_alias[in];
    m->inputs[0] = 0;
    m->outputs[0] = out;
    if (m->has_input_shape) {
        if ((s = build_chain(m, m->n_nodes - 1)) != TNT_OK) {
            m->n_nodes--;
            m->n_tensors--;
            m->n_layers--;
            m->outputs[0] = out - 1;
            tnt_layer_free(l);
            return s;
        }
        tnt__model_set_io_shapes(m);
        return tnt__model_analyse(m);
    }
    return TNT_OK;
}

tnt_status tnt_model_build(tnt_model *m, tnt_shape input_shape) {
    if (!m) return tnt__error(TNT_ERR_ARG, "model_build: model is NULL");
    if (m->has_input_shape) {
        if (tnt__shape_equal(input_shape, m->input_shape)) return TNT_OK;
        char a[96], b[96];
        return tnt__error(TNT_ERR_SHAPE, "model \"%s\": already built for input %s, got %s", m->name,
                          tnt_shape_str(m->input_shape, a, sizeof a), tnt_shape_str(input_shape, b, sizeof b));
    }
    char b[96];
    for (int i = 0; i < input_shape.ndim; i++)
        if (input_shape.dim[i] == 0 || input_shape.dim[i] < TNT_DIM_NONE)
            return tnt__error(TNT_ERR_SHAPE, "model \"%s\": input shape %s: dimensions must be > 0 (or TNT_DIM_NONE)",
                              m->name, tnt_shape_str(input_shape, b, sizeof b));
    if (input_shape.ndim < 1) return tnt__error(TNT_ERR_SHAPE, "model \"%s\": input shape has no dimensions", m->name);
    m->input_decl[0] = input_shape;
    m->tensor_shape[0] = tnt__probe_shape(input_shape);
    tnt_status s = build_chain(m, 0);
    if (s != TNT_OK) return s;
    tnt__model_set_io_shapes(m);
    return tnt__model_analyse(m);
}

/* ---- activation folding ------------------------------------------------------------------ */

static int calls_of(const tnt_model *m, const tnt_layer *l) {
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++) n += m->nodes[i].layer == l;
    return n;
}

void tnt__model_fold_activations(tnt_model *m) {
    for (int i = 0; i < m->n_nodes; i++) {
        tnt__node *a = &m->nodes[i];
        int t = a->in[0], readers = 0, producer = -1;
        if (strcmp(a->layer->ops->class_name, "Activation") || a->layer->activation != TNT_ACT_RELU ||
            calls_of(m, a->layer) != 1)
            continue;
        for (int k = 0; k < m->n_nodes; k++) {
            for (int j = 0; j < m->nodes[k].n_in; j++) readers += m->nodes[k].in[j] == t;
            if (m->nodes[k].out == t) producer = k;
        }
        for (int k = 0; k < m->n_outputs; k++) readers += m->outputs[k] == t;
        if (producer < 0 || readers != 1) continue;
        tnt_layer *host = m->nodes[producer].layer;
        if (!host->ops->folds_relu || host->activation != TNT_ACT_LINEAR || calls_of(m, host) != 1) continue;
        host->activation = TNT_ACT_RELU;
        a->folded = true;
    }
    for (int i = 0; i < m->n_nodes; i++) { /* storage sharing through the folded nodes */
        const tnt__node *n = &m->nodes[i];
        m->tensor_alias[n->out] = tnt__node_is_alias(n) ? m->tensor_alias[n->in[0]] : n->out;
    }
}

/* ---- weights ----------------------------------------------------------------------------- */

/* Moves every view of a weight (its value, or gradient) in [old, old + n) to the same place in to. */
static void rebase_views(tnt_model *m, float *old, float *to, bool grad) {
    for (int i = 0; i < m->n_nodes; i++) { /* a layer called twice is seen twice: moved once */
        tnt_layer *l = m->nodes[i].layer;
        for (int j = 0; j < l->n_weights; j++) {
            float **v = grad ? &l->weights[j].grad : &l->weights[j].value;
            if (*v && *v >= old && *v < old + m->n_params) *v = to + (*v - old);
        }
    }
}

void tnt__model_bind_grads(tnt_model *m, float *grads) {
    if (grads == m->grads) return;
    rebase_views(m, m->grads, grads, true);
    m->grads = grads;
}

void tnt__model_bind_params(tnt_model *m, float *params) {
    if (params == m->params) return;
    rebase_views(m, m->params, params, false);
    m->params = params;
}

/* Allocates the flat buffers and initializes the weights. Trainable weights go to the parameter
 * buffer, which has a gradient twin, the optimizer's slots and the allreduce; non-trainable ones
 * (BatchNormalization's moving statistics) to the state buffer, which has none of these. Both
 * are laid out in the order backward completes the layers: a layer called several times is
 * complete after the backward of its first call. */
tnt_status tnt_model_batch_outputs(const tnt_model *m, const float **data, tnt_shape *shape) {
    if (!m || !data || !shape) return tnt__error(TNT_ERR_ARG, "tnt_model_batch_outputs: NULL argument");
    if (!m->batch_outputs)
        return tnt__error(TNT_ERR_STATE, "tnt_model_batch_outputs: model \"%s\" is not in on_predict_batch_end",
                          m->name);
    *data = m->batch_outputs;
    *shape = tnt__shape_with_batch(m->batch_outputs_n, m->output_shape);
    return TNT_OK;
}

tnt_status tnt_model_set_seed(tnt_model *m, uint64_t seed) {
    if (!m) return tnt__error(TNT_ERR_ARG, "tnt_model_set_seed: model is NULL");
    m->seed = seed ? seed : 42;
    return TNT_OK;
}

tnt_status tnt__model_setup_weights(tnt_model *m) {
    if (m->weights_ready) return TNT_OK;
    if (!m->has_input_shape)
        return tnt__error(TNT_ERR_STATE, "model \"%s\": input shape unknown (add an InputLayer or call tnt_model_build)", m->name);
    if (m->n_nodes == 0) return tnt__error(TNT_ERR_STATE, "model \"%s\": has no layers", m->name);
    tnt__model_fold_activations(m);
    int64_t trainable = 0, state = 0, max_shared = 0;
    int *calls = tnt__calloc((size_t)m->n_layers + 1, sizeof *calls);
    if (!calls) return TNT_ERR_NOMEM;
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i]->seed = tnt__hash64(m->seed * 1000003ull + (uint64_t)i);
        int64_t mine = 0;
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            const tnt__weight *w = &m->layers[i]->weights[j];
            int64_t k = tnt_shape_numel(w->shape);
            *(w->trainable ? &trainable : &state) += k;
            if (w->trainable) mine += k;
        }
        for (int n = 0; n < m->n_nodes; n++) calls[i] += m->nodes[n].layer == m->layers[i];
        if (calls[i] > 1) max_shared = TNT_MAX(max_shared, mine);
    }
    free(calls);
    m->params = tnt__alloc((size_t)trainable * sizeof(float));
    m->grads = tnt__alloc((size_t)trainable * sizeof(float));
    m->state = tnt__alloc((size_t)state * sizeof(float));
    m->shared_scratch = max_shared ? tnt__alloc((size_t)max_shared * sizeof(float)) : NULL;
    if (!m->params || !m->grads || !m->state || (max_shared && !m->shared_scratch)) {
        tnt__free(m->params);
        tnt__free(m->grads);
        tnt__free(m->state);
        tnt__free(m->shared_scratch);
        m->params = m->grads = m->state = m->shared_scratch = NULL;
        return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory for %lld parameters", m->name, (long long)trainable);
    }
    /* a frozen layer's gradients that backward does not reach are reduced as they are: zeros */
    memset(m->grads, 0, (size_t)trainable * sizeof(float));
    int64_t off = 0, state_off = 0;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        tnt__node *n = &m->nodes[i];
        tnt_layer *l = n->layer;
        n->first_backward = true;
        n->last_backward = true;
        for (int k = i + 1; k < m->n_nodes; k++)
            if (m->nodes[k].layer == l) n->first_backward = false;
        for (int k = 0; k < i; k++)
            if (m->nodes[k].layer == l) n->last_backward = false;
        if (n->last_backward) {
            for (int j = 0; j < l->n_weights; j++) {
                tnt__weight *w = &l->weights[j];
                int64_t k = tnt_shape_numel(w->shape);
                float *old = w->value ? w->value : w->saved;
                if (w->trainable) {
                    w->value = m->params + off;
                    w->grad = m->grads + off;
                    off += k;
                } else {
                    w->value = m->state + state_off;
                    w->grad = NULL;
                    state_off += k;
                }
                if (old) memcpy(w->value, old, (size_t)k * sizeof(float)); /* came from another model */
                else tnt__weight_init(w, tnt__hash64(l->seed + 7919ull * (uint64_t)(j + 1)));
                free(w->saved);
                w->saved = NULL;
            }
        }
        n->grad_end = off;
    }
    m->n_params = trainable;
    m->n_state = state;
    m->weights_ready = true;
    return TNT_OK;
}

int64_t tnt_model_count_params(const tnt_model *m) {
    if (!m) return 0;
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++)
            total += tnt_shape_numel(m->layers[i]->weights[j].shape);
    return total;
}

/* The declared shapes: -1 in the variable dimensions; a packed shape of several inputs (outputs)
 * with any is (-1,). */
static tnt_shape packed_decl(const tnt_model *m, int n, const int *ids, tnt_shape packed) {
    if (!m->variable) return packed;
    if (n == 1) return tnt__model_tensor_decl(m, ids[0]);
    for (int k = 0; k < n; k++) {
        tnt_shape d = tnt__model_tensor_decl(m, ids[k]);
        for (int i = 0; i < d.ndim; i++)
            if (d.dim[i] < 0) return TNT_SHAPE(-1);
    }
    return packed;
}
tnt_shape tnt_model_input_shape(const tnt_model *m) {
    return m ? packed_decl(m, m->n_inputs, m->inputs, m->input_shape) : (tnt_shape){0};
}
tnt_shape tnt_model_output_shape(const tnt_model *m) {
    return m ? packed_decl(m, m->n_outputs, m->outputs, m->output_shape) : (tnt_shape){0};
}
int tnt_model_num_inputs(const tnt_model *m) { return m ? m->n_inputs : 0; }
int tnt_model_num_outputs(const tnt_model *m) { return m ? m->n_outputs : 0; }
tnt_shape tnt_model_input_shape_at(const tnt_model *m, int i) {
    return m && m->has_input_shape && i >= 0 && i < m->n_inputs ? tnt__model_tensor_decl(m, m->inputs[i]) : (tnt_shape){0};
}
tnt_shape tnt_model_output_shape_at(const tnt_model *m, int i) {
    return m && m->has_input_shape && i >= 0 && i < m->n_outputs ? tnt__model_tensor_decl(m, m->outputs[i]) : (tnt_shape){0};
}
void tnt_layer_reset_states(tnt_layer *l) {
    if (l && l->ops->reset_states) l->ops->reset_states(l);
}

void tnt_model_reset_states(tnt_model *m) {
    for (int i = 0; m && i < m->n_nodes; i++) tnt_layer_reset_states(m->nodes[i].layer);
}

tnt_shape tnt_model_output_shape_now(const tnt_model *m, int i) {
    return m && m->has_input_shape && i >= 0 && i < m->n_outputs ? m->tensor_shape[m->outputs[i]] : (tnt_shape){0};
}
const char *tnt_model_io_name(const tnt_model *m, bool output, int i) {
    if (!m || i < 0 || i >= (output ? m->n_outputs : m->n_inputs)) return NULL;
    const char *key = output ? m->output_keys[i] : m->input_keys[i];
    if (*key) return key;
    int t = output ? m->outputs[i] : m->inputs[i];
    int k, p = output ? tnt__tensor_producer(m, t, &k) : -1;
    if (p >= 0) return m->nodes[p].layer->name; /* the layer making output i */
    for (int n = 0; n < m->n_nodes && !output; n++) /* the InputLayer reading input i */
        if (m->nodes[n].in[0] == t && tnt__is_input_layer(m->nodes[n].layer)) return m->nodes[n].layer->name;
    return output ? "" : "input";
}

int tnt_model_num_layers(const tnt_model *m) { return m ? m->n_layers : 0; }
tnt_layer *tnt_model_layer(const tnt_model *m, int i) {
    return m && i >= 0 && i < m->n_layers ? m->layers[i] : NULL;
}
tnt_layer *tnt_model_get_layer(const tnt_model *m, const char *name) {
    if (!m || !name) return NULL;
    /* names are unique per scope: the model's own layer first, then one of a nested model */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < m->n_layers; i++)
            if (!strcmp(m->layers[i]->name, name) && (pass || tnt__layer_scope(m, m->layers[i]) < 0)) return m->layers[i];
    return NULL;
}
tnt_optimizer *tnt_model_optimizer(const tnt_model *m) { return m ? m->optimizer : NULL; }

tnt_status tnt_model_compile_opts(const tnt_model *m, tnt_compile_opts *opts, char *metrics, size_t size) {
    if (!m || !opts || !metrics || size == 0) return tnt__error(TNT_ERR_ARG, "model_compile_opts: NULL argument");
    if (!m->compiled) return tnt__error(TNT_ERR_STATE, "model \"%s\" is not compiled", m->name);
    *opts = (tnt_compile_opts){.optimizer = m->optimizer, .loss = m->loss, .from_logits = m->from_logits,
                               .metrics = metrics, .seed = m->seed,
                               .output_losses = m->mixed_losses ? m->output_loss : NULL,
                               .n_output_losses = m->mixed_losses ? m->n_outputs : 0};
    if (m->loss_opts) {
        opts->label_smoothing = m->loss_opts->label_smoothing;
        opts->has_ignore_class = m->loss_opts->has_ignore_class;
        opts->ignore_class = m->loss_opts->ignore_class;
    }
    if (m->has_loss_weights) opts->loss_weights = m->loss_weights, opts->n_loss_weights = m->n_outputs;
    size_t len = 0;
    metrics[0] = '\0';
    for (int k = 0; k < m->n_metrics; k++) {
        if (m->traced_metric[k] || m->state_metric[k]) continue; /* the user's: compile cannot read it back by name */
        int n = snprintf(metrics + len, size - len, "%s%s%s", len ? "," : "", m->metrics[k].weighted ? "~" : "",
                         m->metrics[k].name);
        if (n < 0 || (size_t)n >= size - len)
            return tnt__error(TNT_ERR_ARG, "model_compile_opts: the metric names need more than %zu bytes", size);
        len += (size_t)n;
    }
    return TNT_OK;
}
int64_t tnt__model_output_size(const tnt_model *m) { return tnt_shape_numel(m->output_shape); }
static const char *output_layer_name(const tnt_model *m, int k) {
    int index, p = tnt__tensor_producer(m, m->outputs[k], &index);
    return p >= 0 ? m->nodes[p].layer->name : "";
}

/* Keras's Functional._set_output_names: outputs of one layer (its states with return_state)
 * after the first become "<layer>_1", "<layer>_2", ..., skipping names already taken. */
const char *tnt__model_output_name(const tnt_model *m, int k) {
    static _Thread_local char names[TNT_MAX_IO][TNT_NAME_MAX + 8];
    int count[TNT_MAX_IO] = {0}; /* per output j: the suffixes its layer name has used */
    for (int j = 0; j <= k && j < TNT_MAX_IO; j++) {
        const char *base = output_layer_name(m, j);
        int first = j; /* the first output of the same layer name keeps the count */
        for (int i = 0; i < j; i++)
            if (!strcmp(output_layer_name(m, i), base)) {
                first = i;
                break;
            }
        snprintf(names[j], sizeof names[j], "%s", base);
        for (bool taken = true; taken;) {
            taken = false;
            for (int i = 0; i < j && !taken; i++) taken = !strcmp(names[i], names[j]);
            if (!taken) break;
            int n = count[first] ? count[first] : 1;
            count[first] = n + 1;
            snprintf(names[j], sizeof names[j], "%.*s_%d", TNT_NAME_MAX - 1, base, n);
        }
    }
    return names[k];
}

int tnt__tensor_producer(const tnt_model *m, int t, int *index) {
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const tnt__node *n = &m->nodes[i];
        if (t >= n->out && t < n->out + tnt__node_n_out(n)) {
            if (index) *index = t - n->out;
            return i;
        }
    }
    return -1;
}

int tnt_model_num_weights(const tnt_model *m) {
    int n = 0;
    for (int i = 0; m && i < m->n_layers; i++) n += m->layers[i]->n_weights;
    return n;
}

static tnt__weight *weight_at(const tnt_model *m, int index, tnt_layer **layer) {
    for (int i = 0; i < m->n_layers; i++) {
        if (index < m->layers[i]->n_weights) {
            *layer = m->layers[i];
            return &m->layers[i]->weights[index];
        }
        index -= m->layers[i]->n_weights;
    }
    return NULL;
}

tnt_status tnt_model_weight(tnt_model *m, int i, const char **name, tnt_shape *shape, float **data) {
    if (!m) return tnt__error(TNT_ERR_ARG, "model_weight: model is NULL");
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    tnt_layer *l;
    tnt__weight *w = i >= 0 ? weight_at(m, i, &l) : NULL;
    if (!w)
        return tnt__error(TNT_ERR_ARG, "model \"%s\": weight index %d (expected 0..%d)", m->name, i,
                          tnt_model_num_weights(m) - 1);
    if (data && (s = tnt__model_host_written(m)) != TNT_OK) return s; /* a writable view of the host copy */
    static _Thread_local char full[2 * TNT_NAME_MAX + 8];
    snprintf(full, sizeof full, "%s/%s:0", l->name, w->name);
    if (name) *name = full;
    if (shape) *shape = w->shape;
    if (data) *data = w->value;
    return TNT_OK;
}

/* Copies all weights in Keras order to buf (to_model false) or from it. */
static tnt_status copy_weights(tnt_model *m, float *buf, int64_t n, bool to_model, const char *who) {
    if (!m || !buf) return tnt__error(TNT_ERR_ARG, "%s: model or buffer is NULL", who);
    tnt_status s = tnt__model_setup_weights(m);
    if (s != TNT_OK) return s;
    if (n != m->n_params + m->n_state)
        return tnt__error(TNT_ERR_ARG, "%s: buffer of %lld floats, model \"%s\" has %lld", who, (long long)n,
                          m->name, (long long)(m->n_params + m->n_state));
    /* the host copy: brought up to date from the device, and uploaded again after a write */
    if ((s = to_model ? tnt__model_host_written(m) : tnt__model_host_weights(m)) != TNT_OK) return s;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_weights; j++) {
            tnt__weight *w = &m->layers[i]->weights[j];
            size_t k = (size_t)tnt_shape_numel(w->shape);
            if (to_model) memcpy(w->value, buf, k * sizeof(float));
            else memcpy(buf, w->value, k * sizeof(float));
            buf += k;
        }
    return TNT_OK;
}

static int by_begin(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

uint64_t tnt__model_frozen_signature(const tnt_model *m) {
    uint64_t h = tnt__fnv1a(0, &m->n_layers, sizeof m->n_layers);
    for (int i = 0; i < m->n_layers; i++) h = tnt__fnv1a(h, &m->layers[i]->frozen, sizeof m->layers[i]->frozen);
    return h;
}

tnt_status tnt__model_note_frozen(tnt_model *m) {
    uint64_t signature = tnt__model_frozen_signature(m);
    if (m->frozen && signature == m->frozen_noted) return TNT_OK;
    int n = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++) n += !!m->layers[i]->weights[j].grad;
    int64_t *f = realloc(m->frozen, (size_t)(n ? n : 1) * 2 * sizeof *f);
    if (!f) return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory", m->name);
    m->frozen = f;
    int k = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; m->layers[i]->frozen && j < m->layers[i]->n_weights; j++) {
            const tnt__weight *w = &m->layers[i]->weights[j];
            if (!w->grad) continue;
            f[2 * k] = w->grad - m->grads;
            f[2 * k + 1] = f[2 * k] + tnt_shape_numel(w->shape);
            k++;
        }
    qsort(f, (size_t)k, 2 * sizeof *f, by_begin);
    int merged = 0;
    for (int i = 0; i < k; i++)
        if (merged && f[2 * i] <= f[2 * merged - 1]) /* adjacent */
            f[2 * merged - 1] = TNT_MAX(f[2 * merged - 1], f[2 * i + 1]);
        else
            f[2 * merged] = f[2 * i], f[2 * merged + 1] = f[2 * i + 1], merged++;
    m->n_frozen = merged;
    m->frozen_noted = signature;
    return TNT_OK;
}

tnt_status tnt_model_copy_weights(tnt_model *dst, const tnt_model *src, int n, const int *src_index,
                                  const int *dst_index) {
    const char *who = "copy_weights";
    if (!dst || !src || n < 0 || (n && (!src_index || !dst_index)))
        return tnt__error(TNT_ERR_ARG, "%s: NULL model or index, or n %d (expected >= 0)", who, n);
    tnt_status s = tnt__model_setup_weights(dst);
    if (s == TNT_OK) s = tnt__model_setup_weights((tnt_model *)src);
    if (s == TNT_OK) s = tnt__model_host_weights((tnt_model *)src); /* the device's newer weights first */
    if (s != TNT_OK) return s;
    tnt_layer *ls, *ld;
    for (int k = 0; k < n; k++) { /* everything checked before anything is written */
        const tnt__weight *a = src_index[k] >= 0 ? weight_at(src, src_index[k], &ls) : NULL;
        const tnt__weight *b = dst_index[k] >= 0 ? weight_at(dst, dst_index[k], &ld) : NULL;
        if (!a || !b)
            return tnt__error(TNT_ERR_ARG, "%s: pair %d: weight %d of model \"%s\" (expected 0..%d) into weight %d of "
                              "\"%s\" (expected 0..%d)", who, k, src_index[k], src->name, tnt_model_num_weights(src) - 1,
                              dst_index[k], dst->name, tnt_model_num_weights(dst) - 1);
        if (!tnt__shape_equal(a->shape, b->shape)) {
            char sa[128], sb[128];
            return tnt__error(TNT_ERR_SHAPE, "%s: %s/%s of model \"%s\" has shape %s, %s/%s of \"%s\" has %s", who,
                              ls->name, a->name, src->name, tnt_shape_str(a->shape, sa, sizeof sa), ld->name, b->name,
                              dst->name, tnt_shape_str(b->shape, sb, sizeof sb));
        }
    }
    if ((s = tnt__model_host_written(dst)) != TNT_OK) return s; /* its own copy, uploaded before a device pass */
    for (int k = 0; k < n; k++) {
        const tnt__weight *a = weight_at(src, src_index[k], &ls);
        tnt__weight *b = weight_at(dst, dst_index[k], &ld);
        memmove(b->value, a->value, (size_t)tnt_shape_numel(a->shape) * sizeof(float));
    }
    return TNT_OK;
}

tnt_status tnt_get_weights(const tnt_model *m, float *buf, int64_t n) {
    return copy_weights((tnt_model *)m, buf, n, false, "get_weights");
}

tnt_status tnt_set_weights(tnt_model *m, const float *buf, int64_t n) {
    tnt_status s = copy_weights(m, (float *)buf, n, true, "set_weights");
    if (s == TNT_OK) m->weights_synced = false; /* the master's weights are broadcast at the next use */
    return s;
}
