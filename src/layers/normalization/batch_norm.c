/* batch_norm.c: BatchNormalization (Keras): each channel (the entries along `axis`, by default
 * the last one; axis=1 for channels-first images) is normalized over all the other axes of the
 * batch, then scaled by gamma and shifted by beta:
 *   y = gamma * (x - mean) / sqrt(var + epsilon) + beta
 *
 * Weights, in Keras order, all of shape (channels): gamma (ones; absent with scale=False), beta
 * (zeros; absent with center=False), and the state moving_mean (zeros) and moving_variance (ones),
 * which are not trainable (the model keeps them outside the gradient buffer, the optimizer and the
 * allreduce). An absent gamma or beta acts as ones or zeros.
 *
 * Training (a->training): mean and the biased variance of this rank's micro-batch (all samples
 * and spatial positions) normalize x; the moving statistics are updated Keras-style:
 *   moving = moving * momentum + batch_stat * (1 - momentum)
 * where the variance in the moving update is the unbiased one, var * m / (m - 1) for m values per
 * channel (the biased one when m == 1). This is what Keras 2 does on its default fused path
 * (TensorFlow's FusedBatchNormV3 with exponential_avg_factor returns the Bessel-corrected
 * variance) and what PyTorch does for running_var; Keras's non-fused path would use the biased
 * variance instead. Inference: the moving statistics normalize x and nothing is updated.
 *
 * Own C code in double accumulation (a few passes over x per step). The input is seen as
 * (rows, channels, inner): inner = 1 for the last axis (features, NHWC, ...), whose loops run along
 * the channels, else the cells after the axis (H*W for NCHW), whose loops run along those cells. The step's mean and 1/std are
 * kept in the workspace for backward. Backward (gradients of the statistics used in forward):
 *   dbeta = sum(dy), dgamma = sum(dy * xhat),
 *   dx = gamma / std * (dy - dbeta / m - xhat * dgamma / m)   (training: batch statistics)
 *   dx = gamma / std * dy                                      (inference: constant statistics)
 *
 * SyncBatchNormalization (Keras tf.keras.layers.experimental.SyncBatchNormalization) is this
 * layer with the flag sync: same weights, defaults and code. In a data-parallel training step
 * (a->parallel: every rank makes the same call on its own micro-batch) the statistics are those
 * of the global batch: the per-channel sums and the value count are summed over ranks
 * (tnt__allreduce_sum_f64), then the sums of squared deviations from the global mean (two passes,
 * as the local path, rather than sum(x^2) - m * mean^2, which cancels badly), so mean, variance and
 * the moving update (unbiased with the GLOBAL count M) equal BatchNormalization on the whole
 * batch. Backward sums dbeta and dgamma over ranks for dx (divided by M), which is then the
 * full-batch gradient; the weight gradients stay the LOCAL sums, because the model's gradient
 * allreduce adds them up afterwards. Without a->parallel, or in inference, it is exactly
 * BatchNormalization (no collective). Every rank takes part in the collectives even when its
 * micro-batch is empty, so no rank waits for another. */
#include "layers/keras_config.h"
#include "layers/layer.h"

#include "comm/comm.h"
#include "gpu/gpu.h"

#include <math.h>
#include <stdio.h>

typedef struct bn_cfg {
    float momentum, epsilon;
    bool sync;           /* SyncBatchNormalization */
    bool center, scale;  /* Keras: beta and gamma exist */
    int axis;            /* Keras's, counting the batch axis, negative from the end */
    int64_t channels;    /* from build: the size of the axis */
    int64_t inner;       /* from build: the cells after the axis (1 for the last axis) */
    int gamma, beta, moving_mean, moving_var; /* weight indices from build; -1: absent */
    float *ones_zeros;   /* (2, channels): stand-ins for an absent gamma and beta */
} bn_cfg;

/* What forward normalized with (kept in the workspace for backward). */
enum { BN_USED_MOVING = 0, BN_USED_LOCAL = 1, BN_USED_GLOBAL = 2 };

static tnt_status bn_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    bn_cfg *c = l->priv;
    char b[96];
    if (in.ndim < 1)
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s has rank 0 (expected at least "
                          "1: ..., channels)", l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE,
                              "%s \"%s\": input shape %s has an empty dimension",
                              l->ops->class_name, l->name, tnt_shape_str(in, b, sizeof b));
    int k = c->axis < 0 ? c->axis + in.ndim + 1 : c->axis; /* Keras's axis, counting the batch axis */
    if (k < 1 || k > in.ndim)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": axis %d of input shape %s (expected 1..%d or -%d..-1; axis 0 is "
                          "the batch)", l->ops->class_name, l->name, c->axis, tnt_shape_str(in, b, sizeof b), in.ndim,
                          in.ndim);
    c->channels = in.dim[k - 1];
    c->inner = 1;
    for (int i = k; i < in.ndim; i++) c->inner *= in.dim[i];
    l->n_weights = 0;
    const struct { const char *name; tnt_initializer init; bool trainable, present; int *index; } w[4] = {
        {"gamma", TNT_INIT_ONES, true, c->scale, &c->gamma},
        {"beta", TNT_INIT_ZEROS, true, c->center, &c->beta},
        {"moving_mean", TNT_INIT_ZEROS, false, true, &c->moving_mean},
        {"moving_variance", TNT_INIT_ONES, false, true, &c->moving_var},
    };
    for (int i = 0; i < 4; i++) {
        *w[i].index = -1;
        if (!w[i].present) continue;
        int k = tnt__layer_add_weight(l, w[i].name, TNT_SHAPE(c->channels), w[i].init, 0, 0);
        if (k < 0) return TNT_ERR_ARG;
        l->weights[k].trainable = w[i].trainable;
        *w[i].index = k;
    }
    free(c->ones_zeros);
    c->ones_zeros = tnt__calloc((size_t)(2 * c->channels), sizeof(float));
    if (!c->ones_zeros) return TNT_ERR_NOMEM;
    for (int64_t k = 0; k < c->channels; k++) c->ones_zeros[k] = 1.0f;
    *out = in;
    return TNT_OK;
}

/* ---- workspace ---------------------------------------------------------------------------- */

/* [acc: 2*channels + 1 doubles, per-channel sums and a count (scratch)]
 * [count: 1 double, the values per channel behind the batch statistics (global when synced)]
 * [mean: channels floats][inv_std: channels floats][flag: 1 float, BN_USED_*] */
static size_t bn_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan, (void)batch;
    const bn_cfg *c = l->priv;
    return (size_t)(2 * c->channels + 2) * sizeof(double) + (size_t)(2 * c->channels + 1) * sizeof(float);
}

static double *ws_acc(void *ws) { return ws; }
static double *ws_count(void *ws, int64_t C) { return (double *)ws + 2 * C + 1; }
static float *ws_mean(void *ws, int64_t C) { return (float *)((double *)ws + 2 * C + 2); }

/* Sums x over ranks for SyncBatchNormalization, with the layer named in an error. */
static tnt_status bn_allreduce(tnt_layer *l, double *x, int64_t n, const char *what) {
    tnt_status s = tnt__allreduce_sum_f64(x, n);
    if (s != TNT_OK)
        return tnt__error_prefix(s, "%s \"%s\": allreduce of the %s: ", l->ops->class_name, l->name, what);
    return TNT_OK;
}

/* ---- forward ------------------------------------------------------------------------------ */

static const float *bn_gamma(const tnt_layer *l) {
    const bn_cfg *c = l->priv;
    return c->gamma >= 0 ? l->weights[c->gamma].value : c->ones_zeros;
}

/* Per-channel sums of x (mean NULL) or of (x - mean)^2 into acc (double), x: (rows, C, inner) */
static void bn_stat_sums(const float *x, int64_t rows, int64_t C, int64_t inner, const double *mean, double *acc) {
    if (inner == 1 && !mean) {
        for (int64_t i = 0; i < rows; i++)
            for (int64_t k = 0; k < C; k++) acc[k] += x[i * C + k];
        return;
    }
    if (inner == 1) {
        for (int64_t i = 0; i < rows; i++)
            for (int64_t k = 0; k < C; k++) {
                double d = x[i * C + k] - mean[k];
                acc[k] += d * d;
            }
        return;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < C; k++) {
            const float *xr = x + (i * C + k) * inner;
            double s = 0, mk = mean ? mean[k] : 0;
            if (mean)
                for (int64_t j = 0; j < inner; j++) s += (xr[j] - mk) * (xr[j] - mk);
            else
                for (int64_t j = 0; j < inner; j++) s += xr[j];
            acc[k] += s;
        }
}

/* x, y: (batch, ..., channels, ...), seen as (rows, C, inner): m = rows * inner values per channel */
static tnt_status bn_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const bn_cfg *c = l->priv;
    const int64_t C = c->channels, inner = c->inner, m = a->batch * (tnt_shape_numel(l->in_shape) / C);
    const int64_t rows = m / inner;
    const float *gamma = bn_gamma(l), *beta = c->beta >= 0 ? l->weights[c->beta].value : c->ones_zeros + C;
    float *mmean = l->weights[c->moving_mean].value, *mvar = l->weights[c->moving_var].value;
    float *mean = ws_mean(a->workspace, C), *inv_std = mean + C, *flag = inv_std + C;
    const float *x = a->x;
    /* a frozen BatchNormalization (Keras's trainable: false) runs in inference mode, as in Keras */
    const bool training = a->training && !l->frozen;
    const bool sync = c->sync && a->parallel && training;
    /* m values per channel here, M in the whole (global when synced) batch */
    double M = (double)m;
    double *sum = ws_acc(a->workspace), *cnt = sum + C, *sq = cnt + 1;
    if (sync || (training && m > 0)) {
        memset(sum, 0, (size_t)(2 * C + 1) * sizeof(double));
        bn_stat_sums(x, rows, C, inner, NULL, sum);
        if (sync) { /* every rank, even with an empty micro-batch */
            *cnt = (double)m;
            tnt_status s = bn_allreduce(l, sum, C + 1, "per-channel sums");
            if (s != TNT_OK) return s;
            M = *cnt; /* the same on every rank */
        }
    }
    if (training && M > 0) {
        for (int64_t k = 0; k < C; k++) sum[k] /= M; /* now the mean */
        bn_stat_sums(x, rows, C, inner, sum, sq);
        if (sync) {
            tnt_status s = bn_allreduce(l, sq, C, "per-channel squared deviations");
            if (s != TNT_OK) return s;
        }
        const double mom = c->momentum;
        for (int64_t k = 0; k < C; k++) {
            double var = sq[k] / M; /* biased: normalizes this batch */
            double unbiased = M > 1 ? sq[k] / (M - 1) : var;
            mean[k] = (float)sum[k];
            inv_std[k] = (float)(1.0 / sqrt(var + c->epsilon));
            mmean[k] = (float)(mmean[k] * mom + sum[k] * (1.0 - mom));
            mvar[k] = (float)(mvar[k] * mom + unbiased * (1.0 - mom));
        }
        *ws_count(a->workspace, C) = M;
        *flag = sync ? (float)BN_USED_GLOBAL : (float)BN_USED_LOCAL;
    } else {
        for (int64_t k = 0; k < C; k++) {
            mean[k] = mmean[k];
            inv_std[k] = (float)(1.0 / sqrt((double)mvar[k] + c->epsilon));
        }
        *ws_count(a->workspace, C) = M;
        *flag = (float)BN_USED_MOVING;
    }
    /* a relu folded in by the model (Activation("relu") right after) costs no extra pass */
    const bool relu = l->activation == TNT_ACT_RELU;
    if (inner == 1) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t k = 0; k < C; k++) {
                float v = gamma[k] * (x[i * C + k] - mean[k]) * inv_std[k] + beta[k];
                a->y[i * C + k] = relu && !(v > 0.0f) ? 0.0f : v; /* a ternary, unlike fmaxf, vectorizes */
            }
    } else {
        for (int64_t i = 0; i < rows; i++)
            for (int64_t k = 0; k < C; k++) {
                const float *xr = x + (i * C + k) * inner;
                float *yr = a->y + (i * C + k) * inner, g = gamma[k], mk = mean[k], s = inv_std[k], bk = beta[k];
                for (int64_t j = 0; j < inner; j++) {
                    float v = g * (xr[j] - mk) * s + bk;
                    yr[j] = relu && !(v > 0.0f) ? 0.0f : v;
                }
            }
    }
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(m * C) * sizeof(float));
    return TNT_OK;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* The gradient reaching the normalization: dy, or with a folded relu dy where y > 0. The loops
 * are instantiated for both cases (relu is a constant after inlining) so that each vectorizes. */
static inline __attribute__((always_inline)) float bn_dy(bool relu, const float *dy, const float *y, int64_t i) {
    return relu ? (y[i] > 0.0f ? dy[i] : 0.0f) : dy[i];
}

/* Per-channel sums of g and g * xhat: float partial sums over blocks (they vectorize), added into
 * double per block so that long sums keep their precision. Blocks never span two samples, so the
 * partial sums are the same however the batch is split across ranks.
 * Last axis (inner 1): blocks of up to 64 rows of C channels; rows of one sample: per_sample.
 * Other axes: blocks of up to 256 cells of one (row, channel). */
#define BN_BLOCK_ROWS 64
#define BN_BLOCK_CELLS 256
static inline __attribute__((always_inline)) void bn_grad_sums(bool relu, int64_t m, int64_t per_sample, int64_t C,
                                                                int64_t inner, const float *x, const float *dy,
                                                                const float *y, const float *mean, const float *inv_std,
                                                                double *dbeta, double *dgamma, float *pb, float *pg) {
    if (inner > 1) {
        for (int64_t i = 0; i < m / inner; i++)
            for (int64_t k = 0; k < C; k++)
                for (int64_t j0 = 0; j0 < inner; j0 += BN_BLOCK_CELLS) {
                    int64_t base = (i * C + k) * inner, j1 = TNT_MIN(inner, j0 + BN_BLOCK_CELLS);
                    float sb = 0, sg = 0, mk = mean[k], s = inv_std[k];
                    for (int64_t j = j0; j < j1; j++) {
                        float g = bn_dy(relu, dy, y, base + j);
                        sb += g;
                        sg += g * (x[base + j] - mk) * s;
                    }
                    dbeta[k] += sb, dgamma[k] += sg;
                }
        return;
    }
    for (int64_t i0 = 0; i0 < m;) {
        int64_t sample_end = (i0 / per_sample + 1) * per_sample;
        int64_t i1 = TNT_MIN(TNT_MIN(m, i0 + BN_BLOCK_ROWS), sample_end);
        memset(pb, 0, (size_t)C * sizeof(float));
        memset(pg, 0, (size_t)C * sizeof(float));
        for (int64_t i = i0; i < i1; i++)
            for (int64_t k = 0; k < C; k++) {
                float g = bn_dy(relu, dy, y, i * C + k);
                pb[k] += g;
                pg[k] += g * (x[i * C + k] - mean[k]) * inv_std[k];
            }
        for (int64_t k = 0; k < C; k++) dbeta[k] += pb[k], dgamma[k] += pg[k];
        i0 = i1;
    }
}

/* dx = gamma * inv_std * (g - mean(g) - xhat * mean(g * xhat)), with the two means per channel */
static inline __attribute__((always_inline)) void bn_dx(bool relu, int64_t m, int64_t C, int64_t inner, const float *x,
                                                         const float *dy, const float *y, const float *gamma,
                                                         const float *mean, const float *inv_std,
                                                         const float *mean_g, const float *mean_gx, float *dx) {
    if (inner > 1) {
        for (int64_t i = 0; i < m / inner; i++)
            for (int64_t k = 0; k < C; k++) {
                int64_t base = (i * C + k) * inner;
                float mk = mean[k], s = inv_std[k], f = gamma[k] * s, mg = mean_g[k], mgx = mean_gx[k];
                for (int64_t j = base; j < base + inner; j++) {
                    float xhat = (x[j] - mk) * s;
                    dx[j] = f * (bn_dy(relu, dy, y, j) - mg - xhat * mgx);
                }
            }
        return;
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t k = 0; k < C; k++) {
            float xhat = (x[i * C + k] - mean[k]) * inv_std[k];
            dx[i * C + k] = gamma[k] * inv_std[k] * (bn_dy(relu, dy, y, i * C + k) - mean_g[k] - xhat * mean_gx[k]);
        }
}

/* x, dy, dx: (batch, ..., channels, ...) as (rows, C, inner); dx may be NULL */
static tnt_status bn_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const bn_cfg *c = l->priv;
    const int64_t C = c->channels, inner = c->inner, m = a->batch * (tnt_shape_numel(l->in_shape) / C);
    const float *gamma = bn_gamma(l);
    const float *mean = ws_mean(a->workspace, C), *inv_std = mean + C;
    const int used = (int)inv_std[C];
    const bool batch_stats = used != BN_USED_MOVING;
    const double M = *ws_count(a->workspace, C); /* values per channel behind the statistics */
    const float *x = a->x, *dy = a->dy, *y = a->y;
    /* with a folded relu, dy is taken after it: the gradient passes where y > 0 */
    const bool relu = l->activation == TNT_ACT_RELU;

    double *dbeta = ws_acc(a->workspace), *dgamma = dbeta + C;
    memset(dbeta, 0, (size_t)(2 * C) * sizeof(double));
    float *part = malloc((size_t)(2 * C) * sizeof(float)); /* partial sums, then the two means */
    if (!part) return tnt__error(TNT_ERR_NOMEM, "%s \"%s\": out of memory", l->ops->class_name, l->name);
    const int64_t per_sample = tnt_shape_numel(l->in_shape) / C;
    if (relu) bn_grad_sums(true, m, per_sample, C, inner, x, dy, y, mean, inv_std, dbeta, dgamma, part, part + C);
    else bn_grad_sums(false, m, per_sample, C, inner, x, dy, y, mean, inv_std, dbeta, dgamma, part, part + C);
    float *gg = c->gamma >= 0 ? l->weights[c->gamma].grad : NULL, *gb = c->beta >= 0 ? l->weights[c->beta].grad : NULL;
    for (int64_t k = 0; k < C; k++) {
        if (gg) gg[k] = (float)dgamma[k];
        if (gb) gb[k] = (float)dbeta[k];
    }
    if (used == BN_USED_GLOBAL) { /* every rank, as forward: dx needs the global sums */
        tnt_status s = bn_allreduce(l, dbeta, 2 * C, "gradient sums");
        if (s != TNT_OK) {
            free(part);
            return s;
        }
    }
    if (a->dx) {
        float *mean_g = part, *mean_gx = part + C;
        for (int64_t k = 0; k < C; k++) {
            mean_g[k] = batch_stats && M > 0 ? (float)(dbeta[k] / M) : 0.0f;
            mean_gx[k] = batch_stats && M > 0 ? (float)(dgamma[k] / M) : 0.0f;
        }
        if (relu) bn_dx(true, m, C, inner, x, dy, y, gamma, mean, inv_std, mean_g, mean_gx, a->dx);
        else bn_dx(false, m, C, inner, x, dy, y, gamma, mean, inv_std, mean_g, mean_gx, a->dx);
    }
    free(part);
    return TNT_OK;
}

/* ---- constructor -------------------------------------------------------------------------- */

static void bn_destroy(tnt_layer *l) {
    bn_cfg *c = l->priv;
    free(c->ones_zeros);
    free(c);
}

/* Keras: the axis as given, which build turns into [k] (counting the batch axis, k >= 1). */
static tnt_status bn_get_config(const tnt_layer *l, cJSON *c) {
    const bn_cfg *p = l->priv;
    int k = p->axis < 0 ? p->axis + l->in_shape.ndim + 1 : p->axis;
    if (l->built) TNT_KJ_S(tnt__kj_add_ints(c, "axis", 1, &k));
    else TNT_KJ(cJSON_AddNumberToObject(c, "axis", p->axis));
    TNT_KJ(cJSON_AddNumberToObject(c, "momentum", tnt__kj_f(p->momentum)));
    TNT_KJ(cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(p->epsilon)));
    TNT_KJ(cJSON_AddBoolToObject(c, "center", p->center));
    TNT_KJ(cJSON_AddBoolToObject(c, "scale", p->scale));
    TNT_KJ_S(tnt__kj_add_initializer(c, "beta_initializer", tnt__layer_init_for(l, "beta", TNT_INIT_ZEROS)));
    TNT_KJ_S(tnt__kj_add_initializer(c, "gamma_initializer", tnt__layer_init_for(l, "gamma", TNT_INIT_ONES)));
    TNT_KJ_S(tnt__kj_add_initializer(c, "moving_mean_initializer", tnt__layer_init_for(l, "moving_mean", TNT_INIT_ZEROS)));
    TNT_KJ_S(tnt__kj_add_initializer(c, "moving_variance_initializer",
                                     tnt__layer_init_for(l, "moving_variance", TNT_INIT_ONES)));
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                        "gamma_constraint", NULL};
    return tnt__kj_add_nulls(c, nulls);
}

static tnt_layer *bn_from_config(const cJSON *c, const tnt__kj_ctx *k, bool sync) {
    double momentum = 0, epsilon = 0;
    bool renorm = false, center = true, scale = true;
    int axis = -1;
    TNT_KJ_READ(tnt__kj_norm_axis(c, &axis, k));
    if (axis == 0) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "axis 0 (the batch axis)");
    TNT_KJ_READ(tnt__kj_num(c, "momentum", false, 0.99, &momentum, k));
    TNT_KJ_READ(tnt__kj_num(c, "epsilon", false, 1e-3, &epsilon, k));
    tnt_initializer inits[4]; /* beta, gamma, moving_mean, moving_variance */
    TNT_KJ_READ(tnt__kj_center_scale(c, &center, &scale, &inits[0], &inits[1], k));
    TNT_KJ_READ(tnt__kj_init(c, "moving_mean_initializer", TNT_INIT_ZEROS, &inits[2], k));
    TNT_KJ_READ(tnt__kj_init(c, "moving_variance_initializer", TNT_INIT_ONES, &inits[3], k));
    TNT_KJ_READ(tnt__kj_bool(c, "renorm", false, &renorm, k));
    static const char *const nulls[] = {"virtual_batch_size", "adjustment", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    if (renorm)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "renorm true (not supported)");
    if (momentum == 0.0 || epsilon == 0.0)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "momentum or epsilon 0 (not supported: 0 selects the default here)");
    tnt_batch_norm_opts o = {.name = k->name, .momentum = (float)momentum, .epsilon = (float)epsilon,
                             .no_center = !center, .no_scale = !scale, .sync = sync, .axis = axis};
    tnt_layer *l = tnt_batch_normalization_with(&o);
    static const char *const weights[] = {"beta", "gamma", "moving_mean", "moving_variance"};
    for (int i = 0; l && i < 4; i++)
        if (tnt__layer_set_init(l, weights[i], inits[i]) != TNT_OK) {
            tnt_layer_free(l);
            l = NULL;
        }
    return tnt__kj_built(l, k);
}

static tnt_layer *batch_norm_from_config(const cJSON *c, const tnt__kj_ctx *k) { return bn_from_config(c, k, false); }

static tnt_layer *sync_batch_norm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    return bn_from_config(c, k, true);
}

/* ---- on the device (BatchNormalization; SyncBatchNormalization has no device path yet): the
 * kernel sequence of gpu/kernels/normalization.cu, in double as above. Device workspace:
 * [part: chunks x 2C doubles][mean_f, inv_std, mean_g, mean_gx: C floats each]; what forward
 * normalized with (batch or moving statistics, and M) stays on the host, in the plan that forward
 * and backward of a step share. */

#define GPU_BLOCK 256      /* the kernels' BN_LANES: one lane per thread */
#define GPU_TILES_WANTED 1024 /* tiles of the sums that fill an H100/H200 (132 SMs x 8 blocks) */

typedef struct bn_gpu_plan {
    bool batch_stats;
    double M;
} bn_gpu_plan;

static void *bn_gpu_plan_create(tnt_layer *l, int64_t batch) {
    (void)l, (void)batch;
    return tnt__calloc(1, sizeof(bn_gpu_plan));
}

/* the kernels' tile: channels per tile (bn_tile_width) and lanes per channel */
static int64_t bn_gpu_tile_width(int64_t C, int64_t inner) {
    int64_t w = 1;
    while (inner == 1 && w < 32 && w < C) w *= 2;
    return w;
}

static int64_t bn_gpu_values(const tnt_layer *l, int64_t batch) {
    const bn_cfg *c = l->priv;
    return batch * (tnt_shape_numel(l->in_shape) / c->channels);
}

/* Values per channel in a tile of the sums: 128 per lane on big inputs, fewer (down to 4) until
 * there are enough tiles to fill the device; a function of the shape only, so the sums' order is. */
static int64_t bn_gpu_chunk(const tnt_layer *l, int64_t batch) {
    const bn_cfg *c = l->priv;
    const int64_t m = bn_gpu_values(l, batch), tw = bn_gpu_tile_width(c->channels, c->inner);
    const int64_t lanes = GPU_BLOCK / tw, ctiles = (c->channels + tw - 1) / tw;
    int64_t chunk = lanes * 128;
    while (chunk > lanes * 4 && (m + chunk - 1) / chunk * ctiles < GPU_TILES_WANTED) chunk /= 2;
    return chunk;
}

static int64_t bn_gpu_chunks(const tnt_layer *l, int64_t batch) {
    int64_t m = bn_gpu_values(l, batch), chunk = bn_gpu_chunk(l, batch);
    return m > 0 ? (m + chunk - 1) / chunk : 1;
}

static size_t bn_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const bn_cfg *c = l->priv;
    return (size_t)(bn_gpu_chunks(l, batch) * 2 * c->channels) * sizeof(double) +
           (size_t)(4 * c->channels) * sizeof(float);
}

typedef struct bn_gpu_ws {
    double *part;
    float *mean_f, *inv_std, *mean_g, *mean_gx;
} bn_gpu_ws;

static bn_gpu_ws bn_gpu_split(const tnt_layer *l, void *ws, int64_t batch) {
    const int64_t C = ((const bn_cfg *)l->priv)->channels;
    bn_gpu_ws w;
    w.part = ws;
    w.mean_f = (float *)(w.part + bn_gpu_chunks(l, batch) * 2 * C);
    w.inv_std = w.mean_f + C, w.mean_g = w.inv_std + C, w.mean_gx = w.mean_g + C;
    return w;
}

/* a launch of `blocks` blocks of GPU_BLOCK threads (capped: the kernels stride over their tiles) */
#define BN_LAUNCH(name, blocks, ...)                                                              \
    do {                                                                                          \
        void *args_[] = {__VA_ARGS__};                                                            \
        unsigned grid_ = tnt__gpu_grid_for((int64_t)(blocks) * GPU_BLOCK, GPU_BLOCK);             \
        if ((s = tnt__gpu_launch(name, grid_, GPU_BLOCK, 0, args_)) != TNT_OK) return s;          \
    } while (0)

/* blocks for the sums (chunks x channel tiles), the merges (32 channels each) and the elementwise
 * kernels (16 values per lane) */
static int64_t bn_gpu_sum_blocks(const bn_cfg *c, int64_t chunks) {
    const int64_t tw = bn_gpu_tile_width(c->channels, c->inner);
    return chunks * ((c->channels + tw - 1) / tw);
}
static int64_t bn_gpu_merge_blocks(const bn_cfg *c) { return (c->channels + 31) / 32; }
static int64_t bn_gpu_elementwise_blocks(const bn_cfg *c, int64_t m) {
    const int64_t tw = bn_gpu_tile_width(c->channels, c->inner), chunk = GPU_BLOCK / tw * 16;
    return (m + chunk - 1) / chunk * ((c->channels + tw - 1) / tw);
}

static tnt_status bn_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    const bn_cfg *c = l->priv;
    bn_gpu_plan *p = plan;
    long long C = c->channels, inner = c->inner, m = bn_gpu_values(l, a->batch);
    long long rows = m / inner, chunks = bn_gpu_chunks(l, a->batch), chunk = bn_gpu_chunk(l, a->batch);
    bn_gpu_ws w = bn_gpu_split(l, a->workspace, a->batch);
    const float *gamma = c->gamma >= 0 ? l->weights[c->gamma].d_value : NULL;
    const float *beta = c->beta >= 0 ? l->weights[c->beta].d_value : NULL;
    float *mmean = l->weights[c->moving_mean].d_value, *mvar = l->weights[c->moving_var].d_value;
    double M = (double)m, eps = c->epsilon, mom = c->momentum;
    tnt_status s;
    p->batch_stats = a->training && !l->frozen && m > 0; /* frozen: inference mode, as Keras */
    p->M = M;
    if (p->batch_stats) {
        BN_LAUNCH("tnt_k_bn_stat_sums", bn_gpu_sum_blocks(c, chunks), (void *)&a->x, &w.part, &rows, &C, &inner, &chunk);
        BN_LAUNCH("tnt_k_bn_stats", bn_gpu_merge_blocks(c), (void *)&a->x, &w.part, &chunks, &C, &inner, &w.mean_f,
                  &w.inv_std, &mmean, &mvar, &M, &mom, &eps);
    } else {
        BN_LAUNCH("tnt_k_bn_moving_stats", (C + GPU_BLOCK - 1) / GPU_BLOCK, &mmean, &mvar, &w.mean_f, &w.inv_std, &C,
                  &eps);
    }
    int relu = l->activation == TNT_ACT_RELU;
    BN_LAUNCH("tnt_k_bn_apply", bn_gpu_elementwise_blocks(c, m), (void *)&a->x, (void *)&a->y, &gamma, &beta,
              &w.mean_f, &w.inv_std, &rows, &C, &inner, &relu);
    if (a->preact && a->preact != a->y)
        return tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(m * C) * sizeof(float), TNT__GPU_COMPUTE);
    return TNT_OK;
}

static tnt_status bn_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const bn_cfg *c = l->priv;
    const bn_gpu_plan *p = plan;
    long long C = c->channels, inner = c->inner, m = bn_gpu_values(l, a->batch);
    long long rows = m / inner, chunks = bn_gpu_chunks(l, a->batch), chunk = bn_gpu_chunk(l, a->batch);
    bn_gpu_ws w = bn_gpu_split(l, a->workspace, a->batch);
    const float *gamma = c->gamma >= 0 ? l->weights[c->gamma].d_value : NULL;
    float *gg = c->gamma >= 0 ? l->weights[c->gamma].d_grad : NULL, *gb = c->beta >= 0 ? l->weights[c->beta].d_grad : NULL;
    int relu = l->activation == TNT_ACT_RELU, batch_stats = p->batch_stats;
    double M = p->M;
    tnt_status s;
    BN_LAUNCH("tnt_k_bn_grad_sums", bn_gpu_sum_blocks(c, chunks), (void *)&a->x, (void *)&a->dy, (void *)&a->y,
              &w.mean_f, &w.inv_std, &w.part, &rows, &C, &inner, &chunk, &relu);
    BN_LAUNCH("tnt_k_bn_grad_finish", bn_gpu_merge_blocks(c), &w.part, &chunks, &C, &gg, &gb, &w.mean_g, &w.mean_gx,
              &M, &batch_stats);
    if (a->dx)
        BN_LAUNCH("tnt_k_bn_dx", bn_gpu_elementwise_blocks(c, m), (void *)&a->x, (void *)&a->dy, (void *)&a->y, &gamma,
                  &w.mean_f, &w.inv_std, &w.mean_g, &w.mean_gx, (void *)&a->dx, &rows, &C, &inner, &relu);
    return TNT_OK;
}

static const tnt__gpu_ops bn_gpu_ops = {
    .plan_create = bn_gpu_plan_create,
    .plan_destroy = free,
    .workspace_size = bn_gpu_workspace,
    .forward = bn_gpu_forward,
    .backward = bn_gpu_backward,
};

const tnt__layer_ops tnt__batch_normalization_ops = {
    .class_name = "BatchNormalization",
    .from_config = batch_norm_from_config,
    .get_config = bn_get_config,
    .build = bn_build,
    .workspace_size = bn_workspace_size,
    .forward = bn_forward,
    .backward = bn_backward,
    .backward_reads = tnt__reads_inputs, /* and y with a folded relu */
    .destroy = bn_destroy,
    .folds_relu = true,
    .gpu = &bn_gpu_ops,
};

const tnt__layer_ops tnt__sync_batch_normalization_ops = {
    .class_name = "SyncBatchNormalization",
    .from_config = sync_batch_norm_from_config,
    .get_config = bn_get_config,
    .build = bn_build,
    .workspace_size = bn_workspace_size,
    .forward = bn_forward,
    .backward = bn_backward,
    .backward_reads = tnt__reads_inputs, /* and y with a folded relu */
    .destroy = bn_destroy,
    .collective = true,
    .folds_relu = true,
};

tnt_layer *tnt_batch_normalization_with(const tnt_batch_norm_opts *o) {
    static const tnt_batch_norm_opts defaults;
    if (!o) o = &defaults;
    const bool sync = o->sync;
    const float momentum = o->momentum, epsilon = o->epsilon;
    const tnt__layer_ops *ops = sync ? &tnt__sync_batch_normalization_ops : &tnt__batch_normalization_ops;
    if (!(momentum >= 0.0f && momentum < 1.0f)) {
        tnt__error(TNT_ERR_ARG,
                   "%s: momentum %g (expected in [0, 1), or 0 for the default 0.99)",
                   ops->class_name, (double)momentum);
        return NULL;
    }
    if (!(epsilon >= 0.0f) || isinf(epsilon)) {
        tnt__error(TNT_ERR_ARG,
                   "%s: epsilon %g (expected > 0, or 0 for the default 1e-3)",
                   ops->class_name, (double)epsilon);
        return NULL;
    }
    bn_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->momentum = momentum == 0.0f ? 0.99f : momentum;
    c->epsilon = epsilon == 0.0f ? 1e-3f : epsilon;
    c->sync = sync;
    c->center = !o->no_center;
    c->scale = !o->no_scale;
    c->axis = o->axis ? o->axis : -1;
    tnt_layer *l = tnt__layer_new(ops, o->name, c);
    if (!l) free(c);
    return l;
}

tnt_layer *tnt_batch_normalization(float momentum, float epsilon, const char *name) {
    return tnt_batch_normalization_with(&(tnt_batch_norm_opts){.momentum = momentum, .epsilon = epsilon, .name = name});
}

tnt_layer *tnt_sync_batch_normalization(float momentum, float epsilon, const char *name) {
    return tnt_batch_normalization_with(
        &(tnt_batch_norm_opts){.momentum = momentum, .epsilon = epsilon, .name = name, .sync = true});
}
