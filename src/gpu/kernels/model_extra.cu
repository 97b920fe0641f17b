/* model_extra.cu: kernels of the model's device path (the gpu-model branch) beyond the other files.
 *
 * Contract (name: arguments; any grid and block):
 *   tnt_k_dropout(const float *x, float *y, i64 n, i64 seed, i64 base, float rate, float scale)
 *       y[i] = u >= rate ? x[i] * scale : 0 with u = tnt__rand_uniform(seed, base + i) of
 *       core/core.h (24 random bits of the counter-based hash), so the masks are bitwise the
 *       CPU's whatever the split across ranks (base: the global index of x[0]); y may be x.
 */
#include "kdefs.h"

typedef unsigned long long k_u64;

/* core.c tnt__hash64 (splitmix64's finalizer) */
DEV k_u64 k_hash64(k_u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

DEV float k_rand_uniform(k_u64 seed, k_u64 index) {
    const k_u64 r = k_hash64(seed ^ k_hash64(index + 0x9E3779B97F4A7C15ull));
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

KERNEL void tnt_k_dropout(const float *x, float *y, i64 n, i64 seed, i64 base, float rate, float scale) {
    GRID_STRIDE(i, n) y[i] = k_rand_uniform((k_u64)seed, (k_u64)(base + i)) >= rate ? x[i] * scale : 0.0f;
}
