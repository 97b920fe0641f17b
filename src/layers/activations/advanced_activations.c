/* advanced_activations.c: Keras's activation layers with parameters: ReLU (max_value,
 * negative_slope, threshold), LeakyReLU, ELU, ThresholdedReLU, PReLU (a learned slope per cell,
 * shared along shared_axes) and Softmax over any axis. Plain C loops: elementwise and
 * memory-bound. Gradients follow TensorFlow's at the kinks (relu: 0 at x == 0; clip passes at
 * the bounds; leaky relu: alpha at x == 0). None needs a plan: backward reads x (and y for
 * Softmax), which the model keeps until backward. */
#include "gpu/gpu.h"
#include "layers/fused.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

/* ---- elementwise: ReLU, LeakyReLU, ELU, ThresholdedReLU ----------------------------------- */

typedef enum elt_kind { ELT_RELU, ELT_LEAKY, ELT_ELU, ELT_THRESHOLDED } elt_kind;

typedef struct elt_cfg {
    elt_kind kind;
    float max_value;       /* ReLU: INFINITY when Keras's max_value is None */
    float slope;           /* ReLU negative_slope, LeakyReLU alpha */
    float threshold;       /* ReLU threshold, ThresholdedReLU theta */
    float alpha;           /* ELU */
} elt_cfg;

static tnt_status same_shape_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    (void)l;
    *out = in;
    return TNT_OK;
}

/* Keras backend.relu: (x > t ? x : 0) clipped to [0, max_value], minus slope * relu(t - x). */
static inline float relu_f(const elt_cfg *c, float x) {
    float pos = x > c->threshold ? x : 0.0f;
    pos = fminf(fmaxf(pos, 0.0f), c->max_value);
    return pos - c->slope * fmaxf(c->threshold - x, 0.0f);
}

static inline float relu_df(const elt_cfg *c, float x) {
    float d = x > c->threshold && x > 0.0f && x <= c->max_value ? 1.0f : 0.0f;
    return d + (x < c->threshold ? c->slope : 0.0f);
}

static inline float elt_f(const elt_cfg *c, float x) {
    switch (c->kind) {
    case ELT_RELU: return relu_f(c, x);
    case ELT_LEAKY: return x > 0.0f ? x : c->slope * x;
    case ELT_ELU: return x > 0.0f ? x : c->alpha * expm1f(x);
    case ELT_THRESHOLDED: return x > c->threshold ? x : 0.0f;
    }
    return x;
}

static inline float elt_df(const elt_cfg *c, float x) {
    switch (c->kind) {
    case ELT_RELU: return relu_df(c, x);
    case ELT_LEAKY: return x > 0.0f ? 1.0f : c->slope;
    case ELT_ELU: return x > 0.0f ? 1.0f : c->alpha * expf(x);
    case ELT_THRESHOLDED: return x > c->threshold ? 1.0f : 0.0f;
    }
    return 1.0f;
}

/* x, y, preact: (batch, shape...) */
static tnt_status elt_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const elt_cfg *c = l->priv;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a->y[i] = elt_f(c, a->x[i]);
    if (a->preact) memcpy(a->preact, a->y, (size_t)n * sizeof(float));
    return TNT_OK;
}

static tnt_status elt_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const elt_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    int64_t n = a->batch * tnt_shape_numel(l->in_shape);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a->dx[i] = a->dy[i] * elt_df(c, a->x[i]);
    return TNT_OK;
}

/* on the device: the same formulas (kernels/activations.cu tnt_k_elt_*; ELU's exp from kmath.h) */
static tnt_status elt_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const elt_cfg *c = l->priv;
    long long n = a->batch * tnt_shape_numel(l->in_shape);
    int kind = (int)c->kind;
    float mv = c->max_value, slope = c->slope, th = c->threshold, al = c->alpha;
    const float *x = a->x;
    float *y = a->y;
    void *args[] = {&x, &y, &n, &kind, &mv, &slope, &th, &al};
    tnt_status s = tnt__gpu_launch("tnt_k_elt_fwd", tnt__gpu_grid_for(n, 256), 256, 0, args);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status elt_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const elt_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    long long n = a->batch * tnt_shape_numel(l->in_shape);
    int kind = (int)c->kind;
    float mv = c->max_value, slope = c->slope, th = c->threshold, al = c->alpha;
    const float *x = a->x, *dy = a->dy;
    float *dx = a->dx;
    void *args[] = {&x, &dy, &dx, &n, &kind, &mv, &slope, &th, &al};
    return tnt__gpu_launch("tnt_k_elt_bwd", tnt__gpu_grid_for(n, 256), 256, 0, args);
}

static const tnt__gpu_ops elt_gpu_ops = {.forward = elt_gpu_forward, .backward = elt_gpu_backward};

static void priv_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status relu_get_config(const tnt_layer *l, cJSON *c) {
    const elt_cfg *e = l->priv;
    if (isinf(e->max_value)) TNT_KJ(cJSON_AddNullToObject(c, "max_value"));
    else TNT_KJ(cJSON_AddNumberToObject(c, "max_value", tnt__kj_f(e->max_value)));
    TNT_KJ(cJSON_AddNumberToObject(c, "negative_slope", tnt__kj_f(e->slope)));
    TNT_KJ(cJSON_AddNumberToObject(c, "threshold", tnt__kj_f(e->threshold)));
    return TNT_OK;
}

/* Keras 2 spells the slope "alpha"; Keras 3 "negative_slope" (both read back). */
static tnt_status leaky_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ(cJSON_AddNumberToObject(c, "alpha", tnt__kj_f(((const elt_cfg *)l->priv)->slope)));
    return TNT_OK;
}

static tnt_status elu_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ(cJSON_AddNumberToObject(c, "alpha", tnt__kj_f(((const elt_cfg *)l->priv)->alpha)));
    return TNT_OK;
}

static tnt_status thresholded_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ(cJSON_AddNumberToObject(c, "theta", tnt__kj_f(((const elt_cfg *)l->priv)->threshold)));
    return TNT_OK;
}

#define ELT_OPS(var, cls, getcfg, fromcfg)                                                        \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .get_config = getcfg,                                                                     \
        .from_config = fromcfg,                                                                   \
        .build = same_shape_build,                                                                \
        .forward = elt_forward,                                                                   \
        .backward = elt_backward,                                                                 \
        .destroy = priv_destroy,                                                                  \
        .supports_masking = true,                                                                 \
        .gpu = &elt_gpu_ops,                                                                      \
    }
static tnt_layer *relu_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double max_value = INFINITY, slope = 0.0, threshold = 0.0;
    if (!tnt__kj_absent(tnt__kj_item(c, "max_value")))
        TNT_KJ_READ(tnt__kj_num(c, "max_value", true, 0.0, &max_value, k));
    TNT_KJ_READ(tnt__kj_num(c, "negative_slope", false, 0.0, &slope, k));
    TNT_KJ_READ(tnt__kj_num(c, "threshold", false, 0.0, &threshold, k));
    return tnt__kj_built(tnt_relu_layer((float)max_value, (float)slope, (float)threshold, k->name), k);
}

static tnt_layer *leaky_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double alpha = 0.3;
    const char *key = tnt__kj_absent(tnt__kj_item(c, "alpha")) ? "negative_slope" : "alpha"; /* Keras 3: negative_slope */
    TNT_KJ_READ(tnt__kj_num(c, key, false, 0.3, &alpha, k));
    return tnt__kj_built(tnt_leaky_relu_layer((float)alpha, k->name), k);
}

static tnt_layer *elu_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double alpha = 1.0;
    TNT_KJ_READ(tnt__kj_num(c, "alpha", false, 1.0, &alpha, k));
    return tnt__kj_built(tnt_elu_layer((float)alpha, k->name), k);
}

static tnt_layer *thresholded_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double theta = 1.0;
    TNT_KJ_READ(tnt__kj_num(c, "theta", false, 1.0, &theta, k));
    return tnt__kj_built(tnt_thresholded_relu((float)theta, k->name), k);
}

ELT_OPS(tnt__relu_ops, "ReLU", relu_get_config, relu_from_config);
ELT_OPS(tnt__leaky_relu_ops, "LeakyReLU", leaky_get_config, leaky_from_config);
ELT_OPS(tnt__elu_ops, "ELU", elu_get_config, elu_from_config);
ELT_OPS(tnt__thresholded_relu_ops, "ThresholdedReLU", thresholded_get_config, thresholded_from_config);

static tnt_layer *elt_new(const tnt__layer_ops *ops, elt_cfg cfg, const char *name) {
    elt_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_relu_layer(float max_value, float negative_slope, float threshold, const char *name) {
    if (isnan(max_value) || max_value < 0.0f) {
        tnt__error(TNT_ERR_ARG, "ReLU: max_value %g (expected >= 0, or INFINITY for none)", (double)max_value);
        return NULL;
    }
    if (!(negative_slope >= 0.0f) || !isfinite(negative_slope)) {
        tnt__error(TNT_ERR_ARG, "ReLU: negative_slope %g (expected a finite value >= 0)", (double)negative_slope);
        return NULL;
    }
    if (!isfinite(threshold)) {
        tnt__error(TNT_ERR_ARG, "ReLU: threshold %g (expected a finite value)", (double)threshold);
        return NULL;
    }
    return elt_new(&tnt__relu_ops, (elt_cfg){.kind = ELT_RELU, .max_value = max_value, .slope = negative_slope,
                                        .threshold = threshold}, name);
}

tnt_layer *tnt_leaky_relu_layer(float alpha, const char *name) {
    if (!isfinite(alpha) || alpha < 0.0f) {
        tnt__error(TNT_ERR_ARG, "LeakyReLU: alpha %g (expected a finite value >= 0)", (double)alpha);
        return NULL;
    }
    return elt_new(&tnt__leaky_relu_ops, (elt_cfg){.kind = ELT_LEAKY, .slope = alpha}, name);
}

tnt_layer *tnt_elu_layer(float alpha, const char *name) {
    if (!isfinite(alpha)) {
        tnt__error(TNT_ERR_ARG, "ELU: alpha %g (expected a finite value)", (double)alpha);
        return NULL;
    }
    return elt_new(&tnt__elu_ops, (elt_cfg){.kind = ELT_ELU, .alpha = alpha}, name);
}

tnt_layer *tnt_thresholded_relu(float theta, const char *name) {
    if (!isfinite(theta)) {
        tnt__error(TNT_ERR_ARG, "ThresholdedReLU: theta %g (expected a finite value)", (double)theta);
        return NULL;
    }
    return elt_new(&tnt__thresholded_relu_ops, (elt_cfg){.kind = ELT_THRESHOLDED, .threshold = theta}, name);
}

/* ---- PReLU -------------------------------------------------------------------------------- */

/* alpha has the input's shape with each shared axis set to 1; y = x > 0 ? x : alpha * x. */
typedef struct prelu_cfg {
    int n_shared;
    int shared[TNT_MAX_DIMS];  /* 1-based non-batch axes, as Keras */
    tnt_initializer alpha_init;
    int64_t in_stride[TNT_MAX_DIMS], alpha_stride[TNT_MAX_DIMS]; /* from build */
} prelu_cfg;

static tnt_status prelu_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    prelu_cfg *c = l->priv;
    tnt_shape ashape = in;
    for (int k = 0; k < c->n_shared; k++) {
        if (c->shared[k] > in.ndim) {
            char b[96];
            return tnt__error(TNT_ERR_SHAPE, "PReLU \"%s\": shared axis %d outside input shape %s (axes 1..%d)",
                              l->name, c->shared[k], tnt_shape_str(in, b, sizeof b), in.ndim);
        }
        ashape.dim[c->shared[k] - 1] = 1;
    }
    int64_t si = 1, sa = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        c->in_stride[d] = si;
        c->alpha_stride[d] = ashape.dim[d] == 1 ? 0 : sa;
        si *= in.dim[d];
        sa *= ashape.dim[d];
    }
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "alpha", ashape, c->alpha_init, 0, 0) < 0) return TNT_ERR_ARG;
    *out = in;
    return TNT_OK;
}

/* The alpha entry of cell i of one sample. */
static inline int64_t prelu_index(const prelu_cfg *c, int ndim, int64_t i) {
    int64_t j = 0;
    for (int d = 0; d < ndim; d++) {
        j += (i / c->in_stride[d]) * c->alpha_stride[d];
        i %= c->in_stride[d];
    }
    return j;
}

static tnt_status prelu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const prelu_cfg *c = l->priv;
    const float *alpha = l->weights[0].value;
    int64_t per = tnt_shape_numel(l->in_shape);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t i = 0; i < per; i++) {
            float x = a->x[n * per + i];
            a->y[n * per + i] = x > 0.0f ? x : alpha[prelu_index(c, l->in_shape.ndim, i)] * x;
        }
    if (a->preact) memcpy(a->preact, a->y, (size_t)(a->batch * per) * sizeof(float));
    return TNT_OK;
}

/* dalpha = sum of min(x, 0) * dy over the batch and the shared axes (serially: the sums are
 * deterministic); dx = dy where x > 0, else alpha * dy. */
static tnt_status prelu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const prelu_cfg *c = l->priv;
    tnt__weight *w = &l->weights[0];
    int64_t per = tnt_shape_numel(l->in_shape);
    memset(w->grad, 0, (size_t)tnt_shape_numel(w->shape) * sizeof(float));
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t i = 0; i < per; i++) {
            float x = a->x[n * per + i];
            if (x < 0.0f) w->grad[prelu_index(c, l->in_shape.ndim, i)] += x * a->dy[n * per + i];
        }
    if (!a->dx) return TNT_OK;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < a->batch; n++)
        for (int64_t i = 0; i < per; i++) {
            float x = a->x[n * per + i], g = a->dy[n * per + i];
            a->dx[n * per + i] = x > 0.0f ? g : w->value[prelu_index(c, l->in_shape.ndim, i)] * g;
        }
    return TNT_OK;
}

static tnt_status prelu_get_config(const tnt_layer *l, cJSON *c) {
    const prelu_cfg *p = l->priv;
    TNT_KJ_S(tnt__kj_add_initializer(c, "alpha_initializer", p->alpha_init));
    TNT_KJ_S(tnt__kj_add_nulls(c, (const char *const[]){"alpha_regularizer", "alpha_constraint", NULL}));
    if (!p->n_shared) TNT_KJ(cJSON_AddNullToObject(c, "shared_axes"));
    else TNT_KJ_S(tnt__kj_add_ints(c, "shared_axes", p->n_shared, p->shared));
    return TNT_OK;
}

/* shared_axes: null, one axis or a list of axes */
static tnt_layer *prelu_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int axes[TNT_MAX_DIMS], n = 0;
    tnt_initializer init;
    const cJSON *v = tnt__kj_item(c, "shared_axes");
    if (tnt__kj_as_int(v, &axes[0])) n = 1;
    else if (!tnt__kj_absent(v)) TNT_KJ_READ(tnt__kj_int_list(c, "shared_axes", TNT_MAX_DIMS, axes, &n, k));
    TNT_KJ_READ(tnt__kj_init(c, "alpha_initializer", TNT_INIT_ZEROS, &init, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, (const char *const[]){"alpha_regularizer", "alpha_constraint", NULL}, k));
    return tnt__kj_built(tnt_prelu(n, axes, init, k->name), k);
}

const tnt__layer_ops tnt__prelu_ops = {
    .class_name = "PReLU",
    .get_config = prelu_get_config,
    .from_config = prelu_from_config,
    .build = prelu_build,
    .forward = prelu_forward,
    .backward = prelu_backward,
    .destroy = priv_destroy,
    .supports_masking = true,
};

tnt_layer *tnt_prelu(int n_shared_axes, const int *shared_axes, tnt_initializer alpha_init, const char *name) {
    if (n_shared_axes < 0 || n_shared_axes > TNT_MAX_DIMS || (n_shared_axes && !shared_axes)) {
        tnt__error(TNT_ERR_ARG, "PReLU: %d shared axes (expected 0..%d, with the axes given)", n_shared_axes,
                   TNT_MAX_DIMS);
        return NULL;
    }
    for (int k = 0; k < n_shared_axes; k++)
        if (shared_axes[k] < 1 || shared_axes[k] > TNT_MAX_DIMS) {
            tnt__error(TNT_ERR_ARG, "PReLU: shared axis %d (expected 1..%d: the batch axis 0 is never shared)",
                       shared_axes[k], TNT_MAX_DIMS);
            return NULL;
        }
    if (!tnt__init_valid(alpha_init, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "PReLU: alpha_initializer %d (expected 0..%d)", (int)alpha_init,
                   (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    prelu_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_shared = n_shared_axes;
    if (n_shared_axes) memcpy(c->shared, shared_axes, (size_t)n_shared_axes * sizeof(int));
    c->alpha_init = alpha_init ? alpha_init : TNT_INIT_ZEROS;
    tnt_layer *l = tnt__layer_new(&tnt__prelu_ops, name, c);
    if (!l) free(c);
    return l;
}

/* ---- Softmax over one axis ---------------------------------------------------------------- */

typedef struct softmax_cfg {
    int axis;                   /* Keras: -1 = last, counting the batch axis as 0 */
    int64_t outer, len, inner;  /* from build: one sample is (outer, len, inner) */
} softmax_cfg;

static tnt_status softmax_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    softmax_cfg *c = l->priv;
    int ax = c->axis < 0 ? in.ndim + 1 + c->axis : c->axis; /* with the batch axis */
    if (ax < 1 || ax > in.ndim) {
        char b[96];
        return tnt__error(TNT_ERR_SHAPE, "Softmax \"%s\": axis %d outside input shape %s (expected -%d..-1 or 1..%d)",
                          l->name, c->axis, tnt_shape_str(in, b, sizeof b), in.ndim, in.ndim);
    }
    c->outer = c->inner = 1;
    for (int d = 0; d < ax - 1; d++) c->outer *= in.dim[d];
    for (int d = ax; d < in.ndim; d++) c->inner *= in.dim[d];
    c->len = in.dim[ax - 1];
    *out = in;
    return TNT_OK;
}

/* x, y: (batch * outer, len, inner) */
static tnt_status softmax_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const softmax_cfg *c = l->priv;
    const int64_t rows = a->batch * c->outer, L = c->len, I = c->inner;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < I; j++) {
            const float *x = a->x + r * L * I + j;
            float *y = a->y + r * L * I + j;
            float mx = x[0], sum = 0.0f;
            for (int64_t k = 1; k < L; k++) mx = fmaxf(mx, x[k * I]);
            for (int64_t k = 0; k < L; k++) sum += y[k * I] = expf(x[k * I] - mx);
            for (int64_t k = 0; k < L; k++) y[k * I] /= sum;
        }
    if (a->preact) memcpy(a->preact, a->y, (size_t)(rows * L * I) * sizeof(float));
    return TNT_OK;
}

/* dx = y * (dy - sum(dy * y)) along the axis */
static tnt_status softmax_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const softmax_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    const int64_t rows = a->batch * c->outer, L = c->len, I = c->inner;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < I; j++) {
            int64_t o = r * L * I + j;
            float dot = 0.0f;
            for (int64_t k = 0; k < L; k++) dot += a->dy[o + k * I] * a->y[o + k * I];
            for (int64_t k = 0; k < L; k++) a->dx[o + k * I] = a->y[o + k * I] * (a->dy[o + k * I] - dot);
        }
    return TNT_OK;
}

/* on the device, over the last axis: the softmax row kernels Dense's fused softmax runs */
static bool softmax_gpu_supported(const tnt_layer *l, const char **why) {
    if (((const softmax_cfg *)l->priv)->inner == 1) return true;
    *why = "a Softmax over an axis other than the last has no device path yet";
    return false;
}

static tnt_status softmax_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const softmax_cfg *c = l->priv;
    const int64_t rows = a->batch * c->outer;
    tnt_status s = tnt__gpu_act_forward(TNT_ACT_SOFTMAX, 0.0f, rows, c->len, a->x, a->y);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(rows * c->len) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status softmax_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const softmax_cfg *c = l->priv;
    if (!a->dx) return TNT_OK;
    return tnt__gpu_act_backward(TNT_ACT_SOFTMAX, 0.0f, a->batch * c->outer, c->len, a->x, a->y, a->dy, a->dx);
}

static const tnt__gpu_ops softmax_gpu_ops = {
    .supported = softmax_gpu_supported, .forward = softmax_gpu_forward, .backward = softmax_gpu_backward};

static tnt_status softmax_get_config(const tnt_layer *l, cJSON *c) {
    TNT_KJ(cJSON_AddNumberToObject(c, "axis", ((const softmax_cfg *)l->priv)->axis));
    return TNT_OK;
}

/* axis: an integer, or a list of one (Keras 2 allows several; not supported here) */
static tnt_layer *softmax_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    int axes[TNT_MAX_DIMS], n = 1;
    const cJSON *v = tnt__kj_item(c, "axis");
    if (tnt__kj_absent(v)) axes[0] = -1;
    else if (!tnt__kj_as_int(v, &axes[0])) {
        TNT_KJ_READ(tnt__kj_int_list(c, "axis", TNT_MAX_DIMS, axes, &n, k));
        if (n != 1) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "key \"axis\": %d axes (expected one)", n);
    }
    return tnt__kj_built(tnt_softmax_layer(axes[0], k->name), k);
}

const tnt__layer_ops tnt__softmax_ops = {
    .class_name = "Softmax",
    .get_config = softmax_get_config,
    .from_config = softmax_from_config,
    .build = softmax_build,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .destroy = priv_destroy,
    .supports_masking = true,
    .gpu = &softmax_gpu_ops,
};

tnt_layer *tnt_softmax_layer(int axis, const char *name) {
    if (axis == 0 || axis < -TNT_MAX_DIMS || axis > TNT_MAX_DIMS) {
        tnt__error(TNT_ERR_ARG, "Softmax: axis %d (expected -%d..-1 or 1..%d: not the batch axis 0)", axis,
                   TNT_MAX_DIMS, TNT_MAX_DIMS);
        return NULL;
    }
    softmax_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->axis = axis;
    tnt_layer *l = tnt__layer_new(&tnt__softmax_ops, name, c);
    if (!l) free(c);
    return l;
}
