/* gpu_device_util.h: moving test data to and from the device (real or emulated) in the tests of
 * the layers' device paths (test_gpu_attention.c, test_gpu_conv1x1.c). */
#ifndef TNT_GPU_DEVICE_UTIL_H
#define TNT_GPU_DEVICE_UTIL_H

#include "testutil.h"

#include "gpu/gpu.h"

#include <stdlib.h>

/* n floats copied into new device memory (freed with tnt__gpu_free) */
static inline void *dev_up(const float *x, int64_t n) {
    void *d = tnt__gpu_malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(d);
    tu_ok(tnt__gpu_copy_to_device(d, x, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    return d;
}

/* n device floats copied into new host memory (freed with free), the copy finished */
static inline float *dev_down(const void *d, int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
    tu_ok(tnt__gpu_copy_to_host(x, d, (size_t)n * sizeof(float), TNT__GPU_COMPUTE));
    tu_ok(tnt__gpu_sync(TNT__GPU_COMPUTE));
    return x;
}

#endif
