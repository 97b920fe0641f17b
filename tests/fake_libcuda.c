/* fake_libcuda.c: CUDA driver libraries for the loader's tests (tests/test_gpu_fallback.c), built
 * three times by tests/CMakeLists.txt from the project's own list of driver functions
 * (gpu/cuda_api.h), so the fakes follow it:
 *   fake_cuda_nodevice: every function answers CUDA_ERROR_NO_DEVICE (100), as a driver whose GPU
 *     is gone; cuGetErrorName answers nothing, as the SDK's stub does (the loader names 100);
 *   fake_cuda_missing (-DFAKE_MISSING): lacks cuLaunchKernel, as a driver too old for the list;
 *   fake_cuda_working (-DFAKE_WORKING): two "devices" whose memory is host memory and whose copies
 *     are memcpy, with no kernels (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND): with a fake cuBLAS
 *     (fake_libcublas.c) the runtime's real-device code runs on a machine without a GPU. */
#include "gpu/cuda_api.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#ifdef FAKE_MISSING
#define cuLaunchKernel fake_renamed_cuLaunchKernel /* exported under another name: dlsym misses it */
#endif

#ifndef FAKE_WORKING
#define FAKE_DEFINE(lib, ret, name, params) EXPORT ret name params { return TNT_CUDA_ERROR_NO_DEVICE; }
TNT_CUDA_DRIVER_FUNCS(FAKE_DEFINE)
#else
/* the defaults succeed; the functions below that return something are renamed out of the way */
#define cuDriverGetVersion fake_default_1
#define cuDeviceGetCount fake_default_2
#define cuDeviceGetName fake_default_3
#define cuDeviceGetPCIBusId fake_default_4
#define cuDeviceGetAttribute fake_default_5
#define cuDevicePrimaryCtxRetain fake_default_6
#define cuMemAlloc_v2 fake_default_7
#define cuMemFree_v2 fake_default_8
#define cuMemHostAlloc fake_default_9
#define cuMemFreeHost fake_default_10
#define cuMemcpyHtoDAsync_v2 fake_default_11
#define cuMemcpyDtoHAsync_v2 fake_default_12
#define cuMemcpyDtoDAsync_v2 fake_default_13
#define cuMemsetD8Async fake_default_14
#define cuMemsetD32Async fake_default_15
#define cuStreamCreate fake_default_16
#define cuEventCreate fake_default_17
#define cuModuleLoadDataEx fake_default_18
#define cuModuleGetFunction fake_default_19
#define cuGetErrorName fake_default_20
#define cuMemGetInfo_v2 fake_default_21
#define cuDeviceGet fake_default_22
#define FAKE_DEFINE(lib, ret, name, params) EXPORT ret name params { return TNT_CUDA_SUCCESS; }
TNT_CUDA_DRIVER_FUNCS(FAKE_DEFINE)
#undef cuDriverGetVersion
#undef cuDeviceGetCount
#undef cuDeviceGetName
#undef cuDeviceGetPCIBusId
#undef cuDeviceGetAttribute
#undef cuDevicePrimaryCtxRetain
#undef cuMemAlloc_v2
#undef cuMemFree_v2
#undef cuMemHostAlloc
#undef cuMemFreeHost
#undef cuMemcpyHtoDAsync_v2
#undef cuMemcpyDtoHAsync_v2
#undef cuMemcpyDtoDAsync_v2
#undef cuMemsetD8Async
#undef cuMemsetD32Async
#undef cuStreamCreate
#undef cuEventCreate
#undef cuModuleLoadDataEx
#undef cuModuleGetFunction
#undef cuGetErrorName
#undef cuMemGetInfo_v2
#undef cuDeviceGet

static char handle_storage[4]; /* addresses for opaque handles */

EXPORT CUresult cuDriverGetVersion(int *v) { return *v = 13000, TNT_CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetCount(int *n) { return *n = 2, TNT_CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) { return *d = ordinal, ordinal < 2 ? TNT_CUDA_SUCCESS : 101; }
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    strncpy(name, d ? "Fake GPU B" : "Fake GPU A", (size_t)len);
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d) {
    strncpy(bus, d ? "0000:02:00.0" : "0000:01:00.0", (size_t)len);
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    *v = a == TNT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 4 : 8;
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    (void)d;
    *c = (CUcontext)(void *)&handle_storage[0];
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = (size_t)1 << 30, *total = (size_t)2 << 30;
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    if (bytes > ((size_t)1 << 34)) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    *p = (CUdeviceptr)(uintptr_t)m;
    return m ? TNT_CUDA_SUCCESS : 2;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return free((void *)(uintptr_t)p), TNT_CUDA_SUCCESS; }
EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return (*p = malloc(bytes)) ? TNT_CUDA_SUCCESS : 2;
}
EXPORT CUresult cuMemFreeHost(void *p) { return free(p), TNT_CUDA_SUCCESS; }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    (void)s;
    return memcpy((void *)(uintptr_t)dst, src, bytes), TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    (void)s;
    return memcpy(dst, (const void *)(uintptr_t)src, bytes), TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
    (void)s;
    return memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes), TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    (void)s;
    return memset((void *)(uintptr_t)dst, v, n), TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
    (void)s;
    for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)dst + 4 * i, &v, 4);
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    (void)flags;
    *s = (CUstream)(void *)&handle_storage[1];
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
    (void)flags;
    *e = (CUevent)(void *)&handle_storage[2];
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v) {
    (void)image, (void)n, (void)o, (void)v;
    *m = (CUmodule)(void *)&handle_storage[3];
    return TNT_CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    (void)f, (void)m, (void)name;
    return 500; /* CUDA_ERROR_NOT_FOUND: a fake has no kernels */
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
    *name = r == 0 ? "CUDA_SUCCESS" : r == 500 ? "CUDA_ERROR_NOT_FOUND" : r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : NULL;
    return *name ? TNT_CUDA_SUCCESS : 1;
}
#endif
