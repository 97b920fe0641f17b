/* test_gpu_abi.c: the project's own declarations of the CUDA driver API, cuBLAS, cuDNN and NCCL
 * (src/gpu/cuda_api.h) against NVIDIA's headers, where those are installed (tests/CMakeLists.txt
 * builds this only when /usr/local/cuda/include has them; nothing else in the build needs them).
 * Most of the check happens at compile time: every function is declared again with the project's
 * prototype after the SDK's own (a difference is "conflicting types"), and every constant is a
 * static assertion. At run time: the struct layouts the loader relies on, and the exported symbol
 * names, which the SDK's headers map from the unversioned names. */
#include "testutil.h"

#include <cublas_api.h>
#include <cuda.h>
#include <cudnn.h>
#include <nccl.h>
#define TNT_CUDA_API_SDK_TYPES
#include "gpu/cuda_api.h"

#include <stddef.h>
#include <string.h>

/* every function again, with the project's prototype */
#define TNT_REDECLARE(lib, ret, name, params) ret name params;
TNT_CUDA_ALL_FUNCS(TNT_REDECLARE)
#undef TNT_REDECLARE

#define SAME(a) _Static_assert((int)TNT_##a == (int)a, #a);
SAME(CUDA_SUCCESS) SAME(CUDA_ERROR_STUB_LIBRARY) SAME(CUDA_ERROR_NO_DEVICE) SAME(CUDA_ERROR_NOT_READY)
SAME(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
SAME(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) SAME(CU_JIT_ERROR_LOG_BUFFER)
SAME(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) SAME(CU_STREAM_NON_BLOCKING) SAME(CU_EVENT_DISABLE_TIMING)
SAME(CUBLAS_STATUS_SUCCESS) SAME(CUBLAS_OP_N) SAME(CUBLAS_OP_T) SAME(CUBLAS_DEFAULT_MATH)
SAME(CUBLAS_TF32_TENSOR_OP_MATH) SAME(CUBLAS_COMPUTE_32F) SAME(CUBLAS_COMPUTE_32F_FAST_TF32)
SAME(CUBLAS_GEMM_DEFAULT) SAME(CUDA_R_32F) SAME(CUDA_R_16BF) SAME(CUDNN_STATUS_SUCCESS) SAME(CUDNN_DATA_FLOAT)
SAME(CUDNN_DATA_BFLOAT16) SAME(CUDNN_TENSOR_NCHW) SAME(CUDNN_TENSOR_NHWC) SAME(CUDNN_CROSS_CORRELATION)
SAME(CUDNN_DEFAULT_MATH) SAME(CUDNN_TENSOR_OP_MATH) SAME(CUDNN_FMA_MATH) SAME(CUDNN_BATCHNORM_SPATIAL)
#undef SAME
_Static_assert((int)TNT_NCCL_SUCCESS == (int)ncclSuccess && (int)TNT_NCCL_FLOAT32 == (int)ncclFloat32 &&
                   (int)TNT_NCCL_BFLOAT16 == (int)ncclBfloat16 && (int)TNT_NCCL_SUM == (int)ncclSum,
               "NCCL constants");

/* the unversioned names cuda.h maps to the exported ones the loader asks dlsym for */
#define STR_(x) #x
#define STR(x) STR_(x)

static void test_layouts(void **state) {
    (void)state;
    assert_int_equal(sizeof(ncclUniqueId), 128);
    assert_int_equal(sizeof(CUdeviceptr), sizeof(void *)); /* device pointers travel as plain pointers */
    assert_int_equal(sizeof(cudnnConvolutionFwdAlgoPerf_t), 48);
    assert_int_equal(sizeof(cudnnConvolutionBwdDataAlgoPerf_t), 48);
    assert_int_equal(sizeof(cudnnConvolutionBwdFilterAlgoPerf_t), 48);
    assert_int_equal(offsetof(cudnnConvolutionFwdAlgoPerf_t, memory), 16);
    assert_int_equal(offsetof(cudnnConvolutionFwdAlgoPerf_t, mathType), 28);
}

static void test_exported_names(void **state) {
    (void)state;
    /* what `cuMemAlloc` and friends mean in NVIDIA's headers is the symbol the project declares */
    assert_string_equal(STR(cuMemAlloc), "cuMemAlloc_v2");
    assert_string_equal(STR(cuMemFree), "cuMemFree_v2");
    assert_string_equal(STR(cuMemcpyHtoDAsync), "cuMemcpyHtoDAsync_v2");
    assert_string_equal(STR(cuMemcpyDtoHAsync), "cuMemcpyDtoHAsync_v2");
    assert_string_equal(STR(cuMemcpyDtoDAsync), "cuMemcpyDtoDAsync_v2");
    assert_string_equal(STR(cuMemGetInfo), "cuMemGetInfo_v2");
    assert_string_equal(STR(cuStreamDestroy), "cuStreamDestroy_v2");
    assert_string_equal(STR(cuEventDestroy), "cuEventDestroy_v2");
    assert_string_equal(STR(cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2");
    assert_string_equal(STR(cuMemsetD8Async), "cuMemsetD8Async");
    assert_string_equal(STR(cuMemsetD32Async), "cuMemsetD32Async");
    assert_string_equal(STR(cuLaunchKernel), "cuLaunchKernel");
    printf("CUDA %d, cuBLAS %d.%d, cuDNN %d.%d, NCCL %d.%d: the project's declarations agree\n", CUDA_VERSION,
           CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUDNN_MAJOR, CUDNN_MINOR, NCCL_MAJOR, NCCL_MINOR);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_layouts), cmocka_unit_test(test_exported_names)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
