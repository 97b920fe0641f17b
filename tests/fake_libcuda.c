/* fake_libcuda.c: a CUDA driver library for the loader's fallback tests (tests/test_gpu_fallback.c),
 * built twice by tests/CMakeLists.txt: fake_cuda_nodevice has every driver function the loader
 * resolves, each answering CUDA_ERROR_NO_DEVICE (100) as a driver does on a machine whose GPU is
 * gone; fake_cuda_missing (-DFAKE_MISSING) lacks cuLaunchKernel, as a driver too old for the
 * loader's list would. The functions come from the project's own list (gpu/cuda_api.h), so the
 * fake follows it. cuGetErrorName answers nothing, as the SDK's stub does: the loader names 100. */
#include "gpu/cuda_api.h"

#ifdef FAKE_MISSING
#define cuLaunchKernel fake_renamed_cuLaunchKernel /* exported under another name: dlsym misses it */
#endif

#define FAKE_DEFINE(lib, ret, name, params)                                                         \
    __attribute__((visibility("default"))) ret name params { return TNT_CUDA_ERROR_NO_DEVICE; }
TNT_CUDA_DRIVER_FUNCS(FAKE_DEFINE)
