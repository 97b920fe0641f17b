/* merge.c: the elementwise Keras merge layers Add, Subtract, Multiply, Average, Maximum and
 * Minimum, on at least two inputs (Subtract: exactly two). No weights, no plan, no workspace;
 * supports_masking as Keras (the inputs' sequence masks, and'ed, pass on: src/model/graph.c).
 *
 * Shapes broadcast as Keras's _Merge: an input of lower rank gets axes of size 1 inserted after the
 * batch axis (tf.expand_dims(x, 1)) until every input has the highest rank; then every dimension
 * is the output's or 1 (TensorFlow broadcasting), e.g. (100,) and (1, 100) give (1, 100). A
 * broadcast input is expanded to the output's shape through an index map (per sample) before the
 * elementwise code below, and its gradient, computed at the output's shape, is summed back over
 * the broadcast positions.
 *
 * Forward follows Keras's order of operations (TensorFlow's _merge_function):
 *   Add: ((x0 + x1) + x2) ...      Subtract: x0 - x1      Multiply: ((x0 * x1) * x2) ...
 *   Average: (x0 + x1 + ...) / n   Maximum / Minimum: chained tf.maximum / tf.minimum
 * Backward (each dxs[k] overwritten, or skipped when NULL):
 *   Add: dy to every input; Subtract: dy, -dy; Average: dy / n;
 *   Multiply: dy * the product of the other inputs (computed directly, so zeros are fine);
 *   Maximum / Minimum: dy to one input, 0 to the others. Ties: the FIRST input (lowest index)
 *   that holds the extreme gets all of dy. This is what Keras's chain
 *   out = maximum(maximum(x0, x1), x2) gets from TensorFlow's gradient of tf.maximum(a, b), which
 *   sends the gradient to a where a >= b and to b where b > a (tf.minimum: a <= b): a later input
 *   only takes the gradient when strictly beyond everything before it. (PyTorch's torch.maximum
 *   would split a tie in halves instead.) A NaN in any input makes the output NaN, as TF.
 * Large tensors (ResNet-50's Add on (16, 56, 56, 256)) are split into blocks across OpenMP
 * threads; each block runs input by input so that the inner loops vectorize. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

typedef enum merge_op { M_ADD, M_SUB, M_MUL, M_AVG, M_MAX, M_MIN } merge_op;

typedef struct merge_cfg {
    merge_op op;
    int n;        /* inputs, from build */
    int64_t numel; /* per sample, of the output */
    /* broadcasting: per input, its values per sample and, when its shape is not the output's, the
     * index of its value for each output position (NULL: the input has the output's shape) */
    int64_t in_numel[TNT_MAX_LAYER_INPUTS];
    int64_t *map[TNT_MAX_LAYER_INPUTS];
    /* the device's copy of each map (int32) and its inverse: the output positions that read input
     * value j, ascending, are inv_idx[inv_off[j] .. inv_off[j + 1]) (one allocation per input) */
    int32_t *map32[TNT_MAX_LAYER_INPUTS], *inv_off[TNT_MAX_LAYER_INPUTS], *inv_idx[TNT_MAX_LAYER_INPUTS];
} merge_cfg;

/* Elements per block; OpenMP only when a step has more than one block's worth of work. */
#define MERGE_BLOCK 8192
#define MERGE_PAR_MIN 65536

static tnt_status merge_build(tnt_layer *l, int n, const tnt_shape *in, tnt_shape *out) {
    merge_cfg *c = l->priv;
    const char *cls = l->ops->class_name;
    char a[96], b[96];
    if (c->op == M_SUB && n != 2)
        return tnt__error(TNT_ERR_ARG,
                          "%s \"%s\": called on %d input(s) of shape %s%s (expected exactly 2)", cls,
                          l->name, n, n > 0 ? tnt_shape_str(in[0], a, sizeof a) : "()", n > 1 ? ", ..." : "");
    if (n < 2)
        return tnt__error(TNT_ERR_ARG,
                          "%s \"%s\": called on %d input(s) of shape %s (expected at least 2)", cls,
                          l->name, n, n > 0 ? tnt_shape_str(in[0], a, sizeof a) : "()");
    /* Keras's broadcast: lower ranks get leading 1s (after the batch), then each dim is the max */
    int r = 0;
    for (int k = 0; k < n; k++) r = in[k].ndim > r ? in[k].ndim : r;
    tnt_shape o = {.ndim = r};
    for (int d = 0; d < r; d++) o.dim[d] = 1;
    for (int k = 0; k < n; k++)
        for (int d = 0; d < in[k].ndim; d++) {
            int64_t v = in[k].dim[d], *od = &o.dim[r - in[k].ndim + d];
            if (v != 1 && *od != 1 && v != *od)
                return tnt__error(TNT_ERR_SHAPE,
                                  "%s \"%s\": input %d has shape %s and input 0 has shape %s: they do not "
                                  "broadcast (after the batch, a lower rank gets leading axes of size 1; "
                                  "each dimension must then agree or be 1)",
                                  cls, l->name, k, tnt_shape_str(in[k], a, sizeof a), tnt_shape_str(in[0], b, sizeof b));
            if (v != 1) *od = v;
        }
    const int64_t N = tnt_shape_numel(o);
    for (int k = 0; k < TNT_MAX_LAYER_INPUTS; k++) {
        free(c->map[k]), free(c->map32[k]);
        c->map[k] = NULL, c->map32[k] = c->inv_off[k] = c->inv_idx[k] = NULL;
    }
    for (int k = 0; k < n; k++) {
        c->in_numel[k] = tnt_shape_numel(in[k]);
        if (tnt__shape_equal(in[k], o)) continue;
        int64_t *m = tnt__calloc((size_t)(N ? N : 1), sizeof *m), stride[TNT_MAX_DIMS] = {0}, st = 1;
        if (!m) return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory for the broadcast map", cls, l->name);
        for (int d = r - 1; d >= 0; d--) { /* the input's stride per output axis; 0 where it broadcasts */
            int id = d - (r - in[k].ndim);
            int64_t len = id >= 0 ? in[k].dim[id] : 1;
            stride[d] = len == 1 ? 0 : st;
            st *= len;
        }
        for (int64_t i = 0; i < N; i++) {
            int64_t rest = i, off = 0;
            for (int d = r - 1; d >= 0; d--) {
                off += (rest % o.dim[d]) * stride[d];
                rest /= o.dim[d];
            }
            m[i] = off;
        }
        c->map[k] = m;
        if (N + c->in_numel[k] < INT32_MAX && (c->map32[k] = tnt__calloc((size_t)(2 * N + c->in_numel[k] + 1), sizeof(int32_t)))) {
            int32_t *m32 = c->map32[k], *off = m32 + N, *idx = off + c->in_numel[k] + 1;
            for (int64_t i = 0; i < N; i++) m32[i] = (int32_t)m[i], off[m[i] + 1]++;
            for (int64_t j = 0; j < c->in_numel[k]; j++) off[j + 1] += off[j];
            int32_t *fill = tnt__calloc((size_t)(c->in_numel[k] + 1), sizeof(int32_t));
            if (!fill) return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory for the broadcast map", cls, l->name);
            for (int64_t i = 0; i < N; i++) idx[off[m[i]] + fill[m[i]]++] = (int32_t)i; /* ascending i */
            free(fill);
            c->inv_off[k] = off, c->inv_idx[k] = idx;
        }
    }
    c->n = n;
    c->numel = N;
    *out = o;
    return TNT_OK;
}

/* The inputs at the output's shape: each broadcast one copied through its map into a new buffer
 * (freed by merge_unbroadcast_free); xs itself when nothing broadcasts. NULL when out of memory. */
static const float **merge_expand(const merge_cfg *c, int64_t batch, const float *const *xs, const float **tmp) {
    for (int k = 0; k < c->n; k++) {
        tmp[k] = xs[k];
        if (!c->map[k]) continue;
        float *e = tnt__alloc((size_t)(batch * c->numel) * sizeof(float));
        if (!e) return NULL;
        const float *x = xs[k];
        const int64_t *m = c->map[k];
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < c->numel; i++) e[b * c->numel + i] = x[b * c->in_numel[k] + m[i]];
        tmp[k] = e;
    }
    return tmp;
}

static void merge_expand_free(const merge_cfg *c, const float **tmp, const float *const *xs) {
    for (int k = 0; k < c->n; k++)
        if (tmp[k] && tmp[k] != xs[k]) tnt__free((void *)tmp[k]);
}

static bool merge_broadcasts(const merge_cfg *c) {
    for (int k = 0; k < c->n; k++)
        if (c->map[k]) return true;
    return false;
}

/* y[i0, i1) from the n inputs */
static void merge_fwd_block(merge_op op, int n, const float *const *xs, float *y, int64_t i0, int64_t i1) {
    const float *x0 = xs[0];
    switch (op) {
    case M_ADD:
    case M_AVG:
        for (int64_t i = i0; i < i1; i++) y[i] = x0[i] + xs[1][i];
        for (int k = 2; k < n; k++) {
            const float *xk = xs[k];
            for (int64_t i = i0; i < i1; i++) y[i] += xk[i];
        }
        if (op == M_AVG) {
            const float fn = (float)n;
            for (int64_t i = i0; i < i1; i++) y[i] /= fn;
        }
        break;
    case M_SUB:
        for (int64_t i = i0; i < i1; i++) y[i] = x0[i] - xs[1][i];
        break;
    case M_MUL:
        for (int64_t i = i0; i < i1; i++) y[i] = x0[i] * xs[1][i];
        for (int k = 2; k < n; k++) {
            const float *xk = xs[k];
            for (int64_t i = i0; i < i1; i++) y[i] *= xk[i];
        }
        break;
    case M_MAX:
        for (int64_t i = i0; i < i1; i++) y[i] = x0[i];
        for (int k = 1; k < n; k++) {
            const float *xk = xs[k];
            for (int64_t i = i0; i < i1; i++) y[i] = xk[i] > y[i] || xk[i] != xk[i] ? xk[i] : y[i];
        }
        break;
    case M_MIN:
        for (int64_t i = i0; i < i1; i++) y[i] = x0[i];
        for (int k = 1; k < n; k++) {
            const float *xk = xs[k];
            for (int64_t i = i0; i < i1; i++) y[i] = xk[i] < y[i] || xk[i] != xk[i] ? xk[i] : y[i];
        }
        break;
    }
}

static tnt_status merge_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const merge_cfg *c = l->priv;
    if (a->n_inputs != c->n || !a->xs)
        return tnt__error(TNT_ERR_STATE, "%s \"%s\": forward with %d input(s), built for %d",
                          l->ops->class_name, l->name, a->n_inputs, c->n);
    const int64_t N = a->batch * c->numel, nb = (N + MERGE_BLOCK - 1) / MERGE_BLOCK;
    const merge_op op = c->op;
    const int n = c->n;
    const float *tmp[TNT_MAX_LAYER_INPUTS] = {NULL};
    const bool bcast = merge_broadcasts(c);
    const float *const *xs = bcast ? merge_expand(c, a->batch, a->xs, tmp) : a->xs;
    if (!xs) {
        merge_expand_free(c, tmp, a->xs);
        return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory broadcasting the inputs", l->ops->class_name,
                          l->name);
    }
    float *y = a->y;
    const bool relu = l->activation == TNT_ACT_RELU; /* folded in by the model (Add only) */
#pragma omp parallel for schedule(static) if (N >= MERGE_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * MERGE_BLOCK, i1 = TNT_MIN(N, i0 + MERGE_BLOCK);
        merge_fwd_block(op, n, xs, y, i0, i1);
        if (relu)
            for (int64_t i = i0; i < i1; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    }
    if (bcast) merge_expand_free(c, tmp, a->xs);
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)N * sizeof(float));
    return TNT_OK;
}

/* dxs[k][i0, i1) for every requested k; relu_y: the output of a folded relu (Add), or NULL */
static void merge_bwd_block(merge_op op, int n, const float *const *xs, const float *dy, float *const *dxs,
                            const float *relu_y, int64_t i0, int64_t i1) {
    switch (op) {
    case M_ADD:
    case M_SUB:
    case M_AVG: {
        const float inv = op == M_AVG ? 1.0f / (float)n : 1.0f;
        for (int k = 0; k < n; k++) {
            float *g = dxs[k];
            if (!g) continue;
            if (relu_y) for (int64_t i = i0; i < i1; i++) g[i] = relu_y[i] > 0.0f ? dy[i] : 0.0f;
            else if (op == M_ADD) memcpy(g + i0, dy + i0, (size_t)(i1 - i0) * sizeof(float));
            else if (op == M_SUB && k == 0) memcpy(g + i0, dy + i0, (size_t)(i1 - i0) * sizeof(float));
            else if (op == M_SUB) for (int64_t i = i0; i < i1; i++) g[i] = -dy[i];
            else for (int64_t i = i0; i < i1; i++) g[i] = dy[i] * inv;
        }
        break;
    }
    case M_MUL:
        for (int k = 0; k < n; k++) {
            float *g = dxs[k];
            if (!g) continue;
            memcpy(g + i0, dy + i0, (size_t)(i1 - i0) * sizeof(float));
            for (int j = 0; j < n; j++) {
                if (j == k) continue;
                const float *xj = xs[j];
                for (int64_t i = i0; i < i1; i++) g[i] *= xj[i];
            }
        }
        break;
    case M_MAX:
    case M_MIN: {
        const bool is_max = op == M_MAX;
        for (int64_t i = i0; i < i1; i++) {
            float best = xs[0][i];
            int arg = 0;
            for (int k = 1; k < n; k++) {
                float v = xs[k][i];
                if (is_max ? v > best : v < best) best = v, arg = k; /* strict: ties stay earlier */
            }
            for (int k = 0; k < n; k++)
                if (dxs[k]) dxs[k][i] = k == arg ? dy[i] : 0.0f;
        }
        break;
    }
    }
}

static tnt_status merge_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const merge_cfg *c = l->priv;
    if (a->n_inputs != c->n || !a->xs || !a->dxs)
        return tnt__error(TNT_ERR_STATE, "%s \"%s\": backward with %d input(s), built for %d",
                          l->ops->class_name, l->name, a->n_inputs, c->n);
    bool any = false;
    for (int k = 0; k < c->n; k++) any = any || a->dxs[k];
    if (!any) return TNT_OK;
    const int64_t N = a->batch * c->numel, nb = (N + MERGE_BLOCK - 1) / MERGE_BLOCK;
    const merge_op op = c->op;
    const int n = c->n;
    const float *tmp[TNT_MAX_LAYER_INPUTS] = {NULL};
    float *gtmp[TNT_MAX_LAYER_INPUTS] = {NULL};
    const bool bcast = merge_broadcasts(c);
    const float *const *xs = bcast ? merge_expand(c, a->batch, a->xs, tmp) : a->xs;
    float *const *dxs = a->dxs;
    bool oom = !xs;
    if (bcast && xs) { /* the broadcast inputs' gradients at the output's shape, summed back below */
        for (int k = 0; k < n; k++) {
            gtmp[k] = a->dxs[k];
            if (c->map[k] && a->dxs[k] && !(gtmp[k] = tnt__alloc((size_t)N * sizeof(float)))) oom = true;
        }
        dxs = gtmp;
    }
    if (oom) {
        for (int k = 0; k < n; k++)
            if (gtmp[k] && gtmp[k] != a->dxs[k]) tnt__free(gtmp[k]);
        merge_expand_free(c, tmp, a->xs);
        return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory broadcasting the inputs", l->ops->class_name,
                          l->name);
    }
    const float *dy = a->dy;
#pragma omp parallel for schedule(static) if (N >= MERGE_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * MERGE_BLOCK, i1 = TNT_MIN(N, i0 + MERGE_BLOCK);
        merge_bwd_block(op, n, xs, dy, dxs, l->activation == TNT_ACT_RELU ? a->y : NULL, i0, i1);
    }
    if (bcast) {
        for (int k = 0; k < n; k++) {
            if (!c->map[k] || !a->dxs[k]) continue;
            float *dx = a->dxs[k];
            const int64_t *m = c->map[k];
            memset(dx, 0, (size_t)(a->batch * c->in_numel[k]) * sizeof(float));
            for (int64_t s = 0; s < a->batch; s++)
                for (int64_t i = 0; i < c->numel; i++) dx[s * c->in_numel[k] + m[i]] += gtmp[k][s * c->numel + i];
            tnt__free(gtmp[k]);
        }
        merge_expand_free(c, tmp, a->xs);
    }
    return TNT_OK;
}

/* ---- on the device: every merge without broadcasting, in Keras's order as above (bitwise the
 * CPU's: the same operations on each element, in the same order) ------------------------------- */

#define GPU_BLOCK 256

static bool merge_gpu_supported(const tnt_layer *l, const char **why) {
    const merge_cfg *c = l->priv;
    for (int k = 0; k < c->n; k++)
        if (c->map[k] && !c->map32[k]) {
            *why = "a broadcast input of 2^31 values or more has no device path";
            return false;
        }
    return true;
}

static tnt_status launch2(const char *kernel, const float *a, const float *b, float *y, long long n) {
    void *args[] = {&a, &b, &y, &n};
    return tnt__gpu_launch(kernel, tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

static tnt_status scaled(const float *x, float *y, long long n, float a, bool divide) {
    void *args[] = {&x, &y, &n, &a};
    return tnt__gpu_launch(divide ? "tnt_k_div" : "tnt_k_scale", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
}

/* Maximum / Minimum: y = x0, then each next input where it is beyond y or NaN */
static tnt_status extremes_forward(const merge_cfg *c, const tnt__fwd_args *a, long long n) {
    tnt_status s = tnt__gpu_copy_on_device(a->y, a->xs[0], (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    int is_max = c->op == M_MAX;
    for (int k = 1; k < c->n && s == TNT_OK; k++) {
        const float *xk = a->xs[k];
        float *y = a->y;
        void *args[] = {&xk, &y, &n, &is_max};
        s = tnt__gpu_launch("tnt_k_minmax_step", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    return s;
}

static tnt_status merge_gpu_forward_same(tnt_layer *l, const tnt__fwd_args *a) {
    const merge_cfg *c = l->priv;
    long long n = a->batch * c->numel;
    unsigned grid = tnt__gpu_grid_for(n, GPU_BLOCK);
    int act = TNT_ACT_RELU;
    float alpha = 0.0f;
    const bool relu = l->activation == TNT_ACT_RELU; /* Add's, folded in by the model */
    static const char *const pair[] = {[M_ADD] = "tnt_k_add", [M_AVG] = "tnt_k_add", [M_SUB] = "tnt_k_sub",
                                       [M_MUL] = "tnt_k_mul"};
    tnt_status s = TNT_OK;
    if (c->op == M_MAX || c->op == M_MIN) s = extremes_forward(c, a, n);
    for (int k = 1; k < c->n && s == TNT_OK && c->op != M_MAX && c->op != M_MIN; k++) {
        const float *acc = k == 1 ? a->xs[0] : a->y;
        if (relu && k == c->n - 1) { /* the last addition and the relu in one pass */
            void *args[] = {&acc, (void *)&a->xs[k], (void *)&a->y, &act, &alpha, &n};
            s = tnt__gpu_launch("tnt_k_add_act", grid, GPU_BLOCK, 0, args);
        } else {
            s = launch2(pair[c->op], acc, a->xs[k], a->y, n);
        }
    }
    if (s == TNT_OK && c->op == M_AVG) s = scaled(a->y, a->y, n, (float)c->n, true);
    if (s == TNT_OK && a->preact) s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status extremes_backward(const merge_cfg *c, const tnt__bwd_args *a, long long n) {
    float *best = a->scratch;
    unsigned char *arg = (unsigned char *)(best + n);
    int is_max = c->op == M_MAX, accumulate = 0;
    tnt_status s = tnt__gpu_copy_on_device(best, a->xs[0], (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
    if (s == TNT_OK) s = tnt__gpu_memset_zero(arg, (size_t)n, TNT__GPU_COMPUTE);
    for (int k = 1; k < c->n && s == TNT_OK; k++) {
        const float *xk = a->xs[k];
        void *args[] = {&xk, &best, &arg, &n, &k, &is_max};
        s = tnt__gpu_launch("tnt_k_select_step", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    for (int k = 0; k < c->n && s == TNT_OK; k++) {
        if (!a->dxs[k]) continue;
        float *dx = a->dxs[k];
        void *args[] = {(void *)&a->dy, &arg, &dx, &n, &k, &accumulate};
        s = tnt__gpu_launch("tnt_k_select_grad", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    return s;
}

/* Multiply: dxs[k] = dy times the other inputs, in their order */
static tnt_status product_backward(const merge_cfg *c, const tnt__bwd_args *a, long long n) {
    tnt_status s = TNT_OK;
    for (int k = 0; k < c->n && s == TNT_OK; k++) {
        if (!a->dxs[k]) continue;
        const float *acc = a->dy;
        for (int j = 0; j < c->n && s == TNT_OK; j++) {
            if (j == k) continue;
            s = launch2("tnt_k_mul", acc, a->xs[j], a->dxs[k], n);
            acc = a->dxs[k];
        }
    }
    return s;
}

static tnt_status merge_gpu_backward_same(tnt_layer *l, const tnt__bwd_args *a) {
    const merge_cfg *c = l->priv;
    long long n = a->batch * c->numel;
    tnt_status s = TNT_OK;
    if (c->op == M_MUL) return product_backward(c, a, n);
    if (c->op == M_MAX || c->op == M_MIN) return extremes_backward(c, a, n);
    if (l->activation != TNT_ACT_RELU) { /* dy (Subtract's second: -dy; Average: dy / n) to each input */
        for (int k = 0; k < c->n && s == TNT_OK; k++) {
            if (!a->dxs[k]) continue;
            if (c->op == M_AVG) s = scaled(a->dy, a->dxs[k], n, 1.0f / (float)c->n, false);
            else if (c->op == M_SUB && k == 1) s = scaled(a->dy, a->dxs[k], n, -1.0f, false);
            else s = tnt__gpu_copy_on_device(a->dxs[k], a->dy, (size_t)n * sizeof(float), TNT__GPU_COMPUTE);
        }
        return s;
    }
    /* Add's folded relu: its gradient, written to the wanted inputs two at a time */
    int act = TNT_ACT_RELU;
    float alpha = 0.0f;
    for (int k = 0; k < c->n && s == TNT_OK;) {
        float *first = NULL, *second = NULL;
        while (k < c->n && !first) first = a->dxs[k++];
        while (k < c->n && !second) second = a->dxs[k++];
        if (!first) break;
        void *args[] = {&act, &alpha, (void *)&a->y, (void *)&a->dy, &first, &second, &n};
        s = tnt__gpu_launch("tnt_k_act_bwd_y2", tnt__gpu_grid_for(n, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    return s;
}

/* The scratch: Maximum / Minimum's best value and which input holds it, per element; then per
 * broadcast input its tables (map32's allocation) and its values and gradient at the output's shape */
static size_t extremes_bytes(const merge_cfg *c, int64_t batch) {
    return c->op == M_MAX || c->op == M_MIN ? ((size_t)(batch * c->numel) * (sizeof(float) + 1) + 255) / 256 * 256 : 0;
}
static size_t table_bytes(const merge_cfg *c, int k) {
    return ((size_t)(2 * c->numel + c->in_numel[k] + 1) * sizeof(int32_t) + 255) / 256 * 256;
}
static size_t merge_gpu_scratch(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const merge_cfg *c = l->priv;
    size_t bytes = extremes_bytes(c, batch);
    for (int k = 0; k < c->n; k++)
        if (c->map[k]) bytes += table_bytes(c, k) + 2 * (size_t)(batch * c->numel) * sizeof(float);
    return bytes;
}

/* Broadcast inputs on the device: each one's tables go up into the scratch, its values are
 * expanded to the output's shape (xe), its gradient is computed there (ge) and summed back. */
typedef struct bcast {
    const float *xs[TNT_MAX_LAYER_INPUTS];
    float *dxs[TNT_MAX_LAYER_INPUTS];
    int32_t *map[TNT_MAX_LAYER_INPUTS], *off[TNT_MAX_LAYER_INPUTS], *idx[TNT_MAX_LAYER_INPUTS];
    float *xe[TNT_MAX_LAYER_INPUTS], *ge[TNT_MAX_LAYER_INPUTS];
} bcast;

static tnt_status bcast_expand(const merge_cfg *c, int64_t batch, void *scratch, const float *const *xs, bcast *b) {
    char *at = (char *)scratch + extremes_bytes(c, batch);
    tnt_status s = TNT_OK;
    for (int k = 0; k < c->n && s == TNT_OK; k++) {
        b->xs[k] = xs[k];
        if (!c->map[k]) continue;
        b->map[k] = (int32_t *)at, b->off[k] = b->map[k] + c->numel, b->idx[k] = b->off[k] + c->in_numel[k] + 1;
        at += table_bytes(c, k);
        b->xe[k] = (float *)at, b->ge[k] = b->xe[k] + batch * c->numel;
        at += 2 * (size_t)(batch * c->numel) * sizeof(float);
        s = tnt__gpu_copy_to_device(b->map[k], c->map32[k],
                                    (size_t)(2 * c->numel + c->in_numel[k] + 1) * sizeof(int32_t), TNT__GPU_COMPUTE);
        long long nb = batch, numel = c->numel, in = c->in_numel[k];
        void *args[] = {(void *)&xs[k], &b->map[k], &b->xe[k], &nb, &numel, &in};
        if (s == TNT_OK)
            s = tnt__gpu_launch("tnt_k_bcast_gather", tnt__gpu_grid_for(nb * numel, GPU_BLOCK), GPU_BLOCK, 0, args);
        b->xs[k] = b->xe[k];
    }
    return s;
}

static tnt_status merge_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const merge_cfg *c = l->priv;
    if (!merge_broadcasts(c)) return merge_gpu_forward_same(l, a);
    bcast b = {0};
    tnt_status s = bcast_expand(c, a->batch, a->scratch, a->xs, &b);
    tnt__fwd_args e = *a;
    e.xs = b.xs, e.x = b.xs[0];
    return s == TNT_OK ? merge_gpu_forward_same(l, &e) : s;
}

static tnt_status merge_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const merge_cfg *c = l->priv;
    if (!merge_broadcasts(c)) return merge_gpu_backward_same(l, a);
    bcast b = {0};
    tnt_status s = bcast_expand(c, a->batch, a->scratch, a->xs, &b);
    for (int k = 0; k < c->n; k++) b.dxs[k] = c->map[k] && a->dxs[k] ? b.ge[k] : a->dxs[k];
    tnt__bwd_args e = *a;
    e.xs = b.xs, e.x = b.xs[0], e.dxs = b.dxs, e.dx = b.dxs[0];
    if (s == TNT_OK) s = merge_gpu_backward_same(l, &e);
    for (int k = 0; k < c->n && s == TNT_OK; k++) { /* each broadcast value's gradient summed back */
        if (!c->map[k] || !a->dxs[k]) continue;
        long long nb = a->batch, numel = c->numel, in = c->in_numel[k];
        float *dx = a->dxs[k];
        void *args[] = {&b.ge[k], &b.off[k], &b.idx[k], &dx, &nb, &numel, &in};
        s = tnt__gpu_launch("tnt_k_bcast_reduce", tnt__gpu_grid_for(nb * in, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    return s;
}

static const tnt__gpu_ops merge_gpu_ops = {
    .supported = merge_gpu_supported,
    .scratch_size = merge_gpu_scratch,
    .forward = merge_gpu_forward,
    .backward = merge_gpu_backward,
};

static void merge_destroy(tnt_layer *l) {
    merge_cfg *c = l->priv;
    for (int k = 0; k < TNT_MAX_LAYER_INPUTS; k++) free(c->map[k]), free(c->map32[k]);
    free(c);
}

/* Sums and differences need only dy (and y for a folded relu); products and extremes read the
 * inputs, as does broadcasting (its backward expands them). */
static unsigned merge_backward_reads(const tnt_layer *l) {
    const merge_cfg *c = l->priv;
    return c->op == M_MUL || c->op == M_MAX || c->op == M_MIN || merge_broadcasts(c) ? TNT__READS_INPUTS : 0;
}

/* The ops table tnt__<var>_ops of one merge class, whose from_config calls its constructor (a
 * merge layer has no keys of its own). */
#define MERGE_OPS(var, cls, relu)                                                                 \
    static tnt_layer *var##_from_config(const cJSON *c, const tnt__kj_ctx *k) {                   \
        (void)c;                                                                                  \
        return tnt__kj_built(tnt_##var(k->name), k);                                              \
    }                                                                                             \
    const tnt__layer_ops tnt__##var##_ops = {                                                     \
        .class_name = cls,                                                                        \
        .from_config = var##_from_config,                                                         \
        .build_multi = merge_build,                                                               \
        .forward = merge_forward,                                                                 \
        .backward = merge_backward,                                                               \
        .backward_reads = merge_backward_reads,                                                   \
        .destroy = merge_destroy,                                                                 \
        .supports_masking = true,                                                                 \
        .folds_relu = relu,                                                                       \
        .gpu = &merge_gpu_ops,                                                                    \
    }
MERGE_OPS(add, "Add", true); /* ResNet's Add + relu */
MERGE_OPS(subtract, "Subtract", false);
MERGE_OPS(multiply, "Multiply", false);
MERGE_OPS(average, "Average", false);
MERGE_OPS(maximum, "Maximum", false);
MERGE_OPS(minimum, "Minimum", false);

static tnt_layer *merge_new(merge_op op, const tnt__layer_ops *ops, const char *name) {
    merge_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->op = op;
    tnt_layer *l = tnt__layer_new(ops, name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_add(const char *name) { return merge_new(M_ADD, &tnt__add_ops, name); }
tnt_layer *tnt_subtract(const char *name) { return merge_new(M_SUB, &tnt__subtract_ops, name); }
tnt_layer *tnt_multiply(const char *name) { return merge_new(M_MUL, &tnt__multiply_ops, name); }
tnt_layer *tnt_average(const char *name) { return merge_new(M_AVG, &tnt__average_ops, name); }
tnt_layer *tnt_maximum(const char *name) { return merge_new(M_MAX, &tnt__maximum_ops, name); }
tnt_layer *tnt_minimum(const char *name) { return merge_new(M_MIN, &tnt__minimum_ops, name); }
