/* vexp.h: exp on floats and on 8 AVX2 lanes, for the kernels GCC leaves scalar with libm (the
 * attention softmax, the recurrent gates). */
#ifndef TNT_VEXP_H
#define TNT_VEXP_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* exp(x): Cephes's range reduction and polynomial (about 1 ulp); 0 below the
 * float range (the softmax's masked scores near -1e9). x at most 88. */
static inline float tnt__exp_ps(float x) {
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
    const int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float e;
    memcpy(&e, &bits, sizeof e);
    return x < -87.0f ? 0.0f : p * e;
}

#ifdef __AVX2__
/* exp_ps on 8 lanes, the same operations in the same order (no FMA contraction: bit for bit the
 * scalar result). GCC leaves the scalar form's loop scalar (the float-to-int step): the
 * attention softmax took 11 of the 24 ms of a bf16 attention forward of the benchmark
 * Transformer, and the recurrent gates (libm's expf and tanhf) a fifth of an LSTM step. */
static inline __m256 tnt__exp8_ps(__m256 x) {
#define S8(v) _mm256_set1_ps(v)
    const __m256 xc = _mm256_max_ps(x, S8(-87.0f));
    const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, S8(1.44269504088896341f)), S8(12582912.0f)),
                                   S8(12582912.0f));
    __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, S8(0.693359375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, S8(-2.12194440e-4f)));
    __m256 p = S8(1.9875691500e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), S8(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), S8(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), S8(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), S8(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), S8(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), S8(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, S8(-87.0f), _CMP_LT_OQ));
#undef S8
}
#endif


/* y[j] = exp(x[j] - mx) for j < n (y may be x); returns their sum (8 AVX2 lanes, then the tail):
 * the softmax rows of attention and of the softmax operation. */
static inline float tnt__exp_shifted_sum(const float *x, float *y, int64_t n, float mx) {
    float sum = 0.0f;
    int64_t j = 0;
#ifdef __AVX2__
    __m256 acc = _mm256_setzero_ps();
    for (; j + 8 <= n; j += 8) {
        const __m256 e = tnt__exp8_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(y + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int i = 0; i < 8; i++) sum += lanes[i];
#endif
    for (; j < n; j++) sum += (y[j] = tnt__exp_ps(x[j] - mx));
    return sum;
}

#endif
