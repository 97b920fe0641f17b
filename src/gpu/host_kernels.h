/* host_kernels.h: the kernels of gpu/kernels/ (*.cu) compiled as host C11 (kdefs.h's host branch:
 * a launch runs every block in turn, one thread each), for the emulated device
 * (TNT_GPU_EMULATE=1) and for the tests that check each kernel against the CPU engine.
 *
 * The build always compiles them (plain C, no CUDA needed). The PTX of the same source is built
 * only where clang-14 is found and TNT_GPU is not OFF; it is then embedded as tnt__gpu_ptx and
 * TNT_GPU_KERNELS is defined. */
#ifndef TNT_GPU_HOST_KERNELS_H
#define TNT_GPU_HOST_KERNELS_H

#include <stddef.h>

/* One kernel run on the host with cuLaunchKernel's arguments: `args` points at each argument in
 * the kernel's order. */
typedef void (*tnt__gpu_host_kernel)(unsigned grid, unsigned block, size_t shared_bytes, void **args);

/* The host build of the kernel with this extern "C" name; NULL for an unknown name. */
tnt__gpu_host_kernel tnt__gpu_host_kernel_find(const char *name);

#ifdef TNT_GPU_KERNELS
extern const char tnt__gpu_ptx[]; /* NUL-terminated PTX text of every kernel */
#endif

#endif
