/* regularizer.c: a layer's regularizers and constraints (see regularizer.h): setting them, the
 * penalties and their gradients, and the constraints' projections, as Keras computes them. */
#include "layers/regularizer.h"
#include "comm/comm.h"

#include <math.h>
#include <stdio.h>

/* Keras's backend.epsilon(), added to the norms the constraints divide by */
#define KERAS_EPSILON 1e-7f

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static tnt__rule *find_rule(tnt_layer *l, const char *key, const char *weight) {
    for (int i = 0; l->rules && i < l->rules->n; i++)
        if (!strcmp(l->rules->r[i].key, key) && !strcmp(l->rules->r[i].weight, weight)) return &l->rules->r[i];
    return NULL;
}

tnt_status tnt__layer_set_rule(tnt_layer *l, const tnt__rule *rule) {
    tnt__rule *old = find_rule(l, rule->key, rule->weight);
    bool removes = rule->is_constraint ? rule->con.kind == TNT_CONSTRAINT_NONE : rule->reg == TNT_REG_NONE;
    if (removes) {
        if (old) *old = l->rules->r[--l->rules->n];
        return TNT_OK;
    }
    if (!old) {
        if (!l->rules && !(l->rules = tnt__calloc(1, sizeof *l->rules))) return TNT_ERR_NOMEM;
        if (l->rules->n == TNT_MAX_LAYER_RULES)
            return tnt__error(TNT_ERR_ARG, "layer \"%s\": more than %d regularizers and constraints", l->name,
                              TNT_MAX_LAYER_RULES);
        old = &l->rules->r[l->rules->n++];
    }
    *old = *rule;
    return TNT_OK;
}

bool tnt__rule_applies(const tnt__rule *rule, const tnt__weight *w) {
    if (rule->weight[0]) return !strcmp(w->name, rule->weight);
    /* "kernel_regularizer" -> "kernel"; "recurrent_regularizer" -> "recurrent_kernel" */
    char base[TNT_NAME_MAX], alt[TNT_NAME_MAX + 8];
    size_t n = strlen(rule->key) - strlen(rule->is_constraint ? "_constraint" : "_regularizer");
    snprintf(base, sizeof base, "%.*s", (int)n, rule->key);
    snprintf(alt, sizeof alt, "%s_kernel", base);
    /* MultiHeadAttention's "query/kernel", Bidirectional's "forward_lstm/recurrent_kernel" */
    const char *slash = strrchr(w->name, '/');
    return !strcmp(w->name, base) || !strcmp(w->name, alt) || (slash && (!strcmp(slash + 1, base) || !strcmp(slash + 1, alt)));
}

/* Each weight of l that a rule (or constraint, when constraints) acts on, as (rule, weight). */
#define FOR_EACH_RULED_WEIGHT(l, constraints, r, w)                                               \
    for (int i_ = 0; (l)->rules && i_ < (l)->rules->n; i_++)                                      \
        for (int j_ = 0; j_ < (l)->n_weights; j_++)                                               \
            if ((r = &(l)->rules->r[i_])->is_constraint == (constraints) &&                       \
                tnt__rule_applies(r, w = &(l)->weights[j_]))

/* OrthogonalRegularizer over the rows of the (rows, cols) weight v, or its columns: the unit
 * vectors n_i = v_i / max(|v_i|, 1e-6) (TensorFlow's l2_normalize), their Gram matrix G, and
 * penalty c * sum_{i != j} |G_ij| with c = factor * 0.5 / (size * (size - 1) / 2). With grad, adds
 * scale * the gradient: dn_i = 2c * sum_{j != i} sign(G_ij) n_j, then through the normalization
 * dv_i = (dn_i - n_i (n_i . dn_i)) / |v_i| (dn_i / 1e-6 where the norm was clamped). */
static double orthogonal_penalty(const tnt__rule *r, tnt_shape s, const float *v, float *grad, double scale) {
    if (s.ndim != 2) return 0; /* refused at compile (tnt__layer_check_rules) */
    int64_t rows = s.dim[0], cols = s.dim[1];
    int64_t size = r->columns ? cols : rows, len = r->columns ? rows : cols;
    if (size < 2) return 0; /* no pairs (Keras divides 0 by 0) */
    int64_t st_i = r->columns ? 1 : cols, st_k = r->columns ? cols : 1; /* element k of vector i */
    double *nv = tnt__calloc((size_t)(size * len), sizeof *nv), *norm = tnt__calloc((size_t)size, sizeof *norm);
    double *dn = grad ? tnt__calloc((size_t)(size * len), sizeof *dn) : NULL;
    double sum = 0, c = r->factor * 0.5 / ((double)size * (size - 1.0) / 2.0);
    if (!nv || !norm || (grad && !dn)) goto out;
    for (int64_t i = 0; i < size; i++) {
        double ss = 0;
        for (int64_t k = 0; k < len; k++) ss += (double)v[i * st_i + k * st_k] * v[i * st_i + k * st_k];
        norm[i] = sqrt(fmax(ss, 1e-12));
        for (int64_t k = 0; k < len; k++) nv[i * len + k] = v[i * st_i + k * st_k] / norm[i];
    }
    for (int64_t i = 0; i < size; i++)
        for (int64_t j = i + 1; j < size; j++) {
            double g = 0;
            for (int64_t k = 0; k < len; k++) g += nv[i * len + k] * nv[j * len + k];
            sum += 2 * fabs(g);
            double sg = (g > 0) - (g < 0);
            if (dn)
                for (int64_t k = 0; k < len; k++) {
                    dn[i * len + k] += 2 * c * sg * nv[j * len + k];
                    dn[j * len + k] += 2 * c * sg * nv[i * len + k];
                }
        }
    for (int64_t i = 0; dn && i < size; i++) {
        double dot = 0;
        bool clamped = norm[i] <= 1e-6;
        for (int64_t k = 0; k < len; k++) dot += nv[i * len + k] * dn[i * len + k];
        for (int64_t k = 0; k < len; k++)
            grad[i * st_i + k * st_k] +=
                (float)(scale * (dn[i * len + k] - (clamped ? 0 : nv[i * len + k] * dot)) / norm[i]);
    }
out:
    free(nv), free(norm), free(dn);
    return c * sum;
}

static double penalty(const tnt__rule *r, const float *v, int64_t n) {
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        s1 += fabs((double)v[i]);
        s2 += (double)v[i] * v[i];
    }
    return r->l1 * s1 + r->l2 * s2;
}

/* g += scale * (l1 * sign(v) + 2 * l2 * v); sign(0) = 0, TensorFlow's gradient of |v| at 0 */
static void add_penalty_grad(const tnt__rule *r, const float *v, float *g, int64_t n, double scale) {
    float a = (float)(scale * r->l1), b = (float)(scale * 2.0 * r->l2);
    for (int64_t i = 0; i < n; i++) g[i] += a * (float)((v[i] > 0) - (v[i] < 0)) + b * v[i];
}

double tnt__layer_weight_penalty(tnt_layer *l) {
    double sum = 0;
    const tnt__rule *r;
    tnt__weight *w;
    FOR_EACH_RULED_WEIGHT(l, false, r, w)
        sum += r->reg == TNT_REG_ORTHOGONAL ? orthogonal_penalty(r, w->shape, w->value, NULL, 0)
                                            : penalty(r, w->value, tnt_shape_numel(w->shape));
    return sum;
}

void tnt__layer_add_penalty_grads(tnt_layer *l) {
    const tnt__rule *r;
    tnt__weight *w;
    FOR_EACH_RULED_WEIGHT(l, false, r, w) {
        if (w->grad && r->reg == TNT_REG_ORTHOGONAL) orthogonal_penalty(r, w->shape, w->value, w->grad, 1.0);
        else if (w->grad) add_penalty_grad(r, w->value, w->grad, tnt_shape_numel(w->shape), 1.0);
    }
}

tnt_status tnt__layer_check_rules(const tnt_layer *l) {
    for (int i = 0; l->rules && i < l->rules->n; i++) {
        const tnt__rule *r = &l->rules->r[i];
        for (int j = 0; r->is_constraint && r->con.kind != TNT_NON_NEG && j < l->n_weights; j++) {
            const tnt__weight *w = &l->weights[j];
            for (int a = 0; a < r->con.n_axes && tnt__rule_applies(r, w); a++)
                if (r->con.axes[a] < -w->shape.ndim || r->con.axes[a] >= w->shape.ndim)
                    return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: axis %d of weight \"%s\" with %d axes", l->name,
                                      r->key, r->con.axes[a], w->name, w->shape.ndim);
        }
        if (r->is_constraint || r->reg != TNT_REG_ORTHOGONAL) continue;
        if (!strcmp(r->key, "activity_regularizer"))
            return tnt__error(TNT_ERR_UNSUPPORTED, "layer \"%s\": activity_regularizer: OrthogonalRegularizer on a "
                              "layer's output is not supported (it needs rank 2 and depends on the batch)", l->name);
        for (int j = 0; j < l->n_weights; j++)
            if (tnt__rule_applies(r, &l->weights[j]) && l->weights[j].shape.ndim != 2)
                return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: OrthogonalRegularizer needs a weight of rank 2; "
                                  "\"%s\" has rank %d (as Keras refuses)", l->name, r->key, l->weights[j].name,
                                  l->weights[j].shape.ndim);
    }
    return TNT_OK;
}

static const tnt__rule *activity_rule(const tnt_layer *l) {
    for (int i = 0; l->rules && i < l->rules->n; i++)
        if (!strcmp(l->rules->r[i].key, "activity_regularizer")) return &l->rules->r[i];
    return NULL;
}

bool tnt__layer_has_activity_rule(const tnt_layer *l) { return activity_rule(l) != NULL; }

double tnt__layer_activity_penalty(const tnt_layer *l, const float *y, int64_t n) {
    const tnt__rule *r = activity_rule(l);
    return r ? penalty(r, y, n) : 0.0;
}

void tnt__layer_add_activity_grad(const tnt_layer *l, const float *y, float *dy, int64_t n, double scale) {
    const tnt__rule *r = activity_rule(l);
    if (r) add_penalty_grad(r, y, dy, n, scale);
}

uint64_t tnt__layer_rules_hash(const tnt_layer *l, uint64_t h) {
    for (int i = 0; l->rules && i < l->rules->n; i++) {
        const tnt__rule *r = &l->rules->r[i];
        const tnt_constraint *c = &r->con;
        float v[6] = {r->l1, r->l2, c->max_value, c->min_value, c->rate, r->factor};
        int k[4] = {(int)r->reg, (int)c->kind, c->n_axes, r->columns};
        h = tnt__fnv1a(tnt__fnv1a(h, r->key, strlen(r->key) + 1), r->weight, strlen(r->weight));
        h = tnt__fnv1a(tnt__fnv1a(tnt__fnv1a(h, v, sizeof v), k, sizeof k), c->axes, (size_t)c->n_axes * sizeof(int));
    }
    return h;
}

/* Index of element i's norm: its position over the axes not reduced. */
static int64_t norm_index(int64_t i, tnt_shape s, const bool *reduced) {
    int64_t g = 0, stride = 1;
    for (int d = s.ndim - 1; d >= 0; d--) {
        int64_t idx = i % s.dim[d];
        i /= s.dim[d];
        if (!reduced[d]) {
            g += idx * stride;
            stride *= s.dim[d];
        }
    }
    return g;
}

/* w *= desired(norm) / (epsilon + norm), with one norm per index over the axes not reduced. */
static tnt_status rescale_norms(const tnt_layer *l, const tnt__rule *r, tnt__weight *w) {
    const tnt_constraint *c = &r->con;
    tnt_shape s = w->shape;
    bool reduced[TNT_MAX_DIMS] = {false};
    int64_t n = tnt_shape_numel(s), groups = n;
    for (int k = 0; k < (c->n_axes ? c->n_axes : 1); k++) {
        int a = c->n_axes ? c->axes[k] : 0, ax = a < 0 ? a + s.ndim : a;
        if (ax < 0 || ax >= s.ndim)
            return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: axis %d of weight \"%s\" with %d axes", l->name, r->key,
                              a, w->name, s.ndim);
        if (!reduced[ax]) groups /= s.dim[ax];
        reduced[ax] = true;
    }
    double *norm = tnt__calloc((size_t)groups, sizeof *norm);
    if (!norm) return TNT_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) norm[norm_index(i, s, reduced)] += (double)w->value[i] * w->value[i];
    for (int64_t g = 0; g < groups; g++) {
        float nrm = (float)sqrt(norm[g]), desired = nrm;
        if (c->kind == TNT_MAX_NORM) desired = fminf(nrm, c->max_value);
        else if (c->kind == TNT_UNIT_NORM) desired = 1.0f;
        else desired = c->rate * fminf(fmaxf(nrm, c->min_value), c->max_value) + (1.0f - c->rate) * nrm;
        norm[g] = desired / (KERAS_EPSILON + nrm);
    }
    for (int64_t i = 0; i < n; i++) w->value[i] *= (float)norm[norm_index(i, s, reduced)];
    free(norm);
    return TNT_OK;
}

tnt_status tnt__layer_apply_constraints(tnt_layer *l) {
    const tnt__rule *r;
    tnt__weight *w;
    FOR_EACH_RULED_WEIGHT(l, true, r, w) {
        if (l->frozen || !w->trainable) continue; /* Keras constrains what the optimizer updated */
        if (r->con.kind == TNT_NON_NEG) {
            int64_t n = tnt_shape_numel(w->shape);
            for (int64_t k = 0; k < n; k++)
                if (w->value[k] < 0) w->value[k] = 0;
        } else {
            tnt_status s = rescale_norms(l, r, w);
            if (s != TNT_OK) return s;
        }
    }
    return TNT_OK;
}

/* ---- the public setters ------------------------------------------------------------------- */

/* key names one of the layer's regularizer (constraint) keys, as its Keras config lists them. */
static tnt_status check_key(const tnt_layer *l, const char *key, const char *suffix, const char *who) {
    if (!l) return tnt__error(TNT_ERR_ARG, "%s: layer is NULL", who);
    if (!key || !has_suffix(key, suffix) || strlen(key) >= TNT_NAME_MAX)
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\": key \"%.64s\" (expected a key ending in \"%s\")", who,
                          l->name, key ? key : "(null)", suffix);
    if (!tnt__layer_config_has_key(l, key))
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\" (%s) has no \"%s\" in its Keras config", who, l->name,
                          l->ops->class_name, key);
    return TNT_OK;
}

tnt_status tnt_layer_set_regularizer(tnt_layer *l, const char *key, tnt_regularizer_kind kind, float l1, float l2) {
    const char *who = "set_regularizer";
    tnt_status s = check_key(l, key, "_regularizer", who);
    if (s != TNT_OK) return s;
    if (kind < TNT_REG_NONE || kind > TNT_REG_L1L2)
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\": %s: kind %d (expected NONE, L1, L2 or L1L2; "
                          "tnt_layer_set_orthogonal_regularizer sets the orthogonal one)", who, l->name, key, (int)kind);
    tnt__rule r = {.reg = kind, .l1 = kind == TNT_REG_L2 ? 0.0f : l1, .l2 = kind == TNT_REG_L1 ? 0.0f : l2};
    if (!(r.l1 >= 0 && r.l2 >= 0) || isinf(r.l1) || isinf(r.l2))
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\": %s: l1 %g, l2 %g (expected finite values >= 0)", who,
                          l->name, key, (double)r.l1, (double)r.l2);
    snprintf(r.key, sizeof r.key, "%s", key);
    return tnt__layer_set_rule(l, &r);
}

tnt_status tnt_layer_set_orthogonal_regularizer(tnt_layer *l, const char *key, float factor, bool columns) {
    const char *who = "set_orthogonal_regularizer";
    tnt_status s = check_key(l, key, "_regularizer", who);
    if (s != TNT_OK) return s;
    if (!(factor >= 0) || isinf(factor))
        return tnt__error(TNT_ERR_ARG, "%s: layer \"%s\": %s: factor %g (expected a finite value >= 0)", who, l->name,
                          key, (double)factor);
    tnt__rule r = {.reg = TNT_REG_ORTHOGONAL, .factor = factor, .columns = columns};
    snprintf(r.key, sizeof r.key, "%s", key);
    return tnt__layer_set_rule(l, &r);
}

tnt_status tnt__constraint_check(const tnt_constraint *c, const char *layer, const char *key) {
    if (c->kind < TNT_CONSTRAINT_NONE || c->kind > TNT_MIN_MAX_NORM)
        return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: kind %d (expected a tnt_constraint_kind)", layer, key,
                          (int)c->kind);
    if (c->n_axes < 0 || c->n_axes > TNT_MAX_DIMS)
        return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: %d axes (expected 0 to %d)", layer, key, c->n_axes,
                          TNT_MAX_DIMS);
    bool minmax = c->kind == TNT_MIN_MAX_NORM;
    if (!(c->max_value >= 0) || isinf(c->max_value) || (minmax && !(c->min_value >= 0 && c->min_value <= c->max_value)))
        return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: min_value %g, max_value %g (expected 0 <= min_value <= max_value)",
                          layer, key, (double)c->min_value, (double)c->max_value);
    if (minmax && !(c->rate >= 0 && c->rate <= 1))
        return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: rate %g (expected 0 to 1)", layer, key, (double)c->rate);
    return TNT_OK;
}

tnt_status tnt_layer_set_constraint(tnt_layer *l, const char *key, const tnt_constraint *c) {
    tnt_status s = check_key(l, key, "_constraint", "set_constraint");
    if (s != TNT_OK) return s;
    tnt__rule r = {.is_constraint = true};
    if (c) r.con = *c;
    /* zeros: Keras's defaults, MaxNorm(2), MinMaxNorm(0, 1, rate=1) */
    if (r.con.max_value == 0) r.con.max_value = r.con.kind == TNT_MAX_NORM ? 2.0f : 1.0f;
    if (r.con.rate == 0) r.con.rate = 1.0f;
    if ((s = tnt__constraint_check(&r.con, l->name, key)) != TNT_OK) return tnt__error_prefix(s, "set_constraint: ");
    snprintf(r.key, sizeof r.key, "%s", key);
    return tnt__layer_set_rule(l, &r);
}
