/* device_rules.c: see device_rules.h. The penalty terms have one slot each in the plan's partials,
 * in the host's order: first every (rule, weight) of the weight penalties, layer by layer, then
 * every call of a layer with an activity regularizer, node by node. */
#include "model/device_rules.h"
#include "model/device.h"
#include "layers/regularizer.h"
#include "gpu/kernels/kargs.h"

#include <stdio.h>
#include <string.h>

#define PEN_BLOCKS 32                /* the sums' grid: a term's partials are 2 per block */
#define PEN_THREADS 256
#define PEN_DOUBLES (2 * PEN_BLOCKS) /* a term's slot */
#define BLOCK 256

/* ---- which rules run here ---------------------------------------------------------------------- */

bool tnt__dev_rules_supported(const tnt_layer *l, const char **why) {
    for (int i = 0; l->rules && i < l->rules->n; i++)
        if (!l->rules->r[i].is_constraint && l->rules->r[i].reg == TNT_REG_ORTHOGONAL) {
            *why = "OrthogonalRegularizer has no device path yet";
            return false;
        }
    return true;
}

static const tnt__rule *activity_rule(const tnt_layer *l) {
    for (int i = 0; l->rules && i < l->rules->n; i++)
        if (!strcmp(l->rules->r[i].key, "activity_regularizer")) return &l->rules->r[i];
    return NULL;
}

/* The weight penalty (rule a, weight j) of l, as regularizer.c's FOR_EACH_RULED_WEIGHT finds them. */
static bool weight_term(const tnt_layer *l, int a, int j) {
    return !l->rules->r[a].is_constraint && tnt__rule_applies(&l->rules->r[a], &l->weights[j]);
}

static int weight_terms(const tnt_model *m) {
    int k = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int a = 0; m->layers[i]->rules && a < m->layers[i]->rules->n; a++)
            for (int j = 0; j < m->layers[i]->n_weights; j++) k += weight_term(m->layers[i], a, j);
    return k;
}

/* Nodes before `node` whose layer has an activity regularizer. */
static int activity_terms_before(const tnt_model *m, int node) {
    int k = 0;
    for (int i = 0; i < node; i++) k += activity_rule(m->nodes[i].layer) != NULL;
    return k;
}

int tnt__dev_penalty_terms(const tnt_model *m) { return weight_terms(m) + activity_terms_before(m, m->n_nodes); }

/* ---- the penalties' values ------------------------------------------------------------------- */

size_t tnt__dev_penalty_bytes(const tnt_model *m) { return (size_t)tnt__dev_penalty_terms(m) * PEN_DOUBLES * sizeof(double); }

tnt_status tnt__dev_penalty_plan(tnt_model *m, tnt__plan *p) {
    p->penalty_terms = tnt__dev_penalty_terms(m);
    if (!p->penalty_terms) return TNT_OK;
    size_t bytes = (size_t)p->penalty_terms * PEN_DOUBLES * sizeof(double);
    if ((p->host_penalty = tnt__gpu_host_malloc(bytes))) {
        p->penalty_pinned = true;
    } else { /* pageable: the copies wait for the device (as correct, slower) */
        tnt__error_clear();
        if (!(p->host_penalty = tnt__calloc(1, bytes))) return TNT_ERR_NOMEM;
    }
    return TNT_OK;
}

void tnt__dev_penalty_plan_free(tnt__plan *p) {
    if (p->penalty_pinned) tnt__gpu_host_free(p->host_penalty);
    else free(p->host_penalty);
    p->host_penalty = NULL;
    p->penalty_pinned = false;
}

static double *partials(tnt_model *m, const tnt__plan *p, int term) {
    return (double *)((char *)m->dev->arena + p->penalty_offset) + (size_t)term * PEN_DOUBLES;
}

static tnt_status launch_sums(const float *v, double *partial, int64_t n) {
    long long len = n;
    void *args[] = {&v, &partial, &len};
    return tnt__gpu_launch("tnt_k_l1l2_sums_partial", PEN_BLOCKS, PEN_THREADS, 0, args);
}

tnt_status tnt__dev_weight_sums(tnt_model *m, tnt__plan *p) {
    tnt_status s = TNT_OK;
    int k = 0;
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        const tnt_layer *l = m->layers[i];
        for (int a = 0; l->rules && a < l->rules->n && s == TNT_OK; a++)
            for (int j = 0; j < l->n_weights && s == TNT_OK; j++)
                if (weight_term(l, a, j))
                    s = launch_sums(l->weights[j].d_value, partials(m, p, k++), tnt_shape_numel(l->weights[j].shape));
    }
    return s;
}

tnt_status tnt__dev_activity_sums(tnt_model *m, tnt__plan *p, int node, const float *y, int64_t n) {
    if (!activity_rule(m->nodes[node].layer)) return TNT_OK;
    return launch_sums(y, partials(m, p, weight_terms(m) + activity_terms_before(m, node)), n);
}

tnt_status tnt__dev_penalties_down(tnt_model *m, tnt__plan *p, tnt__gpu_stream stream) {
    if (!p->penalty_terms) return TNT_OK;
    return tnt__gpu_copy_to_host(p->host_penalty, partials(m, p, 0),
                                 (size_t)p->penalty_terms * PEN_DOUBLES * sizeof(double), stream);
}

/* l1 * sum|v| + l2 * sum(v^2) from a term's partials (the blocks' in order) */
static double term_value(const tnt__rule *r, const double *part) {
    double s1 = 0, s2 = 0;
    for (int b = 0; b < PEN_BLOCKS; b++) s1 += part[2 * b], s2 += part[2 * b + 1];
    return r->l1 * s1 + r->l2 * s2;
}

void tnt__dev_penalties_read(tnt_model *m, const tnt__plan *p) {
    m->device_weight_penalty = 0;
    if (!p->penalty_terms) return;
    int k = 0;
    for (int i = 0; i < m->n_layers; i++) { /* per layer, then their sum: fit.c's order */
        const tnt_layer *l = m->layers[i];
        double sum = 0;
        for (int a = 0; l->rules && a < l->rules->n; a++)
            for (int j = 0; j < l->n_weights; j++)
                if (weight_term(l, a, j)) sum += term_value(&l->rules->r[a], p->host_penalty + (size_t)k++ * PEN_DOUBLES);
        m->device_weight_penalty += sum;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const tnt__rule *r = activity_rule(m->nodes[i].layer);
        if (r) m->activity_penalty += term_value(r, p->host_penalty + (size_t)k++ * PEN_DOUBLES);
    }
}

/* ---- the gradients --------------------------------------------------------------------------- */

/* g += scale (l1 sign(v) + 2 l2 v), regularizer.c's add_penalty_grad */
static tnt_status launch_grad(const tnt__rule *r, const float *v, float *g, int64_t n, double scale) {
    long long len = n;
    float a = (float)(scale * r->l1), b = (float)(scale * 2.0 * r->l2);
    if (len == 0) return TNT_OK;
    void *args[] = {&v, &g, &len, &a, &b};
    return tnt__gpu_launch("tnt_k_l1l2_grad", tnt__gpu_grid_for(len, BLOCK), BLOCK, 0, args);
}

tnt_status tnt__dev_activity_grad(const tnt_layer *l, const float *y, float *dy, int64_t n, double scale) {
    const tnt__rule *r = activity_rule(l);
    return r ? launch_grad(r, y, dy, n, scale) : TNT_OK;
}

tnt_status tnt__dev_penalty_grads(tnt_model *m) {
    tnt_status s = TNT_OK;
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        tnt_layer *l = m->layers[i];
        for (int a = 0; l->rules && a < l->rules->n && s == TNT_OK; a++)
            for (int j = 0; j < l->n_weights && s == TNT_OK; j++)
                if (weight_term(l, a, j) && l->weights[j].d_grad)
                    s = launch_grad(&l->rules->r[a], l->weights[j].d_value, l->weights[j].d_grad,
                                    tnt_shape_numel(l->weights[j].shape), 1.0);
    }
    return s == TNT_OK ? s : tnt__error_prefix(s, "model \"%s\": the weight penalties' gradients on the GPU: ", m->name);
}

/* ---- the constraints ------------------------------------------------------------------------- */

/* The norm constraint r on weight w: its axes (axis 0 by default) checked as the host does. */
static tnt_status norm_constraint(const tnt_layer *l, const tnt__rule *r, tnt__weight *w) {
    const tnt_constraint *c = &r->con;
    tnt_shape sh = w->shape;
    tnt_k_axes_norm g = {.ndim = sh.ndim, .groups = tnt_shape_numel(sh)};
    for (int k = 0; k < (c->n_axes ? c->n_axes : 1); k++) {
        int a = c->n_axes ? c->axes[k] : 0, ax = a < 0 ? a + sh.ndim : a;
        if (ax < 0 || ax >= sh.ndim)
            return tnt__error(TNT_ERR_ARG, "layer \"%s\": %s: axis %d of weight \"%s\" with %d axes", l->name, r->key,
                              a, w->name, sh.ndim);
        if (!g.reduced[ax]) g.groups /= sh.dim[ax];
        g.reduced[ax] = 1;
    }
    if (g.groups == 0) return TNT_OK; /* an empty weight */
    g.per = tnt_shape_numel(sh) / g.groups;
    for (int d = 0; d < sh.ndim; d++) g.dim[d] = sh.dim[d];
    int kind = c->kind == TNT_MAX_NORM ? 0 : c->kind == TNT_UNIT_NORM ? 1 : 2;
    float maxv = c->max_value, minv = c->min_value, rate = c->rate;
    float *v = w->d_value;
    void *args[] = {&v, &g, &kind, &maxv, &minv, &rate};
    unsigned grid = (unsigned)(g.groups < 65535 ? g.groups : 65535), block = g.per < 128 ? 32 : 128;
    return tnt__gpu_launch("tnt_k_norm_constraint", grid, block, 0, args);
}

tnt_status tnt__dev_apply_constraints(tnt_model *m) {
    tnt_status s = TNT_OK;
    for (int i = 0; i < m->n_layers && s == TNT_OK; i++) {
        tnt_layer *l = m->layers[i];
        if (!l->rules || l->frozen) continue; /* Keras constrains what the optimizer updated */
        for (int a = 0; a < l->rules->n && s == TNT_OK; a++) {
            const tnt__rule *r = &l->rules->r[a];
            for (int j = 0; r->is_constraint && j < l->n_weights && s == TNT_OK; j++) {
                tnt__weight *w = &l->weights[j];
                if (!tnt__rule_applies(r, w) || !w->trainable || !w->d_value) continue;
                long long n = tnt_shape_numel(w->shape);
                float *v = w->d_value;
                void *args[] = {&v, &n};
                if (r->con.kind == TNT_NON_NEG)
                    s = n ? tnt__gpu_launch("tnt_k_non_neg", tnt__gpu_grid_for(n, BLOCK), BLOCK, 0, args) : TNT_OK;
                else
                    s = norm_constraint(l, r, w);
            }
        }
    }
    return s == TNT_OK ? s : tnt__error_prefix(s, "fit: ");
}
