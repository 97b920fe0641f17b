/* conv.cu: the strided pixel gather of a 1x1 convolution run as a GEMM (conv2d_gemm_gpu.c) and
 * its adjoint, over channels-last images. Plain copies: bitwise on every device.
 *
 * Contract (x, dx: (n, ih, iw, c); xs, dxs: (n, oh, ow, c); strides sh, sw, no padding):
 *   tnt_k_pixels_gather(const float *x, float *xs, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow,
 *                       int sh, int sw)
 *       xs[b][i][j][ch] = x[b][i sh][j sw][ch]
 *   tnt_k_pixels_scatter(const float *dxs, float *dx, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow,
 *                        int sh, int sw)
 *       dx[b][h][w][ch] = dxs[b][h / sh][w / sw][ch] where sh divides h, sw divides w and the pixel
 *       is one the gather read, else 0: every element of dx written once (no atomics, no memset)
 *   tnt_k_im2col(const float *x, float *col, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow, int kh,
 *                int kw, int sh, int sw, int dh, int dw, int pt, int pl)
 *       col[(b oh + oy) ow + ox][(ky kw + kx) c + ch] = x[b][oy sh - pt + ky dh][ox sw - pl + kx dw][ch],
 *       0 outside the image: each output pixel's taps in Keras's HWIO order, so that y = col W with
 *       W the kernel as it is, (kh kw c, filters)
 *   tnt_k_col2im(const float *dcol, float *dx, same sizes)
 *       dx[b][h][w][ch] = the sum of the dcol entries of the taps that read x[b][h][w][ch], taken
 *       in the order of the taps (ky, then kx): every element written once, no atomics
 *   The direct kernels, over tnt_k_conv g (kargs.h: sizes, strides, dilation, padding, groups;
 *   cpg = c / groups input and fpg = k / groups output channels a group):
 *   tnt_k_conv_direct_fwd(tnt_k_conv g, const float *x, const float *w, const float *bias, float *y,
 *                         int use_bias)
 *       y[b][oy][ox][f] = (sum over ky, kx, then the group's channels ch, in that order, of
 *       x[b][h][w][(f / fpg) cpg + ch] w[ky][kx][ch][f], h = oy sh - pt + ky dh, w = ox sw - pl +
 *       kx dw, taps outside the image skipped) + bias[f] (use_bias): one thread per output
 *   tnt_k_conv_direct_dx(tnt_k_conv g, const float *dy, const float *w, float *dx)
 *       dx[b][h][w][ci] = the sum over the taps (ky, then kx) that read x[b][h][w][ci], then over the
 *       group's filters f, of dy[b][oy][ox][f] w[ky][kx][ci mod cpg][f]: each element written once
 *   tnt_k_conv_direct_dw_partial(tnt_k_conv g, const float *x, const float *dy, float *partial, i64 chunk)
 *       partial[q][((ky kw + kx) cpg + ch) k + f] = the sum over the output pixels r of chunk q (rows
 *       [q chunk, (q + 1) chunk) of the n oh ow pixels, in order) of x[..tap of r..][(f / fpg) cpg +
 *       ch] dy[r][f]; tnt_k_col_sums(partial, dW, chunks, kh kw cpg k) then sums the chunks in order
 *   tnt_k_col_sums_partial_bf16(const unsigned short *x, float *partial, i64 rows, i64 cols, i64 chunk)
 *       tnt_k_col_sums_partial over bf16 values (x (rows, cols) from tnt_k_f32_to_bf16): the bias
 *       gradient of a mixed_bfloat16 convolution, which the CPU's bf16 engine sums from bf16 dpre
 */
#include "kargs.h"
#include "kmath.h"

KERNEL void tnt_k_pixels_gather(const float *x, float *xs, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow, int sh,
                                int sw) {
    GRID_STRIDE(i, n * oh * ow * c) {
        const i64 pix = i / c, r = pix / ow, b = r / oh; /* 64-bit divisions are dear: three, not six */
        const i64 ch = i - pix * c, j = pix - r * ow, h = r - b * oh;
        xs[i] = x[((b * ih + h * sh) * iw + j * sw) * c + ch];
    }
}

KERNEL void tnt_k_pixels_scatter(const float *dxs, float *dx, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow, int sh,
                                 int sw) {
    GRID_STRIDE(i, n * ih * iw * c) {
        const i64 pix = i / c, r = pix / iw, b = r / ih;
        const i64 ch = i - pix * c, w = pix - r * iw, h = r - b * ih;
        const i64 i_out = h / sh, j_out = w / sw;
        const int hit = h % sh == 0 && w % sw == 0 && i_out < oh && j_out < ow;
        dx[i] = hit ? dxs[((b * oh + i_out) * ow + j_out) * c + ch] : 0.0f;
    }
}

KERNEL void tnt_k_im2col(const float *x, float *col, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow, int kh, int kw,
                         int sh, int sw, int dh, int dw, int pt, int pl) {
    const i64 taps = (i64)kh * kw * c;
    GRID_STRIDE(i, n * oh * ow * taps) {
        const i64 row = i / taps, t = i - row * taps, r = row / ow, b = r / oh;
        const i64 ox = row - r * ow, oy = r - b * oh, tap = t / c, ch = t - tap * c, ky = tap / kw, kx = tap - ky * kw;
        const i64 h = oy * sh - pt + ky * dh, w = ox * sw - pl + kx * dw;
        col[i] = h >= 0 && h < ih && w >= 0 && w < iw ? x[((b * ih + h) * iw + w) * c + ch] : 0.0f;
    }
}

KERNEL void tnt_k_col2im(const float *dcol, float *dx, i64 n, i64 ih, i64 iw, i64 c, i64 oh, i64 ow, int kh, int kw,
                         int sh, int sw, int dh, int dw, int pt, int pl) {
    const i64 taps = (i64)kh * kw * c;
    GRID_STRIDE(i, n * ih * iw * c) {
        const i64 pix = i / c, r = pix / iw, b = r / ih;
        const i64 ch = i - pix * c, w = pix - r * iw, h = r - b * ih;
        float s = 0.0f;
        for (int ky = 0; ky < kh; ky++) {
            const i64 ty = h + pt - (i64)ky * dh, oy = ty / sh;
            if (ty < 0 || oy * sh != ty || oy >= oh) continue;
            for (int kx = 0; kx < kw; kx++) {
                const i64 tx = w + pl - (i64)kx * dw, ox = tx / sw;
                if (tx < 0 || ox * sw != tx || ox >= ow) continue;
                s += dcol[((b * oh + oy) * ow + ox) * taps + ((i64)ky * kw + kx) * c + ch];
            }
        }
        dx[i] = s;
    }
}

KERNEL void tnt_k_col_sums_partial_bf16(const unsigned short *x, float *partial, i64 rows, i64 cols, i64 chunk) {
    const i64 chunks = (rows + chunk - 1) / chunk;
    GRID_STRIDE(i, chunks * cols) {
        const i64 k = i / cols, c = i % cols;
        const i64 r0 = k * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
        float s = k_bits_float((int)((unsigned)x[r0 * cols + c] << 16));
        for (i64 r = r0 + 1; r < r1; r++) s += k_bits_float((int)((unsigned)x[r * cols + c] << 16));
        partial[i] = s;
    }
}

/* The direct kernels: three divisions per thread to place it, none in the loops (64-bit divisions
 * are long software routines on a GPU). */
KERNEL void tnt_k_conv_direct_fwd(tnt_k_conv g, const float *x, const float *w, const float *bias, float *y,
                                  int use_bias) {
    const i64 cpg = g.c / g.groups, fpg = g.k / g.groups;
    GRID_STRIDE(i, g.n * g.oh * g.ow * g.k) {
        const i64 pix = i / g.k, f = i - pix * g.k, r = pix / g.ow, b = r / g.oh, ox = pix - r * g.ow;
        const i64 oy = r - b * g.oh, h0 = oy * g.sh - g.pt, w0 = ox * g.sw - g.pl, c0 = f / fpg * cpg;
        float s = 0.0f;
        for (int ky = 0; ky < g.kh; ky++) {
            const i64 h = h0 + (i64)ky * g.dh;
            if (h < 0 || h >= g.ih) continue;
            for (int kx = 0; kx < g.kw; kx++) {
                const i64 ww = w0 + (i64)kx * g.dw;
                if (ww < 0 || ww >= g.iw) continue;
                const float *xp = x + ((b * g.ih + h) * g.iw + ww) * g.c + c0;
                const float *wp = w + ((i64)ky * g.kw + kx) * cpg * g.k + f;
                for (i64 ch = 0; ch < cpg; ch++) s += xp[ch] * wp[ch * g.k];
            }
        }
        y[i] = use_bias ? s + bias[f] : s;
    }
}

KERNEL void tnt_k_conv_direct_dx(tnt_k_conv g, const float *dy, const float *w, float *dx) {
    const i64 cpg = g.c / g.groups, fpg = g.k / g.groups;
    GRID_STRIDE(i, g.n * g.ih * g.iw * g.c) {
        const i64 pix = i / g.c, r = pix / g.iw, b = r / g.ih;
        const i64 ci = i - pix * g.c, xw = pix - r * g.iw, xh = r - b * g.ih, grp = ci / cpg, ch = ci - grp * cpg;
        float s = 0.0f;
        for (int ky = 0; ky < g.kh; ky++) {
            const i64 ty = xh + g.pt - (i64)ky * g.dh, oy = ty / g.sh;
            if (ty < 0 || oy * g.sh != ty || oy >= g.oh) continue;
            for (int kx = 0; kx < g.kw; kx++) {
                const i64 tx = xw + g.pl - (i64)kx * g.dw, ox = tx / g.sw;
                if (tx < 0 || ox * g.sw != tx || ox >= g.ow) continue;
                const float *dp = dy + ((b * g.oh + oy) * g.ow + ox) * g.k + grp * fpg;
                const float *wp = w + (((i64)ky * g.kw + kx) * cpg + ch) * g.k + grp * fpg;
                for (i64 f = 0; f < fpg; f++) s += dp[f] * wp[f];
            }
        }
        dx[i] = s;
    }
}

KERNEL void tnt_k_conv_direct_dw_partial(tnt_k_conv g, const float *x, const float *dy, float *partial, i64 chunk) {
    const i64 cpg = g.c / g.groups, fpg = g.k / g.groups, outs = (i64)g.kh * g.kw * cpg * g.k;
    const i64 rows = g.n * g.oh * g.ow, chunks = (rows + chunk - 1) / chunk;
    GRID_STRIDE(i, chunks * outs) {
        const i64 q = i / outs, o = i - q * outs, tap = o / (cpg * g.k), rest = o - tap * (cpg * g.k), ch = rest / g.k;
        const i64 f = rest - ch * g.k, ky = tap / g.kw, kx = tap - ky * g.kw, ci = f / fpg * cpg + ch;
        const i64 r0 = q * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
        i64 ox = r0 % g.ow, oy = (r0 / g.ow) % g.oh, b = r0 / (g.ow * g.oh); /* then stepped, not divided */
        float s = 0.0f;
        for (i64 r = r0; r < r1; r++) {
            const i64 h = oy * g.sh - g.pt + ky * g.dh, ww = ox * g.sw - g.pl + kx * g.dw;
            if (h >= 0 && h < g.ih && ww >= 0 && ww < g.iw) s += x[((b * g.ih + h) * g.iw + ww) * g.c + ci] * dy[r * g.k + f];
            if (++ox == g.ow) {
                ox = 0;
                if (++oy == g.oh) oy = 0, b++;
            }
        }
        partial[i] = s;
    }
}
