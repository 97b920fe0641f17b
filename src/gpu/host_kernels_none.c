/* host_kernels_none.c: stands in for gpu/host_kernels.c (the kernels compiled as host C, from the
 * gpu-kernels work) until that file exists; CMakeLists.txt compiles this one only without it. The
 * emulated device then knows no kernel, and a launch is an error naming the kernel. */
#include "gpu/host_kernels.h"

tnt__gpu_host_kernel tnt__gpu_host_kernel_find(const char *name) {
    (void)name;
    return (tnt__gpu_host_kernel)0;
}
