/* loader.c: finds the GPU backend once per process: dlopen of the CUDA driver, cuBLAS, cuDNN and
 * NCCL by their sonames (in each folder of TNT_CUDA_LIBDIR, then by the normal search), their
 * functions through the project's own declarations (cuda_api.h), version gates, and when anything
 * is missing the one line that says why the CPU runs instead. Nothing here needs the CUDA SDK.
 *
 * Required: the driver (libcuda.so.1, or TNT_CUDA_DRIVER for tests), a successful cuInit, a
 * device, the kernels built into the library, cuBLAS. Optional: cuDNN (layers that need it have
 * no GPU path without it), NCCL (gradients go through host staging without it). */
#include "core/config.h"
#include "gpu/api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

tnt__cuda_api tnt__cuda;

static struct {
    pthread_once_t once;
    bool available, emulated;
    char why[256];
} loader = {.once = PTHREAD_ONCE_INIT};

/* The CUDA release whose PTX ISA the kernels use (7.5: CUDA 11.5); older drivers cannot JIT it. */
enum { MIN_DRIVER = 11050, MIN_CUDNN = 8000, MIN_NCCL = 21000 };

/* Opens the first candidate that loads: in each folder of `dirs` (TNT_CUDA_LIBDIR, a colon list)
 * first, since a folder the user names should win over an older library of the system, then by the
 * normal search. *which gets the soname that opened. */
static void *open_library(const char *const *sonames, const char *dirs, const char **which) {
    for (const char *d = dirs; d && *d;) {
        const char *end = strchr(d, ':');
        const int len = end ? (int)(end - d) : (int)strlen(d);
        for (const char *const *s = sonames; len > 0 && *s; s++) {
            char path[4096];
            void *h = snprintf(path, sizeof path, "%.*s/%s", len, d, *s) < (int)sizeof path
                          ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
            if (h) return *which = *s, h;
        }
        d = end ? end + 1 : NULL;
    }
    for (const char *const *s = sonames; *s; s++) {
        void *h = dlopen(*s, RTLD_NOW | RTLD_LOCAL);
        if (h) return *which = *s, h;
    }
    return NULL;
}

/* Resolves library `lib`'s functions from h; returns the first missing name, NULL if none. */
static const char *resolve(const char *lib, void *h) {
    const char *missing = NULL;
#define TNT_RESOLVE(l, ret, name, params)                                                          \
    if (!strcmp(#l, lib)) {                                                                        \
        tnt__cuda.name = (name##_fn)dlsym(h, #name);                                               \
        if (!tnt__cuda.name && !missing) missing = #name;                                          \
    }
    TNT_CUDA_ALL_FUNCS(TNT_RESOLVE)
#undef TNT_RESOLVE
    return missing;
}

static void clear(const char *lib) {
#define TNT_CLEAR(l, ret, name, params)                                                            \
    if (!strcmp(#l, lib)) tnt__cuda.name = NULL;
    TNT_CUDA_ALL_FUNCS(TNT_CLEAR)
#undef TNT_CLEAR
}

/* cuBLAS's status names (cuBLAS has cublasGetStatusName only from 11.4 on: our own table) */
static const char *cublas_name(int code) {
    switch (code) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *tnt__gpu_error_name(const char *lib, int code) {
    const char *name = NULL;
    if (!strcmp(lib, "cuda")) {
        /* the SDK's stub library (and a fake) answer nothing: name what the loader meets itself */
        if (tnt__cuda.cuGetErrorName && tnt__cuda.cuGetErrorName(code, &name) != TNT_CUDA_SUCCESS) name = NULL;
        if (!name && code == TNT_CUDA_ERROR_STUB_LIBRARY) name = "CUDA_ERROR_STUB_LIBRARY";
        if (!name && code == TNT_CUDA_ERROR_NO_DEVICE) name = "CUDA_ERROR_NO_DEVICE";
        if (!name && code == TNT_CUDA_ERROR_NOT_READY) name = "CUDA_ERROR_NOT_READY";
        return name ? name : "CUDA_ERROR_UNKNOWN";
    }
    if (!strcmp(lib, "cublas")) return cublas_name(code);
    if (!strcmp(lib, "cudnn") && tnt__cuda.cudnnGetErrorString) name = tnt__cuda.cudnnGetErrorString(code);
    if (!strcmp(lib, "nccl") && tnt__cuda.ncclGetErrorString) name = tnt__cuda.ncclGetErrorString(code);
    return name ? name : "unknown error";
}

tnt_status tnt__gpu_lib_error(const char *lib, int code, const char *call, const char *file, int line) {
    const char *base = strstr(file, "src/");
    return tnt__error(TNT_ERR_BACKEND, "%s:%d: %s: %s (%d)", base ? base + 4 : file, line, call,
                      tnt__gpu_error_name(lib, code), code);
}

/* Each folder of TNT_CUDA_LIBDIR must exist: a typo would otherwise read as "no cuBLAS". */
static bool check_libdir(const char *dirs) {
    for (const char *d = dirs; d && *d;) {
        const char *end = strchr(d, ':');
        const int len = end ? (int)(end - d) : (int)strlen(d);
        char path[4096];
        struct stat st;
        if (len > 0 && snprintf(path, sizeof path, "%.*s", len, d) < (int)sizeof path &&
            (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
            snprintf(loader.why, sizeof loader.why, "TNT_CUDA_LIBDIR: %.200s is not a folder", path);
            return false;
        }
        d = end ? end + 1 : NULL;
    }
    return true;
}

static bool load_driver(const tnt__config *c) {
    static const char *const default_driver[] = {"libcuda.so.1", NULL};
    const char *which = "";
    void *h = c->cuda_driver[0] ? dlopen(c->cuda_driver, RTLD_NOW | RTLD_LOCAL)
                                : open_library(default_driver, c->cuda_libdir, &which);
    const char *name = c->cuda_driver[0] ? c->cuda_driver : "libcuda.so.1";
    if (!h) {
        snprintf(loader.why, sizeof loader.why, "no %.200s", name);
        return false;
    }
    const char *missing = resolve("cuda", h);
    if (missing) {
        snprintf(loader.why, sizeof loader.why, "%.150s lacks %s (a driver older than CUDA 11.5?)", name, missing);
        clear("cuda");
        return false;
    }
    CUresult r = tnt__cuda.cuInit(0);
    if (r != TNT_CUDA_SUCCESS) {
        snprintf(loader.why, sizeof loader.why, "cuInit: %s (%d)", tnt__gpu_error_name("cuda", r), r);
        return false;
    }
    int version = 0;
    if ((r = tnt__cuda.cuDriverGetVersion(&version)) != TNT_CUDA_SUCCESS) {
        snprintf(loader.why, sizeof loader.why, "cuDriverGetVersion: %s (%d)", tnt__gpu_error_name("cuda", r), r);
        return false;
    }
    tnt__cuda.driver_version = version;
    if (version < MIN_DRIVER) {
        snprintf(loader.why, sizeof loader.why, "CUDA driver %d.%d is too old: the kernels need 11.5 or newer",
                 version / 1000, version % 1000 / 10);
        return false;
    }
    int n = 0;
    if ((r = tnt__cuda.cuDeviceGetCount(&n)) != TNT_CUDA_SUCCESS || n <= 0) {
        if (r != TNT_CUDA_SUCCESS)
            snprintf(loader.why, sizeof loader.why, "cuDeviceGetCount: %s (%d)", tnt__gpu_error_name("cuda", r), r);
        else
            snprintf(loader.why, sizeof loader.why, "no device");
        return false;
    }
    tnt__cuda.device_count = n;
    return true;
}

static bool load_cublas(const tnt__config *c) {
    static const char *const sonames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", NULL};
    const char *which = "";
    void *h = open_library(sonames, c->cuda_libdir, &which);
    if (!h) {
        snprintf(loader.why, sizeof loader.why, "no libcublas.so.13, .so.12 or .so.11%s",
                 c->cuda_libdir[0] ? ", also not in TNT_CUDA_LIBDIR" : " (TNT_CUDA_LIBDIR can name its folder)");
        return false;
    }
    const char *missing = resolve("cublas", h);
    if (missing) {
        snprintf(loader.why, sizeof loader.why, "%s lacks %s", which, missing);
        clear("cublas");
        return false;
    }
    return true;
}

/* cuDNN and NCCL are optional: their absence is recorded, not a reason for the CPU. */
static void load_cudnn(const tnt__config *c) {
    static const char *const sonames[] = {"libcudnn.so.9", "libcudnn.so.8", NULL};
    const char *which = "";
    void *h = open_library(sonames, c->cuda_libdir, &which);
    const char *missing = h ? resolve("cudnn", h) : NULL;
    if (!h) {
        snprintf(tnt__cuda.cudnn_why, sizeof tnt__cuda.cudnn_why, "no libcudnn.so.9 or .so.8");
    } else if (missing) {
        /* cuDNN 10 may drop the legacy API the convolutions use */
        snprintf(tnt__cuda.cudnn_why, sizeof tnt__cuda.cudnn_why, "%s lacks %s", which, missing);
    } else if ((tnt__cuda.cudnn_version = (int)tnt__cuda.cudnnGetVersion()) < MIN_CUDNN) {
        const int v = tnt__cuda.cudnn_version;
        snprintf(tnt__cuda.cudnn_why, sizeof tnt__cuda.cudnn_why, "cuDNN %d.%d.%d is too old (8.0 or newer)",
                 v / 1000, v % 1000 / 100, v % 100);
    } else {
        tnt__cuda.has_cudnn = true;
        return;
    }
    tnt__cuda.cudnn_version = 0;
    clear("cudnn");
}

static void load_nccl(const tnt__config *c) {
    static const char *const sonames[] = {"libnccl.so.2", NULL};
    const char *which = c->nccl_library[0] ? c->nccl_library : "libnccl.so.2";
    void *h = c->nccl_library[0] ? dlopen(c->nccl_library, RTLD_NOW | RTLD_LOCAL)
                                 : open_library(sonames, c->cuda_libdir, &which);
    const char *missing = h ? resolve("nccl", h) : NULL;
    int v = 0;
    if (!h) {
        snprintf(tnt__cuda.nccl_why, sizeof tnt__cuda.nccl_why, "no %.140s", which);
    } else if (missing) {
        snprintf(tnt__cuda.nccl_why, sizeof tnt__cuda.nccl_why, "%.100s lacks %s", which, missing);
    } else if (tnt__cuda.ncclGetVersion(&v) != TNT_NCCL_SUCCESS || v < MIN_NCCL) {
        /* 2.9 on: 10000 major + 100 minor + patch (older ones: 1000 major + 100 minor + patch) */
        snprintf(tnt__cuda.nccl_why, sizeof tnt__cuda.nccl_why, "NCCL %d.%d.%d is too old (2.10 or newer)",
                 v >= 10000 ? v / 10000 : v / 1000, v >= 10000 ? v % 10000 / 100 : v % 1000 / 100, v % 100);
    } else {
        tnt__cuda.has_nccl = true;
        tnt__cuda.nccl_version = v;
        return;
    }
    clear("nccl");
}

static void load(void) {
    const tnt__config *c = tnt__config_get();
    if (c->gpu_emulate > 0) {
        loader.available = loader.emulated = true;
        return;
    }
    if (!check_libdir(c->cuda_libdir) || !load_driver(c)) return;
#ifndef TNT_GPU_KERNELS
    /* checked after the driver: on a machine without one, "no libcuda.so.1" is the answer that helps */
    snprintf(loader.why, sizeof loader.why, "built without GPU kernels (TNT_GPU=OFF, or no clang-14 at configure time)");
    return;
#endif
    if (!load_cublas(c)) return;
    load_cudnn(c);
    load_nccl(c);
    loader.available = true;
}

bool tnt__gpu_available(const char **why) {
    pthread_once(&loader.once, load);
    if (why) *why = loader.available ? "" : loader.why;
    return loader.available;
}

bool tnt__gpu_emulated(void) {
    pthread_once(&loader.once, load);
    return loader.emulated;
}

int tnt__gpu_device_count(void) {
    if (!tnt__gpu_available(NULL)) return 0;
    return loader.emulated ? (int)tnt__config_get()->gpu_emulate : tnt__cuda.device_count;
}
