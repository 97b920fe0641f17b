/* gpu_host_util.h: helpers of the tests that run the device kernels' host build
 * (test_gpu_host.c, test_gpu_host_layers.c): a launch by name with cuLaunchKernel-style
 * arguments, poisoned buffers, random data, error measures. */
#ifndef TNT_GPU_HOST_UTIL_H
#define TNT_GPU_HOST_UTIL_H

#include "testutil.h"

#include "gpu/host_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the arguments of one launch: ARGS(&x, &y, &n) */
#define ARGS(...) ((void *[]){__VA_ARGS__})

/* Runs kernel `name` over `grid` blocks (the host build: one thread per block). */
static inline void gh_launch(const char *name, unsigned grid, void **args) {
    tnt__gpu_host_kernel k = tnt__gpu_host_kernel_find(name);
    if (!k) fail_msg("no host build of kernel %s", name);
    k(grid, 256, 0, args);
}

/* n floats of a NaN with a payload that no arithmetic produces: what a kernel leaves unwritten
 * fails every comparison. */
static inline float *gh_poisoned(int64_t n) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(p);
    const uint32_t bits = 0x7fc0dead;
    for (int64_t i = 0; i < n; i++) memcpy(&p[i], &bits, sizeof bits);
    return p;
}

/* n floats uniform in [lo, hi) (tu_fill's sequence) */
static inline float *gh_random(int64_t n, float lo, float hi, uint64_t seed) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(p);
    tu_fill(p, n, seed);
    for (int64_t i = 0; i < n; i++) p[i] = lo + (p[i] + 1.0f) * 0.5f * (hi - lo);
    return p;
}

static inline float *gh_copy(const float *x, int64_t n) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(p);
    memcpy(p, x, (size_t)n * sizeof(float));
    return p;
}

/* the largest |a - b| / (atol + rtol |b|) over n values (<= 1: within tolerance); NaN counts as
 * infinitely far unless both are NaN */
static inline double gh_worst(const float *a, const float *b, int64_t n, double rtol, double atol, int64_t *at) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double r;
        if (isnan(a[i]) || isnan(b[i]))
            r = isnan(a[i]) && isnan(b[i]) ? 0 : INFINITY;
        else
            r = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));
        if (r > worst) {
            worst = r;
            if (at) *at = i;
        }
    }
    return worst;
}

/* asserts a within atol + rtol |b| of b (NaN where b is NaN), naming what and the worst index */
#define gh_assert_close(a, b, n, rtol, atol, what)                                                              \
    do {                                                                                                        \
        int64_t at_ = 0;                                                                                        \
        double w_ = gh_worst((a), (b), (n), (rtol), (atol), &at_);                                              \
        if (!(w_ <= 1.0))                                                                                       \
            fail_msg("%s:%d: %s[%lld]: got %.9g, expected %.9g (rtol %g, atol %g)", __FILE__, __LINE__, (what), \
                     (long long)at_, (double)(a)[at_], (double)(b)[at_], (double)(rtol), (double)(atol));       \
    } while (0)

#endif
