/* api.h: inside the GPU runtime: the functions of the loaded libraries (filled by gpu/loader.c), the
 * one check macro every library call goes through, and the state of the open device that device.c,
 * module.c, blas.c and dnn.c share. Layers that call cuDNN themselves (conv2d's GPU path) may
 * include it; everything else uses gpu.h. */
#ifndef TNT_GPU_API_H
#define TNT_GPU_API_H

#include "gpu/cuda_api.h"
#include "gpu/gpu.h"

/* The libraries' functions; valid once tnt__gpu_available() said true on a real (not emulated)
 * backend. cuDNN's and NCCL's are NULL when those libraries did not load (has_cudnn, has_nccl). */
typedef struct tnt__cuda_api {
#define TNT_CUDA_FIELD(lib, ret, name, params) name##_fn name;
    TNT_CUDA_ALL_FUNCS(TNT_CUDA_FIELD)
#undef TNT_CUDA_FIELD
    bool has_cudnn, has_nccl;
    int driver_version; /* cuDriverGetVersion: 13000 for CUDA 13.0 */
    int cudnn_version;  /* cudnnGetVersion: 91900 for 9.19.0; 0 without cuDNN */
    int nccl_version;   /* ncclGetVersion: 22809 for 2.28.9; 0 without NCCL */
    int device_count;
    char cudnn_why[160]; /* why cuDNN is absent ("no libcudnn.so.9 or .so.8", "cuDNN 7.6.5 is too old") */
    char nccl_why[160];  /* why NCCL is absent ("no libnccl.so.2", "libnccl.so.2 lacks ncclAllReduce") */
} tnt__cuda_api;
extern tnt__cuda_api tnt__cuda;

/* Records "gpu/device.c:120: cuMemAlloc_v2(&p, bytes): CUDA_ERROR_OUT_OF_MEMORY (2)" as the
 * library's error and returns TNT_ERR_BACKEND. lib is "cuda", "cublas", "cudnn" or "nccl". */
tnt_status tnt__gpu_lib_error(const char *lib, int code, const char *call, const char *file, int line);
/* The library's name of an error code: "CUDA_ERROR_NO_DEVICE", "CUBLAS_STATUS_INVALID_VALUE", ... */
const char *tnt__gpu_error_name(const char *lib, int code);

/* Calls tnt__cuda.call; on failure records the error (file, line, the call's text, the library's
 * error name) into `status` and jumps to the function's `out` label. */
#define TNT_GPU_CHECK(lib, call)                                                                   \
    do {                                                                                           \
        const int code_ = (int)tnt__cuda.call;                                                     \
        if (code_ != 0) {                                                                          \
            status = tnt__gpu_lib_error(#lib, code_, #call, __FILE__, __LINE__);                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* The open device: one per process. */
typedef struct tnt__gpu_state {
    bool open, emulated, tf32;
    bool tf32_set; /* tnt__gpu_set_tf32 was called: it wins over TNT_GPU_TF32 */
    int ordinal;
    CUdevice device;
    CUcontext context;
    CUstream streams[2]; /* TNT__GPU_COMPUTE, TNT__GPU_COPY */
    cublasHandle_t cublas;
    cudnnHandle_t cudnn; /* NULL without cuDNN */
    CUmodule module;     /* the kernels' PTX, JIT-compiled for this device */
    int multiprocessors;
    char name[320];
} tnt__gpu_state;
extern tnt__gpu_state tnt__gpu;

/* Makes the device's context current on the calling thread (the driver's current context is per
 * thread: the reducer's comm thread copies buckets too). TNT_ERR_STATE when no device is open. */
tnt_status tnt__gpu_enter(const char *what);

/* module.c: loads the PTX (real device) and empties the function cache; dnn.c: the cuDNN handle. */
tnt_status tnt__gpu_module_open(void);
void tnt__gpu_module_close(void);
tnt_status tnt__gpu_dnn_open(void);
void tnt__gpu_dnn_close(void);

/* The emulated device's memory (gpu/emulated.c): allocations in one reserved address range that
 * host code cannot touch outside a gpu.h call (PROT_NONE; a touch is a SIGSEGV with a message that
 * says so, as it would crash on a GPU), filled with NaN when new (a GPU does not zero it), and
 * known by their extent, which lets the runtime refuse a host pointer where device memory is
 * expected or a copy past an allocation's end. Without the address range (a limit on virtual
 * memory) they are plain host memory, checked all the same. */
void *tnt__gpu_emu_alloc(size_t bytes); /* NULL with the error set */
bool tnt__gpu_emu_free(void *p);        /* false: not a live allocation */
/* Around the runtime's own host accesses (copies, host kernels, sgemm): device memory is readable
 * and writable by the host from open to close (nested and threads counted). */
void tnt__gpu_emu_window_open(void);
void tnt__gpu_emu_window_close(void);
/* True when [p, p + bytes) lies inside one live emulated allocation. */
bool tnt__gpu_emulated_is_device(const void *p, size_t bytes);
/* Bytes and allocations of device memory not yet freed (leak checks in tests). */
size_t tnt__gpu_emulated_live_bytes(void);
size_t tnt__gpu_emulated_live_allocations(void);
/* TNT_OK when [p, p + bytes) may be read or written as device memory (emulated: inside a live
 * allocation; real: not NULL), else TNT_ERR_ARG naming `what`. */
tnt_status tnt__gpu_check_device(const void *p, size_t bytes, const char *what);

/* The emulated copy stream (gpu/emulated_copy.c) runs late: its ops wait until something that
 * orders them on a GPU forces them, so that a missing event shows up as wrong data in tests. */
typedef enum tnt__emu_copy_kind { TNT__EMU_TO_DEVICE, TNT__EMU_TO_HOST, TNT__EMU_ON_DEVICE, TNT__EMU_ZERO } tnt__emu_copy_kind;
/* Runs the op now on the compute stream, queues it on the copy stream (arguments already checked). */
tnt_status tnt__gpu_emu_copy(tnt__emu_copy_kind kind, tnt__gpu_stream stream, void *dst, const void *src, size_t bytes);
/* How many ops the copy stream has been given so far (an event recorded on it), and running them
 * up to such a mark (UINT64_MAX: all). */
uint64_t tnt__gpu_emu_copy_mark(void);
void tnt__gpu_emu_copy_run(uint64_t mark);
size_t tnt__gpu_emu_copies_pending(void); /* tests */
/* Page-locked host memory, whose copies read and write it late (add), or no longer (remove: the
 * copy stream drains first); false when it could not be recorded. */
bool tnt__gpu_emu_pinned(void *p, size_t bytes, bool add);

#endif
