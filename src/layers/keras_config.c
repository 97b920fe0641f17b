/* keras_config.c: the shared pieces of the layers' Keras configs (keras_config.h): writing
 * initializers, activations and tuples in Keras's spelling, and reading them back with errors that
 * name the layer, its class and the bad key. */
#include "layers/keras_config.h"
#include "layers/regularizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* ---- writing ------------------------------------------------------------------------------ */

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

/* Keras's names: the class (written), its snake case, an alias; tnt__kj_init also takes Keras 2's
 * compatibility forms with a "V2" suffix (GlorotUniformV2, glorot_uniformV2). */
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
    /* Keras 3.0-3.7 wrote OrthogonalInitializer and IdentityInitializer (their first exported
     * names); 3.8+ Orthogonal and Identity, as Keras 2 */
    {TNT_INIT_ORTHOGONAL, "Orthogonal", "orthogonal", "OrthogonalInitializer"},
};

/* The parameterized ones (layer.h's tnt__init_spec), by kind. */
static const struct {
    const char *cls, *snake, *alias;
} spec_names[] = {
    [TNT__IK_RANDOM_NORMAL] = {"RandomNormal", "random_normal", "normal"},
    [TNT__IK_RANDOM_UNIFORM] = {"RandomUniform", "random_uniform", "uniform"},
    [TNT__IK_TRUNCATED_NORMAL] = {"TruncatedNormal", "truncated_normal", NULL},
    [TNT__IK_CONSTANT] = {"Constant", "constant", NULL},
    [TNT__IK_IDENTITY] = {"Identity", "identity", "IdentityInitializer"},
    [TNT__IK_ORTHOGONAL] = {"Orthogonal", "orthogonal", "OrthogonalInitializer"},
    [TNT__IK_VARIANCE_SCALING] = {"VarianceScaling", "variance_scaling", NULL},
};

static const char *const fan_modes[] = {"fan_in", "fan_out", "fan_avg"};
static const char *const dists[] = {"truncated_normal", "untruncated_normal", "uniform"};

static tnt_status add_spec_config(cJSON *cfg, const tnt__init_spec *sp) {
    switch (sp->kind) {
    case TNT__IK_RANDOM_NORMAL:
    case TNT__IK_TRUNCATED_NORMAL:
        TNT_KJ(cJSON_AddNumberToObject(cfg, "mean", sp->a));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "stddev", sp->b));
        break;
    case TNT__IK_RANDOM_UNIFORM:
        TNT_KJ(cJSON_AddNumberToObject(cfg, "minval", sp->a));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "maxval", sp->b));
        break;
    case TNT__IK_CONSTANT: TNT_KJ(cJSON_AddNumberToObject(cfg, "value", sp->a)); return TNT_OK;
    case TNT__IK_IDENTITY: TNT_KJ(cJSON_AddNumberToObject(cfg, "gain", sp->a)); return TNT_OK;
    case TNT__IK_ORTHOGONAL: TNT_KJ(cJSON_AddNumberToObject(cfg, "gain", sp->a)); break;
    case TNT__IK_VARIANCE_SCALING:
        TNT_KJ(cJSON_AddNumberToObject(cfg, "scale", sp->a));
        TNT_KJ(cJSON_AddStringToObject(cfg, "mode", fan_modes[sp->mode]));
        TNT_KJ(cJSON_AddStringToObject(cfg, "distribution", dists[sp->dist]));
        break;
    }
    TNT_KJ(cJSON_AddNullToObject(cfg, "seed"));
    return TNT_OK;
}

tnt_status tnt__kj_add_initializer(cJSON *c, const char *key, tnt_initializer init) {
    const init_name *n = NULL;
    const tnt__init_spec *sp = tnt__init_spec_of(init);
    for (size_t i = 0; i < TNT_ARRAY_LEN(inits); i++)
        if (inits[i].init == init) n = &inits[i];
    if (!n && !sp) return tnt__error(TNT_ERR_UNSUPPORTED, "JSON config: initializer %d has no Keras name", (int)init);
    cJSON *o = cJSON_AddObjectToObject(c, key);
    TNT_KJ(o);
    TNT_KJ(cJSON_AddStringToObject(o, "class_name", sp ? spec_names[sp->kind].cls : n->cls));
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    TNT_KJ(cfg);
    if (sp) return add_spec_config(cfg, sp);
    if (init == TNT_INIT_RANDOM_UNIFORM) {
        TNT_KJ(cJSON_AddNumberToObject(cfg, "minval", -0.05));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "maxval", 0.05));
    } else if (init == TNT_INIT_RANDOM_NORMAL) {
        TNT_KJ(cJSON_AddNumberToObject(cfg, "mean", 0.0));
        TNT_KJ(cJSON_AddNumberToObject(cfg, "stddev", 0.05));
    } else if (init == TNT_INIT_ORTHOGONAL) {
        TNT_KJ(cJSON_AddNumberToObject(cfg, "gain", 1.0));
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

tnt_status tnt__kj_add_margins(cJSON *c, const char *key, int n, const int *pairs) {
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    for (int i = 0; i < n; i++) TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateIntArray(pairs + 2 * i, 2)));
    return TNT_OK;
}

tnt_status tnt__kj_add_data_format(cJSON *c, const tnt_layer *l) {
    TNT_KJ(cJSON_AddStringToObject(c, "data_format", l->channels_first ? "channels_first" : "channels_last"));
    return TNT_OK;
}

tnt_status tnt__kj_add_nulls(cJSON *c, const char *const *keys) {
    for (; *keys; keys++) TNT_KJ(cJSON_AddNullToObject(c, *keys));
    return TNT_OK;
}

tnt_status tnt__kj_add_batch_shape(cJSON *c, tnt_shape s) {
    cJSON *a = cJSON_AddArrayToObject(c, "batch_input_shape");
    TNT_KJ(a);
    TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNull()));
    for (int i = 0; i < s.ndim; i++)
        TNT_KJ(cJSON_AddItemToArray(a, s.dim[i] < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)s.dim[i])));
    return TNT_OK;
}

/* ---- reading ------------------------------------------------------------------------------ */

static tnt_status kj_verror(const tnt__kj_ctx *k, tnt_status s, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return tnt__error(s, "from_json: layer \"%.64s\" (%.64s): %s", k->name, k->cls, msg);
}

tnt_status tnt__kj_error(const tnt__kj_ctx *k, tnt_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kj_verror(k, s, fmt, ap);
    va_end(ap);
    return s;
}

tnt_layer *tnt__kj_fail(const tnt__kj_ctx *k, tnt_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kj_verror(k, s, fmt, ap);
    va_end(ap);
    return NULL;
}

tnt_layer *tnt__kj_built(tnt_layer *l, const tnt__kj_ctx *k) {
    if (!l) tnt__error_prefix(TNT_ERR_ARG, "from_json: layer \"%.64s\" (%.64s): ", k->name, k->cls);
    return l;
}

const cJSON *tnt__kj_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    /* Keras 2.0-2.1 wrote a numpy value (LeakyReLU's alpha after K.cast_to_floatx) as {"type":
     * "ndarray", "value": its tolist()} (models.py get_json_type): the value is meant */
    const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
    if (cJSON_IsString(t) && !strcmp(t->valuestring, "ndarray") && cJSON_GetArraySize(v) == 2 &&
        cJSON_GetObjectItemCaseSensitive(v, "value"))
        return cJSON_GetObjectItemCaseSensitive(v, "value");
    return v;
}

bool tnt__kj_absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

bool tnt__kj_as_int(const cJSON *v, int *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= -2147483647.0 && d <= 2147483647.0) || d != floor(d)) return false;
    *out = (int)d;
    return true;
}

const cJSON *tnt__kj_list(const cJSON *v) {
    if (cJSON_IsArray(v)) return v;
    const cJSON *cls = tnt__kj_item(v, "class_name"), *items = tnt__kj_item(v, "items");
    return cJSON_IsString(cls) && !strcmp(cls->valuestring, "__tuple__") && cJSON_IsArray(items) ? items : NULL;
}

tnt_status tnt__kj_int(const cJSON *cfg, const char *key, bool required, int def, int *out, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) {
        if (required) return tnt__kj_error(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        *out = def;
        return TNT_OK;
    }
    if (!tnt__kj_as_int(v, out)) return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected an integer", key);
    return TNT_OK;
}

tnt_status tnt__kj_seed(const cJSON *cfg, uint64_t *seed, const tnt__kj_ctx *k) {
    double v = 0;
    *seed = 0;
    if (tnt__kj_absent(tnt__kj_item(cfg, "seed"))) return TNT_OK;
    TNT_KJ_S(tnt__kj_num(cfg, "seed", true, 0, &v, k));
    if (!(v >= 0 && v == floor(v)))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"seed\": %g (expected a whole number >= 0)", v);
    *seed = (uint64_t)v;
    return TNT_OK;
}

tnt_status tnt__kj_factor(const cJSON *cfg, const char *key, bool required, bool symmetric, float *lo, float *hi,
                          bool *set, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key), *items = tnt__kj_list(v);
    if (set) *set = false;
    if (tnt__kj_absent(v)) {
        if (required) return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\" missing (expected a factor)", key);
        return TNT_OK;
    }
    if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        *lo = (float)(symmetric ? -fabs(x) : x), *hi = (float)(symmetric ? fabs(x) : x);
    } else if (items && cJSON_GetArraySize(items) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(items, 0)) &&
               cJSON_IsNumber(cJSON_GetArrayItem(items, 1))) {
        *lo = (float)cJSON_GetArrayItem(items, 0)->valuedouble, *hi = (float)cJSON_GetArrayItem(items, 1)->valuedouble;
    } else {
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\" (expected a number or a (lower, upper) pair)", key);
    }
    if (set) *set = true;
    return TNT_OK;
}

tnt_status tnt__kj_num(const cJSON *cfg, const char *key, bool required, double def, double *out,
                       const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) {
        if (required) return tnt__kj_error(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        *out = def;
        return TNT_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected a number", key);
    *out = v->valuedouble;
    return TNT_OK;
}

tnt_status tnt__kj_bool(const cJSON *cfg, const char *key, bool def, bool *out, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) {
        *out = def;
        return TNT_OK;
    }
    if (cJSON_IsBool(v)) *out = cJSON_IsTrue(v);
    else if (cJSON_IsNumber(v) && (v->valuedouble == 0.0 || v->valuedouble == 1.0)) *out = v->valuedouble == 1.0;
    else return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected true or false", key);
    return TNT_OK;
}

tnt_status tnt__kj_want_bool(const cJSON *cfg, const char *key, bool want, const tnt__kj_ctx *k) {
    bool got = want;
    tnt_status s = tnt__kj_bool(cfg, key, want, &got, k);
    if (s == TNT_OK && got != want)
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s %s (only %s is supported)", key, got ? "true" : "false",
                             want ? "true" : "false");
    return s;
}

const char *tnt__kj_str(const cJSON *cfg, const char *key, bool *bad, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) return NULL;
    if (!cJSON_IsString(v)) {
        tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected a string", key);
        *bad = true;
        return NULL;
    }
    return v->valuestring;
}

tnt_status tnt__kj_ints(const cJSON *cfg, const char *key, bool required, int n, const int *def, int *out,
                           const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) {
        if (required) return tnt__kj_error(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
        for (int i = 0; i < n; i++) out[i] = def ? def[i] : 0;
        return TNT_OK;
    }
    int x = 0;
    if (tnt__kj_as_int(v, &x)) {
        for (int i = 0; i < n; i++) out[i] = x;
        return TNT_OK;
    }
    const cJSON *list = tnt__kj_list(v);
    if (!list || cJSON_GetArraySize(list) != n)
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of %d integers", key, n);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (!tnt__kj_as_int(e, &out[i++]))
            return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of %d integers", key, n);
    }
    return TNT_OK;
}

tnt_status tnt__kj_sizes(const cJSON *cfg, const char *key, bool required, int n, const int *def, int *out,
                        const tnt__kj_ctx *k) {
    tnt_status s = tnt__kj_ints(cfg, key, required, n, def, out, k);
    /* the layer constructors read 0 as "the default", so a 0 in a file must stop here rather
     * than silently become 1 */
    for (int i = 0; s == TNT_OK && i < n; i++)
        if (out[i] < 1) s = tnt__kj_error(k, TNT_ERR_ARG, "key \"%s\": value %d (expected >= 1)", key, out[i]);
    return s;
}

tnt_status tnt__kj_int_list(const cJSON *cfg, const char *key, int max, int *out, int *n, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    if (tnt__kj_absent(v)) return tnt__kj_error(k, TNT_ERR_FORMAT, "missing required key \"%s\"", key);
    const cJSON *list = tnt__kj_list(v);
    if (!list || cJSON_GetArraySize(list) < 1 || cJSON_GetArraySize(list) > max)
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected a list of 1 to %d integers", key, max);
    *n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (!tnt__kj_as_int(e, &out[(*n)++]))
            return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected integers", key);
    }
    return TNT_OK;
}

tnt_status tnt__kj_check_nulls(const cJSON *cfg, const char *const *keys, const tnt__kj_ctx *k) {
    for (; *keys; keys++) /* regularizers and constraints: read by tnt__layer_from_config */
        if (!tnt__kj_is_rule_key(*keys) && !tnt__kj_absent(tnt__kj_item(cfg, *keys)))
            return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "\"%s\" is set (only null is supported)", *keys);
    return TNT_OK;
}

tnt_status tnt__kj_check_data_format(const cJSON *cfg, const tnt__kj_ctx *k) {
    bool bad = false;
    const char *f = tnt__kj_str(cfg, "data_format", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    if (f && strcmp(f, "channels_last") && strcmp(f, "channels_first"))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "data_format \"%.32s\" (expected \"channels_last\" or \"channels_first\")", f);
    return TNT_OK;
}

bool tnt__kj_channels_first(const cJSON *cfg) {
    const cJSON *f = tnt__kj_item(cfg, "data_format"), *dim = tnt__kj_item(cfg, "dim_ordering");
    if (cJSON_IsString(f)) return !strcmp(f->valuestring, "channels_first");
    return tnt__kj_absent(f) && cJSON_IsString(dim) && !strcmp(dim->valuestring, "th"); /* Keras 1 (Theano) */
}

/* Set while a Keras 3 architecture is read (tnt__kj_set_keras3). */
static _Thread_local bool keras3;

void tnt__kj_set_keras3(bool on) { keras3 = on; }
bool tnt__kj_keras3(void) { return keras3; }

cJSON *tnt__kj_keras3_names(const cJSON *config) {
    static const char *const keys[] = {"activation", "recurrent_activation"};
    cJSON *c = NULL;
    for (size_t i = 0; keras3 && i < TNT_ARRAY_LEN(keys); i++) {
        const cJSON *v = tnt__kj_item(config, keys[i]);
        if (!cJSON_IsString(v) || strcmp(v->valuestring, "hard_sigmoid")) continue;
        if (!c && !(c = cJSON_Duplicate(config, true))) return NULL;
        cJSON_ReplaceItemInObjectCaseSensitive(c, keys[i], cJSON_CreateString("hard_sigmoid_v3"));
    }
    return c;
}

tnt_status tnt__kj_activation(const cJSON *cfg, tnt_activation *act, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, "activation");
    *act = TNT_ACT_LINEAR;
    if (tnt__kj_absent(v)) return TNT_OK;
    if (!cJSON_IsString(v))
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "activation: expected a Keras activation name");
    int a = tnt_activation_from_name(v->valuestring);
    if (keras3 && !strcmp(v->valuestring, "hard_sigmoid")) a = TNT_ACT_HARD_SIGMOID_V3; /* relu6(x + 3) / 6 */
    if (a < 0 && (!strcmp(v->valuestring, "glu") || !strcmp(v->valuestring, "threshold")))
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "unsupported activation \"%s\" (%s)", v->valuestring,
                             v->valuestring[0] == 'g' ? "it halves the last axis; use a Dense layer of twice the "
                                                        "units and split" : "it needs arguments; use the ReLU layer");
    if (a < 0) return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "unsupported activation \"%.64s\"", v->valuestring);
    *act = (tnt_activation)a;
    return TNT_OK;
}

/* A Keras 3 (or tf.keras 2.13+) object {"module", "class_name", "config", "registered_name"} is
 * Keras's own when its module is Keras's (keras.initializers, keras.src.initializers.*, or
 * TensorFlow's) and its registered_name is null or the class name: another is a custom class
 * that only its Python code defines. */
tnt_status tnt__kj_builtin_object(const cJSON *v, const char *key, const tnt__kj_ctx *k) {
    const cJSON *mod = tnt__kj_item(v, "module"), *reg = tnt__kj_item(v, "registered_name"),
                *cls = tnt__kj_item(v, "class_name");
    bool keras_module = !cJSON_IsString(mod) || !strncmp(mod->valuestring, "keras", 5) ||
                        !strncmp(mod->valuestring, "tf_keras", 8) || !strncmp(mod->valuestring, "tensorflow", 10);
    bool registered = cJSON_IsString(reg) && !(cJSON_IsString(cls) && !strcmp(reg->valuestring, cls->valuestring));
    if (keras_module && !registered) return TNT_OK;
    return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s: custom object \"%.64s\" (module \"%.64s\", registered_name "
                         "\"%.64s\"): only its Python code defines it", key,
                         cJSON_IsString(cls) ? cls->valuestring : "?", cJSON_IsString(mod) ? mod->valuestring : "",
                         cJSON_IsString(reg) ? reg->valuestring : "");
}

/* name is cls, snake or alias, or one of them with Keras 2's "V2" suffix (GlorotUniformV2). */
static bool name_is(const char *name, const char *cls, const char *snake, const char *alias) {
    const char *forms[] = {cls, snake, alias};
    size_t n = strlen(name), v2 = n > 2 && !strcmp(name + n - 2, "V2") ? n - 2 : 0;
    for (int i = 0; i < 3; i++)
        if (forms[i] && (!strcmp(name, forms[i]) || (v2 && strlen(forms[i]) == v2 && !strncmp(name, forms[i], v2))))
            return true;
    return false;
}

/* An optional number of an initializer's config. */
static tnt_status init_num(const cJSON *icfg, const char *key, const char *what, double def, double *out,
                           const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(icfg, key);
    *out = def;
    if (tnt__kj_absent(v)) return TNT_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: %s: expected a finite number", what, key);
    *out = v->valuedouble;
    return TNT_OK;
}

static int index_of(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* VarianceScaling: Glorot, He and LeCun are the enum's own; other parameters a spec. Keras
 * 2.0-2.2 (and TF 1) spelled the truncated normal "normal". */
static tnt_status variance_scaling(const cJSON *icfg, const char *key, tnt_initializer *out, const tnt__kj_ctx *k) {
    double scale;
    TNT_KJ_S(init_num(icfg, "scale", key, 1.0, &scale, k));
    bool bad = false;
    const char *mode = tnt__kj_str(icfg, "mode", &bad, k), *dist = tnt__kj_str(icfg, "distribution", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    int m = mode ? index_of(mode, fan_modes, 3) : TNT__FAN_IN;
    int d = !dist ? TNT__DIST_TRUNCATED : !strcmp(dist, "normal") ? TNT__DIST_TRUNCATED : index_of(dist, dists, 3);
    if (m < 0 || d < 0 || !(scale > 0))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: VarianceScaling(scale %g, mode \"%.16s\", distribution \"%.24s\") "
                             "(expected scale > 0, mode fan_in, fan_out or fan_avg, distribution truncated_normal, "
                             "untruncated_normal or uniform)", key, scale, mode ? mode : "", dist ? dist : "");
    bool uniform = d == TNT__DIST_UNIFORM, truncated = d == TNT__DIST_TRUNCATED;
    if ((uniform || truncated) && scale == 1.0 && m == TNT__FAN_AVG)
        *out = uniform ? TNT_INIT_GLOROT_UNIFORM : TNT_INIT_GLOROT_NORMAL;
    else if ((uniform || truncated) && scale == 2.0 && m == TNT__FAN_IN)
        *out = uniform ? TNT_INIT_HE_UNIFORM : TNT_INIT_HE_NORMAL;
    else if ((uniform || truncated) && scale == 1.0 && m == TNT__FAN_IN)
        *out = uniform ? TNT_INIT_LECUN_UNIFORM : TNT_INIT_LECUN_NORMAL;
    else {
        tnt__init_spec sp = {.kind = TNT__IK_VARIANCE_SCALING, .a = scale, .mode = m, .dist = d};
        int v = tnt__init_intern(&sp);
        if (v < 0) return tnt__error_prefix(TNT_ERR_UNSUPPORTED, "%s: ", key);
        *out = (tnt_initializer)v;
    }
    return TNT_OK;
}

tnt_status tnt__kj_init(const cJSON *cfg, const char *key, tnt_initializer def, tnt_initializer *out,
                        const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, key);
    *out = def;
    if (tnt__kj_absent(v)) return TNT_OK;
    const char *name = NULL;
    const cJSON *icfg = NULL;
    if (cJSON_IsString(v)) name = v->valuestring;
    else if (cJSON_IsObject(v) && cJSON_IsString(tnt__kj_item(v, "class_name"))) {
        name = tnt__kj_item(v, "class_name")->valuestring;
        icfg = tnt__kj_item(v, "config");
        TNT_KJ_S(tnt__kj_builtin_object(v, key, k));
    } else
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: expected an initializer name or {\"class_name\", \"config\"}",
                             key);
    if (name_is(name, "VarianceScaling", "variance_scaling", NULL)) return variance_scaling(icfg, key, out, k);
    for (size_t i = 0; i < TNT_ARRAY_LEN(inits); i++) {
        const init_name *n = &inits[i];
        if (name_is(name, n->cls, n->snake, n->alias) && (n->init == TNT_INIT_ORTHOGONAL || !icfg ||
                                                          (n->init != TNT_INIT_RANDOM_NORMAL &&
                                                           n->init != TNT_INIT_RANDOM_UNIFORM))) {
            if (n->init == TNT_INIT_ORTHOGONAL && !tnt__kj_absent(tnt__kj_item(icfg, "gain"))) break; /* a spec */
            *out = n->init;
            return TNT_OK;
        }
    }
    for (size_t i = 0; i < TNT_ARRAY_LEN(spec_names); i++) {
        if (!name_is(name, spec_names[i].cls, spec_names[i].snake, spec_names[i].alias)) continue;
        tnt__init_spec sp = {.kind = (tnt__init_kind)i};
        /* Keras's defaults; Keras 1's identity and the rest spell gain "scale" */
        switch (sp.kind) {
        case TNT__IK_RANDOM_NORMAL:
        case TNT__IK_TRUNCATED_NORMAL:
            TNT_KJ_S(init_num(icfg, "mean", key, 0.0, &sp.a, k));
            TNT_KJ_S(init_num(icfg, "stddev", key, 0.05, &sp.b, k));
            if (!(sp.b >= 0)) return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: stddev %g (expected >= 0)", key, sp.b);
            break;
        case TNT__IK_RANDOM_UNIFORM:
            TNT_KJ_S(init_num(icfg, "minval", key, -0.05, &sp.a, k));
            TNT_KJ_S(init_num(icfg, "maxval", key, 0.05, &sp.b, k));
            break;
        case TNT__IK_CONSTANT: {
            const cJSON *val = tnt__kj_item(icfg, "value");
            if (!tnt__kj_absent(val) && !cJSON_IsNumber(val))
                return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s: Constant with a value that is not one number", key);
            TNT_KJ_S(init_num(icfg, "value", key, 0.0, &sp.a, k));
            break;
        }
        case TNT__IK_IDENTITY:
        case TNT__IK_ORTHOGONAL:
            TNT_KJ_S(init_num(icfg, tnt__kj_absent(tnt__kj_item(icfg, "scale")) ? "gain" : "scale", key, 1.0, &sp.a, k));
            break;
        case TNT__IK_VARIANCE_SCALING: break;
        }
        if (sp.kind == TNT__IK_ORTHOGONAL && sp.a == 1.0) *out = TNT_INIT_ORTHOGONAL;
        else if (sp.kind == TNT__IK_RANDOM_NORMAL && sp.a == 0.0 && sp.b == 0.05) *out = TNT_INIT_RANDOM_NORMAL;
        else if (sp.kind == TNT__IK_RANDOM_UNIFORM && sp.a == -0.05 && sp.b == 0.05) *out = TNT_INIT_RANDOM_UNIFORM;
        else if (sp.kind == TNT__IK_CONSTANT && (sp.a == 0.0 || sp.a == 1.0)) *out = sp.a == 0.0 ? TNT_INIT_ZEROS : TNT_INIT_ONES;
        else {
            int iv = tnt__init_intern(&sp);
            if (iv < 0) return tnt__error_prefix(TNT_ERR_UNSUPPORTED, "%s: ", key);
            *out = (tnt_initializer)iv;
        }
        return TNT_OK;
    }
    if (name_is(name, "STFT", "stft", "STFTInitializer"))
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s: initializer \"%s\" (Keras 3's STFT, for STFTSpectrogram "
                             "only) is not supported", key, name);
    return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s: unsupported initializer \"%.64s\"", key, name);
}

tnt_status tnt__kj_want_init(const cJSON *cfg, const char *key, tnt_initializer want, const tnt__kj_ctx *k) {
    tnt_initializer got;
    tnt_status s = tnt__kj_init(cfg, key, want, &got, k);
    if (s == TNT_OK && got != want)
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "%s: only the Keras default is supported", key);
    return s;
}

tnt_status tnt__kj_padding(const cJSON *cfg, tnt_padding *p, const tnt__kj_ctx *k) {
    bool bad = false;
    const char *s = tnt__kj_str(cfg, "padding", &bad, k);
    if (bad) return TNT_ERR_FORMAT;
    *p = TNT_PADDING_VALID;
    if (!s || !strcmp(s, "valid")) return TNT_OK;
    if (!strcmp(s, "same")) *p = TNT_PADDING_SAME;
    else if (!strcmp(s, "causal")) *p = TNT_PADDING_CAUSAL;
    else
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "padding \"%.32s\" (expected \"valid\", \"same\" or \"causal\")",
                             s);
    return TNT_OK;
}

tnt_status tnt__kj_margins(const cJSON *c, const char *key, int n, int def, int *pairs, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(c, key), *list = tnt__kj_list(v), *e;
    int x = 0;
    if (tnt__kj_absent(v) || tnt__kj_as_int(v, &x)) { /* one value everywhere */
        for (int i = 0; i < 2 * n; i++) pairs[i] = tnt__kj_absent(v) ? def : x;
        return TNT_OK;
    }
    bool ok = list && cJSON_GetArraySize(list) == n;
    int i = 0;
    if (ok) cJSON_ArrayForEach(e, list) { /* per axis: one value for both sides, or (before, after) */
        const cJSON *pair = tnt__kj_list(e);
        if (tnt__kj_as_int(e, &pairs[2 * i])) pairs[2 * i + 1] = pairs[2 * i];
        else if (!pair || cJSON_GetArraySize(pair) != 2 || !tnt__kj_as_int(pair->child, &pairs[2 * i]) ||
                 !tnt__kj_as_int(pair->child->next, &pairs[2 * i + 1]))
            ok = false;
        i++;
    }
    if (!ok)
        return tnt__kj_error(k, TNT_ERR_FORMAT, "key \"%s\": expected an integer, %d integers or %d (before, after) "
                             "pairs", key, n, n);
    return TNT_OK;
}

tnt_status tnt__kj_norm_axis(const cJSON *c, int *axis, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(c, "axis");
    *axis = -1;
    if (tnt__kj_absent(v) || tnt__kj_as_int(v, axis)) return TNT_OK;
    const cJSON *list = tnt__kj_list(v);
    if (list && cJSON_GetArraySize(list) == 1 && tnt__kj_as_int(cJSON_GetArrayItem(list, 0), axis)) return TNT_OK;
    return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "axis: expected one axis (several axes are not supported)");
}

tnt_status tnt__kj_center_scale(const cJSON *c, bool *center, bool *scale, tnt_initializer *beta,
                                tnt_initializer *gamma, const tnt__kj_ctx *k) {
    tnt_status s;
    if ((s = tnt__kj_bool(c, "center", true, center, k)) != TNT_OK || (s = tnt__kj_bool(c, "scale", true, scale, k)) != TNT_OK)
        return s;
    if ((s = tnt__kj_init(c, "beta_initializer", TNT_INIT_ZEROS, beta, k)) != TNT_OK ||
        (s = tnt__kj_init(c, "gamma_initializer", TNT_INIT_ONES, gamma, k)) != TNT_OK)
        return s;
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                        "gamma_constraint", NULL};
    return tnt__kj_check_nulls(c, nulls, k);
}

/* Keras 2's batch_input_shape, else Keras 3's batch_shape. */
static const cJSON *batch_shape_item(const cJSON *cfg) {
    const cJSON *v = tnt__kj_item(cfg, "batch_input_shape");
    return tnt__kj_absent(v) ? tnt__kj_item(cfg, "batch_shape") : v;
}

bool tnt__kj_has_batch_shape(const cJSON *cfg) { return !tnt__kj_absent(batch_shape_item(cfg)); }

tnt_status tnt__kj_batch_shape(const cJSON *cfg, tnt_shape *s, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_list(batch_shape_item(cfg));
    if (!v || cJSON_GetArraySize(v) < 2 || cJSON_GetArraySize(v) > TNT_MAX_DIMS)
        return tnt__kj_error(k, TNT_ERR_FORMAT, "batch_input_shape: expected [null, d1, ...] with 1 to %d dimensions",
                             TNT_MAX_DIMS - 1);
    s->ndim = 0;
    for (const cJSON *e = v->child->next; e; e = e->next) { /* after the batch dimension */
        int d = 0;
        if (cJSON_IsNull(e)) { /* None: any size (model/variable.c) */
            s->dim[s->ndim++] = TNT_DIM_NONE;
            continue;
        }
        if (!tnt__kj_as_int(e, &d) || d <= 0)
            return tnt__kj_error(k, TNT_ERR_FORMAT, "batch_input_shape: dimension %d is not a positive integer",
                                 s->ndim + 1);
        s->dim[s->ndim++] = d;
    }
    return TNT_OK;
}

/* ---- Keras 1 configs ------------------------------------------------------------------------ */

/* Keras 2's own legacy conversions (keras/legacy/interfaces.py): Keras 1 key -> Keras 2 key, for
 * every class but where the class column names one ("Embedding": its init and W_* keys differ). */
static const struct {
    const char *cls, *from, *to;
} keras1_keys[] = {
    {"Embedding", "init", "embeddings_initializer"}, {"Embedding", "W_regularizer", "embeddings_regularizer"},
    {"Embedding", "W_constraint", "embeddings_constraint"}, {NULL, "output_dim", "units"},
    {NULL, "nb_filter", "filters"}, {NULL, "border_mode", "padding"}, {NULL, "subsample", "strides"},
    {NULL, "subsample_length", "strides"}, {NULL, "filter_length", "kernel_size"}, {NULL, "pool_length", "pool_size"},
    {NULL, "stride", "strides"}, {NULL, "init", "kernel_initializer"}, {NULL, "inner_init", "recurrent_initializer"},
    {NULL, "inner_activation", "recurrent_activation"}, {NULL, "bias", "use_bias"},
    {NULL, "W_regularizer", "kernel_regularizer"}, {NULL, "b_regularizer", "bias_regularizer"},
    {NULL, "U_regularizer", "recurrent_regularizer"}, {NULL, "W_constraint", "kernel_constraint"},
    {NULL, "b_constraint", "bias_constraint"}, {NULL, "U_constraint", "recurrent_constraint"},
    {NULL, "dropout_W", "dropout"}, {NULL, "dropout_U", "recurrent_dropout"},
};

/* Keys only Keras 1 writes: one of them marks a Keras 1 config. */
static bool is_keras1(const cJSON *c, const char *cls) {
    static const char *const marks[] = {"nb_filter", "border_mode", "subsample", "subsample_length", "filter_length",
                                        "pool_length", "init", "inner_init", "W_regularizer", "dim_ordering",
                                        "input_dtype", "consume_less", "forget_bias_init"};
    for (size_t i = 0; i < TNT_ARRAY_LEN(marks); i++)
        if (tnt__kj_item(c, marks[i])) return true;
    return strcmp(cls, "Embedding") && tnt__kj_item(c, "output_dim") && !tnt__kj_item(c, "units");
}

cJSON *tnt__kj_keras1(const cJSON *config, const char *cls) {
    if (!cJSON_IsObject(config) || !is_keras1(config, cls)) return NULL;
    cJSON *c = cJSON_Duplicate(config, true);
    if (!c) return NULL;
    for (size_t i = 0; i < TNT_ARRAY_LEN(keras1_keys); i++) {
        if (keras1_keys[i].cls && strcmp(keras1_keys[i].cls, cls)) continue;
        if (!keras1_keys[i].cls && !strcmp(cls, "Embedding") && !strcmp(keras1_keys[i].from, "output_dim")) continue;
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(c, keras1_keys[i].from);
        if (!v) continue;
        if (tnt__kj_item(c, keras1_keys[i].to)) cJSON_Delete(v); /* a Keras 2 key wins */
        else cJSON_AddItemToObject(c, keras1_keys[i].to, v);
    }
    /* Convolution2D's nb_row, nb_col -> kernel_size; forget_bias_init "one" -> unit_forget_bias */
    const cJSON *r = tnt__kj_item(c, "nb_row"), *k = tnt__kj_item(c, "nb_col");
    if (cJSON_IsNumber(r) && cJSON_IsNumber(k) && !tnt__kj_item(c, "kernel_size"))
        cJSON_AddItemToObject(c, "kernel_size", cJSON_CreateIntArray((int[]){r->valueint, k->valueint}, 2));
    const cJSON *fb = tnt__kj_item(c, "forget_bias_init");
    if (cJSON_IsString(fb) && !tnt__kj_item(c, "unit_forget_bias"))
        cJSON_AddBoolToObject(c, "unit_forget_bias", !strcmp(fb->valuestring, "one"));
    /* Keras 1 regularizers {"name": "WeightRegularizer" | "ActivityRegularizer", "l1", "l2"} and
     * constraints {"name": "MaxNorm", "m", "axis"} -> {"class_name", "config"} */
    for (cJSON *e = c->child; e; e = e->next) {
        const cJSON *nm = tnt__kj_item(e, "name");
        size_t n = e->string ? strlen(e->string) : 0;
        bool reg = n > 12 && !strcmp(e->string + n - 12, "_regularizer"), con = n > 11 && !strcmp(e->string + n - 11, "_constraint");
        if (!(reg || con) || !cJSON_IsString(nm) || tnt__kj_item(e, "class_name")) continue;
        cJSON *o = cJSON_CreateObject(), *cfg = cJSON_CreateObject();
        if (!o || !cfg) {
            cJSON_Delete(o), cJSON_Delete(cfg);
            continue;
        }
        const char *cls_name = reg ? "L1L2" : !strcmp(nm->valuestring, "MaxNorm") ? "MaxNorm"
                               : !strcmp(nm->valuestring, "NonNeg")             ? "NonNeg"
                               : !strcmp(nm->valuestring, "UnitNorm")           ? "UnitNorm"
                                                                                : nm->valuestring;
        cJSON_AddStringToObject(o, "class_name", cls_name);
        for (const cJSON *f = e->child; f; f = f->next)
            if (strcmp(f->string, "name"))
                cJSON_AddItemToObject(cfg, !strcmp(f->string, "m") ? "max_value" : f->string, cJSON_Duplicate(f, true));
        cJSON_AddItemToObject(o, "config", cfg);
        char key[TNT_NAME_MAX];
        snprintf(key, sizeof key, "%s", e->string);
        cJSON_ReplaceItemInObjectCaseSensitive(c, key, o); /* o takes the key; e is freed */
        e = o;
    }
    /* dim_ordering: read by tnt__kj_channels_first ("th"); Keras 1's Embedding dropout: Keras 2
     * drops it with a warning, and so does this reader (it acts in training only) */
    if (!strcmp(cls, "Embedding")) cJSON_DeleteItemFromObjectCaseSensitive(c, "dropout");
    return c;
}
