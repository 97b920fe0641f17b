/* normalization.c: Keras's Normalization preprocessing layer with its stored statistics:
 *   y = (x - mean) / max(sqrt(variance), 1e-7)        (invert: y = mean + x * max(sqrt(var), 1e-7))
 * mean and variance have one value per index of the kept axes ("axis": -1 by default, a list, or
 * None for a single value), broadcast over the other axes. They come from the config (Keras 2.6+
 * Normalization(mean=..., variance=...): constants, no weights), or are the layer's non-trainable
 * weights mean, variance and count as tf.keras 2.3+ writes them after adapt() (count, the number of
 * samples adapt saw, is kept only to read and write files). adapt() itself is not offered: the
 * statistics are loaded, and training leaves them alone, as Keras does.
 * Per sample, a table maps each value to its statistic; backward is dx = dy / std (dy * std with
 * invert). No plan and no workspace. */
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

typedef struct norm_cfg {
    int n_axes;              /* -1: axis None; else the kept axes (Keras's, counting the batch) */
    int axes[TNT_MAX_DIMS];
    bool invert;
    float *mean, *variance;  /* constants from the config (n_values each), or NULL: weights */
    int64_t n_values;
    /* from build: the statistic of each value of a sample, and the divisor per statistic */
    int32_t *index;
    float *scale;            /* max(sqrt(variance), 1e-7), refreshed each forward from the weights */
    int64_t n_stats;
} norm_cfg;

static tnt_status norm_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    norm_cfg *c = l->priv;
    char b[96];
    bool kept[TNT_MAX_DIMS] = {false};
    tnt_shape stat = {.ndim = 0};
    for (int i = 0; c->n_axes > 0 && i < c->n_axes; i++) {
        int a = c->axes[i] < 0 ? c->axes[i] + in.ndim + 1 : c->axes[i];
        if (a < 1 || a > in.ndim || kept[a - 1])
            return tnt__error(TNT_ERR_SHAPE, "Normalization \"%s\": axis %d of input shape %s (expected distinct axes "
                              "1..%d or -%d..-1)", l->name, c->axes[i], tnt_shape_str(in, b, sizeof b), in.ndim, in.ndim);
        kept[a - 1] = true;
    }
    for (int d = 0; d < in.ndim; d++)
        if (kept[d]) stat.dim[stat.ndim++] = in.dim[d];
    c->n_stats = tnt_shape_numel(stat); /* 1 for axis None (ndim 0) */
    if (c->mean && c->n_values != 1 && c->n_values != c->n_stats)
        return tnt__error(TNT_ERR_SHAPE, "Normalization \"%s\": %lld mean and variance values for input shape %s "
                          "(expected 1 or %lld, one per index of the kept axes)", l->name, (long long)c->n_values,
                          tnt_shape_str(in, b, sizeof b), (long long)c->n_stats);
    int64_t per = tnt_shape_numel(in);
    free(c->index), free(c->scale);
    c->index = malloc((size_t)per * sizeof(int32_t));
    c->scale = malloc((size_t)c->n_stats * sizeof(float));
    if (!c->index || !c->scale) return tnt__error(TNT_ERR_NOMEM, "Normalization \"%s\": out of memory", l->name);
    for (int64_t i = 0; i < per; i++) { /* row-major: the kept coordinates of value i */
        int64_t rest = i, k = 0, mul = 1;
        for (int d = in.ndim - 1; d >= 0; d--) {
            int64_t coord = rest % in.dim[d];
            rest /= in.dim[d];
            if (kept[d]) k += coord * mul, mul *= in.dim[d];
        }
        c->index[i] = (int32_t)k;
    }
    l->n_weights = 0;
    if (!c->mean) {
        int im = tnt__layer_add_weight(l, "mean", stat, TNT_INIT_ZEROS, 0, 0);
        int iv = tnt__layer_add_weight(l, "variance", stat, TNT_INIT_ONES, 0, 0);
        int ic = tnt__layer_add_weight(l, "count", (tnt_shape){.ndim = 0}, TNT_INIT_ZEROS, 0, 0);
        if (im < 0 || iv < 0 || ic < 0) return TNT_ERR_ARG;
        for (int i = 0; i < 3; i++) l->weights[i].trainable = false;
    }
    *out = in;
    return TNT_OK;
}

/* mean and the divisor of statistic k */
static void stats(const tnt_layer *l, const float **mean) {
    norm_cfg *c = l->priv;
    const float *m = c->mean ? c->mean : l->weights[0].value, *v = c->mean ? c->variance : l->weights[1].value;
    int64_t n = c->mean ? c->n_values : c->n_stats;
    for (int64_t k = 0; k < c->n_stats; k++) c->scale[k] = fmaxf(sqrtf(v[n == 1 ? 0 : k]), 1e-7f);
    *mean = m;
}

/* x, y: (batch, shape...) */
static tnt_status norm_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const norm_cfg *c = l->priv;
    const float *mean;
    stats(l, &mean);
    const int64_t per = tnt_shape_numel(l->in_shape), one = c->mean && c->n_values == 1;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t i = 0; i < per; i++) {
            int32_t k = c->index[i];
            float m = mean[one ? 0 : k], x = a->x[n * per + i];
            a->y[n * per + i] = c->invert ? m + x * c->scale[k] : (x - m) / c->scale[k];
        }
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(a->batch * per) * sizeof(float));
    return TNT_OK;
}

/* dx = dy / std, or dy * std with invert; the statistics get no gradient */
static tnt_status norm_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const norm_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const float *mean;
    stats(l, &mean);
    const int64_t per = tnt_shape_numel(l->in_shape);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t i = 0; i < per; i++) {
            float s = c->scale[c->index[i]], g = a->dy[n * per + i];
            a->dx[n * per + i] = c->invert ? g * s : g / s;
        }
    return TNT_OK;
}

static void norm_destroy(tnt_layer *l) {
    norm_cfg *c = l->priv;
    free(c->mean), free(c->variance), free(c->index), free(c->scale);
    free(c);
}

static tnt_status add_values(cJSON *c, const char *key, const float *v, int64_t n) {
    if (!v) {
        TNT_KJ(cJSON_AddNullToObject(c, key));
        return TNT_OK;
    }
    if (n == 1) {
        TNT_KJ(cJSON_AddNumberToObject(c, key, tnt__kj_f(v[0])));
        return TNT_OK;
    }
    cJSON *a = cJSON_AddArrayToObject(c, key);
    TNT_KJ(a);
    for (int64_t i = 0; i < n; i++) TNT_KJ(cJSON_AddItemToArray(a, cJSON_CreateNumber(tnt__kj_f(v[i]))));
    return TNT_OK;
}

static tnt_status norm_get_config(const tnt_layer *l, cJSON *c) {
    const norm_cfg *p = l->priv;
    if (p->n_axes < 0) TNT_KJ(cJSON_AddNullToObject(c, "axis"));
    else TNT_KJ_S(tnt__kj_add_ints(c, "axis", p->n_axes, p->axes));
    TNT_KJ_S(add_values(c, "mean", p->mean, p->n_values));
    TNT_KJ_S(add_values(c, "variance", p->variance, p->n_values));
    TNT_KJ(cJSON_AddBoolToObject(c, "invert", p->invert));
    return TNT_OK;
}

/* A number, or a (nested) list of numbers, flattened into out[*n] (at most max; out NULL: count). */
static bool read_values(const cJSON *v, float *out, int64_t max, int64_t *n) {
    if (cJSON_IsNumber(v)) {
        if (out && *n < max) out[*n] = (float)v->valuedouble;
        (*n)++;
        return true;
    }
    const cJSON *list = tnt__kj_list(v), *e;
    if (!list) return false;
    cJSON_ArrayForEach(e, list) if (!read_values(e, out, max, n)) return false;
    return true;
}

static tnt_layer *norm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_normalization_opts o = {.name = k->name};
    const cJSON *ax = tnt__kj_item(c, "axis");
    if (cJSON_IsNull(ax)) o.n_axes = -1;
    else if (ax) TNT_KJ_READ(tnt__kj_int_list(c, "axis", TNT_MAX_DIMS, o.axes, &o.n_axes, k));
    TNT_KJ_READ(tnt__kj_bool(c, "invert", false, &o.invert, k));
    const cJSON *m = tnt__kj_item(c, "mean"), *v = tnt__kj_item(c, "variance");
    if (tnt__kj_absent(m) != tnt__kj_absent(v))
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "mean and variance: expected both or neither");
    float *mean = NULL, *var = NULL;
    if (!tnt__kj_absent(m)) {
        int64_t nm = 0, nv = 0;
        if (!read_values(m, NULL, 0, &nm) || !read_values(v, NULL, 0, &nv) || nm != nv || nm == 0)
            return tnt__kj_fail(k, TNT_ERR_FORMAT, "mean and variance: expected numbers or lists of equal length");
        mean = malloc((size_t)nm * sizeof(float)), var = malloc((size_t)nm * sizeof(float));
        if (!mean || !var) {
            free(mean), free(var);
            return tnt__kj_fail(k, TNT_ERR_NOMEM, "out of memory");
        }
        nm = nv = 0;
        read_values(m, mean, INT64_MAX, &nm);
        read_values(v, var, INT64_MAX, &nv);
        o.mean = mean, o.variance = var, o.n_values = nm;
    }
    tnt_layer *l = tnt_normalization(&o);
    free(mean), free(var);
    return tnt__kj_built(l, k);
}

const tnt__layer_ops tnt__normalization_ops = {
    .class_name = "Normalization",
    .from_config = norm_from_config,
    .get_config = norm_get_config,
    .build = norm_build,
    .forward = norm_forward,
    .backward = norm_backward,
    .destroy = norm_destroy,
    .supports_masking = true,
    .gpu = &tnt__host_bridge_gpu_ops, /* its per-value table of statistics on the host, the model on the device */
};

tnt_layer *tnt_normalization(const tnt_normalization_opts *opts) {
    static const tnt_normalization_opts defaults;
    const tnt_normalization_opts *o = opts ? opts : &defaults;
    const char *nm = o->name ? o->name : "";
    if (o->n_axes < -1 || o->n_axes > TNT_MAX_DIMS) {
        tnt__error(TNT_ERR_ARG, "Normalization \"%s\": %d axes (expected -1 for None, 0 for the default -1, or up to %d)",
                   nm, o->n_axes, TNT_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < o->n_axes; i++)
        if (o->axes[i] == 0) {
            tnt__error(TNT_ERR_ARG, "Normalization \"%s\": axis 0 (the batch axis)", nm);
            return NULL;
        }
    if ((o->mean != NULL) != (o->variance != NULL) || (o->mean && o->n_values < 1)) {
        tnt__error(TNT_ERR_ARG, "Normalization \"%s\": mean and variance: expected both (n_values >= 1 each) or neither",
                   nm);
        return NULL;
    }
    for (int64_t i = 0; o->variance && i < o->n_values; i++)
        if (!(o->variance[i] >= 0) || !isfinite(o->mean[i])) {
            tnt__error(TNT_ERR_ARG, "Normalization \"%s\": mean %g, variance %g at %lld (expected a finite mean and a "
                       "variance >= 0)", nm, (double)o->mean[i], (double)o->variance[i], (long long)i);
            return NULL;
        }
    norm_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_axes = o->n_axes ? o->n_axes : 1;
    if (o->n_axes > 0) memcpy(c->axes, o->axes, (size_t)o->n_axes * sizeof(int));
    else if (o->n_axes == 0) c->axes[0] = -1;
    c->invert = o->invert;
    if (o->mean) {
        c->n_values = o->n_values;
        c->mean = malloc((size_t)o->n_values * sizeof(float));
        c->variance = malloc((size_t)o->n_values * sizeof(float));
        if (!c->mean || !c->variance) {
            free(c->mean), free(c->variance), free(c);
            tnt__error(TNT_ERR_NOMEM, "Normalization \"%s\": out of memory", nm);
            return NULL;
        }
        memcpy(c->mean, o->mean, (size_t)o->n_values * sizeof(float));
        memcpy(c->variance, o->variance, (size_t)o->n_values * sizeof(float));
    }
    tnt_layer *l = tnt__layer_new(&tnt__normalization_ops, o->name, c);
    if (!l) norm_destroy(&(tnt_layer){.priv = c});
    return l;
}
