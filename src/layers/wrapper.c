/* wrapper.c: see wrapper.h. */
#include "layers/wrapper.h"

#include "layers/keras_config.h"
#include "layers/regularizer.h"

#include <stdio.h>

tnt_status tnt__wrapper_build_inner(tnt_layer *outer, tnt_layer *inner, int n, const tnt_shape *in) {
    tnt_status s = inner->ops->build_multi ? inner->ops->build_multi(inner, n, in, &inner->out_shape)
                   : n == 1                ? inner->ops->build(inner, in[0], &inner->out_shape)
                                           : tnt__error(TNT_ERR_ARG, "%s takes one input", inner->ops->class_name);
    if (s != TNT_OK) return tnt__error_prefix(s, "%s \"%s\": ", outer->ops->class_name, outer->name);
    inner->n_inputs = n;
    for (int k = 0; k < n; k++) inner->in_shapes[k] = in[k];
    inner->in_shape = in[0];
    inner->built = true;
    return TNT_OK;
}

tnt_status tnt__wrapper_adopt_weights(tnt_layer *outer, tnt_layer *inner, const char *prefix) {
    for (int j = 0; j < inner->n_weights; j++) {
        const tnt__weight *w = &inner->weights[j];
        char name[TNT_NAME_MAX];
        if (prefix) snprintf(name, sizeof name, "%.*s/%s", TNT_NAME_MAX / 2, prefix, w->name);
        else snprintf(name, sizeof name, "%s", w->name);
        int i = tnt__layer_add_weight(outer, name, w->shape, w->init, w->fan_in, w->fan_out);
        if (i < 0) return TNT_ERR_ARG;
        outer->weights[i].trainable = w->trainable;
    }
    return TNT_OK;
}

void tnt__wrapper_bind(tnt_layer *outer, int first, tnt_layer *inner, uint64_t salt) {
    for (int j = 0; j < inner->n_weights; j++) {
        inner->weights[j].value = outer->weights[first + j].value;
        inner->weights[j].grad = outer->weights[first + j].grad;
        inner->weights[j].d_value = outer->weights[first + j].d_value; /* device views: NULL on the CPU */
        inner->weights[j].d_grad = outer->weights[first + j].d_grad;
    }
    inner->seed = tnt__hash64(outer->seed ^ salt);
}

tnt_status tnt__wrapper_inner_config(const tnt_layer *outer, const tnt_layer *inner, const char *name, cJSON *c,
                                     const char *key) {
    cJSON *o = cJSON_AddObjectToObject(c, key), *ic = NULL;
    TNT_KJ(o);
    TNT_KJ(cJSON_AddStringToObject(o, "class_name", inner->ops->class_name));
    TNT_KJ(ic = cJSON_AddObjectToObject(o, "config"));
    TNT_KJ(cJSON_AddStringToObject(ic, "name", name));
    TNT_KJ(cJSON_AddTrueToObject(ic, "trainable"));
    TNT_KJ(cJSON_AddStringToObject(ic, "dtype", tnt__dtype_policy_name(inner->dtype_policy)));
    if (inner->ops->get_config) TNT_KJ_S(inner->ops->get_config(inner, ic));
    return tnt__rules_write(outer->rules, ic);
}

static bool same_rule(const tnt__rule *a, const tnt__rule *b) {
    return a->is_constraint == b->is_constraint && a->reg == b->reg && a->l1 == b->l1 && a->l2 == b->l2 &&
           !memcmp(&a->con, &b->con, sizeof a->con);
}

/* The rule of a with b's key, or NULL */
static const tnt__rule *rule_of(const tnt_layer *a, const char *key) {
    for (int j = 0; a->rules && j < a->rules->n; j++)
        if (!strcmp(a->rules->r[j].key, key)) return &a->rules->r[j];
    return NULL;
}

bool tnt__wrapper_same_rules(const tnt_layer *a, const tnt_layer *b) {
    int na = a->rules ? a->rules->n : 0, nb = b->rules ? b->rules->n : 0;
    if (na != nb) return false;
    for (int i = 0; i < na; i++) {
        const tnt__rule *o = rule_of(b, a->rules->r[i].key);
        if (!o || !same_rule(o, &a->rules->r[i])) return false;
    }
    return true;
}

tnt_status tnt__wrapper_take_rules(tnt_layer *outer, tnt_layer *inner, const char *cls) {
    for (int i = 0; inner->rules && i < inner->rules->n; i++) {
        const tnt__rule *r = &inner->rules->r[i];
        if (!strcmp(r->key, "activity_regularizer"))
            return tnt__error(TNT_ERR_UNSUPPORTED, "%s: the wrapped layer \"%s\" has an activity_regularizer (not "
                              "supported inside a wrapper)", cls, inner->name);
        tnt_status s = tnt__layer_set_rule(outer, r);
        if (s != TNT_OK) return s;
    }
    free(inner->rules);
    inner->rules = NULL;
    return TNT_OK;
}

tnt_layer *tnt__wrapper_inner_from_config(const cJSON *c, const char *key, const tnt__kj_ctx *k) {
    const cJSON *o = tnt__kj_item(c, key), *cls = tnt__kj_item(o, "class_name"), *ic = tnt__kj_item(o, "config");
    if (!cJSON_IsString(cls) || !cJSON_IsObject(ic))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "%s: expected {\"class_name\": ..., \"config\": {...}}", key);
    const tnt__layer_ops *ops = tnt__layer_class_find(cls->valuestring);
    if (!ops) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "%s: unsupported layer class \"%.64s\"", key, cls->valuestring);
    const cJSON *nm = tnt__kj_item(ic, "name");
    tnt__kj_ctx ik = {cJSON_IsString(nm) ? nm->valuestring : k->name, cls->valuestring};
    tnt_layer *inner = tnt__layer_from_config(ops, ic, &ik);
    if (!inner) tnt__error_prefix(TNT_ERR_ARG, "from_json: layer \"%.64s\" (%.32s): ", k->name, k->cls);
    return inner; /* its regularizers and constraints pass to the wrapper (tnt__wrapper_take_rules) */
}
