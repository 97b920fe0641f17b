/* loss.cu: the gradients of the built-in losses on the device (training/device_loss.c launches
 * them), so that a training step needs no host work between forward and backward. The formulas
 * are objectives/loss.c's, in double as there, with the clip range and epsilon of Keras: the
 * results equal the host's after the rounding to float (the host's libm exp and log against
 * k_exp_dd and k_log_d here, both within a few double ulps).
 *
 * Labels: y holds every sample's labels packed (ld_y floats per sample, this output's from column
 * col_y: the batch as the dataset gives it). Row r of an output with `positions` rows per sample
 * (rank > 1) is sample r / positions, position r % positions.
 *
 * Contract (kind: objectives' tnt_loss_kind numbers, K_LOSS_* below):
 *   tnt_k_loss_grad_rows(int kind, int from_logits, const float *x, const float *y, float *d, i64 rows,
 *                        i64 c, i64 positions, i64 ld_y, i64 col_y, double scale)
 *       (sparse) categorical cross-entropy, a block per row of c (blockDim <= 1024; its sums in
 *       double, in loss.c's order with one thread): d (rows, c) = scale times the gradient of
 *       the row's loss w.r.t. x (logits or probabilities). A sparse label that
 *       is not an integer in [0, c) (NaN, negative, beyond, fractional) gives a row of zeros and
 *       is read nowhere else: the host's loss value names it and the step fails before the update
 *   tnt_k_loss_grad_elems(int kind, int from_logits, const float *x, const float *y, float *d, i64 rows,
 *                         i64 c, i64 positions, i64 ld_y, i64 col_y, double scale)
 *       binary cross-entropy (probabilities or logits), mean squared and mean absolute error, one
 *       thread per value: d = scale / c times the value's gradient (MSE 2 scale / c)
 */
#include "kmath.h"

#define K_LOSS_SPARSE_CE 1
#define K_LOSS_CE 2
#define K_LOSS_BCE 3
#define K_LOSS_MSE 4
#define K_LOSS_MAE 5

/* Keras's epsilon as float32 clips: [float(1e-7), float(1) - float(1e-7)] (objectives/loss.c) */
#define K_CLIP_LO ((double)1e-7f)
#define K_CLIP_HI ((double)(1.0f - 1e-7f))
#define K_BCE_EPS 1e-7

DEV double k_clip_d(double v) { return v < K_CLIP_LO ? K_CLIP_LO : v > K_CLIP_HI ? K_CLIP_HI : v; }
DEV int k_in_clip_d(double v) { return v >= K_CLIP_LO && v <= K_CLIP_HI; }

DEV double k_bits_double(long long b) {
    union { long long i; double d; } u;
    u.i = b;
    return u.d;
}
DEV long long k_double_bits(double d) {
    union { long long i; double d; } u;
    u.d = d;
    return u.i;
}

/* exp(x) in double for any x: kmath.h's k_exp_d (range reduction and Taylor) where it is
 * defined, the limits elsewhere (NaN stays NaN, +inf and overflow give inf) */
DEV double k_exp_dd(double x) {
    if (x != x) return x;
    if (x > 709.78) return k_bits_double(0x7ff0000000000000LL);
    return k_exp_d(x);
}

/* log(x) in double: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) /
 * (m + 1), |s| < 0.172, by its series to 2e-19; e ln 2 in two parts (Cody and Waite) */
DEV double k_log_d(double x) {
    if (x != x || x < 0) return k_bits_double(0x7ff8000000000000LL);
    if (x == 0) return -k_bits_double(0x7ff0000000000000LL);
    if (x == k_bits_double(0x7ff0000000000000LL)) return x;
    int e = 0;
    if (x < 2.2250738585072014e-308) x *= 4503599627370496.0, e = -52; /* subnormal: times 2^52 */
    const long long b = k_double_bits(x);
    e += (int)((b >> 52) & 0x7ff) - 1023;
    double m = k_bits_double((b & 0x000fffffffffffffLL) | 0x3ff0000000000000LL); /* [1, 2) */
    if (m > 1.4142135623730951) m *= 0.5, e += 1;
    const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double term = s, sum = 0;
    for (int k = 0; k < 14; k++) {
        sum += term / (double)(2 * k + 1);
        term *= s2;
    }
    return (double)e * 6.93147180369123816490e-01 + ((double)e * 1.90821492927058770002e-10 + 2.0 * sum);
}

/* sample r / positions's labels of position r % positions, from column col_y of ld_y per sample */
DEV const float *k_row_labels(const float *y, i64 r, i64 positions, i64 per_position, i64 ld_y, i64 col_y) {
    return y + (r / positions) * ld_y + col_y + (r % positions) * per_position;
}

KERNEL void tnt_k_loss_grad_rows(int kind, int from_logits, const float *x, const float *y, float *d, i64 rows, i64 c,
                                 i64 positions, i64 ld_y, i64 col_y, double scale) {
    SHARED double red[K_MAX_BLOCK];
    SHARED float redf[K_MAX_BLOCK];
    const int sparse = kind == K_LOSS_SPARSE_CE;
    BLOCK_STRIDE(r, rows) { /* a block per row, its threads over the classes (one thread: loss.c's order) */
        const float *p = x + r * c, *yr = k_row_labels(y, r, positions, sparse ? 1 : c, ld_y, col_y);
        float *dr = d + r * c;
        i64 label = -1;
        if (sparse) { /* the same label for the whole block: every thread takes the same branch */
            const double v = yr[0];
            if (!(v >= 0 && v < (double)c) || v != __builtin_floor(v)) { /* loss.c's sparse_label */
                THREAD_STRIDE(j, c) dr[j] = 0.0f;
                continue;
            }
            label = (i64)v;
        }
        if (from_logits) { /* loss.c's ce_logits_row without label smoothing */
            float mf = p[0];
            THREAD_STRIDE(j, c) if (p[j] > mf) mf = p[j];
            const double mx = block_max(redf, mf);
            double se = 0, ysum = 0;
            THREAD_STRIDE(j, c) {
                se += k_exp_dd((double)p[j] - mx);
                if (!sparse && (double)yr[j] != 0) ysum += (double)yr[j];
            }
            const double lse = mx + k_log_d(block_sum_d(red, se));
            ysum = sparse ? 1.0 : block_sum_d(red, ysum);
            THREAD_STRIDE(j, c) {
                const double sm = k_exp_dd((double)p[j] - lse);
                const double yj = sparse ? (j == label ? 1.0 : 0.0) : (double)yr[j];
                dr[j] = (float)((sm * ysum - yj) * scale);
            }
        } else if (sparse) { /* sparse_ce_probs_row */
            double s = 0;
            THREAD_STRIDE(j, c) s += k_clip_d(p[j]);
            s = block_sum_d(red, s);
            const double ry = k_clip_d(p[label]);
            THREAD_STRIDE(j, c) {
                const double g = k_in_clip_d(p[j]) ? 1.0 / s - (j == label ? 1.0 / ry : 0.0) : 0.0;
                dr[j] = (float)(g * scale);
            }
        } else { /* ce_probs_row: through the normalization q = p / sum(p) */
            double s = 0, dot = 0;
            THREAD_STRIDE(j, c) s += p[j];
            s = block_sum_d(red, s);
            THREAD_STRIDE(j, c) {
                const double q = p[j] / s;
                if (k_in_clip_d(q)) dot += -(double)yr[j] / k_clip_d(q) * q;
            }
            dot = block_sum_d(red, dot);
            THREAD_STRIDE(j, c) {
                const double q = p[j] / s;
                const double g = k_in_clip_d(q) ? -(double)yr[j] / k_clip_d(q) : 0.0;
                dr[j] = (float)((g - dot) / s * scale);
            }
        }
    }
}

KERNEL void tnt_k_loss_grad_elems(int kind, int from_logits, const float *x, const float *y, float *d, i64 rows, i64 c,
                                  i64 positions, i64 ld_y, i64 col_y, double scale) {
    const double inv_c = 1.0 / (double)c;
    const double gs = kind == K_LOSS_MSE ? 2.0 * scale * inv_c : scale * inv_c;
    const i64 numel = positions * c; /* a sample's values */
    GRID_STRIDE(i, rows * c) {
        const double v = x[i], z = y[(i / numel) * ld_y + col_y + i % numel];
        if (kind == K_LOSS_BCE && from_logits) { /* sigmoid(x) - z, stable for any |x| */
            const double e = k_exp_dd(-(v < 0 ? -v : v)), sig = v >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
            d[i] = (float)((sig - z) * gs);
        } else if (kind == K_LOSS_BCE) {
            const double r = k_clip_d(v);
            d[i] = k_in_clip_d(v) ? (float)((-z / (r + K_BCE_EPS) + (1 - z) / (1 - r + K_BCE_EPS)) * gs) : 0.0f;
        } else if (kind == K_LOSS_MSE) {
            d[i] = (float)((v - z) * gs);
        } else { /* MAE: sign(x - z), 0 at 0 */
            const double e = v - z;
            d[i] = (float)(e > 0 ? gs : e < 0 ? -gs : 0.0);
        }
    }
}
