/* keras_json.c: reading a Keras 2 JSON architecture (model_from_json), weight-free; writing is in
 * keras_json_write.c.
 *
 * Each layer entry {"class_name", "config"} is read by its class's from_config, found in the
 * layer registry (src/layers/registry.c); this file reads what is above the layers: Sequential
 * models, rebuilt with tnt_model_add, Functional ones, rebuilt through the public graph API
 * (tnt_graph_input, tnt_call_n, tnt_call_attention, tnt_functional) from their inbound_nodes,
 * models nested in models, and the base keys name and batch_input_shape. trainable: false marks a
 * layer frozen (tnt_layer.frozen: the order of its weights in Keras 2 HDF5 files); dtype is a layer's policy (tnt__kj_dtype_policy) and an
 * InputLayer's input type (tnt__kj_input_dtype: integer ids are carried as float32). */
#include "io/tf_ops.h"
#include "layers/keras_config.h"
#include "layers/regularizer.h"
#include "model/model.h"

#include <stdio.h>

/* ---- reading: one layer --------------------------------------------------------------------- */

static bool is_model_class(const char *cls) {
    return !strcmp(cls, "Sequential") || !strcmp(cls, "Functional") || !strcmp(cls, "Model");
}

/* The layer of one {"class_name", "config"} entry (not InputLayer); cfg is an object. */
static tnt_layer *layer_from_json(const char *cls, const cJSON *cfg, const char *name) {
    tnt__kj_ctx k = {name ? name : "?", cls};
    if (is_model_class(cls)) { /* callers read nested models themselves */
        tnt__kj_error(&k, TNT_ERR_UNSUPPORTED, "a nested %s is not supported here", cls);
        return NULL;
    }
    /* a class of the user's own whose traced operations the file carries (layers/core/traced.c),
     * also one named as a built-in class (a user's own PositionEmbedding is not KerasHub's) */
    const tnt__layer_ops *ops = tnt__kj_item(cfg, "tnt_ops") ? &tnt__traced_ops : tnt__layer_class_find(cls);
    if (ops) return tnt__layer_from_config(ops, cfg, &k);
    tnt__error(TNT_ERR_UNSUPPORTED, "from_json: layer \"%.64s\": unsupported layer class \"%.64s\"", k.name, cls);
    return NULL;
}

/* class_name, config and the layer name of one entry of "layers". */
static tnt_status entry(const cJSON *e, int i, const char **cls, const cJSON **cfg, const char **name) {
    const cJSON *c = tnt__kj_item(e, "class_name");
    if (!cJSON_IsString(c))
        return tnt__error(TNT_ERR_FORMAT, "from_json: layer %d: missing required key \"class_name\"", i);
    *cls = c->valuestring;
    *cfg = tnt__kj_item(e, "config");
    const cJSON *n = tnt__kj_item(e, "name");
    if (!cJSON_IsString(n)) n = tnt__kj_item(*cfg, "name");
    *name = cJSON_IsString(n) ? n->valuestring : NULL;
    if (!cJSON_IsObject(*cfg))
        return tnt__error(TNT_ERR_FORMAT, "from_json: layer %d (%s): missing required key \"config\"", i, *cls);
    return TNT_OK;
}

/* Set when an input shape has a None dimension: a model that does not build with the first
 * stand-in size for it is read again with larger ones (model/variable.c). */
static _Thread_local bool saw_none;

static tnt_status read_batch_shape(const cJSON *cfg, tnt_shape *s, const tnt__kj_ctx *k) {
    tnt_status st = tnt__kj_batch_shape(cfg, s, k);
    for (int i = 0; st == TNT_OK && i < s->ndim; i++) saw_none |= s->dim[i] < 0;
    return st;
}

/* Models inside models (Keras nested models) are read recursively, at most this deep. */
#define MAX_MODEL_DEPTH 8
static tnt_model *model_from_cjson(const cJSON *root, int depth);

/* A nested model entry {"class_name": "Sequential" | "Functional" | "Model", "config", ...}: the
 * inner model, with a single input shape known. */
static tnt_model *nested_from_json(const cJSON *e, const char *name, const char *cls, int depth) {
    if (depth >= MAX_MODEL_DEPTH) {
        tnt__error(TNT_ERR_UNSUPPORTED, "from_json: layer \"%.64s\" (%s): models nested more than %d deep", name, cls,
                   MAX_MODEL_DEPTH);
        return NULL;
    }
    tnt_model *inner = model_from_cjson(e, depth + 1);
    if (!inner) {
        tnt__error_prefix(TNT_ERR_ARG, "from_json: nested model \"%.64s\": ", name);
        return NULL;
    }
    if (!inner->has_input_shape) {
        tnt__error(TNT_ERR_FORMAT, "from_json: nested model \"%.64s\" has no input shape (no InputLayer or "
                   "batch_input_shape)", name);
        tnt_model_free(inner);
        return NULL;
    }
    /* a frozen nested model (Keras 3 writes its trainable; Keras 2 its layers') freezes its layers */
    if (cJSON_IsFalse(tnt__kj_item(tnt__kj_item(e, "config"), "trainable")))
        for (int i = 0; i < inner->n_layers; i++) inner->layers[i]->frozen = true;
    return inner;
}

/* ---- reading: Sequential ------------------------------------------------------------------ */

/* A Sequential model holding nested models: rebuilt as a chain in a graph, so it becomes a
 * Functional model (the inner models' layers join it, as with tnt_call_model). */
static tnt_model *sequential_graph_from_json(const cJSON *layers, const char *name, int depth) {
    tnt_graph *g = tnt_graph_new();
    tnt_model *inners[64] = {0}, *m = NULL;
    int n_inner = 0, i = 0;
    tnt_ktensor in = {-1}, x = {-1};
    const cJSON *e;
    if (!g) return NULL;
    cJSON_ArrayForEach(e, layers) {
        const char *cls, *lname;
        const cJSON *cfg;
        if (entry(e, i, &cls, &cfg, &lname) != TNT_OK) goto done;
        tnt__kj_ctx k = {lname ? lname : "?", cls};
        if (i == 0 && (!strcmp(cls, "InputLayer") || tnt__kj_has_batch_shape(cfg))) {
            tnt_shape shape;
            char iname[TNT_NAME_MAX + 8];
            if (read_batch_shape(cfg, &shape, &k) != TNT_OK) goto done;
            snprintf(iname, sizeof iname, "%.50s_input", lname ? lname : "input");
            in = x = tnt_graph_input(g, shape, !strcmp(cls, "InputLayer") ? lname : iname);
            if (x.id < 0) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
                goto done;
            }
            if (!strcmp(cls, "InputLayer")) {
                tnt__dtype_policy dt;
                if (tnt__kj_input_dtype(cfg, &dt, &k) != TNT_OK) goto done;
                tnt__input_layer_set_dtype(tnt__graph_input_layer(g, x), dt);
                i++;
                continue;
            }
        }
        if (x.id < 0 && i == 0 && is_model_class(cls)) { /* a nested model first: its input is the model's */
            tnt_model *first = nested_from_json(e, k.name, cls, depth);
            if (!first) goto done;
            char iname[TNT_NAME_MAX + 8];
            snprintf(iname, sizeof iname, "%.50s_input", k.name);
            if (first->n_inputs == 1) in = x = tnt_graph_input(g, first->input_decl[0], iname);
            tnt_model_free(first);
        }
        if (x.id < 0) {
            tnt__kj_error(&k, TNT_ERR_FORMAT, "%s",
                          i == 0 ? "a Sequential model with nested models or sequence masks needs an "
                                   "input shape (an InputLayer or batch_input_shape)"
                                 : "InputLayer must be the first layer");
            goto done;
        }
        if (is_model_class(cls)) {
            if (n_inner == 64) {
                tnt__kj_error(&k, TNT_ERR_UNSUPPORTED, "more than 64 nested models");
                goto done;
            }
            tnt_model *inner = nested_from_json(e, k.name, cls, depth);
            if (!inner) goto done;
            inners[n_inner++] = inner;
            tnt_ktensor y;
            if (inner->n_inputs != 1 || inner->n_outputs != 1) {
                tnt__kj_error(&k, TNT_ERR_UNSUPPORTED,
                              "a nested model in a Sequential model must have one input and one output");
                goto done;
            }
            if (tnt_call_model(g, inner, 1, &x, &y) != TNT_OK) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
                goto done;
            }
            x = y;
        } else {
            tnt_layer *l = layer_from_json(cls, cfg, lname);
            if (!l) goto done;
            x = tnt_call(g, l, x);
            if (x.id < 0) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: layer \"%.64s\": ", k.name);
                goto done;
            }
        }
        i++;
    }
    m = tnt_functional(g, 1, &in, 1, &x, name ? name : "sequential");
    if (!m) tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
    else m->keras_sequential = true; /* a chain, written back as Sequential (nested models as entries) */
done:
    for (int k = 0; k < n_inner; k++) tnt_model_free(inners[k]);
    tnt_graph_free(g);
    return m;
}

static tnt_model *sequential_from_json(const cJSON *layers, const char *name, int depth) {
    if (!cJSON_IsArray(layers)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Sequential: missing required key \"layers\" (a list)");
        return NULL;
    }
    const cJSON *e;
    /* nested models, and sequence masks (which only a graph carries), need the graph */
    bool nested = false, masks = false;
    cJSON_ArrayForEach(e, layers) {
        const cJSON *c = tnt__kj_item(e, "class_name");
        nested |= cJSON_IsString(c) && is_model_class(c->valuestring);
        masks |= (cJSON_IsString(c) && !strcmp(c->valuestring, "Masking")) ||
                 cJSON_IsTrue(tnt__kj_item(tnt__kj_item(e, "config"), "mask_zero"));
    }
    if (nested || masks) return sequential_graph_from_json(layers, name, depth);
    tnt_model *m = tnt_sequential(name);
    if (!m) return NULL;
    int i = 0;
    bool first_shape = false;
    tnt_shape shape = {0};
    cJSON_ArrayForEach(e, layers) {
        const char *cls, *lname;
        const cJSON *cfg;
        if (entry(e, i, &cls, &cfg, &lname) != TNT_OK) goto fail;
        tnt__kj_ctx k = {lname ? lname : "?", cls};
        tnt_layer *l;
        if (!strcmp(cls, "InputLayer")) {
            tnt__dtype_policy dt;
            if (read_batch_shape(cfg, &shape, &k) != TNT_OK || tnt__kj_input_dtype(cfg, &dt, &k) != TNT_OK) goto fail;
            if ((l = tnt_input_layer(shape, lname))) tnt__input_layer_set_dtype(l, dt);
        } else {
            if (i == 0 && tnt__kj_has_batch_shape(cfg)) {
                if (read_batch_shape(cfg, &shape, &k) != TNT_OK) goto fail;
                first_shape = true;
            }
            l = layer_from_json(cls, cfg, lname);
        }
        if (!l) goto fail;
        if (tnt_model_add(m, l) != TNT_OK) {
            tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
            goto fail;
        }
        if (i == 0 && first_shape && tnt_model_build(m, shape) != TNT_OK) {
            tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
            goto fail;
        }
        i++;
    }
    if (i == 0) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Sequential model \"%s\" has no layers", m->name);
        goto fail;
    }
    return m;
fail:
    tnt_model_free(m);
    return NULL;
}

/* ---- reading: Functional ------------------------------------------------------------------ */

typedef struct jlayer {
    const char *name, *cls;
    const cJSON *nodes; /* inbound_nodes */
    tnt_layer *layer;   /* NULL for InputLayer and nested models */
    tnt_model *inner;   /* a nested model */
    bool taken;         /* called once: the graph owns it */
    int n_nodes, done;
    int base;           /* node index of the first call in references: 1 for nested models (Keras
                           counts the inner model's own node first) */
    int n_out;          /* output tensors per call */
    tnt_ktensor *outs;  /* [n_nodes * TNT_MAX_IO] (InputLayer: one node) */
    const cJSON *tfop;  /* Keras 2 TFOpLambda / SlicingOpLambda: its config (the layer is made per
                           call, from the call's arguments: io/tf_ops.c) */
} jlayer;

typedef struct jgraph {
    jlayer *ls;
    int n;
    tnt_graph *g;
} jgraph;

static int find_layer(const jgraph *j, const char *name) {
    for (int i = 0; i < j->n; i++)
        if (j->ls[i].name && !strcmp(j->ls[i].name, name)) return i;
    return -1;
}

/* A reference [layer, node_index, tensor_index, ...]: 1 resolved, 0 not yet, -1 error. */
static int resolve(const jgraph *j, const cJSON *ref, tnt_ktensor *t, const char *who) {
    int ni = 0, ti = 0;
    if (!cJSON_IsArray(ref) || cJSON_GetArraySize(ref) < 3 || !cJSON_IsString(cJSON_GetArrayItem(ref, 0)) ||
        !tnt__kj_as_int(cJSON_GetArrayItem(ref, 1), &ni) || !tnt__kj_as_int(cJSON_GetArrayItem(ref, 2), &ti)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: a tensor reference is not [layer_name, node_index, tensor_index]",
                   who);
        return -1;
    }
    const char *name = cJSON_GetArrayItem(ref, 0)->valuestring;
    int i = find_layer(j, name);
    if (i < 0) {
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: refers to an unknown layer \"%.64s\"", who, name);
        return -1;
    }
    const jlayer *l = &j->ls[i];
    if (ti < 0 || ti >= l->n_out || ni < l->base || ni - l->base >= l->n_nodes) {
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: reference [\"%.64s\", %d, %d] is out of range (nodes %d to %d, "
                   "%d output(s) each)", who, name, ni, ti, l->base, l->base + l->n_nodes - 1, l->n_out);
        return -1;
    }
    if (ni - l->base >= l->done) return 0;
    *t = l->outs[(ni - l->base) * TNT_MAX_IO + ti];
    return 1;
}

/* ---- Keras 3 calls ---- */

/* A Keras 3 tensor {"class_name": "__keras_tensor__", "config": {"keras_history": [layer, node,
 * tensor], ...}}: its keras_history, else NULL. */
static const cJSON *keras_history(const cJSON *v) {
    const cJSON *cls = tnt__kj_item(v, "class_name");
    if (!cJSON_IsString(cls) || strcmp(cls->valuestring, "__keras_tensor__")) return NULL;
    return tnt__kj_item(tnt__kj_item(v, "config"), "keras_history");
}

/* Appends to refs a copy of the keras_history of every tensor in v (a tensor or nested lists of
 * them), in order; false when out of memory. */
static bool collect_refs(const cJSON *v, cJSON *refs) {
    const cJSON *h = keras_history(v), *e;
    if (h) return cJSON_AddItemToArray(refs, cJSON_Duplicate(h, true));
    if (cJSON_IsArray(v)) cJSON_ArrayForEach(e, v) {
            if (!collect_refs(e, refs)) return false;
        }
    return true;
}

/* A copy of the kwargs object kw with every tensor (or list of tensors) replaced by its
 * keras_history (value, key, attention_mask and initial_state become Keras 2's references). */
static cJSON *kwargs_refs(const cJSON *kw) {
    cJSON *c = cJSON_Duplicate(kw, true);
    for (cJSON *e = c ? c->child : NULL; e; e = e->next) {
        const cJSON *h = keras_history(e);
        if (!h && cJSON_IsArray(e) && keras_history(e->child)) { /* a list of tensors */
            cJSON *r = cJSON_CreateArray();
            if (!r || !collect_refs(e, r) || !cJSON_ReplaceItemInObjectCaseSensitive(c, e->string, r)) {
                cJSON_Delete(r), cJSON_Delete(c);
                return NULL;
            }
            e = r;
            continue;
        }
        if (!h) continue;
        cJSON *r = cJSON_Duplicate(h, true);
        if (!r || !cJSON_ReplaceItemInObjectCaseSensitive(c, e->string, r)) {
            cJSON_Delete(r), cJSON_Delete(c);
            return NULL;
        }
        e = r;
    }
    return c;
}

/* Keras 3's {"args": [...], "kwargs": {...}} as Keras 2's [[layer, node, tensor, kwargs], ...]
 * (the tensors of args in order; kwargs on the first). NULL with an error if it holds none. */
static cJSON *keras3_node(const cJSON *node, const char *who) {
    cJSON *refs = cJSON_CreateArray();
    if (!refs || !collect_refs(tnt__kj_item(node, "args"), refs)) goto nomem;
    if (cJSON_GetArraySize(refs) == 0) {
        cJSON_Delete(refs);
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: no input tensor (__keras_tensor__ with keras_history) in args", who);
        return NULL;
    }
    const cJSON *kw = tnt__kj_item(node, "kwargs");
    if (cJSON_IsObject(kw)) {
        cJSON *k = kwargs_refs(kw);
        if (!k || !cJSON_AddItemToArray(cJSON_GetArrayItem(refs, 0), k)) {
            cJSON_Delete(k);
            goto nomem;
        }
    }
    return refs;
nomem:
    cJSON_Delete(refs);
    tnt__error(TNT_ERR_NOMEM, "from_json: out of memory");
    return NULL;
}

static int call_node_refs(jgraph *j, jlayer *l, const cJSON *node, const char *who);

/* A TensorFlow function call (TFOpLambda, SlicingOpLambda): the layer is made for this call's
 * arguments once its tensors exist. */
static int call_tfop(jgraph *j, jlayer *l, const cJSON *node, const char *who) {
    cJSON *refs = tnt__tfop_refs(node);
    tnt_ktensor in[TNT_MAX_LAYER_INPUTS];
    tnt_shape shapes[TNT_MAX_LAYER_INPUTS];
    int n = 0, r = 1;
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs) {
        if (n == TNT_MAX_LAYER_INPUTS) {
            tnt__error(TNT_ERR_FORMAT, "from_json: %s: more than %d tensors", who, TNT_MAX_LAYER_INPUTS);
            r = -1;
            break;
        }
        if ((r = resolve(j, ref, &in[n], who)) <= 0) break;
        shapes[n] = tnt_ktensor_shape(j->g, in[n]);
        n++;
    }
    cJSON_Delete(refs);
    if (r <= 0) return r;
    char name[TNT_NAME_MAX + 16];
    if (l->done) snprintf(name, sizeof name, "%.64s_%d", l->name, l->done); /* one layer per call */
    else snprintf(name, sizeof name, "%.64s", l->name);
    tnt_layer *layer = tnt__tfop_layer(l->cls, l->tfop, name, node, n, shapes, who);
    if (!layer) return -1;
    int got = tnt_call_outputs(j->g, layer, n, in, TNT_MAX_IO, &l->outs[l->done * TNT_MAX_IO]);
    if (got < 0) {
        tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
        return -1;
    }
    l->done++;
    return 1;
}

/* Calls layer l on its next inbound node if its inputs exist: 1 done, 0 not yet, -1 error. */
static int call_node(jgraph *j, jlayer *l) {
    const cJSON *node = cJSON_GetArrayItem(l->nodes, l->done);
    char who[160];
    snprintf(who, sizeof who, "layer \"%.64s\" (%.64s) inbound node %d", l->name, l->cls, l->done);
    if (l->tfop) return call_tfop(j, l, node, who);
    if (!cJSON_IsObject(node)) return call_node_refs(j, l, node, who);
    cJSON *refs = keras3_node(node, who);
    int r = refs ? call_node_refs(j, l, refs, who) : -1;
    cJSON_Delete(refs);
    return r;
}

/* call_node on a Keras 2 node: a list of references [layer, node, tensor(, kwargs)]. */
static int call_node_refs(jgraph *j, jlayer *l, const cJSON *node, const char *who) {
    if (!cJSON_IsArray(node) || cJSON_GetArraySize(node) < 1 || cJSON_GetArraySize(node) > TNT_MAX_LAYER_INPUTS) {
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: expected a list of 1 to %d tensor references", who,
                   TNT_MAX_LAYER_INPUTS);
        return -1;
    }
    tnt_ktensor in[TNT_MAX_LAYER_INPUTS];
    int n = 0, r;
    const cJSON *ref;
    cJSON_ArrayForEach(ref, node) {
        if ((r = resolve(j, ref, &in[n++], who)) <= 0) return r;
    }
    tnt_ktensor out;
    if (l->inner) {
        if (n != l->inner->n_inputs) {
            tnt__error(TNT_ERR_FORMAT, "from_json: %s: nested model with %d inputs called on %d", who,
                       l->inner->n_inputs, n);
            return -1;
        }
        if (tnt_call_model(j->g, l->inner, n, in, &l->outs[l->done * TNT_MAX_IO]) != TNT_OK) {
            tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
            return -1;
        }
        l->done++;
        return 1;
    }
    if (!strcmp(l->cls, "MultiHeadAttention")) {
        const cJSON *kw = cJSON_GetArrayItem(cJSON_GetArrayItem(node, 0), 3);
        tnt_ktensor value = n > 1 ? in[1] : (tnt_ktensor){-1}, key = n > 2 ? in[2] : (tnt_ktensor){-1},
                    mask = {-1};
        bool causal = false;
        const cJSON *v;
        if (!tnt__kj_absent(v = tnt__kj_item(kw, "value")) && (r = resolve(j, v, &value, who)) <= 0) return r;
        if (!tnt__kj_absent(v = tnt__kj_item(kw, "key")) && (r = resolve(j, v, &key, who)) <= 0) return r;
        if (!tnt__kj_absent(v = tnt__kj_item(kw, "attention_mask")) && (r = resolve(j, v, &mask, who)) <= 0) return r;
        if (!tnt__kj_absent(v = tnt__kj_item(kw, "use_causal_mask"))) {
            if (!cJSON_IsBool(v)) {
                tnt__error(TNT_ERR_FORMAT, "from_json: %s: use_causal_mask: expected true or false", who);
                return -1;
            }
            causal = cJSON_IsTrue(v);
        }
        if (value.id < 0) {
            tnt__error(TNT_ERR_FORMAT, "from_json: %s: MultiHeadAttention without a value input", who);
            return -1;
        }
        out = tnt_call_attention(j->g, l->layer, in[0], value, key, mask, causal);
        l->taken = true; /* consumed by the first call, even a failed one */
        if (out.id < 0) {
            tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
            return -1;
        }
        l->outs[l->done++ * TNT_MAX_IO] = out;
        return 1;
    }
    /* Keras 3 (and kwargs-style Keras 2): a recurrent layer's initial_state=[h, c] as a call
     * argument; Keras 2 lists them after the sequence instead */
    const cJSON *is = tnt__kj_item(cJSON_GetArrayItem(cJSON_GetArrayItem(node, 0), 3), "initial_state"), *v;
    if (n == 1 && cJSON_IsArray(is)) {
        bool one = cJSON_IsString(cJSON_GetArrayItem(is, 0)); /* a single reference, not a list */
        cJSON_ArrayForEach(v, is) {
            if (n == TNT_MAX_LAYER_INPUTS) break;
            if ((r = resolve(j, one ? is : v, &in[n++], who)) <= 0) return r;
            if (one) break;
        }
    }
    int got = tnt_call_outputs(j->g, l->layer, n, in, TNT_MAX_IO, &l->outs[l->done * TNT_MAX_IO]);
    l->taken = true; /* consumed by the first call, even a failed one */
    if (got < 0) {
        tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
        return -1;
    }
    l->done++;
    return 1;
}

/* input_layers / output_layers, as Keras's map_tensors reads them: a reference [name, node,
 * tensor], or a list of them, or a dict of them (Keras 3 named inputs; Keras 2 too), nested. The
 * order is Keras's tree.flatten: lists in order, dicts by sorted key (each tensor's key goes to
 * keys[k] when keys is given). Returns the count, or -1 with the error. */
typedef struct io_list {
    tnt_ktensor t[TNT_MAX_IO];
    char keys[TNT_MAX_IO][TNT_NAME_MAX];
    int n;
    bool dict;
} io_list;

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static int io_flatten(const jgraph *j, const cJSON *v, const char *key, const char *dict_key, io_list *out, int depth) {
    bool leaf = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 3 && cJSON_IsString(cJSON_GetArrayItem(v, 0));
    if (depth > 8 || (!leaf && !cJSON_IsArray(v) && !cJSON_IsObject(v))) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Functional: %s: expected [layer, node, tensor] references in lists or "
                   "dicts", key);
        return -1;
    }
    if (leaf) {
        if (out->n == TNT_MAX_IO) {
            tnt__error(TNT_ERR_UNSUPPORTED, "from_json: Functional: more than %d %s", TNT_MAX_IO, key);
            return -1;
        }
        int r = resolve(j, v, &out->t[out->n], key);
        if (r == 0) tnt__error(TNT_ERR_FORMAT, "from_json: Functional: %s: a layer without that inbound node", key);
        if (r != 1) return -1;
        snprintf(out->keys[out->n++], TNT_NAME_MAX, "%s", dict_key ? dict_key : "");
        return 0;
    }
    int n = cJSON_GetArraySize(v);
    const cJSON **items = tnt__calloc((size_t)n + 1, sizeof *items);
    if (!items) return -1;
    int k = 0;
    for (const cJSON *e = v->child; e && k < n; e = e->next) items[k++] = e;
    if (cJSON_IsObject(v)) {
        out->dict = true;
        qsort(items, (size_t)k, sizeof *items, cmp_key); /* tree.flatten: sorted keys */
    }
    int r = 0;
    for (int i = 0; i < k && r == 0; i++)
        r = io_flatten(j, items[i], key, cJSON_IsObject(v) ? items[i]->string : dict_key, out, depth + 1);
    free(items);
    return r;
}

static int io_refs(const jgraph *j, const cJSON *v, const char *key, io_list *out) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Functional: missing required key \"%s\" (a list or dict)", key);
        return -1;
    }
    if (io_flatten(j, v, key, NULL, out, 0) != 0) return -1;
    /* written back as one flat dict of these keys (keras_json_write.c), which must read back in the
     * same order: one reference per key, keys ascending in the flattened order */
    for (int k = 0; out->dict && k < out->n; k++)
        if (!out->keys[k][0] || (k && strcmp(out->keys[k - 1], out->keys[k]) >= 0)) {
            tnt__error(TNT_ERR_UNSUPPORTED, "from_json: Functional: %s: reference %d %s%s%s: expected one reference "
                       "per dict key, the keys of nested dicts in the order of their parents'", key, k,
                       out->keys[k][0] ? "under key \"" : "outside every dict", out->keys[k], out->keys[k][0] ? "\"" : "");
            return -1;
        }
    if (out->n == 0) tnt__error(TNT_ERR_FORMAT, "from_json: Functional: %s is empty", key);
    return out->n > 0 ? out->n : -1;
}

static tnt_model *functional_from_json(const cJSON *cfg, int depth) {
    const cJSON *layers = tnt__kj_item(cfg, "layers");
    if (!cJSON_IsArray(layers)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Functional: missing required key \"layers\" (a list)");
        return NULL;
    }
    const cJSON *nm = tnt__kj_item(cfg, "name");
    const char *model_name = cJSON_IsString(nm) ? nm->valuestring : NULL;
    jgraph j = {0};
    tnt_model *m = NULL;
    int n = cJSON_GetArraySize(layers);
    j.ls = tnt__calloc((size_t)n + 1, sizeof *j.ls);
    if (!j.ls || !(j.g = tnt_graph_new())) goto done;
    const cJSON *e;
    cJSON_ArrayForEach(e, layers) {
        jlayer *l = &j.ls[j.n];
        const cJSON *lcfg;
        if (entry(e, j.n, &l->cls, &lcfg, &l->name) != TNT_OK) goto done;
        if (!l->name) {
            tnt__error(TNT_ERR_FORMAT, "from_json: layer %d (%s): missing required key \"name\"", j.n, l->cls);
            goto done;
        }
        if (find_layer(&j, l->name) >= 0) {
            tnt__error(TNT_ERR_FORMAT, "from_json: two layers are named \"%.64s\"", l->name);
            goto done;
        }
        tnt__kj_ctx k = {l->name, l->cls};
        j.n++;
        if (!strcmp(l->cls, "InputLayer")) {
            tnt_shape shape;
            tnt__dtype_policy dt;
            if (read_batch_shape(lcfg, &shape, &k) != TNT_OK || tnt__kj_input_dtype(lcfg, &dt, &k) != TNT_OK) goto done;
            if (!(l->outs = tnt__calloc(TNT_MAX_IO, sizeof *l->outs))) goto done;
            l->outs[0] = tnt_graph_input(j.g, shape, l->name);
            if (l->outs[0].id < 0) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
                goto done;
            }
            tnt__input_layer_set_dtype(tnt__graph_input_layer(j.g, l->outs[0]), dt);
            l->n_nodes = l->done = l->n_out = 1;
            continue;
        }
        l->nodes = tnt__kj_item(e, "inbound_nodes");
        if (!cJSON_IsArray(l->nodes)) {
            tnt__kj_error(&k, TNT_ERR_FORMAT, "missing required key \"inbound_nodes\" (a list)");
            goto done;
        }
        l->n_nodes = cJSON_GetArraySize(l->nodes);
        l->n_out = 1;
        if (!(l->outs = tnt__calloc(((size_t)l->n_nodes + 1) * TNT_MAX_IO, sizeof *l->outs))) goto done;
        if (is_model_class(l->cls)) {
            if (!(l->inner = nested_from_json(e, l->name, l->cls, depth))) goto done;
            /* Keras 2 counts the inner model's own node first; Keras 3 makes none */
            l->base = cJSON_IsObject(cJSON_GetArrayItem(l->nodes, 0)) ? 0 : 1;
            l->n_out = l->inner->n_outputs;
        } else if ((!strcmp(l->cls, "TFOpLambda") || !strcmp(l->cls, "SlicingOpLambda")) &&
                   !tnt__kj_item(lcfg, "tnt_ops")) {
            l->tfop = lcfg;
            l->n_out = tnt__tfop_outputs(lcfg, cJSON_GetArrayItem(l->nodes, 0));
        } else if (!(l->layer = layer_from_json(l->cls, lcfg, l->name))) goto done;
        else l->n_out = l->layer->n_outputs;
    }
    /* Keras's order: repeatedly call each layer on its next node once that node's inputs exist */
    for (bool progress = true; progress;) {
        progress = false;
        for (int i = 0; i < j.n; i++) {
            jlayer *l = &j.ls[i];
            while (l->done < l->n_nodes) {
                int r = call_node(&j, l);
                if (r < 0) goto done;
                if (r == 0) break;
                progress = true;
            }
        }
    }
    for (int i = 0; i < j.n; i++)
        if (j.ls[i].done < j.ls[i].n_nodes) {
            tnt__error(TNT_ERR_FORMAT, "from_json: layer \"%.64s\" inbound node %d: its inputs are never produced (a "
                       "cycle, or a reference to a node that does not exist)", j.ls[i].name, j.ls[i].done);
            goto done;
        }
    io_list ins, outs;
    int ni = io_refs(&j, tnt__kj_item(cfg, "input_layers"), "input_layers", &ins);
    int no = ni > 0 ? io_refs(&j, tnt__kj_item(cfg, "output_layers"), "output_layers", &outs) : -1;
    if (ni > 0 && no > 0) {
        m = tnt_functional(j.g, ni, ins.t, no, outs.t, model_name);
        if (!m) tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
    }
    if (m) { /* dict inputs and outputs keep their keys (and are written back as dicts) */
        m->inputs_dict = ins.dict, m->outputs_dict = outs.dict;
        memcpy(m->input_keys, ins.keys, sizeof ins.keys);
        memcpy(m->output_keys, outs.keys, sizeof outs.keys);
    }
done:
    for (int i = 0; i < j.n; i++) {
        if (j.ls[i].layer && !j.ls[i].taken) tnt_layer_free(j.ls[i].layer);
        tnt_model_free(j.ls[i].inner);
        free(j.ls[i].outs);
    }
    free(j.ls);
    tnt_graph_free(j.g);
    return m;
}

/* ---- entry points ------------------------------------------------------------------------- */

static tnt_model *model_from_cjson(const cJSON *root, int depth) {
    if (cJSON_IsArray(root)) return sequential_from_json(root, NULL, depth); /* the old bare list */
    const cJSON *cls = tnt__kj_item(root, "class_name");
    if (!cJSON_IsString(cls)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: missing required key \"class_name\" at the top level");
        return NULL;
    }
    const cJSON *cfg = tnt__kj_item(root, "config");
    if (!strcmp(cls->valuestring, "Sequential")) {
        if (cJSON_IsArray(cfg)) return sequential_from_json(cfg, NULL, depth); /* Keras 1 / early 2 */
        const cJSON *nm = tnt__kj_item(cfg, "name");
        return sequential_from_json(tnt__kj_item(cfg, "layers"), cJSON_IsString(nm) ? nm->valuestring : NULL, depth);
    }
    if (!strcmp(cls->valuestring, "Functional") || !strcmp(cls->valuestring, "Model")) {
        if (!cJSON_IsObject(cfg)) {
            tnt__error(TNT_ERR_FORMAT, "from_json: %s: missing required key \"config\"", cls->valuestring);
            return NULL;
        }
        return functional_from_json(cfg, depth);
    }
    tnt__error(TNT_ERR_UNSUPPORTED, "from_json: unsupported model class \"%.64s\" (expected Sequential, Functional "
               "or Model)", cls->valuestring);
    return NULL;
}

/* Keras 3 wrote the architecture: its keras_version says so, or, where there is none (Keras 3's
 * to_json and .h5 files), a Keras 3 mark: an InputLayer's batch_shape (Keras 2: batch_input_shape),
 * a DTypePolicy (or FloatDTypePolicy) dtype, a keras.src.models module. */
static bool keras3_marks(const cJSON *v, int depth) {
    for (const cJSON *e = v && depth < 64 ? v->child : NULL; e; e = e->next) {
        if (e->string && !strcmp(e->string, "batch_shape")) return true;
        if (e->string && cJSON_IsString(e) &&
            ((!strcmp(e->string, "module") && !strncmp(e->valuestring, "keras.src.models", 16)) ||
             (!strcmp(e->string, "class_name") && strstr(e->valuestring, "DTypePolicy")))) /* Float..., too */
            return true;
        if ((cJSON_IsObject(e) || cJSON_IsArray(e)) && keras3_marks(e, depth + 1)) return true;
    }
    return false;
}

static bool written_by_keras3(const cJSON *root) {
    const cJSON *v = tnt__kj_item(root, "keras_version");
    return cJSON_IsString(v) ? v->valuestring[0] == '3' : keras3_marks(root, 0);
}

tnt_model *tnt_model_from_json(const char *json) {
    if (!json) {
        tnt__error(TNT_ERR_ARG, "from_json: json is NULL");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, true);
    if (!root) {
        const char *pos = end && end >= json ? end : json;
        size_t len = strlen(json);
        if (pos > json + len) pos = json + len;
        int line = 1, col = 1;
        for (const char *p = json; p < pos; p++) {
            if (*p == '\n') line++, col = 1;
            else col++;
        }
        char near[24];
        size_t k = 0;
        for (const char *p = pos; *p && k < sizeof near - 1 && *p != '\n'; p++)
            near[k++] = (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?' : *p;
        near[k] = '\0';
        tnt__error(TNT_ERR_FORMAT, "from_json: JSON syntax error at line %d, column %d%s%s%s", line, col,
                   pos < json + len ? " near \"" : " (unexpected end of input)", pos < json + len ? near : "",
                   pos < json + len ? "\"" : "");
        return NULL;
    }
    saw_none = false;
    bool was_keras3 = tnt__kj_keras3();
    tnt__kj_set_keras3(written_by_keras3(root));
    tnt_model *m = model_from_cjson(root, 0);
    /* stand-ins for None dimensions: larger ones for valid convolutions and deep poolings */
    static const int64_t probes[] = {256, 1024};
    for (int i = 0; !m && saw_none && i < 2; i++) {
        tnt__probe_set(probes[i]);
        m = model_from_cjson(root, 0);
    }
    tnt__probe_set(0);
    tnt__kj_set_keras3(was_keras3);
    cJSON_Delete(root);
    return m;
}

tnt_model *tnt_clone_model(const tnt_model *m) {
    char *json = NULL;
    if (tnt_model_to_json(m, &json) != TNT_OK) {
        tnt__error_prefix(TNT_ERR_ARG, "clone_model: ");
        return NULL;
    }
    tnt_model *c = tnt_model_from_json(json);
    if (!c) tnt__error_prefix(TNT_ERR_ARG, "clone_model: ");
    free(json);
    return c;
}
