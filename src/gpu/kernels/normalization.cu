/* normalization.cu: BatchNormalization and LayerNormalization forward and backward, the formulas
 * and double accumulations of layers/normalization/batch_norm.c and layer_norm.c (the sums run in
 * another order, so the results agree to about 1e-7, not bitwise).
 *
 * BatchNormalization over x seen as (rows, C, inner) with m = rows * inner values per channel
 * (inner = 1: channels last). The host sequence of a training step:
 *   tnt_k_bn_stat_sums(x, part, rows, C, inner, chunk) -> tnt_k_bn_stats(x, part, chunks, C, inner, ...)
 * inference: tnt_k_bn_moving_stats; then tnt_k_bn_apply. Backward: tnt_k_bn_grad_sums ->
 * tnt_k_bn_grad_finish -> tnt_k_bn_dx.
 *
 * Layout (why it is fast): a block works on a tile of tw channels x `chunk` values per channel with
 * BN_LANES (256) lanes: lane t takes channel c0 + t % tw and the values g, g + G, g + 2G, ... of the
 * chunk (g = t / tw, G = 256 / tw groups). Channels last (inner 1): tw = min(32, C rounded up to a
 * power of 2), so a warp reads whole rows of 32 channels (coalesced), the index advances by G C
 * per value (no division per value) and each lane keeps its channel's constants in registers;
 * channels first (inner > 1): tw = 1, a warp reads 32 neighbouring cells of one channel. The lanes
 * are virtual (THREAD_STRIDE over 256 lanes, then a fixed tree over the groups), so the sums are
 * the same bits for any blockDim: the host build (one thread), K_HOST_THREADS and the GPU agree.
 * The statistics read x once: sums of d = x - x0 and d^2 in double with x0 the channel's first
 * value (a shift that keeps sum d^2 - (sum d)^2 / m from cancelling), merged over chunks in a
 * fixed order (8 serial groups of chunks, then a tree).
 *
 * Contract (gamma, beta NULL: ones, zeros; relu: an Activation("relu") folded in, as the CPU's;
 * chunk: values per channel in a tile of the sums, any > 0; chunks = ceil(m / chunk)):
 *   tnt_k_bn_stat_sums(const float *x, double *part, i64 rows, i64 C, i64 inner, i64 chunk)
 *       part (chunks, 2, C): per chunk, the sums of d and of d^2 in double, d = x - x0[c],
 *       x0[c] = x[c inner] (the channel's first value)
 *   tnt_k_bn_stats(const float *x, const double *part, i64 chunks, i64 C, i64 inner, float *mean_f,
 *                  float *inv_std, float *moving_mean, float *moving_var, double M, double momentum,
 *                  double eps)
 *       S1, S2 = the sums over chunks; mean = x0 + S1 / M, sq = S2 - S1^2 / M (the squared
 *       deviations), inv_std = 1 / sqrt(sq / M + eps); moving = moving * momentum + stat *
 *       (1 - momentum) with the unbiased variance sq / (M - 1) (M > 1)
 *   tnt_k_bn_moving_stats(const float *moving_mean, const float *moving_var, float *mean_f, float *inv_std,
 *                         i64 C, double eps)
 *   tnt_k_bn_apply(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
 *                  const float *inv_std, i64 rows, i64 C, i64 inner, int relu)
 *       y = gamma (x - mean) inv_std + beta (y may be x); any grid (about numel / 4096 blocks fill it)
 *   tnt_k_bn_grad_sums(const float *x, const float *dy, const float *y, const float *mean,
 *                      const float *inv_std, double *part, i64 rows, i64 C, i64 inner, i64 chunk, int relu)
 *       part (chunks, 2, C): sums of g and g xhat, g = dy (relu: where y > 0; y is read only then)
 *   tnt_k_bn_grad_finish(const double *part, i64 chunks, i64 C, float *dgamma, float *dbeta,
 *                        float *mean_g, float *mean_gx, double M, int batch_stats)
 *       dgamma, dbeta (either NULL: not wanted) = the sums; mean_g, mean_gx (NULL: not wanted) =
 *       the sums / M with batch statistics, else 0
 *   tnt_k_bn_dx(const float *x, const float *dy, const float *y, const float *gamma, const float *mean,
 *               const float *inv_std, const float *mean_g, const float *mean_gx, float *dx,
 *               i64 rows, i64 C, i64 inner, int relu)
 *       dx = gamma inv_std (g - mean_g - xhat mean_gx); any grid, as tnt_k_bn_apply
 * LayerNormalization over the last axis, x: (rows, C), stats: (2, rows) doubles (mean, 1/std):
 *   tnt_k_ln_fwd(const float *x, float *y, const float *gamma, const float *beta, double *stats,
 *                i64 rows, i64 C, double eps)           one block per row, blockDim <= 1024
 *   tnt_k_ln_param_sums(const float *x, const double *stats, const float *dy, double *part, i64 rows,
 *                       i64 C, i64 chunk)
 *       part (chunks of `chunk` rows, 2, C): the sums of dy and dy xhat per column in double, in the
 *       tiles of the BatchNormalization sums (columns across lanes); then tnt_k_bn_grad_finish(part,
 *       chunks, C, dgamma, dbeta, NULL, NULL, 0, 0) gives dgamma, dbeta (either NULL: not wanted)
 *   tnt_k_ln_bwd_dx(const float *x, const float *dy, const float *gamma, const double *stats, float *dx,
 *                   i64 rows, i64 C)                    one block per row, blockDim <= 1024
 */
#include "kmath.h"

#define BN_LANES 256      /* virtual lanes of a tile (blockDim 256 gives one each) */
#define BN_APPLY_VALUES 16 /* values per lane in a tile of tnt_k_bn_apply and tnt_k_bn_dx */
#define BN_FIN_WIDTH 32   /* channels per block in the merges over chunks (8 groups of chunks) */
/* values a lane of the sums loads before adding them (in order): more loads in flight against
 * more registers (ptxas sm_90: tnt_k_bn_stat_sums 48 registers at 8; tnt_k_bn_grad_sums 64 at 4,
 * 102 at 8, which would halve the blocks an SM holds) */
#ifndef BN_STAT_UNROLL
#define BN_STAT_UNROLL 8
#endif
#ifndef BN_GRAD_UNROLL
#define BN_GRAD_UNROLL 4
#endif

/* channels per tile: a power of 2 up to 32 along the channels when they are the last axis */
DEV int bn_tile_width(i64 C, i64 inner) {
    int w = 1;
    while (inner == 1 && w < 32 && w < C) w *= 2;
    return w;
}
DEV int bn_log2(int w) {
    int s = 0;
    while ((1 << s) < w) s++;
    return s;
}

/* The lanes of one tile: channel k, first value v (of the chunk [v0, v1)), values apart `groups`. */
typedef struct bn_lane {
    i64 k, v, v1;
    int groups;
} bn_lane;
DEV bn_lane bn_lane_of(int t, int tw, int lg, i64 c0, i64 v0, i64 v1) {
    bn_lane a;
    a.k = c0 + (t & (tw - 1));
    a.v = v0 + (t >> lg);
    a.v1 = v1;
    a.groups = BN_LANES >> lg;
    return a;
}
/* index of value v of channel k (inner > 1 only: one division per lane and tile) */
DEV i64 bn_index(i64 v, i64 k, i64 C, i64 inner) { return (v / inner * C + k) * inner + v % inner; }
/* the next index of a lane (inner > 1): `groups` values on, carrying into the next row */
DEV i64 bn_advance(i64 idx, i64 *j, int groups, i64 C, i64 inner) {
    idx += groups, *j += groups;
    while (*j >= inner) *j -= inner, idx += (C - 1) * inner;
    return idx;
}

/* Sums over the lanes' groups, a fixed tree: red[t] for t < tw are the tile's channel sums. All
 * threads of the block call it. */
DEV void bn_tree2(double *r1, double *r2, int tw, int groups) {
    SYNC();
    for (int h = groups / 2; h >= 1; h /= 2) {
        for (int t = TID_X; t < h * tw; t += NTID_X) r1[t] += r1[t + h * tw], r2[t] += r2[t + h * tw];
        SYNC();
    }
}

DEV void bn_stat_add(double *s1, double *s2, float xv, double x0) {
    const double d = (double)xv - x0;
    *s1 += d;
    *s2 += d * d;
}

KERNEL void tnt_k_bn_stat_sums(const float *x, double *part, i64 rows, i64 C, i64 inner, i64 chunk) {
    SHARED double r1[BN_LANES], r2[BN_LANES];
    const int tw = bn_tile_width(C, inner), lg = bn_log2(tw), groups = BN_LANES / tw;
    const i64 m = rows * inner, chunks = (m + chunk - 1) / chunk, ctiles = (C + tw - 1) / tw;
    BLOCK_STRIDE(tile, chunks * ctiles) {
        const i64 q = tile / ctiles, c0 = (tile - q * ctiles) * tw;
        const i64 v0 = q * chunk, v1 = v0 + chunk < m ? v0 + chunk : m;
        for (int t = TID_X; t < BN_LANES; t += NTID_X) {
            bn_lane a = bn_lane_of(t, tw, lg, c0, v0, v1);
            double s1 = 0.0, s2 = 0.0;
            if (a.k < C) {
                const double x0 = x[a.k * inner];
                if (inner == 1) {
                    const i64 step = a.groups * C;
                    const float *p = x + a.v * C + a.k;
                    for (; a.v + (BN_STAT_UNROLL - 1) * a.groups < a.v1;
                         a.v += BN_STAT_UNROLL * a.groups, p += BN_STAT_UNROLL * step) {
                        float e[BN_STAT_UNROLL]; /* the loads first: BN_STAT_UNROLL in flight */
                        for (int u = 0; u < BN_STAT_UNROLL; u++) e[u] = p[u * step];
                        for (int u = 0; u < BN_STAT_UNROLL; u++) bn_stat_add(&s1, &s2, e[u], x0);
                    }
                    for (; a.v < a.v1; a.v += a.groups, p += step) bn_stat_add(&s1, &s2, *p, x0);
                } else if (a.v < a.v1) {
                    i64 j = a.v % inner, idx = bn_index(a.v, a.k, C, inner);
                    for (; a.v < a.v1; a.v += a.groups, idx = bn_advance(idx, &j, a.groups, C, inner))
                        bn_stat_add(&s1, &s2, x[idx], x0);
                }
            }
            r1[t] = s1, r2[t] = s2;
        }
        bn_tree2(r1, r2, tw, groups);
        for (int t = TID_X; t < tw && c0 + t < C; t += NTID_X)
            part[q * 2 * C + c0 + t] = r1[t], part[q * 2 * C + C + c0 + t] = r2[t];
        SYNC();
    }
}

/* The sums over chunks of part (chunks, 2, C) for the channels [c0, c0 + 32): lane t adds the
 * chunks t / 32, t / 32 + 8, ... of channel c0 + t % 32; then the tree. r1, r2[t < 32] hold them. */
DEV void bn_merge_chunks(double *r1, double *r2, const double *part, i64 chunks, i64 C, i64 c0) {
    for (int t = TID_X; t < BN_LANES; t += NTID_X) {
        const i64 k = c0 + (t & (BN_FIN_WIDTH - 1));
        double s1 = 0.0, s2 = 0.0;
        if (k < C)
            for (i64 q = t / BN_FIN_WIDTH; q < chunks; q += BN_LANES / BN_FIN_WIDTH)
                s1 += part[q * 2 * C + k], s2 += part[q * 2 * C + C + k];
        r1[t] = s1, r2[t] = s2;
    }
    bn_tree2(r1, r2, BN_FIN_WIDTH, BN_LANES / BN_FIN_WIDTH);
}

KERNEL void tnt_k_bn_stats(const float *x, const double *part, i64 chunks, i64 C, i64 inner, float *mean_f,
                           float *inv_std, float *moving_mean, float *moving_var, double M, double momentum,
                           double eps) {
    SHARED double r1[BN_LANES], r2[BN_LANES];
    BLOCK_STRIDE(tile, (C + BN_FIN_WIDTH - 1) / BN_FIN_WIDTH) {
        const i64 c0 = tile * BN_FIN_WIDTH;
        bn_merge_chunks(r1, r2, part, chunks, C, c0);
        for (int t = TID_X; t < BN_FIN_WIDTH && c0 + t < C; t += NTID_X) {
            const i64 k = c0 + t;
            const double mean = (double)x[k * inner] + r1[t] / M, dev = r2[t] - r1[t] * r1[t] / M;
            const double sq = dev > 0.0 ? dev : 0.0, var = sq / M, unbiased = M > 1 ? sq / (M - 1) : var;
            mean_f[k] = (float)mean;
            inv_std[k] = (float)(1.0 / __builtin_sqrt(var + eps));
            moving_mean[k] = (float)(moving_mean[k] * momentum + mean * (1.0 - momentum));
            moving_var[k] = (float)(moving_var[k] * momentum + unbiased * (1.0 - momentum));
        }
        SYNC();
    }
}

KERNEL void tnt_k_bn_moving_stats(const float *moving_mean, const float *moving_var, float *mean_f, float *inv_std,
                                  i64 C, double eps) {
    GRID_STRIDE(k, C) {
        mean_f[k] = moving_mean[k];
        inv_std[k] = (float)(1.0 / __builtin_sqrt((double)moving_var[k] + eps));
    }
}

/* The tiles of an elementwise kernel (apply, dx): BN_APPLY_VALUES values per lane; `a` is this
 * lane's share of `tile`, skipped past the last channel. */
#define BN_ELEMENTWISE_LANES(a)                                                                         \
    const int tw = bn_tile_width(C, inner), lg = bn_log2(tw), groups = BN_LANES / tw;                   \
    const i64 m = rows * inner, chunk = (i64)groups * BN_APPLY_VALUES, ctiles = (C + tw - 1) / tw;      \
    BLOCK_STRIDE(tile, (m + chunk - 1) / chunk * ctiles) {                                              \
        const i64 q = tile / ctiles, c0 = (tile - q * ctiles) * tw, v0 = q * chunk;                     \
        for (int t = TID_X; t < BN_LANES; t += NTID_X) {                                                \
            bn_lane a = bn_lane_of(t, tw, lg, c0, v0, v0 + chunk < m ? v0 + chunk : m);                  \
            if (a.k >= C) continue;
#define BN_ELEMENTWISE_END \
        }                  \
    }

DEV float bn_apply1(float xv, float g, float b, float mk, float sk, int relu) {
    const float v = g * (xv - mk) * sk + b;
    return relu && !(v > 0.0f) ? 0.0f : v;
}

KERNEL void tnt_k_bn_apply(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
                           const float *inv_std, i64 rows, i64 C, i64 inner, int relu) {
    BN_ELEMENTWISE_LANES(a)
        const float g = gamma ? gamma[a.k] : 1.0f, b = beta ? beta[a.k] : 0.0f, mk = mean[a.k], sk = inv_std[a.k];
        if (inner == 1) {
            const i64 step = a.groups * C;
            i64 i = a.v * C + a.k;
            for (; a.v + 3 * a.groups < a.v1; a.v += 4 * a.groups, i += 4 * step) {
                const float e0 = x[i], e1 = x[i + step], e2 = x[i + 2 * step], e3 = x[i + 3 * step];
                y[i] = bn_apply1(e0, g, b, mk, sk, relu);
                y[i + step] = bn_apply1(e1, g, b, mk, sk, relu);
                y[i + 2 * step] = bn_apply1(e2, g, b, mk, sk, relu);
                y[i + 3 * step] = bn_apply1(e3, g, b, mk, sk, relu);
            }
            for (; a.v < a.v1; a.v += a.groups, i += step) y[i] = bn_apply1(x[i], g, b, mk, sk, relu);
        } else if (a.v < a.v1) {
            i64 j = a.v % inner, i = bn_index(a.v, a.k, C, inner);
            for (; a.v < a.v1; a.v += a.groups, i = bn_advance(i, &j, a.groups, C, inner))
                y[i] = bn_apply1(x[i], g, b, mk, sk, relu);
        }
    BN_ELEMENTWISE_END
}

DEV void bn_grad_add(double *sb, double *sg, float dyv, float yv, float xv, float mk, float s, int relu) {
    const float g = relu ? (yv > 0.0f ? dyv : 0.0f) : dyv;
    *sb += g;
    *sg += g * (xv - mk) * s;
}

KERNEL void tnt_k_bn_grad_sums(const float *x, const float *dy, const float *y, const float *mean,
                               const float *inv_std, double *part, i64 rows, i64 C, i64 inner, i64 chunk, int relu) {
    SHARED double r1[BN_LANES], r2[BN_LANES];
    const int tw = bn_tile_width(C, inner), lg = bn_log2(tw), groups = BN_LANES / tw;
    const i64 m = rows * inner, chunks = (m + chunk - 1) / chunk, ctiles = (C + tw - 1) / tw;
    BLOCK_STRIDE(tile, chunks * ctiles) {
        const i64 q = tile / ctiles, c0 = (tile - q * ctiles) * tw;
        const i64 v0 = q * chunk, v1 = v0 + chunk < m ? v0 + chunk : m;
        for (int t = TID_X; t < BN_LANES; t += NTID_X) {
            bn_lane a = bn_lane_of(t, tw, lg, c0, v0, v1);
            double sb = 0.0, sg = 0.0;
            if (a.k < C) {
                const float mk = mean[a.k], s = inv_std[a.k];
                if (inner == 1) {
                    const i64 step = a.groups * C;
                    i64 i = a.v * C + a.k;
                    for (; a.v + (BN_GRAD_UNROLL - 1) * a.groups < a.v1;
                         a.v += BN_GRAD_UNROLL * a.groups, i += BN_GRAD_UNROLL * step) {
                        float d[BN_GRAD_UNROLL], e[BN_GRAD_UNROLL], f[BN_GRAD_UNROLL];
                        for (int u = 0; u < BN_GRAD_UNROLL; u++)
                            d[u] = dy[i + u * step], e[u] = x[i + u * step], f[u] = relu ? y[i + u * step] : 0.0f;
                        for (int u = 0; u < BN_GRAD_UNROLL; u++) bn_grad_add(&sb, &sg, d[u], f[u], e[u], mk, s, relu);
                    }
                    for (; a.v < a.v1; a.v += a.groups, i += step)
                        bn_grad_add(&sb, &sg, dy[i], relu ? y[i] : 0.0f, x[i], mk, s, relu);
                } else if (a.v < a.v1) {
                    i64 j = a.v % inner, i = bn_index(a.v, a.k, C, inner);
                    for (; a.v < a.v1; a.v += a.groups, i = bn_advance(i, &j, a.groups, C, inner))
                        bn_grad_add(&sb, &sg, dy[i], relu ? y[i] : 0.0f, x[i], mk, s, relu);
                }
            }
            r1[t] = sb, r2[t] = sg;
        }
        bn_tree2(r1, r2, tw, groups);
        for (int t = TID_X; t < tw && c0 + t < C; t += NTID_X)
            part[q * 2 * C + c0 + t] = r1[t], part[q * 2 * C + C + c0 + t] = r2[t];
        SYNC();
    }
}

KERNEL void tnt_k_bn_grad_finish(const double *part, i64 chunks, i64 C, float *dgamma, float *dbeta, float *mean_g,
                                 float *mean_gx, double M, int batch_stats) {
    SHARED double r1[BN_LANES], r2[BN_LANES];
    BLOCK_STRIDE(tile, (C + BN_FIN_WIDTH - 1) / BN_FIN_WIDTH) {
        const i64 c0 = tile * BN_FIN_WIDTH;
        bn_merge_chunks(r1, r2, part, chunks, C, c0);
        for (int t = TID_X; t < BN_FIN_WIDTH && c0 + t < C; t += NTID_X) {
            const i64 k = c0 + t;
            const double sb = r1[t], sg = r2[t];
            if (dgamma) dgamma[k] = (float)sg;
            if (dbeta) dbeta[k] = (float)sb;
            if (mean_g) mean_g[k] = batch_stats && M > 0 ? (float)(sb / M) : 0.0f;
            if (mean_gx) mean_gx[k] = batch_stats && M > 0 ? (float)(sg / M) : 0.0f;
        }
        SYNC();
    }
}

DEV float bn_dx1(float dyv, float yv, float xv, float gm, float mk, float sk, float mg, float mgx, int relu) {
    const float g = relu ? (yv > 0.0f ? dyv : 0.0f) : dyv;
    const float xhat = (xv - mk) * sk;
    return gm * sk * (g - mg - xhat * mgx);
}

KERNEL void tnt_k_bn_dx(const float *x, const float *dy, const float *y, const float *gamma, const float *mean,
                        const float *inv_std, const float *mean_g, const float *mean_gx, float *dx, i64 rows, i64 C,
                        i64 inner, int relu) {
    BN_ELEMENTWISE_LANES(a)
        const float gm = gamma ? gamma[a.k] : 1.0f, mk = mean[a.k], sk = inv_std[a.k], mg = mean_g[a.k];
        const float mgx = mean_gx[a.k];
        if (inner == 1) {
            const i64 step = a.groups * C;
            i64 i = a.v * C + a.k;
            for (; a.v + 3 * a.groups < a.v1; a.v += 4 * a.groups, i += 4 * step) {
                const float d0 = dy[i], d1 = dy[i + step], d2 = dy[i + 2 * step], d3 = dy[i + 3 * step];
                const float x0 = x[i], x1 = x[i + step], x2 = x[i + 2 * step], x3 = x[i + 3 * step];
                const float y0 = relu ? y[i] : 0.0f, y1 = relu ? y[i + step] : 0.0f;
                const float y2 = relu ? y[i + 2 * step] : 0.0f, y3 = relu ? y[i + 3 * step] : 0.0f;
                dx[i] = bn_dx1(d0, y0, x0, gm, mk, sk, mg, mgx, relu);
                dx[i + step] = bn_dx1(d1, y1, x1, gm, mk, sk, mg, mgx, relu);
                dx[i + 2 * step] = bn_dx1(d2, y2, x2, gm, mk, sk, mg, mgx, relu);
                dx[i + 3 * step] = bn_dx1(d3, y3, x3, gm, mk, sk, mg, mgx, relu);
            }
            for (; a.v < a.v1; a.v += a.groups, i += step)
                dx[i] = bn_dx1(dy[i], relu ? y[i] : 0.0f, x[i], gm, mk, sk, mg, mgx, relu);
        } else if (a.v < a.v1) {
            i64 j = a.v % inner, i = bn_index(a.v, a.k, C, inner);
            for (; a.v < a.v1; a.v += a.groups, i = bn_advance(i, &j, a.groups, C, inner))
                dx[i] = bn_dx1(dy[i], relu ? y[i] : 0.0f, x[i], gm, mk, sk, mg, mgx, relu);
        }
    BN_ELEMENTWISE_END
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

DEV void ln_param_add(double *sb, double *sg, float d, float xv, double mu, double rs) {
    *sb += d;
    *sg += d * ((xv - mu) * rs);
}

KERNEL void tnt_k_ln_param_sums(const float *x, const double *stats, const float *dy, double *part, i64 rows, i64 C,
                                i64 chunk) {
    SHARED double r1[BN_LANES], r2[BN_LANES];
    const int tw = bn_tile_width(C, 1), lg = bn_log2(tw), groups = BN_LANES / tw;
    const i64 chunks = (rows + chunk - 1) / chunk, ctiles = (C + tw - 1) / tw;
    BLOCK_STRIDE(tile, chunks * ctiles) {
        const i64 q = tile / ctiles, c0 = (tile - q * ctiles) * tw;
        const i64 v0 = q * chunk, v1 = v0 + chunk < rows ? v0 + chunk : rows;
        for (int t = TID_X; t < BN_LANES; t += NTID_X) {
            bn_lane a = bn_lane_of(t, tw, lg, c0, v0, v1);
            double sb = 0.0, sg = 0.0;
            if (a.k < C) {
                const i64 step = a.groups * C;
                i64 i = a.v * C + a.k;
                for (; a.v + 3 * a.groups < a.v1; a.v += 4 * a.groups, i += 4 * step) {
                    float d[4], e[4];
                    double mu[4], rs[4];
                    for (int u = 0; u < 4; u++) {
                        d[u] = dy[i + u * step], e[u] = x[i + u * step];
                        mu[u] = stats[a.v + u * a.groups], rs[u] = stats[rows + a.v + u * a.groups];
                    }
                    for (int u = 0; u < 4; u++) ln_param_add(&sb, &sg, d[u], e[u], mu[u], rs[u]);
                }
                for (; a.v < a.v1; a.v += a.groups, i += step)
                    ln_param_add(&sb, &sg, dy[i], x[i], stats[a.v], stats[rows + a.v]);
            }
            r1[t] = sb, r2[t] = sg;
        }
        bn_tree2(r1, r2, tw, groups);
        for (int t = TID_X; t < tw && c0 + t < C; t += NTID_X)
            part[q * 2 * C + c0 + t] = r1[t], part[q * 2 * C + C + c0 + t] = r2[t];
        SYNC();
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
