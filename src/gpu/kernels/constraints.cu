/* constraints.cu: Keras's weight constraints after an optimizer update, as layers/regularizer.c
 * projects them on the host (the L1/L2 penalties' kernels are in elementwise.cu).
 *
 * Contract:
 *   tnt_k_non_neg(float *w, i64 n)                     NonNeg: w[i] = 0 where w[i] < 0 (NaN and
 *       -0 stay)
 *   tnt_k_norm_constraint(float *w, tnt_k_axes_norm a, int kind, float max_value, float min_value,
 *                         float rate)                  (kargs.h)
 *       per group g: nrm = (float)sqrt(the sum over its values of w^2, in double), desired =
 *       kind 0 MaxNorm: min(nrm, max_value); 1 UnitNorm: 1; 2 MinMaxNorm: rate min(max(nrm,
 *       min_value), max_value) + (1 - rate) nrm; then w *= desired / (1e-7 + nrm) (float), the
 *       host's formulas. One block per group (any grid, blockDim <= 1024); the sum's order
 *       depends on blockDim, not on the grid.
 */
#include "kargs.h"
#include "kmath.h"

#define K_NORM_MAX 0
#define K_NORM_UNIT 1
#define K_NORM_MIN_MAX 2
#define K_KERAS_EPSILON 1e-7f

KERNEL void tnt_k_non_neg(float *w, i64 n) {
    GRID_STRIDE(i, n) if (w[i] < 0.0f) w[i] = 0.0f;
}

/* The index in w of value k of group g: g walks the kept axes, k the reduced ones, the last axis
 * fastest in both (the host's norm_index order). */
DEV i64 k_axes_index(const tnt_k_axes_norm *a, i64 g, i64 k) {
    i64 idx = 0, stride = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        const i64 n = a->dim[d];
        i64 r;
        if (a->reduced[d]) {
            r = k % n;
            k /= n;
        } else {
            r = g % n;
            g /= n;
        }
        idx += r * stride;
        stride *= n;
    }
    return idx;
}

KERNEL void tnt_k_norm_constraint(float *w, tnt_k_axes_norm a, int kind, float max_value, float min_value,
                                  float rate) {
    SHARED double red[K_MAX_BLOCK];
    BLOCK_STRIDE(g, a.groups) {
        double s = 0.0;
        THREAD_STRIDE(k, a.per) {
            const double v = w[k_axes_index(&a, g, k)];
            s += v * v;
        }
        s = block_sum_d(red, s);
        const float nrm = (float)k_sqrt_d(s);
        float desired = nrm;
        if (kind == K_NORM_MAX) desired = k_fminf(nrm, max_value);
        else if (kind == K_NORM_UNIT) desired = 1.0f;
        else desired = rate * k_fminf(k_fmaxf(nrm, min_value), max_value) + (1.0f - rate) * nrm;
        const float f = desired / (K_KERAS_EPSILON + nrm);
        THREAD_STRIDE(k, a.per) {
            const i64 i = k_axes_index(&a, g, k);
            w[i] = w[i] * f;
        }
    }
}
