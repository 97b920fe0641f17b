/* keras_json.c: Keras 2 JSON architecture (model.to_json() / model_from_json), weight-free.
 *
 * Writing: {"class_name": "Sequential" | "Functional", "config": {...}, "keras_version": "2.11.0",
 * "backend": "tensorflow"}, each layer {"class_name", "config"} (Functional: plus "name" and
 * "inbound_nodes"). The base keys name, trainable, dtype are written here; each layer's own keys
 * by its get_config (in the layer's file, which reads its private fields).
 *
 * Reading: a registry maps Keras class names to builders that read a config and call the public
 * constructors; Sequential models are rebuilt with tnt_model_add, Functional ones through the
 * public graph API (tnt_graph_input, tnt_call_n, tnt_call_attention, tnt_functional). */
#include "io/keras_json.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>

#define KERAS_VERSION "2.11.0"

/* ---- helpers for get_config --------------------------------------------------------------- */

double tnt__kj_f(float v) {
    char b[48];
    for (int p = 6; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)v);
        if (strtof(b, NULL) == v) break;
    }
    return strtod(b, NULL);
}

const char *const tnt__kj_kernel_nulls[] = {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                            "kernel_constraint", "bias_constraint", NULL};

const char *tnt__kj_padding_name(tnt_padding p) {
    return p == TNT_PADDING_SAME ? "same" : p == TNT_PADDING_CAUSAL ? "causal" : "valid";
}

typedef struct init_name {
    tnt_initializer init;
    const char *cls, *snake, *alias;
} init_name;

static const init_name inits[] = {
    {TNT_INIT_GLOROT_UNIFORM, "GlorotUniform", "glorot_uniform", NULL},
    {TNT_INIT_GLOROT_NORMAL, "GlorotNormal", "glorot_normal", NULL},
    {TNT_INIT_HE_UNIFORM, "HeUniform", "he_uniform", NULL},
    {TNT_INIT_HE_NORMAL, "HeNormal", "he_normal", NULL},
    {TNT_INIT_LECUN_UNIFORM, "LecunUniform", "lecun_uniform", NULL},
    {TNT_INIT_LECUN_NORMAL, "LecunNormal", "lecun_normal", NULL},
    {TNT_INIT_ZEROS, "Zeros", "zeros", "zero"},
    {TNT_INIT_ONES, "Ones", "ones", "one"},
    {TNT_INIT_RANDOM_UNIFORM, "RandomUniform", "random_uniform", "uniform"},
    {TNT_INIT_RANDOM_NORMAL, "RandomNormal", "random_normal", "normal"},
};

tnt_status tnt__kj_add_initializer(cJSON *c, const char *key, tnt_initializer init) {
    const init_name *n = NULL;
    for (size_t i = 0; i < TNT_ARRAY_LEN(inits); i++)
        if (inits[i].init == init) n = &inits[i];
    if (!n) return tnt__error(TNT_ERR_UNSUPPORTED, "JSON config: initializer %d has no Keras name", (int)init);
    cJSON *o = cJSON_AddObjectToObject(c, key);
    TNT_KJ(o);
    TNT_KJ(cJSON_AddStringToObject(o, "class_name", n->cls));
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    TNT_KJ(cfg);
    if (init == TNT_INIT_RANDOM_UNIFORM) {
        TNT_KJ(cJSON_AddNumberToObject(cfg, "minval", -0.05));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "maxval", 0.05));
    } else if (init == TNT_INIT_RANDOM_NORMAL) {
        TNT_KJ(cJSON_AddNumberToObject(cfg, "mean", 0.0));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "stddev", 0.05));
    }
    if (init != TNT_INIT_ZEROS && init != TNT_INIT_ONES) TNT_KJ(cJSON_AddNullToObject(cfg, "seed"));
    return TNT_OK;
}

tnt_status tnt__kj_add_activation(cJSON *c, tnt_activation act, float alpha) {
    if ((unsigned)act >= TNT_ACT_COUNT)
        return tnt__error(TNT_ERR_ARG, "JSON config: activation %d out of range", (int)act);
    if (act == TNT_ACT_LEAKY_RELU && alpha != 0.0f && alpha != 0.2f)
        return tnt__error(TNT_ERR_UNSUPPORTED,
                          "JSON config: activation leaky_relu with alpha %g (Keras's activation name carries "
                          "only the default 0.2)", (double)alpha);
    if (act == TNT_ACT_ELU && alpha != 0.0f && alpha != 1.0f)
        return tnt__error(TNT_ERR_UNSUPPORTED,
                          "JSON config: activation elu with alpha %g (Keras's activation name carries only the "
                          "default 1.0)", (double)alpha);
    TNT_KJ(cJSON_AddStringToObject(c, "activation", tnt_activation_name(act)));
    return TNT_OK;
}

tnt_status tnt__kj_add_ints(cJSON *c, const char *key, int n, const int *v) {
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    for (int i = 0; i < n; i++) TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i])));
    return TNT_OK;
}

tnt_status tnt__kj_add_2d_margins(cJSON *c, const char *key, int top, int bottom, int left, int right) {
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    cJSON *h = cJSON_CreateIntArray((int[]){top, bottom}, 2), *w = cJSON_CreateIntArray((int[]){left, right}, 2);
    if (!h || !w || !cJSON_AddItemToArray(a, h)) {
        cJSON_Delete(h);
        cJSON_Delete(w);
        TNT_KJ(NULL);
    }
    TNT_KJ(cJSON_AddItemToArray(a, w));
    TNT_KJ(cJSON_AddStringToObject(c, "data_format", "channels_last"));
    return TNT_OK;
}

tnt_status tnt__kj_add_nulls(cJSON *c, const char *const *keys) {
    for (; *keys; keys++) TNT_KJ(cJSON_AddNullToObject(c, *keys));
    return TNT_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

static tnt_status add_batch_shape(cJSON *c, const char *key, tnt_shape s) {
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNull()));
    for (int i = 0; i < s.ndim; i++) TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s.dim[i])));
    return TNT_OK;
}

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
        if ((s = add_batch_shape(c, "batch_input_shape", tnt__input_layer_shape(l))) == TNT_OK &&
            (!cJSON_AddStringToObject(c, "dtype", "float32") || !cJSON_AddFalseToObject(c, "sparse") ||
             !cJSON_AddFalseToObject(c, "ragged") || !cJSON_AddStringToObject(c, "name", l->name)))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    } else {
        if (!cJSON_AddStringToObject(c, "name", l->name) || !cJSON_AddTrueToObject(c, "trainable"))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        if (s == TNT_OK && batch_shape) s = add_batch_shape(c, "batch_input_shape", *batch_shape);
        if (s == TNT_OK && !cJSON_AddStringToObject(c, "dtype", "float32"))
            s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
        if (s == TNT_OK && l->ops->get_config && (s = l->ops->get_config(l, c)) != TNT_OK)
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
        if (ok && nd->in[2] != nd->in[1]) ok = cJSON_AddItemToObject(kw, "key", tensor_ref(m, prod, call, nd->in[2], NULL));
        if (ok && has_mask) ok = cJSON_AddItemToObject(kw, "attention_mask", tensor_ref(m, prod, call, nd->in[3], NULL));
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
        tnt_shape in = m->tensor_shape[0];
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
    if (!root || !cJSON_AddStringToObject(root, "class_name", m->functional ? "Functional" : "Sequential") ||
        !(cfg = cJSON_AddObjectToObject(root, "config")) || !cJSON_AddStringToObject(cfg, "name", m->name))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK) s = m->functional ? functional_to_json(m, cfg) : sequential_to_json(m, cfg);
    if (s == TNT_OK && (!cJSON_AddStringToObject(root, "keras_version", KERAS_VERSION) ||
                        !cJSON_AddStringToObject(root, "backend", "tensorflow")))
        s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    if (s == TNT_OK && !(*json = cJSON_PrintUnformatted(root))) s = tnt__error(TNT_ERR_NOMEM, "to_json: out of memory");
    cJSON_Delete(root);
    return s;
}

/* ---- reading: config values --------------------------------------------------------------- */

/* The layer being read, for messages. */
typedef struct kctx {
    const char *name, *cls;
} kctx;

static tnt_status kerr(const kctx *k, tnt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static tnt_status kerr(const kctx *k, tnt_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tnt__error(s, "from_json: layer \"%.64s\" (%.64s): %s", k->name, k->cls, msg);
}

static const cJSON *item(const cJSON *o, const char *key) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static bool absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

static bool as_int(const cJSON *v, int *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= -2147483647.0 && d <= 2147483647.0) || d != floor(d)) return false;
    *out = (int)d;
    return true;
}

/* Required (or defaulted, when def_ok) integer key. */
static tnt_status get_int(const cJSON *cfg, const char *key, bool required, int def, int *out, const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) {
        if (required) return kerr(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        *out = def;
        return TNT_OK;
    }
    if (!as_int(v, out)) return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected an integer", key);
    return TNT_OK;
}

static tnt_status get_num(const cJSON *cfg, const char *key, bool required, double def, double *out, const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) {
        if (required) return kerr(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        *out = def;
        return TNT_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected a number", key);
    *out = v->valuedouble;
    return TNT_OK;
}

static tnt_status get_bool(const cJSON *cfg, const char *key, bool def, bool *out, const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) {
        *out = def;
        return TNT_OK;
    }
    if (!cJSON_IsBool(v)) return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected true or false", key);
    *out = cJSON_IsTrue(v);
    return TNT_OK;
}

/* NULL when absent or null; an error (and *bad) when not a string. */
static const char *get_str(const cJSON *cfg, const char *key, bool *bad, const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) return NULL;
    if (!cJSON_IsString(v)) {
        kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected a string", key);
        *bad = true;
        return NULL;
    }
    return v->valuestring;
}

/* n positive integers (sizes, strides, rates): a list of n, or one integer repeated (Keras accepts both). */
static tnt_status get_ints(const cJSON *cfg, const char *key, bool required, int n, const int *def, int *out,
                           const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) {
        if (required) return kerr(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        for (int i = 0; i < n; i++) out[i] = def ? def[i] : 0;
        return TNT_OK;
    }
    int x = 0;
    if (as_int(v, &x)) {
        for (int i = 0; i < n; i++) out[i] = x;
    } else {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
            return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of %d integers", key, n);
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!as_int(e, &out[i++])) return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of %d integers", key, n);
        }
    }
    /* kernel, pool, stride and dilation sizes: the layer constructors read 0 as "the default",
     * so a 0 in the file must stop here rather than silently become 1 */
    for (int i = 0; i < n; i++)
        if (out[i] < 1) return kerr(k, TNT_ERR_ARG, "key \"%s\": value %d (expected >= 1)", key, out[i]);
    return TNT_OK;
}

/* A list of 1..max integers (Reshape, Permute). */
static tnt_status get_int_list(const cJSON *cfg, const char *key, int max, int *out, int *n, const kctx *k) {
    const cJSON *v = item(cfg, key);
    if (absent(v)) return kerr(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > max)
        return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of 1 to %d integers", key, max);
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!as_int(e, &out[(*n)++])) return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected integers", key);
    }
    return TNT_OK;
}

/* Regularizers, constraints and other options this library does not implement: null only. */
static tnt_status check_nulls(const cJSON *cfg, const char *const *keys, const kctx *k) {
    for (; *keys; keys++)
        if (!absent(item(cfg, *keys)))
            return kerr(k, TNT_ERR_UNSUPPORTED, "\"%s\" is set (only null is supported)", *keys);
    return TNT_OK;
}

static tnt_status check_data_format(const cJSON *cfg, const kctx *k) {
    bool bad = false;
    const char *f = get_str(cfg, "data_format", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    if (f && strcmp(f, "channels_last"))
        return kerr(k, TNT_ERR_UNSUPPORTED, "data_format \"%s\" (only \"channels_last\" is supported)", f);
    return TNT_OK;
}

static tnt_status get_activation(const cJSON *cfg, tnt_activation *act, const kctx *k) {
    const cJSON *v = item(cfg, "activation");
    *act = TNT_ACT_LINEAR;
    if (absent(v)) return TNT_OK;
    if (!cJSON_IsString(v)) return kerr(k, TNT_ERR_UNSUPPORTED, "activation: expected a Keras activation name");
    int a = tnt_activation_from_name(v->valuestring);
    if (a < 0) return kerr(k, TNT_ERR_UNSUPPORTED, "unsupported activation \"%.64s\"", v->valuestring);
    *act = (tnt_activation)a;
    return TNT_OK;
}

static bool num_is(const cJSON *cfg, const char *key, double want) {
    const cJSON *v = item(cfg, key);
    return absent(v) || (cJSON_IsNumber(v) && fabs(v->valuedouble - want) < 1e-9);
}

/* An initializer: a name ("glorot_uniform") or {"class_name": "GlorotUniform", "config": {...}}. */
static tnt_status get_init(const cJSON *cfg, const char *key, tnt_initializer def, tnt_initializer *out, const kctx *k) {
    const cJSON *v = item(cfg, key);
    *out = def;
    if (absent(v)) return TNT_OK;
    const char *name = NULL;
    const cJSON *icfg = NULL;
    if (cJSON_IsString(v)) name = v->valuestring;
    else if (cJSON_IsObject(v) && cJSON_IsString(item(v, "class_name"))) {
        name = item(v, "class_name")->valuestring;
        icfg = item(v, "config");
    } else return kerr(k, TNT_ERR_FORMAT, "%s: expected an initializer name or {\"class_name\", \"config\"}", key);
    if (!strcmp(name, "VarianceScaling")) { /* Keras 2.0-2.2 wrote glorot_uniform etc. this way */
        const cJSON *sc = item(icfg, "scale"), *mo = item(icfg, "mode"), *di = item(icfg, "distribution");
        double scale = cJSON_IsNumber(sc) ? sc->valuedouble : 1.0;
        const char *mode = cJSON_IsString(mo) ? mo->valuestring : "fan_in";
        const char *dist = cJSON_IsString(di) ? di->valuestring : "truncated_normal";
        bool uniform = !strcmp(dist, "uniform");
        bool normal = !strcmp(dist, "normal") || !strcmp(dist, "truncated_normal");
        if ((uniform || normal) && scale == 1.0 && !strcmp(mode, "fan_avg"))
            *out = uniform ? TNT_INIT_GLOROT_UNIFORM : TNT_INIT_GLOROT_NORMAL;
        else if ((uniform || normal) && scale == 2.0 && !strcmp(mode, "fan_in"))
            *out = uniform ? TNT_INIT_HE_UNIFORM : TNT_INIT_HE_NORMAL;
        else if ((uniform || normal) && scale == 1.0 && !strcmp(mode, "fan_in"))
            *out = uniform ? TNT_INIT_LECUN_UNIFORM : TNT_INIT_LECUN_NORMAL;
        else
            return kerr(k, TNT_ERR_UNSUPPORTED, "%s: VarianceScaling(scale %g, mode \"%.16s\", distribution \"%.24s\") "
                        "is not one of the Glorot, He or LeCun initializers", key, scale, mode, dist);
        return TNT_OK;
    }
    for (size_t i = 0; i < TNT_ARRAY_LEN(inits); i++) {
        const init_name *n = &inits[i];
        if (strcmp(name, n->cls) && strcmp(name, n->snake) && !(n->alias && !strcmp(name, n->alias))) continue;
        if (n->init == TNT_INIT_RANDOM_UNIFORM && (!num_is(icfg, "minval", -0.05) || !num_is(icfg, "maxval", 0.05)))
            return kerr(k, TNT_ERR_UNSUPPORTED, "%s: RandomUniform is supported with minval -0.05, maxval 0.05 only", key);
        if (n->init == TNT_INIT_RANDOM_NORMAL && (!num_is(icfg, "mean", 0.0) || !num_is(icfg, "stddev", 0.05)))
            return kerr(k, TNT_ERR_UNSUPPORTED, "%s: RandomNormal is supported with mean 0, stddev 0.05 only", key);
        *out = n->init;
        return TNT_OK;
    }
    return kerr(k, TNT_ERR_UNSUPPORTED, "%s: unsupported initializer \"%.64s\"", key, name);
}

/* The initializer must be this one (layers whose initializers are fixed). */
static tnt_status want_init(const cJSON *cfg, const char *key, tnt_initializer want, const kctx *k) {
    tnt_initializer got;
    tnt_status s = get_init(cfg, key, want, &got, k);
    if (s == TNT_OK && got != want)
        return kerr(k, TNT_ERR_UNSUPPORTED, "%s: only the Keras default is supported", key);
    return s;
}

static tnt_status get_padding(const cJSON *cfg, tnt_padding *p, const kctx *k) {
    bool bad = false;
    const char *s = get_str(cfg, "padding", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    *p = TNT_PADDING_VALID;
    if (!s || !strcmp(s, "valid")) return TNT_OK;
    if (!strcmp(s, "same")) *p = TNT_PADDING_SAME;
    else if (!strcmp(s, "causal")) *p = TNT_PADDING_CAUSAL;
    else return kerr(k, TNT_ERR_UNSUPPORTED, "padding \"%.32s\" (expected \"valid\", \"same\" or \"causal\")", s);
    return TNT_OK;
}

/* A constructor's failure, with the layer named. */
static tnt_layer *built(tnt_layer *l, const kctx *k) {
    if (!l) tnt__error_prefix(TNT_ERR_ARG, "from_json: layer \"%.64s\" (%.64s): ", k->name, k->cls);
    return l;
}

#define CK(x)                                                                                     \
    do {                                                                                          \
        if ((x) != TNT_OK) return NULL;                                                           \
    } while (0)

/* ---- reading: the registry of layer classes ----------------------------------------------- */

static tnt_layer *b_dense(const cJSON *c, const kctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int units = 0;
    bool use_bias = false;
    CK(get_int(c, "units", true, 0, &units, k));
    CK(get_activation(c, &o.activation, k));
    CK(get_bool(c, "use_bias", true, &use_bias, k));
    CK(get_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    CK(get_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.bias_initializer, k));
    CK(check_nulls(c, tnt__kj_kernel_nulls, k));
    o.no_bias = !use_bias;
    return built(tnt_dense(units, &o), k);
}

/* The keys Conv1D, Conv2D, DepthwiseConv2D and SeparableConv2D share; n = 1 or 2 spatial axes. */
static tnt_status conv_common(const cJSON *c, int n, int *ks, tnt_layer_opts *o, const kctx *k) {
    static const int ones[2] = {1, 1};
    bool use_bias = false;
    int groups = 0;
    tnt_status s;
    if ((s = get_ints(c, "kernel_size", true, n, NULL, ks, k)) != TNT_OK ||
        (s = get_ints(c, "strides", false, n, ones, o->strides, k)) != TNT_OK ||
        (s = get_ints(c, "dilation_rate", false, n, ones, o->dilation, k)) != TNT_OK ||
        (s = get_padding(c, &o->padding, k)) != TNT_OK || (s = check_data_format(c, k)) != TNT_OK ||
        (s = get_int(c, "groups", false, 1, &groups, k)) != TNT_OK || (s = get_activation(c, &o->activation, k)) != TNT_OK ||
        (s = get_bool(c, "use_bias", true, &use_bias, k)) != TNT_OK ||
        (s = get_init(c, "bias_initializer", TNT_INIT_ZEROS, &o->bias_initializer, k)) != TNT_OK)
        return s;
    static const char *const nulls[] = {"bias_regularizer", "activity_regularizer", "bias_constraint", NULL};
    if ((s = check_nulls(c, nulls, k)) != TNT_OK) return s;
    if (groups != 1) return kerr(k, TNT_ERR_UNSUPPORTED, "groups %d (only 1 is supported)", groups);
    o->no_bias = !use_bias;
    return TNT_OK;
}

static tnt_layer *b_conv(const cJSON *c, const kctx *k, bool one_d) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[2] = {0};
    CK(get_int(c, "filters", true, 0, &filters, k));
    CK(conv_common(c, one_d ? 1 : 2, ks, &o, k));
    CK(get_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    static const char *const nulls[] = {"kernel_regularizer", "kernel_constraint", NULL};
    CK(check_nulls(c, nulls, k));
    return built(one_d ? tnt_conv1d(filters, ks[0], &o) : tnt_conv2d(filters, ks[0], ks[1], &o), k);
}
static tnt_layer *b_conv2d(const cJSON *c, const kctx *k) { return b_conv(c, k, false); }
static tnt_layer *b_conv1d(const cJSON *c, const kctx *k) { return b_conv(c, k, true); }

static tnt_layer *b_depthwise(const cJSON *c, const kctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int ks[2] = {0}, dm = 0;
    CK(conv_common(c, 2, ks, &o, k));
    CK(get_int(c, "depth_multiplier", false, 1, &dm, k));
    CK(get_init(c, "depthwise_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    static const char *const nulls[] = {"depthwise_regularizer", "depthwise_constraint", NULL};
    CK(check_nulls(c, nulls, k));
    if (dm <= 0) {
        kerr(k, TNT_ERR_ARG, "depth_multiplier %d (expected > 0)", dm);
        return NULL;
    }
    return built(tnt_depthwise_conv2d(ks[0], ks[1], dm, &o), k);
}

static tnt_layer *b_separable(const cJSON *c, const kctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[2] = {0}, dm = 0;
    tnt_initializer dwi, pwi;
    CK(get_int(c, "filters", true, 0, &filters, k));
    CK(conv_common(c, 2, ks, &o, k));
    CK(get_int(c, "depth_multiplier", false, 1, &dm, k));
    CK(get_init(c, "depthwise_initializer", TNT_INIT_GLOROT_UNIFORM, &dwi, k));
    CK(get_init(c, "pointwise_initializer", TNT_INIT_GLOROT_UNIFORM, &pwi, k));
    static const char *const nulls[] = {"depthwise_regularizer", "pointwise_regularizer", "depthwise_constraint",
                                        "pointwise_constraint", "kernel_regularizer", "kernel_constraint", NULL};
    CK(check_nulls(c, nulls, k));
    if (dwi != pwi) {
        kerr(k, TNT_ERR_UNSUPPORTED, "depthwise_initializer and pointwise_initializer differ (only one initializer "
             "for both kernels is supported)");
        return NULL;
    }
    if (dm <= 0) {
        kerr(k, TNT_ERR_ARG, "depth_multiplier %d (expected > 0)", dm);
        return NULL;
    }
    o.kernel_initializer = dwi;
    return built(tnt_separable_conv2d(filters, ks[0], ks[1], dm, &o), k);
}

static tnt_layer *b_pool2d(const cJSON *c, const kctx *k, bool is_max) {
    static const int two[2] = {2, 2};
    tnt_layer_opts o = {.name = k->name};
    int ps[2] = {0};
    CK(get_ints(c, "pool_size", false, 2, two, ps, k));
    CK(get_ints(c, "strides", false, 2, ps, o.strides, k));
    CK(get_padding(c, &o.padding, k));
    CK(check_data_format(c, k));
    return built(is_max ? tnt_max_pooling2d(ps[0], ps[1], &o) : tnt_average_pooling2d(ps[0], ps[1], &o), k);
}
static tnt_layer *b_maxpool2d(const cJSON *c, const kctx *k) { return b_pool2d(c, k, true); }
static tnt_layer *b_avgpool2d(const cJSON *c, const kctx *k) { return b_pool2d(c, k, false); }

static tnt_layer *b_maxpool1d(const cJSON *c, const kctx *k) {
    static const int two[1] = {2};
    tnt_layer_opts o = {.name = k->name};
    int ps = 0;
    CK(get_ints(c, "pool_size", false, 1, two, &ps, k));
    CK(get_ints(c, "strides", false, 1, &ps, o.strides, k));
    CK(get_padding(c, &o.padding, k));
    CK(check_data_format(c, k));
    return built(tnt_max_pooling1d(ps, &o), k);
}

static tnt_status check_global(const cJSON *c, const kctx *k) {
    bool keepdims = false;
    tnt_status s;
    if ((s = check_data_format(c, k)) != TNT_OK || (s = get_bool(c, "keepdims", false, &keepdims, k)) != TNT_OK) return s;
    if (keepdims) return kerr(k, TNT_ERR_UNSUPPORTED, "keepdims true (only false is supported)");
    return TNT_OK;
}
static tnt_layer *b_gap2d(const cJSON *c, const kctx *k) {
    CK(check_global(c, k));
    return built(tnt_global_average_pooling2d(k->name), k);
}
static tnt_layer *b_gmp2d(const cJSON *c, const kctx *k) {
    CK(check_global(c, k));
    return built(tnt_global_max_pooling2d(k->name), k);
}
static tnt_layer *b_gap1d(const cJSON *c, const kctx *k) {
    CK(check_global(c, k));
    return built(tnt_global_average_pooling1d(k->name), k);
}

/* ZeroPadding2D padding / Cropping2D cropping: n, (h, w) or ((top, bottom), (left, right)). */
static tnt_status get_pads(const cJSON *c, const char *key, int def, int *tblr, const kctx *k) {
    const cJSON *v = item(c, key);
    int x = 0;
    if (absent(v)) {
        for (int i = 0; i < 4; i++) tblr[i] = def;
        return TNT_OK;
    }
    if (as_int(v, &x)) {
        for (int i = 0; i < 4; i++) tblr[i] = x;
        return TNT_OK;
    }
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2) {
        const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
        int h = 0, w = 0;
        if (as_int(a, &h) && as_int(b, &w)) {
            tblr[0] = tblr[1] = h;
            tblr[2] = tblr[3] = w;
            return TNT_OK;
        }
        if (cJSON_IsArray(a) && cJSON_IsArray(b) && cJSON_GetArraySize(a) == 2 && cJSON_GetArraySize(b) == 2 &&
            as_int(cJSON_GetArrayItem(a, 0), &tblr[0]) && as_int(cJSON_GetArrayItem(a, 1), &tblr[1]) &&
            as_int(cJSON_GetArrayItem(b, 0), &tblr[2]) && as_int(cJSON_GetArrayItem(b, 1), &tblr[3]))
            return TNT_OK;
    }
    return kerr(k, TNT_ERR_FORMAT, "key \"%s\": expected an integer, [h, w] or [[top, bottom], [left, right]]", key);
}

static tnt_layer *b_zpad(const cJSON *c, const kctx *k) {
    int p[4] = {0};
    CK(get_pads(c, "padding", 1, p, k));
    CK(check_data_format(c, k));
    return built(tnt_zero_padding2d(p[0], p[1], p[2], p[3], k->name), k);
}

static tnt_layer *b_crop(const cJSON *c, const kctx *k) {
    int p[4] = {0};
    CK(get_pads(c, "cropping", 0, p, k));
    CK(check_data_format(c, k));
    return built(tnt_cropping2d(p[0], p[1], p[2], p[3], k->name), k);
}

static tnt_layer *b_upsampling(const cJSON *c, const kctx *k) {
    static const int two[2] = {2, 2};
    int sz[2] = {0};
    bool bad = false;
    CK(get_ints(c, "size", false, 2, two, sz, k));
    CK(check_data_format(c, k));
    const char *interp = get_str(c, "interpolation", &bad, k);
    if (bad) return NULL;
    return built(tnt_upsampling2d(sz[0], sz[1], interp, k->name), k);
}

static tnt_layer *b_flatten(const cJSON *c, const kctx *k) {
    CK(check_data_format(c, k));
    return built(tnt_flatten(k->name), k);
}

static tnt_layer *b_reshape(const cJSON *c, const kctx *k) {
    int v[TNT_MAX_DIMS] = {0}, n = 0;
    CK(get_int_list(c, "target_shape", TNT_MAX_DIMS - 1, v, &n, k));
    tnt_shape t = {.ndim = n};
    for (int i = 0; i < n; i++) t.dim[i] = v[i];
    return built(tnt_reshape(t, k->name), k);
}

static tnt_layer *b_permute(const cJSON *c, const kctx *k) {
    int v[TNT_MAX_DIMS] = {0}, n = 0;
    CK(get_int_list(c, "dims", TNT_MAX_DIMS - 1, v, &n, k));
    return built(tnt_permute(n, v, k->name), k);
}

static tnt_layer *b_repeat(const cJSON *c, const kctx *k) {
    int n = 0;
    CK(get_int(c, "n", true, 0, &n, k));
    return built(tnt_repeat_vector(n, k->name), k);
}

static tnt_layer *b_dropout(const cJSON *c, const kctx *k) {
    double rate = 0, seed = 0;
    CK(get_num(c, "rate", true, 0, &rate, k));
    CK(get_num(c, "seed", false, 0, &seed, k));
    static const char *const nulls[] = {"noise_shape", NULL};
    CK(check_nulls(c, nulls, k));
    if (!(seed >= 0 && seed < 9007199254740992.0) || seed != floor(seed)) {
        kerr(k, TNT_ERR_FORMAT, "seed %g (expected a non-negative integer or null)", seed);
        return NULL;
    }
    return built(tnt_dropout((float)rate, (uint64_t)seed, k->name), k);
}

static tnt_layer *b_activation(const cJSON *c, const kctx *k) {
    tnt_layer_opts o = {.name = k->name};
    if (absent(item(c, "activation"))) {
        kerr(k, TNT_ERR_FORMAT, "missing required key \"activation\"");
        return NULL;
    }
    CK(get_activation(c, &o.activation, k));
    return built(tnt_activation_layer(o.activation, &o), k);
}

/* BatchNormalization's and LayerNormalization's axis: the last one (-1, or [rank - 1] as Keras
 * writes it after build; the model checks the rest: a single axis is all these layers do). */
static tnt_status check_norm_axis(const cJSON *c, const kctx *k) {
    const cJSON *v = item(c, "axis");
    int a = 0;
    if (absent(v) || as_int(v, &a)) return TNT_OK;
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && as_int(cJSON_GetArrayItem(v, 0), &a)) return TNT_OK;
    return kerr(k, TNT_ERR_UNSUPPORTED, "axis: only a single (the last) axis is supported");
}

static tnt_status check_center_scale(const cJSON *c, const kctx *k) {
    bool center = false, scale = false;
    tnt_status s;
    if ((s = get_bool(c, "center", true, &center, k)) != TNT_OK || (s = get_bool(c, "scale", true, &scale, k)) != TNT_OK)
        return s;
    if (!center || !scale) return kerr(k, TNT_ERR_UNSUPPORTED, "center and scale must be true");
    if ((s = want_init(c, "beta_initializer", TNT_INIT_ZEROS, k)) != TNT_OK ||
        (s = want_init(c, "gamma_initializer", TNT_INIT_ONES, k)) != TNT_OK)
        return s;
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                        "gamma_constraint", NULL};
    return check_nulls(c, nulls, k);
}

static tnt_layer *b_bn(const cJSON *c, const kctx *k, bool sync) {
    double momentum = 0, epsilon = 0;
    bool renorm = false;
    CK(check_norm_axis(c, k));
    CK(get_num(c, "momentum", false, 0.99, &momentum, k));
    CK(get_num(c, "epsilon", false, 1e-3, &epsilon, k));
    CK(check_center_scale(c, k));
    CK(want_init(c, "moving_mean_initializer", TNT_INIT_ZEROS, k));
    CK(want_init(c, "moving_variance_initializer", TNT_INIT_ONES, k));
    CK(get_bool(c, "renorm", false, &renorm, k));
    static const char *const nulls[] = {"virtual_batch_size", "adjustment", NULL};
    CK(check_nulls(c, nulls, k));
    if (renorm) {
        kerr(k, TNT_ERR_UNSUPPORTED, "renorm true (not supported)");
        return NULL;
    }
    if (momentum == 0.0 || epsilon == 0.0) {
        kerr(k, TNT_ERR_UNSUPPORTED, "momentum or epsilon 0 (not supported: 0 selects the default here)");
        return NULL;
    }
    return built(sync ? tnt_sync_batch_normalization((float)momentum, (float)epsilon, k->name)
                      : tnt_batch_normalization((float)momentum, (float)epsilon, k->name), k);
}
static tnt_layer *b_batchnorm(const cJSON *c, const kctx *k) { return b_bn(c, k, false); }
static tnt_layer *b_syncbn(const cJSON *c, const kctx *k) { return b_bn(c, k, true); }

static tnt_layer *b_layernorm(const cJSON *c, const kctx *k) {
    double epsilon = 0;
    CK(check_norm_axis(c, k));
    CK(get_num(c, "epsilon", false, 1e-3, &epsilon, k));
    CK(check_center_scale(c, k));
    if (epsilon == 0.0) {
        kerr(k, TNT_ERR_UNSUPPORTED, "epsilon 0 (not supported: 0 selects the default here)");
        return NULL;
    }
    return built(tnt_layer_normalization((float)epsilon, k->name), k);
}

static tnt_layer *b_embedding(const cJSON *c, const kctx *k) {
    int in_dim = 0, out_dim = 0;
    bool mask_zero = false;
    CK(get_int(c, "input_dim", true, 0, &in_dim, k));
    CK(get_int(c, "output_dim", true, 0, &out_dim, k));
    CK(get_bool(c, "mask_zero", false, &mask_zero, k));
    CK(want_init(c, "embeddings_initializer", TNT_INIT_RANDOM_UNIFORM, k));
    static const char *const nulls[] = {"embeddings_regularizer", "activity_regularizer", "embeddings_constraint",
                                        NULL};
    CK(check_nulls(c, nulls, k));
    return built(tnt_embedding(in_dim, out_dim, mask_zero, k->name), k);
}

static tnt_layer *b_mha(const cJSON *c, const kctx *k) {
    tnt_attention_opts o = {.name = k->name};
    int heads = 0, key_dim = 0, a = 0;
    double dropout = 0;
    bool use_bias = false;
    CK(get_int(c, "num_heads", true, 0, &heads, k));
    CK(get_int(c, "key_dim", true, 0, &key_dim, k));
    CK(get_int(c, "value_dim", false, 0, &o.value_dim, k));
    CK(get_num(c, "dropout", false, 0, &dropout, k));
    CK(get_bool(c, "use_bias", true, &use_bias, k));
    const cJSON *os = item(c, "output_shape");
    if (!absent(os) && !as_int(os, &o.output_dim) &&
        !(cJSON_IsArray(os) && cJSON_GetArraySize(os) == 1 && as_int(cJSON_GetArrayItem(os, 0), &o.output_dim))) {
        kerr(k, TNT_ERR_UNSUPPORTED, "output_shape: only an integer (or a list of one) is supported");
        return NULL;
    }
    const cJSON *ax = item(c, "attention_axes");
    if (!absent(ax) && !(as_int(ax, &a) && a == 1) &&
        !(cJSON_IsArray(ax) && cJSON_GetArraySize(ax) == 1 && as_int(cJSON_GetArrayItem(ax, 0), &a) && a == 1)) {
        kerr(k, TNT_ERR_UNSUPPORTED, "attention_axes: only null or [1] (the sequence axis) is supported");
        return NULL;
    }
    CK(get_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    CK(get_init(c, "bias_initializer", TNT_INIT_ZEROS, &o.bias_initializer, k));
    CK(check_nulls(c, tnt__kj_kernel_nulls, k));
    o.dropout = (float)dropout;
    o.no_bias = !use_bias;
    return built(tnt_multi_head_attention(heads, key_dim, &o), k);
}

static tnt_layer *b_add(const cJSON *c, const kctx *k) { (void)c; return built(tnt_add(k->name), k); }
static tnt_layer *b_subtract(const cJSON *c, const kctx *k) { (void)c; return built(tnt_subtract(k->name), k); }
static tnt_layer *b_multiply(const cJSON *c, const kctx *k) { (void)c; return built(tnt_multiply(k->name), k); }
static tnt_layer *b_average(const cJSON *c, const kctx *k) { (void)c; return built(tnt_average(k->name), k); }
static tnt_layer *b_maximum(const cJSON *c, const kctx *k) { (void)c; return built(tnt_maximum(k->name), k); }
static tnt_layer *b_minimum(const cJSON *c, const kctx *k) { (void)c; return built(tnt_minimum(k->name), k); }

static tnt_layer *b_concatenate(const cJSON *c, const kctx *k) {
    int axis = 0;
    CK(get_int(c, "axis", false, -1, &axis, k));
    return built(tnt_concatenate(axis, k->name), k);
}

typedef tnt_layer *(*layer_builder)(const cJSON *config, const kctx *k);
static const struct {
    const char *cls;
    layer_builder build;
} registry[] = {
    {"Dense", b_dense},
    {"Conv2D", b_conv2d},
    {"Convolution2D", b_conv2d},
    {"Conv1D", b_conv1d},
    {"Convolution1D", b_conv1d},
    {"DepthwiseConv2D", b_depthwise},
    {"SeparableConv2D", b_separable},
    {"SeparableConvolution2D", b_separable},
    {"MaxPooling2D", b_maxpool2d},
    {"MaxPool2D", b_maxpool2d},
    {"AveragePooling2D", b_avgpool2d},
    {"AvgPool2D", b_avgpool2d},
    {"MaxPooling1D", b_maxpool1d},
    {"MaxPool1D", b_maxpool1d},
    {"GlobalAveragePooling2D", b_gap2d},
    {"GlobalAvgPool2D", b_gap2d},
    {"GlobalMaxPooling2D", b_gmp2d},
    {"GlobalMaxPool2D", b_gmp2d},
    {"GlobalAveragePooling1D", b_gap1d},
    {"GlobalAvgPool1D", b_gap1d},
    {"ZeroPadding2D", b_zpad},
    {"Cropping2D", b_crop},
    {"UpSampling2D", b_upsampling},
    {"Flatten", b_flatten},
    {"Reshape", b_reshape},
    {"Permute", b_permute},
    {"RepeatVector", b_repeat},
    {"Dropout", b_dropout},
    {"Activation", b_activation},
    {"BatchNormalization", b_batchnorm},
    {"SyncBatchNormalization", b_syncbn},
    {"LayerNormalization", b_layernorm},
    {"Embedding", b_embedding},
    {"MultiHeadAttention", b_mha},
    {"Add", b_add},
    {"Subtract", b_subtract},
    {"Multiply", b_multiply},
    {"Average", b_average},
    {"Maximum", b_maximum},
    {"Minimum", b_minimum},
    {"Concatenate", b_concatenate},
};

static bool is_model_class(const char *cls) {
    return !strcmp(cls, "Sequential") || !strcmp(cls, "Functional") || !strcmp(cls, "Model");
}

/* The layer of one {"class_name", "config"} entry (not InputLayer). */
static tnt_layer *layer_from_json(const char *cls, const cJSON *cfg, const char *name) {
    kctx k = {name ? name : "?", cls};
    if (is_model_class(cls)) { /* callers read nested models themselves */
        kerr(&k, TNT_ERR_UNSUPPORTED, "a nested %s is not supported here", cls);
        return NULL;
    }
    for (size_t i = 0; i < TNT_ARRAY_LEN(registry); i++)
        if (!strcmp(registry[i].cls, cls)) {
            if (!cJSON_IsObject(cfg)) {
                kerr(&k, TNT_ERR_FORMAT, "\"config\" is missing or not an object");
                return NULL;
            }
            return registry[i].build(cfg, &k);
        }
    tnt__error(TNT_ERR_UNSUPPORTED, "from_json: layer \"%.64s\": unsupported layer class \"%.64s\"", k.name, cls);
    return NULL;
}

/* batch_input_shape [null, d1, d2, ...] -> (d1, d2, ...) */
static tnt_status shape_from_json(const cJSON *v, tnt_shape *s, const kctx *k) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 2 || cJSON_GetArraySize(v) > TNT_MAX_DIMS)
        return kerr(k, TNT_ERR_FORMAT, "batch_input_shape: expected [null, d1, ...] with 1 to %d dimensions",
                    TNT_MAX_DIMS - 1);
    s->ndim = 0;
    const cJSON *e;
    bool first = true;
    cJSON_ArrayForEach(e, v) {
        if (first) {
            first = false;
            continue; /* the batch dimension */
        }
        int d = 0;
        if (cJSON_IsNull(e))
            return kerr(k, TNT_ERR_UNSUPPORTED, "batch_input_shape: dimension %d is null (variable sizes are not "
                        "supported)", s->ndim + 1);
        if (!as_int(e, &d) || d <= 0) return kerr(k, TNT_ERR_FORMAT, "batch_input_shape: dimension %d is not a "
                                                  "positive integer", s->ndim + 1);
        s->dim[s->ndim++] = d;
    }
    return TNT_OK;
}

static const cJSON *batch_shape_key(const cJSON *cfg) {
    const cJSON *v = item(cfg, "batch_input_shape");
    return absent(v) ? item(cfg, "batch_shape") : v;
}

/* class_name, config and the layer name of one entry of "layers". */
static tnt_status entry(const cJSON *e, int i, const char **cls, const cJSON **cfg, const char **name) {
    const cJSON *c = item(e, "class_name");
    if (!cJSON_IsString(c))
        return tnt__error(TNT_ERR_FORMAT, "from_json: layer %d: missing required key \"class_name\"", i);
    *cls = c->valuestring;
    *cfg = item(e, "config");
    const cJSON *n = item(e, "name");
    if (!cJSON_IsString(n)) n = item(*cfg, "name");
    *name = cJSON_IsString(n) ? n->valuestring : NULL;
    if (!cJSON_IsObject(*cfg))
        return tnt__error(TNT_ERR_FORMAT, "from_json: layer %d (%s): missing required key \"config\"", i, *cls);
    return TNT_OK;
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
        kctx k = {lname ? lname : "?", cls};
        const cJSON *bs = batch_shape_key(cfg);
        if (i == 0 && (!strcmp(cls, "InputLayer") || !absent(bs))) {
            tnt_shape shape;
            char iname[TNT_NAME_MAX + 8];
            if (shape_from_json(bs, &shape, &k) != TNT_OK) goto done;
            snprintf(iname, sizeof iname, "%.50s_input", lname ? lname : "input");
            in = x = tnt_graph_input(g, shape, !strcmp(cls, "InputLayer") ? lname : iname);
            if (x.id < 0) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
                goto done;
            }
            if (!strcmp(cls, "InputLayer")) {
                i++;
                continue;
            }
        }
        if (x.id < 0) {
            kerr(&k, TNT_ERR_FORMAT, "%s", i == 0 ? "a Sequential model with nested models needs an input shape (an "
                 "InputLayer or batch_input_shape)" : "InputLayer must be the first layer");
            goto done;
        }
        if (is_model_class(cls)) {
            if (n_inner == 64) {
                kerr(&k, TNT_ERR_UNSUPPORTED, "more than 64 nested models");
                goto done;
            }
            tnt_model *inner = nested_from_json(e, k.name, cls, depth);
            if (!inner) goto done;
            inners[n_inner++] = inner;
            tnt_ktensor y;
            if (inner->n_inputs != 1 || inner->n_outputs != 1) {
                kerr(&k, TNT_ERR_UNSUPPORTED, "a nested model in a Sequential model must have one input and one output");
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
    cJSON_ArrayForEach(e, layers) {
        const cJSON *c = item(e, "class_name");
        if (cJSON_IsString(c) && is_model_class(c->valuestring)) return sequential_graph_from_json(layers, name, depth);
    }
    tnt_model *m = tnt_sequential(name);
    if (!m) return NULL;
    int i = 0;
    bool first_shape = false;
    tnt_shape shape = {0};
    cJSON_ArrayForEach(e, layers) {
        const char *cls, *lname;
        const cJSON *cfg;
        if (entry(e, i, &cls, &cfg, &lname) != TNT_OK) goto fail;
        kctx k = {lname ? lname : "?", cls};
        tnt_layer *l;
        if (!strcmp(cls, "InputLayer")) {
            if (shape_from_json(batch_shape_key(cfg), &shape, &k) != TNT_OK) goto fail;
            l = tnt_input_layer(shape, lname);
        } else {
            const cJSON *bs = batch_shape_key(cfg);
            if (i == 0 && !absent(bs)) {
                if (shape_from_json(bs, &shape, &k) != TNT_OK) goto fail;
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
        !as_int(cJSON_GetArrayItem(ref, 1), &ni) || !as_int(cJSON_GetArrayItem(ref, 2), &ti)) {
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

/* Calls layer l on its next inbound node if its inputs exist: 1 done, 0 not yet, -1 error. */
static int call_node(jgraph *j, jlayer *l) {
    const cJSON *node = cJSON_GetArrayItem(l->nodes, l->done);
    char who[160];
    snprintf(who, sizeof who, "layer \"%.64s\" (%.64s) inbound node %d", l->name, l->cls, l->done);
    /* Keras 2: a list of references; also accept a node given as a dict {"args": ...}: no */
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
        if (!absent(v = item(kw, "value")) && (r = resolve(j, v, &value, who)) <= 0) return r;
        if (!absent(v = item(kw, "key")) && (r = resolve(j, v, &key, who)) <= 0) return r;
        if (!absent(v = item(kw, "attention_mask")) && (r = resolve(j, v, &mask, who)) <= 0) return r;
        if (!absent(v = item(kw, "use_causal_mask"))) {
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
    } else {
        out = tnt_call_n(j->g, l->layer, n, in);
    }
    l->taken = true; /* consumed by the first call, even a failed one */
    if (out.id < 0) {
        tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
        return -1;
    }
    l->outs[l->done++ * TNT_MAX_IO] = out;
    return 1;
}

/* input_layers / output_layers: [[name, 0, 0], ...] or a single [name, 0, 0]. */
static int io_refs(const jgraph *j, const cJSON *v, const char *key, tnt_ktensor *t) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Functional: missing required key \"%s\" (a list)", key);
        return -1;
    }
    if (cJSON_IsString(cJSON_GetArrayItem(v, 0))) {
        int r = resolve(j, v, &t[0], key);
        if (r == 0) tnt__error(TNT_ERR_FORMAT, "from_json: Functional: %s: a layer without that inbound node", key);
        return r == 1 ? 1 : -1;
    }
    if (cJSON_GetArraySize(v) > TNT_MAX_IO) {
        tnt__error(TNT_ERR_UNSUPPORTED, "from_json: Functional: %d %s (at most %d)", cJSON_GetArraySize(v), key, TNT_MAX_IO);
        return -1;
    }
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        int r = resolve(j, e, &t[n], key);
        if (r == 0) tnt__error(TNT_ERR_FORMAT, "from_json: Functional: %s: a layer without that inbound node", key);
        if (r != 1) return -1;
        n++;
    }
    return n;
}

static tnt_model *functional_from_json(const cJSON *cfg, int depth) {
    const cJSON *layers = item(cfg, "layers");
    if (!cJSON_IsArray(layers)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: Functional: missing required key \"layers\" (a list)");
        return NULL;
    }
    const cJSON *nm = item(cfg, "name");
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
        kctx k = {l->name, l->cls};
        j.n++;
        if (!strcmp(l->cls, "InputLayer")) {
            tnt_shape shape;
            if (shape_from_json(batch_shape_key(lcfg), &shape, &k) != TNT_OK) goto done;
            if (!(l->outs = tnt__calloc(TNT_MAX_IO, sizeof *l->outs))) goto done;
            l->outs[0] = tnt_graph_input(j.g, shape, l->name);
            if (l->outs[0].id < 0) {
                tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
                goto done;
            }
            l->n_nodes = l->done = l->n_out = 1;
            continue;
        }
        l->nodes = item(e, "inbound_nodes");
        if (!cJSON_IsArray(l->nodes)) {
            kerr(&k, TNT_ERR_FORMAT, "missing required key \"inbound_nodes\" (a list)");
            goto done;
        }
        l->n_nodes = cJSON_GetArraySize(l->nodes);
        l->n_out = 1;
        if (!(l->outs = tnt__calloc(((size_t)l->n_nodes + 1) * TNT_MAX_IO, sizeof *l->outs))) goto done;
        if (is_model_class(l->cls)) {
            if (!(l->inner = nested_from_json(e, l->name, l->cls, depth))) goto done;
            l->base = 1;
            l->n_out = l->inner->n_outputs;
        } else if (!(l->layer = layer_from_json(l->cls, lcfg, l->name))) goto done;
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
    tnt_ktensor ins[TNT_MAX_IO], outs[TNT_MAX_IO];
    int ni = io_refs(&j, item(cfg, "input_layers"), "input_layers", ins);
    int no = ni > 0 ? io_refs(&j, item(cfg, "output_layers"), "output_layers", outs) : -1;
    if (ni > 0 && no > 0) {
        m = tnt_functional(j.g, ni, ins, no, outs, model_name);
        if (!m) tnt__error_prefix(TNT_ERR_ARG, "from_json: ");
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
    const cJSON *cls = item(root, "class_name");
    if (!cJSON_IsString(cls)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: missing required key \"class_name\" at the top level");
        return NULL;
    }
    const cJSON *cfg = item(root, "config");
    if (!strcmp(cls->valuestring, "Sequential")) {
        if (cJSON_IsArray(cfg)) return sequential_from_json(cfg, NULL, depth); /* Keras 1 / early 2 */
        const cJSON *nm = item(cfg, "name");
        return sequential_from_json(item(cfg, "layers"), cJSON_IsString(nm) ? nm->valuestring : NULL, depth);
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
    tnt_model *m = model_from_cjson(root, 0);
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
