/* cuda_api.h: the CUDA driver API, cuBLAS, cuDNN 9 (legacy API) and NCCL declared by the project itself, for
 * dlopen (gpu/loader.c). No SDK header is needed anywhere in the build; tests/test_gpu_abi.c compiles these
 * declarations against NVIDIA's headers where they exist (a differing prototype is a compile error there). */
#ifndef TNT_CUDA_API_H
#define TNT_CUDA_API_H
/* Rules, each one checked against NVIDIA's headers where they exist (loader.c -DCHECK_AGAINST_SDK):
 * - handles are pointers to the SDK's own struct tags (struct CUctx_st *, struct cudnnContext *);
 * - enum parameters keep the SDK's type names, as int typedefs here (GCC treats an enum as
 *   compatible with unsigned int, not int, so the prototype check needs the names to stand in);
 * - functions are named by the symbol the library exports: cuMemAlloc_v2, cublasSgemm_v2, never
 *   the unversioned name that cuda.h or cublas_v2.h #define to it (cuda.h 13 maps cuCtxCreate to a
 *   new cuCtxCreate_v4 signature; it also maps cuEventElapsedTime to cuEventElapsedTime_v2, same
 *   prototype, while the driver still exports both: the check then compares against the _v2);
 * - every constant the project uses is a TNT_ name here, asserted equal to the SDK's. */
#include <stddef.h>

#ifndef TNT_CUDA_API_SDK_TYPES /* defined when the SDK's headers came first (the conformance check) */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef int CUdevice_attribute;
typedef int CUjit_option;
typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
typedef int cublasOperation_t;
typedef int cublasMath_t;
typedef int cudaDataType;
typedef int cublasComputeType_t;
typedef int cublasGemmAlgo_t;
typedef int cudnnStatus_t;
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;
typedef int cudnnTensorFormat_t;
typedef int cudnnDataType_t;
typedef int cudnnConvolutionMode_t;
typedef int cudnnMathType_t;
typedef int cudnnDeterminism_t;
typedef int cudnnConvolutionFwdAlgo_t;
typedef int cudnnConvolutionBwdDataAlgo_t;
typedef int cudnnConvolutionBwdFilterAlgo_t;
typedef int cudnnBatchNormMode_t;
typedef int ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
/* cuDNN's algorithm records: 48 bytes, unchanged from cuDNN 7 to 9 */
#define TNT_CUDNN_PERF(name, algo_t)                                                                \
    typedef struct name##Struct {                                                                   \
        algo_t algo;                                                                                \
        cudnnStatus_t status;                                                                       \
        float time;                                                                                 \
        size_t memory;                                                                              \
        cudnnDeterminism_t determinism;                                                             \
        cudnnMathType_t mathType;                                                                   \
        int reserved[3];                                                                            \
    } name##_t;
TNT_CUDNN_PERF(cudnnConvolutionFwdAlgoPerf, cudnnConvolutionFwdAlgo_t)
TNT_CUDNN_PERF(cudnnConvolutionBwdDataAlgoPerf, cudnnConvolutionBwdDataAlgo_t)
TNT_CUDNN_PERF(cudnnConvolutionBwdFilterAlgoPerf, cudnnConvolutionBwdFilterAlgo_t)
#undef TNT_CUDNN_PERF
#endif

/* constants the project hard-codes (values of CUDA 13.0, cuBLAS 13.1, cuDNN 9.19, NCCL 2.28) */
enum {
    TNT_CUDA_SUCCESS = 0, TNT_CUDA_ERROR_STUB_LIBRARY = 34, TNT_CUDA_ERROR_NO_DEVICE = 100,
    TNT_CUDA_ERROR_NOT_READY = 600, TNT_CUBLAS_STATUS_SUCCESS = 0, TNT_CUDNN_STATUS_SUCCESS = 0, TNT_NCCL_SUCCESS = 0,
    TNT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16, TNT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    TNT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    TNT_CU_JIT_ERROR_LOG_BUFFER = 5, TNT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    TNT_CU_STREAM_NON_BLOCKING = 1, TNT_CU_EVENT_DISABLE_TIMING = 2,
    TNT_CUBLAS_OP_N = 0, TNT_CUBLAS_OP_T = 1, TNT_CUBLAS_DEFAULT_MATH = 0, TNT_CUBLAS_TF32_TENSOR_OP_MATH = 3,
    TNT_CUBLAS_COMPUTE_32F = 68, TNT_CUBLAS_COMPUTE_32F_FAST_TF32 = 77, TNT_CUBLAS_GEMM_DEFAULT = -1,
    TNT_CUDA_R_32F = 0, TNT_CUDA_R_16BF = 14,
    TNT_CUDNN_DATA_FLOAT = 0, TNT_CUDNN_DATA_BFLOAT16 = 9, TNT_CUDNN_TENSOR_NCHW = 0, TNT_CUDNN_TENSOR_NHWC = 1,
    TNT_CUDNN_CROSS_CORRELATION = 1, TNT_CUDNN_DEFAULT_MATH = 0, TNT_CUDNN_TENSOR_OP_MATH = 1,
    TNT_CUDNN_FMA_MATH = 3, TNT_CUDNN_BATCHNORM_SPATIAL = 1,
    TNT_NCCL_FLOAT32 = 7, TNT_NCCL_BFLOAT16 = 9, TNT_NCCL_SUM = 0,
};

/* X(library, return type, exported symbol, parameters) */
#define TNT_CUDA_DRIVER_FUNCS(X)                                                                                    \
    X(cuda, CUresult, cuInit, (unsigned flags))                                                                     \
    X(cuda, CUresult, cuDriverGetVersion, (int *version))                                                           \
    X(cuda, CUresult, cuGetErrorName, (CUresult r, const char **name))                                              \
    X(cuda, CUresult, cuGetErrorString, (CUresult r, const char **text))                                            \
    X(cuda, CUresult, cuDeviceGetCount, (int *n))                                                                   \
    X(cuda, CUresult, cuDeviceGet, (CUdevice *d, int ordinal))                                                      \
    X(cuda, CUresult, cuDeviceGetAttribute, (int *v, CUdevice_attribute attrib, CUdevice d))                        \
    X(cuda, CUresult, cuDeviceGetName, (char *name, int len, CUdevice d))                                           \
    X(cuda, CUresult, cuDeviceGetPCIBusId, (char *bus_id, int len, CUdevice d))                                     \
    X(cuda, CUresult, cuDevicePrimaryCtxRetain, (CUcontext *c, CUdevice d))                                         \
    X(cuda, CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice d))                                                   \
    X(cuda, CUresult, cuCtxSetCurrent, (CUcontext c))                                                               \
    X(cuda, CUresult, cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes))                                   \
    X(cuda, CUresult, cuMemAlloc_v2, (CUdeviceptr *p, size_t bytes))                                                \
    X(cuda, CUresult, cuMemFree_v2, (CUdeviceptr p))                                                                \
    X(cuda, CUresult, cuMemHostAlloc, (void **p, size_t bytes, unsigned flags))                                     \
    X(cuda, CUresult, cuMemFreeHost, (void *p))                                                                     \
    X(cuda, CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t bytes, CUstream s))           \
    X(cuda, CUresult, cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t bytes, CUstream s))                 \
    X(cuda, CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s))           \
    X(cuda, CUresult, cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream s))                \
    X(cuda, CUresult, cuMemsetD32Async, (CUdeviceptr dst, unsigned value, size_t n, CUstream s))                    \
    X(cuda, CUresult, cuStreamCreate, (CUstream * s, unsigned flags))                                               \
    X(cuda, CUresult, cuStreamDestroy_v2, (CUstream s))                                                             \
    X(cuda, CUresult, cuStreamSynchronize, (CUstream s))                                                            \
    X(cuda, CUresult, cuStreamWaitEvent, (CUstream s, CUevent e, unsigned flags))                                   \
    X(cuda, CUresult, cuEventCreate, (CUevent * e, unsigned flags))                                                 \
    X(cuda, CUresult, cuEventRecord, (CUevent e, CUstream s))                                                       \
    X(cuda, CUresult, cuEventSynchronize, (CUevent e))                                                              \
    X(cuda, CUresult, cuEventElapsedTime, (float *ms, CUevent start, CUevent end))                                  \
    X(cuda, CUresult, cuEventDestroy_v2, (CUevent e))                                                               \
    X(cuda, CUresult, cuModuleLoadDataEx, (CUmodule * m, const void *image, unsigned n, CUjit_option *opts, void **vals)) \
    X(cuda, CUresult, cuModuleGetFunction, (CUfunction * f, CUmodule m, const char *name))                          \
    X(cuda, CUresult, cuModuleUnload, (CUmodule m))                                                                 \
    X(cuda, CUresult, cuLaunchKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,            \
                                       unsigned by, unsigned bz, unsigned smem, CUstream s, void **params, void **extra))

#define TNT_CUBLAS_FUNCS(X)                                                                                         \
    X(cublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * h))                                                \
    X(cublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t h))                                                 \
    X(cublas, cublasStatus_t, cublasGetVersion_v2, (cublasHandle_t h, int *version))                                \
    X(cublas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t h, CUstream s))                                   \
    X(cublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t h, cublasMath_t mode))                             \
    X(cublas, cublasStatus_t, cublasSgemm_v2, (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, \
                                               int n, int k, const float *alpha, const float *A, int lda,           \
                                               const float *B, int ldb, const float *beta, float *C, int ldc))      \
    X(cublas, cublasStatus_t, cublasGemmEx, (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,   \
                                             int n, int k, const void *alpha, const void *A, cudaDataType Atype,    \
                                             int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, \
                                             void *C, cudaDataType Ctype, int ldc, cublasComputeType_t compute,     \
                                             cublasGemmAlgo_t algo))                                                \
    X(cublas, cublasStatus_t, cublasSgemmStridedBatched, (cublasHandle_t h, cublasOperation_t ta,                   \
                                             cublasOperation_t tb, int m, int n, int k, const float *alpha,         \
                                             const float *A, int lda, long long strideA, const float *B, int ldb,   \
                                             long long strideB, const float *beta, float *C, int ldc,               \
                                             long long strideC, int batch))                                         \
    X(cublas, cublasStatus_t, cublasGemmStridedBatchedEx, (cublasHandle_t h, cublasOperation_t ta,                  \
                                             cublasOperation_t tb, int m, int n, int k, const void *alpha,          \
                                             const void *A, cudaDataType Atype, int lda, long long strideA,         \
                                             const void *B, cudaDataType Btype, int ldb, long long strideB,         \
                                             const void *beta, void *C, cudaDataType Ctype, int ldc,                \
                                             long long strideC, int batch, cublasComputeType_t compute,             \
                                             cublasGemmAlgo_t algo))

#define TNT_CUDNN_FUNCS(X)                                                                                          \
    X(cudnn, size_t, cudnnGetVersion, (void))                                                                       \
    X(cudnn, const char *, cudnnGetErrorString, (cudnnStatus_t s))                                                  \
    X(cudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t * h))                                                       \
    X(cudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t h))                                                        \
    X(cudnn, cudnnStatus_t, cudnnSetStream, (cudnnHandle_t h, CUstream s))                                          \
    X(cudnn, cudnnStatus_t, cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t * d))                             \
    X(cudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t d))                              \
    X(cudnn, cudnnStatus_t, cudnnSetTensor4dDescriptor, (cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,     \
                                                         cudnnDataType_t dtype, int n, int c, int h, int w))        \
    X(cudnn, cudnnStatus_t, cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t * d))                             \
    X(cudnn, cudnnStatus_t, cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t d))                              \
    X(cudnn, cudnnStatus_t, cudnnSetFilter4dDescriptor, (cudnnFilterDescriptor_t d, cudnnDataType_t dtype,          \
                                                         cudnnTensorFormat_t format, int k, int c, int h, int w))   \
    X(cudnn, cudnnStatus_t, cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t * d))                   \
    X(cudnn, cudnnStatus_t, cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t d))                    \
    X(cudnn, cudnnStatus_t, cudnnSetConvolution2dDescriptor, (cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, \
                                                              int stride_h, int stride_w, int dil_h, int dil_w,     \
                                                              cudnnConvolutionMode_t mode, cudnnDataType_t dtype))  \
    X(cudnn, cudnnStatus_t, cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t d, cudnnMathType_t math))    \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7, (cudnnHandle_t h, cudnnTensorDescriptor_t x,    \
                                 cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, \
                                 int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf))                \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7, (cudnnHandle_t h,                          \
                                 cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnTensorDescriptor_t dx, int requested, int *returned,                          \
                                 cudnnConvolutionBwdDataAlgoPerf_t *perf))                                          \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7, (cudnnHandle_t h,                        \
                                 cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnFilterDescriptor_t dw, int requested, int *returned,                          \
                                 cudnnConvolutionBwdFilterAlgoPerf_t *perf))                                        \
    X(cudnn, cudnnStatus_t, cudnnFindConvolutionForwardAlgorithm, (cudnnHandle_t h, cudnnTensorDescriptor_t x,      \
                                 cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, \
                                 int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf))                \
    X(cudnn, cudnnStatus_t, cudnnFindConvolutionBackwardDataAlgorithm, (cudnnHandle_t h,                            \
                                 cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnTensorDescriptor_t dx, int requested, int *returned,                          \
                                 cudnnConvolutionBwdDataAlgoPerf_t *perf))                                          \
    X(cudnn, cudnnStatus_t, cudnnFindConvolutionBackwardFilterAlgorithm, (cudnnHandle_t h,                          \
                                 cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnFilterDescriptor_t dw, int requested, int *returned,                          \
                                 cudnnConvolutionBwdFilterAlgoPerf_t *perf))                                        \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize, (cudnnHandle_t h, cudnnTensorDescriptor_t x,   \
                                 cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, \
                                 cudnnConvolutionFwdAlgo_t algo, size_t *bytes))                                    \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataWorkspaceSize, (cudnnHandle_t h,                         \
                                 cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes))    \
    X(cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterWorkspaceSize, (cudnnHandle_t h,                       \
                                 cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c, \
                                 cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes))  \
    X(cudnn, cudnnStatus_t, cudnnConvolutionForward, (cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd, \
                                 const void *x, cudnnFilterDescriptor_t wd, const void *w,                          \
                                 cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo, void *ws,          \
                                 size_t ws_bytes, const void *beta, cudnnTensorDescriptor_t yd, void *y))           \
    X(cudnn, cudnnStatus_t, cudnnConvolutionBackwardData, (cudnnHandle_t h, const void *alpha,                      \
                                 cudnnFilterDescriptor_t wd, const void *w, cudnnTensorDescriptor_t dyd,            \
                                 const void *dy, cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t algo, \
                                 void *ws, size_t ws_bytes, const void *beta, cudnnTensorDescriptor_t dxd, void *dx)) \
    X(cudnn, cudnnStatus_t, cudnnConvolutionBackwardFilter, (cudnnHandle_t h, const void *alpha,                    \
                                 cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t dyd,            \
                                 const void *dy, cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t algo, \
                                 void *ws, size_t ws_bytes, const void *beta, cudnnFilterDescriptor_t dwd, void *dw)) \
    X(cudnn, cudnnStatus_t, cudnnConvolutionBackwardBias, (cudnnHandle_t h, const void *alpha,                      \
                                 cudnnTensorDescriptor_t dyd, const void *dy, const void *beta,                     \
                                 cudnnTensorDescriptor_t dbd, void *db))                                            \
    X(cudnn, cudnnStatus_t, cudnnBatchNormalizationForwardTraining, (cudnnHandle_t h, cudnnBatchNormMode_t mode,    \
                                 const void *alpha, const void *beta, cudnnTensorDescriptor_t xd, const void *x,    \
                                 cudnnTensorDescriptor_t yd, void *y, cudnnTensorDescriptor_t bnd,                  \
                                 const void *scale, const void *bias, double factor, void *running_mean,            \
                                 void *running_var, double eps, void *save_mean, void *save_inv_var))               \
    X(cudnn, cudnnStatus_t, cudnnBatchNormalizationBackward, (cudnnHandle_t h, cudnnBatchNormMode_t mode,           \
                                 const void *alpha_d, const void *beta_d, const void *alpha_p, const void *beta_p,  \
                                 cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t dyd,            \
                                 const void *dy, cudnnTensorDescriptor_t dxd, void *dx, cudnnTensorDescriptor_t bnd, \
                                 const void *scale, void *dscale, void *dbias, double eps, const void *save_mean,   \
                                 const void *save_inv_var))

#define TNT_NCCL_FUNCS(X)                                                                                           \
    X(nccl, ncclResult_t, ncclGetVersion, (int *version))                                                           \
    X(nccl, const char *, ncclGetErrorString, (ncclResult_t r))                                                     \
    X(nccl, ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))                                                     \
    X(nccl, ncclResult_t, ncclCommInitRank, (ncclComm_t * c, int nranks, ncclUniqueId id, int rank))                \
    X(nccl, ncclResult_t, ncclCommDestroy, (ncclComm_t c))                                                          \
    X(nccl, ncclResult_t, ncclAllReduce, (const void *send, void *recv, size_t count, ncclDataType_t dtype,         \
                                          ncclRedOp_t op, ncclComm_t c, CUstream s))

#define TNT_CUDA_ALL_FUNCS(X) TNT_CUDA_DRIVER_FUNCS(X) TNT_CUBLAS_FUNCS(X) TNT_CUDNN_FUNCS(X) TNT_NCCL_FUNCS(X)

/* one pointer type per function: cuInit_fn, cublasSgemm_v2_fn, ... */
#define TNT_CUDA_FN_TYPE(lib, ret, name, params) typedef ret(*name##_fn) params;
TNT_CUDA_ALL_FUNCS(TNT_CUDA_FN_TYPE)
#undef TNT_CUDA_FN_TYPE

#endif
