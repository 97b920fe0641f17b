/* elementwise.cu: fill, copy, scale, add, axpy, the bias of Dense and Conv (NHWC: the channel is
 * the last axis) and its gradient, clipping, sums of squares, float <-> bf16.
 *
 * Contract (name: arguments; n, rows, cols are element counts; any grid and block unless said):
 *   tnt_k_fill(float *y, i64 n, float value)                     y = value
 *   tnt_k_copy(const float *x, float *y, i64 n)                  y = x
 *   tnt_k_scale(const float *x, float *y, i64 n, float a)        y = a x        (y may be x)
 *   tnt_k_add(const float *a, const float *b, float *y, i64 n)   y = a + b      (y may be a or b)
 *   tnt_k_axpy(const float *x, float *y, i64 n, float a)         y = y + a x
 *   tnt_k_axpby(const float *x, float *y, i64 n, float a, float b)  y = a x + b y
 *   tnt_k_mul(const float *a, const float *b, float *y, i64 n)   y = a b
 *   tnt_k_sub(const float *a, const float *b, float *y, i64 n)   y = a - b
 *   tnt_k_div(const float *x, float *y, i64 n, float d)          y = x / d (Average's, as the CPU's)
 *   tnt_k_affine(const float *x, float *y, i64 n, float a, float b)   y = x a + b (Rescaling)
 *   tnt_k_bias_add(float *y, const float *bias, i64 rows, i64 cols)      y[r][c] += bias[c]
 *   tnt_k_bias_set(float *y, const float *bias, i64 rows, i64 cols)      y[r][c] = bias[c]
 *   tnt_k_col_sums(const float *x, float *out, i64 rows, i64 cols)       out[c] = sum over r of
 *       x[r][c] in double, in a fixed order whatever the grid and block (tiles of up to 32 columns x
 *       256 / that lane groups: each group adds rows g, g + groups, ... in order, then a tree over
 *       the groups); any grid (ceil(cols / 32) blocks fill it)
 *   tnt_k_col_sums_partial(const float *x, float *partial, i64 rows, i64 cols, i64 chunk)
 *       partial[k][c] = sum of rows [k chunk, (k+1) chunk) in row order (float); for tall inputs
 *       (Conv's bias: rows = N H W) followed by tnt_k_col_sums(partial, out, ceil(rows / chunk), cols)
 *   tnt_k_clip(const float *x, float *y, i64 n, float c)         y = clip(x, -c, c), NaN stays NaN
 *   tnt_k_sum_squares_partial(const float *x, float *partial, i64 n)  partial[block] = sum of the
 *       squares this block visits (double inside; blockDim <= 1024); the caller
 *       adds the grid's partials (clipnorm, global_clipnorm)
 *   tnt_k_l1l2_grad(const float *v, float *g, i64 n, float a, float b)
 *       g += a sign(v) + b v (sign(0) = 0): the L1/L2 weight penalty's gradient as
 *       layers/regularizer.c, a = (float)(scale l1), b = (float)(scale 2 l2)
 *   tnt_k_l1l2_sums_partial(const float *v, double *partial, i64 n)    partial[2 block] = the sum
 *       of |v|, partial[2 block + 1] = the sum of v^2 this block visits, in double (the penalty is
 *       l1 s1 + l2 s2 over the grid's partials)
 *   tnt_k_f32_to_bf16(const float *x, unsigned short *y, i64 n)  round to nearest even, NaN quiet,
 *       as kernels/bf16.c
 *   tnt_k_bf16_to_f32(const unsigned short *x, float *y, i64 n)
 */
#include "kmath.h"

KERNEL void tnt_k_fill(float *y, i64 n, float value) { GRID_STRIDE(i, n) y[i] = value; }
KERNEL void tnt_k_copy(const float *x, float *y, i64 n) { GRID_STRIDE(i, n) y[i] = x[i]; }
KERNEL void tnt_k_scale(const float *x, float *y, i64 n, float a) { GRID_STRIDE(i, n) y[i] = a * x[i]; }
KERNEL void tnt_k_add(const float *a, const float *b, float *y, i64 n) { GRID_STRIDE(i, n) y[i] = a[i] + b[i]; }
KERNEL void tnt_k_axpy(const float *x, float *y, i64 n, float a) { GRID_STRIDE(i, n) y[i] = y[i] + a * x[i]; }
KERNEL void tnt_k_axpby(const float *x, float *y, i64 n, float a, float b) {
    GRID_STRIDE(i, n) y[i] = a * x[i] + b * y[i];
}
KERNEL void tnt_k_mul(const float *a, const float *b, float *y, i64 n) { GRID_STRIDE(i, n) y[i] = a[i] * b[i]; }
KERNEL void tnt_k_sub(const float *a, const float *b, float *y, i64 n) { GRID_STRIDE(i, n) y[i] = a[i] - b[i]; }
KERNEL void tnt_k_div(const float *x, float *y, i64 n, float d) { GRID_STRIDE(i, n) y[i] = x[i] / d; }
KERNEL void tnt_k_affine(const float *x, float *y, i64 n, float a, float b) { GRID_STRIDE(i, n) y[i] = x[i] * a + b; }

KERNEL void tnt_k_bias_add(float *y, const float *bias, i64 rows, i64 cols) {
    GRID_STRIDE_COLS(i, c, rows, cols) y[i] = y[i] + bias[c];
}
KERNEL void tnt_k_bias_set(float *y, const float *bias, i64 rows, i64 cols) {
    GRID_STRIDE_COLS(i, c, rows, cols) y[i] = bias[c];
}

#define K_SUM_LANES 256 /* virtual lanes of a column-sum tile */
#define K_SUM_LOADS 8   /* rows a lane loads before adding them (in order) */

KERNEL void tnt_k_col_sums(const float *x, float *out, i64 rows, i64 cols) {
    SHARED double red[K_SUM_LANES];
    int tw = 1, lg = 0;
    while (tw < 32 && tw < cols) tw *= 2, lg++;
    const int groups = K_SUM_LANES / tw;
    BLOCK_STRIDE(tile, (cols + tw - 1) / tw) {
        const i64 c0 = tile * tw;
        for (int t = TID_X; t < K_SUM_LANES; t += NTID_X) {
            const i64 c = c0 + (t & (tw - 1)), step = groups * cols;
            double s = 0.0;
            if (c < cols) {
                i64 r = t >> lg;
                const float *p = x + r * cols + c;
                for (; r + (K_SUM_LOADS - 1) * groups < rows; r += K_SUM_LOADS * groups, p += K_SUM_LOADS * step) {
                    float e[K_SUM_LOADS];
                    for (int u = 0; u < K_SUM_LOADS; u++) e[u] = p[u * step];
                    for (int u = 0; u < K_SUM_LOADS; u++) s += e[u];
                }
                for (; r < rows; r += groups, p += step) s += *p;
            }
            red[t] = s;
        }
        SYNC();
        for (int h = groups / 2; h >= 1; h /= 2) {
            for (int t = TID_X; t < h * tw; t += NTID_X) red[t] += red[t + h * tw];
            SYNC();
        }
        for (int t = TID_X; t < tw && c0 + t < cols; t += NTID_X) out[c0 + t] = (float)red[t];
        SYNC();
    }
}

KERNEL void tnt_k_col_sums_partial(const float *x, float *partial, i64 rows, i64 cols, i64 chunk) {
    const i64 chunks = (rows + chunk - 1) / chunk;
    GRID_STRIDE(i, chunks * cols) {
        const i64 k = i / cols, c = i - k * cols;
        const i64 r0 = k * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
        const float *p = x + r0 * cols + c;
        float s = p[0];
        i64 r = r0 + 1;
        for (; r + K_SUM_LOADS <= r1; r += K_SUM_LOADS) { /* the loads first, the additions in row order */
            float e[K_SUM_LOADS];
            for (int u = 0; u < K_SUM_LOADS; u++) e[u] = p[(r - r0 + u) * cols];
            for (int u = 0; u < K_SUM_LOADS; u++) s += e[u];
        }
        for (; r < r1; r++) s += p[(r - r0) * cols];
        partial[i] = s;
    }
}

KERNEL void tnt_k_clip(const float *x, float *y, i64 n, float c) {
    GRID_STRIDE(i, n) y[i] = x[i] > c ? c : (x[i] < -c ? -c : x[i]);
}

KERNEL void tnt_k_sum_squares_partial(const float *x, float *partial, i64 n) {
    SHARED double red[K_MAX_BLOCK];
    double s = 0.0;
    GRID_STRIDE(i, n) s += (double)x[i] * (double)x[i];
    s = block_sum_d(red, s);
    if (TID_X == 0) partial[CTAID_X] = (float)s;
}

KERNEL void tnt_k_l1l2_grad(const float *v, float *g, i64 n, float a, float b) {
    GRID_STRIDE(i, n) g[i] += a * (float)((v[i] > 0.0f) - (v[i] < 0.0f)) + b * v[i];
}

KERNEL void tnt_k_l1l2_sums_partial(const float *v, double *partial, i64 n) {
    SHARED double red[K_MAX_BLOCK];
    double s1 = 0.0, s2 = 0.0;
    GRID_STRIDE(i, n) {
        const double x = v[i];
        s1 += x < 0 ? -x : x;
        s2 += x * x;
    }
    s1 = block_sum_d(red, s1);
    s2 = block_sum_d(red, s2);
    if (TID_X == 0) partial[2 * CTAID_X] = s1, partial[2 * CTAID_X + 1] = s2;
}

KERNEL void tnt_k_f32_to_bf16(const float *x, unsigned short *y, i64 n) {
    GRID_STRIDE(i, n) {
        const unsigned u = (unsigned)k_float_bits(x[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            y[i] = (unsigned short)((u >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
        else
            y[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}
KERNEL void tnt_k_bf16_to_f32(const unsigned short *x, float *y, i64 n) {
    GRID_STRIDE(i, n) y[i] = k_bits_float((int)((unsigned)x[i] << 16));
}
