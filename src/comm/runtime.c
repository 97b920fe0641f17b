/* runtime.c: process-wide runtime (ranks, logging). Without the launcher a program is one rank;
 * the data-parallel runtime adds MPI underneath without changing these calls. */
#include "core/core.h"
#include "comm/comm.h"
#include "kernels/dnnl_util.h"

#include <stdio.h>
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

static struct {
    bool initialized;
    int rank, size;
    tnt_log_level level;
    bool log_all;
} rt = {.size = 1, .level = TNT_LOG_WARNING};

static tnt_log_level parse_level(const char *s, tnt_log_level fallback) {
    if (!s || !*s) return fallback;
    if (!strcasecmp(s, "DEBUG")) return TNT_LOG_DEBUG;
    if (!strcasecmp(s, "INFO")) return TNT_LOG_INFO;
    if (!strcasecmp(s, "WARNING") || !strcasecmp(s, "WARN")) return TNT_LOG_WARNING;
    if (!strcasecmp(s, "ERROR")) return TNT_LOG_ERROR;
    fprintf(stderr, "tarantella: WARNING: TNT_LOG_LEVEL=%s is not one of DEBUG, INFO, WARNING, ERROR\n", s);
    return fallback;
}

static bool env_true(const char *name) {
    const char *v = getenv(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"));
}

tnt_status tnt_init(int *argc, char ***argv) {
    if (rt.initialized) return TNT_OK;
#if defined(__x86_64__) || defined(__i386__)
    /* Flush denormals to zero, as TensorFlow does on its CPU threads: late in training tiny
     * gradients and optimizer moments turn denormal and slow every kernel down (measured: an
     * epoch of LeNet-5 with Adam went from 39 to 65 ms/step). Threads started later (OpenMP,
     * comm, prefetch) inherit the setting. */
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
    tnt_status s = tnt__world_init(argc, argv);
    if (s != TNT_OK) return s;
    rt.rank = tnt__world_rank();
    rt.size = tnt__world_size();
    rt.level = parse_level(getenv("TNT_LOG_LEVEL"), TNT_LOG_WARNING);
    rt.log_all = env_true("TNT_LOG_ON_ALL_DEVICES");
    rt.initialized = true;
    return TNT_OK;
}

void tnt_finalize(void) {
    tnt__dnnl_shutdown();
    tnt__world_finalize();
    rt.initialized = false;
}

int tnt_get_rank(void) { return rt.rank; }
int tnt_get_size(void) { return rt.size; }
int tnt_get_master_rank(void) { return 0; }
bool tnt_is_master_rank(void) { return rt.rank == 0; }

void tnt_log(tnt_log_level level, const char *fmt, ...) {
    static const char *names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    if (!rt.initialized) rt.level = parse_level(getenv("TNT_LOG_LEVEL"), TNT_LOG_WARNING);
    if (level < rt.level || (unsigned)level > TNT_LOG_ERROR) return;
    if (rt.rank != 0 && !rt.log_all) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[tarantella] %s: [rank %d] %s\n", names[level], rt.rank, msg);
}
