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
 *   tnt_k_col_sums_partial_bf16(const unsigned short *x, float *partial, i64 rows, i64 cols, i64 chunk)
 *       tnt_k_col_sums_partial over bf16 values (x (rows, cols) from tnt_k_f32_to_bf16): the bias
 *       gradient of a mixed_bfloat16 convolution, which the CPU's bf16 engine sums from bf16 dpre
 */
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
