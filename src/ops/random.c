/* random.c: random draws keyed on the global sample index, so that any split of a batch across
 * ranks draws the same numbers: the value at element e of sample b of the like-shaped input is
 * drawn with counter (sample_offset + b) * per_sample + e from the step's seed for this node (the
 * layer's seed, the step's, the node's position and its "seed" attribute), as Dropout does.
 *   random_uniform(like; minval 0, maxval 1), random_normal(like; mean 0, stddev 1): no gradient;
 *   dropout(x; rate, training_only true): inverted dropout, the identity outside training unless
 *   training_only is false; its gradient is dy through the same mask (recomputed, not stored). */
#include "ops/ops.h"

enum { R_UNIFORM, R_NORMAL, R_DROPOUT };

static tnt_status parse_random(tnt__opnode *n, const struct cJSON *attrs) {
    tnt__op_attr *a = &n->a;
    int64_t seed = 0;
    tnt_status s = tnt__oa_int(attrs, "seed", &seed);
    a->seed = (uint64_t)seed;
    switch (n->kind % 256) {
    case R_UNIFORM:
        a->f0 = 0, a->f1 = 1;
        if (s == TNT_OK) s = tnt__oa_num(attrs, "minval", &a->f0);
        if (s == TNT_OK) s = tnt__oa_num(attrs, "maxval", &a->f1);
        break;
    case R_NORMAL:
        a->f0 = 0, a->f1 = 1;
        if (s == TNT_OK) s = tnt__oa_num(attrs, "mean", &a->f0);
        if (s == TNT_OK) s = tnt__oa_num(attrs, "stddev", &a->f1);
        break;
    case R_DROPOUT:
        a->flag = true;
        if (s == TNT_OK) s = tnt__oa_num(attrs, "rate", &a->f0);
        if (s == TNT_OK) s = tnt__oa_bool(attrs, "training_only", &a->flag);
        if (s == TNT_OK && (a->f0 < 0 || a->f0 >= 1)) s = tnt__error(TNT_ERR_ARG, "rate %g (expected 0 <= rate < 1)", a->f0);
        break;
    }
    return s;
}

static tnt_status infer_random(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    out[0].s = in[0].s;
    out[0].dt = TNT__F32;
    if (in[0].s.ndim == 0)
        return tnt__op_error(n, TNT_ERR_SHAPE, "the like-shaped input is a scalar (axis 0 must be the samples)");
    return TNT_OK;
}

/* The counter of element i of the like-shaped input. */
static inline uint64_t counter(const tnt__opctx *c, int64_t i) {
    return (uint64_t)(c->sample_offset * (tnt_shape_numel(c->in[0].s) / c->in[0].s.dim[0]) + i);
}

static bool dropping(const tnt__opctx *c) {
    return c->node->a.f0 > 0 && (c->training || !c->node->a.flag);
}

static tnt_status forward_random(tnt__opctx *c) {
    const tnt__op_attr *a = &c->node->a;
    int64_t n = tnt_shape_numel(c->out[0].s);
    float *y = c->out[0].d;
    const float *x = c->in[0].d;
    switch (c->node->kind % 256) {
    case R_UNIFORM:
        for (int64_t i = 0; i < n; i++) y[i] = (float)(a->f0 + (a->f1 - a->f0) * tnt__rand_uniform(c->seed, counter(c, i)));
        break;
    case R_NORMAL:
        for (int64_t i = 0; i < n; i++) y[i] = (float)(a->f0 + a->f1 * tnt__rand_normal(c->seed, counter(c, i)));
        break;
    case R_DROPOUT: {
        if (!dropping(c)) {
            memcpy(y, x, (size_t)n * sizeof(float));
            break;
        }
        const float rate = (float)a->f0, scale = 1.0f / (1.0f - rate);
        for (int64_t i = 0; i < n; i++) y[i] = tnt__rand_uniform(c->seed, counter(c, i)) >= rate ? x[i] * scale : 0.0f;
        break;
    }
    }
    return TNT_OK;
}

static tnt_status backward_random(tnt__opctx *c) {
    if (c->node->kind % 256 != R_DROPOUT) return TNT_OK; /* draws do not depend on the like input's values */
    int64_t n = tnt_shape_numel(c->out[0].s);
    const float *g = c->dout[0];
    float *dx = c->din[0];
    if (!dropping(c)) {
        for (int64_t i = 0; i < n; i++) dx[i] += g[i];
        return TNT_OK;
    }
    const float rate = (float)c->node->a.f0, scale = 1.0f / (1.0f - rate);
    for (int64_t i = 0; i < n; i++)
        if (tnt__rand_uniform(c->seed, counter(c, i)) >= rate) dx[i] += g[i] * scale;
    return TNT_OK;
}

const tnt__op_def tnt__ops_random[] = {
    {"random_uniform", 1, 1, parse_random, infer_random, forward_random, NULL},
    {"random_normal", 1, 1, parse_random, infer_random, forward_random, NULL},
    {"dropout", 1, 1, parse_random, infer_random, forward_random, backward_random},
    {0}};
