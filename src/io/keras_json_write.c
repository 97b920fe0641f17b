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
            (!cJSON_AddStringToObject(c, "dtype", "float32") || !cJSON_AddFalseToObject(c, "sparse") ||
             !cJSON_AddFalseToObject(c, "ragged") || !cJSON_AddStringToObject(c, "name", l->name)))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    } else {
        if (!cJSON_AddStringToObject(c, "name", l->name) || !cJSON_AddTrueToObject(c, "trainable"))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        if (s == TNT_OK && batch_shape) s = tnt__kj_add_batch_shape(c, *batch_shape);
        if (s == TNT_OK && !cJSON_AddStringToObject(c, "dtype", "float32"))
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

/* [layer, node_index, tensor_index] of tensor t (+ kwargs when given): prod[t] is its producing
 * node, call[n] the index of node n among its layer's calls. */
static cJSON *tensor_ref(const tnt_model *m, const int *prod, const int *call, int t, cJSON *kwargs) {
    cJSON *r = cJSON_CreateArray();
    int n = t >= 0 && t < m->n_tensors ? prod[t] : -1;
    if (!r || n < 0 || !cJSON_AddItemToArray(r, cJSON_CreateString(m->nodes[n].layer->name)) ||
        !cJSON_AddItemToArray(r, cJSON_CreateNumber(call[n])) || !cJSON_AddItemToArray(r, cJSON_CreateNumber(0)) ||
        (kwargs && !cJSON_AddItemToArray(r, kwargs))) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
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
        for (int k = 0; k < nd->n_in && ok; k++) {
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
        prod[m->nodes[n].out] = n;
        call[n] = 0;
        for (int j = 0; j < n; j++) call[n] += m->nodes[j].layer == m->nodes[n].layer;
    }
    cJSON *layers = cJSON_AddArrayToObject(cfg, "layers");
    if (!layers) s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        const tnt_layer *l = m->layers[i];
        if (is_hidden_layer(m, l)) continue;
        cJSON *lj = NULL, *nodes = NULL;
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
    cJSON *ins = NULL, *outs = NULL;
    if (s == TNT_OK && (!(ins = cJSON_AddArrayToObject(cfg, "input_layers")) ||
                        !(outs = cJSON_AddArrayToObject(cfg, "output_layers"))))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    for (int k = 0; k < m->n_inputs && s == TNT_OK; k++) {
        int t = -1; /* the InputLayer node reading the model input */
        for (int n = 0; n < m->n_nodes && t < 0; n++)
            if (tnt__is_input_layer(m->nodes[n].layer) && m->nodes[n].in[0] == m->inputs[k]) t = m->nodes[n].out;
        cJSON *r = tensor_ref(m, prod, call, t, NULL);
        if (!r || !cJSON_AddItemToArray(ins, r)) {
            cJSON_Delete(r);
            s = tnt__error(TNT_ERR_STATE, "to_json: model \"%s\": input %d has no InputLayer", m->name, k);
        }
    }
    for (int k = 0; k < m->n_outputs && s == TNT_OK; k++) {
        cJSON *r = tensor_ref(m, prod, call, m->outputs[k], NULL);
        if (!r || !cJSON_AddItemToArray(outs, r)) {
            cJSON_Delete(r);
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        }
    }
    free(prod);
    free(call);
    return s;
}

static tnt_status sequential_to_json(const tnt_model *m, cJSON *cfg) {
    cJSON *layers = cJSON_AddArrayToObject(cfg, "layers");
    if (!layers) return tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    for (int i = 0; i < m->n_layers; i++) {
        const tnt_layer *l = m->layers[i];
        /* no InputLayer: Keras keeps the input shape in the first layer's batch_input_shape */
        tnt_shape in = m->variable ? m->input_decl[0] : m->tensor_shape[0];
        bool first_shape = i == 0 && !tnt__is_input_layer(l) && m->has_input_shape;
        cJSON *lj = NULL;
        tnt_status s = layer_to_json(l, first_shape ? &in : NULL, &lj);
        if (s != TNT_OK) return s;
        if (!cJSON_AddItemToArray(layers, lj)) {
            cJSON_Delete(lj);
            return tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        }
    }
    return TNT_OK;
}

tnt_status tnt_model_to_json(const tnt_model *m, char **json) {
    if (!m || !json) return tnt__error(TNT_ERR_ARG, "to_json: %s is NULL", m ? "json" : "model");
    *json = NULL;
    cJSON *root = cJSON_CreateObject(), *cfg = NULL;
    tnt_status s = TNT_OK;
    bool functional = tnt__model_keras_functional(m);
    if (!root || !cJSON_AddStringToObject(root, "class_name", functional ? "Functional" : "Sequential") ||
        !(cfg = cJSON_AddObjectToObject(root, "config")) || !cJSON_AddStringToObject(cfg, "name", m->name))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK) s = functional ? functional_to_json(m, cfg) : sequential_to_json(m, cfg);
    if (s == TNT_OK && (!cJSON_AddStringToObject(root, "keras_version", KERAS_VERSION) ||
                        !cJSON_AddStringToObject(root, "backend", "tensorflow")))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK && !(*json = cJSON_PrintUnformatted(root))) s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    cJSON_Delete(root);
    return s;
}
