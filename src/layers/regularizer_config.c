/* regularizer_config.c: regularizers and constraints in a layer's Keras config, both ways, for
 * every layer class at once: a layer writes null for each of its keys, and reads none of them.
 * Read: a name ("l2", "max_norm"), {"class_name": "L2", "config": {"l2": 0.01}} (Keras 2.3+),
 * Keras 2.0-2.2's "L1L2" with both factors, Keras 3's objects with "module" (a custom one, of
 * another module or registered_name, is refused naming it); OrthogonalRegularizer(factor, mode);
 * written as Keras 2.3+ does (keras_zip.c gives a Keras 3 file Keras 3's module forms). */
#include "layers/keras_config.h"
#include "layers/regularizer.h"

#include <stdio.h>

bool tnt__kj_is_rule_key(const char *key) {
    size_t n = strlen(key);
    return (n > 12 && !strcmp(key + n - 12, "_regularizer")) || (n > 11 && !strcmp(key + n - 11, "_constraint"));
}

bool tnt__layer_config_has_key(const tnt_layer *l, const char *key) {
    cJSON *c = cJSON_CreateObject();
    bool has = c && l->ops->get_config && l->ops->get_config(l, c) == TNT_OK && cJSON_GetObjectItemCaseSensitive(c, key);
    cJSON_Delete(c);
    return has;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* The class name and config of a Keras object: a bare name has an empty config. */
static tnt_status object_parts(const cJSON *v, const char **cls, const cJSON **cfg, const char *key,
                               const tnt__kj_ctx *k) {
    *cfg = NULL;
    if (cJSON_IsString(v)) {
        *cls = v->valuestring;
        return TNT_OK;
    }
    const cJSON *c = tnt__kj_item(v, "class_name");
    if (!cJSON_IsString(c))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: expected a name or {\"class_name\": ..., \"config\": {...}}", key);
    *cls = c->valuestring;
    *cfg = tnt__kj_item(v, "config");
    return tnt__kj_builtin_object(v, key, k);
}

static bool is_one_of(const char *s, const char *a, const char *b, const char *c) {
    return !strcmp(s, a) || !strcmp(s, b) || (c && !strcmp(s, c));
}

static tnt_status read_regularizer(const cJSON *v, tnt__rule *r, const tnt__kj_ctx *k) {
    const char *cls = NULL, *key = r->key;
    const cJSON *cfg;
    tnt_status s = object_parts(v, &cls, &cfg, key, k);
    if (s != TNT_OK) return s;
    double l1 = 0, l2 = 0;
    if (is_one_of(cls, "L1", "l1", NULL)) {
        r->reg = TNT_REG_L1;
        /* TF 2.x still reads the "l" of its first L1 */
        bool old = !tnt__kj_absent(tnt__kj_item(cfg, "l"));
        s = tnt__kj_num(cfg, old ? "l" : "l1", false, 0.01, &l1, k);
    } else if (is_one_of(cls, "L2", "l2", NULL)) {
        r->reg = TNT_REG_L2;
        bool old = !tnt__kj_absent(tnt__kj_item(cfg, "l"));
        s = tnt__kj_num(cfg, old ? "l" : "l2", false, 0.01, &l2, k);
    } else if (is_one_of(cls, "L1L2", "l1_l2", "l1l2")) { /* l1l2: Keras 3's snake case of L1L2 */
        r->reg = TNT_REG_L1L2;
        double def = strcmp(cls, "l1_l2") ? 0.0 : 0.01; /* Keras's l1_l2() defaults differ from L1L2's */
        s = tnt__kj_num(cfg, "l1", false, def, &l1, k);
        if (s == TNT_OK) s = tnt__kj_num(cfg, "l2", false, def, &l2, k);
    } else if (is_one_of(cls, "OrthogonalRegularizer", "orthogonal_regularizer", NULL)) {
        double factor = 0.01;
        bool bad = false;
        const char *mode = tnt__kj_str(cfg, "mode", &bad, k);
        if (bad || (s = tnt__kj_num(cfg, "factor", false, 0.01, &factor, k)) != TNT_OK) return bad ? TNT_ERR_FORMAT : s;
        if (mode && strcmp(mode, "rows") && strcmp(mode, "columns"))
            return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: OrthogonalRegularizer mode \"%.32s\" (expected \"rows\" or "
                                 "\"columns\")", key, mode);
        if (!(factor >= 0 && factor < 1e30))
            return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: factor %g (expected a finite value >= 0)", key, factor);
        r->reg = TNT_REG_ORTHOGONAL;
        r->factor = (float)factor;
        r->columns = mode && !strcmp(mode, "columns");
        return TNT_OK;
    } else {
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED,
                             "%s: regularizer \"%.64s\" (expected L1, L2, L1L2 or OrthogonalRegularizer)", key, cls);
    }
    if (s != TNT_OK) return s;
    if (!(l1 >= 0 && l2 >= 0 && l1 < 1e30 && l2 < 1e30))
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: l1 %g, l2 %g (expected finite values >= 0)", key, l1, l2);
    r->l1 = (float)l1;
    r->l2 = (float)l2;
    return TNT_OK;
}

/* Keras's axis: an integer or a tuple of them; absent: 0. */
static tnt_status read_axes(const cJSON *cfg, tnt_constraint *c, const char *key, const tnt__kj_ctx *k) {
    const cJSON *v = tnt__kj_item(cfg, "axis"), *list = tnt__kj_list(v), *e;
    if (tnt__kj_absent(v)) return TNT_OK;
    if (tnt__kj_as_int(v, &c->axes[0])) {
        c->n_axes = 1;
        return TNT_OK;
    }
    if (!list || cJSON_GetArraySize(list) < 1 || cJSON_GetArraySize(list) > TNT_MAX_DIMS)
        return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: axis: expected an integer or 1 to %d of them", key, TNT_MAX_DIMS);
    cJSON_ArrayForEach(e, list) {
        if (!tnt__kj_as_int(e, &c->axes[c->n_axes++]))
            return tnt__kj_error(k, TNT_ERR_FORMAT, "%s: axis: expected integers", key);
    }
    return TNT_OK;
}

tnt_status tnt__kj_read_constraint(const cJSON *v, tnt__rule *r, const tnt__kj_ctx *k) {
    const char *cls = NULL, *key = r->key;
    const cJSON *cfg;
    tnt_status s = object_parts(v, &cls, &cfg, key, k);
    if (s != TNT_OK) return s;
    tnt_constraint *c = &r->con;
    double max_value = 1, min_value = 0, rate = 1;
    if (is_one_of(cls, "MaxNorm", "max_norm", "maxnorm")) {
        c->kind = TNT_MAX_NORM;
        max_value = 2;
    } else if (is_one_of(cls, "NonNeg", "non_neg", "nonneg")) {
        c->kind = TNT_NON_NEG;
    } else if (is_one_of(cls, "UnitNorm", "unit_norm", "unitnorm")) {
        c->kind = TNT_UNIT_NORM;
    } else if (is_one_of(cls, "MinMaxNorm", "min_max_norm", NULL)) {
        c->kind = TNT_MIN_MAX_NORM;
    } else {
        return tnt__kj_error(k, TNT_ERR_UNSUPPORTED,
                             "%s: constraint \"%.64s\" (expected MaxNorm, NonNeg, UnitNorm or MinMaxNorm)", key, cls);
    }
    if ((s = tnt__kj_num(cfg, "max_value", false, max_value, &max_value, k)) != TNT_OK ||
        (s = tnt__kj_num(cfg, "min_value", false, min_value, &min_value, k)) != TNT_OK ||
        (s = tnt__kj_num(cfg, "rate", false, rate, &rate, k)) != TNT_OK || (s = read_axes(cfg, c, key, k)) != TNT_OK)
        return s;
    c->max_value = (float)max_value;
    c->min_value = (float)min_value;
    c->rate = (float)rate;
    if ((s = tnt__constraint_check(c, k->name, key)) != TNT_OK) return tnt__error_prefix(s, "from_json: ");
    return TNT_OK;
}

static tnt_layer *from_config(const tnt__layer_ops *ops, const cJSON *config, const tnt__kj_ctx *k);

tnt_layer *tnt__layer_from_config(const tnt__layer_ops *ops, const cJSON *config, const tnt__kj_ctx *k) {
    cJSON *k2 = tnt__kj_keras1(config, k->cls); /* a Keras 1 config, with Keras 2's names */
    if (!k2) k2 = tnt__kj_keras3_names(config); /* Keras 3's hard_sigmoid */
    tnt_layer *l = from_config(ops, k2 ? k2 : config, k);
    cJSON_Delete(k2);
    return l;
}

static tnt_layer *from_config(const tnt__layer_ops *ops, const cJSON *config, const tnt__kj_ctx *k) {
    tnt_layer *l = ops->from_config(config, k);
    if (!l) return NULL;
    if (tnt__kj_dtype_policy(config, &l->dtype_policy, k) != TNT_OK) {
        tnt_layer_free(l);
        return NULL;
    }
    l->frozen = cJSON_IsFalse(tnt__kj_item(config, "trainable"));
    if (tnt__kj_channels_first(config) && tnt_layer_set_data_format(l, TNT_CHANNELS_FIRST) != TNT_OK) {
        tnt__error_prefix(TNT_ERR_UNSUPPORTED, "from_json: layer \"%.64s\" (%.32s): ", k->name, k->cls);
        tnt_layer_free(l);
        return NULL;
    }
    /* a traced layer's keys are its user's get_config: its weights' regularizers are in its graph
     * and their constraints in "tnt_constraints" (traced.c), so a "kernel_regularizer" there would
     * count twice */
    if (ops->from_config == tnt__traced_ops.from_config) return l;
    const cJSON *e;
    cJSON_ArrayForEach(e, config) {
        if (!tnt__kj_is_rule_key(e->string) || tnt__kj_absent(e)) continue;
        size_t n = strlen(e->string);
        tnt__rule r = {.is_constraint = !strcmp(e->string + n - 11, "_constraint")};
        snprintf(r.key, sizeof r.key, "%.*s", TNT_NAME_MAX - 1, e->string);
        tnt_status s = !tnt__layer_config_has_key(l, e->string)
                           ? tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "\"%.64s\" is set, but this class has no such key",
                                           e->string)
                       : r.is_constraint ? tnt__kj_read_constraint(e, &r, k)
                                         : read_regularizer(e, &r, k);
        if (s == TNT_OK) s = tnt__layer_set_rule(l, &r);
        if (s != TNT_OK) {
            tnt_layer_free(l);
            return NULL;
        }
    }
    return l;
}

/* ---- writing -------------------------------------------------------------------------------- */

static const char *constraint_class(tnt_constraint_kind kind) {
    return kind == TNT_MAX_NORM ? "MaxNorm" : kind == TNT_NON_NEG ? "NonNeg" : kind == TNT_UNIT_NORM ? "UnitNorm" : "MinMaxNorm";
}

cJSON *tnt__rule_json(const tnt__rule *r) {
    cJSON *o = cJSON_CreateObject(), *c = NULL;
    const char *cls = r->is_constraint ? constraint_class(r->con.kind)
                      : r->reg == TNT_REG_L1 ? "L1" : r->reg == TNT_REG_L2 ? "L2"
                      : r->reg == TNT_REG_ORTHOGONAL ? "OrthogonalRegularizer" : "L1L2";
    bool ok = o && cJSON_AddStringToObject(o, "class_name", cls) && (c = cJSON_AddObjectToObject(o, "config"));
    if (ok && !r->is_constraint && r->reg == TNT_REG_ORTHOGONAL) {
        ok = cJSON_AddNumberToObject(c, "factor", tnt__kj_f(r->factor)) &&
             cJSON_AddStringToObject(c, "mode", r->columns ? "columns" : "rows");
    } else if (ok && !r->is_constraint) {
        if (r->reg != TNT_REG_L2) ok = cJSON_AddNumberToObject(c, "l1", tnt__kj_f(r->l1));
        if (ok && r->reg != TNT_REG_L1) ok = cJSON_AddNumberToObject(c, "l2", tnt__kj_f(r->l2));
    } else if (ok && r->con.kind != TNT_NON_NEG) {
        const tnt_constraint *k = &r->con;
        if (k->kind == TNT_MIN_MAX_NORM)
            ok = cJSON_AddNumberToObject(c, "min_value", tnt__kj_f(k->min_value)) &&
                 cJSON_AddNumberToObject(c, "rate", tnt__kj_f(k->rate));
        if (ok && k->kind != TNT_UNIT_NORM) ok = cJSON_AddNumberToObject(c, "max_value", tnt__kj_f(k->max_value));
        if (ok && k->n_axes <= 1) ok = cJSON_AddNumberToObject(c, "axis", k->n_axes ? k->axes[0] : 0);
        else if (ok) ok = tnt__kj_add_ints(c, "axis", k->n_axes, k->axes) == TNT_OK;
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

tnt_status tnt__layer_get_config(const tnt_layer *l, cJSON *config) {
    if (l->ops->get_config) TNT_KJ_S(l->ops->get_config(l, config));
    return tnt__rules_write(l->rules, config);
}

tnt_status tnt__rules_write(const struct tnt__rules *rules, cJSON *config) {
    for (int i = 0; rules && i < rules->n; i++) {
        const tnt__rule *r = &rules->r[i];
        /* ActivityRegularization's l1, l2; a traced layer's weights' constraints */
        if (!cJSON_GetObjectItemCaseSensitive(config, r->key) || r->weight[0]) continue;
        cJSON *o = tnt__rule_json(r);
        TNT_KJ(o);
        cJSON_ReplaceItemInObjectCaseSensitive(config, r->key, o);
    }
    return TNT_OK;
}
