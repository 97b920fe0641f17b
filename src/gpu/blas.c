/* blas.c: row-major sgemm on the device. cuBLAS is column-major: a row-major C = op(A) op(B) is the
 * column-major C^T = op(B)^T op(A)^T, so the operands swap places and keep their strides. The
 * emulated device runs oneDNN's dnnl_sgemm (row-major already) on the host; kernels/ is on this
 * floor too, so not the project's tnt__sgemm.
 *
 * Precision, as the emulated device computes it:
 * - TF32 (tnt__gpu_set_tf32, TNT_GPU_TF32): cuBLAS's TF32 tensor-op math rounds A and B to TF32
 *   (10 explicit mantissa bits) and accumulates in float32; emulated, A and B are copied rounded
 *   to TF32 as PTX's cvt.rna.tf32.f32 rounds (to nearest, ties away from zero), then the float32
 *   sgemm runs on the copies.
 * - bf16 (tnt__gpu_gemm_bf16, mixed_bfloat16): cublasGemmEx on bf16 A and B with float32 C and
 *   CUBLAS_COMPUTE_32F; emulated, the bf16 values are widened to float32 (exactly) and the float32
 *   sgemm runs on them: each product of two bf16 values is exact in float32, as on the GPU, and
 *   the sums are float32 (their order differs, as between any two GEMM implementations). */
#include "core/config.h"
#include "gpu/api.h"

#include <dnnl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Checks the shapes and strides the way cuBLAS would, and on the emulated device that each matrix
 * lies inside device memory. `rows x cols` of A is op(A)'s storage: k x m when transposed. */
static tnt_status check_matrix(const char *what, const char *name, const void *p, size_t elem, bool trans,
                               int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
    if (ld < (stored_cols > 1 ? stored_cols : 1) || ld > INT_MAX)
        return tnt__error(TNT_ERR_ARG, "%s: ld%s = %lld: expected %lld to %d (row stride of a %lld x %lld matrix)", what,
                          name, (long long)ld, (long long)(stored_cols > 1 ? stored_cols : 1), INT_MAX,
                          (long long)stored_rows, (long long)stored_cols);
    if (stride < 0) return tnt__error(TNT_ERR_ARG, "%s: stride_%s = %lld: expected >= 0", what, name, (long long)stride);
    if (!rows || !cols) return TNT_OK;
    const int64_t elems = (stored_rows - 1) * ld + stored_cols + (batch - 1) * stride;
    if (tnt__gpu_check_device(p, (size_t)elems * elem, what) != TNT_OK)
        return tnt__error_prefix(TNT_ERR_ARG, "matrix %s: ", name);
    return TNT_OK;
}

static tnt_status check_gemm(const char *what, size_t ab_elem, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb,
                             const float *c, int64_t ldc, int64_t sc, int64_t batch) {
    if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || batch < 0 || batch > INT_MAX)
        return tnt__error(TNT_ERR_ARG, "%s: m = %lld, n = %lld, k = %lld, batch = %lld: expected 0 to %d each", what,
                          (long long)m, (long long)n, (long long)k, (long long)batch, INT_MAX);
    tnt_status s;
    if (!batch || !m || !n) return TNT_OK; /* nothing is read or written */
    if ((s = check_matrix(what, "a", a, ab_elem, ta, m, k, lda, sa, batch)) != TNT_OK ||
        (s = check_matrix(what, "b", b, ab_elem, tb, k, n, ldb, sb, batch)) != TNT_OK ||
        (s = check_matrix(what, "c", c, sizeof(float), false, m, n, ldc, sc, batch)) != TNT_OK)
        return s;
    return TNT_OK;
}

/* The elements of a row-major matrix with `rows` stored rows of `cols`, row stride ld. */
static size_t stored_elems(bool trans, int64_t rows, int64_t cols, int64_t ld) {
    const int64_t r = trans ? cols : rows, c = trans ? rows : cols;
    return r && c ? (size_t)((r - 1) * ld + c) : 0;
}

float tnt__gpu_round_tf32(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7f800000u) == 0x7f800000u) return x; /* inf and NaN stay */
    b = (b + 0x1000u) & ~0x1fffu; /* half an ulp of TF32 onto the magnitude, then 13 bits off */
    memcpy(&x, &b, sizeof x);
    return x;
}

/* A host copy of n device floats, each rounded to TF32 (emulated tensor-op math). */
static float *tf32_copy(const float *p, size_t n) {
    float *q = malloc(n ? n * sizeof(float) : 1);
    if (!q) return NULL;
    for (size_t i = 0; i < n; i++) q[i] = tnt__gpu_round_tf32(p[i]);
    return q;
}

static tnt_status host_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                             const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    const dnnl_status_t r = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (r != dnnl_success) return tnt__error(TNT_ERR_BACKEND, "gpu/blas.c: dnnl_sgemm (emulated device): status %d", (int)r);
    return TNT_OK;
}

static tnt_status host_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    tnt_status s = TNT_OK;
    float *a32 = NULL, *b32 = NULL;
    tnt__gpu_emu_window_open();
    if (tnt__gpu.tf32) {
        a32 = tf32_copy(a, stored_elems(ta, m, k, lda));
        b32 = a32 ? tf32_copy(b, stored_elems(tb, k, n, ldb)) : NULL;
        if (!b32) s = tnt__error(TNT_ERR_NOMEM, "gpu/blas.c: TF32 copies of a %lld x %lld x %lld product (emulated device)",
                                 (long long)m, (long long)n, (long long)k);
        a = a32, b = b32;
    }
    if (s == TNT_OK) s = host_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    tnt__gpu_emu_window_close();
    free(a32);
    free(b32);
    return s;
}

/* bf16 operands widened to float32 on the host: exact, so the float32 sgemm multiplies what the
 * GPU's bf16 tensor cores multiply. */
static float *widened_copy(const uint16_t *p, size_t n) {
    float *q = malloc(n ? n * sizeof(float) : 1);
    if (!q) return NULL;
    for (size_t i = 0; i < n; i++) {
        const uint32_t w = (uint32_t)p[i] << 16;
        memcpy(q + i, &w, sizeof w);
    }
    return q;
}

static tnt_status host_gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a,
                                 int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    tnt_status s = TNT_OK;
    tnt__gpu_emu_window_open();
    float *a32 = widened_copy(a, stored_elems(ta, m, k, lda));
    float *b32 = a32 ? widened_copy(b, stored_elems(tb, k, n, ldb)) : NULL;
    if (!b32) s = tnt__error(TNT_ERR_NOMEM, "gpu/blas.c: float32 copies of a bf16 %lld x %lld x %lld product (emulated device)",
                             (long long)m, (long long)n, (long long)k);
    if (s == TNT_OK) s = host_sgemm(ta, tb, m, n, k, alpha, a32, lda, b32, ldb, beta, c, ldc);
    tnt__gpu_emu_window_close();
    free(a32);
    free(b32);
    return s;
}

tnt_status tnt__gpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    const char *what = "tnt__gpu_sgemm";
    tnt_status status = tnt__gpu_enter(what);
    if (status != TNT_OK ||
        (status = check_gemm(what, sizeof(float), trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)) != TNT_OK)
        return status;
    if (!m || !n) return TNT_OK;
    if (tnt__gpu.emulated) return host_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    TNT_GPU_CHECK(cublas, cublasSgemm_v2(tnt__gpu.cublas, trans_b ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N,
                                         trans_a ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                                         (int)ldb, a, (int)lda, &beta, c, (int)ldc));
out:
    return status;
}

tnt_status tnt__gpu_sgemm_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float *a, int64_t lda, int64_t stride_a, const float *b, int64_t ldb,
                                  int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch) {
    const char *what = "tnt__gpu_sgemm_strided";
    tnt_status status = tnt__gpu_enter(what);
    if (status != TNT_OK || (status = check_gemm(what, sizeof(float), trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b,
                                                 c, ldc, stride_c, batch)) != TNT_OK)
        return status;
    if (!m || !n || !batch) return TNT_OK;
    if (tnt__gpu.emulated) {
        for (int64_t i = 0; i < batch && status == TNT_OK; i++)
            status = host_gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                               c + i * stride_c, ldc);
        return status;
    }
    TNT_GPU_CHECK(cublas, cublasSgemmStridedBatched(tnt__gpu.cublas, trans_b ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N,
                                                    trans_a ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                                    &alpha, b, (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c,
                                                    (int)ldc, stride_c, (int)batch));
out:
    return status;
}

tnt_status tnt__gpu_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                              const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c,
                              int64_t ldc) {
    const char *what = "tnt__gpu_gemm_bf16";
    tnt_status status = tnt__gpu_enter(what);
    if (status != TNT_OK ||
        (status = check_gemm(what, sizeof(uint16_t), trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)) !=
            TNT_OK)
        return status;
    if (!m || !n) return TNT_OK;
    if (tnt__gpu.emulated) return host_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    TNT_GPU_CHECK(cublas, cublasGemmEx(tnt__gpu.cublas, trans_b ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N,
                                       trans_a ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                                       TNT_CUDA_R_16BF, (int)ldb, a, TNT_CUDA_R_16BF, (int)lda, &beta, c, TNT_CUDA_R_32F,
                                       (int)ldc, TNT_CUBLAS_COMPUTE_32F, TNT_CUBLAS_GEMM_DEFAULT));
out:
    return status;
}

tnt_status tnt__gpu_gemm_bf16_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                      const uint16_t *a, int64_t lda, int64_t stride_a, const uint16_t *b, int64_t ldb,
                                      int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
                                      int64_t batch) {
    const char *what = "tnt__gpu_gemm_bf16_strided";
    tnt_status status = tnt__gpu_enter(what);
    if (status != TNT_OK || (status = check_gemm(what, sizeof(uint16_t), trans_a, trans_b, m, n, k, a, lda, stride_a, b,
                                                 ldb, stride_b, c, ldc, stride_c, batch)) != TNT_OK)
        return status;
    if (!m || !n || !batch) return TNT_OK;
    if (tnt__gpu.emulated) {
        for (int64_t i = 0; i < batch && status == TNT_OK; i++)
            status = host_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                                    beta, c + i * stride_c, ldc);
        return status;
    }
    TNT_GPU_CHECK(cublas, cublasGemmStridedBatchedEx(
                              tnt__gpu.cublas, trans_b ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N,
                              trans_a ? TNT_CUBLAS_OP_T : TNT_CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                              TNT_CUDA_R_16BF, (int)ldb, stride_b, a, TNT_CUDA_R_16BF, (int)lda, stride_a, &beta, c,
                              TNT_CUDA_R_32F, (int)ldc, stride_c, (int)batch, TNT_CUBLAS_COMPUTE_32F,
                              TNT_CUBLAS_GEMM_DEFAULT));
out:
    return status;
}

tnt_status tnt__gpu_to_bf16(const float *x, uint16_t *y, int64_t n) {
    long long len = n;
    if (n <= 0) return TNT_OK;
    void *args[] = {&x, &y, &len};
    return tnt__gpu_launch("tnt_k_f32_to_bf16", tnt__gpu_grid_for(n, 256), 256, 0, args);
}

tnt_status tnt__gpu_from_bf16(const uint16_t *x, float *y, int64_t n) {
    long long len = n;
    if (n <= 0) return TNT_OK;
    void *args[] = {&x, &y, &len};
    return tnt__gpu_launch("tnt_k_bf16_to_f32", tnt__gpu_grid_for(n, 256), 256, 0, args);
}

bool tnt__gpu_tf32(void) { return tnt__gpu.tf32_set ? tnt__gpu.tf32 : tnt__gpu.open ? tnt__gpu.tf32 : tnt__config_get()->gpu_tf32; }

void tnt__gpu_set_tf32(bool on) {
    tnt__gpu.tf32 = on;
    tnt__gpu.tf32_set = true;
    if (!tnt__gpu.open || tnt__gpu.emulated || tnt__gpu_enter("tnt__gpu_set_tf32") != TNT_OK) return;
    const cublasStatus_t r =
        tnt__cuda.cublasSetMathMode(tnt__gpu.cublas, on ? TNT_CUBLAS_TF32_TENSOR_OP_MATH : TNT_CUBLAS_DEFAULT_MATH);
    if (r != TNT_CUBLAS_STATUS_SUCCESS)
        tnt_log(TNT_LOG_WARNING, "cublasSetMathMode(%s): %s", on ? "TF32" : "default", tnt__gpu_error_name("cublas", r));
}
