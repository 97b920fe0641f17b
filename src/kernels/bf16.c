/* bf16.c: see bf16.h. */
#include "kernels/bf16.h"

#include <dnnl.h>
#include <immintrin.h>

/* ---- the CPU ------------------------------------------------------------------------------ */

static int forced = -1;

void tnt__bf16_force_native(int native) { forced = native < 0 ? -1 : native != 0; }

/* oneDNN's effective ISA (the CPU's, capped by ONEDNN_MAX_CPU_ISA or TNT_MAX_CPU_ISA) has bf16 */
static bool isa_has_bf16(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

bool tnt__bf16_native(void) {
    if (forced >= 0) return forced;
    return isa_has_bf16();
}

const char *tnt__bf16_isa_name(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "other";
    }
}

/* ---- conversions -------------------------------------------------------------------------- */

/* Below this many values a conversion stays on the calling thread. */
#define PAR_MIN 65536

/* The AVX-512 BF16 kernels: compiled for that ISA whatever the build's -march, run only where
 * __builtin_cpu_supports says the CPU has it and the ISA cap allows it (so that a run capped to
 * AVX2 proves the portable kernel too). */
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

AVX512BF16 static void to_bf16_avx512(const float *x, tnt__bf16 *y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512((void *)(y + i), (__m512i)v);
    }
    if (i < n) { /* the tail under a mask */
        __mmask16 lo = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __mmask16 hi = (__mmask16)(n - i > 16 ? (1u << (n - i - 16)) - 1 : 0);
        __m512 a = _mm512_maskz_loadu_ps(lo, x + i), b = _mm512_maskz_loadu_ps(hi, x + i + 16);
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(b, a);
        _mm512_mask_storeu_epi16(y + i, ((__mmask32)hi << 16) | lo, v);
    }
}

/* Portable kernel (vectorized by the compiler at -march=x86-64-v3): the same rounding. */
static void to_bf16_plain(const float *x, tnt__bf16 *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tnt__bf16_from_float(x[i]);
}

static bool have_avx512bf16(void) {
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx512bf16") && isa_has_bf16() ? 1 : 0;
    }
    return have;
}

static void to_bf16(const float *x, tnt__bf16 *y, int64_t n) {
    if (have_avx512bf16()) to_bf16_avx512(x, y, n);
    else to_bf16_plain(x, y, n);
}

void tnt__f32_to_bf16(const float *x, tnt__bf16 *y, int64_t n) {
    if (n < PAR_MIN) {
        to_bf16(x, y, n);
        return;
    }
    const int64_t chunk = 16384; /* 64 KB of input per task */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += chunk) to_bf16(x + i, y + i, TNT_MIN(chunk, n - i));
}

void tnt__bf16_to_f32(const tnt__bf16 *x, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = tnt__bf16_to_float(x[i]);
}

void tnt__bf16_round_f32(float *x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++) x[i] = tnt__bf16_to_float(tnt__bf16_from_float(x[i]));
}

void tnt__f32_to_bf16_t(const float *x, int64_t rows, int64_t cols, int64_t ldx, tnt__bf16 *y, int64_t ldy) {
    /* 32 x 32 tiles: a tile's rows of x and of y stay in L1 */
    const int64_t T = 32;
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols >= PAR_MIN)
    for (int64_t c0 = 0; c0 < cols; c0 += T)
        for (int64_t r0 = 0; r0 < rows; r0 += T) {
            const int64_t r1 = TNT_MIN(r0 + T, rows), c1 = TNT_MIN(c0 + T, cols);
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++) y[c * ldy + r] = tnt__bf16_from_float(x[r * ldx + c]);
        }
}
