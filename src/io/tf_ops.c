/* tf_ops.c: Keras 2's TFOpLambda and SlicingOpLambda layers (TensorFlow functions called on
 * symbolic tensors, as Keras 2 saves them) read as traced layers of one operation.
 *
 * Keras 2 writes such a call as {"class_name": "TFOpLambda", "config": {"function":
 * "math.reduce_mean", ...}, "inbound_nodes": [["dense", 0, 0, {"axis": -1, "keepdims": true}]]}:
 * the first argument's tensors (one reference, or a list of them for concat/stack; a constant as
 * ["_CONSTANT_VALUE", -1, value]) with every other argument as a keyword on the first reference
 * (tensors as [layer, node, tensor], constants as JSON, slices as {"start", "stop", "step"}, the
 * ellipsis as {"class_name": "__ellipsis__"}). The function is TensorFlow's canonical name
 * ("math.reduce_mean", "__operators__.add", "compat.v1.transpose", "nn.relu", "concat"); a name
 * not in the table below is an error naming it. */
#include "io/tf_ops.h"

#include "layers/keras_config.h"
#include "ops/ops.h"

#include <stdio.h>

/* ---- the call's tensors ---- */

static bool is_ref(const cJSON *v) {
    return cJSON_IsArray(v) && cJSON_GetArraySize(v) >= 3 && cJSON_IsString(v->child) &&
           strcmp(v->child->valuestring, "_CONSTANT_VALUE") != 0 && cJSON_IsNumber(v->child->next);
}

/* The node as a list of first-argument entries (a single reference is wrapped). */
static const cJSON *first_args(const cJSON *node, cJSON **owned) {
    *owned = NULL;
    if (cJSON_IsArray(node) && cJSON_IsString(cJSON_GetArrayItem(node, 0))) { /* ["x", 0, 0, {...}] */
        *owned = cJSON_CreateArray();
        cJSON_AddItemToArray(*owned, cJSON_Duplicate(node, true));
        return *owned;
    }
    return node;
}

static const cJSON *call_kwargs(const cJSON *first) { return cJSON_GetArrayItem(cJSON_GetArrayItem(first, 0), 3); }

cJSON *tnt__tfop_refs(const cJSON *node) {
    cJSON *owned, *refs = cJSON_CreateArray();
    const cJSON *first = first_args(node, &owned), *e;
    cJSON_ArrayForEach(e, first)
        if (is_ref(e)) cJSON_AddItemToArray(refs, cJSON_Duplicate(e, true));
    cJSON_ArrayForEach(e, call_kwargs(first))
        if (is_ref(e)) cJSON_AddItemToArray(refs, cJSON_Duplicate(e, true));
    cJSON_Delete(owned);
    return refs;
}

/* ---- building the graph ---- */

typedef struct tb {
    tnt_opgraph *g;
    const cJSON *first, *kw;
    const char *fn, *who;
    int n_first;       /* tensors of the first argument (graph inputs 0..n_first-1) */
    int first_ids[TNT__MAX_OP_IN];
    int n_in;
} tb;

static tnt_status tb_error(const tb *b, const char *fmt, const char *detail) {
    return tnt__error(TNT_ERR_UNSUPPORTED, "from_json: %s: TensorFlow function \"%s\": %s%s", b->who, b->fn, fmt,
                      detail ? detail : "");
}

/* A constant node from JSON (a number, a bool or nested lists); -1 with the error. */
static int constant(tb *b, const cJSON *v) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddItemToObject(a, "value", cJSON_Duplicate(v, true));
    char *txt = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    int id = tnt_opgraph_op(b->g, "constant", 0, NULL, txt);
    free(txt);
    return id;
}

/* Value id of keyword key (a tensor among the inputs, or a constant); -2 when absent. */
static int kwarg_value(tb *b, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(b->kw, key), *e;
    if (!v || cJSON_IsNull(v)) return -2;
    if (!is_ref(v)) return constant(b, v);
    int k = b->n_first;
    cJSON_ArrayForEach(e, b->kw) {
        if (e == v) return k;
        k += is_ref(e);
    }
    return -1;
}

/* The first argument: value ids of its entries (tensors or constants). */
static tnt_status first_values(tb *b) {
    const cJSON *e;
    int k = 0;
    b->n_first = 0;
    cJSON_ArrayForEach(e, b->first) {
        if (k == TNT__MAX_OP_IN) return tb_error(b, "too many values", NULL);
        int id;
        if (is_ref(e)) id = b->n_first++;
        else id = constant(b, cJSON_GetArrayItem(e, 2)); /* ["_CONSTANT_VALUE", -1, value] */
        if (id < 0) return TNT_ERR_ARG;
        b->first_ids[k++] = id;
    }
    b->n_in = k;
    return TNT_OK;
}

/* Attributes: the JSON of the given keys of kw, renamed: pairs (tf key, our key). */
static char *attrs(const tb *b, const char *const *pairs, int n, cJSON *extra) {
    cJSON *a = extra ? extra : cJSON_CreateObject();
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(b->kw, pairs[2 * i]);
        if (v && !cJSON_IsNull(v) && !cJSON_GetObjectItemCaseSensitive(a, pairs[2 * i + 1]))
            cJSON_AddItemToObject(a, pairs[2 * i + 1], cJSON_Duplicate(v, true));
    }
    char *txt = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return txt;
}

static int op1(tb *b, const char *op, int x, const char *a) { return tnt_opgraph_op(b->g, op, 1, &x, a); }
static int op2(tb *b, const char *op, int x, int y, const char *a) { return tnt_opgraph_op(b->g, op, 2, (int[]){x, y}, a); }

/* Kinds of TensorFlow functions and how their arguments map. */
typedef enum { K_UNARY, K_BINARY, K_REDUCE, K_ARG, K_SPECIAL } kind;

static const struct fdef {
    const char *tf, *op;
    kind k;
} table[] = {
    {"__operators__.add", "add", K_BINARY}, {"math.add", "add", K_BINARY}, {"math.subtract", "subtract", K_BINARY},
    {"math.multiply", "multiply", K_BINARY}, {"math.truediv", "divide", K_BINARY}, {"math.divide", "divide", K_BINARY},
    {"math.pow", "power", K_BINARY}, {"math.maximum", "maximum", K_BINARY}, {"math.minimum", "minimum", K_BINARY},
    {"math.squared_difference", "squared_difference", K_BINARY}, {"math.floordiv", "floor_divide", K_BINARY},
    {"math.floormod", "mod", K_BINARY}, {"math.greater", "greater", K_BINARY},
    {"math.greater_equal", "greater_equal", K_BINARY}, {"math.less", "less", K_BINARY},
    {"math.less_equal", "less_equal", K_BINARY}, {"math.equal", "equal", K_BINARY}, {"__operators__.eq", "equal", K_BINARY},
    {"math.not_equal", "not_equal", K_BINARY}, {"__operators__.ne", "not_equal", K_BINARY},
    {"math.logical_and", "logical_and", K_BINARY}, {"math.logical_or", "logical_or", K_BINARY},
    {"nn.bias_add", "add", K_BINARY},
    {"math.negative", "negative", K_UNARY}, {"math.abs", "abs", K_UNARY}, {"math.sign", "sign", K_UNARY},
    {"math.exp", "exp", K_UNARY}, {"math.log", "log", K_UNARY}, {"math.log1p", "log1p", K_UNARY},
    {"math.expm1", "expm1", K_UNARY}, {"math.sqrt", "sqrt", K_UNARY}, {"math.rsqrt", "rsqrt", K_UNARY},
    {"math.square", "square", K_UNARY}, {"math.reciprocal", "reciprocal", K_UNARY}, {"math.sin", "sin", K_UNARY},
    {"math.cos", "cos", K_UNARY}, {"math.tanh", "tanh", K_UNARY}, {"math.sigmoid", "sigmoid", K_UNARY},
    {"nn.relu", "relu", K_UNARY}, {"nn.relu6", "relu6", K_UNARY}, {"nn.gelu", "gelu", K_UNARY},
    {"math.softplus", "softplus", K_UNARY}, {"nn.softplus", "softplus", K_UNARY}, {"nn.softsign", "softsign", K_UNARY},
    {"math.softsign", "softsign", K_UNARY}, {"nn.silu", "silu", K_UNARY}, {"nn.swish", "silu", K_UNARY},
    {"nn.elu", "elu", K_UNARY}, {"nn.leaky_relu", "leaky_relu", K_UNARY}, {"math.erf", "erf", K_UNARY},
    {"math.floor", "floor", K_UNARY}, {"math.ceil", "ceil", K_UNARY}, {"math.round", "round", K_UNARY},
    {"identity", "identity", K_UNARY}, {"stop_gradient", "stop_gradient", K_UNARY},
    {"math.logical_not", "logical_not", K_UNARY},
    {"math.reduce_sum", "sum", K_REDUCE}, {"math.reduce_mean", "mean", K_REDUCE}, {"math.reduce_max", "max", K_REDUCE},
    {"math.reduce_min", "min", K_REDUCE}, {"math.reduce_prod", "prod", K_REDUCE},
    {"math.reduce_variance", "var", K_REDUCE}, {"math.reduce_std", "std", K_REDUCE},
    {"math.reduce_logsumexp", "logsumexp", K_REDUCE}, {"math.reduce_any", "any", K_REDUCE},
    {"math.reduce_all", "all", K_REDUCE}, {"math.argmax", "argmax", K_ARG}, {"math.argmin", "argmin", K_ARG},
    {"linalg.matmul", "matmul", K_SPECIAL}, {"reshape", "reshape", K_SPECIAL}, {"transpose", "transpose", K_SPECIAL},
    {"expand_dims", "expand_dims", K_SPECIAL}, {"squeeze", "squeeze", K_SPECIAL}, {"concat", "concatenate", K_SPECIAL},
    {"stack", "stack", K_SPECIAL}, {"split", "split", K_SPECIAL}, {"tile", "tile", K_SPECIAL},
    {"repeat", "repeat", K_SPECIAL}, {"pad", "pad", K_SPECIAL}, {"broadcast_to", "broadcast_to", K_SPECIAL},
    {"cast", "cast", K_SPECIAL}, {"one_hot", "one_hot", K_SPECIAL}, {"gather", "take", K_SPECIAL},
    {"nn.softmax", "softmax", K_SPECIAL}, {"nn.log_softmax", "log_softmax", K_SPECIAL},
    {"math.cumsum", "cumsum", K_SPECIAL}, {"clip_by_value", "clip", K_SPECIAL}, {"where", "where", K_SPECIAL},
    {"math.add_n", "add", K_SPECIAL}, {"__operators__.getitem", "slice", K_SPECIAL},
};

/* The entry of TensorFlow's function name fn ("compat.v1." dropped; "X" also found as "math.X"
 * and "nn.X", the names TensorFlow exports twice). */
static const struct fdef *find_fn(const char *fn) {
    if (!strncmp(fn, "compat.v1.", 10)) fn += 10;
    char alt[2][96];
    snprintf(alt[0], sizeof alt[0], "math.%s", fn);
    snprintf(alt[1], sizeof alt[1], "nn.%s", fn);
    const char *tries[] = {fn, alt[0], alt[1]};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < TNT_ARRAY_LEN(table); i++)
            if (!strcmp(table[i].tf, tries[t])) return &table[i];
    return NULL;
}

static bool kw_true(const tb *b, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b->kw, key)); }

/* TensorFlow's slice spec (getitem's slice_spec) in our spec form. */
static cJSON *slice_spec(const cJSON *spec) {
    cJSON *out = cJSON_CreateArray();
    const cJSON *e, *one = cJSON_IsArray(spec) ? NULL : spec;
    for (e = one ? one : spec->child; e; e = one ? NULL : e->next) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(e, "class_name");
        if (cJSON_IsString(cls) && !strcmp(cls->valuestring, "__ellipsis__")) cJSON_AddItemToArray(out, cJSON_CreateString("..."));
        else cJSON_AddItemToArray(out, cJSON_Duplicate(e, true));
    }
    return out;
}

/* Builds the one operation; returns its output value id or -1 with an error. */
static int build(tb *b, const struct fdef *f) {
    static const char *const reduce_keys[] = {"axis", "axis", "keepdims", "keepdims", "keep_dims", "keepdims",
                                              "reduction_indices", "axis"};
    int x = b->n_in ? b->first_ids[0] : -1;
    if (x < 0) return tb_error(b, "no tensor argument", NULL), -1;
    char *a = NULL;
    int y = -1;
    switch (f->k) {
    case K_UNARY: {
        cJSON *extra = cJSON_CreateObject();
        if (!strcmp(f->op, "gelu")) cJSON_AddBoolToObject(extra, "approximate", kw_true(b, "approximate"));
        bool alpha = !strcmp(f->op, "leaky_relu") || !strcmp(f->op, "elu");
        a = attrs(b, (const char *const[]){"alpha", !strcmp(f->op, "leaky_relu") ? "negative_slope" : "alpha"}, alpha,
                  extra);
        y = op1(b, f->op, x, a);
        break;
    }
    case K_BINARY: {
        int other = kwarg_value(b, !strcmp(f->tf, "nn.bias_add") ? "bias" : "y");
        if (other == -2 && b->n_in > 1) other = b->first_ids[1];
        if (other < 0) return tb_error(b, "its second operand is missing", NULL), -1;
        y = op2(b, f->op, x, other, NULL);
        break;
    }
    case K_REDUCE:
        y = op1(b, f->op, x, a = attrs(b, reduce_keys, 4, NULL));
        break;
    case K_ARG: { /* TensorFlow's argmax: axis None means 0 */
        cJSON *extra = cJSON_CreateObject();
        if (!cJSON_GetObjectItemCaseSensitive(b->kw, "axis") || cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b->kw, "axis")))
            cJSON_AddNumberToObject(extra, "axis", 0);
        y = op1(b, f->op, x, a = attrs(b, (const char *const[]){"axis", "axis"}, 1, extra));
        break;
    }
    case K_SPECIAL:
        if (!strcmp(f->tf, "linalg.matmul")) {
            int other = kwarg_value(b, "b");
            if (other < 0) return tb_error(b, "argument b is missing", NULL), -1;
            const char *swap = "{\"equation\": \"...ij->...ji\"}";
            if (kw_true(b, "transpose_a") || kw_true(b, "adjoint_a")) x = op1(b, "einsum", x, swap);
            if (kw_true(b, "transpose_b") || kw_true(b, "adjoint_b")) other = op1(b, "einsum", other, swap);
            y = op2(b, "matmul", x, other, NULL);
        } else if (!strcmp(f->op, "concatenate") || !strcmp(f->op, "stack") || !strcmp(f->op, "add")) {
            cJSON *extra = cJSON_CreateObject();
            if (!cJSON_GetObjectItemCaseSensitive(b->kw, "axis")) cJSON_AddNumberToObject(extra, "axis", 0);
            a = attrs(b, (const char *const[]){"axis", "axis"}, 1, extra);
            if (!strcmp(f->op, "add")) { /* add_n */
                y = x;
                for (int k = 1; k < b->n_in && y >= 0; k++) y = op2(b, "add", y, b->first_ids[k], NULL);
            } else {
                y = tnt_opgraph_op(b->g, f->op, b->n_in, b->first_ids, a);
            }
        } else if (!strcmp(f->op, "slice")) {
            cJSON *extra = cJSON_CreateObject();
            const cJSON *spec = cJSON_GetObjectItemCaseSensitive(b->kw, "slice_spec");
            if (!spec) {
                cJSON_Delete(extra);
                return tb_error(b, "no slice_spec", NULL), -1;
            }
            cJSON_AddItemToObject(extra, "spec", slice_spec(spec));
            y = op1(b, "slice", x, a = attrs(b, NULL, 0, extra));
        } else if (!strcmp(f->op, "split")) {
            const cJSON *ns = cJSON_GetObjectItemCaseSensitive(b->kw, "num_or_size_splits");
            cJSON *extra = cJSON_CreateObject();
            if (cJSON_IsArray(ns)) { /* sizes into split points */
                cJSON *pts = cJSON_AddArrayToObject(extra, "indices_or_sections");
                double at = 0;
                for (const cJSON *e = ns->child; e && e->next; e = e->next)
                    at += e->valuedouble, cJSON_AddItemToArray(pts, cJSON_CreateNumber(at));
            } else if (ns) {
                cJSON_AddItemToObject(extra, "indices_or_sections", cJSON_Duplicate(ns, true));
            }
            if (!cJSON_GetObjectItemCaseSensitive(b->kw, "axis")) cJSON_AddNumberToObject(extra, "axis", 0);
            y = op1(b, "split", x, a = attrs(b, (const char *const[]){"axis", "axis"}, 1, extra));
        } else if (!strcmp(f->op, "take")) {
            int idx = kwarg_value(b, "indices");
            if (idx < 0) return tb_error(b, "argument indices is missing", NULL), -1;
            const cJSON *bd = cJSON_GetObjectItemCaseSensitive(b->kw, "batch_dims");
            if (bd && !(cJSON_IsNumber(bd) && bd->valuedouble == 0)) return tb_error(b, "batch_dims other than 0", NULL), -1;
            cJSON *extra = cJSON_CreateObject();
            if (!cJSON_GetObjectItemCaseSensitive(b->kw, "axis")) cJSON_AddNumberToObject(extra, "axis", 0);
            y = op2(b, "take", x, idx, a = attrs(b, (const char *const[]){"axis", "axis"}, 1, extra));
        } else if (!strcmp(f->op, "where")) {
            int p = kwarg_value(b, "x"), q = kwarg_value(b, "y");
            if (p < 0 || q < 0) return tb_error(b, "where without x and y", NULL), -1;
            y = tnt_opgraph_op(b->g, "where", 3, (int[]){x, p, q}, NULL);
        } else if (!strcmp(f->op, "one_hot")) {
            const cJSON *on = cJSON_GetObjectItemCaseSensitive(b->kw, "on_value"),
                        *off = cJSON_GetObjectItemCaseSensitive(b->kw, "off_value");
            if ((on && !cJSON_IsNull(on) && !(cJSON_IsNumber(on) && on->valuedouble == 1)) ||
                (off && !cJSON_IsNull(off) && !(cJSON_IsNumber(off) && off->valuedouble == 0)))
                return tb_error(b, "on_value and off_value other than 1 and 0", NULL), -1;
            y = op1(b, "one_hot", x, a = attrs(b, (const char *const[]){"depth", "num_classes", "axis", "axis"}, 2, NULL));
        } else if (!strcmp(f->op, "cumsum")) {
            if (kw_true(b, "exclusive") || kw_true(b, "reverse")) return tb_error(b, "exclusive or reverse", NULL), -1;
            cJSON *extra = cJSON_CreateObject();
            if (!cJSON_GetObjectItemCaseSensitive(b->kw, "axis")) cJSON_AddNumberToObject(extra, "axis", 0);
            y = op1(b, "cumsum", x, a = attrs(b, (const char *const[]){"axis", "axis"}, 1, extra));
        } else if (!strcmp(f->op, "pad")) {
            const cJSON *mode = cJSON_GetObjectItemCaseSensitive(b->kw, "mode");
            if (cJSON_IsString(mode) && strcmp(mode->valuestring, "CONSTANT") && strcmp(mode->valuestring, "constant"))
                return tb_error(b, "mode ", mode->valuestring), -1;
            y = op1(b, "pad", x, a = attrs(b, (const char *const[]){"paddings", "pad_width", "constant_values",
                                                                     "constant_values"}, 2, NULL));
        } else {
            /* one tensor and renamed keywords */
            static const struct {
                const char *op;
                const char *keys[6];
                int n;
            } simple[] = {
                {"reshape", {"shape", "shape"}, 1},          {"transpose", {"perm", "axes"}, 1},
                {"expand_dims", {"axis", "axis", "dim", "axis"}, 2},
                {"squeeze", {"axis", "axis", "squeeze_dims", "axis"}, 2},
                {"tile", {"multiples", "repeats"}, 1},       {"repeat", {"repeats", "repeats", "axis", "axis"}, 2},
                {"broadcast_to", {"shape", "shape"}, 1},     {"cast", {"dtype", "dtype"}, 1},
                {"softmax", {"axis", "axis", "dim", "axis"}, 2}, {"log_softmax", {"axis", "axis", "dim", "axis"}, 2},
                {"clip", {"clip_value_min", "x_min", "clip_value_max", "x_max"}, 2},
            };
            for (size_t i = 0; i < TNT_ARRAY_LEN(simple); i++)
                if (!strcmp(simple[i].op, f->op)) {
                    y = op1(b, f->op, x, a = attrs(b, simple[i].keys, simple[i].n, NULL));
                    break;
                }
        }
        break;
    }
    free(a);
    return y;
}

int tnt__tfop_outputs(const cJSON *cfg, const cJSON *node) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cfg, "function");
    if (!cJSON_IsString(fn)) return 1;
    const struct fdef *f = find_fn(fn->valuestring);
    if (!f || strcmp(f->op, "split")) return 1;
    cJSON *owned;
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(call_kwargs(first_args(node, &owned)), "num_or_size_splits");
    int n = cJSON_IsArray(ns) ? cJSON_GetArraySize(ns) : cJSON_IsNumber(ns) ? (int)ns->valuedouble : 1;
    cJSON_Delete(owned);
    return n < 1 ? 1 : TNT_MIN(n, TNT_MAX_LAYER_OUTPUTS); /* more: the layer refuses them */
}

tnt_layer *tnt__tfop_layer(const char *cls, const cJSON *cfg, const char *name, const cJSON *node, int n_inputs,
                           const tnt_shape *shapes, const char *who) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cfg, "function");
    if (!cJSON_IsString(fn)) {
        tnt__error(TNT_ERR_FORMAT, "from_json: %s: %s without a \"function\" name", who, cls);
        return NULL;
    }
    const struct fdef *f = find_fn(fn->valuestring);
    bool slicing = !strcmp(cls, "SlicingOpLambda");
    if (!f || slicing != !strcmp(f->op, "slice")) {
        tnt__error(TNT_ERR_UNSUPPORTED, "from_json: %s: %s calls the TensorFlow function \"%s\", which this library "
                   "does not map to its operations", who, cls, fn->valuestring);
        return NULL;
    }
    cJSON *owned;
    tb b = {.g = tnt_opgraph_new(), .fn = fn->valuestring, .who = who};
    b.first = first_args(node, &owned);
    b.kw = call_kwargs(b.first);
    for (int k = 0; b.g && k < n_inputs; k++) {
        tnt_shape s = tnt__shape_with_batch(TNT_DIM_NONE, shapes[k]);
        if (tnt_opgraph_input(b.g, s) < 0) goto fail;
    }
    if (!b.g || first_values(&b) != TNT_OK) goto fail;
    int y = build(&b, f);
    if (y < 0) goto fail;
    int n_out = !strcmp(f->op, "split") ? tnt_opgraph_n_values(b.g) - y : 1;
    for (int k = 0; k < n_out; k++)
        if (tnt_opgraph_output(b.g, y + k) != TNT_OK) goto fail;
    cJSON_Delete(owned);
    tnt_layer *l = tnt_traced_layer(b.g, cls, name);
    if (!l) tnt__error_prefix(TNT_ERR_ARG, "from_json: %s: ", who);
    return l;
fail:
    if (!strstr(tnt_last_error(), who)) tnt__error_prefix(TNT_ERR_FORMAT, "from_json: %s: %s \"%s\": ", who, cls, fn->valuestring);
    cJSON_Delete(owned);
    tnt_opgraph_free(b.g);
    return NULL;
}
