/* gpu.h: the GPU runtime (src/gpu/), the one interface through which the rest of the library
 * reaches a device. Nothing here needs the CUDA SDK: the driver API, cuBLAS, cuDNN and NCCL are
 * opened with dlopen (gpu/loader.c) and declared by the project itself (gpu/cuda_api.h).
 *
 * One process drives at most one device. Device memory is addressed by plain pointers (a
 * CUdeviceptr fits one), so tnt__fwd_args and the plans' arena offsets hold device addresses
 * unchanged. Two streams: TNT__GPU_COMPUTE (kernels, cuBLAS, cuDNN) and TNT__GPU_COPY (gradient
 * buckets to and from the host while backward runs); events order one against the other.
 *
 * The emulated device (TNT_GPU_EMULATE=1, for tests on machines without a GPU) implements every
 * call on the host: malloc for device memory, memcpy for copies, the kernels' own source compiled
 * as host C (gpu/kernels/, one thread per block, every block in turn) for launches, and the CPU's
 * sgemm for tnt__gpu_sgemm. Everything above this header runs its real control flow on it. Its
 * compute stream runs at once and its copy stream late (until an event, a sync or a free orders
 * it), so that a missing event shows as wrong data.
 *
 * Every call that can fail returns a tnt_status and sets the library's error (tnt__error) with
 * the file, the call and the library's own error name. */
#ifndef TNT_GPU_GPU_H
#define TNT_GPU_GPU_H

#include "core/core.h"

#include <stddef.h>

typedef enum tnt__gpu_stream {
    TNT__GPU_COMPUTE = 0,
    TNT__GPU_COPY = 1,
} tnt__gpu_stream;

/* ---- the backend: loaded once per process, thread-safe ---- */

/* Whether a usable device backend exists: the driver and cuBLAS load, cuInit succeeds, a device
 * is present and the kernels were built (or TNT_GPU_EMULATE=1). When not, *why (if given) gets one
 * line saying why, e.g. "no libcuda.so.1", "cuInit: CUDA_ERROR_STUB_LIBRARY (34)", "no device",
 * "built without GPU kernels". Never sets the library's error. */
bool tnt__gpu_available(const char **why);
/* Devices the driver sees (0 when unavailable; TNT_GPU_EMULATE's N when emulated). */
int tnt__gpu_device_count(void);
/* Makes device `ordinal` current for this process (primary context, two streams, cuBLAS handle)
 * and loads the kernels' module. Called once, by tnt_init's device choice; again with the same
 * ordinal is a no-op, another ordinal an error. */
tnt_status tnt__gpu_open(int ordinal);
bool tnt__gpu_is_open(void);
/* "NVIDIA H100 80GB HBM3 (0000:1b:00.0)", or "emulated device"; "" before open. */
const char *tnt__gpu_device_name(void);
int tnt__gpu_ordinal(void); /* -1 before open */
bool tnt__gpu_emulated(void);
/* Frees the streams, handles and the context's use (tnt_finalize). */
void tnt__gpu_close(void);

/* ---- memory ---- */

/* Device memory, 256-byte aligned; NULL with the error set when it fails. */
void *tnt__gpu_malloc(size_t bytes);
void tnt__gpu_free(void *device_ptr); /* NULL: nothing */
/* Page-locked host memory for fast, asynchronous copies; NULL with the error set. */
void *tnt__gpu_host_malloc(size_t bytes);
void tnt__gpu_host_free(void *host_ptr);

/* Asynchronous on `stream` (synchronous for pageable host memory, as the driver does). */
tnt_status tnt__gpu_copy_to_device(void *device_dst, const void *host_src, size_t bytes,
                                   tnt__gpu_stream stream);
tnt_status tnt__gpu_copy_to_host(void *host_dst, const void *device_src, size_t bytes,
                                 tnt__gpu_stream stream);
tnt_status tnt__gpu_copy_on_device(void *device_dst, const void *device_src, size_t bytes,
                                   tnt__gpu_stream stream);
tnt_status tnt__gpu_memset_zero(void *device_ptr, size_t bytes, tnt__gpu_stream stream);
/* Waits until everything queued on `stream` has run. */
tnt_status tnt__gpu_sync(tnt__gpu_stream stream);

/* ---- ordering between the streams ---- */

typedef struct tnt__gpu_event tnt__gpu_event;
tnt__gpu_event *tnt__gpu_event_create(void); /* NULL with the error set */
void tnt__gpu_event_destroy(tnt__gpu_event *e);
tnt_status tnt__gpu_event_record(tnt__gpu_event *e, tnt__gpu_stream stream);
/* Work queued on `stream` after this waits for the event (no host wait). */
tnt_status tnt__gpu_stream_wait(tnt__gpu_stream stream, tnt__gpu_event *e);
/* The host waits for the event. */
tnt_status tnt__gpu_event_sync(tnt__gpu_event *e);

/* ---- kernels (the .cu files of gpu/kernels/) ---- */

/* Launches the kernel named `name` (its extern "C" name in gpu/kernels/) on the compute stream
 * with a grid of `grid` blocks of `block` threads and `shared_bytes` of dynamic shared memory.
 * `args` points at each argument, in the kernel's order (cuLaunchKernel's convention). The name
 * is looked up once and cached. An unknown name is an error naming it. */
tnt_status tnt__gpu_launch(const char *name, unsigned grid, unsigned block, size_t shared_bytes,
                           void **args);
/* A grid that covers n elements with `block` threads each (at most the device's limit). */
unsigned tnt__gpu_grid_for(int64_t n, unsigned block);
/* out[c] = the sum over rows of x (rows, cols)[r][c] (tnt_k_col_sums: in double, in a fixed order,
 * rounded once), one block per tile of up to 32 columns: a bias's gradient. */
tnt_status tnt__gpu_col_sums(const float *x, float *out, int64_t rows, int64_t cols);

/* ---- dense linear algebra (cuBLAS; the CPU's sgemm when emulated) ---- */

/* Row-major C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, as tnt__sgemm and
 * dnnl_sgemm take them (lda, ldb, ldc: row strides), on the compute stream. TF32 only when
 * tnt__gpu_set_tf32(true) (default off: float32 results as exact as the CPU's). */
tnt_status tnt__gpu_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                          float *c, int64_t ldc);
/* The same for `batch` products at fixed strides between them (attention heads). */
tnt_status tnt__gpu_sgemm_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float *a, int64_t lda, int64_t stride_a,
                                  const float *b, int64_t ldb, int64_t stride_b, float beta,
                                  float *c, int64_t ldc, int64_t stride_c, int64_t batch);
/* TF32 tensor cores for the float32 GEMMs (cuBLAS math mode) and convolutions (cuDNN math type of
 * plans made afterwards): off by default, TNT_GPU_TF32=1 turns it on, this call wins over the
 * setting (before or after the device opens). Emulated: A and B rounded to TF32 (blas.c). */
void tnt__gpu_set_tf32(bool on);
bool tnt__gpu_tf32(void);
/* x rounded to TF32 as cvt.rna.tf32.f32 does (nearest, ties away from zero): 10 mantissa bits. */
float tnt__gpu_round_tf32(float x);

/* mixed_bfloat16's products: row-major C (float32) = alpha op(A) op(B) + beta C, A and B bf16
 * (the upper halves of float32s, from tnt__gpu_to_bf16), float32 accumulation (cublasGemmEx,
 * CUBLAS_COMPUTE_32F); the same shapes and checks as tnt__gpu_sgemm. */
tnt_status tnt__gpu_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                              const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c,
                              int64_t ldc);
/* The same for `batch` products at fixed strides (elements) between them (attention's heads). */
tnt_status tnt__gpu_gemm_bf16_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                      const uint16_t *a, int64_t lda, int64_t stride_a, const uint16_t *b, int64_t ldb,
                                      int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
                                      int64_t batch);
/* y (n, bf16) = x (n, float32) rounded to nearest even (NaN quiet), as the CPU's kernels/bf16.h. */
tnt_status tnt__gpu_to_bf16(const float *x, uint16_t *y, int64_t n);
/* y (n, float32) = x (n, bf16) widened (exact): what cuDNN's bf16 convolutions write, back to float32. */
tnt_status tnt__gpu_from_bf16(const uint16_t *x, float *y, int64_t n);

/* ---- NCCL (gpu/nccl.c): gradient sums between GPU ranks ---- */

/* Whether NCCL can sum between this process's device and others': the backend is available,
 * not emulated, and NCCL loaded (libnccl.so.2, or TNT_NCCL_LIBRARY, with every function, 2.10 or
 * newer). When not, *why (if given) gets one line: "no libnccl.so.2", "libnccl.so.2 lacks
 * ncclAllReduce", "NCCL 2.7.8 is too old (2.10 or newer)", "the emulated device has no NCCL". */
bool tnt__gpu_nccl_available(const char **why);
int tnt__gpu_nccl_version(void); /* 22809 for 2.28.9; 0 without NCCL */
#define TNT__GPU_NCCL_ID_BYTES 128
/* One rank draws the communicator's id (TNT__GPU_NCCL_ID_BYTES bytes) and hands it to the others. */
tnt_status tnt__gpu_nccl_unique_id(void *id);
/* Collective over the `ranks` processes: joins the communicator as `rank` (once per process; the
 * same arguments again are a no-op). The device must be open. */
tnt_status tnt__gpu_nccl_open(const void *id, int ranks, int rank);
bool tnt__gpu_nccl_is_open(void);
/* In place, on `stream`: data (n floats, device) = the sum of every rank's data. Every rank issues
 * the same sums in the same order. */
tnt_status tnt__gpu_nccl_allreduce(float *device_data, int64_t n, tnt__gpu_stream stream);
/* Leaves the communicator (tnt__gpu_close does it too). */
void tnt__gpu_nccl_close(void);
/* Tests: on the emulated device, a stand-in for ncclAllReduce (e.g. an MPI sum through the host);
 * with one installed the emulated device reports NCCL as available. NULL: none. */
extern tnt_status (*tnt__gpu_nccl_standin)(float *device_data, int64_t n, tnt__gpu_stream stream);

/* ---- cuDNN (gpu/dnn.c): NULL when cuDNN did not load ---- */

/* The cuDNN handle on the compute stream (a cudnnHandle_t), or NULL when cuDNN is not there or
 * the device is emulated: layers that need it then have no GPU path (dispatch names them). */
void *tnt__gpu_cudnn(void);
/* Whether layers that need cuDNN can run on the device: its handle once the device is open,
 * before that whether cuDNN loaded (and the device is not emulated). */
bool tnt__gpu_cudnn_usable(void);

#endif
