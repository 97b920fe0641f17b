/* reduce.c: reductions over axes with keepdims (sum, mean, max, min, prod, var, std, logsumexp,
 * argmax, argmin, any, all). "axis" absent or null: every axis. Sums accumulate in double.
 * Gradients: max/min share dy equally among tied extremes (as TensorFlow and torch.amax); prod
 * handles zeros (one zero: the product of the others; more: 0); var is the population variance
 * (ddof 0, keras.ops.var). argmax/argmin take one axis or none (the flattened input), give the
 * first extreme and carry no gradient. */
#include "ops/ops.h"

#include <math.h>

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_VAR, R_STD, R_LOGSUMEXP, R_ARGMAX, R_ARGMIN, R_ANY, R_ALL };

static tnt_status parse_reduce(tnt__opnode *n, const struct cJSON *attrs) {
    tnt_status s = tnt__oa_axes(attrs, "axis", &n->a);
    if (s == TNT_OK) s = tnt__oa_bool(attrs, "keepdims", &n->a.keepdims);
    int r = n->kind % 256;
    if (s == TNT_OK && (r == R_ARGMAX || r == R_ARGMIN) && n->a.has_axis && n->a.n_axes != 1)
        s = tnt__error(TNT_ERR_ARG, "attribute \"axis\" must be a single axis or null");
    return s;
}

/* Which axes of rank-r input x are reduced. */
static tnt_status reduced_axes(const tnt__opnode *n, int r, bool *red) {
    for (int d = 0; d < r; d++) red[d] = !n->a.has_axis;
    for (int i = 0; n->a.has_axis && i < n->a.n_axes; i++) {
        int ax;
        tnt_status s = tnt__axis(n, n->a.axes[i], r, &ax);
        if (s != TNT_OK) return s;
        if (red[ax]) return tnt__op_error(n, TNT_ERR_ARG, "axis %d is given twice", n->a.axes[i]);
        red[ax] = true;
    }
    return TNT_OK;
}

static tnt_status infer_reduce(const tnt__opnode *n, const tnt__ten *in, tnt__ten *out) {
    bool red[TNT_MAX_DIMS];
    tnt_status s = reduced_axes(n, in[0].s.ndim, red);
    if (s != TNT_OK) return s;
    tnt_shape o = {0};
    for (int d = 0; d < in[0].s.ndim; d++)
        if (!red[d]) o.dim[o.ndim++] = in[0].s.dim[d];
        else if (n->a.keepdims) o.dim[o.ndim++] = 1;
    int r = n->kind % 256;
    out[0].s = o;
    out[0].dt = r == R_ARGMAX || r == R_ARGMIN ? TNT__I32 : r == R_ANY || r == R_ALL ? TNT__BOOL
                : r == R_MEAN || r == R_VAR || r == R_STD || r == R_LOGSUMEXP ? TNT__F32 : in[0].dt;
    return TNT_OK;
}

/* The reduction's geometry: the input shape and, per input axis, the output's stride (0 when
 * reduced), so that output element = sum over input index of idx[d] * ost[d]. When the reduced
 * axes are consecutive (the usual case: the last axis, or all) the input is also (outer, red,
 * inner) with output (outer, inner), walked by three plain loops instead of the odometer. */
typedef struct geom {
    tnt_shape s;
    int64_t ost[TNT_MAX_DIMS], ist[TNT_MAX_DIMS];
    int64_t n_in, n_out, count; /* elements reduced into each output */
    bool ori;
    int64_t outer, red, inner;
} geom;

static void geom_init(const tnt__opnode *n, tnt_shape s, geom *g) {
    bool red[TNT_MAX_DIMS];
    reduced_axes(n, s.ndim, red);
    tnt_shape kept = s;
    for (int d = 0; d < s.ndim; d++)
        if (red[d]) kept.dim[d] = 1;
    g->s = s.ndim ? s : (tnt_shape){1, {1}};
    if (!s.ndim) kept = g->s, red[0] = true;
    tnt__bstrides(kept, g->s, g->ost);
    tnt__strides(g->s, g->ist);
    g->n_in = tnt_shape_numel(g->s), g->n_out = tnt_shape_numel(kept);
    g->count = g->n_out ? g->n_in / g->n_out : 0;
    int first = -1, last = -1;
    for (int d = 0; d < g->s.ndim; d++)
        if (red[d] && g->s.dim[d] > 1) last = d, first = first < 0 ? d : first;
    g->ori = true;
    for (int d = first; first >= 0 && d <= last; d++) g->ori &= red[d] || g->s.dim[d] == 1;
    g->outer = g->red = g->inner = 1;
    for (int d = 0; d < g->s.ndim; d++)
        if (first < 0 || d < first) g->outer *= g->s.dim[d];
        else if (d > last) g->inner *= g->s.dim[d];
        else g->red *= g->s.dim[d];
}

/* Runs BODY for every input element i with its output element o (and, on the fast path, its
 * position pos within the reduced block). */
#define EACH(g, ...)                                                                              \
    do {                                                                                          \
        if ((g).ori && (g).inner == 1) { /* o fixed in the inner loop: kept in a register */     \
            for (int64_t o = 0; o < (g).outer; o++)                                               \
                for (int64_t pos = 0; pos < (g).red; pos++) {                                     \
                    const int64_t i = o * (g).red + pos;                                          \
                    __VA_ARGS__;                                                                  \
                }                                                                                 \
            break;                                                                                \
        }                                                                                         \
        if ((g).ori) {                                                                            \
            for (int64_t ou_ = 0; ou_ < (g).outer; ou_++)                                         \
                for (int64_t pos = 0; pos < (g).red; pos++) {                                     \
                    const int64_t ib_ = (ou_ * (g).red + pos) * (g).inner, ob_ = ou_ * (g).inner; \
                    for (int64_t in_ = 0; in_ < (g).inner; in_++) {                               \
                        const int64_t i = ib_ + in_, o = ob_ + in_;                               \
                        __VA_ARGS__;                                                              \
                    }                                                                             \
                }                                                                                 \
            break;                                                                                \
        }                                                                                         \
        int64_t idx_[TNT_MAX_DIMS] = {0}, o = 0;                                                  \
        const int64_t pos = -1;                                                                   \
        (void)pos;                                                                                \
        const int last_ = (g).s.ndim - 1;                                                         \
        for (int64_t i = 0; i < (g).n_in; i++) {                                                  \
            __VA_ARGS__;                                                                          \
            for (int d_ = last_; d_ >= 0; d_--) {                                                 \
                idx_[d_]++, o += (g).ost[d_];                                                     \
                if (idx_[d_] < (g).s.dim[d_]) break;                                              \
                o -= (g).ost[d_] * (g).s.dim[d_], idx_[d_] = 0;                                   \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* Means of each output group into m (double, n_out). */
static void group_means(const geom *g, const float *X, double *m) {
    if (g->ori && g->inner == 1) { /* rows along the last axes */
        for (int64_t o = 0; o < g->outer; o++) m[o] = tnt__row_sum(X + o * g->red, g->red) / (double)g->count;
        return;
    }
    for (int64_t j = 0; j < g->n_out; j++) m[j] = 0;
    EACH(*g, m[o] += X[i]);
    for (int64_t j = 0; j < g->n_out; j++) m[j] /= (double)g->count;
}

static tnt_status forward_reduce(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    geom g;
    geom_init(n, c->in[0].s, &g);
    const float *X = c->in[0].d;
    float *Y = c->out[0].d;
    int r = n->kind % 256;
    double *acc = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(double));
    if (!acc) return TNT_ERR_NOMEM;
    switch (r) {
    case R_SUM:
    case R_MEAN:
        for (int64_t j = 0; j < g.n_out; j++) acc[j] = 0;
        if (g.ori && g.inner == 1)
            for (int64_t o = 0; o < g.outer; o++) acc[o] = tnt__row_sum(X + o * g.red, g.red);
        else EACH(g, acc[o] += X[i]);
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = (float)(r == R_MEAN ? acc[j] / (double)g.count : acc[j]);
        break;
    case R_MAX:
    case R_MIN:
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = r == R_MAX ? -INFINITY : INFINITY;
        if (r == R_MAX && g.ori && g.inner == 1)
            for (int64_t o = 0; o < g.outer; o++) Y[o] = tnt__row_max(X + o * g.red, g.red);
        else if (r == R_MAX) EACH(g, if (X[i] > Y[o]) Y[o] = X[i]);
        else EACH(g, if (X[i] < Y[o]) Y[o] = X[i]);
        break;
    case R_PROD:
        for (int64_t j = 0; j < g.n_out; j++) acc[j] = 1;
        EACH(g, acc[o] *= X[i]);
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = (float)acc[j];
        break;
    case R_VAR:
    case R_STD: {
        double *m = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(double));
        if (!m) return TNT_ERR_NOMEM;
        group_means(&g, X, m);
        for (int64_t j = 0; j < g.n_out; j++) acc[j] = 0;
        if (g.ori && g.inner == 1)
            for (int64_t o = 0; o < g.outer; o++) acc[o] = tnt__row_sqdev(X + o * g.red, g.red, m[o]);
        else EACH(g, acc[o] += (X[i] - m[o]) * (X[i] - m[o]));
        for (int64_t j = 0; j < g.n_out; j++) {
            double v = acc[j] / (double)g.count;
            Y[j] = (float)(r == R_STD ? sqrt(v) : v);
        }
        break;
    }
    case R_LOGSUMEXP: {
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = -INFINITY;
        EACH(g, if (X[i] > Y[o]) Y[o] = X[i]);
        for (int64_t j = 0; j < g.n_out; j++) acc[j] = 0;
        EACH(g, acc[o] += isinf(Y[o]) ? 0.0 : exp((double)X[i] - Y[o]));
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = isinf(Y[j]) ? Y[j] : (float)(Y[j] + log(acc[j]));
        break;
    }
    case R_ARGMAX:
    case R_ARGMIN: {
        /* the position within the reduced block: along the axis, or the flat index for all axes
         * (one axis or all is always the (outer, red, inner) path) */
        float *best = (float *)acc;
        for (int64_t j = 0; j < g.n_out; j++) best[j] = r == R_ARGMAX ? -INFINITY : INFINITY, Y[j] = -1;
        EACH(g, {
            bool better = Y[o] < 0 || (r == R_ARGMAX ? X[i] > best[o] : X[i] < best[o]);
            if (better) best[o] = X[i], Y[o] = (float)pos;
        });
        break;
    }
    case R_ANY:
    case R_ALL:
        for (int64_t j = 0; j < g.n_out; j++) Y[j] = r == R_ALL;
        if (r == R_ANY) EACH(g, if (X[i] != 0) Y[o] = 1);
        else EACH(g, if (X[i] == 0) Y[o] = 0);
        break;
    }
    return TNT_OK;
}

static tnt_status backward_reduce(tnt__opctx *c) {
    const tnt__opnode *n = c->node;
    geom g;
    geom_init(n, c->in[0].s, &g);
    const float *X = c->in[0].d, *Y = c->out[0].d, *G = c->dout[0];
    float *DX = c->din[0];
    int r = n->kind % 256;
    switch (r) {
    case R_SUM: EACH(g, DX[i] += G[o]); break;
    case R_MEAN: {
        const float inv = 1.0f / (float)g.count;
        EACH(g, DX[i] += G[o] * inv);
        break;
    }
    case R_MAX:
    case R_MIN: {
        float *ties = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(float));
        if (!ties) return TNT_ERR_NOMEM;
        for (int64_t j = 0; j < g.n_out; j++) ties[j] = 0;
        EACH(g, ties[o] += X[i] == Y[o]);
        EACH(g, if (X[i] == Y[o]) DX[i] += G[o] / ties[o]);
        break;
    }
    case R_PROD: {
        double *nz = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(double));
        int64_t *zeros = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(int64_t));
        if (!nz || !zeros) return TNT_ERR_NOMEM;
        for (int64_t j = 0; j < g.n_out; j++) nz[j] = 1, zeros[j] = 0;
        EACH(g, if (X[i] != 0) nz[o] *= X[i]; else zeros[o]++);
        EACH(g, {
            double d = X[i] != 0 ? (zeros[o] ? 0.0 : nz[o] / X[i]) : (zeros[o] == 1 ? nz[o] : 0.0);
            DX[i] += (float)(G[o] * d);
        });
        break;
    }
    case R_VAR:
    case R_STD: {
        double *m = tnt__scratch_get(c->scratch, (size_t)g.n_out * sizeof(double));
        if (!m) return TNT_ERR_NOMEM;
        group_means(&g, X, m);
        const double k = 2.0 / (double)g.count;
        if (r == R_VAR) EACH(g, DX[i] += (float)(G[o] * k * (X[i] - m[o])));
        else EACH(g, DX[i] += Y[o] > 0 ? (float)(G[o] * 0.5 * k * (X[i] - m[o]) / Y[o]) : 0.0f);
        break;
    }
    case R_LOGSUMEXP: EACH(g, DX[i] += isinf(Y[o]) ? 0.0f : G[o] * expf(X[i] - Y[o])); break;
    }
    return TNT_OK;
}

#define REDUCE(name) {name, 1, 1, parse_reduce, infer_reduce, forward_reduce, backward_reduce}
#define REDUCE_NOGRAD(name) {name, 1, 1, parse_reduce, infer_reduce, forward_reduce, NULL}

const tnt__op_def tnt__ops_reduce[] = {
    REDUCE("sum"), REDUCE("mean"), REDUCE("max"), REDUCE("min"), REDUCE("prod"), REDUCE("var"), REDUCE("std"),
    REDUCE("logsumexp"), REDUCE_NOGRAD("argmax"), REDUCE_NOGRAD("argmin"), REDUCE_NOGRAD("any"),
    REDUCE_NOGRAD("all"), {0}};
