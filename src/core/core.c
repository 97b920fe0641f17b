/* core.c: error messages, allocation, random numbers and shapes. */
#include "core/core.h"

#include <sys/mman.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

static _Thread_local char last_error[1024];
static _Thread_local tnt_status last_status;
/* errors raised by any thread: the runtime compares it with the count its ranks last agreed on */
static _Atomic uint64_t errors_raised;

uint64_t tnt__error_count(void) { return errors_raised; }

tnt_status tnt__error(tnt_status status, const char *fmt, ...) {
    errors_raised++;
    last_status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

/* The public name of tnt__error, for user code (custom layers, callbacks). */
tnt_status tnt_set_error(tnt_status status, const char *fmt, ...) {
    errors_raised++;
    last_status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

tnt_status tnt__error_prefix(tnt_status status, const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, prefix, n);
    size_t rest = strlen(old);
    if (n + rest >= sizeof last_error) rest = sizeof last_error - 1 - n;
    memcpy(last_error + n, old, rest);
    last_error[n + rest] = '\0';
    return status;
}

void tnt__error_clear(void) {
    last_error[0] = '\0';
    last_status = TNT_OK;
}

const char *tnt_last_error(void) { return last_error; }
/* A prefix added on the way up (tnt__error_prefix) keeps the status of the error's origin. */
tnt_status tnt_last_status(void) { return last_status; }

const char *tnt_status_name(tnt_status status) {
    switch (status) {
    case TNT_OK: return "TNT_OK";
    case TNT_ERR_ARG: return "TNT_ERR_ARG";
    case TNT_ERR_SHAPE: return "TNT_ERR_SHAPE";
    case TNT_ERR_IO: return "TNT_ERR_IO";
    case TNT_ERR_FORMAT: return "TNT_ERR_FORMAT";
    case TNT_ERR_NOMEM: return "TNT_ERR_NOMEM";
    case TNT_ERR_STATE: return "TNT_ERR_STATE";
    case TNT_ERR_BACKEND: return "TNT_ERR_BACKEND";
    case TNT_ERR_UNSUPPORTED: return "TNT_ERR_UNSUPPORTED";
    case TNT_ERR_MPI: return "TNT_ERR_MPI";
    }
    return "TNT_ERR_UNKNOWN";
}

const char *tnt_version(void) { return TNT_VERSION_STRING; }

/* Buffers of 1 MB and more (weights, gradients, optimizer slots, activations) are mapped apart
 * and left out of fork(): the HDF5 reader's child process (io/h5_guard.c) does not read them, and
 * a fork write-protects every page it shares, so that the parent's next write to each faults
 * (100 MB: 430 ms after a fork on a virtual machine, 6 ms without). A 64-byte header before the
 * buffer holds the size of its mapping, or 0 for the heap. */
#define TNT__BIG_ALLOC (1u << 20)

void *tnt__alloc(size_t bytes) {
    /* at least one line after the header: for 0 bytes the pointer returned would be one past the
     * block's end, which valgrind does not count as a reference (the block "definitely lost") */
    if (bytes > SIZE_MAX / 2) {
        tnt__error(TNT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL; /* the rounding below would wrap around */
    }
    size_t total = (((bytes ? bytes : 1) + 63) & ~(size_t)63) + 64;
    char *base;
    if (total >= TNT__BIG_ALLOC) {
        base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zeroed */
        if (base == MAP_FAILED) base = NULL;
        else madvise(base, total, MADV_DONTFORK);
    } else if ((base = aligned_alloc(64, total))) {
        memset(base, 0, total);
    }
    if (!base) {
        tnt__error(TNT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    *(size_t *)base = total >= TNT__BIG_ALLOC ? total : 0;
    return base + 64;
}

void tnt__free(void *p) {
    if (!p) return;
    char *base = (char *)p - 64;
    size_t mapped = *(size_t *)base;
    if (mapped) munmap(base, mapped);
    else free(base);
}

void *tnt__calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) tnt__error(TNT_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *tnt__strdup(const char *s) {
    size_t len = strlen(s) + 1;
    char *p = malloc(len);
    if (!p) {
        tnt__error(TNT_ERR_NOMEM, "out of memory copying a string of %zu bytes", len);
        return NULL;
    }
    return memcpy(p, s, len);
}

uint64_t tnt__hash64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float tnt__rand_normal(uint64_t seed, uint64_t index) {
    double u1 = ((double)(tnt__rand_u64(seed, 2 * index) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(tnt__rand_u64(seed, 2 * index + 1) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

float tnt__rand_truncated_normal(uint64_t seed, uint64_t index) {
    /* redraw from a derived stream until inside 2 stddev; deterministic per index */
    for (uint64_t k = 0;; k++) {
        float v = tnt__rand_normal(seed + k * 0x632BE59BD9B4E019ull, index);
        if (v >= -2.0f && v <= 2.0f) return v;
    }
}

int64_t tnt_shape_numel(tnt_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dim[i];
    return n;
}

char *tnt_shape_str(tnt_shape s, char *buf, size_t size) {
    size_t used = 0;
    if (size == 0) return buf;
    used += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < s.ndim && used < size; i++) {
        if (s.dim[i] < 0)
            used += (size_t)snprintf(buf + used, size - used, "%sNone", i ? ", " : "");
        else
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                     (long long)s.dim[i]);
    }
    if (used < size) snprintf(buf + used, size - used, s.ndim == 1 ? ",)" : ")");
    return buf;
}

bool tnt__shape_equal(tnt_shape a, tnt_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dim[i] != b.dim[i]) return false;
    return true;
}

tnt_shape tnt__shape_with_batch(int64_t n, tnt_shape s) {
    tnt_shape r = {.ndim = s.ndim + 1};
    r.dim[0] = n;
    for (int i = 0; i < s.ndim && i + 1 < TNT_MAX_DIMS; i++) r.dim[i + 1] = s.dim[i];
    return r;
}

double tnt__sum_f32(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

tnt_tensor *tnt_tensor_new(tnt_shape shape) {
    if (shape.ndim < 0 || shape.ndim > TNT_MAX_DIMS) {
        tnt__error(TNT_ERR_SHAPE, "tensor: %d dimensions (expected 0..%d)", shape.ndim, TNT_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < shape.ndim; i++)
        if (shape.dim[i] < 0) {
            char b[128];
            tnt__error(TNT_ERR_SHAPE, "tensor: shape %s has a negative dimension",
                       tnt_shape_str(shape, b, sizeof b));
            return NULL;
        }
    tnt_tensor *t = tnt__calloc(1, sizeof *t);
    if (!t) return NULL;
    t->shape = shape;
    t->data = tnt__alloc((size_t)tnt_shape_numel(shape) * sizeof(float));
    if (!t->data) {
        free(t);
        return NULL;
    }
    return t;
}

void tnt_tensor_free(tnt_tensor *t) {
    if (!t) return;
    tnt__free(t->data);
    free(t);
}

double tnt__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
