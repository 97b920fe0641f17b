/* pooling.cu: MaxPooling and AveragePooling 2-D/3-D over channels-last input, forward and backward,
 * bitwise the CPU engine's layers/pooling/pooling.c (same windows clipped to the real cells, same
 * first-maximum rule, same order of additions); global pooling as layers/pooling/global_pooling.c.
 *
 * Contract (g: kargs.h tnt_k_pool by value; x, dx: (g.n, in..., g.c); y, dy, arg: (g.n, out..., g.c)):
 *   tnt_k_max_pool_fwd(tnt_k_pool g, const float *x, float *y, unsigned short *arg)
 *       y = the window maximum (the first on ties; a NaN first cell stays), arg = its index in
 *       the unclipped window ((kd * k[1] + kh) * k[2] + kw), as the CPU's workspace
 *   tnt_k_max_pool_bwd(tnt_k_pool g, const float *dy, const unsigned short *arg, float *dx)
 *       dx = the sum of dy over the windows whose maximum is this cell (overwrites dx)
 *   tnt_k_avg_pool_fwd(tnt_k_pool g, const float *x, float *y)     mean over the real cells
 *   tnt_k_avg_pool_bwd(tnt_k_pool g, const float *dy, float *dx)   (overwrites dx)
 *   Global pooling, x: (n, hw, c), y, dy: (n, c), one thread per (image, channel):
 *   tnt_k_global_pool_fwd(const float *x, float *y, i64 n, i64 hw, i64 c, int is_max)
 *   tnt_k_global_avg_pool_bwd(const float *dy, float *dx, i64 n, i64 hw, i64 c)
 *   tnt_k_global_max_pool_bwd(const float *x, const float *dy, float *dx, i64 n, i64 hw, i64 c)
 *       dy split equally among the cells that tie for the maximum (TensorFlow's reduce_max)
 *   UpSampling1D/2D/3D, nearest (layers/reshaping/upsampling.c; g.k the sizes, pad unused):
 *   tnt_k_upsample_fwd(tnt_k_pool g, const float *x, float *y)     each input cell over its block
 *   tnt_k_upsample_bwd(tnt_k_pool g, const float *dy, float *dx)   the sum of each block's gradient,
 *       depth, then height, then width, as the CPU's loops (bitwise)
 */
#include "kargs.h"
#include "kmath.h"

/* Division by a launch's constant divisors without a division per element (pooling's index math
 * was ~10 divisions per element: compute-bound): the round-up multiplier of Granlund and
 * Montgomery, exact for dividends below 2^31; set once per block by thread 0. */
typedef struct k_udiv {
    unsigned m, s;
} k_udiv;
DEV k_udiv k_udiv_make(unsigned d) {
    k_udiv v;
    v.s = 0;
    while ((1ull << v.s) < d) v.s++;
    v.m = (unsigned)(((1ull << 32) * ((1ull << v.s) - d)) / d + 1);
    return v;
}
DEV unsigned k_udiv_q(k_udiv v, unsigned n) {
    const unsigned hi = (unsigned)(((unsigned long long)n * v.m) >> 32);
    return (unsigned)(((unsigned long long)hi + n) >> v.s);
}

/* the divisors that split an index of (n, dims..., C): dv = C, dims[2], dims[1], cells (thread 0) */
#define K_POOL_FAST_LIMIT 0x7fffffffLL
DEV void k_split_divisors(k_udiv *dv, i64 C, const int dims[3]) {
    dv[0] = k_udiv_make((unsigned)C), dv[1] = k_udiv_make((unsigned)dims[2]);
    dv[2] = k_udiv_make((unsigned)dims[1]), dv[3] = k_udiv_make((unsigned)((i64)dims[0] * dims[1] * dims[2]));
}

/* the divisors of a pooling launch over cells (d, h, w) of dims: those of k_split_divisors, then
 * s[0], s[1], s[2]; fast: every index fits (else the 64-bit divisions) */
DEV int k_pool_divisors(k_udiv *dv, const tnt_k_pool *g, const int dims[3]) {
    const i64 o_cells = (i64)g->out[0] * g->out[1] * g->out[2], i_cells = (i64)g->in[0] * g->in[1] * g->in[2];
    const int fast = g->n * g->c * (o_cells > i_cells ? o_cells : i_cells) < K_POOL_FAST_LIMIT;
    if (fast && TID_X == 0) {
        k_split_divisors(dv, g->c, dims);
        for (int a = 0; a < 3; a++) dv[4 + a] = k_udiv_make((unsigned)g->s[a]);
    }
    SYNC();
    return fast;
}

/* element i of (n, dims..., C): channel, image, cell (d, h, w) */
DEV void k_pool_split(const k_udiv *dv, int fast, i64 i, i64 C, const int dims[3], i64 *ch, i64 *n, i64 *d, i64 *h,
                      i64 *w) {
    const i64 cells = (i64)dims[0] * dims[1] * dims[2];
    if (fast) {
        const unsigned u = (unsigned)i, q = k_udiv_q(dv[0], u), nn = k_udiv_q(dv[3], q), o = q - nn * (unsigned)cells;
        const unsigned qw = k_udiv_q(dv[1], o), qh = k_udiv_q(dv[2], qw);
        *ch = u - q * (unsigned)C, *n = nn, *w = o - qw * (unsigned)dims[2], *h = qw - qh * (unsigned)dims[1], *d = qh;
    } else {
        const i64 o = i / C % cells;
        *ch = i % C, *n = i / C / cells, *d = o / dims[2] / dims[1], *h = o / dims[2] % dims[1], *w = o % dims[2];
    }
}

/* the window of output cell o (d, h, w) along axis a: [lo, hi) clipped, st its unclipped start */
DEV void k_pool_window(const tnt_k_pool *g, int a, i64 o, i64 *lo, i64 *hi, i64 *st) {
    *st = o * g->s[a] - g->pad[a];
    *lo = *st > 0 ? *st : 0;
    *hi = *st + g->k[a] < g->in[a] ? *st + g->k[a] : g->in[a];
}

/* the outputs whose windows hold input cell i along axis a: [first, last] (dv: s[a], fast) */
DEV void k_pool_outputs(const tnt_k_pool *g, int a, i64 i, i64 *first, i64 *last, const k_udiv *dv, int fast) {
    const i64 t = i + g->pad[a] - g->k[a] + 1; /* o s >= t */
    i64 f = t <= 0 ? 0 : fast ? (i64)k_udiv_q(*dv, (unsigned)(t + g->s[a] - 1)) : (t + g->s[a] - 1) / g->s[a];
    i64 l = fast ? (i64)k_udiv_q(*dv, (unsigned)(i + g->pad[a])) : (i + g->pad[a]) / g->s[a];
    *first = f;
    *last = l < g->out[a] - 1 ? l : g->out[a] - 1;
}

KERNEL void tnt_k_max_pool_fwd(tnt_k_pool g, const float *x, float *y, unsigned short *arg) {
    SHARED k_udiv dv[7];
    const i64 C = g.c, cells = (i64)g.out[0] * g.out[1] * g.out[2];
    const int fast = k_pool_divisors(dv, &g, g.out);
    GRID_STRIDE(i, g.n * cells * C) {
        i64 ch, n, od, oh, ow;
        k_pool_split(dv, fast, i, C, g.out, &ch, &n, &od, &oh, &ow);
        i64 lo[3], hi[3], st[3];
        k_pool_window(&g, 0, od, &lo[0], &hi[0], &st[0]);
        k_pool_window(&g, 1, oh, &lo[1], &hi[1], &st[1]);
        k_pool_window(&g, 2, ow, &lo[2], &hi[2], &st[2]);
        float best = 0.0f;
        int k_best = 0, first = 1;
        for (i64 d = lo[0]; d < hi[0]; d++)
            for (i64 h = lo[1]; h < hi[1]; h++)
                for (i64 w = lo[2]; w < hi[2]; w++) {
                    const float v = x[(((n * g.in[0] + d) * g.in[1] + h) * g.in[2] + w) * C + ch];
                    const int k = (int)(((d - st[0]) * g.k[1] + (h - st[1])) * g.k[2] + (w - st[2]));
                    if (first || v > best) best = v, k_best = k, first = 0;
                }
        y[i] = best;
        arg[i] = (unsigned short)k_best;
    }
}

/* for each output window holding input cell (d, h, w), in the CPU's (ascending) order:
 * BODY sees o (the output cell within its image) and k (the cell's index in that window) */
#define K_POOL_GATHER(g, d, h, w, dv, fast, ...)                                                            \
    do {                                                                                                    \
        i64 f0, l0, f1, l1, f2, l2;                                                                         \
        k_pool_outputs(&(g), 0, d, &f0, &l0, &(dv)[4], fast);                                              \
        k_pool_outputs(&(g), 1, h, &f1, &l1, &(dv)[5], fast);                                              \
        k_pool_outputs(&(g), 2, w, &f2, &l2, &(dv)[6], fast);                                              \
        for (i64 od = f0; od <= l0; od++)                                                                   \
            for (i64 oh = f1; oh <= l1; oh++)                                                               \
                for (i64 ow = f2; ow <= l2; ow++) {                                                         \
                    const i64 o = (od * (g).out[1] + oh) * (g).out[2] + ow;                                 \
                    const int k = (int)(((d - (od * (g).s[0] - (g).pad[0])) * (g).k[1] +                    \
                                         (h - (oh * (g).s[1] - (g).pad[1]))) * (g).k[2] +                   \
                                        (w - (ow * (g).s[2] - (g).pad[2])));                                \
                    __VA_ARGS__;                                                                                 \
                }                                                                                           \
    } while (0)

KERNEL void tnt_k_max_pool_bwd(tnt_k_pool g, const float *dy, const unsigned short *arg, float *dx) {
    SHARED k_udiv dv[7];
    const i64 C = g.c, cells = (i64)g.in[0] * g.in[1] * g.in[2], out_cells = (i64)g.out[0] * g.out[1] * g.out[2];
    const int fast = k_pool_divisors(dv, &g, g.in);
    GRID_STRIDE(i, g.n * cells * C) {
        i64 ch, n, d, h, w;
        k_pool_split(dv, fast, i, C, g.in, &ch, &n, &d, &h, &w);
        float s = 0.0f;
        K_POOL_GATHER(g, d, h, w, dv, fast, {
            const i64 j = (n * out_cells + o) * C + ch;
            s += arg[j] == k ? dy[j] : 0.0f;
        });
        dx[i] = s;
    }
}

KERNEL void tnt_k_avg_pool_fwd(tnt_k_pool g, const float *x, float *y) {
    SHARED k_udiv dv[7];
    const i64 C = g.c, cells = (i64)g.out[0] * g.out[1] * g.out[2];
    const int fast = k_pool_divisors(dv, &g, g.out);
    GRID_STRIDE(i, g.n * cells * C) {
        i64 ch, n, od, oh, ow;
        k_pool_split(dv, fast, i, C, g.out, &ch, &n, &od, &oh, &ow);
        i64 lo[3], hi[3], st[3];
        k_pool_window(&g, 0, od, &lo[0], &hi[0], &st[0]);
        k_pool_window(&g, 1, oh, &lo[1], &hi[1], &st[1]);
        k_pool_window(&g, 2, ow, &lo[2], &hi[2], &st[2]);
        float s = 0.0f;
        for (i64 d = lo[0]; d < hi[0]; d++)
            for (i64 h = lo[1]; h < hi[1]; h++)
                for (i64 w = lo[2]; w < hi[2]; w++) s += x[(((n * g.in[0] + d) * g.in[1] + h) * g.in[2] + w) * C + ch];
        const float inv = 1.0f / (float)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        y[i] = s * inv;
    }
}

KERNEL void tnt_k_avg_pool_bwd(tnt_k_pool g, const float *dy, float *dx) {
    SHARED k_udiv dv[7];
    const i64 C = g.c, cells = (i64)g.in[0] * g.in[1] * g.in[2], out_cells = (i64)g.out[0] * g.out[1] * g.out[2];
    const int fast = k_pool_divisors(dv, &g, g.in);
    GRID_STRIDE(i, g.n * cells * C) {
        i64 ch, n, d, h, w;
        k_pool_split(dv, fast, i, C, g.in, &ch, &n, &d, &h, &w);
        float s = 0.0f;
        K_POOL_GATHER(g, d, h, w, dv, fast, {
            (void)k;
            i64 lo[3], hi[3], st[3];
            k_pool_window(&g, 0, od, &lo[0], &hi[0], &st[0]);
            k_pool_window(&g, 1, oh, &lo[1], &hi[1], &st[1]);
            k_pool_window(&g, 2, ow, &lo[2], &hi[2], &st[2]);
            const float inv = 1.0f / (float)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
            s += dy[(n * out_cells + o) * C + ch] * inv;
        });
        dx[i] = s;
    }
}

KERNEL void tnt_k_global_pool_fwd(const float *x, float *y, i64 n, i64 hw, i64 c, int is_max) {
    GRID_STRIDE(i, n * c) {
        const float *xs = x + i / c * hw * c + i % c;
        float s = xs[0];
        if (is_max) {
            for (i64 p = 1; p < hw; p++)
                if (xs[p * c] > s) s = xs[p * c];
        } else {
            for (i64 p = 1; p < hw; p++) s += xs[p * c];
            s *= 1.0f / (float)hw;
        }
        y[i] = s;
    }
}

KERNEL void tnt_k_global_avg_pool_bwd(const float *dy, float *dx, i64 n, i64 hw, i64 c) {
    const float inv = 1.0f / (float)hw;
    GRID_STRIDE(i, n * hw * c) dx[i] = dy[i / (hw * c) * c + i % c] * inv;
}

KERNEL void tnt_k_global_max_pool_bwd(const float *x, const float *dy, float *dx, i64 n, i64 hw, i64 c) {
    GRID_STRIDE(i, n * c) {
        const i64 base = i / c * hw * c + i % c;
        float m = x[base], cnt = 0.0f;
        for (i64 p = 1; p < hw; p++)
            if (x[base + p * c] > m) m = x[base + p * c];
        for (i64 p = 0; p < hw; p++) cnt += x[base + p * c] == m ? 1.0f : 0.0f;
        const float share = cnt > 0.0f ? dy[i] / cnt : 0.0f;
        for (i64 p = 0; p < hw; p++) dx[base + p * c] = x[base + p * c] == m ? share : 0.0f;
    }
}

KERNEL void tnt_k_upsample_fwd(tnt_k_pool g, const float *x, float *y) {
    const i64 C = g.c;
    GRID_STRIDE(i, g.n * g.out[0] * g.out[1] * g.out[2] * C) {
        const i64 pix = i / C, ch = i - pix * C, w = pix % g.out[2], r = pix / g.out[2], h = r % g.out[1];
        const i64 r2 = r / g.out[1], d = r2 % g.out[0], n = r2 / g.out[0];
        y[i] = x[(((n * g.in[0] + d / g.k[0]) * g.in[1] + h / g.k[1]) * g.in[2] + w / g.k[2]) * C + ch];
    }
}

KERNEL void tnt_k_upsample_bwd(tnt_k_pool g, const float *dy, float *dx) {
    const i64 C = g.c;
    GRID_STRIDE(i, g.n * g.in[0] * g.in[1] * g.in[2] * C) {
        const i64 pix = i / C, ch = i - pix * C, w = pix % g.in[2], r = pix / g.in[2], h = r % g.in[1];
        const i64 r2 = r / g.in[1], d = r2 % g.in[0], n = r2 / g.in[0];
        float s = 0.0f;
        for (int td = 0; td < g.k[0]; td++)
            for (int th = 0; th < g.k[1]; th++)
                for (int tw = 0; tw < g.k[2]; tw++)
                    s += dy[(((n * g.out[0] + d * g.k[0] + td) * g.out[1] + h * g.k[1] + th) * g.out[2] + w * g.k[2] + tw) *
                                C + ch];
        dx[i] = s;
    }
}
