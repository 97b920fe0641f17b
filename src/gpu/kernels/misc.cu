/* misc.cu: Dropout, Embedding, padding and cropping, concatenation and slicing along an axis, 2-D
 * transposes (the Keras HWIO kernel <-> cuDNN's KRSC), bitwise the CPU engine's layers.
 *
 * Contract:
 *   tnt_k_dropout(const float *x, float *y, i64 n, unsigned long long seed, unsigned long long base,
 *                 float rate, float scale)
 *       y[i] = x[i] scale where core/core.h tnt__rand_uniform(seed, base + i) >= rate, else 0: the
 *       CPU's mask (layers/regularization/dropout.c: seed = the layer's step seed, base = the
 *       global sample offset times the values per sample, scale = 1 / (1 - rate)); forward on x,
 *       backward on dy with the same arguments
 *   tnt_k_embedding_bad_ids(const float *ids, i64 n, int input_dim, long long *partial)
 *       partial[block] = the smallest position this block saw of an id that is not an integer in
 *       [0, input_dim), or n; blockDim <= 1024; the host takes the minimum
 *   tnt_k_embedding_fwd(const float *ids, const float *table, float *y, i64 n, i64 dim)
 *       y (n, dim) = the table's rows (ids checked before)
 *   Embedding's gradient, bitwise the CPU's (dy's rows added into zeros at their ids, in token
 *   order), in four steps that each spread over the device (ids checked in forward):
 *   tnt_k_embedding_count(const float *ids, int *count, i64 n, i64 input_dim)
 *       count[v] = how many of the n ids are v, one thread per id v
 *   tnt_k_embedding_offsets(const int *count, int *offset, i64 input_dim)     one block
 *       offset[v] = the sum of count[u] for u < v
 *   tnt_k_embedding_order(const float *ids, const int *offset, int *order, i64 n, i64 input_dim)
 *       order[offset[v] ..] = the positions of id v, ascending: the tokens sorted by id, stably
 *   tnt_k_embedding_grad(const float *dy, const int *count, const int *offset, const int *order,
 *                        float *grad, i64 dim, i64 input_dim)
 *       grad[v][k] = the sum over id v's positions p in order of dy[p][k] (0 for an unused id)
 *   tnt_k_box_copy(tnt_k_box g, const float *x, float *y, float value)       (kargs.h)
 *   tnt_k_copy_cols(const float *x, float *y, i64 rows, i64 cols, i64 ld_x, i64 off_x, i64 ld_y,
 *                   i64 off_y, int accumulate)
 *       y[r ld_y + off_y + j] = (or +=) x[r ld_x + off_x + j] for j < cols: one input of a
 *       Concatenate along an axis (rows = the product of the dimensions before it, cols = its
 *       part of the axis times the dimensions after), a slice, and their gradients
 *   tnt_k_transpose(const float *x, float *y, i64 rows, i64 cols)    y (cols, rows) = x (rows, cols)^T
 *       HWIO -> KRSC: rows = kh kw in, cols = out; KRSC -> HWIO: rows = out, cols = kh kw in
 *   tnt_k_permute(tnt_k_perm p, const float *x, float *y)    (kargs.h) Permute forward, and
 *       backward with the inverse permutation
 *   Maximum / Minimum merges (layers/merging/merge.c: chained, ties to the earlier input):
 *   tnt_k_minmax_step(const float *x, float *y, i64 n, int is_max)
 *       forward, after y = x0 (tnt_k_copy), for each next input: y = x where x is beyond y or NaN
 *   tnt_k_select_step(const float *x, float *best, unsigned char *arg, i64 n, int k, int is_max)
 *       backward, after best = x0 (tnt_k_copy to a scratch) and arg = 0, for each next input k:
 *       where x is strictly beyond best, best = x and arg = k (a NaN never wins, as the CPU's)
 *   tnt_k_select_grad(const float *dy, const unsigned char *arg, float *dx, i64 n, int k, int accumulate)
 *       dx (=, or += with accumulate) dy where input k won, else 0
 *   Broadcast merge inputs (layers/merging/merge.c's maps, per sample):
 *   tnt_k_bcast_gather(const float *x, const int *map, float *y, i64 batch, i64 numel, i64 in_numel)
 *       y[b][i] = x[b][map[i]]: an input expanded to the output's shape
 *   tnt_k_bcast_reduce(const float *g, const int *off, const int *idx, float *dx, i64 batch, i64 numel,
 *                      i64 in_numel)
 *       dx[b][j] = the sum of g[b][i] over the positions i that read j (idx[off[j] .. off[j+1]),
 *       ascending: the CPU's order, bitwise)
 */
#include "kargs.h"
#include "kmath.h"

/* core/core.c tnt__hash64 (SplitMix64's finalizer) */
DEV unsigned long long k_hash64(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* core/core.h tnt__rand_uniform: 24 random bits in [0, 1) */
DEV float k_rand_uniform(unsigned long long seed, unsigned long long index) {
    const unsigned long long r = k_hash64(seed ^ k_hash64(index + 0x9E3779B97F4A7C15ull));
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

KERNEL void tnt_k_dropout(const float *x, float *y, i64 n, unsigned long long seed, unsigned long long base, float rate,
                          float scale) {
    GRID_STRIDE(i, n) y[i] = k_rand_uniform(seed, base + (unsigned long long)i) >= rate ? x[i] * scale : 0.0f;
}

KERNEL void tnt_k_embedding_bad_ids(const float *ids, i64 n, int input_dim, long long *partial) {
    SHARED long long red[K_MAX_BLOCK];
    const float lim = (float)input_dim;
    long long bad = n;
    GRID_STRIDE(i, n) {
        const float v = ids[i];
        if (!(v >= 0.0f && v < lim && v == __builtin_floorf(v)) && i < bad) bad = i;
    }
    bad = block_min_ll(red, bad);
    if (TID_X == 0) partial[CTAID_X] = bad;
}

KERNEL void tnt_k_embedding_fwd(const float *ids, const float *table, float *y, i64 n, i64 dim) {
    GRID_STRIDE(i, n * dim) y[i] = table[(i64)ids[i / dim] * dim + i % dim];
}

KERNEL void tnt_k_embedding_count(const float *ids, int *count, i64 n, i64 input_dim) {
    GRID_STRIDE(v, input_dim) {
        int c = 0;
        for (i64 i = 0; i < n; i++) c += (i64)ids[i] == v;
        count[v] = c;
    }
}

/* one block: each thread sums its stretch of ids, a thread scans the stretches' sums, then each
 * thread writes its stretch's offsets (integers: any order gives the same) */
KERNEL void tnt_k_embedding_offsets(const int *count, int *offset, i64 input_dim) {
    SHARED i64 part[K_MAX_BLOCK];
    const i64 t = TID_X, per = (input_dim + NTID_X - 1) / NTID_X, v0 = t * per;
    const i64 v1 = v0 + per < input_dim ? v0 + per : input_dim;
    i64 s = 0;
    for (i64 v = v0; v < v1; v++) s += count[v];
    part[t] = s;
    SYNC();
    if (t == 0) {
        i64 run = 0;
        for (int j = 0; j < NTID_X; j++) {
            const i64 c = part[j];
            part[j] = run;
            run += c;
        }
    }
    SYNC();
    i64 run = part[t];
    for (i64 v = v0; v < v1; v++) {
        offset[v] = (int)run;
        run += count[v];
    }
}

KERNEL void tnt_k_embedding_order(const float *ids, const int *offset, int *order, i64 n, i64 input_dim) {
    GRID_STRIDE(v, input_dim) {
        int o = offset[v];
        for (i64 i = 0; i < n; i++)
            if ((i64)ids[i] == v) order[o++] = (int)i;
    }
}

KERNEL void tnt_k_embedding_grad(const float *dy, const int *count, const int *offset, const int *order, float *grad,
                                 i64 dim, i64 input_dim) {
    GRID_STRIDE(j, input_dim * dim) {
        const i64 v = j / dim, k = j - v * dim, q0 = offset[v], q1 = q0 + count[v];
        float s = 0.0f;
        for (i64 q = q0; q < q1; q++) s += dy[(i64)order[q] * dim + k];
        grad[j] = s;
    }
}

KERNEL void tnt_k_box_copy(tnt_k_box g, const float *x, float *y, float value) {
    SHARED k_udiv dv[4]; /* pooling.cu: the index split without a division per element */
    const i64 C = g.c, cells = (i64)g.out[0] * g.out[1] * g.out[2];
    const int fast = g.n * cells * C < K_POOL_FAST_LIMIT;
    if (fast && TID_X == 0) k_split_divisors(dv, C, g.out);
    SYNC();
    GRID_STRIDE(i, g.n * cells * C) {
        i64 ch, n, od, oh, ow;
        k_pool_split(dv, fast, i, C, g.out, &ch, &n, &od, &oh, &ow);
        const i64 d = od - g.off[0], h = oh - g.off[1], w = ow - g.off[2];
        const int inside = d >= 0 && d < g.in[0] && h >= 0 && h < g.in[1] && w >= 0 && w < g.in[2];
        y[i] = inside ? x[(((n * g.in[0] + d) * g.in[1] + h) * g.in[2] + w) * C + ch] : value;
    }
}

KERNEL void tnt_k_copy_cols(const float *x, float *y, i64 rows, i64 cols, i64 ld_x, i64 off_x, i64 ld_y, i64 off_y,
                            int accumulate) {
    GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, j = i % cols;
        const float v = x[r * ld_x + off_x + j];
        float *dst = y + r * ld_y + off_y + j;
        *dst = accumulate ? *dst + v : v;
    }
}

KERNEL void tnt_k_transpose(const float *x, float *y, i64 rows, i64 cols) {
    GRID_STRIDE(i, rows * cols) y[i] = x[i % rows * cols + i / rows]; /* y[c][r] = x[r][c] */
}

KERNEL void tnt_k_permute(tnt_k_perm p, const float *x, float *y) {
    GRID_STRIDE(i, p.n * p.numel) {
        i64 r = i % p.numel, src = i / p.numel * p.numel;
        for (int a = p.ndim - 1; a >= 0; a--) {
            src += r % p.dim[a] * p.src_stride[a];
            r /= p.dim[a];
        }
        y[i] = x[src];
    }
}

KERNEL void tnt_k_minmax_step(const float *x, float *y, i64 n, int is_max) {
    GRID_STRIDE(i, n) {
        const float v = x[i];
        if ((is_max ? v > y[i] : v < y[i]) || v != v) y[i] = v;
    }
}

KERNEL void tnt_k_select_step(const float *x, float *best, unsigned char *arg, i64 n, int k, int is_max) {
    GRID_STRIDE(i, n) {
        const float v = x[i], b = best[i];
        if (is_max ? v > b : v < b) best[i] = v, arg[i] = (unsigned char)k;
    }
}

KERNEL void tnt_k_select_grad(const float *dy, const unsigned char *arg, float *dx, i64 n, int k, int accumulate) {
    GRID_STRIDE(i, n) {
        const float g = arg[i] == k ? dy[i] : 0.0f;
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

KERNEL void tnt_k_bcast_gather(const float *x, const int *map, float *y, i64 batch, i64 numel, i64 in_numel) {
    GRID_STRIDE(i, batch * numel) {
        const i64 b = i / numel;
        y[i] = x[b * in_numel + map[i - b * numel]];
    }
}

KERNEL void tnt_k_bcast_reduce(const float *g, const int *off, const int *idx, float *dx, i64 batch, i64 numel,
                               i64 in_numel) {
    GRID_STRIDE(i, batch * in_numel) {
        const i64 b = i / in_numel, j = i - b * in_numel;
        float s = 0.0f;
        for (int q = off[j]; q < off[j + 1]; q++) s += g[b * numel + idx[q]];
        dx[i] = s;
    }
}
