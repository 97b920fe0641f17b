/* kdefs.h: one kernel dialect for three compilers: clang-14 -x cuda without the CUDA SDK (the PTX
 * the library embeds), nvcc (a second compiler where the SDK exists), and host C11 (host_kernels.c:
 * the emulated device and the tests).
 *
 * The host branch runs a launch as every block in turn with ONE thread each. Kernels written with
 * grid-stride loops and block reductions over any blockDim compute the same values there, which
 * makes their arithmetic testable without a GPU. Warp-level code stays behind warp_sum, which has a
 * host definition. Kernels use no libm (there is no libdevice without the SDK: a logf call fails in
 * the backend with 'Undefined external symbol "logf"'); kmath.h has the functions they need.
 *
 * Rules for kernels: extern "C" names tnt_*; arguments are pointers, i64, int and float only (the
 * launcher passes cuLaunchKernel-style void **args, the host trampoline unpacks them by type); no
 * dynamic shared memory; every one is listed in kernel_list.h. */
#ifndef TNT_GPU_KDEFS_H
#define TNT_GPU_KDEFS_H

typedef long long i64;

#if defined(__CUDA_ARCH__) && defined(__clang__)
/* clang -x cuda --cuda-device-only -nocudainc -nocudalib: clang's attributes and NVVM builtins
 * only. Needs -Xclang -target-feature -Xclang +ptx75 for the shuffle builtin. */
#define KERNEL extern "C" __attribute__((global))
#define DEV static __attribute__((device)) inline
#define SHARED __attribute__((shared))
#define TID_X ((int)__nvvm_read_ptx_sreg_tid_x())
#define NTID_X ((int)__nvvm_read_ptx_sreg_ntid_x())
#define CTAID_X ((i64)__nvvm_read_ptx_sreg_ctaid_x())
#define NCTAID_X ((i64)__nvvm_read_ptx_sreg_nctaid_x())
#define SYNC() __syncthreads()
#define SHFL_DOWN(v, o) __nvvm_shfl_sync_down_f32(0xffffffffu, (v), (o), 31)
#define K_DEVICE 1

#elif defined(__CUDACC__)
#define KERNEL extern "C" __global__
#define DEV static __device__ inline
#define SHARED __shared__
#define TID_X ((int)threadIdx.x)
#define NTID_X ((int)blockDim.x)
#define CTAID_X ((i64)blockIdx.x)
#define NCTAID_X ((i64)gridDim.x)
#define SYNC() __syncthreads()
#define SHFL_DOWN(v, o) __shfl_down_sync(0xffffffffu, (v), (o))
#define K_DEVICE 1

#elif defined(K_HOST_THREADS)
/* host C11 with several threads per block (tests/test_gpu_host_threads.c): POSIX threads and a
 * barrier stand for a block's threads, so that the block-level code (strided loops, reductions in
 * SHARED memory, barriers) runs with blockDim > 1 on a machine without a GPU. */
#include <pthread.h>
#define KERNEL static
#define DEV static inline
#define SHARED static
extern _Thread_local int tnt__k_tid;
extern int tnt__k_ntid;
extern i64 tnt__k_block_mt, tnt__k_nblocks_mt;
extern pthread_barrier_t tnt__k_barrier;
#define TID_X tnt__k_tid
#define NTID_X tnt__k_ntid
#define CTAID_X tnt__k_block_mt
#define NCTAID_X tnt__k_nblocks_mt
#define SYNC() ((void)pthread_barrier_wait(&tnt__k_barrier))

#else
/* host C11: one thread per block; the block index is thread-local so that several host threads
 * may emulate launches at once. SHARED arrays are plain locals: one thread is the whole block. */
#define KERNEL static
#define DEV static inline
#define SHARED
extern _Thread_local i64 tnt__k_block, tnt__k_nblocks; /* defined in host_kernels.c */
#define TID_X 0
#define NTID_X 1
#define CTAID_X tnt__k_block
#define NCTAID_X tnt__k_nblocks
#define SYNC() ((void)0)
#endif

#ifndef NULL
#define NULL 0
#endif

/* The most threads a block of a kernel with a block reduction may have (its SHARED array). */
#define K_MAX_BLOCK 1024

#ifdef SHFL_DOWN
/* sum over the 32 lanes of a warp; lane 0 holds the result */
DEV float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += SHFL_DOWN(v, o);
    return v;
}
#else
DEV float warp_sum(float v) { return v; } /* host: a warp of one thread */
#endif

/* for (i64 i = first index of this thread; i < n; i += threads in the grid) */
#define GRID_STRIDE(i, n) for (i64 i = CTAID_X * NTID_X + TID_X; i < (n); i += NCTAID_X * NTID_X)
/* GRID_STRIDE over a (rows, cols) array with c = i % cols kept up to date without a division per
 * element (one per thread: the 64-bit division is a long software routine on the GPU) */
#define GRID_STRIDE_COLS(i, c, rows, cols)                                                               \
    for (i64 i = CTAID_X * NTID_X + TID_X, c = (cols) > 0 ? i % (cols) : 0,                              \
             dc_ = (cols) > 0 ? NCTAID_X * NTID_X % (cols) : 0;                                           \
         i < (rows) * (cols); i += NCTAID_X * NTID_X, c = c + dc_ >= (cols) ? c + dc_ - (cols) : c + dc_)
/* for (i64 r = this block's first row; r < rows; r += blocks in the grid): one block per row */
#define BLOCK_STRIDE(r, rows) for (i64 r = CTAID_X; r < (rows); r += NCTAID_X)
/* for (i64 j = this thread's first column; j < cols; j += threads in the block) */
#define THREAD_STRIDE(j, cols) for (i64 j = TID_X; j < (cols); j += NTID_X)

/* Block reductions over red[0..NTID_X) (any blockDim up to K_MAX_BLOCK): each thread puts its
 * value, the upper half is folded onto the lower (an odd middle waits a round), every thread gets
 * the result. Every thread of the block must call them. */
#define K_BLOCK_REDUCE(T, name, COMBINE)                                                                    \
    DEV T name(T *red, T v) {                                                                               \
        const int t = TID_X;                                                                                \
        red[t] = v;                                                                                         \
        SYNC();                                                                                             \
        for (int n = NTID_X; n > 1;) {                                                                      \
            const int half = (n + 1) / 2;                                                                   \
            if (t < n - half) red[t] = COMBINE(red[t], red[t + half]);                                      \
            SYNC();                                                                                         \
            n = half;                                                                                       \
        }                                                                                                   \
        const T r = red[0];                                                                                 \
        SYNC();                                                                                             \
        return r;                                                                                           \
    }
#define K_ADD(a, b) ((a) + (b))
#define K_MAX(a, b) ((a) > (b) ? (a) : (b))
#define K_MIN(a, b) ((a) < (b) ? (a) : (b))
K_BLOCK_REDUCE(float, block_sum, K_ADD)
K_BLOCK_REDUCE(double, block_sum_d, K_ADD)
K_BLOCK_REDUCE(float, block_max, K_MAX)
K_BLOCK_REDUCE(long long, block_min_ll, K_MIN)

#endif
