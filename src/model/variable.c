/* variable.c: models with variable (None) input dimensions, as Keras builds them for fully
 * convolutional and sequence models (batch_input_shape [null, null, null, 3]).
 *
 * Layers here are built for concrete shapes (oneDNN primitives need them), so a model with None
 * dimensions is made for a stand-in size, and re-instantiated for each input shape the data
 * brings: every layer is built again for the new shapes, keeping its weights (their shapes cannot
 * depend on a None dimension: Keras makes them before it knows it). Plans are then made per batch
 * size and input shape (plan.c). A second stand-in, when the model is made, tells which
 * dimensions of each tensor follow the None ones (summary, to_json, the public shape queries),
 * and proves that no weight shape depends on them. The first use with real data fixes the
 * shapes; a later one with other shapes instantiates again (a few microseconds of shape
 * inference per layer, and new plans the first time a shape is seen). */
#include "model/model.h"

#include <stdio.h>

static _Thread_local int64_t probe = 0;

int64_t tnt__probe_dim(void) { return probe > 0 ? probe : 64; }
void tnt__probe_set(int64_t v) { probe = v; }

static tnt_shape with_size(tnt_shape decl, int64_t v) {
    for (int i = 0; i < decl.ndim; i++)
        if (decl.dim[i] < 0) decl.dim[i] = v;
    return decl;
}

tnt_shape tnt__probe_shape(tnt_shape decl) { return with_size(decl, tnt__probe_dim()); }

static bool has_none(tnt_shape s) {
    for (int i = 0; i < s.ndim; i++)
        if (s.dim[i] < 0) return true;
    return false;
}

/* ---- rebuilding the layers for other input shapes ---------------------------------------- */

/* Builds l again for in[]; its weights keep their values and places, and must keep their
 * shapes. */
static tnt_status rebuild_layer(tnt_layer *l, int n_in, const tnt_shape *in, const char *who) {
    tnt__weight old[TNT_MAX_LAYER_WEIGHTS];
    int n_old = l->n_weights;
    memcpy(old, l->weights, sizeof old);
    l->built = false;
    l->n_weights = 0;
    tnt_status s = tnt__layer_build(l, n_in, in, who);
    bool same = s == TNT_OK && l->n_weights == n_old;
    for (int j = 0; same && j < n_old; j++)
        same = !strcmp(l->weights[j].name, old[j].name) && tnt__shape_equal(l->weights[j].shape, old[j].shape) &&
               l->weights[j].trainable == old[j].trainable;
    if (s == TNT_OK && !same) {
        char a[96], b[96], c[96];
        int j = 0;
        while (j < n_old && j < l->n_weights && tnt__shape_equal(l->weights[j].shape, old[j].shape)) j++;
        if (j < n_old && j < l->n_weights)
            s = tnt__error(TNT_ERR_SHAPE, "%slayer \"%s\" (%s): its weight %s has shape %s for input shape %s but %s for "
                           "another: a weight cannot depend on a variable (None) input dimension", who, l->name,
                           l->ops->class_name, old[j].name, tnt_shape_str(l->weights[j].shape, a, sizeof a),
                           tnt_shape_str(in[0], b, sizeof b), tnt_shape_str(old[j].shape, c, sizeof c));
        else
            s = tnt__error(TNT_ERR_SHAPE, "%slayer \"%s\" (%s): %d weight(s) for input shape %s but %d for another: "
                           "a weight cannot depend on a variable (None) input dimension", who, l->name,
                           l->ops->class_name, l->n_weights, tnt_shape_str(in[0], b, sizeof b), n_old);
    }
    /* the weights stay where they were (views into the model's buffers, and into its device
     * buffers while it trains on a GPU); a failed build is undone by the caller's rebuild for
     * the old shapes */
    l->n_weights = n_old;
    for (int j = 0; j < n_old; j++) {
        l->weights[j].value = old[j].value;
        l->weights[j].grad = old[j].grad;
        l->weights[j].saved = old[j].saved;
        l->weights[j].d_value = old[j].d_value;
        l->weights[j].d_grad = old[j].d_grad;
        if (s != TNT_OK) l->weights[j] = old[j];
    }
    return s;
}

/* The layers and tensors of m for input shapes in[]; any_shape: the InputLayers pass any shape
 * through (a nested model called on other shapes). */
static tnt_status rebuild_ex(tnt_model *m, const tnt_shape *in, const char *who, bool any_shape) {
    for (int k = 0; k < m->n_inputs; k++) m->tensor_shape[m->inputs[k]] = in[k];
    for (int i = 0; i < m->n_nodes; i++) {
        tnt__node *n = &m->nodes[i];
        tnt_shape shapes[TNT_MAX_LAYER_INPUTS];
        for (int k = 0; k < n->n_in; k++) shapes[k] = m->tensor_shape[n->in[k]];
        if (any_shape && tnt__is_input_layer(n->layer)) {
            m->tensor_shape[n->out] = shapes[0];
            continue;
        }
        bool first = true; /* a shared layer is built at its first call, checked at the others */
        for (int j = 0; j < i && first; j++) first = m->nodes[j].layer != n->layer;
        tnt_status s = first ? rebuild_layer(n->layer, n->n_in, shapes, who)
                             : tnt__layer_build(n->layer, n->n_in, shapes, who);
        if (s != TNT_OK) return s;
        for (int k = 0; k < tnt__node_n_out(n); k++) m->tensor_shape[n->out + k] = n->layer->out_shapes[k];
    }
    return TNT_OK;
}

static tnt_status rebuild(tnt_model *m, const tnt_shape *in, const char *who) { return rebuild_ex(m, in, who, false); }

static void set_packed(tnt_model *m) {
    bool had = m->has_input_shape;
    tnt__model_set_io_shapes(m);
    m->has_input_shape = had || m->has_input_shape;
}

/* Each layer is built for the shapes of m's tensors (a layer shared with another model may have
 * been built for that model's since). */
static bool layers_match(const tnt_model *m) {
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (!tnt__shape_equal(n->layer->in_shapes[k], m->tensor_shape[n->in[k]])) return false;
    }
    return true;
}

tnt_status tnt__model_instantiate(tnt_model *m, const tnt_shape *in, const char *who) {
    char a[96], b[96], w[TNT_NAME_MAX + 48];
    bool same = layers_match(m);
    for (int k = 0; k < m->n_inputs; k++) {
        tnt_shape d = m->input_decl[k];
        bool fits = in[k].ndim == d.ndim;
        for (int i = 0; fits && i < d.ndim; i++) fits = in[k].dim[i] > 0 && (d.dim[i] < 0 || d.dim[i] == in[k].dim[i]);
        if (!fits)
            return tnt__error(TNT_ERR_SHAPE, "%s: input %d of model \"%s\" has shape %s, the model expects %s (None: "
                              "any size)", who, k, m->name, tnt_shape_str(in[k], a, sizeof a), tnt_shape_str(d, b, sizeof b));
        same &= tnt__shape_equal(in[k], m->tensor_shape[m->inputs[k]]);
    }
    if (same) {
        m->inst_known = true;
        return TNT_OK;
    }
    tnt_shape old[TNT_MAX_IO];
    for (int k = 0; k < m->n_inputs; k++) old[k] = m->tensor_shape[m->inputs[k]];
    snprintf(w, sizeof w, "%s: model \"%s\": ", who, m->name);
    tnt_status s = rebuild(m, in, w);
    if (s != TNT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tnt_last_error());
        if (rebuild(m, old, w) != TNT_OK) /* built for these before: cannot fail */
            tnt_log(TNT_LOG_ERROR, "model \"%s\": could not restore its previous input shapes", m->name);
        return tnt__error(s, "%s (input shape %s)", msg, tnt_shape_str(in[0], a, sizeof a));
    }
    set_packed(m);
    m->inst_known = true;
    return TNT_OK;
}

tnt_status tnt__model_sync_layers(tnt_model *m, const char *who) {
    if (layers_match(m)) return TNT_OK;
    tnt_shape cur[TNT_MAX_IO];
    char w[TNT_NAME_MAX + 48];
    for (int k = 0; k < m->n_inputs; k++) cur[k] = m->tensor_shape[m->inputs[k]];
    snprintf(w, sizeof w, "%s: model \"%s\": ", who, m->name);
    return rebuild(m, cur, w);
}

tnt_status tnt__model_rebuild_for(tnt_model *m, const tnt_shape *in, const char *who) {
    tnt_shape old[TNT_MAX_IO];
    for (int k = 0; k < m->n_inputs; k++) old[k] = m->tensor_shape[m->inputs[k]];
    tnt_status s = rebuild_ex(m, in, who, true);
    if (s != TNT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tnt_last_error());
        if (rebuild(m, old, who) != TNT_OK)
            tnt_log(TNT_LOG_ERROR, "model \"%s\": could not restore its previous input shapes", m->name);
        return tnt__error(s, "%s", msg);
    }
    return TNT_OK;
}

/* ---- which dimensions follow the None ones ------------------------------------------------- */

tnt_status tnt__model_analyse(tnt_model *m) {
    free(m->tensor_var);
    m->tensor_var = NULL;
    m->variable = false;
    for (int k = 0; k < m->n_inputs; k++) {
        int t = m->inputs[k];
        for (int i = 0; i < m->n_nodes; i++) /* a Functional input's InputLayer declares it */
            if (m->nodes[i].in[0] == t && tnt__is_input_layer(m->nodes[i].layer))
                m->input_decl[k] = tnt__input_layer_shape(m->nodes[i].layer);
        if (!has_none(m->input_decl[k])) m->input_decl[k] = m->tensor_shape[t];
        m->variable |= has_none(m->input_decl[k]);
    }
    if (!m->variable) return TNT_OK;
    int T = m->n_tensors;
    tnt_shape *first = tnt__calloc((size_t)T, sizeof *first), cur[TNT_MAX_IO], other[TNT_MAX_IO];
    if (!first || !(m->tensor_var = tnt__calloc((size_t)T, 1))) {
        free(first);
        return TNT_ERR_NOMEM;
    }
    memcpy(first, m->tensor_shape, (size_t)T * sizeof *first);
    for (int k = 0; k < m->n_inputs; k++) cur[k] = m->tensor_shape[m->inputs[k]];
    /* a second stand-in: larger ones when a smaller one does not build (valid convolutions) */
    int64_t p = tnt__probe_dim();
    const int64_t tries[] = {p + p / 2, 2 * p, 4 * p};
    tnt_status s = TNT_ERR_SHAPE;
    char who[TNT_NAME_MAX + 48];
    snprintf(who, sizeof who, "model \"%s\": ", m->name);
    for (int r = 0; r < 3 && s != TNT_OK; r++) {
        for (int k = 0; k < m->n_inputs; k++) other[k] = with_size(m->input_decl[k], tries[r]);
        s = rebuild(m, other, who);
        if (s != TNT_OK && strstr(tnt_last_error(), "cannot depend on a variable")) break;
    }
    for (int t = 0; s == TNT_OK && t < T; t++) {
        if (m->tensor_shape[t].ndim != first[t].ndim) {
            s = tnt__error(TNT_ERR_SHAPE, "model \"%s\": tensor %d changes rank with the variable input size", m->name, t);
            break;
        }
        for (int d = 0; d < first[t].ndim && d < 8; d++)
            if (m->tensor_shape[t].dim[d] != first[t].dim[d]) m->tensor_var[t] |= (uint8_t)(1u << d);
    }
    if (s != TNT_OK) tnt__error_prefix(s, "variable (None) input dimensions: ");
    tnt_status back = rebuild(m, cur, who);
    free(first);
    if (s == TNT_OK) s = back;
    if (s != TNT_OK) {
        free(m->tensor_var);
        m->tensor_var = NULL;
    }
    m->inst_known = false;
    set_packed(m);
    return s;
}

tnt_shape tnt__model_tensor_decl(const tnt_model *m, int t) {
    tnt_shape s = m->tensor_shape[t];
    if (m->tensor_var)
        for (int d = 0; d < s.ndim && d < 8; d++)
            if (m->tensor_var[t] & (1u << d)) s.dim[d] = -1;
    return s;
}

tnt_status tnt_model_set_input_shapes(tnt_model *m, int n, const tnt_shape *shapes) {
    if (!m || !shapes) return tnt__error(TNT_ERR_ARG, "model_set_input_shapes: NULL argument");
    if (!m->has_input_shape) return tnt__error(TNT_ERR_STATE, "model \"%s\": input shape unknown", m->name);
    if (n != m->n_inputs)
        return tnt__error(TNT_ERR_ARG, "model_set_input_shapes: %d shapes for model \"%s\" with %d inputs", n, m->name,
                          m->n_inputs);
    return tnt__model_instantiate(m, shapes, "model_set_input_shapes");
}
