/* matmul.h: C = alpha * op(A) · op(B) (+ bias) (+ C), then an eltwise post-op, on oneDNN's matmul
 * primitive, made once per shape and run many times: the bf16 GEMM of mixed precision (oneDNN 2.6
 * exports dnnl_sgemm but no bf16 gemm call), and an f32 one with the same interface. A and B are
 * bf16 (or f32), C float32 (or bf16), the bias float32. Operands may be strided submatrices and
 * carry up to two batch axes (attention's heads). */
#ifndef TNT_MATMUL_H
#define TNT_MATMUL_H

#include "kernels/bf16.h"
#include "kernels/dnnl_util.h"

typedef struct tnt__mm_desc {
    dnnl_data_type_t dt;          /* of A and B: dnnl_bf16 or dnnl_f32 */
    int64_t batch[2];             /* leading batch axes; 0 = none */
    int64_t m, n, k;
    bool ta, tb;                  /* A stored as (k, m), B as (n, k), within a batch */
    int64_t lda, ldb, ldc;        /* row pitch of the stored matrices in elements; 0: dense */
    int64_t sa[2], sb[2], sc[2];  /* batch strides in elements; 0: dense */
    bool bias;                    /* + bias (n), float32 */
    bool accumulate;              /* C += the product */
    float alpha;                  /* 0 means 1 */
    dnnl_alg_kind_t eltwise;      /* post-op after bias (dnnl_alg_kind_undef: none) */
    float eltwise_alpha;
    bool c_bf16;                  /* C in bf16 (rounded once, from the float32 accumulators) */
} tnt__mm_desc;

typedef struct tnt__mm {
    tnt__mm_desc d;
    tnt__prim prim;
    dnnl_memory_t a, b, c, bias;
} tnt__mm;

/* Creates the primitive for d; an error names the shapes when oneDNN has no kernel. */
tnt_status tnt__mm_create(tnt__mm *mm, const tnt__mm_desc *d);
/* oneDNN has only its reference kernel for this matmul (slow: callers fall back to float32). */
bool tnt__mm_reference(const tnt__mm *mm);
/* c = ... with a (batch.., m, k) and b as described; bias may be NULL
 * when !d.bias. */
tnt_status tnt__mm_run(tnt__mm *mm, const void *a, const void *b, const float *bias, void *c);
void tnt__mm_destroy(tnt__mm *mm);
/* The plain float32 GEMM for shapes known only at the call (the operations of custom code):
 * C = op(A) · op(B) + beta C, row-major, op(A) (m x k), op(B) (k x n), on oneDNN's sgemm. */
tnt_status tnt__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, float *c, int64_t ldc);

#endif
