/* emulated.c: the emulated device's memory (TNT_GPU_EMULATE). On a GPU, host code that reads or
 * writes device memory crashes; on the emulated device the memory is the host's, so the same bug
 * would pass unseen. Here device memory lives in one address range reserved at the first
 * allocation and kept PROT_NONE except while the runtime itself copies, runs a host kernel or an
 * sgemm (a "window", counted across nesting and threads): host code touching it outside gets a
 * SIGSEGV, after a message that names the cause. Addresses are handed out in page-rounded steps;
 * freed pages are given back (MADV_DONTNEED) and their addresses reused first-fit. Every allocation is also recorded with its size, for the runtime's checks of device
 * pointers. Where the range cannot be reserved (a limit on virtual memory, some tools) allocations
 * are plain host memory with the same records. */
#include "gpu/api.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* addresses, not memory: pages are backed only once written */
#define RANGE_BYTES ((size_t)16 << 30)

typedef struct block {
    uintptr_t begin;
    size_t bytes;
} block;

static struct {
    pthread_mutex_t lock;
    block *blocks; /* the live allocations */
    size_t n, cap, live_bytes;
    char *range;         /* the reserved addresses; NULL: plain host memory */
    size_t used;         /* bytes of the range handed out so far (page multiples) */
    block *holes;        /* freed steps of the range, for reuse */
    size_t n_holes, cap_holes;
    size_t page;
    int windows;         /* open windows: the range is readable while > 0 */
    bool tried;          /* reserving the range was attempted */
    struct sigaction previous;
} mem = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char fault_message[] =
    "[tarantella] ERROR: host code touched emulated GPU memory (TNT_GPU_EMULATE) outside the GPU runtime's "
    "calls; on a GPU this is a crash as well: copy device memory to the host with tnt__gpu_copy_to_host first\n";

/* SIGSEGV inside the range: say why, then fault again under the handler that was there before */
static void on_fault(int sig, siginfo_t *info, void *context) {
    (void)context;
    const uintptr_t a = (uintptr_t)info->si_addr, begin = (uintptr_t)mem.range;
    if (sig == SIGSEGV && mem.range && a >= begin && a - begin < RANGE_BYTES) {
        ssize_t ignored = write(STDERR_FILENO, fault_message, sizeof fault_message - 1);
        (void)ignored;
    }
    sigaction(SIGSEGV, &mem.previous, NULL); /* the faulting access runs again under it */
}

/* under mem.lock */
static void reserve_range(void) {
    mem.tried = true;
    mem.page = (size_t)sysconf(_SC_PAGESIZE);
    void *r = mmap(NULL, RANGE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        tnt_log(TNT_LOG_INFO, "emulated GPU memory: no %zu GiB of addresses to reserve: plain host memory, "
                "host reads of device memory go unnoticed", RANGE_BYTES >> 30);
        return;
    }
    mem.range = r;
    struct sigaction handler;
    memset(&handler, 0, sizeof handler);
    handler.sa_sigaction = on_fault;
    handler.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGSEGV, &handler, &mem.previous);
}

static bool record(void *p, size_t bytes) {
    if (mem.n == mem.cap) {
        const size_t cap = mem.cap ? 2 * mem.cap : 64;
        block *b = realloc(mem.blocks, cap * sizeof *b);
        if (!b) return false;
        mem.blocks = b, mem.cap = cap;
    }
    mem.blocks[mem.n++] = (block){(uintptr_t)p, bytes};
    mem.live_bytes += bytes;
    return true;
}

void *tnt__gpu_emu_alloc(size_t bytes) {
    const size_t size = bytes ? bytes : 1; /* a distinct address even for an empty buffer */
    pthread_mutex_lock(&mem.lock);
    if (!mem.tried) reserve_range();
    void *p = NULL;
    if (mem.range) {
        const size_t step = (size + mem.page - 1) / mem.page * mem.page;
        for (size_t i = 0; i < mem.n_holes && !p; i++) /* first fit among freed steps */
            if (mem.holes[i].bytes >= step) {
                p = (void *)mem.holes[i].begin;
                mem.holes[i].begin += step;
                mem.holes[i].bytes -= step;
                if (!mem.holes[i].bytes) mem.holes[i] = mem.holes[--mem.n_holes];
            }
        if (!p && step <= RANGE_BYTES - mem.used) {
            p = mem.range + mem.used;
            mem.used += step;
        }
        if (p && mprotect(p, step, PROT_READ | PROT_WRITE) != 0) p = NULL;
    } else {
        p = aligned_alloc(256, (size + 255) / 256 * 256);
    }
    if (p) memset(p, 0xff, size); /* NaN: a GPU does not zero new memory either */
    if (p && mem.range && mem.windows == 0) mprotect(p, (size + mem.page - 1) / mem.page * mem.page, PROT_NONE);
    if (p && !record(p, bytes)) {
        if (!mem.range) free(p);
        p = NULL;
    }
    pthread_mutex_unlock(&mem.lock);
    if (!p)
        tnt__error(TNT_ERR_NOMEM, "tnt__gpu_malloc: %zu bytes of emulated device memory (%zu GiB of addresses in all)",
                   bytes, RANGE_BYTES >> 30);
    return p;
}

bool tnt__gpu_emu_free(void *p) {
    pthread_mutex_lock(&mem.lock);
    bool found = false;
    for (size_t i = 0; i < mem.n && !found; i++) {
        if (mem.blocks[i].begin != (uintptr_t)p) continue;
        const size_t bytes = mem.blocks[i].bytes ? mem.blocks[i].bytes : 1;
        mem.live_bytes -= mem.blocks[i].bytes;
        mem.blocks[i] = mem.blocks[--mem.n];
        found = true;
        if (!mem.range) {
            free(p);
            continue;
        }
        const size_t step = (bytes + mem.page - 1) / mem.page * mem.page;
        madvise(p, step, MADV_DONTNEED);
        if (mem.n_holes == mem.cap_holes) { /* without room the addresses are not reused */
            const size_t cap = mem.cap_holes ? 2 * mem.cap_holes : 64;
            block *h = realloc(mem.holes, cap * sizeof *h);
            if (h) mem.holes = h, mem.cap_holes = cap;
        }
        if (mem.n_holes < mem.cap_holes) mem.holes[mem.n_holes++] = (block){(uintptr_t)p, step};
    }
    pthread_mutex_unlock(&mem.lock);
    return found;
}

void tnt__gpu_emu_window_open(void) {
    pthread_mutex_lock(&mem.lock);
    if (mem.windows++ == 0 && mem.range && mem.used) mprotect(mem.range, mem.used, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&mem.lock);
}

void tnt__gpu_emu_window_close(void) {
    pthread_mutex_lock(&mem.lock);
    if (--mem.windows == 0 && mem.range && mem.used) mprotect(mem.range, mem.used, PROT_NONE);
    pthread_mutex_unlock(&mem.lock);
}

bool tnt__gpu_emulated_is_device(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&mem.lock);
    bool inside = false;
    for (size_t i = 0; i < mem.n && !inside; i++) {
        const block *b = &mem.blocks[i];
        inside = a >= b->begin && a - b->begin <= b->bytes && bytes <= b->bytes - (a - b->begin);
    }
    pthread_mutex_unlock(&mem.lock);
    return inside;
}

size_t tnt__gpu_emulated_live_bytes(void) {
    pthread_mutex_lock(&mem.lock);
    const size_t n = mem.live_bytes;
    pthread_mutex_unlock(&mem.lock);
    return n;
}

size_t tnt__gpu_emulated_live_allocations(void) {
    pthread_mutex_lock(&mem.lock);
    const size_t n = mem.n;
    pthread_mutex_unlock(&mem.lock);
    return n;
}
