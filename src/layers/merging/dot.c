/* dot.c: Keras Dot(axes, normalize=False): the dot product of two inputs along one axis of each,
 * per sample (backend.batch_dot). Axes count the batch as 0 (1 is the first non-batch axis, -1
 * the last); one number applies to both inputs. Inputs of rank 1 or 2 (batch excluded):
 *   (d) . (d)          -> (1)
 *   (n, d) . (d)       -> (n)      and (d) . (m, d) -> (m)
 *   (n, d) . (m, d)    -> (n, m)   (any pair of contraction axes)
 * normalize=True: each input is first L2-normalized along its contraction axis, x / sqrt(max(sum
 * x^2, 1e-12)) (tf.linalg.l2_normalize), so the result is the cosine similarity.
 *
 * Each input is read as a matrix (free index i, contracted index k) through strides, so every
 * case is y[i, j] = sum_k a(i, k) b(j, k); backward: da(i, k) = sum_j dy[i, j] b(j, k), db(j, k) =
 * sum_i dy[i, j] a(i, k), then through the normalization. No weights, no plan. On the device
 * (normalize=False): each product one strided batched GEMM over the samples. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

typedef struct side {
    int64_t free, d;      /* free and contracted lengths */
    int64_t si, sk;       /* strides of the free and the contracted index */
    int64_t size;         /* values per sample */
} side;

typedef struct dot_cfg {
    int axes[2];          /* as given (Keras, batch = 0) */
    bool normalize;
    side s[2];
} dot_cfg;

#define DOT_EPS 1e-12

static tnt_status dot_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    dot_cfg *c = l->priv;
    char a[96], b[96];
    if (n != 2)
        return tnt__error(TNT_ERR_ARG, "Dot \"%s\": called on %d input(s) (expected 2)", l->name, n);
    for (int t = 0; t < 2; t++) {
        int r = in[t].ndim, ax = c->axes[t] < 0 ? r + c->axes[t] : c->axes[t] - 1;
        if (r < 1 || r > 2)
            return tnt__error(TNT_ERR_UNSUPPORTED, "Dot \"%s\": input %d has shape %s (batch excluded): inputs of "
                              "rank 1 or 2 are supported", l->name, t, tnt_shape_str(in[t], a, sizeof a));
        if (ax < 0 || ax >= r)
            return tnt__error(TNT_ERR_ARG, "Dot \"%s\": axis %d is out of range for input %d of shape %s (batch "
                              "excluded; expected 1..%d or -%d..-1; the batch axis 0 is not supported)",
                              l->name, c->axes[t], t, tnt_shape_str(in[t], a, sizeof a), r, r);
        side *s = &c->s[t];
        s->size = tnt_shape_numel(in[t]);
        if (r == 1) {
            *s = (side){.free = 1, .d = in[t].dim[0], .si = 0, .sk = 1, .size = s->size};
        } else if (ax == 1) {
            *s = (side){.free = in[t].dim[0], .d = in[t].dim[1], .si = in[t].dim[1], .sk = 1, .size = s->size};
        } else {
            *s = (side){.free = in[t].dim[1], .d = in[t].dim[0], .si = 1, .sk = in[t].dim[1], .size = s->size};
        }
    }
    if (c->s[0].d != c->s[1].d)
        return tnt__error(TNT_ERR_SHAPE, "Dot \"%s\" (axes %d, %d): inputs of shapes %s and %s (batch excluded) "
                          "differ along the axes (%lld and %lld)", l->name, c->axes[0], c->axes[1],
                          tnt_shape_str(in[0], a, sizeof a), tnt_shape_str(in[1], b, sizeof b),
                          (long long)c->s[0].d, (long long)c->s[1].d);
    *out = (tnt_shape){0};
    if (in[0].ndim == 2) out->dim[out->ndim++] = c->s[0].free;
    if (in[1].ndim == 2) out->dim[out->ndim++] = c->s[1].free;
    if (out->ndim == 0) out->dim[out->ndim++] = 1;
    return TNT_OK;
}

/* 1 / sqrt(max(sum_k x(i, k)^2, eps)) for every free index i (1 without normalize) */
static void inv_norms(const side *s, const float *x, bool normalize, double *inv) {
    for (int64_t i = 0; i < s->free; i++) {
        double q = 0;
        for (int64_t k = 0; normalize && k < s->d; k++) {
            double v = x[i * s->si + k * s->sk];
            q += v * v;
        }
        inv[i] = normalize ? 1.0 / sqrt(q > DOT_EPS ? q : DOT_EPS) : 1.0;
    }
}

static tnt_status dot_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    const side *A = &c->s[0], *B = &c->s[1];
    double *inv = malloc((size_t)(A->free + B->free) * sizeof(double));
    if (!inv) return tnt__error(TNT_ERR_NOMEM, "Dot \"%s\": out of memory", l->name);
    for (int64_t b = 0; b < a->batch; b++) {
        const float *x1 = a->xs[0] + b * A->size, *x2 = a->xs[1] + b * B->size;
        float *y = a->y + b * A->free * B->free;
        inv_norms(A, x1, c->normalize, inv);
        inv_norms(B, x2, c->normalize, inv + A->free);
        for (int64_t i = 0; i < A->free; i++)
            for (int64_t j = 0; j < B->free; j++) {
                double sum = 0;
                for (int64_t k = 0; k < A->d; k++) sum += (double)x1[i * A->si + k * A->sk] * x2[j * B->si + k * B->sk];
                y[i * B->free + j] = (float)(sum * inv[i] * inv[A->free + j]);
            }
    }
    free(inv);
    if (a->preact && a->preact != a->y)
        memcpy(a->preact, a->y, (size_t)(a->batch * A->free * B->free) * sizeof(float));
    return TNT_OK;
}

/* dx for one input: g(i, k) = sum_j dy(i, j) * other_hat(j, k) (dy read transposed for input 1),
 * then through x_hat = x * inv: dx = (g - x_hat (x_hat . g)) * inv where the norm was above eps. */
static void dot_grad(const side *S, const side *O, const float *x, const float *xo, const double *inv,
                     const double *inv_o, const float *dy, bool transposed, bool normalize, float *dx, double *g) {
    for (int64_t i = 0; i < S->free; i++) {
        double proj = 0;
        for (int64_t k = 0; k < S->d; k++) {
            double sum = 0;
            for (int64_t j = 0; j < O->free; j++) {
                double d = transposed ? dy[j * S->free + i] : dy[i * O->free + j];
                sum += d * xo[j * O->si + k * O->sk] * inv_o[j];
            }
            g[k] = sum;
            proj += sum * x[i * S->si + k * S->sk] * inv[i];
        }
        /* the max passes no gradient below eps: there x_hat = x / sqrt(eps) is linear in x */
        double q = 1.0 / (inv[i] * inv[i]);
        bool through = normalize && q > DOT_EPS * (1 + 1e-9);
        for (int64_t k = 0; k < S->d; k++) {
            double xh = x[i * S->si + k * S->sk] * inv[i];
            dx[i * S->si + k * S->sk] = (float)((g[k] - (through ? xh * proj : 0.0)) * inv[i]);
        }
    }
}

static tnt_status dot_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    const side *A = &c->s[0], *B = &c->s[1];
    double *inv = malloc((size_t)(A->free + B->free + A->d) * sizeof(double));
    if (!inv) return tnt__error(TNT_ERR_NOMEM, "Dot \"%s\": out of memory", l->name);
    for (int64_t b = 0; b < a->batch; b++) {
        const float *x1 = a->xs[0] + b * A->size, *x2 = a->xs[1] + b * B->size;
        const float *dy = a->dy + b * A->free * B->free;
        inv_norms(A, x1, c->normalize, inv);
        inv_norms(B, x2, c->normalize, inv + A->free);
        double *g = inv + A->free + B->free;
        if (a->dxs[0]) dot_grad(A, B, x1, x2, inv, inv + A->free, dy, false, c->normalize, a->dxs[0] + b * A->size, g);
        if (a->dxs[1]) dot_grad(B, A, x2, x1, inv + A->free, inv, dy, true, c->normalize, a->dxs[1] + b * B->size, g);
    }
    free(inv);
    return TNT_OK;
}

/* ---- on the device: one strided batched GEMM per product, no kernel of its own ---------------- */

/* A logical matrix (rows x cols) of a sample as the GEMM reads it: stored row-major with row
 * stride ld (t false), or its transpose stored so (t true); step: floats between samples. */
typedef struct mview {
    const float *p;
    int64_t rows, cols, ld, step;
    bool t;
} mview;

/* input side s's matrix (free, d) at p, from its strides */
static mview side_view(const side *s, const float *p) {
    if (s->sk == 1 || s->free == 1) /* a single free row is contiguous either way */
        return (mview){p, s->free, s->d, s->free == 1 ? s->d : s->si, s->size, false};
    return (mview){p, s->free, s->d, s->sk, s->size, true};
}

static mview transposed(mview v) { return (mview){v.p, v.cols, v.rows, v.ld, v.step, !v.t}; }

/* c = a . b for every sample; c is written through its view (a transposed one as c^T = b^T a^T) */
static tnt_status dot_gemm(mview c, mview a, mview b, int64_t batch) {
    if (c.t) {
        mview at = transposed(a);
        a = transposed(b), b = at, c = transposed(c);
    }
    return tnt__gpu_sgemm_strided(a.t, b.t, c.rows, c.cols, a.cols, 1.0f, a.p, a.ld, a.step, b.p, b.ld, b.step, 0.0f,
                                  (float *)c.p, c.ld, c.step, batch);
}

static bool dot_gpu_supported(const tnt_layer *l, const char **why) {
    const dot_cfg *c = l->priv;
    if (!c->normalize) return true;
    *why = "normalize=True has no device path yet";
    return false;
}

/* y (A.free, B.free) = A . B^T */
static tnt_status dot_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    const side *A = &c->s[0], *B = &c->s[1];
    const int64_t ny = A->free * B->free;
    mview y = {a->y, A->free, B->free, B->free, ny, false};
    tnt_status s = dot_gemm(y, side_view(A, a->xs[0]), transposed(side_view(B, a->xs[1])), a->batch);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(a->batch * ny) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

/* dA (A.free, d) = dy . B, dB (B.free, d) = dy^T . A, each written in its input's layout */
static tnt_status dot_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const dot_cfg *c = l->priv;
    const side *A = &c->s[0], *B = &c->s[1];
    mview dy = {a->dy, A->free, B->free, B->free, A->free * B->free, false};
    tnt_status s = TNT_OK;
    if (a->dxs[0]) s = dot_gemm(side_view(A, a->dxs[0]), dy, side_view(B, a->xs[1]), a->batch);
    if (s == TNT_OK && a->dxs[1])
        s = dot_gemm(side_view(B, a->dxs[1]), transposed(dy), side_view(A, a->xs[0]), a->batch);
    return s;
}

static const tnt__gpu_ops dot_gpu_ops = {
    .supported = dot_gpu_supported,
    .forward = dot_gpu_forward,
    .backward = dot_gpu_backward,
};

static void dot_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status dot_get_config(const tnt_layer *l, cJSON *c) {
    const dot_cfg *p = l->priv;
    if (p->axes[0] == p->axes[1]) {
        TNT_KJ(cJSON_AddNumberToObject(c, "axes", p->axes[0]));
    } else {
        cJSON *ax = cJSON_AddArrayToObject(c, "axes");
        TNT_KJ(ax && cJSON_AddItemToArray(ax, cJSON_CreateNumber(p->axes[0])) &&
               cJSON_AddItemToArray(ax, cJSON_CreateNumber(p->axes[1])));
    }
    TNT_KJ(cJSON_AddBoolToObject(c, "normalize", p->normalize));
    return TNT_OK;
}

static tnt_layer *dot_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    const cJSON *ax = cJSON_GetObjectItemCaseSensitive(c, "axes");
    int axes[2];
    if (cJSON_IsNumber(ax)) {
        axes[0] = axes[1] = ax->valueint;
    } else if (cJSON_IsArray(ax) && cJSON_GetArraySize(ax) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(ax, 0)) &&
               cJSON_IsNumber(cJSON_GetArrayItem(ax, 1))) {
        axes[0] = cJSON_GetArrayItem(ax, 0)->valueint;
        axes[1] = cJSON_GetArrayItem(ax, 1)->valueint;
    } else {
        return tnt__kj_fail(k, TNT_ERR_FORMAT, "axes: expected an integer or a list of two integers");
    }
    bool normalize = false;
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
    .gpu = &dot_gpu_ops,
};

tnt_layer *tnt_dot(int axis1, int axis2, bool normalize, const char *name) {
    dot_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->axes[0] = axis1;
    c->axes[1] = axis2;
    c->normalize = normalize;
    tnt_layer *l = tnt__layer_new(&tnt__dot_ops, name, c);
    if (!l) free(c);
    return l;
}
