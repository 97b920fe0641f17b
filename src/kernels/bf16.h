/* bf16.h: bfloat16 for Keras's mixed_bfloat16 policy: whether this CPU computes bf16 (oneDNN's
 * effective ISA has avx512_bf16 or AMX) and the conversions from and to float32 that the layers
 * run around their bf16 primitives. Conversions round to nearest even, as Keras's casts and the
 * AVX-512 BF16 instructions do; they use those instructions where the CPU has them (the default
 * build is portable x86-64-v3, so they are chosen at run time) and integer AVX2 code elsewhere. */
#ifndef TNT_BF16_H
#define TNT_BF16_H

#include "core/core.h"

typedef uint16_t tnt__bf16;

/* True when oneDNN computes bf16 natively here (avx512_core_bf16 or avx512_core_amx); ONEDNN_MAX_CPU_ISA
 * lowers it like oneDNN's own choice. */
bool tnt__bf16_native(void);
/* The oneDNN ISA name behind that answer ("avx512_core_bf16", "avx2", ...), for messages. */
const char *tnt__bf16_isa_name(void);
/* Tests: force the answer (0 no, 1 yes) or go back to the CPU's (-1). */
void tnt__bf16_force_native(int native);

/* One value, round to nearest even (NaN stays NaN). */
static inline tnt__bf16 tnt__bf16_from_float(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (tnt__bf16)((b >> 16) | 0x40u);
    return (tnt__bf16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
static inline float tnt__bf16_to_float(tnt__bf16 h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* y (n) = bf16(x (n)); OpenMP over large n. */
void tnt__f32_to_bf16(const float *x, tnt__bf16 *y, int64_t n);
/* y (n) = float(x (n)). */
void tnt__bf16_to_f32(const tnt__bf16 *x, float *y, int64_t n);
/* y (cols, rows) with leading dimension ldy = bf16(x (rows, cols) with leading dimension ldx)^T. */
void tnt__f32_to_bf16_t(const float *x, int64_t rows, int64_t cols, int64_t ldx, tnt__bf16 *y, int64_t ldy);
/* Rounds x (n) to bf16 precision in place (the float32 a bf16 value reads back as). */
void tnt__bf16_round_f32(float *x, int64_t n);

#endif
