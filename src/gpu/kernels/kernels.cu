/* kernels.cu: the one translation unit of the device kernels, so that the library carries one PTX
 * module (one cuModuleLoadDataEx). Each included file opens with its kernels' names and arguments.
 * Build (cmake/gpu_kernels.cmake does it):
 *   clang-14 -x cuda --cuda-path=/nonexistent --cuda-device-only -nocudainc -nocudalib \
 *     --cuda-gpu-arch=sm_80 -Xclang -target-feature -Xclang +ptx75 -ffp-contract=off -O3 -S kernels.cu
 * host_kernels.c includes this file as C11 (kdefs.h's host branch). */
#include "elementwise.cu"
#include "activations.cu"
#include "optim.cu"
#include "pooling.cu"
#include "normalization.cu"
#include "misc.cu"
#include "attention.cu"
#include "conv.cu"
#include "loss.cu"
#include "constraints.cu"
#include "noise.cu"
#include "rnn.cu"
