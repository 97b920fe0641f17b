/* locally_connected.c: LocallyConnected1D and LocallyConnected2D (Keras 2, and Keras 1's classes of
 * the same names): a convolution whose weights are not shared, each output position p having its
 * own (features, filters) matrix, in Keras's implementation=1 layout:
 *   1-D kernel (out_steps, k * channels, filters), bias (out_steps, filters)
 *   2-D kernel (out_rows * out_cols, kh * kw * channels, filters), bias (out_rows, out_cols, filters)
 * Keras's backend.local_conv gathers, for p in row-major order, the input window (channels_last:
 * (kh, kw, channels); channels_first: (channels, kh, kw)) in its memory order as the features, so
 *   y[b, p, f] = sum_d x[b, window(p, d)] kernel[p, d, f]
 * and the output is (positions..., filters), or (filters, positions...) channels first. Keras adds
 * the bias with backend.bias_add, which reshapes it (not transposes it) to the output's shape: the
 * bias is added element by element to each sample's output in memory order, in both formats.
 * Padding "valid" only with implementation 1. Implementation 2 stores the dense matrix from a
 * sample's input to its output (in memory order), kernel (input..., output...): 1-D channels last
 * (steps, in, out_steps, filters), first (in, steps, filters, out_steps); 2-D (rows, cols, in,
 * out_rows, out_cols, filters), first (in, rows, cols, filters, out_rows, out_cols); Keras masks it
 * to the windows (conv_kernel_mask), and allows padding "same" (the window of output o starts at
 * o * stride - k / 2, cut at the edges; out = ceil(in / stride)). It runs on the same engine, its
 * windows' entries copied into implementation 1's layout each step (and their gradient back; 0
 * elsewhere). Implementation 3 stores only those entries, as a list in the order of Keras's sorted
 * conv_kernel_idxs (output offset, then input offset, both in memory order), and runs the same way.
 *
 * Forward gathers every position's window into a workspace (positions, batch, features) and runs
 * one GEMM per position; backward gathers them again and runs two more per position (kernel
 * gradient, then the window gradient over the window, scattered back onto dx). 1-D runs as 2-D of
 * height 1. */
#include "layers/convolutional/conv2d.h"
#include "layers/fused.h"
#include "layers/keras_config.h"

#include <stdio.h>

typedef struct lc_cfg {
    bool two_d;
    int filters, kh, kw, sh, sw; /* 1-D: kh = sh = 1 */
    int impl;                    /* Keras's implementation: 1, 2 (the dense masked kernel), 3 (sparse) */
    tnt_padding padding;         /* valid; same with implementations 2 and 3 */
    bool use_bias;
    tnt_initializer kernel_init, bias_init;
    /* from build */
    int64_t ih, iw, ic, oh, ow;
    int64_t positions, features; /* oh * ow, kh * kw * ic */
    int64_t *window;             /* (positions, features): offset of each feature in a sample's input,
                                    -1 outside it ("same" padding: the feature is 0) */
    int64_t *k3_start, *k3_rank; /* implementation 3: each output offset's first kernel entry; each
                                    (position, feature)'s rank among its window's inputs (-1 outside) */
} lc_cfg;

static const char *lc_class(const lc_cfg *c) { return c->two_d ? "LocallyConnected2D" : "LocallyConnected1D"; }

static tnt_status lc_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    lc_cfg *c = l->priv;
    const char *cls = lc_class(c);
    const bool cf = l->channels_first;
    char b[96];
    int64_t sp[2] = {1, 1};
    tnt_status s = tnt__conv_input(l, cls, in, c->two_d ? 2 : 1, c->two_d ? sp : sp + 1, &c->ic);
    if (s != TNT_OK) return s;
    c->ih = sp[0], c->iw = sp[1];
    const bool same = c->padding == TNT_PADDING_SAME;
    c->oh = same ? (c->ih + c->sh - 1) / c->sh : c->ih >= c->kh ? (c->ih - c->kh) / c->sh + 1 : 0;
    c->ow = same ? (c->iw + c->sw - 1) / c->sw : c->iw >= c->kw ? (c->iw - c->kw) / c->sw + 1 : 0;
    if (c->oh <= 0 || c->ow <= 0)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s is smaller than the kernel (%d, %d) with padding "
                          "\"valid\"", cls, l->name, tnt_shape_str(in, b, sizeof b), c->kh, c->kw);
    c->positions = c->oh * c->ow;
    c->features = (int64_t)c->kh * c->kw * c->ic;
    free(c->window);
    if (!(c->window = tnt__calloc((size_t)(c->positions * c->features), sizeof *c->window))) return TNT_ERR_NOMEM;
    for (int64_t r = 0; r < c->oh; r++)
        for (int64_t q = 0; q < c->ow; q++) {
            /* Keras's conv_connected_inputs: "same" centres the kernel, start o*s - k/2 */
            int64_t *w = c->window + (r * c->ow + q) * c->features, r0 = r * c->sh - (same ? c->kh / 2 : 0),
                    q0 = q * c->sw - (same ? c->kw / 2 : 0);
            for (int64_t ch = 0; ch < c->ic; ch++)
                for (int i = 0; i < c->kh; i++)
                    for (int j = 0; j < c->kw; j++) {
                        int64_t row = r0 + i, col = q0 + j;
                        bool in = row >= 0 && row < c->ih && col >= 0 && col < c->iw;
                        if (cf) w[((ch * c->kh) + i) * c->kw + j] = in ? (ch * c->ih + row) * c->iw + col : -1;
                        else w[((int64_t)i * c->kw + j) * c->ic + ch] = in ? (row * c->iw + col) * c->ic + ch : -1;
                    }
        }
    /* implementation 3: Keras's sorted conv_kernel_idxs, (output offset, input offset) pairs in
     * increasing order: per output offset its window's inputs, which lie in feature order */
    free(c->k3_start), free(c->k3_rank);
    c->k3_start = c->k3_rank = NULL;
    const int64_t out_n = c->positions * c->filters;
    int64_t nnz = 0;
    if (c->impl == 3) {
        if (!(c->k3_start = tnt__calloc((size_t)out_n, sizeof *c->k3_start)) ||
            !(c->k3_rank = tnt__calloc((size_t)(c->positions * c->features), sizeof *c->k3_rank)))
            return TNT_ERR_NOMEM;
        for (int64_t p = 0; p < c->positions; p++)
            for (int64_t d = 0, n = 0; d < c->features; d++)
                c->k3_rank[p * c->features + d] = c->window[p * c->features + d] >= 0 ? n++ : -1;
        for (int64_t o = 0; o < out_n; o++) {
            int64_t p = cf ? o % c->positions : o / c->filters, n = 0;
            for (int64_t d = 0; d < c->features; d++) n += c->window[p * c->features + d] >= 0;
            c->k3_start[o] = nnz;
            nnz += n;
        }
    }
    /* implementation 1: (positions, features, filters); 2: (input..., output...) in the layer's
     * format, 2-D channels last (rows, cols, in, out_rows, out_cols, filters); 3: (entries,) */
    tnt_shape ks = TNT_SHAPE(c->positions, c->features, c->filters);
    if (c->impl == 3) ks = TNT_SHAPE(nnz);
    if (c->impl == 2 && c->two_d)
        ks = cf ? TNT_SHAPE(c->ic, c->ih, c->iw, c->filters, c->oh, c->ow)
                : TNT_SHAPE(c->ih, c->iw, c->ic, c->oh, c->ow, c->filters);
    else if (c->impl == 2)
        ks = cf ? TNT_SHAPE(c->ic, c->iw, c->filters, c->ow) : TNT_SHAPE(c->iw, c->ic, c->ow, c->filters);
    /* Keras's fans of a kernel of rank >= 3: receptive field = all axes but the last two; rank 1:
     * its length */
    int64_t rf = 1;
    for (int i = 0; i < ks.ndim - 2; i++) rf *= ks.dim[i];
    int64_t fan_in = ks.ndim == 1 ? nnz : ks.dim[ks.ndim - 2] * rf, fan_out = ks.ndim == 1 ? nnz : ks.dim[ks.ndim - 1] * rf;
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", ks, c->kernel_init, fan_in, fan_out) < 0) return TNT_ERR_ARG;
    tnt_shape bshape = c->two_d ? TNT_SHAPE(c->oh, c->ow, c->filters) : TNT_SHAPE(c->ow, c->filters);
    if (c->use_bias && tnt__layer_add_weight(l, "bias", bshape, c->bias_init, 0, 0) < 0) return TNT_ERR_ARG;
    *out = c->two_d ? tnt__conv_output(l, 2, (int64_t[]){c->oh, c->ow}, c->filters)
                    : tnt__conv_output(l, 1, &c->ow, c->filters);
    return TNT_OK;
}

/* ---- plan and workspace --------------------------------------------------------------------- */

/* The plan is the activation over the output's last axis in memory (filters; positions when
 * channels first, Keras's last axis). */
static void lc_plan_destroy(void *plan) {
    if (!plan) return;
    tnt__act_destroy(plan);
    free(plan);
}

static void *lc_plan_create(tnt_layer *l, int64_t batch) {
    tnt__act *a = tnt__calloc(1, sizeof *a);
    if (!a) return NULL;
    int64_t cols = l->out_shape.dim[l->out_shape.ndim - 1];
    if (l->activation != TNT_ACT_LINEAR &&
        tnt__act_create(a, l->activation, l->activation_alpha, batch * tnt_shape_numel(l->out_shape) / cols, cols) !=
            TNT_OK) {
        tnt__error_prefix(TNT_ERR_ARG, "%s \"%s\": ", lc_class(l->priv), l->name);
        free(a);
        return NULL;
    }
    return a;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* [fused activation's][windows (positions, batch, features)][outputs (positions, batch, filters)]
 * [implementation 2: its kernel (or gradient) as implementation 1's (positions, features, filters)] */
static size_t lc_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const lc_cfg *c = l->priv;
    return align64(tnt__fused_workspace_size(l, batch)) +
           align64((size_t)(c->positions * batch * c->features) * sizeof(float)) +
           align64((size_t)(c->positions * batch * c->filters) * sizeof(float)) +
           (c->impl != 1 ? (size_t)(c->positions * c->features * c->filters) * sizeof(float) : 0);
}

static float *ws_windows(tnt_layer *l, void *ws, int64_t batch) {
    return (float *)((char *)ws + align64(tnt__fused_workspace_size(l, batch)));
}

static float *ws_outputs(tnt_layer *l, void *ws, int64_t batch) {
    const lc_cfg *c = l->priv;
    return (float *)((char *)ws_windows(l, ws, batch) +
                     align64((size_t)(c->positions * batch * c->features) * sizeof(float)));
}

static float *ws_kernel(tnt_layer *l, void *ws, int64_t batch) {
    const lc_cfg *c = l->priv;
    return (float *)((char *)ws_outputs(l, ws, batch) + align64((size_t)(c->positions * batch * c->filters) * sizeof(float)));
}

/* Implementation 2's kernel is the dense (input, output) matrix of a sample's memory order, zero
 * (masked) outside the windows: entry (p, d, f) of implementation 1 is its (window(p, d), output
 * offset o of (p, f)); implementation 3's is entry k3_start[o] + k3_rank[p, d] of its list.
 * to_k2 false: k1 = those entries of k2 (0 outside the input); true: k2 = k1 there, 0 elsewhere
 * (the gradient: Keras's mask stops it). */
static void map_stored(const tnt_layer *l, float *k1, float *k2, bool to_k2) {
    const lc_cfg *c = l->priv;
    const int64_t P = c->positions, D = c->features, F = c->filters, out_n = P * F;
    if (to_k2) memset(k2, 0, (size_t)tnt_shape_numel(l->weights[0].shape) * sizeof(float));
    for (int64_t p = 0; p < P; p++)
        for (int64_t d = 0; d < D; d++) {
            int64_t w = c->window[p * D + d];
            float *row = k1 + (p * D + d) * F;
            for (int64_t f = 0; f < F; f++) {
                int64_t o = l->channels_first ? f * P + p : p * F + f;
                int64_t k = w < 0 ? -1 : c->impl == 2 ? w * out_n + o : c->k3_start[o] + c->k3_rank[p * D + d];
                if (to_k2 && k >= 0) k2[k] = row[f];
                else if (!to_k2) row[f] = k >= 0 ? k2[k] : 0.0f;
            }
        }
}

/* ---- forward and backward ------------------------------------------------------------------- */

/* win (positions, batch, features) = every position's window of x (batch, input...) */
static void gather(const tnt_layer *l, const float *x, int64_t batch, float *win) {
    const lc_cfg *c = l->priv;
    const int64_t D = c->features, in_n = tnt_shape_numel(l->in_shape);
    for (int64_t p = 0; p < c->positions; p++)
        for (int64_t b = 0; b < batch; b++) {
            const int64_t *w = c->window + p * D;
            const float *xb = x + b * in_n;
            float *dst = win + (p * batch + b) * D;
            for (int64_t d = 0; d < D; d++) dst[d] = w[d] >= 0 ? xb[w[d]] : 0.0f;
        }
}

/* x: (batch, input...) -> out: (batch, output...), before the activation */
static tnt_status lc_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op, float *out) {
    (void)plan, (void)post_op;
    const lc_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    const int64_t B = a->batch, P = c->positions, D = c->features, F = c->filters, out_n = P * F;
    float *win = ws_windows(l, a->workspace, B), *po = ws_outputs(l, a->workspace, B);
    gather(l, a->x, B, win);
    const float *kernel = l->weights[0].value;
    if (c->impl != 1) {
        map_stored(l, ws_kernel(l, a->workspace, B), l->weights[0].value, false);
        kernel = ws_kernel(l, a->workspace, B);
    }
    for (int64_t p = 0; p < P; p++)
        TNT_DNNL(dnnl_sgemm('N', 'N', B, F, D, 1.0f, win + p * B * D, D, kernel + p * D * F, F, 0.0f, po + p * B * F, F));
    const float *bias = c->use_bias ? l->weights[1].value : NULL;
    for (int64_t b = 0; b < B; b++) {
        float *ob = out + b * out_n;
        for (int64_t p = 0; p < P; p++)
            for (int64_t f = 0; f < F; f++)
                ob[l->channels_first ? f * P + p : p * F + f] = po[(p * B + b) * F + f];
        if (bias)
            for (int64_t i = 0; i < out_n; i++) ob[i] += bias[i];
    }
fail:
    return status;
}

static tnt_status lc_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__fused_forward(l, plan, a, false, plan, lc_run);
}

/* dy: (batch, output...) -> kernel and bias gradients, dx: (batch, input...) or NULL */
static tnt_status lc_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const lc_cfg *c = l->priv;
    const float *dpre;
    tnt_status status = tnt__fused_backward(l, a, plan, &dpre);
    if (status != TNT_OK) return status;
    const int64_t B = a->batch, P = c->positions, D = c->features, F = c->filters;
    const int64_t in_n = tnt_shape_numel(l->in_shape), out_n = P * F;
    float *win = ws_windows(l, a->workspace, B), *dpo = ws_outputs(l, a->workspace, B);
    gather(l, a->x, B, win); /* again: a backward before may have overwritten them */
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < P; p++)
            for (int64_t f = 0; f < F; f++)
                dpo[(p * B + b) * F + f] = dpre[b * out_n + (l->channels_first ? f * P + p : p * F + f)];
    if (c->use_bias) {
        float *db = l->weights[1].grad;
        memset(db, 0, (size_t)out_n * sizeof(float));
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < out_n; i++) db[i] += dpre[b * out_n + i];
    }
    const float *kernel = l->weights[0].value;
    float *dk = c->impl != 1 ? ws_kernel(l, a->workspace, B) : l->weights[0].grad;
    for (int64_t p = 0; p < P; p++)
        TNT_DNNL(dnnl_sgemm('T', 'N', D, F, B, 1.0f, win + p * B * D, D, dpo + p * B * F, F, 0.0f, dk + p * D * F, F));
    if (c->impl != 1) { /* the gradient into the stored kernel, then that kernel again for dx */
        map_stored(l, dk, l->weights[0].grad, true);
        map_stored(l, dk, l->weights[0].value, false);
        kernel = dk;
    }
    if (!a->dx) return TNT_OK;
    /* each window's gradient replaces the window, which nothing needs any more */
    for (int64_t p = 0; p < P; p++)
        TNT_DNNL(dnnl_sgemm('N', 'T', B, D, F, 1.0f, dpo + p * B * F, F, kernel + p * D * F, F, 0.0f, win + p * B * D, D));
    memset(a->dx, 0, (size_t)(B * in_n) * sizeof(float));
    for (int64_t p = 0; p < P; p++)
        for (int64_t b = 0; b < B; b++) {
            const int64_t *w = c->window + p * D;
            const float *src = win + (p * B + b) * D;
            float *dxb = a->dx + b * in_n;
            for (int64_t d = 0; d < D; d++)
                if (w[d] >= 0) dxb[w[d]] += src[d];
        }
fail:
    return status;
}

/* ---- config --------------------------------------------------------------------------------- */

static void lc_destroy(tnt_layer *l) {
    lc_cfg *c = l->priv;
    if (c) free(c->window), free(c->k3_start), free(c->k3_rank);
    free(c);
}

static tnt_status lc_get_config(const tnt_layer *l, cJSON *c) {
    const lc_cfg *k = l->priv;
    int n = k->two_d ? 2 : 1;
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", k->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", n, k->two_d ? (int[]){k->kh, k->kw} : (int[]){k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", n, k->two_d ? (int[]){k->sh, k->sw} : (int[]){k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", k->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->bias_init));
    TNT_KJ_S(tnt__kj_add_nulls(c, tnt__kj_kernel_nulls));
    TNT_KJ(cJSON_AddNumberToObject(c, "implementation", k->impl));
    return TNT_OK;
}

/* Conv2D's keys (conv2d.h) and implementation; padding must be "valid" */
static tnt_layer *lc_from_config(const cJSON *c, const tnt__kj_ctx *k, bool two_d) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[2] = {0}, impl = 1;
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__conv_read_config(c, two_d ? 2 : 1, ks, &o, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, (const char *const[]){"kernel_regularizer", "kernel_constraint", NULL}, k));
    TNT_KJ_READ(tnt__kj_int(c, "implementation", false, 1, &impl, k));
    if (impl < 1 || impl > 3)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "implementation %d (Keras has 1: the kernel (positions, features, "
                            "filters); 2: the dense masked kernel; 3: the sparse one)", impl);
    if (o.padding != TNT_PADDING_VALID && (impl == 1 || o.padding != TNT_PADDING_SAME))
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "padding \"%s\" (implementation 1 supports \"valid\" only, 2 "
                            "and 3 \"valid\" and \"same\")", tnt__kj_padding_name(o.padding));
    if (o.dilation[0] > 1 || o.dilation[1] > 1)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "dilation_rate is not a key of this class");
    if (two_d) return tnt__kj_built(tnt_locally_connected2d(filters, ks[0], ks[1], impl, &o), k);
    return tnt__kj_built(tnt_locally_connected1d(filters, ks[0], impl, &o), k);
}

static tnt_layer *lc1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return lc_from_config(c, k, false); }
static tnt_layer *lc2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return lc_from_config(c, k, true); }

#define LC_OPS(var, cls, fromcfg)                                                                 \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .get_config = lc_get_config,                                                              \
        .from_config = fromcfg,                                                                   \
        .build = lc_build,                                                                        \
        .plan_create = lc_plan_create,                                                            \
        .plan_destroy = lc_plan_destroy,                                                          \
        .workspace_size = lc_workspace_size,                                                      \
        .forward = lc_forward,                                                                    \
        .backward = lc_backward,                                                                  \
        .destroy = lc_destroy,                                                                    \
        .set_data_format = tnt__layer_take_data_format,                                           \
    }
LC_OPS(tnt__locally_connected1d_ops, "LocallyConnected1D", lc1d_from_config);
LC_OPS(tnt__locally_connected2d_ops, "LocallyConnected2D", lc2d_from_config);

/* ---- constructors --------------------------------------------------------------------------- */

static tnt_layer *lc_new(lc_cfg cfg, const tnt_layer_opts *o) {
    const char *cls = lc_class(&cfg);
    if (cfg.filters <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: filters %d (expected > 0)", cls, cfg.filters);
        return NULL;
    }
    if (cfg.kh <= 0 || cfg.kw <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: kernel_size %d (expected > 0)", cls, cfg.kh <= 0 ? cfg.kh : cfg.kw);
        return NULL;
    }
    int n = cfg.two_d ? 2 : 1;
    for (int i = 0; i < n; i++)
        if (o->strides[i] < 0) {
            tnt__error(TNT_ERR_ARG, "%s: strides %d (expected > 0, or 0 for the default 1)", cls, o->strides[i]);
            return NULL;
        }
    cfg.sh = cfg.two_d && o->strides[0] ? o->strides[0] : 1;
    cfg.sw = o->strides[n - 1] ? o->strides[n - 1] : 1;
    if (cfg.impl == 0) cfg.impl = 1;
    if (cfg.impl < 1 || cfg.impl > 3) {
        tnt__error(TNT_ERR_ARG, "%s: implementation %d (expected 1, 2 or 3, or 0 for 1)", cls, cfg.impl);
        return NULL;
    }
    if (o->padding != TNT_PADDING_VALID && (cfg.impl == 1 || o->padding != TNT_PADDING_SAME)) {
        tnt__error(TNT_ERR_ARG, "%s: padding %d (implementation 1: TNT_PADDING_VALID only, as Keras; 2 and 3: "
                   "also TNT_PADDING_SAME)", cls, (int)o->padding);
        return NULL;
    }
    cfg.padding = o->padding;
    if ((unsigned)o->activation >= TNT_ACT_COUNT) {
        tnt__error(TNT_ERR_ARG, "%s: activation %d (expected 0..%d)", cls, (int)o->activation, TNT_ACT_COUNT - 1);
        return NULL;
    }
    if (!tnt__init_valid(o->kernel_initializer, TNT_INIT_ORTHOGONAL) || !tnt__init_valid(o->bias_initializer, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "%s: initializer %d/%d (expected 0..%d)", cls, (int)o->kernel_initializer,
                   (int)o->bias_initializer, (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    cfg.use_bias = !o->no_bias;
    cfg.kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM;
    cfg.bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS;
    lc_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(cfg.two_d ? &tnt__locally_connected2d_ops : &tnt__locally_connected1d_ops, o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}

tnt_layer *tnt_locally_connected1d(int filters, int kernel_size, int implementation, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    return lc_new((lc_cfg){.filters = filters, .kh = 1, .kw = kernel_size, .impl = implementation},
                  opts ? opts : &defaults);
}

tnt_layer *tnt_locally_connected2d(int filters, int kernel_h, int kernel_w, int implementation,
                                   const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    return lc_new((lc_cfg){.two_d = true, .filters = filters, .kh = kernel_h, .kw = kernel_w, .impl = implementation},
                  opts ? opts : &defaults);
}
