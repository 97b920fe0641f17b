/* blas.c: row-major sgemm on the device. cuBLAS is column-major: a row-major C = op(A) op(B) is the
 * column-major C^T = op(B)^T op(A)^T, so the operands swap places and keep their strides. The
 * emulated device runs oneDNN's dnnl_sgemm (row-major already) on the host; kernels/ is on this
 * floor too, so not the project's tnt__sgemm. */
#include "gpu/api.h"

#include <dnnl.h>
#include <limits.h>

/* Checks the shapes and strides the way cuBLAS would, and on the emulated device that each matrix
 * lies inside device memory. `rows x cols` of A is op(A)'s storage: k x m when transposed. */
static tnt_status check_matrix(const char *what, const char *name, const float *p, bool trans, int64_t rows,
                               int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
    if (ld < (stored_cols > 1 ? stored_cols : 1) || ld > INT_MAX)
        return tnt__error(TNT_ERR_ARG, "%s: ld%s = %lld: expected %lld to %d (row stride of a %lld x %lld matrix)", what,
                          name, (long long)ld, (long long)(stored_cols > 1 ? stored_cols : 1), INT_MAX,
                          (long long)stored_rows, (long long)stored_cols);
    if (stride < 0) return tnt__error(TNT_ERR_ARG, "%s: stride_%s = %lld: expected >= 0", what, name, (long long)stride);
    if (!rows || !cols) return TNT_OK;
    const int64_t elems = (stored_rows - 1) * ld + stored_cols + (batch - 1) * stride;
    if (tnt__gpu_check_device(p, (size_t)elems * sizeof(float), what) != TNT_OK)
        return tnt__error_prefix(TNT_ERR_ARG, "matrix %s: ", name);
    return TNT_OK;
}

static tnt_status check_gemm(const char *what, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                             int64_t lda, int64_t sa, const float *b, int64_t ldb, int64_t sb, const float *c,
                             int64_t ldc, int64_t sc, int64_t batch) {
    if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || batch < 0 || batch > INT_MAX)
        return tnt__error(TNT_ERR_ARG, "%s: m = %lld, n = %lld, k = %lld, batch = %lld: expected 0 to %d each", what,
                          (long long)m, (long long)n, (long long)k, (long long)batch, INT_MAX);
    tnt_status s;
    if (!batch || !m || !n) return TNT_OK; /* nothing is read or written */
    if ((s = check_matrix(what, "a", a, ta, m, k, lda, sa, batch)) != TNT_OK ||
        (s = check_matrix(what, "b", b, tb, k, n, ldb, sb, batch)) != TNT_OK ||
        (s = check_matrix(what, "c", c, false, m, n, ldc, sc, batch)) != TNT_OK)
        return s;
    return TNT_OK;
}

static tnt_status host_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    tnt__gpu_emu_window_open();
    const dnnl_status_t r = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    tnt__gpu_emu_window_close();
    if (r != dnnl_success) return tnt__error(TNT_ERR_BACKEND, "gpu/blas.c: dnnl_sgemm (emulated device): status %d", (int)r);
    return TNT_OK;
}

tnt_status tnt__gpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    const char *what = "tnt__gpu_sgemm";
    tnt_status status = tnt__gpu_enter(what);
    if (status != TNT_OK ||
        (status = check_gemm(what, trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)) != TNT_OK)
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
    if (status != TNT_OK || (status = check_gemm(what, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b,
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

void tnt__gpu_set_tf32(bool on) {
    tnt__gpu.tf32 = on;
    if (!tnt__gpu.open || tnt__gpu.emulated || tnt__gpu_enter("tnt__gpu_set_tf32") != TNT_OK) return;
    const cublasStatus_t r =
        tnt__cuda.cublasSetMathMode(tnt__gpu.cublas, on ? TNT_CUBLAS_TF32_TENSOR_OP_MATH : TNT_CUBLAS_DEFAULT_MATH);
    if (r != TNT_CUBLAS_STATUS_SUCCESS)
        tnt_log(TNT_LOG_WARNING, "cublasSetMathMode(%s): %s", on ? "TF32" : "default", tnt__gpu_error_name("cublas", r));
}
