/* reshape.c: Reshape to a target shape (batch excluded), one dimension may be -1. A view layer. */
#include "layers/keras_config.h"
#include "layers/layer.h"

typedef struct reshape_priv {
    tnt_shape target;
} reshape_priv;

static tnt_status reshape_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    reshape_priv *p = l->priv;
    tnt_shape t = p->target;
    int64_t known = 1, total = tnt_shape_numel(in);
    int unknown = -1;
    char a[96], b[96];
    for (int i = 0; i < t.ndim; i++) {
        if (t.dim[i] == -1) unknown = i;
        else known *= t.dim[i];
    }
    if (unknown >= 0) {
        if (known == 0 || total % known)
            return tnt__error(TNT_ERR_SHAPE, "Reshape \"%s\": cannot reshape input %s (%lld values) to %s",
                              l->name, tnt_shape_str(in, a, sizeof a), (long long)total,
                              tnt_shape_str(t, b, sizeof b));
        t.dim[unknown] = total / known;
    } else if (known != total) {
        return tnt__error(TNT_ERR_SHAPE, "Reshape \"%s\": input %s has %lld values, target %s has %lld",
                          l->name, tnt_shape_str(in, a, sizeof a), (long long)total,
                          tnt_shape_str(t, b, sizeof b), (long long)known);
    }
    *out = t;
    return TNT_OK;
}

static void reshape_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status reshape_get_config(const tnt_layer *l, cJSON *c) {
    const reshape_priv *p = l->priv;
    int v[TNT_MAX_DIMS];
    for (int i = 0; i < p->target.ndim; i++) v[i] = (int)p->target.dim[i];
    return tnt__kj_add_ints(c, "target_shape", p->target.ndim, v);
}

static tnt_layer *reshape_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int v[TNT_MAX_DIMS] = {0}, n = 0;
    TNT_KJ_READ(tnt__kj_int_list(c, "target_shape", TNT_MAX_DIMS - 1, v, &n, k));
    tnt_shape t = {.ndim = n};
    for (int i = 0; i < n; i++) t.dim[i] = v[i];
    return tnt__kj_built(tnt_reshape(t, k->name), k);
}

const tnt__layer_ops tnt__reshape_ops = {
    .class_name = "Reshape",
    .from_config = reshape_from_config,
    .get_config = reshape_get_config,
    .build = reshape_build,
    .destroy = reshape_destroy,
    .is_view = true,
};

tnt_layer *tnt_reshape(tnt_shape target, const char *name) {
    char b[96];
    int unknown = 0;
    bool ok = target.ndim >= 1 && target.ndim < TNT_MAX_DIMS;
    for (int i = 0; ok && i < target.ndim; i++) {
        if (target.dim[i] == -1) unknown++;
        else if (target.dim[i] <= 0) ok = false;
    }
    if (!ok || unknown > 1) {
        tnt__error(TNT_ERR_SHAPE, "Reshape: target shape %s: expected 1..%d dimensions > 0, at most one -1",
                   tnt_shape_str(target, b, sizeof b), TNT_MAX_DIMS - 1);
        return NULL;
    }
    reshape_priv *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->target = target;
    tnt_layer *l = tnt__layer_new(&tnt__reshape_ops, name, p);
    if (!l) free(p);
    return l;
}
