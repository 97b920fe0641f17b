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
/* the loss kinds of kernels/loss.cu are tnt_loss_kind's */
_Static_assert(K_LOSS_SPARSE_CE == (int)TNT_SPARSE_CATEGORICAL_CROSSENTROPY && K_LOSS_CE == (int)TNT_CATEGORICAL_CROSSENTROPY &&
                   K_LOSS_BCE == (int)TNT_BINARY_CROSSENTROPY && K_LOSS_MSE == (int)TNT_MEAN_SQUARED_ERROR &&
                   K_LOSS_MAE == (int)TNT_MEAN_ABSOLUTE_ERROR,
               "kernels/loss.cu K_LOSS_* must follow tnt_loss_kind");
/* the structures kernels take by value: the layout nvptx64 gives them too (no padding) */
_Static_assert(sizeof(tnt_k_axes_norm) == 120, "kernels/kargs.h: tnt_k_axes_norm has unexpected padding");
_Static_assert(sizeof(tnt_k_pool) == 80 && sizeof(tnt_k_box) == 56 && sizeof(tnt_k_perm) == 152 && sizeof(tnt_k_conv) == 96 &&
                   sizeof(tnt_k_rnn) == 80,
               "kernels/kargs.h: unexpected padding");

#include "gpu/host_unpack.h"

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
