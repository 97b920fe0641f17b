/* layer_norm.c: LayerNormalization (Keras, axis=-1): every row (all axes but the last) is
 * normalized over its last axis with its own mean and biased variance, then scaled and shifted:
 *   y = (x - mean) / sqrt(var + epsilon) * gamma + beta
 * gamma (ones) and beta (zeros) have shape (last_dim,); epsilon defaults to 1e-3 as in Keras.
 * The statistics are the same in training and inference (no state).
 *
 * Own C code with double accumulation per row (two passes: mean, then the centered sum of
 * squares; vectorized in several double partial sums by `omp simd`, in a fixed order), parallel
 * over rows with OpenMP; each row's mean and 1/std are kept in the workspace for backward.
 * Backward, with xhat = (x - mean) * rstd and g = dy * gamma per row of C values:
 *   dx     = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
 * dx is parallel over rows; dgamma/dbeta are parallel over column blocks, each thread summing its
 * columns over all rows in row order, so the result does not depend on the thread count. */
#include "gpu/gpu.h"
#include "layers/keras_config.h"
#include "layers/layer.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

typedef struct ln_cfg {
    float epsilon;
    int axis;     /* Keras's, counting the batch axis; only the last one is supported */
    int64_t cols; /* from build: the last axis */
} ln_cfg;

enum { LN_GAMMA, LN_BETA };

static tnt_status ln_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    ln_cfg *c = l->priv;
    char b[96];
    if (in.ndim < 1)
        return tnt__error(TNT_ERR_SHAPE,
                          "LayerNormalization \"%s\": input shape %s has rank 0 (expected at least 1: "
                          "..., features)", l->name, tnt_shape_str(in, b, sizeof b));
    for (int i = 0; i < in.ndim; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE,
                              "LayerNormalization \"%s\": input shape %s has an empty dimension",
                              l->name, tnt_shape_str(in, b, sizeof b));
    if (c->axis != -1 && c->axis != in.ndim)
        return tnt__error(TNT_ERR_UNSUPPORTED, "LayerNormalization \"%s\": axis %d of input shape %s (only the last "
                          "axis, -1 or %d, is supported)", l->name, c->axis, tnt_shape_str(in, b, sizeof b), in.ndim);
    c->cols = in.dim[in.ndim - 1];
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "gamma", TNT_SHAPE(c->cols), TNT_INIT_ONES, 0, 0) < 0 ||
        tnt__layer_add_weight(l, "beta", TNT_SHAPE(c->cols), TNT_INIT_ZEROS, 0, 0) < 0)
        return TNT_ERR_ARG;
    *out = in;
    return TNT_OK;
}

/* ---- workspace ---------------------------------------------------------------------------- */

static int64_t ln_rows(const tnt_layer *l, int64_t batch) {
    const ln_cfg *c = l->priv;
    return batch * (tnt_shape_numel(l->in_shape) / c->cols);
}

/* [mean: rows doubles][rstd: rows doubles][dgamma, dbeta: 2*cols doubles (backward scratch)] */
static size_t ln_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const ln_cfg *c = l->priv;
    return (size_t)(2 * ln_rows(l, batch) + 2 * c->cols) * sizeof(double);
}

/* ---- forward ------------------------------------------------------------------------------ */

static tnt_status ln_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const ln_cfg *c = l->priv;
    const int64_t C = c->cols, rows = ln_rows(l, a->batch);
    const float *gamma = l->weights[LN_GAMMA].value, *beta = l->weights[LN_BETA].value;
    double *mean = a->workspace, *rstd = mean + rows;
    const double eps = c->epsilon;
#pragma omp parallel for schedule(static) if (rows * C > 16384)
    for (int64_t i = 0; i < rows; i++) {
        const float *x = a->x + i * C;
        float *y = a->y + i * C;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < C; k++) s += x[k];
        const double mu = s / (double)C;
        double sq = 0.0;
#pragma omp simd reduction(+ : sq)
        for (int64_t k = 0; k < C; k++) {
            const double d = x[k] - mu;
            sq += d * d;
        }
        const double r = 1.0 / sqrt(sq / (double)C + eps);
        mean[i] = mu;
        rstd[i] = r;
        const float muf = (float)mu, rf = (float)r;
        for (int64_t k = 0; k < C; k++) y[k] = (x[k] - muf) * rf * gamma[k] + beta[k];
    }
    if (a->preact && a->preact != a->y) memcpy(a->preact, a->y, (size_t)(rows * C) * sizeof(float));
    return TNT_OK;
}

/* ---- backward ----------------------------------------------------------------------------- */

static tnt_status ln_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const ln_cfg *c = l->priv;
    const int64_t C = c->cols, rows = ln_rows(l, a->batch);
    const float *gamma = l->weights[LN_GAMMA].value;
    float *gg = l->weights[LN_GAMMA].grad, *gb = l->weights[LN_BETA].grad;
    const double *mean = a->workspace, *rstd = mean + rows;
    double *dgamma = (double *)a->workspace + 2 * rows, *dbeta = dgamma + C;
    const float *x = a->x, *dy = a->dy;
    const bool par = rows * C > 16384;

    if (gg || gb) {
#pragma omp parallel if (par)
        {
            const int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
            const int64_t blocks = (C + 15) / 16; /* column blocks of a cache line */
            const int64_t c0 = TNT_MIN(C, blocks * t / T * 16), c1 = TNT_MIN(C, blocks * (t + 1) / T * 16);
            for (int64_t k = c0; k < c1; k++) dgamma[k] = dbeta[k] = 0.0;
            for (int64_t i = 0; i < rows; i++) {
                const float *xr = x + i * C, *dr = dy + i * C;
                const double mu = mean[i], r = rstd[i];
                for (int64_t k = c0; k < c1; k++) {
                    dbeta[k] += dr[k];
                    dgamma[k] += dr[k] * ((xr[k] - mu) * r);
                }
            }
            for (int64_t k = c0; k < c1; k++) {
                if (gg) gg[k] = (float)dgamma[k];
                if (gb) gb[k] = (float)dbeta[k];
            }
        }
    }

    if (a->dx) {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < rows; i++) {
            const float *xr = x + i * C, *dr = dy + i * C;
            float *dx = a->dx + i * C;
            const double mu = mean[i], r = rstd[i];
            double sg = 0.0, sgx = 0.0; /* sums of g and g * xhat */
#pragma omp simd reduction(+ : sg, sgx)
            for (int64_t k = 0; k < C; k++) {
                const double g = (double)dr[k] * gamma[k];
                sg += g;
                sgx += g * ((xr[k] - mu) * r);
            }
            const float mg = (float)(sg / (double)C), mgx = (float)(sgx / (double)C);
            const float muf = (float)mu, rf = (float)r;
            for (int64_t k = 0; k < C; k++) {
                const float xhat = (xr[k] - muf) * rf;
                dx[k] = rf * (dr[k] * gamma[k] - mg - xhat * mgx);
            }
        }
    }
    return TNT_OK;
}

/* ---- constructor -------------------------------------------------------------------------- */

static void ln_destroy(tnt_layer *l) { free(l->priv); }

/* Keras: axis -1, which build turns into [rank - 1] (counting the batch axis). */
static tnt_status ln_get_config(const tnt_layer *l, cJSON *c) {
    const ln_cfg *p = l->priv;
    if (l->built) TNT_KJ_S(tnt__kj_add_ints(c, "axis", 1, (int[]){l->in_shape.ndim}));
    else TNT_KJ(cJSON_AddNumberToObject(c, "axis", -1));
    TNT_KJ(cJSON_AddNumberToObject(c, "epsilon", tnt__kj_f(p->epsilon)));
    TNT_KJ(cJSON_AddBoolToObject(c, "center", true));
    TNT_KJ(cJSON_AddBoolToObject(c, "scale", true));
    TNT_KJ_S(tnt__kj_add_initializer(c, "beta_initializer", tnt__layer_init_for(l, "beta", TNT_INIT_ZEROS)));
    TNT_KJ_S(tnt__kj_add_initializer(c, "gamma_initializer", tnt__layer_init_for(l, "gamma", TNT_INIT_ONES)));
    static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint",
                                        "gamma_constraint", NULL};
    return tnt__kj_add_nulls(c, nulls);
}

static tnt_layer *layer_norm_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    double epsilon = 0;
    int axis = -1;
    TNT_KJ_READ(tnt__kj_norm_axis(c, &axis, k));
    TNT_KJ_READ(tnt__kj_num(c, "epsilon", false, 1e-3, &epsilon, k));
    bool center = true, scale = true;
    tnt_initializer beta, gamma;
    TNT_KJ_READ(tnt__kj_center_scale(c, &center, &scale, &beta, &gamma, k));
    if (!center || !scale) return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "center and scale must be true");
    if (epsilon == 0.0)
        return tnt__kj_fail(k, TNT_ERR_UNSUPPORTED, "epsilon 0 (not supported: 0 selects the default here)");
    tnt_layer *l = tnt_layer_normalization((float)epsilon, k->name);
    if (l) ((ln_cfg *)l->priv)->axis = axis; /* checked against the input in build */
    if (l && (tnt__layer_set_init(l, "beta", beta) != TNT_OK || tnt__layer_set_init(l, "gamma", gamma) != TNT_OK)) {
        tnt_layer_free(l);
        l = NULL;
    }
    return tnt__kj_built(l, k);
}

/* ---- on the device: gpu/kernels/normalization.cu (the same double accumulations per row); the
 * workspace holds the rows' (mean, 1/std) as here, then the parameter gradients' partial sums
 * (chunks x 2 cols doubles) ---------------------------------------------------------------------- */

#define GPU_BLOCK 256
#define GPU_TILES_WANTED 1024 /* as batch_norm.c: tiles of the column sums that fill the device */

/* rows per tile of tnt_k_ln_param_sums: batch_norm.c's rule (bn_gpu_chunk) for channels last */
static int64_t ln_gpu_chunk(int64_t rows, int64_t C) {
    int64_t tw = 1;
    while (tw < 32 && tw < C) tw *= 2;
    const int64_t lanes = GPU_BLOCK / tw, ctiles = (C + tw - 1) / tw;
    int64_t chunk = lanes * 128;
    while (chunk > lanes * 4 && (rows + chunk - 1) / chunk * ctiles < GPU_TILES_WANTED) chunk /= 2;
    return chunk;
}

static size_t ln_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const int64_t rows = ln_rows(l, batch), C = ((const ln_cfg *)l->priv)->cols, chunk = ln_gpu_chunk(rows, C);
    const int64_t chunks = rows > 0 ? (rows + chunk - 1) / chunk : 1;
    return (size_t)(2 * rows + chunks * 2 * C) * sizeof(double);
}

static unsigned row_grid(int64_t rows) { return (unsigned)(rows < 1 ? 1 : rows > 65535 ? 65535 : rows); }

static tnt_status ln_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    (void)plan;
    const ln_cfg *c = l->priv;
    long long C = c->cols, rows = ln_rows(l, a->batch);
    double eps = c->epsilon;
    const float *gamma = l->weights[LN_GAMMA].d_value, *beta = l->weights[LN_BETA].d_value;
    void *args[] = {(void *)&a->x, (void *)&a->y, &gamma, &beta, (void *)&a->workspace, &rows, &C, &eps};
    tnt_status s = tnt__gpu_launch("tnt_k_ln_fwd", row_grid(rows), GPU_BLOCK, 0, args);
    if (s == TNT_OK && a->preact && a->preact != a->y)
        s = tnt__gpu_copy_on_device(a->preact, a->y, (size_t)(rows * C) * sizeof(float), TNT__GPU_COMPUTE);
    return s;
}

static tnt_status ln_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const ln_cfg *c = l->priv;
    long long C = c->cols, rows = ln_rows(l, a->batch);
    float *gg = l->weights[LN_GAMMA].d_grad, *gb = l->weights[LN_BETA].d_grad;
    const float *gamma = l->weights[LN_GAMMA].d_value;
    tnt_status s = TNT_OK;
    if (gg || gb) { /* column sums in tiles, then merged (no rows: zeros) */
        long long chunk = ln_gpu_chunk(rows, C), chunks = (rows + chunk - 1) / chunk;
        double *part = (double *)a->workspace + 2 * rows, no_count = 0.0;
        float *not_wanted = NULL;
        int no_batch_stats = 0;
        int64_t tw = 1;
        while (tw < 32 && tw < C) tw *= 2;
        const int64_t tiles = chunks * ((C + tw - 1) / tw);
        void *sums[] = {(void *)&a->x, (void *)&a->workspace, (void *)&a->dy, &part, &rows, &C, &chunk};
        void *finish[] = {&part, &chunks, &C, &gg, &gb, &not_wanted, &not_wanted, &no_count, &no_batch_stats};
        if (tiles > 0)
            s = tnt__gpu_launch("tnt_k_ln_param_sums", tnt__gpu_grid_for(tiles * GPU_BLOCK, GPU_BLOCK), GPU_BLOCK, 0, sums);
        if (s == TNT_OK)
            s = tnt__gpu_launch("tnt_k_bn_grad_finish", tnt__gpu_grid_for((C + 31) / 32 * GPU_BLOCK, GPU_BLOCK), GPU_BLOCK,
                                0, finish);
    }
    if (s == TNT_OK && a->dx) {
        void *args[] = {(void *)&a->x, (void *)&a->dy, &gamma, (void *)&a->workspace, (void *)&a->dx, &rows, &C};
        s = tnt__gpu_launch("tnt_k_ln_bwd_dx", row_grid(rows), GPU_BLOCK, 0, args);
    }
    return s;
}

static const tnt__gpu_ops ln_gpu_ops = {
    .workspace_size = ln_gpu_workspace,
    .forward = ln_gpu_forward,
    .backward = ln_gpu_backward,
};

const tnt__layer_ops tnt__layer_normalization_ops = {
    .class_name = "LayerNormalization",
    .from_config = layer_norm_from_config,
    .get_config = ln_get_config,
    .build = ln_build,
    .workspace_size = ln_workspace_size,
    .forward = ln_forward,
    .backward = ln_backward,
    .destroy = ln_destroy,
    .supports_masking = true,
    .gpu = &ln_gpu_ops,
};

tnt_layer *tnt_layer_normalization(float epsilon, const char *name) {
    if (!(epsilon >= 0.0f) || isinf(epsilon)) {
        tnt__error(TNT_ERR_ARG, "LayerNormalization: epsilon %g (expected >= 0; 0 = the default 1e-3)",
                   (double)epsilon);
        return NULL;
    }
    ln_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->epsilon = epsilon > 0.0f ? epsilon : 1e-3f;
    c->axis = -1;
    tnt_layer *l = tnt__layer_new(&tnt__layer_normalization_ops, name, c);
    if (!l) free(c);
    return l;
}
