/* fake_libcublas.c: a cuBLAS for the runtime's real-device code without a GPU (with
 * fake_cuda_working, whose device memory is host memory): the 9 functions the loader resolves,
 * sgemm and strided sgemm computed as BLAS defines them, column-major, by plain loops. Built as
 * libcublas.so.13 in a folder that TNT_CUDA_LIBDIR names. The math mode set last is kept
 * (fake_cublas_math_mode) for the TF32 switch's test; alpha = 42 makes sgemm fail. */
#include "gpu/cuda_api.h"

#define EXPORT __attribute__((visibility("default")))

static char handle_storage;
EXPORT int fake_cublas_math_mode = -1;

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = (cublasHandle_t)(void *)&handle_storage;
    return 0;
}
EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return h ? 0 : 7; }
EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v) { return (void)h, *v = 130100, 0; }
EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s) { return (void)s, h ? 0 : 7; }
EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    fake_cublas_math_mode = mode;
    return h ? 0 : 7;
}

/* column-major C (m x n) = alpha op(A) op(B) + beta C, with BLAS's argument checks */
static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const float *a,
                           int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || lda < 1 || ldb < (tb ? n : k) || ldb < 1 || ldc < m || ldc < 1)
        return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[p + (long)i * lda] : a[i + (long)p * lda]) *
                     (tb ? b[j + (long)p * ldb] : b[p + (long)j * ldb]);
            c[i + (long)j * ldc] = (float)(alpha * s + (beta == 0.f ? 0.0 : beta * (double)c[i + (long)j * ldc]));
        }
    return 0;
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                     const float *alpha, const float *A, int lda, const float *B, int ldb,
                                     const float *beta, float *C, int ldc) {
    (void)h;
    if (*alpha == 42.f) return 13; /* the fake's way to fail: CUBLAS_STATUS_EXECUTION_FAILED */
    return gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float *alpha, const float *A, int lda,
                                                long long sa, const float *B, int ldb, long long sb,
                                                const float *beta, float *C, int ldc, long long sc, int batch) {
    (void)h;
    for (int i = 0; i < batch; i++) {
        cublasStatus_t s = gemm(ta, tb, m, n, k, *alpha, A + i * sa, lda, B + i * sb, ldb, *beta, C + i * sc, ldc);
        if (s) return s;
    }
    return 0;
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                                   cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)at, (void)lda, (void)B;
    (void)bt, (void)ldb, (void)beta, (void)C, (void)ct, (void)ldc, (void)compute, (void)algo;
    return 15; /* CUBLAS_STATUS_NOT_SUPPORTED: not used yet */
}

/* resolved by the loader; the fake has no bf16 arithmetic */
EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void *alpha, const void *a, cudaDataType at,
                                                 int lda, long long sa, const void *b, cudaDataType bt, int ldb,
                                                 long long sb, const void *beta, void *c, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t compute,
                                                 cublasGemmAlgo_t algo) {
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)at, (void)lda, (void)sa;
    (void)b, (void)bt, (void)ldb, (void)sb, (void)beta, (void)c, (void)ct, (void)ldc, (void)sc, (void)batch;
    (void)compute, (void)algo;
    return 15; /* CUBLAS_STATUS_NOT_SUPPORTED */
}
