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
