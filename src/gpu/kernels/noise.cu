/* noise.cu: the training-time noise layers of layers/regularization/noise.c on the device, drawing
 * the CPU's noise: the same counter-based generator (misc.cu k_rand_uniform, core/core.h) keyed on
 * the step's seed and the value's global index (base = the global sample offset times the values
 * per sample), and the CPU's Box-Muller in double for the normal draws.
 *
 * Contract:
 *   tnt_k_gaussian_noise(const float *x, float *y, i64 n, u64 seed, u64 base, float stddev)
 *       y = x + stddev normal(seed, base + i)                          GaussianNoise's forward
 *   tnt_k_gaussian_dropout(const float *x, float *y, i64 n, u64 seed, u64 base, float mult)
 *       y = x (1 + mult normal(seed, base + i)), mult = sqrtf(rate / (1 - rate)): GaussianDropout's
 *       forward on x, its backward on dy
 *   tnt_k_alpha_dropout(const float *x, float *y, i64 n, u64 seed, u64 base, float rate, float a,
 *                       float b, float alpha_p, int backward)
 *       kept = uniform(seed, base + i) >= rate; forward: y = a (kept ? x : alpha_p) + b; backward
 *       (x is dy): y = x (a (kept ? 1 : 0))
 *   tnt_k_spatial_dropout(const float *x, float *y, i64 n, u64 seed, i64 per, i64 channels,
 *                         i64 sample_offset, int channels_first, float rate, float scale)
 *       y = x (kept ? scale : 0), kept = uniform(seed, sample channels + channel) >= rate for value i
 *       of sample sample_offset + i / per; its channel i % channels, or i % per / (per / channels)
 *       channels first; forward on x, backward on dy
 * normal(seed, i) = (float)(sqrt(-2 log u1) cos(2 pi u2)) with u1, u2 from draws 2i and 2i + 1, as
 * tnt__rand_normal; log (loss.cu's k_log_d) and cos in double to about an ulp, so the float they give
 * is the CPU's but where the double lies within a few ulps of a float's rounding boundary (about
 * one value in 10^8; tests/test_gpu_host.c counts them).
 */
#include "kmath.h" /* and loss.cu, misc.cu before it in kernels.cu: k_log_d, k_rand_uniform */

/* cos(x), 0 <= x < 7: x = k pi/2 + r, |r| <= pi/4 (pi/2 in two parts, k pi2_hi exact), then the
 * Taylor series of cos r or sin r to the 19th power */
DEV double k_cos_d(double x) {
    const int k = (int)(x * 0.63661977236758134308 + 0.5);
    const double r = (x - k * 1.57079632673412561417e+00) - k * 6.07710050650619224932e-11, r2 = r * r;
    double c = 1.0, s = r, tc = 1.0, ts = r;
    for (int j = 1; j <= 9; j++) {
        tc *= -r2 / ((2 * j - 1) * (2 * j));
        ts *= -r2 / ((2 * j) * (2 * j + 1));
        c += tc;
        s += ts;
    }
    switch (k & 3) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
    }
}

/* core/core.c tnt__rand_normal */
DEV float k_rand_normal(unsigned long long seed, unsigned long long index) {
    const unsigned long long r1 = k_hash64(seed ^ k_hash64(2 * index + 0x9E3779B97F4A7C15ull));
    const unsigned long long r2 = k_hash64(seed ^ k_hash64(2 * index + 1 + 0x9E3779B97F4A7C15ull));
    const double u1 = ((double)(r1 >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    const double u2 = (double)(r2 >> 11) * (1.0 / 9007199254740992.0);
    return (float)(k_sqrt_d(-2.0 * k_log_d(u1)) * k_cos_d(6.283185307179586 * u2));
}

KERNEL void tnt_k_gaussian_noise(const float *x, float *y, i64 n, unsigned long long seed, unsigned long long base,
                                 float stddev) {
    GRID_STRIDE(i, n) y[i] = x[i] + stddev * k_rand_normal(seed, base + (unsigned long long)i);
}

KERNEL void tnt_k_gaussian_dropout(const float *x, float *y, i64 n, unsigned long long seed, unsigned long long base,
                                   float mult) {
    GRID_STRIDE(i, n) y[i] = x[i] * (1.0f + mult * k_rand_normal(seed, base + (unsigned long long)i));
}

KERNEL void tnt_k_alpha_dropout(const float *x, float *y, i64 n, unsigned long long seed, unsigned long long base,
                                float rate, float a, float b, float alpha_p, int backward) {
    GRID_STRIDE(i, n) {
        const int kept = k_rand_uniform(seed, base + (unsigned long long)i) >= rate;
        y[i] = backward ? x[i] * (a * (kept ? 1.0f : 0.0f)) : a * (kept ? x[i] : alpha_p) + b;
    }
}

KERNEL void tnt_k_spatial_dropout(const float *x, float *y, i64 n, unsigned long long seed, i64 per, i64 channels,
                                  i64 sample_offset, int channels_first, float rate, float scale) {
    GRID_STRIDE(i, n) {
        const i64 sample = sample_offset + i / per;
        const i64 ch = channels_first ? i % per / (per / channels) : i % channels;
        const int kept = k_rand_uniform(seed, (unsigned long long)(sample * channels + ch)) >= rate;
        y[i] = x[i] * (kept ? scale : 0.0f);
    }
}
