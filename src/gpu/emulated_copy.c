/* emulated_copy.c: the emulated device's copy stream runs late. On a GPU the copy stream runs
 * beside the compute stream, and only events order one against the other; an emulated device that
 * ran every copy at once would hide a missing event, since the data would always be there in
 * time. So the copies, zeroings and host transfers queued on TNT__GPU_COPY wait here until
 * something forces them, which is exactly what orders them on a GPU: the host waiting for the
 * stream or for an event recorded on it, the compute stream waiting for such an event (the
 * compute stream runs at once, so whatever it queues next runs after them), or memory being freed
 * (cuMemFree waits for the device). A consumer that forgot its wait then reads the NaN of new
 * memory or the bytes before the copy, and a producer that overwrites what a pending copy still
 * had to read hands it the new bytes: both show up as wrong results in the tests.
 *
 * As the driver does, a copy from pageable host memory reads its source at the call (the staging
 * of cuMemcpyHtoDAsync), and a copy to pageable host memory completes before the call returns;
 * page-locked memory (tnt__gpu_host_malloc) is read and written when the copy runs. */
#include "gpu/api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct pending {
    tnt__emu_copy_kind kind;
    void *dst;
    const void *src;
    void *snapshot; /* owned: a pageable source as it was at the call */
    size_t bytes;
} pending;

typedef struct region {
    const char *begin;
    size_t bytes;
} region;

static struct {
    pthread_mutex_t lock;
    pending *queue; /* ops [done, issued) of the copy stream, queue[0] being op `done` */
    size_t n, cap;
    uint64_t issued, done;
    region *pinned; /* page-locked host allocations */
    size_t n_pinned, cap_pinned;
} late = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void run_one(const pending *op) {
    tnt__gpu_emu_window_open();
    switch (op->kind) {
    case TNT__EMU_ZERO: memset(op->dst, 0, op->bytes); break;
    default: memmove(op->dst, op->snapshot ? op->snapshot : op->src, op->bytes); break;
    }
    tnt__gpu_emu_window_close();
}

/* under late.lock */
static void run_until(uint64_t mark) {
    size_t k = 0;
    for (; k < late.n && late.done < mark; k++, late.done++) {
        run_one(&late.queue[k]);
        free(late.queue[k].snapshot);
    }
    memmove(late.queue, late.queue + k, (late.n - k) * sizeof *late.queue);
    late.n -= k;
}

/* under late.lock */
static bool is_pinned(const void *p, size_t bytes) {
    const char *c = p;
    for (size_t i = 0; i < late.n_pinned; i++)
        if (c >= late.pinned[i].begin && (size_t)(c - late.pinned[i].begin) + bytes <= late.pinned[i].bytes) return true;
    return false;
}

tnt_status tnt__gpu_emu_copy(tnt__emu_copy_kind kind, tnt__gpu_stream stream, void *dst, const void *src, size_t bytes) {
    pending op = {kind, dst, src, NULL, bytes};
    if (stream != TNT__GPU_COPY) {
        run_one(&op);
        return TNT_OK;
    }
    pthread_mutex_lock(&late.lock);
    tnt_status s = TNT_OK;
    if (kind == TNT__EMU_TO_HOST && !is_pinned(dst, bytes)) { /* returns once done: the stream drains */
        run_until(late.issued);
        run_one(&op);
        goto out;
    }
    if (kind == TNT__EMU_TO_DEVICE && !is_pinned(src, bytes)) {
        if (!(op.snapshot = malloc(bytes))) {
            s = tnt__error(TNT_ERR_NOMEM, "emulated copy stream: %zu bytes of staging", bytes);
            goto out;
        }
        memcpy(op.snapshot, src, bytes);
    }
    if (late.n == late.cap) {
        const size_t cap = late.cap ? 2 * late.cap : 64;
        pending *q = realloc(late.queue, cap * sizeof *q);
        if (!q) {
            free(op.snapshot);
            s = tnt__error(TNT_ERR_NOMEM, "emulated copy stream: a queue of %zu copies", cap);
            goto out;
        }
        late.queue = q, late.cap = cap;
    }
    late.queue[late.n++] = op;
    late.issued++;
out:
    pthread_mutex_unlock(&late.lock);
    return s;
}

uint64_t tnt__gpu_emu_copy_mark(void) {
    pthread_mutex_lock(&late.lock);
    const uint64_t mark = late.issued;
    pthread_mutex_unlock(&late.lock);
    return mark;
}

void tnt__gpu_emu_copy_run(uint64_t mark) {
    pthread_mutex_lock(&late.lock);
    run_until(mark);
    pthread_mutex_unlock(&late.lock);
}

size_t tnt__gpu_emu_copies_pending(void) {
    pthread_mutex_lock(&late.lock);
    const size_t n = late.n;
    pthread_mutex_unlock(&late.lock);
    return n;
}

bool tnt__gpu_emu_pinned(void *p, size_t bytes, bool add) {
    pthread_mutex_lock(&late.lock);
    bool ok = true;
    if (add) {
        if (late.n_pinned == late.cap_pinned) {
            const size_t cap = late.cap_pinned ? 2 * late.cap_pinned : 16;
            region *r = realloc(late.pinned, cap * sizeof *r);
            if (r) late.pinned = r, late.cap_pinned = cap;
        }
        ok = late.n_pinned < late.cap_pinned;
        if (ok) late.pinned[late.n_pinned++] = (region){p, bytes};
    } else {
        run_until(late.issued); /* cuMemFreeHost waits for the device too */
        for (size_t i = 0; i < late.n_pinned; i++)
            if (late.pinned[i].begin == p) late.pinned[i] = late.pinned[--late.n_pinned];
    }
    pthread_mutex_unlock(&late.lock);
    return ok;
}
