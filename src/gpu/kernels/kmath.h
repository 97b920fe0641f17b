/* kmath.h: the float functions the kernels need, without libm (no libdevice without the CUDA SDK).
 * Plain float arithmetic, so the PTX (built with -ffp-contract=off) and the host emulation give
 * the same bits. exp is the CPU engine's kernels/vexp.h tnt__exp_ps as is; log, tanh are Cephes's
 * single-precision polynomials; expm1 and log1p Kahan's correction of exp and log; erf in double
 * (its Taylor series, for GELU). Errors against double references: tests/test_gpu_host.c. */
#ifndef TNT_GPU_KMATH_H
#define TNT_GPU_KMATH_H

#include "kdefs.h"

DEV float k_bits_float(int b) {
    union { int i; float f; } u;
    u.i = b;
    return u.f;
}
DEV int k_float_bits(float f) {
    union { int i; float f; } u;
    u.f = f;
    return u.i;
}
DEV float k_fabsf(float x) { return x < 0.0f ? -x : x; }
DEV float k_fmaxf(float a, float b) { return a > b ? a : (b == b ? b : a); } /* libm's fmaxf: NaN loses */
DEV float k_fminf(float a, float b) { return a < b ? a : (b == b ? b : a); }
DEV float k_sqrtf(float x) { return __builtin_sqrtf(x); } /* sqrt.rn.f32: correctly rounded */
DEV double k_sqrt_d(double x) { return __builtin_sqrt(x); } /* sqrt.rn.f64 */
#define K_INF k_bits_float(0x7f800000)
#define K_NAN k_bits_float(0x7fc00000)

/* exp(x): Cephes's range reduction and polynomial (about 1 ulp); 0 below -87, inf above 88.7 */
DEV float k_expf(float x) {
    if (x != x) return x;
    if (x > 88.72283935546875f) return K_INF;
    const float xc = x > -87.0f ? x : -87.0f;
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    if (n > 127.0f) return p * 2.0f * k_bits_float(((int)n - 1 + 127) * (1 << 23)); /* near 88.7 */
    return x < -87.0f ? 0.0f : p * k_bits_float(((int)n + 127) * (1 << 23));
}

/* log(x): Cephes logf (mantissa in [sqrt(1/2), sqrt(2)), degree-8 polynomial), about 1 ulp */
DEV float k_logf(float x) {
    if (x != x || x == K_INF) return x;
    if (x < 0.0f) return K_NAN;
    if (x == 0.0f) return -K_INF;
    float e = 0.0f;
    if (x < 1.17549435e-38f) x *= 8388608.0f, e = -23.0f; /* subnormal: scale by 2^23 */
    const int b = k_float_bits(x);
    e += (float)(((b >> 23) & 0xff) - 126);
    float m = k_bits_float((b & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    if (m < 0.707106781186547524f) {
        e -= 1.0f;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    const float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    y += e * -2.12194440e-4f;
    y += -0.5f * z;
    float r = m + y;
    r += e * 0.693359375f;
    return r;
}

/* exp(x) - 1 without cancellation near 0 (Kahan: (u - 1) x / log u with u = exp x) */
DEV float k_expm1f(float x) {
    if (k_fabsf(x) > 0.5f) return x > 88.0f ? K_INF : k_expf(x) - 1.0f;
    const float u = k_expf(x);
    if (u == 1.0f) return x;
    const float um1 = u - 1.0f;
    return um1 * x / k_logf(u);
}

/* log(1 + x) without cancellation near 0 (Kahan: log(u) x / (u - 1) with u = 1 + x) */
DEV float k_log1pf(float x) {
    const float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (u == K_INF) return u;
    return k_logf(u) * x / (u - 1.0f);
}

/* tanh(x): Cephes tanhf, a polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above */
DEV float k_tanhf(float x) {
    const float z = k_fabsf(x);
    if (x != x) return x;
    if (z > 9.0f) return x > 0.0f ? 1.0f : -1.0f;
    if (z >= 0.625f) {
        const float s = k_expf(z + z);
        const float r = 1.0f - 2.0f / (s + 1.0f);
        return x < 0.0f ? -r : r;
    }
    const float q = x * x;
    float p = -5.70498872745e-3f;
    p = p * q + 2.06390887954e-2f;
    p = p * q - 5.37397155531e-2f;
    p = p * q + 1.33314422036e-1f;
    p = p * q - 3.33332819422e-1f;
    return p * q * x + x;
}

/* 1 / (1 + exp(-x)), without overflow for either sign */
DEV float k_sigmoidf(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + k_expf(-x));
    const float e = k_expf(x);
    return e / (1.0f + e);
}

/* log(1 + exp(x)) */
DEV float k_softplusf(float x) { return x > 0.0f ? x + k_log1pf(k_expf(-x)) : k_log1pf(k_expf(x)); }

/* erf(x) in double: the Taylor series 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) for |x| < 4
 * (the largest term, about 1e6 at |x| = 4, leaves 1e-10 of double's precision), 1 beyond (erfc(4)
 * is 1.5e-8, below half a float ulp of 1). Only GELU uses it. */
DEV double k_erf(double x) {
    const double ax = x < 0 ? -x : x;
    if (x != x) return x;
    if (ax >= 4.0) return x < 0 ? -1.0 : 1.0;
    const double x2 = x * x;
    double term = x, sum = x;
    for (int n = 1; n < 100; n++) {
        term *= -x2 / n;
        const double t = term / (2 * n + 1);
        sum += t;
        if ((t < 0 ? -t : t) < 1e-17 * (sum < 0 ? -sum : sum)) break;
    }
    return sum * 1.1283791670955125739;
}

/* exp(x) in double for GELU's backward: exp(x) = 2^n exp(r), r in [-ln2/2, ln2/2], Taylor of r */
DEV double k_exp_d(double x) {
    if (x < -700.0) return 0.0;
    const double n = __builtin_floor(x * 1.4426950408889634 + 0.5);
    const double r = x - n * 0.6931471805599453094;
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 20; k++) {
        term *= r / k;
        sum += term;
    }
    double s = 1.0;
    int e = (int)n;
    double b = e < 0 ? 0.5 : 2.0;
    for (e = e < 0 ? -e : e; e; e >>= 1, b *= b)
        if (e & 1) s *= b;
    return sum * s;
}

#endif
