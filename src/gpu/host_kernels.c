/* host_kernels.c: the kernels of kernels/ (*.cu) compiled as host C11 (kernels/kdefs.h's host branch)
 * and found by name, each behind a trampoline that unpacks cuLaunchKernel-style arguments. */
#include "gpu/host_kernels.h"

#include <string.h>

#include "tarantella.h"

_Thread_local long long tnt__k_block, tnt__k_nblocks;

#include "gpu/kernels/kernels.cu"

/* The kernels' activation numbers are tnt_activation's. */
_Static_assert((int)K_ACT_SOFTMAX == (int)TNT_ACT_SOFTMAX && (int)K_ACT_LEAKY_RELU == (int)TNT_ACT_LEAKY_RELU &&
                   (int)K_ACT_LOG_SOFTMAX == (int)TNT_ACT_LOG_SOFTMAX && (int)K_ACT_SPARSEMAX == (int)TNT_ACT_SPARSEMAX &&
                   (int)K_ACT_COUNT == (int)TNT_ACT_COUNT,
               "kernels/activations.cu K_ACT_* must follow tnt_activation");
/* the structures kernels take by value: the layout nvptx64 gives them too (no padding) */
_Static_assert(sizeof(tnt_k_pool) == 80 && sizeof(tnt_k_box) == 56, "kernels/kargs.h: unexpected padding");

/* args[i] points at argument i of type T */
#define K_ARG(i, T) (*(T *)args[i])
#define K_UNPACK1(T0) K_ARG(0, T0)
#define K_UNPACK2(T0, T1) K_UNPACK1(T0), K_ARG(1, T1)
#define K_UNPACK3(T0, T1, T2) K_UNPACK2(T0, T1), K_ARG(2, T2)
#define K_UNPACK4(T0, T1, T2, T3) K_UNPACK3(T0, T1, T2), K_ARG(3, T3)
#define K_UNPACK5(T0, T1, T2, T3, T4) K_UNPACK4(T0, T1, T2, T3), K_ARG(4, T4)
#define K_UNPACK6(T0, T1, T2, T3, T4, T5) K_UNPACK5(T0, T1, T2, T3, T4), K_ARG(5, T5)
#define K_UNPACK7(T0, T1, T2, T3, T4, T5, T6) K_UNPACK6(T0, T1, T2, T3, T4, T5), K_ARG(6, T6)
#define K_UNPACK8(T0, T1, T2, T3, T4, T5, T6, T7) K_UNPACK7(T0, T1, T2, T3, T4, T5, T6), K_ARG(7, T7)
#define K_UNPACK9(T0, T1, T2, T3, T4, T5, T6, T7, T8) K_UNPACK8(T0, T1, T2, T3, T4, T5, T6, T7), K_ARG(8, T8)
#define K_UNPACK10(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9)                                                       \
    K_UNPACK9(T0, T1, T2, T3, T4, T5, T6, T7, T8), K_ARG(9, T9)
#define K_UNPACK11(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10)                                                  \
    K_UNPACK10(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9), K_ARG(10, T10)
#define K_UNPACK12(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11)                                             \
    K_UNPACK11(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10), K_ARG(11, T11)
#define K_UNPACK13(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12)                                        \
    K_UNPACK12(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11), K_ARG(12, T12)
#define K_UNPACK14(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13)                                   \
    K_UNPACK13(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12), K_ARG(13, T13)
#define K_UNPACK15(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14)                              \
    K_UNPACK14(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13), K_ARG(14, T14)
#define K_UNPACK16(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14, T15)                         \
    K_UNPACK15(T0, T1, T2, T3, T4, T5, T6, T7, T8, T9, T10, T11, T12, T13, T14), K_ARG(15, T15)
#define K_COUNT(...) K_COUNT_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define K_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, n, ...) n
#define K_CAT(a, b) K_CAT_(a, b)
#define K_CAT_(a, b) a##b
#define K_UNPACK(...) K_CAT(K_UNPACK, K_COUNT(__VA_ARGS__))(__VA_ARGS__)

/* A launch on the host: the grid's blocks in turn, one thread each (blockDim and dynamic shared
 * memory do not change the result of a kernel written for any blockDim). */
#define TNT_K(name, ...)                                                                                      \
    static void host_##name(unsigned grid, unsigned block, size_t shared_bytes, void **args) {                  \
        (void)block, (void)shared_bytes;                                                                       \
        const long long saved_block = tnt__k_block, saved_nblocks = tnt__k_nblocks;                            \
        tnt__k_nblocks = grid;                                                                                 \
        for (tnt__k_block = 0; tnt__k_block < tnt__k_nblocks; tnt__k_block++) name(K_UNPACK(__VA_ARGS__));     \
        tnt__k_block = saved_block, tnt__k_nblocks = saved_nblocks;                                            \
    }
#include "gpu/kernels/kernel_list.h"
#undef TNT_K

static const struct {
    const char *name;
    tnt__gpu_host_kernel fn;
} host_kernels[] = {
#define TNT_K(name, ...) {#name, host_##name},
#include "gpu/kernels/kernel_list.h"
#undef TNT_K
};

tnt__gpu_host_kernel tnt__gpu_host_kernel_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof host_kernels / sizeof host_kernels[0]; i++)
        if (!strcmp(host_kernels[i].name, name)) return host_kernels[i].fn;
    return NULL;
}
