/* dot.c: Keras Dot(axes, normalize): the dot product of two inputs along one axis of each, per
 * sample (Keras's backend.batch_dot). Keras counts the batch axis as 0, so axes name non-batch
 * axes from 1 (negative: from the end). Each input has one or two non-batch axes; the output is
 * the first input's shape without its axis, then the second's without its axis ((1,) when both
 * have one axis: Keras's (batch, 1)). normalize: each input is first l2-normalized along its axis
 * (tf.linalg.l2_normalize: x / sqrt(max(sum x^2, 1e-12))). No weights, no plan, no workspace.
 *
 * Seen per sample, input a is a (P, K) matrix and b a (K, Q) one (P or Q is 1 for an input of one
 * axis), read through strides so that no transpose is copied:
 *   y[p, q] = sum_k a[p, k] b[k, q],  da[p, k] = sum_q dy[p, q] b[k, q],  db[k, q] = sum_p dy[p, q] a[p, k].
 * With normalize, the gradient goes back through the normalization: for u = x / n (n the clamped
 * norm along the axis) and g the gradient of u, dx = (g - u * sum_k g u) / n, and dx = g / n where
 * the clamp holds (sum x^2 < 1e-12, so n does not depend on x). Samples are shared out across
 * OpenMP threads. */
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

#define DOT_EPS 1e-12f /* tf.linalg.l2_normalize's epsilon on the sum of squares */

/* One input seen as a matrix of rows x K: element (r, k) at r * row_stride + k * k_stride. */
typedef struct dot_view {
    int64_t rows, row_stride, k_stride, numel;
} dot_view;

typedef struct dot_cfg {
    int axes[2];       /* as given (Keras, batch = 0, may be negative) */
    bool normalize;
    int64_t K;         /* the contracted length */
    dot_view v[2];     /* a as (P, K), b as (Q, K) */
} dot_cfg;

/* The view of an input of non-batch shape s along non-batch axis ax. */
static dot_view dot_view_of(tnt_shape s, int ax) {
    dot_view v = {1, 0, 1, tnt_shape_numel(s)};
    if (s.ndim == 2) {
        v.rows = s.dim[1 - ax];
        v.row_stride = ax == 1 ? s.dim[1] : 1;
        v.k_stride = ax == 1 ? 1 : s.dim[1];
    }
    return v;
}

static tnt_status dot_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    dot_cfg *c = l->priv;
    char a[96], b[96];
    if (n != 2)
        return tnt__error(TNT_ERR_ARG, "Dot \"%s\": called on %d input(s) (expected exactly 2)", l->name, n);
    int ax[2];
    for (int i = 0; i < 2; i++) {
        const int r = in[i].ndim; /* without the batch */
        if (r < 1 || r > 2)
            return tnt__error(TNT_ERR_UNSUPPORTED,
                              "Dot \"%s\": input %d has shape %s (batch excluded); inputs with one or two "
                              "non-batch axes are supported", l->name, i, tnt_shape_str(in[i], a, sizeof a));
        const int k = c->axes[i] < 0 ? c->axes[i] + r + 1 : c->axes[i]; /* Keras axis, batch = 0 */
        if (k < 1 || k > r)
            return tnt__error(TNT_ERR_ARG,
                              "Dot \"%s\": axis %d of input %d (shape %s, batch excluded) is %s (expected "
                              "1..%d or -%d..-1)", l->name, c->axes[i], i, tnt_shape_str(in[i], a, sizeof a),
                              k == 0 ? "the batch axis" : "out of range", r, r);
        ax[i] = k - 1;
        for (int d = 0; d < r; d++)
            if (in[i].dim[d] <= 0)
                return tnt__error(TNT_ERR_SHAPE, "Dot \"%s\": input %d has shape %s with an empty or unknown "
                                  "dimension", l->name, i, tnt_shape_str(in[i], a, sizeof a));
    }
    if (in[0].dim[ax[0]] != in[1].dim[ax[1]])
        return tnt__error(TNT_ERR_SHAPE,
                          "Dot \"%s\" (axes %d, %d): input 0 has %lld along its axis (shape %s) and input 1 "
                          "has %lld (shape %s); they must agree", l->name, c->axes[0], c->axes[1],
                          (long long)in[0].dim[ax[0]], tnt_shape_str(in[0], a, sizeof a),
                          (long long)in[1].dim[ax[1]], tnt_shape_str(in[1], b, sizeof b));
    c->K = in[0].dim[ax[0]];
    c->v[0] = dot_view_of(in[0], ax[0]);
    c->v[1] = dot_view_of(in[1], ax[1]);
    tnt_shape o = {0};
    for (int i = 0; i < 2; i++)
        if (in[i].ndim == 2) o.dim[o.ndim++] = in[i].dim[1 - ax[i]];
    if (o.ndim == 0) o.dim[o.ndim++] = 1;
    *out = o;
    return TNT_OK;
}

/* x / max(|x|, sqrt(eps)) along k, row by row, into u (laid out as x); norms into inv (1 / n) */
static void dot_normalize(const dot_view *v, int64_t K, const float *x, float *u, float *inv) {
    for (int64_t r = 0; r < v->rows; r++) {
        float ss = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            float t = x[r * v->row_stride + k * v->k_stride];
            ss += t * t;
        }
        inv[r] = ss < DOT_EPS ? -1.0f / sqrtf(DOT_EPS) : 1.0f / sqrtf(ss); /* negative: the clamp holds */
        const float s = fabsf(inv[r]);
        for (int64_t k = 0; k < K; k++) {
            const int64_t i = r * v->row_stride + k * v->k_stride;
            u[i] = x[i] * s;
        }
    }
}

/* dx from g (the gradient of u = x / n) as the header says; g and dx may be the same buffer */
static void dot_normalize_back(const dot_view *v, int64_t K, const float *u, const float *inv, const float *g,
                               float *dx) {
    for (int64_t r = 0; r < v->rows; r++) {
        const float s = fabsf(inv[r]);
        float gu = 0.0f;
        if (inv[r] > 0.0f)
            for (int64_t k = 0; k < K; k++) {
                const int64_t i = r * v->row_stride + k * v->k_stride;
                gu += g[i] * u[i];
            }
        for (int64_t k = 0; k < K; k++) {
            const int64_t i = r * v->row_stride + k * v->k_stride;
            dx[i] = (g[i] - u[i] * gu) * s;
        }
    }
}

static void dot_product(const dot_cfg *c, const float *a, const float *b, float *y) {
    const dot_view *va = &c->v[0], *vb = &c->v[1];
    for (int64_t p = 0; p < va->rows; p++)
        for (int64_t q = 0; q < vb->rows; q++) {
            float s = 0.0f;
            for (int64_t k = 0; k < c->K; k++)
                s += a[p * va->row_stride + k * va->k_stride] * b[q * vb->row_stride + k * vb->k_stride];
            y[p * vb->rows + q] = s;
        }
}

/* per-sample scratch: the normalized inputs and their inverse norms */
static float *dot_scratch(const dot_cfg *c) {
    return tnt__calloc((size_t)(c->v[0].numel + c->v[1].numel + c->v[0].rows + c->v[1].rows), sizeof(float));
}

static tnt_status dot_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    if (a->n_inputs != 2 || !a->xs)
        return tnt__error(TNT_ERR_STATE, "Dot \"%s\": forward with %d input(s), built for 2", l->name, a->n_inputs);
    const int64_t ny = c->v[0].rows * c->v[1].rows;
    bool oom = false;
#pragma omp parallel reduction(|| : oom)
    {
        float *s = c->normalize ? dot_scratch(c) : NULL;
        oom = c->normalize && !s;
#pragma omp for schedule(static)
        for (int64_t n = 0; n < a->batch; n++) {
            if (oom) continue;
            const float *x0 = a->xs[0] + n * c->v[0].numel, *x1 = a->xs[1] + n * c->v[1].numel;
            if (c->normalize) {
                float *u0 = s, *u1 = s + c->v[0].numel, *i0 = u1 + c->v[1].numel, *i1 = i0 + c->v[0].rows;
                dot_normalize(&c->v[0], c->K, x0, u0, i0);
                dot_normalize(&c->v[1], c->K, x1, u1, i1);
                x0 = u0, x1 = u1;
            }
            dot_product(c, x0, x1, a->y + n * ny);
        }
        free(s);
    }
    if (oom) return tnt__error(TNT_ERR_NOMEM, "Dot \"%s\": out of memory for the normalized inputs", l->name);
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(a->batch * ny) * sizeof(float));
    return TNT_OK;
}

static tnt_status dot_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    if (a->n_inputs != 2 || !a->xs || !a->dxs)
        return tnt__error(TNT_ERR_STATE, "Dot \"%s\": backward with %d input(s), built for 2", l->name, a->n_inputs);
    if (!a->dxs[0] && !a->dxs[1]) return TNT_OK;
    const dot_view *va = &c->v[0], *vb = &c->v[1];
    const int64_t ny = va->rows * vb->rows, K = c->K;
    bool oom = false;
#pragma omp parallel reduction(|| : oom)
    {
        float *s = c->normalize ? dot_scratch(c) : NULL;
        oom = c->normalize && !s;
#pragma omp for schedule(static)
        for (int64_t n = 0; n < a->batch; n++) {
            if (oom) continue;
            const float *x0 = a->xs[0] + n * va->numel, *x1 = a->xs[1] + n * vb->numel, *dy = a->dy + n * ny;
            float *d0 = a->dxs[0] ? a->dxs[0] + n * va->numel : NULL;
            float *d1 = a->dxs[1] ? a->dxs[1] + n * vb->numel : NULL;
            float *u0 = NULL, *u1 = NULL, *i0 = NULL, *i1 = NULL;
            if (c->normalize) {
                u0 = s, u1 = s + va->numel, i0 = u1 + vb->numel, i1 = i0 + va->rows;
                dot_normalize(va, K, x0, u0, i0);
                dot_normalize(vb, K, x1, u1, i1);
                x0 = u0, x1 = u1;
            }
            if (d0)
                for (int64_t p = 0; p < va->rows; p++)
                    for (int64_t k = 0; k < K; k++) {
                        float g = 0.0f;
                        for (int64_t q = 0; q < vb->rows; q++)
                            g += dy[p * vb->rows + q] * x1[q * vb->row_stride + k * vb->k_stride];
                        d0[p * va->row_stride + k * va->k_stride] = g;
                    }
            if (d1)
                for (int64_t q = 0; q < vb->rows; q++)
                    for (int64_t k = 0; k < K; k++) {
                        float g = 0.0f;
                        for (int64_t p = 0; p < va->rows; p++)
                            g += dy[p * vb->rows + q] * x0[p * va->row_stride + k * va->k_stride];
                        d1[q * vb->row_stride + k * vb->k_stride] = g;
                    }
            if (c->normalize) {
                if (d0) dot_normalize_back(va, K, u0, i0, d0, d0);
                if (d1) dot_normalize_back(vb, K, u1, i1, d1, d1);
            }
        }
        free(s);
    }
    if (oom) return tnt__error(TNT_ERR_NOMEM, "Dot \"%s\": out of memory for the normalized inputs", l->name);
    return TNT_OK;
}

static void dot_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status dot_get_config(const tnt_layer *l, cJSON *c) {
    const dot_cfg *p = l->priv;
    cJSON *axes = p->axes[0] == p->axes[1] ? cJSON_CreateNumber(p->axes[0]) : cJSON_CreateIntArray(p->axes, 2);
    TNT_KJ(axes);
    cJSON_AddItemToObject(c, "axes", axes);
    TNT_KJ(cJSON_AddBoolToObject(c, "normalize", p->normalize));
    return TNT_OK;
}

static tnt_layer *dot_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int axes[2] = {0, 0};
    bool normalize = false;
    TNT_KJ_READ(tnt__kj_ints(c, "axes", true, 2, NULL, axes, k));
    TNT_KJ_READ(tnt__kj_bool(c, "normalize", false, &normalize, k));
    return tnt__kj_built(tnt_dot(axes[0], axes[1], normalize, k->name), k);
}

const tnt__layer_ops tnt__dot_ops = {
    .class_name = "Dot",
    .from_config = dot_from_config,
    .get_config = dot_get_config,
    .build_multi = dot_build,
    .forward = dot_forward,
    .backward = dot_backward,
    .destroy = dot_destroy,
};

tnt_layer *tnt_dot(int axis0, int axis1, bool normalize, const char *name) {
    dot_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->axes[0] = axis0;
    c->axes[1] = axis1;
    c->normalize = normalize;
    tnt_layer *l = tnt__layer_new(&tnt__dot_ops, name, c);
    if (!l) free(c);
    return l;
}
