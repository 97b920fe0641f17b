/* matmul.h: C = alpha * op(A) · op(B) (+ bias) (+ C), then an eltwise post-op, on oneDNN's matmul
 * primitive, made once per shape and run many times: the bf16 GEMM of mixed precision (oneDNN 2.6
 * exports dnnl_sgemm but no bf16 gemm call), and an f32 one with the same interface. A and B are
 * bf16 (or f32), C float32 (or bf16), the bias float32. Operands may be strided submatrices and carry up to two
 * batch axes (attention's heads). B may be packed beforehand into the primitive's own layout
 * (layers pack their weights once per step): with few rows the primitive otherwise re-packs plain
 * bf16 weights on every call, 38 ms against 14.6 ms for 64 x 4096 -> 4096 at 1 thread. */
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
    bool packed_b;                /* B in the primitive's layout (tnt__mm_pack_b): no tb/ldb/sb */
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
    /* packed B: the layout, when it is the VNNI form (k in blocks of 2x, n in blocks of y, pairs
     * of k innermost) that our own loop writes; else a oneDNN reorder does it */
    bool vnni;
    int64_t px, py, ps0, ps1, kp, np; /* blocks, outer strides, padded k and n */
    tnt__reorder pack[2];             /* fallback: from plain f32 B, and from transposed f32 B */
} tnt__mm;

/* Creates the primitive for d; an error names the shapes when oneDNN has no kernel. */
tnt_status tnt__mm_create(tnt__mm *mm, const tnt__mm_desc *d);
/* oneDNN has only its reference kernel for this matmul (slow: callers fall back to float32). */
bool tnt__mm_reference(const tnt__mm *mm);
/* c = ... with a (batch.., m, k) and b as described (packed when d.packed_b); bias may be NULL
 * when !d.bias. */
tnt_status tnt__mm_run(tnt__mm *mm, const void *a, const void *b, const float *bias, void *c);
/* Bytes of packed B. */
size_t tnt__mm_packed_bytes(const tnt__mm *mm);
/* Packs B from float32 into packed (tnt__mm_packed_bytes): src is B (k, n) with row pitch ld, or
 * with trans its transpose (n, k) with row pitch ld (Dense's dx reads W (in, units) as W^T). */
tnt_status tnt__mm_pack_b(tnt__mm *mm, const float *src, int64_t ld, bool trans, void *packed);
/* Two primitives whose packed B layouts agree (one packed buffer serves both). */
bool tnt__mm_same_packing(const tnt__mm *x, const tnt__mm *y);
void tnt__mm_destroy(tnt__mm *mm);

#endif
