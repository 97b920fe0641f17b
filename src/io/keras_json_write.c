/* keras_json_write.c: a model as Keras 2 JSON (model.to_json()), weight-free; reading is in
 * keras_json.c.
 *
 * {"class_name": "Sequential" | "Functional", "config": {...}, "keras_version": "2.11.0",
 * "backend": "tensorflow"}, each layer {"class_name", "config"} (Functional: plus "name" and
 * "inbound_nodes"). The base keys name, trainable, dtype are written here; each layer's own keys
 * by its get_config (in the layer's file, which reads its private fields). */
#include "layers/keras_config.h"
#include "layers/regularizer.h"
#include "model/model.h"

#define KERAS_VERSION "2.11.0"

/* {"class_name": ..., "config": {...}} of one layer; batch_shape (may be NULL): Keras's
 * batch_input_shape of the first layer of a Sequential model without InputLayer. */
static tnt_status layer_to_json(const tnt_layer *l, const tnt_shape *batch_shape, cJSON **out) {
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    TNT_KJ(o);
    tnt_status s = TNT_OK;
    cJSON *c = NULL;
    if (!cJSON_AddStringToObject(o, "class_name", l->ops->class_name) || !(c = cJSON_AddObjectToObject(o, "config")))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    else if (tnt__is_input_layer(l)) {
        if ((s = tnt__kj_add_batch_shape(c, tnt__input_layer_shape(l))) == TNT_OK &&
            (!cJSON_AddStringToObject(c, "dtype", tnt__dtype_policy_name(tnt__input_layer_dtype(l))) ||
             !cJSON_AddFalseToObject(c, "sparse") ||
             !cJSON_AddFalseToObject(c, "ragged") || !cJSON_AddStringToObject(c, "name", l->name)))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    } else {
        if (!cJSON_AddStringToObject(c, "name", l->name) || !cJSON_AddBoolToObject(c, "trainable", !l->frozen))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        if (s == TNT_OK && batch_shape) s = tnt__kj_add_batch_shape(c, *batch_shape);
        if (s == TNT_OK && !cJSON_AddStringToObject(c, "dtype", tnt__dtype_policy_name(l->dtype_policy)))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        if (s == TNT_OK && (s = tnt__layer_get_config(l, c)) != TNT_OK)
            tnt__error_prefix(s, "to_json: layer \"%s\" (%s): ", l->name, l->ops->class_name);
    }
    if (s != TNT_OK) {
        cJSON_Delete(o);
        return s;
    }
    *out = o;
    return TNT_OK;
}

static bool is_hidden_layer(const tnt_model *m, const tnt_layer *l) {
    for (int i = 0; i < m->n_hidden; i++)
        if (m->hidden[i] == l) return true;
    return false;
}

/* The nested model of m (a scope with no parent) that holds scope s, or -1. */
static int top_scope(const tnt_model *m, int s) {
    while (s >= 0 && m->scopes[s].parent >= 0) s = m->scopes[s].parent;
    return s;
}

/* [layer, node_index, tensor_index] of tensor t (+ kwargs when given): prod[t] is its producing
 * node, call[n] the index of node n among its layer's calls. A nested model's output is
 * [model, call + 1, output]: Keras 2 counts the nested model's own node first. */
static cJSON *tensor_ref(const tnt_model *m, const int *prod, const int *call, int t, cJSON *kwargs) {
    cJSON *r = cJSON_CreateArray();
    int n = t >= 0 && t < m->n_tensors ? prod[t] : -1;
    const char *name = n >= 0 ? m->nodes[n].layer->name : NULL;
    int node = n >= 0 ? call[n] : 0, index = n >= 0 ? t - m->nodes[n].out : 0;
    int sc = n >= 0 ? top_scope(m, m->nodes[n].scope - 1) : -1;
    if (sc >= 0) { /* made inside a nested model: one of its call's outputs */
        name = NULL;
        for (int c = 0; c < m->scopes[sc].n_calls && !name; c++)
            for (int k = 0; k < m->scopes[sc].n_out; k++)
                if (m->scopes[sc].calls[c].out[k] == t) name = m->scopes[sc].name, node = c + 1, index = k;
    }
    if (!r || !name || !cJSON_AddItemToArray(r, cJSON_CreateString(name)) ||
        !cJSON_AddItemToArray(r, cJSON_CreateNumber(node)) || !cJSON_AddItemToArray(r, cJSON_CreateNumber(index)) ||
        (kwargs && !cJSON_AddItemToArray(r, kwargs))) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static tnt_status model_config(const tnt_model *m, cJSON **out);

/* A nested model's entry of model.layers: {"class_name", "config"} (+ "name" and the
 * inbound_nodes of its calls in a Functional model). */
static tnt_status scope_to_json(const tnt_model *m, int sc, const int *prod, const int *call, bool functional,
                                cJSON **out) {
    const tnt__scope *s = &m->scopes[sc];
    cJSON *o = NULL, *nodes = NULL;
    tnt_status st = model_config(s->model, &o);
    if (st != TNT_OK) return st;
    if (!functional) {
        *out = o;
        return TNT_OK;
    }
    if (!cJSON_AddStringToObject(o, "name", s->name) || !(nodes = cJSON_AddArrayToObject(o, "inbound_nodes")))
        goto nomem;
    for (int c = 0; c < s->n_calls; c++) {
        if (s->calls[c].out[0] < 0) continue; /* a call the model does not use */
        cJSON *d = cJSON_CreateArray();
        if (!d || !cJSON_AddItemToArray(nodes, d)) {
            cJSON_Delete(d);
            goto nomem;
        }
        for (int k = 0; k < s->n_in; k++) {
            cJSON *kw = cJSON_CreateObject(), *r = kw ? tensor_ref(m, prod, call, s->calls[c].in[k], kw) : NULL;
            if (!r) cJSON_Delete(kw);
            if (!r || !cJSON_AddItemToArray(d, r)) goto nomem;
        }
    }
    *out = o;
    return TNT_OK;
nomem:
    cJSON_Delete(o);
    return tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
}

/* The inbound node of node n, Keras's form: [[layer, node_index, tensor_index, kwargs], ...]. */
static cJSON *node_to_json(const tnt_model *m, const int *prod, const int *call, int n) {
    const tnt__node *nd = &m->nodes[n];
    cJSON *data = cJSON_CreateArray();
    if (!data) return NULL;
    bool ok = true;
    if (!strcmp(nd->layer->ops->class_name, "MultiHeadAttention") && nd->n_in >= 3) {
        bool has_mask = false, causal = false;
        tnt__attention_call_info(nd->layer, &has_mask, &causal);
        cJSON *kw = cJSON_CreateObject();
        ok = kw && cJSON_AddItemToObject(kw, "value", tensor_ref(m, prod, call, nd->in[1], NULL));
        if (ok && nd->in[2] != nd->in[1])
            ok = cJSON_AddItemToObject(kw, "key", tensor_ref(m, prod, call, nd->in[2], NULL));
        if (ok && has_mask)
            ok = cJSON_AddItemToObject(kw, "attention_mask", tensor_ref(m, prod, call, nd->in[3], NULL));
        if (ok && causal) ok = cJSON_AddTrueToObject(kw, "use_causal_mask") != NULL;
        cJSON *q = ok ? tensor_ref(m, prod, call, nd->in[0], kw) : NULL;
        if (!q) {
            if (kw && !ok) cJSON_Delete(kw);
            ok = false;
        } else ok = cJSON_AddItemToArray(data, q);
    } else {
        /* the sequence mask the graph appended is not a Keras input */
        int n_in = nd->layer->ops->consumes_mask && nd->layer->mask_input ? nd->n_in - 1 : nd->n_in;
        for (int k = 0; k < n_in && ok; k++) {
            cJSON *kw = cJSON_CreateObject();
            cJSON *r = kw ? tensor_ref(m, prod, call, nd->in[k], kw) : NULL;
            if (!r) cJSON_Delete(kw);
            ok = r && cJSON_AddItemToArray(data, r);
        }
    }
    if (!ok) {
        cJSON_Delete(data);
        return NULL;
    }
    return data;
}

static tnt_status functional_to_json(const tnt_model *m, cJSON *cfg) {
    tnt_status s = TNT_OK;
    int *prod = tnt__calloc((size_t)m->n_tensors + 1, sizeof *prod);
    int *call = tnt__calloc((size_t)m->n_nodes + 1, sizeof *call);
    if (!prod || !call) {
        free(prod);
        free(call);
        return TNT_ERR_NOMEM;
    }
    for (int t = 0; t < m->n_tensors; t++) prod[t] = -1;
    for (int n = 0; n < m->n_nodes; n++) {
        for (int k = 0; k < tnt__node_n_out(&m->nodes[n]); k++) prod[m->nodes[n].out + k] = n;
        call[n] = 0;
        for (int j = 0; j < n; j++) call[n] += m->nodes[j].layer == m->nodes[n].layer;
    }
    cJSON *layers = cJSON_AddArrayToObject(cfg, "layers");
    if (!layers) s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    int n_entries = tnt__scope_entries(m, -1, NULL, NULL, NULL, 0);
    tnt_layer **ls = tnt__calloc((size_t)n_entries + 1, sizeof *ls);
    int *scs = tnt__calloc((size_t)n_entries + 1, sizeof *scs);
    if (!ls || !scs) s = TNT_ERR_NOMEM;
    else tnt__scope_entries(m, -1, NULL, ls, scs, n_entries);
    for (int i = 0; i < n_entries && s == TNT_OK; i++) {
        const tnt_layer *l = ls[i];
        cJSON *lj = NULL, *nodes = NULL;
        if (!l) { /* a nested model */
            if ((s = scope_to_json(m, scs[i], prod, call, true, &lj)) == TNT_OK && !cJSON_AddItemToArray(layers, lj)) {
                cJSON_Delete(lj);
                s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
            }
            continue;
        }
        if (is_hidden_layer(m, l)) continue;
        if ((s = layer_to_json(l, NULL, &lj)) != TNT_OK) break;
        if (!cJSON_AddItemToArray(layers, lj)) {
            cJSON_Delete(lj);
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
            break;
        }
        if (!cJSON_AddStringToObject(lj, "name", l->name) || !(nodes = cJSON_AddArrayToObject(lj, "inbound_nodes"))) {
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
            break;
        }
        if (tnt__is_input_layer(l)) continue;
        for (int n = 0; n < m->n_nodes && s == TNT_OK; n++) {
            if (m->nodes[n].layer != l) continue;
            cJSON *d = node_to_json(m, prod, call, n);
            if (!d || !cJSON_AddItemToArray(nodes, d)) {
                cJSON_Delete(d);
                s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
            }
        }
    }
    cJSON *ins = NULL, *outs = NULL; /* lists, or dicts by key when the model was made with them */
    if (s == TNT_OK && (!(ins = m->inputs_dict ? cJSON_AddObjectToObject(cfg, "input_layers") : cJSON_AddArrayToObject(cfg, "input_layers")) ||
                        !(outs = m->outputs_dict ? cJSON_AddObjectToObject(cfg, "output_layers") : cJSON_AddArrayToObject(cfg, "output_layers"))))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    for (int k = 0; k < m->n_inputs && s == TNT_OK; k++) {
        int t = -1; /* the InputLayer node reading the model input */
        for (int n = 0; n < m->n_nodes && t < 0; n++)
            if (tnt__is_input_layer(m->nodes[n].layer) && m->nodes[n].in[0] == m->inputs[k]) t = m->nodes[n].out;
        cJSON *r = tensor_ref(m, prod, call, t, NULL);
        if (!r || !(m->inputs_dict ? cJSON_AddItemToObject(ins, m->input_keys[k], r) : cJSON_AddItemToArray(ins, r))) {
            cJSON_Delete(r);
            s = tnt__error(TNT_ERR_STATE, "to_json: model \"%s\": input %d has no InputLayer", m->name, k);
        }
    }
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        cJSON *r = tensor_ref(m, prod, call, m->outputs[k], NULL);
        if (!r || !(m->outputs_dict ? cJSON_AddItemToObject(outs, m->output_keys[k], r) : cJSON_AddItemToArray(outs, r))) {
            cJSON_Delete(r);
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        }
    }
    free(ls), free(scs);
    free(prod);
    free(call);
    return s;
}

static tnt_status sequential_to_json(const tnt_model *m, cJSON *cfg) {
    cJSON *layers = cJSON_AddArrayToObject(cfg, "layers");
    if (!layers) return tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    int n = tnt__scope_entries(m, -1, NULL, NULL, NULL, 0);
    tnt_layer **ls = tnt__calloc((size_t)n + 1, sizeof *ls);
    int *scs = tnt__calloc((size_t)n + 1, sizeof *scs);
    if (!ls || !scs) {
        free(ls), free(scs);
        return TNT_ERR_NOMEM;
    }
    tnt__scope_entries(m, -1, NULL, ls, scs, n);
    tnt_status s = TNT_OK;
    for (int i = 0; i < n && s == TNT_OK; i++) {
        const tnt_layer *l = ls[i];
        /* no InputLayer: Keras keeps the input shape in the first layer's batch_input_shape */
        tnt_shape in = m->variable ? m->input_decl[0] : m->tensor_shape[0];
        bool first_shape = i == 0 && l && !tnt__is_input_layer(l) && m->has_input_shape;
        cJSON *lj = NULL;
        s = l ? layer_to_json(l, first_shape ? &in : NULL, &lj) : scope_to_json(m, scs[i], NULL, NULL, false, &lj);
        if (s == TNT_OK && !cJSON_AddItemToArray(layers, lj)) {
            cJSON_Delete(lj);
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        }
    }
    free(ls), free(scs);
    return s;
}

/* {"class_name": "Sequential" | "Functional", "config": {...}} of m (a nested model's entry too) */
static tnt_status model_config(const tnt_model *m, cJSON **out) {
    cJSON *root = cJSON_CreateObject(), *cfg = NULL;
    tnt_status s = TNT_OK;
    bool functional = tnt__model_keras_functional(m);
    if (!root || !cJSON_AddStringToObject(root, "class_name", functional ? "Functional" : "Sequential") ||
        !(cfg = cJSON_AddObjectToObject(root, "config")) || !cJSON_AddStringToObject(cfg, "name", m->name))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK) s = functional ? functional_to_json(m, cfg) : sequential_to_json(m, cfg);
    if (s != TNT_OK) {
        cJSON_Delete(root);
        root = NULL;
    }
    *out = root;
    return s;
}

tnt_status tnt_model_to_json(const tnt_model *m, char **json) {
    if (!m || !json) return tnt__error(TNT_ERR_ARG, "to_json: %s is NULL", m ? "json" : "model");
    *json = NULL;
    cJSON *root = NULL;
    tnt_status s = model_config(m, &root);
    if (s == TNT_OK && (!cJSON_AddStringToObject(root, "keras_version", KERAS_VERSION) ||
                        !cJSON_AddStringToObject(root, "backend", "tensorflow")))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK && !(*json = cJSON_PrintUnformatted(root))) s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    cJSON_Delete(root);
    return s;
}
