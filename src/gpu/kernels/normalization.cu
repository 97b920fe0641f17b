/* normalization.cu: BatchNormalization and LayerNormalization forward and backward, the formulas
 * and double accumulations of layers/normalization/batch_norm.c and layer_norm.c (the sums run in
 * another order, so the results agree to about 1e-7, not bitwise).
 *
 * BatchNormalization over x seen as (rows, C, inner) with m = rows * inner values per channel
 * (inner = 1: channels last). The host sequence of a training step:
 *   tnt_k_bn_sums(x, NULL, part, rows, C, inner, chunk)  -> tnt_k_sum_chunks_d(part, sum, chunks, C, 1 / M)
 *   tnt_k_bn_sums(x, mean, part, ...)                    -> tnt_k_sum_chunks_d(part, sq, chunks, C, 1)
 *   tnt_k_bn_train_stats(sum, sq, mean_f, inv_std, mmean, mvar, C, M, momentum, eps)
 * (SyncBatchNormalization: sums with scale 1, allreduced through the host, then scaled by 1/M);
 * inference: tnt_k_bn_moving_stats; then tnt_k_bn_apply. Backward: tnt_k_bn_grad_sums ->
 * tnt_k_bn_grad_finish -> tnt_k_bn_dx.
 *
 * Contract (gamma, beta NULL: ones, zeros; relu: an Activation("relu") folded in, as the CPU's):
 *   tnt_k_bn_sums(const float *x, const double *mean, double *part, i64 rows, i64 C, i64 inner, i64 chunk)
 *       part (chunks, C): per chunk of `chunk` values per channel, the sum of x (mean NULL) or of
 *       (x - mean)^2 in double; chunks = ceil(m / chunk)
 *   tnt_k_sum_chunks_d(const double *part, double *out, i64 chunks, i64 C, double scale)
 *       out[c] = scale * sum over chunks of part[k][c], in chunk order
 *   tnt_k_bn_train_stats(const double *mean, const double *sq, float *mean_f, float *inv_std,
 *                        float *moving_mean, float *moving_var, i64 C, double M, double momentum, double eps)
 *       inv_std = 1 / sqrt(sq / M + eps); moving = moving * momentum + stat * (1 - momentum) with
 *       the unbiased variance sq / (M - 1) (M > 1)
 *   tnt_k_bn_moving_stats(const float *moving_mean, const float *moving_var, float *mean_f, float *inv_std,
 *                         i64 C, double eps)
 *   tnt_k_bn_apply(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
 *                  const float *inv_std, i64 rows, i64 C, i64 inner, int relu)
 *       y = gamma (x - mean) inv_std + beta
 *   tnt_k_bn_grad_sums(const float *x, const float *dy, const float *y, const float *mean,
 *                      const float *inv_std, double *part, i64 rows, i64 C, i64 inner, i64 chunk, int relu)
 *       part (chunks, 2, C): sums of g and g xhat, g = dy (relu: where y > 0)
 *   tnt_k_bn_grad_finish(const double *part, i64 chunks, i64 C, float *dgamma, float *dbeta,
 *                        float *mean_g, float *mean_gx, double M, int batch_stats)
 *       dgamma, dbeta (either NULL: not wanted) = the sums; mean_g, mean_gx = the sums / M with
 *       batch statistics, else 0
 *   tnt_k_bn_dx(const float *x, const float *dy, const float *y, const float *gamma, const float *mean,
 *               const float *inv_std, const float *mean_g, const float *mean_gx, float *dx,
 *               i64 rows, i64 C, i64 inner, int relu)
 *       dx = gamma inv_std (g - mean_g - xhat mean_gx)
 * LayerNormalization over the last axis, x: (rows, C), stats: (2, rows) doubles (mean, 1/std):
 *   tnt_k_ln_fwd(const float *x, float *y, const float *gamma, const float *beta, double *stats,
 *                i64 rows, i64 C, double eps)           one block per row, blockDim <= 1024
 *   tnt_k_ln_bwd_params(const float *x, const float *dy, const double *stats, float *dgamma, float *dbeta,
 *                       i64 rows, i64 C)                one thread per column, rows in order (either NULL)
 *   tnt_k_ln_bwd_dx(const float *x, const float *dy, const float *gamma, const double *stats, float *dx,
 *                   i64 rows, i64 C)                    one block per row, blockDim <= 1024
 */
#include "kmath.h"

/* value v (0..m) of channel k in x seen as (rows, C, inner) */
DEV i64 k_bn_index(i64 v, i64 k, i64 C, i64 inner) { return (v / inner * C + k) * inner + v % inner; }

KERNEL void tnt_k_bn_sums(const float *x, const double *mean, double *part, i64 rows, i64 C, i64 inner, i64 chunk) {
    const i64 m = rows * inner, chunks = (m + chunk - 1) / chunk;
    GRID_STRIDE(i, chunks * C) {
        const i64 q = i / C, k = i % C, v1 = (q + 1) * chunk < m ? (q + 1) * chunk : m;
        double s = 0.0;
        if (mean) {
            const double mk = mean[k];
            for (i64 v = q * chunk; v < v1; v++) {
                const double d = x[k_bn_index(v, k, C, inner)] - mk;
                s += d * d;
            }
        } else {
            for (i64 v = q * chunk; v < v1; v++) s += x[k_bn_index(v, k, C, inner)];
        }
        part[i] = s;
    }
}

KERNEL void tnt_k_sum_chunks_d(const double *part, double *out, i64 chunks, i64 C, double scale) {
    GRID_STRIDE(k, C) {
        double s = 0.0;
        for (i64 q = 0; q < chunks; q++) s += part[q * C + k];
        out[k] = s * scale;
    }
}

KERNEL void tnt_k_bn_train_stats(const double *mean, const double *sq, float *mean_f, float *inv_std,
                                 float *moving_mean, float *moving_var, i64 C, double M, double momentum, double eps) {
    GRID_STRIDE(k, C) {
        const double var = sq[k] / M, unbiased = M > 1 ? sq[k] / (M - 1) : var;
        mean_f[k] = (float)mean[k];
        inv_std[k] = (float)(1.0 / __builtin_sqrt(var + eps));
        moving_mean[k] = (float)(moving_mean[k] * momentum + mean[k] * (1.0 - momentum));
        moving_var[k] = (float)(moving_var[k] * momentum + unbiased * (1.0 - momentum));
    }
}

KERNEL void tnt_k_bn_moving_stats(const float *moving_mean, const float *moving_var, float *mean_f, float *inv_std,
                                  i64 C, double eps) {
    GRID_STRIDE(k, C) {
        mean_f[k] = moving_mean[k];
        inv_std[k] = (float)(1.0 / __builtin_sqrt((double)moving_var[k] + eps));
    }
}

KERNEL void tnt_k_bn_apply(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
                           const float *inv_std, i64 rows, i64 C, i64 inner, int relu) {
    GRID_STRIDE(i, rows * C * inner) {
        const i64 k = i / inner % C;
        const float g = gamma ? gamma[k] : 1.0f, b = beta ? beta[k] : 0.0f;
        const float v = g * (x[i] - mean[k]) * inv_std[k] + b;
        y[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

KERNEL void tnt_k_bn_grad_sums(const float *x, const float *dy, const float *y, const float *mean,
                               const float *inv_std, double *part, i64 rows, i64 C, i64 inner, i64 chunk, int relu) {
    const i64 m = rows * inner, chunks = (m + chunk - 1) / chunk;
    GRID_STRIDE(i, chunks * C) {
        const i64 q = i / C, k = i % C, v1 = (q + 1) * chunk < m ? (q + 1) * chunk : m;
        const float mk = mean[k], s = inv_std[k];
        double sb = 0.0, sg = 0.0;
        for (i64 v = q * chunk; v < v1; v++) {
            const i64 j = k_bn_index(v, k, C, inner);
            const float g = relu ? (y[j] > 0.0f ? dy[j] : 0.0f) : dy[j];
            sb += g;
            sg += g * (x[j] - mk) * s;
        }
        part[q * 2 * C + k] = sb;
        part[q * 2 * C + C + k] = sg;
    }
}

KERNEL void tnt_k_bn_grad_finish(const double *part, i64 chunks, i64 C, float *dgamma, float *dbeta, float *mean_g,
                                 float *mean_gx, double M, int batch_stats) {
    GRID_STRIDE(k, C) {
        double sb = 0.0, sg = 0.0;
        for (i64 q = 0; q < chunks; q++) sb += part[q * 2 * C + k], sg += part[q * 2 * C + C + k];
        if (dgamma) dgamma[k] = (float)sg;
        if (dbeta) dbeta[k] = (float)sb;
        mean_g[k] = batch_stats && M > 0 ? (float)(sb / M) : 0.0f;
        mean_gx[k] = batch_stats && M > 0 ? (float)(sg / M) : 0.0f;
    }
}

KERNEL void tnt_k_bn_dx(const float *x, const float *dy, const float *y, const float *gamma, const float *mean,
                        const float *inv_std, const float *mean_g, const float *mean_gx, float *dx, i64 rows, i64 C,
                        i64 inner, int relu) {
    GRID_STRIDE(i, rows * C * inner) {
        const i64 k = i / inner % C;
        const float g = relu ? (y[i] > 0.0f ? dy[i] : 0.0f) : dy[i];
        const float xhat = (x[i] - mean[k]) * inv_std[k];
        dx[i] = (gamma ? gamma[k] : 1.0f) * inv_std[k] * (g - mean_g[k] - xhat * mean_gx[k]);
    }
}

KERNEL void tnt_k_ln_fwd(const float *x, float *y, const float *gamma, const float *beta, double *stats, i64 rows,
                         i64 C, double eps) {
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        double s = 0.0;
        THREAD_STRIDE(k, C) s += xr[k];
        const double mu = block_sum_d(red, s) / (double)C;
        double sq = 0.0;
        THREAD_STRIDE(k, C) {
            const double d = xr[k] - mu;
            sq += d * d;
        }
        const double rs = 1.0 / __builtin_sqrt(block_sum_d(red, sq) / (double)C + eps);
        if (TID_X == 0) stats[r] = mu, stats[rows + r] = rs;
        const float muf = (float)mu, rf = (float)rs;
        THREAD_STRIDE(k, C) yr[k] = (xr[k] - muf) * rf * (gamma ? gamma[k] : 1.0f) + (beta ? beta[k] : 0.0f);
    }
}

KERNEL void tnt_k_ln_bwd_params(const float *x, const float *dy, const double *stats, float *dgamma, float *dbeta,
                                i64 rows, i64 C) {
    GRID_STRIDE(k, C) {
        double sg = 0.0, sb = 0.0;
        for (i64 r = 0; r < rows; r++) {
            const float d = dy[r * C + k];
            sb += d;
            sg += d * ((x[r * C + k] - stats[r]) * stats[rows + r]);
        }
        if (dgamma) dgamma[k] = (float)sg;
        if (dbeta) dbeta[k] = (float)sb;
    }
}

KERNEL void tnt_k_ln_bwd_dx(const float *x, const float *dy, const float *gamma, const double *stats, float *dx,
                            i64 rows, i64 C) {
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(r, rows) {
        const float *xr = x + r * C, *dr = dy + r * C;
        float *dxr = dx + r * C;
        const double mu = stats[r], rs = stats[rows + r];
        double sg = 0.0, sgx = 0.0;
        THREAD_STRIDE(k, C) {
            const double g = (double)dr[k] * (gamma ? gamma[k] : 1.0f);
            sg += g;
            sgx += g * ((xr[k] - mu) * rs);
        }
        const float mg = (float)(block_sum_d(red, sg) / (double)C), mgx = (float)(block_sum_d(red, sgx) / (double)C);
        const float muf = (float)mu, rf = (float)rs;
        THREAD_STRIDE(k, C) {
            const float xhat = (xr[k] - muf) * rf;
            dxr[k] = rf * (dr[k] * (gamma ? gamma[k] : 1.0f) - mg - xhat * mgx);
        }
    }
}
