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
    }
    inner->seed = tnt__hash64(outer->seed ^ salt);
}

tnt_status tnt__wrapper_inner_config(const tnt_layer *inner, const char *name, cJSON *c, const char *key) {
    cJSON *o = cJSON_AddObjectToObject(c, key), *ic = NULL;
    TNT_KJ(o);
    TNT_KJ(cJSON_AddStringToObject(o, "class_name", inner->ops->class_name));
    TNT_KJ(ic = cJSON_AddObjectToObject(o, "config"));
    TNT_KJ(cJSON_AddStringToObject(ic, "name", name));
    TNT_KJ(cJSON_AddTrueToObject(ic, "trainable"));
    TNT_KJ(cJSON_AddStringToObject(ic, "dtype", tnt__dtype_policy_name(inner->dtype_policy)));
    return inner->ops->get_config ? inner->ops->get_config(inner, ic) : TNT_OK;
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
    if (inner && inner->rules) { /* the wrapper trains its own copies of the inner weights */
        tnt_layer_free(inner);
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "%s: regularizers and constraints inside a wrapper are not supported", key);
    }
    return inner;
}
