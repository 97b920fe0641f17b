/* scope.c: models nested in a model (Keras's model called as a layer). Their layers are the outer
 * model's, flattened into its graph by tnt_call_model; each call node remembers the nested model
 * it came from (tnt__node.scope), and the model keeps one scope per nested model: its name,
 * class, Keras config and calls. Keras's files are written from them as Keras writes them: one
 * entry of model.layers (and one weights group) per nested model, its layers inside; layer names
 * are unique per scope, not globally. */
#include "model/model.h"

#include <stdio.h>

int tnt__layer_scope(const tnt_model *m, const tnt_layer *l) {
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].layer == l) return m->nodes[i].scope - 1;
    return -1;
}

bool tnt__scope_within(const tnt_model *m, int s, int outer) {
    if (outer < 0) return true;
    for (int k = 0; s >= 0 && k <= m->n_scopes; k++, s = m->scopes[s].parent)
        if (s == outer) return true;
    return false;
}

void tnt__scope_path(const tnt_model *m, int s, char *buf, size_t size) {
    int chain[32], n = 0;
    for (; s >= 0 && n < 32; s = m->scopes[s].parent) chain[n++] = s;
    size_t o = 0;
    buf[0] = '\0';
    while (n-- > 0 && o < size) o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? "/" : "", m->scopes[chain[n]].name);
}

/* The child of scope outer (-1: the model) on the way to scope s, or -2 when s is not inside. */
static int child_toward(const tnt_model *m, int s, int outer) {
    for (int k = 0; s >= 0 && k <= m->n_scopes; k++, s = m->scopes[s].parent)
        if (m->scopes[s].parent == outer) return s;
    return -2;
}

int tnt__scope_entries(const tnt_model *m, int s, bool (*listed)(const tnt_model *, const tnt_layer *),
                       tnt_layer **layers, int *scopes, int cap) {
    int n = 0;
    bool *seen = m->n_scopes ? tnt__calloc((size_t)m->n_scopes, sizeof *seen) : NULL;
    for (int i = 0; i < m->n_layers; i++) {
        tnt_layer *l = m->layers[i];
        int ls = tnt__layer_scope(m, l), c = -2;
        if (ls == s) {
            if (listed && !listed(m, l)) continue;
        } else if (ls < 0 || (c = child_toward(m, ls, s)) < 0 || !seen || seen[c]) {
            continue; /* outside s, or a nested model already listed */
        } else {
            seen[c] = true;
        }
        if (n < cap) {
            if (layers) layers[n] = c >= 0 ? NULL : l;
            if (scopes) scopes[n] = c >= 0 ? c : -1;
        }
        n++;
    }
    free(seen);
    return n;
}

tnt_status tnt__scope_push(tnt_model *m, const tnt__scope *t, int *index) {
    tnt__scope *ns = realloc(m->scopes, (size_t)(m->n_scopes + 1) * sizeof *ns);
    if (!ns) return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory for a nested model", m->name);
    m->scopes = ns;
    tnt__scope *c = &m->scopes[m->n_scopes];
    *c = *t;
    c->model = t->model ? tnt__model_shadow(t->model) : NULL;
    c->calls = t->n_calls ? malloc((size_t)t->n_calls * sizeof *c->calls) : NULL;
    if ((t->model && !c->model) || (t->n_calls && !c->calls)) {
        tnt_model_free(c->model);
        free(c->calls);
        return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory for a nested model", m->name);
    }
    if (t->n_calls) memcpy(c->calls, t->calls, (size_t)t->n_calls * sizeof *c->calls);
    *index = m->n_scopes++;
    return TNT_OK;
}

tnt_status tnt__scope_add_call(tnt_model *m, int s, const int *in, const int *out) {
    tnt__scope *sc = &m->scopes[s];
    tnt__scope_call *nc = realloc(sc->calls, (size_t)(sc->n_calls + 1) * sizeof *nc);
    if (!nc) return tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory for a nested model call", m->name);
    sc->calls = nc;
    tnt__scope_call *c = &nc[sc->n_calls++];
    for (int k = 0; k < TNT_MAX_IO; k++) {
        c->in[k] = k < sc->n_in ? in[k] : -1;
        c->out[k] = k < sc->n_out ? out[k] : -1;
    }
    return TNT_OK;
}

void tnt__scopes_free(tnt_model *m) {
    for (int i = 0; i < m->n_scopes; i++) {
        tnt_model_free(m->scopes[i].model);
        free(m->scopes[i].calls);
    }
    free(m->scopes);
    m->scopes = NULL;
    m->n_scopes = 0;
}

/* Arrays of n elements copied (NULL for none); false when out of memory. */
static bool dup_array(void **dst, const void *src, size_t n, size_t elem) {
    *dst = NULL;
    if (!src || n == 0) return true;
    if (!(*dst = malloc(n * elem))) return false;
    memcpy(*dst, src, n * elem);
    return true;
}

tnt_model *tnt__model_shadow(const tnt_model *src) {
    tnt_model *m = tnt__calloc(1, sizeof *m);
    if (!m) return NULL;
    memcpy(m->name, src->name, sizeof m->name);
    m->functional = src->functional;
    m->keras_sequential = src->keras_sequential;
    m->n_nodes = m->cap_nodes = src->n_nodes;
    m->n_tensors = m->cap_tensors = src->n_tensors;
    m->n_inputs = src->n_inputs, m->n_outputs = src->n_outputs;
    memcpy(m->inputs, src->inputs, sizeof m->inputs);
    memcpy(m->outputs, src->outputs, sizeof m->outputs);
    m->inputs_dict = src->inputs_dict, m->outputs_dict = src->outputs_dict;
    memcpy(m->input_keys, src->input_keys, sizeof m->input_keys);
    memcpy(m->output_keys, src->output_keys, sizeof m->output_keys);
    m->has_input_shape = src->has_input_shape;
    m->input_shape = src->input_shape, m->output_shape = src->output_shape;
    m->variable = src->variable;
    memcpy(m->input_decl, src->input_decl, sizeof m->input_decl);
    m->seed = src->seed;
    bool ok = dup_array((void **)&m->nodes, src->nodes, (size_t)src->n_nodes, sizeof *m->nodes) &&
              dup_array((void **)&m->tensor_shape, src->tensor_shape, (size_t)src->n_tensors, sizeof *m->tensor_shape) &&
              dup_array((void **)&m->tensor_alias, src->tensor_alias, (size_t)src->n_tensors, sizeof *m->tensor_alias) &&
              (!src->tensor_var || dup_array((void **)&m->tensor_var, src->tensor_var, (size_t)src->n_tensors, 1));
    for (int i = 0; ok && i < src->n_layers; i++) ok = tnt__model_own_layer(m, src->layers[i], false) == TNT_OK;
    for (int i = 0; ok && i < src->n_hidden; i++) ok = tnt__model_own_layer(m, src->hidden[i], true) == TNT_OK;
    for (int i = 0; ok && i < src->n_scopes; i++) {
        int idx;
        ok = tnt__scope_push(m, &src->scopes[i], &idx) == TNT_OK;
    }
    if (!ok) {
        tnt_model_free(m);
        tnt__error(TNT_ERR_NOMEM, "model \"%s\": out of memory copying a nested model", src->name);
        return NULL;
    }
    return m;
}
