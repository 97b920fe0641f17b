/* graph.c: operation graphs: construction (the public tnt_opgraph_* calls), JSON both ways, the
 * attribute readers the operations share, and the table of operations (the families' parts). */
#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

/* ---- the table ---- */

static const tnt__op_def *const families[] = {tnt__ops_unary, tnt__ops_binary, tnt__ops_reduce, tnt__ops_matmul,
                                              tnt__ops_shape, tnt__ops_index,  tnt__ops_scan,   tnt__ops_random};
#define KIND_STRIDE 256 /* kind = family * KIND_STRIDE + position */

const tnt__op_def *tnt__op_find(const char *name, int *kind) {
    for (size_t f = 0; f < TNT_ARRAY_LEN(families); f++)
        for (int i = 0; families[f][i].name; i++)
            if (strcmp(families[f][i].name, name) == 0) {
                if (kind) *kind = (int)f * KIND_STRIDE + i;
                return &families[f][i];
            }
    return NULL;
}

const tnt__op_def *tnt__op_get(int kind) { return &families[kind / KIND_STRIDE][kind % KIND_STRIDE]; }

tnt_status tnt__op_error(const tnt__opnode *n, tnt_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tnt__error(s, "operation %d (%s): %s", n->index, tnt__op_get(n->kind)->name, msg);
}

/* ---- attribute readers ---- */

static tnt_status attr_fail(const char *key, const cJSON *v, const char *expected) {
    char *txt = v ? cJSON_PrintUnformatted(v) : NULL;
    tnt_status s = tnt__error(TNT_ERR_ARG, "attribute \"%s\" is %.60s (expected %s)", key, txt ? txt : "?", expected);
    free(txt);
    return s;
}

static bool as_int(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9e15) return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

tnt_status tnt__oa_axes(const cJSON *attrs, const char *key, tnt__op_attr *a) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key);
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    int64_t x;
    a->n_axes = 0;
    if (as_int(v, &x)) {
        a->axes[a->n_axes++] = (int)x;
    } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) <= TNT_MAX_DIMS) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!as_int(e, &x)) return attr_fail(key, v, "an int or a list of ints");
            a->axes[a->n_axes++] = (int)x;
        }
    } else {
        return attr_fail(key, v, "an int or a list of at most 8 ints");
    }
    a->has_axis = true;
    return TNT_OK;
}

tnt_status tnt__oa_int(const cJSON *attrs, const char *key, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key);
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    if (!as_int(v, out)) return attr_fail(key, v, "an int");
    return TNT_OK;
}

tnt_status tnt__oa_num(const cJSON *attrs, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key);
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    if (!cJSON_IsNumber(v)) return attr_fail(key, v, "a number");
    *out = v->valuedouble;
    return TNT_OK;
}

tnt_status tnt__oa_bool(const cJSON *attrs, const char *key, bool *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key);
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    if (!cJSON_IsBool(v)) return attr_fail(key, v, "true or false");
    *out = cJSON_IsTrue(v);
    return TNT_OK;
}

tnt_status tnt__oa_ints(const cJSON *attrs, const char *key, tnt__op_attr *a) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key), *e;
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    int64_t x;
    a->n_ints = 0;
    if (as_int(v, &x)) {
        a->ints[a->n_ints++] = x;
        return TNT_OK;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > (int)TNT_ARRAY_LEN(a->ints))
        return attr_fail(key, v, "a list of at most 16 ints");
    cJSON_ArrayForEach(e, v) {
        if (cJSON_IsNull(e)) x = -1;
        else if (!as_int(e, &x)) return attr_fail(key, v, "a list of ints");
        a->ints[a->n_ints++] = x;
    }
    return TNT_OK;
}

static const struct {
    const char *name;
    tnt__dt dt;
} dtype_names[] = {{"float32", TNT__F32}, {"float16", TNT__F32}, {"bfloat16", TNT__F32}, {"float64", TNT__F32},
                   {"int32", TNT__I32},   {"int64", TNT__I32},   {"int16", TNT__I32},    {"int8", TNT__I32},
                   {"uint8", TNT__I32},   {"uint16", TNT__I32},  {"uint32", TNT__I32},   {"bool", TNT__BOOL}};

tnt_status tnt__oa_dtype(const cJSON *attrs, const char *key, tnt__dt *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(attrs, key);
    if (!v || cJSON_IsNull(v)) return TNT_OK;
    if (cJSON_IsString(v))
        for (size_t i = 0; i < TNT_ARRAY_LEN(dtype_names); i++)
            if (strcmp(v->valuestring, dtype_names[i].name) == 0) {
                *out = dtype_names[i].dt;
                return TNT_OK;
            }
    return attr_fail(key, v, "a dtype: float32, float16, bfloat16, float64, int8..int64, uint8..uint32 or bool");
}

const char *tnt__dt_name(tnt__dt dt) { return dt == TNT__F32 ? "float32" : dt == TNT__I32 ? "int32" : "bool"; }

/* ---- construction ---- */

tnt_opgraph *tnt_opgraph_new(void) { return tnt__calloc(1, sizeof(tnt_opgraph)); }

void tnt_opgraph_free(tnt_opgraph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        cJSON_Delete(g->nodes[i].attrs);
        free(g->nodes[i].a.data);
    }
    free(g->nodes);
    free(g);
}

int tnt_opgraph_n_values(const tnt_opgraph *g) { return g ? g->n_values : 0; }

static bool shape_ok(tnt_shape s) {
    if (s.ndim < 0 || s.ndim > TNT_MAX_DIMS) return false;
    for (int d = 0; d < s.ndim; d++)
        if (s.dim[d] <= 0 && s.dim[d] != TNT_DIM_NONE) return false;
    return true;
}

int tnt_opgraph_input(tnt_opgraph *g, tnt_shape shape) {
    char b[96];
    if (!g) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_input: graph is NULL"), -1;
    if (g->n_weights || g->n_nodes)
        return tnt__error(TNT_ERR_STATE, "tnt_opgraph_input: inputs come before weights and operations"), -1;
    if (g->n_inputs >= TNT__MAX_OP_IN)
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_input: more than %d inputs", TNT__MAX_OP_IN), -1;
    if (!shape_ok(shape))
        return tnt__error(TNT_ERR_SHAPE, "tnt_opgraph_input: shape %s (expected rank 0..%d, sizes > 0 or None)",
                          tnt_shape_str(shape, b, sizeof b), TNT_MAX_DIMS), -1;
    g->inputs[g->n_inputs++] = shape;
    return g->n_values++;
}

int tnt_opgraph_weight(tnt_opgraph *g, const char *name, tnt_shape shape, const char *initializer, bool trainable) {
    char b[96];
    if (!g) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_weight: graph is NULL"), -1;
    if (g->n_nodes) return tnt__error(TNT_ERR_STATE, "tnt_opgraph_weight: weights come before operations"), -1;
    if (!name || !name[0] || strlen(name) >= TNT__OP_NAME_MAX)
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_weight: name %s (expected 1..%d characters)",
                          name ? "too long or empty" : "NULL", TNT__OP_NAME_MAX - 1), -1;
    if (g->n_weights >= TNT__MAX_OP_IN)
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_weight: more than %d weights", TNT__MAX_OP_IN), -1;
    bool ok = shape_ok(shape);
    for (int d = 0; ok && d < shape.ndim; d++) ok = shape.dim[d] > 0;
    if (!ok)
        return tnt__error(TNT_ERR_SHAPE, "tnt_opgraph_weight \"%s\": shape %s (expected sizes > 0)", name,
                          tnt_shape_str(shape, b, sizeof b)), -1;
    if (initializer && strlen(initializer) >= sizeof g->weights[0].initializer)
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_weight \"%s\": initializer name too long", name), -1;
    tnt__opweight *w = &g->weights[g->n_weights++];
    snprintf(w->name, sizeof w->name, "%s", name);
    w->shape = shape;
    snprintf(w->initializer, sizeof w->initializer, "%s", initializer ? initializer : "glorot_uniform");
    w->trainable = trainable;
    return g->n_values++;
}

/* Adds a node from its attributes object (taken over). */
static int add_node(tnt_opgraph *g, const char *op, int n_in, const int *in, cJSON *attrs) {
    int kind;
    const tnt__op_def *def = op ? tnt__op_find(op, &kind) : NULL;
    if (!def) {
        cJSON_Delete(attrs);
        return tnt__error(TNT_ERR_UNSUPPORTED, "operation %d: unknown operation \"%s\"", g->n_nodes,
                          op ? op : "(null)"), -1;
    }
    if (n_in < def->min_in || n_in > def->max_in) {
        cJSON_Delete(attrs);
        return tnt__error(TNT_ERR_ARG, "operation %d (%s): %d inputs (expected %d..%d)", g->n_nodes, op, n_in,
                          def->min_in, def->max_in), -1;
    }
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->n_values) {
            cJSON_Delete(attrs);
            return tnt__error(TNT_ERR_ARG, "operation %d (%s): input %d is value %d, which does not exist yet "
                              "(values 0..%d)", g->n_nodes, op, i, in[i], g->n_values - 1), -1;
        }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 16;
        tnt__opnode *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            cJSON_Delete(attrs);
            return tnt__error(TNT_ERR_NOMEM, "operation graph: out of memory"), -1;
        }
        g->nodes = nodes, g->cap_nodes = cap;
    }
    tnt__opnode *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->index = g->n_nodes, n->kind = kind, n->n_in = n_in, n->n_out = 1, n->attrs = attrs;
    if (n_in) memcpy(n->in, in, (size_t)n_in * sizeof *in);
    n->a.dtype = TNT__F32;
    if (def->parse) {
        tnt_status s = def->parse(n, attrs);
        if (s != TNT_OK) {
            tnt__error_prefix(s, "operation %d (%s): ", n->index, op);
            cJSON_Delete(attrs);
            free(n->a.data);
            return -1;
        }
    }
    n->out0 = g->n_values;
    g->n_values += n->n_out;
    g->n_nodes++;
    return n->out0;
}

int tnt_opgraph_op(tnt_opgraph *g, const char *op, int n_in, const int *in, const char *attrs_json) {
    if (!g) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_op: graph is NULL"), -1;
    if (n_in < 0 || n_in > TNT__MAX_OP_IN || (n_in && !in))
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_op %s: %d inputs (expected 0..%d)", op ? op : "", n_in,
                          TNT__MAX_OP_IN), -1;
    cJSON *attrs = attrs_json ? cJSON_Parse(attrs_json) : cJSON_CreateObject();
    if (!cJSON_IsObject(attrs)) {
        cJSON_Delete(attrs);
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_op %s: attributes are not a JSON object: %.80s", op ? op : "",
                          attrs_json), -1;
    }
    return add_node(g, op, n_in, in, attrs);
}

tnt_status tnt_opgraph_output(tnt_opgraph *g, int value) {
    if (!g) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_output: graph is NULL");
    if (value < 0 || value >= g->n_values)
        return tnt__error(TNT_ERR_ARG, "tnt_opgraph_output: value %d does not exist (values 0..%d)", value,
                          g->n_values - 1);
    if (g->n_outputs >= TNT__MAX_OP_IN) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_output: too many outputs");
    g->outputs[g->n_outputs++] = value;
    return TNT_OK;
}

/* ---- JSON ---- */

static cJSON *shape_json(tnt_shape s) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; a && d < s.ndim; d++)
        cJSON_AddItemToArray(a, s.dim[d] == TNT_DIM_NONE ? cJSON_CreateNull() : cJSON_CreateNumber((double)s.dim[d]));
    return a;
}

char *tnt_opgraph_to_json(const tnt_opgraph *g) {
    if (!g) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_to_json: graph is NULL"), NULL;
    cJSON *root = cJSON_CreateObject(), *ins = cJSON_AddArrayToObject(root, "inputs");
    cJSON_AddStringToObject(root, "format", "tnt_ops");
    cJSON_AddNumberToObject(root, "version", 1);
    for (int i = 0; i < g->n_inputs; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "shape", shape_json(g->inputs[i]));
        cJSON_AddItemToArray(ins, o);
    }
    cJSON *ws = cJSON_AddArrayToObject(root, "weights");
    for (int i = 0; i < g->n_weights; i++) {
        const tnt__opweight *w = &g->weights[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", w->name);
        cJSON_AddItemToObject(o, "shape", shape_json(w->shape));
        cJSON_AddStringToObject(o, "initializer", w->initializer);
        cJSON_AddBoolToObject(o, "trainable", w->trainable);
        cJSON_AddItemToArray(ws, o);
    }
    cJSON *ns = cJSON_AddArrayToObject(root, "nodes");
    for (int i = 0; i < g->n_nodes; i++) {
        const tnt__opnode *n = &g->nodes[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", tnt__op_get(n->kind)->name);
        cJSON *in = cJSON_AddArrayToObject(o, "in");
        for (int k = 0; k < n->n_in; k++) cJSON_AddItemToArray(in, cJSON_CreateNumber(n->in[k]));
        const cJSON *e;
        cJSON_ArrayForEach(e, n->attrs) cJSON_AddItemToObject(o, e->string, cJSON_Duplicate(e, true));
        cJSON_AddItemToArray(ns, o);
    }
    cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
    for (int i = 0; i < g->n_outputs; i++) cJSON_AddItemToArray(outs, cJSON_CreateNumber(g->outputs[i]));
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!txt) tnt__error(TNT_ERR_NOMEM, "tnt_opgraph_to_json: out of memory");
    return txt;
}

static tnt_status read_shape(const cJSON *v, bool allow_none, tnt_shape *s, const char *what) {
    const cJSON *e;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_ARG, "%s: \"shape\" is not a list of at most %d sizes", what, TNT_MAX_DIMS);
    s->ndim = 0;
    cJSON_ArrayForEach(e, v) {
        int64_t x;
        if (allow_none && cJSON_IsNull(e)) x = TNT_DIM_NONE;
        else if (!as_int(e, &x) || x <= 0)
            return tnt__error(TNT_ERR_ARG, "%s: \"shape\" has an entry that is not a size > 0%s", what,
                              allow_none ? " or null" : "");
        s->dim[s->ndim++] = x;
    }
    return TNT_OK;
}

tnt_opgraph *tnt_opgraph_from_json(const char *json) {
    char what[64];
    if (!json) return tnt__error(TNT_ERR_ARG, "tnt_opgraph_from_json: text is NULL"), NULL;
    cJSON *root = cJSON_Parse(json);
    tnt_opgraph *g = NULL;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tnt_ops") != 0) {
        tnt__error(TNT_ERR_FORMAT, "operation graph: not a JSON object with \"format\": \"tnt_ops\"");
        goto fail;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        tnt__error(TNT_ERR_FORMAT, "operation graph: version %g (this library reads version 1)",
                   cJSON_IsNumber(ver) ? ver->valuedouble : -1.0);
        goto fail;
    }
    if (!(g = tnt_opgraph_new())) goto fail;
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "inputs")) {
        tnt_shape s;
        snprintf(what, sizeof what, "operation graph: input %d", i++);
        if (read_shape(cJSON_GetObjectItemCaseSensitive(e, "shape"), true, &s, what) != TNT_OK ||
            tnt_opgraph_input(g, s) < 0)
            goto fail;
    }
    i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "weights")) {
        tnt_shape s;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"),
                    *init = cJSON_GetObjectItemCaseSensitive(e, "initializer"),
                    *tr = cJSON_GetObjectItemCaseSensitive(e, "trainable");
        snprintf(what, sizeof what, "operation graph: weight %d", i++);
        if (init && !cJSON_IsString(init)) {
            tnt__error(TNT_ERR_FORMAT, "%s: \"initializer\" is not a Keras initializer name", what);
            goto fail;
        }
        if (!cJSON_IsString(name)) {
            tnt__error(TNT_ERR_FORMAT, "%s: \"name\" is not a string", what);
            goto fail;
        }
        if (read_shape(cJSON_GetObjectItemCaseSensitive(e, "shape"), false, &s, what) != TNT_OK ||
            tnt_opgraph_weight(g, name->valuestring, s, cJSON_IsString(init) ? init->valuestring : NULL,
                               !cJSON_IsFalse(tr)) < 0)
            goto fail;
    }
    i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "nodes")) {
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "op"), *in = cJSON_GetObjectItemCaseSensitive(e, "in"), *x;
        int ids[TNT__MAX_OP_IN], n_in = 0;
        if (!cJSON_IsString(op) || !cJSON_IsArray(in) || cJSON_GetArraySize(in) > TNT__MAX_OP_IN) {
            tnt__error(TNT_ERR_FORMAT, "operation graph: node %d has no \"op\" name or no \"in\" list of at most %d "
                       "value ids", i, TNT__MAX_OP_IN);
            goto fail;
        }
        cJSON_ArrayForEach(x, in) {
            int64_t id;
            if (!as_int(x, &id) || id < 0 || id > 1 << 30) {
                tnt__error(TNT_ERR_FORMAT, "operation graph: node %d (%s): \"in\" holds something other than a "
                           "value id", i, op->valuestring);
                goto fail;
            }
            ids[n_in++] = (int)id;
        }
        cJSON *attrs = cJSON_Duplicate(e, true);
        cJSON_DeleteItemFromObjectCaseSensitive(attrs, "op");
        cJSON_DeleteItemFromObjectCaseSensitive(attrs, "in");
        if (add_node(g, op->valuestring, n_in, ids, attrs) < 0) goto fail;
        i++;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "outputs")) {
        int64_t id;
        if (!as_int(e, &id) || id < 0 || id > 1 << 30) {
            tnt__error(TNT_ERR_FORMAT, "operation graph: \"outputs\" holds something other than a value id");
            goto fail;
        }
        if (tnt_opgraph_output(g, (int)id) != TNT_OK) goto fail;
    }
    if (g->n_outputs == 0) {
        tnt__error(TNT_ERR_FORMAT, "operation graph: no outputs");
        goto fail;
    }
    cJSON_Delete(root);
    return g;
fail:
    cJSON_Delete(root);
    tnt_opgraph_free(g);
    return NULL;
}
