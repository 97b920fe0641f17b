/* sgemm.h: C = A^T · B (+ C) on oneDNN's sgemm, with a way around its 4K-aliasing pitfall.
 *
 * Weight gradients are x^T · dy: both operands are read down their columns, with the row pitch as
 * the stride. oneDNN 2.6's AVX2 sgemm does this in place, and when a pitch is a multiple of 2 KB
 * (512 floats: Dense 256 -> 1024, an LSTM of 128 units' 4 gates) the rows of its panels fall on
 * 4K-aliased addresses: measured at 1 thread under ONEDNN_MAX_CPU_ISA=AVX2 on AMD Zen 5, 4096 x
 * 256 -> 1024 ran at 64 GFLOP/s against 125 with the pitch padded by 16 floats (AVX-512: 220
 * against 229). Such products go through panels of up to 256 rows copied at a padded pitch. */
#ifndef TNT_SGEMM_H
#define TNT_SGEMM_H

#include "core/core.h"

/* C (m, n) = A^T · B (beta 0) or C + A^T · B (beta 1) for dense row-major A (k, m), B (k, n) and
 * C (m, n). The panels live in a buffer of the calling thread, kept between calls (freed by
 * tnt__sgemm_release). */
tnt_status tnt__sgemm_tn(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float beta, float *c);
/* C (m, n) (pitch ldc) = A^T · B (beta 0) or C + A^T · B (beta 1), A (k, m) and B (k, n) read at
 * pitches lda and ldb as they lie (the caller picks pitches that do not alias). */
tnt_status tnt__sgemm_tn_strided(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                                 int64_t ldb, float beta, float *c, int64_t ldc);
/* Frees the calling thread's panel buffer. */
void tnt__sgemm_release(void);

#endif
