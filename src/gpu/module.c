/* module.c: the kernels. On a GPU: the PTX built into the library (tnt__gpu_ptx) loaded once with
 * cuModuleLoadDataEx (the driver JIT-compiles it for the device; its log comes with a failure),
 * each function looked up by name once and cached. Emulated: the same names found among the
 * kernels compiled as host C (host_kernels.h), run block after block on the calling thread. */
#include "gpu/api.h"
#include "gpu/host_kernels.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef struct cached_function {
    const char *name; /* owned copy */
    const char *seen; /* the caller's pointer for it (a string literal, usually): found without strcmp */
    CUfunction function;
    tnt__gpu_host_kernel host;
} cached_function;

static struct {
    pthread_mutex_t lock;
    cached_function *items;
    size_t n, cap;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void cache_clear(void) {
    pthread_mutex_lock(&cache.lock);
    for (size_t i = 0; i < cache.n; i++) free((char *)cache.items[i].name);
    free(cache.items);
    cache.items = NULL;
    cache.n = cache.cap = 0;
    pthread_mutex_unlock(&cache.lock);
}

tnt_status tnt__gpu_module_open(void) {
    cache_clear();
#ifdef TNT_GPU_KERNELS
    if (tnt__gpu.emulated) return TNT_OK;
    static char log[8192];
    log[0] = 0;
    CUjit_option options[2] = {TNT_CU_JIT_ERROR_LOG_BUFFER, TNT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[2] = {log, (void *)(uintptr_t)sizeof log};
    const CUresult r = tnt__cuda.cuModuleLoadDataEx(&tnt__gpu.module, tnt__gpu_ptx, 2, options, values);
    if (r != TNT_CUDA_SUCCESS) {
        tnt__gpu.module = NULL;
        return tnt__error(TNT_ERR_BACKEND, "gpu/module.c: cuModuleLoadDataEx of the kernels' PTX (%zu bytes): %s (%d)%s%.2000s",
                          strlen(tnt__gpu_ptx), tnt__gpu_error_name("cuda", r), r, log[0] ? ": " : "", log);
    }
    return TNT_OK;
#else
    return tnt__gpu.emulated ? TNT_OK : tnt__error(TNT_ERR_UNSUPPORTED, "built without GPU kernels");
#endif
}

void tnt__gpu_module_close(void) {
    cache_clear();
    if (tnt__gpu.module) tnt__cuda.cuModuleUnload(tnt__gpu.module);
    tnt__gpu.module = NULL;
}

/* The cached entry for `name`, looked up in the module (or among the host kernels) the first time. */
static tnt_status find(const char *name, cached_function *out) {
    pthread_mutex_lock(&cache.lock);
    for (int by_text = 0; by_text < 2; by_text++) /* launches name kernels by literals: pointers first */
        for (size_t i = 0; i < cache.n; i++)
            if (by_text ? !strcmp(cache.items[i].name, name) : cache.items[i].seen == name) {
                cache.items[i].seen = name;
                *out = cache.items[i];
                pthread_mutex_unlock(&cache.lock);
                return TNT_OK;
            }
    pthread_mutex_unlock(&cache.lock);

    cached_function f = {.name = NULL, .seen = name};
    if (tnt__gpu.emulated) {
        f.host = tnt__gpu_host_kernel_find(name);
        if (!f.host) return tnt__error(TNT_ERR_ARG, "tnt__gpu_launch: no kernel named '%s' among the host kernels", name);
    } else {
        const CUresult r = tnt__cuda.cuModuleGetFunction(&f.function, tnt__gpu.module, name);
        if (r != TNT_CUDA_SUCCESS)
            return tnt__error(TNT_ERR_ARG, "tnt__gpu_launch: no kernel named '%s' in the PTX (cuModuleGetFunction: %s)",
                              name, tnt__gpu_error_name("cuda", r));
    }
    if (!(f.name = tnt__strdup(name))) return TNT_ERR_NOMEM;
    pthread_mutex_lock(&cache.lock);
    if (cache.n == cache.cap) {
        size_t cap = cache.cap ? 2 * cache.cap : 64;
        cached_function *items = realloc(cache.items, cap * sizeof *items);
        if (items) cache.items = items, cache.cap = cap;
    }
    if (cache.n < cache.cap) cache.items[cache.n++] = f; /* else found again next time */
    else free((char *)f.name);
    pthread_mutex_unlock(&cache.lock);
    *out = f;
    return TNT_OK;
}

tnt_status tnt__gpu_launch(const char *name, unsigned grid, unsigned block, size_t shared_bytes, void **args) {
    tnt_status status = tnt__gpu_enter("tnt__gpu_launch");
    if (status != TNT_OK) return status;
    if (!name) return tnt__error(TNT_ERR_ARG, "tnt__gpu_launch: the kernel name is NULL");
    if (grid == 0 || grid > 0x7fffffffu || block == 0 || block > 1024)
        return tnt__error(TNT_ERR_ARG, "tnt__gpu_launch '%s': grid %u of blocks of %u threads: expected a grid of "
                          "1 to 2^31-1 blocks of 1 to 1024 threads", name, grid, block);
    if (shared_bytes > 48 * 1024) /* more needs cuFuncSetAttribute, which no kernel asks for */
        return tnt__error(TNT_ERR_ARG, "tnt__gpu_launch '%s': %zu bytes of shared memory: at most 49152", name,
                          shared_bytes);
    cached_function f = {.name = NULL};
    if ((status = find(name, &f)) != TNT_OK) return status;
    if (tnt__gpu.emulated) {
        tnt__gpu_emu_window_open();
        f.host(grid, block, shared_bytes, args);
        tnt__gpu_emu_window_close();
        return TNT_OK;
    }
    TNT_GPU_CHECK(cuda, cuLaunchKernel(f.function, grid, 1, 1, block, 1, 1, (unsigned)shared_bytes,
                                       tnt__gpu.streams[TNT__GPU_COMPUTE], args, NULL));
out:
    return status == TNT_OK ? TNT_OK
                            : tnt__error_prefix(status, "kernel '%s' (grid %u, block %u, %zu bytes shared): ", name,
                                                grid, block, shared_bytes);
}

unsigned tnt__gpu_grid_for(int64_t n, unsigned block) {
    if (block == 0) block = 256;
    /* grid-stride kernels: enough blocks to fill the device a few times over, no more */
    const int64_t limit = (int64_t)(tnt__gpu.multiprocessors > 0 ? tnt__gpu.multiprocessors : 8) * 32;
    int64_t blocks = n > 0 ? (n + block - 1) / block : 1;
    return (unsigned)(blocks < limit ? blocks : limit);
}

tnt_status tnt__gpu_col_sums(const float *x, float *out, int64_t rows, int64_t cols) {
    /* the kernel's tiles (its tw): every tile a block, as many as the device takes at once; a
     * grid sized by the columns alone left 256 of them to one block */
    int64_t tw = 1;
    while (tw < 32 && tw < cols) tw *= 2;
    const int64_t tiles = (cols + tw - 1) / tw, limit = (int64_t)(tnt__gpu.multiprocessors > 0 ? tnt__gpu.multiprocessors : 8) * 32;
    long long r = rows, c = cols;
    void *args[] = {&x, &out, &r, &c};
    return tnt__gpu_launch("tnt_k_col_sums", (unsigned)(tiles < 1 ? 1 : tiles < limit ? tiles : limit), 256, 0, args);
}
