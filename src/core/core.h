/* core.h: internal helpers shared by every module: error reporting, allocation, the
 * counter-based random generator and small shape utilities. */
#ifndef TNT_CORE_H
#define TNT_CORE_H

#include "tarantella.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Records a formatted message for tnt_last_error() and returns status, so that callers write
 * `return tnt__error(TNT_ERR_ARG, "batch size %lld: expected > 0", n);` */
tnt_status tnt__error(tnt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prefixes the current message with context: "model 'x': " + old message. Returns status. */
tnt_status tnt__error_prefix(tnt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tnt__error_clear(void);
/* How many errors (tnt__error, tnt_set_error) this process has raised, on any thread. */
uint64_t tnt__error_count(void);

/* 64-byte aligned allocation, zero-filled; NULL (with tnt__error set) on failure. Free with
 * tnt__free. */
void *tnt__alloc(size_t bytes);
void tnt__free(void *p);
/* calloc/strdup that record TNT_ERR_NOMEM on failure */
void *tnt__calloc(size_t n, size_t size);
char *tnt__strdup(const char *s);

/* Counter-based generator (SplitMix64 over a key and a counter): the value for (seed, index) does
 * not depend on how many values were drawn before, which keeps initialization and dropout
 * reproducible across thread counts and ranks. */
uint64_t tnt__hash64(uint64_t x);
static inline uint64_t tnt__rand_u64(uint64_t seed, uint64_t index) {
    return tnt__hash64(seed ^ tnt__hash64(index + 0x9E3779B97F4A7C15ull));
}
/* uniform in [0, 1) with 24 random bits */
static inline float tnt__rand_uniform(uint64_t seed, uint64_t index) {
    return (float)(tnt__rand_u64(seed, index) >> 40) * (1.0f / 16777216.0f);
}
/* standard normal (Box-Muller on two draws) */
float tnt__rand_normal(uint64_t seed, uint64_t index);
/* truncated normal at 2 stddev, as Keras's TruncatedNormal-based initializers */
float tnt__rand_truncated_normal(uint64_t seed, uint64_t index);

/* Shapes */
bool tnt__shape_equal(tnt_shape a, tnt_shape b);
/* prepend a batch dimension */
tnt_shape tnt__shape_with_batch(int64_t n, tnt_shape s);

/* Seconds on a monotonic clock (durations only) */
double tnt__now(void);

/* Keeps src/core/cpu_check.c (its constructor refuses a CPU below the build's x86-64-v3 with a
 * message) in programs that link the static library; tnt_init calls it. */
void tnt__cpu_check_linked(void);

/* Sequential sum with a double accumulator (deterministic, order fixed) */
double tnt__sum_f32(const float *x, int64_t n);

#define TNT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TNT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TNT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
