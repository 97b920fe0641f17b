/* device.c: the open device (primary context, a compute and a copy stream, the cuBLAS handle),
 * device and pinned host memory, copies, and events between the streams; each call also has its
 * emulated form (TNT_GPU_EMULATE=1), which runs on the host.
 *
 * The emulated device (its memory: gpu/emulated.c) runs the compute stream at once and the copy
 * stream late (gpu/emulated_copy.c: its ops wait until an event, a sync or a free forces them, so
 * a missing event gives wrong data), and it is strict where a GPU would fault: device pointers
 * must lie inside a live allocation of tnt__gpu_malloc (a host pointer or a copy past the end is an
 * error naming the call), and an event must be recorded before a stream waits for it. */
#include "core/config.h"
#include "gpu/api.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

tnt__gpu_state tnt__gpu = {.ordinal = -1};

static _Thread_local CUcontext thread_context; /* what this thread made current */

tnt_status tnt__gpu_enter(const char *what) {
    if (!tnt__gpu.open) return tnt__error(TNT_ERR_STATE, "%s: no GPU is open (tnt__gpu_open first)", what);
    if (tnt__gpu.emulated || thread_context == tnt__gpu.context) return TNT_OK;
    tnt_status status = TNT_OK;
    TNT_GPU_CHECK(cuda, cuCtxSetCurrent(tnt__gpu.context));
    thread_context = tnt__gpu.context;
out:
    return status;
}

static tnt_status check_stream(tnt__gpu_stream stream, const char *what) {
    if (stream != TNT__GPU_COMPUTE && stream != TNT__GPU_COPY)
        return tnt__error(TNT_ERR_ARG, "%s: stream %d: expected TNT__GPU_COMPUTE or TNT__GPU_COPY", what, (int)stream);
    return tnt__gpu_enter(what);
}

/* Emulated: device memory expected at [p, p + bytes); a GPU would fault on anything else. */
static tnt_status need_device(const void *p, size_t bytes, const char *what, const char *arg) {
    if (!tnt__gpu.emulated) return p ? TNT_OK : tnt__error(TNT_ERR_ARG, "%s: %s is NULL", what, arg);
    if (tnt__gpu_emulated_is_device(p, bytes)) return TNT_OK;
    return tnt__error(TNT_ERR_ARG, "%s: %s (%p, %zu bytes) is not inside a device allocation", what, arg, p, bytes);
}

static tnt_status need_host(const void *p, size_t bytes, const char *what, const char *arg) {
    if (!p) return tnt__error(TNT_ERR_ARG, "%s: %s is NULL", what, arg);
    if (tnt__gpu.emulated && bytes && tnt__gpu_emulated_is_device(p, 1))
        return tnt__error(TNT_ERR_ARG, "%s: %s (%p) is device memory, expected host memory", what, arg, p);
    return TNT_OK;
}

tnt_status tnt__gpu_check_device(const void *p, size_t bytes, const char *what) {
    return need_device(p, bytes, what, "pointer");
}

/* ---- open and close ---- */

static void close_real(void) {
    if (tnt__gpu.cublas) tnt__cuda.cublasDestroy_v2(tnt__gpu.cublas);
    for (int s = 0; s < 2; s++)
        if (tnt__gpu.streams[s]) tnt__cuda.cuStreamDestroy_v2(tnt__gpu.streams[s]);
    if (tnt__gpu.context) tnt__cuda.cuDevicePrimaryCtxRelease_v2(tnt__gpu.device);
}

static tnt_status open_real(int ordinal) {
    tnt_status status = TNT_OK;
    char bus[64] = "";
    tnt__gpu.ordinal = ordinal; /* for messages while it opens */
    TNT_GPU_CHECK(cuda, cuDeviceGet(&tnt__gpu.device, ordinal));
    /* the primary context: the one cuBLAS, cuDNN and NCCL use as well */
    TNT_GPU_CHECK(cuda, cuDevicePrimaryCtxRetain(&tnt__gpu.context, tnt__gpu.device));
    tnt__gpu.open = true; /* for tnt__gpu_enter; undone on failure */
    if ((status = tnt__gpu_enter("tnt__gpu_open")) != TNT_OK) goto out;
    TNT_GPU_CHECK(cuda, cuDeviceGetName(tnt__gpu.name, 256, tnt__gpu.device));
    TNT_GPU_CHECK(cuda, cuDeviceGetPCIBusId(bus, (int)sizeof bus, tnt__gpu.device));
    size_t len = strlen(tnt__gpu.name);
    snprintf(tnt__gpu.name + len, sizeof tnt__gpu.name - len, " (%s)", bus);
    TNT_GPU_CHECK(cuda, cuDeviceGetAttribute(&tnt__gpu.multiprocessors, TNT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                             tnt__gpu.device));
    /* non-blocking: neither stream waits for work on the legacy default stream of other libraries */
    for (int s = 0; s < 2; s++) TNT_GPU_CHECK(cuda, cuStreamCreate(&tnt__gpu.streams[s], TNT_CU_STREAM_NON_BLOCKING));
    TNT_GPU_CHECK(cublas, cublasCreate_v2(&tnt__gpu.cublas));
    TNT_GPU_CHECK(cublas, cublasSetStream_v2(tnt__gpu.cublas, tnt__gpu.streams[TNT__GPU_COMPUTE]));
    TNT_GPU_CHECK(cublas, cublasSetMathMode(tnt__gpu.cublas, tnt__gpu.tf32 ? TNT_CUBLAS_TF32_TENSOR_OP_MATH
                                                                           : TNT_CUBLAS_DEFAULT_MATH));
    if ((status = tnt__gpu_module_open()) != TNT_OK) goto out;
    if ((status = tnt__gpu_dnn_open()) != TNT_OK) goto out;
out:
    if (status != TNT_OK) {
        tnt__gpu_module_close();
        close_real();
        tnt__gpu_state cleared = {.ordinal = -1, .tf32 = tnt__gpu.tf32, .tf32_set = tnt__gpu.tf32_set};
        tnt__gpu = cleared;
        thread_context = NULL;
    }
    return status;
}

tnt_status tnt__gpu_open(int ordinal) {
    const char *why;
    if (!tnt__gpu_available(&why)) return tnt__error(TNT_ERR_UNSUPPORTED, "no usable GPU: %s", why);
    const int count = tnt__gpu_device_count();
    if (ordinal < 0 || ordinal >= count)
        return tnt__error(TNT_ERR_ARG, "GPU %d: expected 0 to %d (%d device%s%s)", ordinal, count - 1, count,
                          count == 1 ? "" : "s", tnt__gpu_emulated() ? ", emulated" : "");
    if (tnt__gpu.open) {
        if (ordinal == tnt__gpu.ordinal) return TNT_OK;
        return tnt__error(TNT_ERR_STATE, "GPU %d: this process already drives GPU %d", ordinal, tnt__gpu.ordinal);
    }
    if (!tnt__gpu.tf32_set) tnt__gpu.tf32 = tnt__config_get()->gpu_tf32;
    if (tnt__gpu_emulated()) {
        tnt__gpu.emulated = tnt__gpu.open = true;
        snprintf(tnt__gpu.name, sizeof tnt__gpu.name, "emulated device");
        tnt__gpu.multiprocessors = 8;
    } else {
        tnt_status s = open_real(ordinal);
        if (s != TNT_OK) return tnt__error_prefix(s, "GPU %d: ", ordinal);
    }
    tnt__gpu.ordinal = ordinal;
    return TNT_OK;
}

bool tnt__gpu_is_open(void) { return tnt__gpu.open; }
const char *tnt__gpu_device_name(void) { return tnt__gpu.open ? tnt__gpu.name : ""; }
int tnt__gpu_ordinal(void) { return tnt__gpu.open ? tnt__gpu.ordinal : -1; }

void tnt__gpu_close(void) {
    if (!tnt__gpu.open) return;
    tnt__gpu_nccl_close(); /* its communicator uses the context */
    if (tnt__gpu.emulated) tnt__gpu_emu_copy_run(UINT64_MAX);
    if (!tnt__gpu.emulated && tnt__gpu_enter("tnt__gpu_close") == TNT_OK) {
        for (int s = 0; s < 2; s++) tnt__cuda.cuStreamSynchronize(tnt__gpu.streams[s]);
        tnt__gpu_dnn_close();
        tnt__gpu_module_close();
        close_real();
    }
    tnt__gpu_state cleared = {.ordinal = -1, .tf32 = tnt__gpu.tf32, .tf32_set = tnt__gpu.tf32_set};
    tnt__gpu = cleared;
    thread_context = NULL;
}

/* ---- memory ---- */

void *tnt__gpu_malloc(size_t bytes) {
    if (tnt__gpu_enter("tnt__gpu_malloc") != TNT_OK) return NULL;
    const size_t size = bytes ? bytes : 1; /* a distinct address even for an empty buffer */
    if (tnt__gpu.emulated) {
        return tnt__gpu_emu_alloc(bytes);
    }
    CUdeviceptr p = 0;
    const CUresult r = tnt__cuda.cuMemAlloc_v2(&p, size);
    if (r != TNT_CUDA_SUCCESS) {
        size_t free_bytes = 0, total = 0;
        tnt__cuda.cuMemGetInfo_v2(&free_bytes, &total);
        tnt__error(r == 2 ? TNT_ERR_NOMEM : TNT_ERR_BACKEND,
                   "tnt__gpu_malloc: cuMemAlloc_v2 of %zu bytes: %s (%d); %zu of %zu MiB free", bytes,
                   tnt__gpu_error_name("cuda", r), r, free_bytes >> 20, total >> 20);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

void tnt__gpu_free(void *device_ptr) {
    if (!device_ptr || !tnt__gpu.open) return;
    if (tnt__gpu.emulated) { /* cuMemFree waits for the device: the late copies run first */
        tnt__gpu_emu_copy_run(UINT64_MAX);
        if (!tnt__gpu_emu_free(device_ptr)) tnt_log(TNT_LOG_ERROR, "tnt__gpu_free: %p is not a device allocation (freed twice?)", device_ptr);
        return;
    }
    if (tnt__gpu_enter("tnt__gpu_free") == TNT_OK) {
        const CUresult r = tnt__cuda.cuMemFree_v2((CUdeviceptr)(uintptr_t)device_ptr);
        if (r != TNT_CUDA_SUCCESS)
            tnt_log(TNT_LOG_ERROR, "tnt__gpu_free(%p): cuMemFree_v2: %s (%d)", device_ptr,
                    tnt__gpu_error_name("cuda", r), r);
    }
}

void *tnt__gpu_host_malloc(size_t bytes) {
    if (tnt__gpu_enter("tnt__gpu_host_malloc") != TNT_OK) return NULL;
    const size_t size = bytes ? bytes : 1;
    if (tnt__gpu.emulated) {
        void *p = aligned_alloc(256, (size + 255) / 256 * 256);
        if (p && !tnt__gpu_emu_pinned(p, size, true)) free(p), p = NULL;
        if (!p) tnt__error(TNT_ERR_NOMEM, "tnt__gpu_host_malloc: %zu bytes", bytes);
        return p;
    }
    void *p = NULL;
    const CUresult r = tnt__cuda.cuMemHostAlloc(&p, size, 0);
    if (r != TNT_CUDA_SUCCESS) {
        tnt__error(TNT_ERR_NOMEM, "tnt__gpu_host_malloc: cuMemHostAlloc of %zu bytes: %s (%d)", bytes,
                   tnt__gpu_error_name("cuda", r), r);
        return NULL;
    }
    return p;
}

void tnt__gpu_host_free(void *host_ptr) {
    if (!host_ptr || !tnt__gpu.open) return;
    if (tnt__gpu.emulated) {
        tnt__gpu_emu_pinned(host_ptr, 0, false);
        free(host_ptr);
        return;
    }
    if (tnt__gpu_enter("tnt__gpu_host_free") == TNT_OK) {
        const CUresult r = tnt__cuda.cuMemFreeHost(host_ptr);
        if (r != TNT_CUDA_SUCCESS)
            tnt_log(TNT_LOG_ERROR, "tnt__gpu_host_free(%p): cuMemFreeHost: %s (%d)", host_ptr,
                    tnt__gpu_error_name("cuda", r), r);
    }
}

/* ---- copies ---- */

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

tnt_status tnt__gpu_copy_to_device(void *device_dst, const void *host_src, size_t bytes, tnt__gpu_stream stream) {
    const char *what = "tnt__gpu_copy_to_device";
    tnt_status status = check_stream(stream, what);
    if (status != TNT_OK || !bytes) return status;
    if ((status = need_device(device_dst, bytes, what, "destination")) != TNT_OK ||
        (status = need_host(host_src, bytes, what, "source")) != TNT_OK)
        return status;
    if (tnt__gpu.emulated) return tnt__gpu_emu_copy(TNT__EMU_TO_DEVICE, stream, device_dst, host_src, bytes);
    TNT_GPU_CHECK(cuda, cuMemcpyHtoDAsync_v2(DPTR(device_dst), host_src, bytes, tnt__gpu.streams[stream]));
out:
    return status;
}

tnt_status tnt__gpu_copy_to_host(void *host_dst, const void *device_src, size_t bytes, tnt__gpu_stream stream) {
    const char *what = "tnt__gpu_copy_to_host";
    tnt_status status = check_stream(stream, what);
    if (status != TNT_OK || !bytes) return status;
    if ((status = need_device(device_src, bytes, what, "source")) != TNT_OK ||
        (status = need_host(host_dst, bytes, what, "destination")) != TNT_OK)
        return status;
    if (tnt__gpu.emulated) return tnt__gpu_emu_copy(TNT__EMU_TO_HOST, stream, host_dst, device_src, bytes);
    TNT_GPU_CHECK(cuda, cuMemcpyDtoHAsync_v2(host_dst, DPTR(device_src), bytes, tnt__gpu.streams[stream]));
out:
    return status;
}

tnt_status tnt__gpu_copy_on_device(void *device_dst, const void *device_src, size_t bytes, tnt__gpu_stream stream) {
    const char *what = "tnt__gpu_copy_on_device";
    tnt_status status = check_stream(stream, what);
    if (status != TNT_OK || !bytes) return status;
    if ((status = need_device(device_dst, bytes, what, "destination")) != TNT_OK ||
        (status = need_device(device_src, bytes, what, "source")) != TNT_OK)
        return status;
    if (tnt__gpu.emulated) return tnt__gpu_emu_copy(TNT__EMU_ON_DEVICE, stream, device_dst, device_src, bytes);
    TNT_GPU_CHECK(cuda, cuMemcpyDtoDAsync_v2(DPTR(device_dst), DPTR(device_src), bytes, tnt__gpu.streams[stream]));
out:
    return status;
}

tnt_status tnt__gpu_memset_zero(void *device_ptr, size_t bytes, tnt__gpu_stream stream) {
    const char *what = "tnt__gpu_memset_zero";
    tnt_status status = check_stream(stream, what);
    if (status != TNT_OK || !bytes) return status;
    if ((status = need_device(device_ptr, bytes, what, "destination")) != TNT_OK) return status;
    if (tnt__gpu.emulated) return tnt__gpu_emu_copy(TNT__EMU_ZERO, stream, device_ptr, NULL, bytes);
    if (bytes % 4 == 0 && (uintptr_t)device_ptr % 4 == 0) /* words: faster than bytes */
        TNT_GPU_CHECK(cuda, cuMemsetD32Async(DPTR(device_ptr), 0, bytes / 4, tnt__gpu.streams[stream]));
    else
        TNT_GPU_CHECK(cuda, cuMemsetD8Async(DPTR(device_ptr), 0, bytes, tnt__gpu.streams[stream]));
out:
    return status;
}

tnt_status tnt__gpu_sync(tnt__gpu_stream stream) {
    tnt_status status = check_stream(stream, "tnt__gpu_sync");
    if (status == TNT_OK && tnt__gpu.emulated && stream == TNT__GPU_COPY) tnt__gpu_emu_copy_run(UINT64_MAX);
    if (status != TNT_OK || tnt__gpu.emulated) return status;
    TNT_GPU_CHECK(cuda, cuStreamSynchronize(tnt__gpu.streams[stream]));
out:
    return status;
}

/* ---- events ---- */

struct tnt__gpu_event {
    CUevent event; /* NULL when emulated */
    bool recorded;
    bool on_copy;  /* emulated: recorded on the (late) copy stream, after its op `mark` */
    uint64_t mark;
};

/* Emulated: whatever waits for an event of the copy stream needs its ops run up to there. */
static void emu_reach(const tnt__gpu_event *e) {
    if (tnt__gpu.emulated && e->on_copy) tnt__gpu_emu_copy_run(e->mark);
}

tnt__gpu_event *tnt__gpu_event_create(void) {
    if (tnt__gpu_enter("tnt__gpu_event_create") != TNT_OK) return NULL;
    tnt__gpu_event *e = tnt__calloc(1, sizeof *e);
    if (!e || tnt__gpu.emulated) return e;
    tnt_status status = TNT_OK;
    TNT_GPU_CHECK(cuda, cuEventCreate(&e->event, TNT_CU_EVENT_DISABLE_TIMING));
out:
    if (status != TNT_OK) {
        free(e);
        return NULL;
    }
    return e;
}

void tnt__gpu_event_destroy(tnt__gpu_event *e) {
    if (!e) return;
    if (e->event && tnt__gpu.open && tnt__gpu_enter("tnt__gpu_event_destroy") == TNT_OK)
        tnt__cuda.cuEventDestroy_v2(e->event);
    free(e);
}

tnt_status tnt__gpu_event_record(tnt__gpu_event *e, tnt__gpu_stream stream) {
    tnt_status status = check_stream(stream, "tnt__gpu_event_record");
    if (status != TNT_OK) return status;
    if (!e) return tnt__error(TNT_ERR_ARG, "tnt__gpu_event_record: the event is NULL");
    if (!tnt__gpu.emulated) TNT_GPU_CHECK(cuda, cuEventRecord(e->event, tnt__gpu.streams[stream]));
    e->recorded = true;
    e->on_copy = tnt__gpu.emulated && stream == TNT__GPU_COPY;
    e->mark = e->on_copy ? tnt__gpu_emu_copy_mark() : 0;
out:
    return status;
}

/* Waiting for an event never recorded passes at once on a GPU: here it is an error, since it means
 * the order the caller meant is not there. */
static tnt_status need_recorded(const tnt__gpu_event *e, const char *what) {
    if (!e) return tnt__error(TNT_ERR_ARG, "%s: the event is NULL", what);
    if (!e->recorded) return tnt__error(TNT_ERR_STATE, "%s: the event was never recorded", what);
    return TNT_OK;
}

tnt_status tnt__gpu_stream_wait(tnt__gpu_stream stream, tnt__gpu_event *e) {
    tnt_status status = check_stream(stream, "tnt__gpu_stream_wait");
    if (status != TNT_OK || (status = need_recorded(e, "tnt__gpu_stream_wait")) != TNT_OK) return status;
    if (stream == TNT__GPU_COMPUTE) emu_reach(e); /* the copy stream runs late, the compute stream at once */
    if (!tnt__gpu.emulated) TNT_GPU_CHECK(cuda, cuStreamWaitEvent(tnt__gpu.streams[stream], e->event, 0));
out:
    return status;
}

tnt_status tnt__gpu_event_sync(tnt__gpu_event *e) {
    tnt_status status = tnt__gpu_enter("tnt__gpu_event_sync");
    if (status != TNT_OK || (status = need_recorded(e, "tnt__gpu_event_sync")) != TNT_OK) return status;
    emu_reach(e);
    if (!tnt__gpu.emulated) TNT_GPU_CHECK(cuda, cuEventSynchronize(e->event));
out:
    return status;
}
