/* conv2d_gemm_gpu.c: Conv2D's device path (conv2d.c's .gpu): 1x1 convolutions as GEMMs on
 * tnt__gpu_sgemm (cuBLAS; the CPU's sgemm on the emulated device), those of few taps as im2col
 * GEMMs (below, TNT_GPU_CONV_IM2COL), every other convolution to cuDNN (conv2d_gpu.c). A 1x1
 * convolution over channels-last images is a matrix product: Keras's kernel (1, 1, C, K) is
 * already the row-major C x K matrix W, so with xs (rows = N Ho Wo, C) the pixels the kernel
 * visits,
 *   y = xs W (+ b, + the fused activation: fused_gpu.c),  dW = xs^T dpre,  dxs = dpre W^T.
 * Stride 1: xs is x itself and dxs is dx. Stride s > 1: tnt_k_pixels_gather copies every s-th
 * pixel into the shared scratch (again in backward: the scratch lives one call) and
 * tnt_k_pixels_scatter writes all of dx from dxs (zeros where the kernel never looked). A 1x1
 * window needs no padding: TensorFlow's "same" pads (ceil(in / s) - 1) s + 1 - in <= 0 cells,
 * i.e. none, and "valid" gives the same output size, so both are this path. Dilation changes
 * nothing for one tap. No cuDNN: it runs on the emulated device too (tests/test_gpu_conv1x1.c).
 * ResNet-50's 36 1x1 convolutions take it: cuDNN's float32 NHWC backward of a 1x1 convolution ran
 * at 4 to 6 TFLOP/s on an H200 (conv3_block1_0: 26 GFLOP in 6.5 ms), its 3x3 ones at about 17
 * overall; two GEMMs of 26 GFLOP should take about 0.5 ms at cuBLAS's float32 rate (an estimate,
 * not yet timed).
 *
 * mixed_bfloat16: the CPU's bf16 engine (conv_bf16.c) on cuBLAS's GemmEx: xs, W and dpre rounded
 * to bf16 (tnt__gpu_to_bf16; xs and W again in backward), float32 sums and results; the bias
 * gradient is summed from the bf16 dpre as the CPU's backward-weights primitive does.
 * Deterministic: cuBLAS's GEMMs and fixed-order column sums, no atomics. */
#include "core/config.h"
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/convolutional/conv2d.h"
#include "layers/fused.h"

#define GPU_BLOCK 256
#define BIAS_CHUNK 256 /* rows each partial column sum adds, before the sums of the partials */

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* 2-D, channels last, no groups, a 1x1 window without padding */
static bool gemm_applies(const tnt_layer *l) {
    const tnt__conv_cfg *c = l->priv;
    return c->kd == 0 && c->groups <= 1 && !c->channels_first && c->kh == 1 && c->kw == 1 &&
           c->pad_t == 0 && c->pad_b == 0 && c->pad_l == 0 && c->pad_r == 0;
}

static bool gemm_bf16(const tnt_layer *l) { return l->dtype_policy == TNT__POLICY_MIXED_BF16; }
static bool strided(const tnt__conv_cfg *c) { return c->sh > 1 || c->sw > 1; }
static int64_t gemm_rows(const tnt__conv_cfg *c, int64_t batch) { return batch * c->oh * c->ow; }
static int64_t bias_chunks(const tnt__conv_cfg *c, int64_t batch) {
    return (gemm_rows(c, batch) + BIAS_CHUNK - 1) / BIAS_CHUNK;
}

/* Workspace (forward to backward): the fused activation's (fused.c). Scratch (one call): [xs, then
 * dxs: float32 (rows, C), strided only][bias partial sums] and, mixed_bfloat16, [xs bf16 (rows, C)]
 * [W bf16 (C, K)][dpre bf16 (rows, K)] */
typedef struct gemm_ws {
    float *xs, *bias_part;
    uint16_t *x16, *w16, *dpre16;
} gemm_ws;

static size_t gemm_layout(const tnt_layer *l, int64_t batch, void *scratch, gemm_ws *w) {
    const tnt__conv_cfg *c = l->priv;
    const int64_t rows = gemm_rows(c, batch), k = c->filters;
    const size_t sizes[] = {
        strided(c) ? (size_t)(rows * c->ic) * sizeof(float) : 0,
        c->use_bias ? (size_t)(bias_chunks(c, batch) * k) * sizeof(float) : 0,
        gemm_bf16(l) ? (size_t)(rows * c->ic) * sizeof(uint16_t) : 0,
        gemm_bf16(l) ? (size_t)(c->ic * k) * sizeof(uint16_t) : 0,
        gemm_bf16(l) ? (size_t)(rows * k) * sizeof(uint16_t) : 0,
    };
    void **at[] = {(void **)&w->xs, (void **)&w->bias_part, (void **)&w->x16, (void **)&w->w16, (void **)&w->dpre16};
    size_t off = 0;
    for (size_t i = 0; i < TNT_ARRAY_LEN(sizes); i++) {
        if (scratch) *at[i] = sizes[i] ? (char *)scratch + off : NULL;
        off += align256(sizes[i]);
    }
    return off;
}

static size_t gemm_scratch(tnt_layer *l, int64_t batch) {
    gemm_ws w;
    return gemm_layout(l, batch, NULL, &w);
}

/* gather: xs (rows, C) = the pixels of x (n, ih, iw, C) the strides visit; else all of dx from dxs */
static tnt_status pixels(bool gather, const tnt__conv_cfg *c, int64_t batch, const float *from, float *to) {
    long long n = batch, ih = c->ih, iw = c->iw, ch = c->ic, oh = c->oh, ow = c->ow;
    int sh = c->sh, sw = c->sw;
    void *args[] = {&from, &to, &n, &ih, &iw, &ch, &oh, &ow, &sh, &sw};
    const int64_t count = batch * (gather ? c->oh * c->ow : c->ih * c->iw) * c->ic;
    return tnt__gpu_launch(gather ? "tnt_k_pixels_gather" : "tnt_k_pixels_scatter", tnt__gpu_grid_for(count, GPU_BLOCK),
                           GPU_BLOCK, 0, args);
}

/* out (rows, K) = rows of b (or nothing), then out (+)= xs W */
static tnt_status gemm_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    gemm_ws w;
    gemm_layout(l, a->batch, a->scratch, &w);
    long long rows = gemm_rows(c, a->batch), k = c->filters;
    const int64_t ch = c->ic;
    tnt_status s = TNT_OK;
    const float *xs = a->x;
    if (strided(c)) {
        if ((s = pixels(true, c, a->batch, a->x, w.xs)) != TNT_OK) return s;
        xs = w.xs;
    }
    if (c->use_bias) {
        const float *b = l->weights[1].d_value;
        void *args[] = {&out, &b, &rows, &k};
        s = tnt__gpu_launch("tnt_k_bias_set", tnt__gpu_grid_for(rows * k, GPU_BLOCK), GPU_BLOCK, 0, args);
        if (s != TNT_OK) return s;
    }
    const float beta = c->use_bias ? 1.0f : 0.0f;
    if (gemm_bf16(l)) {
        if ((s = tnt__gpu_to_bf16(xs, w.x16, rows * ch)) != TNT_OK ||
            (s = tnt__gpu_to_bf16(l->weights[0].d_value, w.w16, ch * k)) != TNT_OK)
            return s;
        return tnt__gpu_gemm_bf16(false, false, rows, k, ch, 1.0f, w.x16, ch, w.w16, k, beta, out, k);
    }
    return tnt__gpu_sgemm(false, false, rows, k, ch, 1.0f, xs, ch, l->weights[0].d_value, k, beta, out, k);
}

static tnt_status gemm_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, gemm_run);
}

/* db (K) = column sums of dpre (float32, or its bf16 rounding) in chunks of rows, then of the chunks */
static tnt_status bias_grad(const tnt__conv_cfg *c, int64_t batch, const void *dpre, bool bf16, float *part,
                            float *db) {
    long long rows = gemm_rows(c, batch), k = c->filters, chunk = BIAS_CHUNK, chunks = bias_chunks(c, batch);
    void *part_args[] = {&dpre, &part, &rows, &k, &chunk};
    tnt_status s = tnt__gpu_launch(bf16 ? "tnt_k_col_sums_partial_bf16" : "tnt_k_col_sums_partial",
                                   tnt__gpu_grid_for(chunks * k, GPU_BLOCK), GPU_BLOCK, 0, part_args);
    return s != TNT_OK ? s : tnt__gpu_col_sums(part, db, chunks, k);
}

static tnt_status gemm_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    gemm_ws w;
    gemm_layout(l, a->batch, a->scratch, &w);
    const int64_t rows = gemm_rows(c, a->batch), k = c->filters, ch = c->ic;
    const bool bf16 = gemm_bf16(l);
    const float *dpre;
    tnt_status s = tnt__gpu_fused_backward(l, a, &dpre);
    /* forward's xs and bf16 operands once more: the scratch held them for forward's call only */
    const float *xs = a->x;
    const bool dw = l->weights[0].d_grad != NULL;
    if (s == TNT_OK && dw && strided(c) && (s = pixels(true, c, a->batch, a->x, w.xs)) == TNT_OK) xs = w.xs;
    if (s == TNT_OK && dw && bf16) s = tnt__gpu_to_bf16(xs, w.x16, rows * ch);
    if (s == TNT_OK && a->dx && bf16) s = tnt__gpu_to_bf16(l->weights[0].d_value, w.w16, ch * k);
    if (s == TNT_OK && bf16) s = tnt__gpu_to_bf16(dpre, w.dpre16, rows * k);
    if (s == TNT_OK && c->use_bias && l->weights[1].d_grad)
        s = bias_grad(c, a->batch, bf16 ? (const void *)w.dpre16 : dpre, bf16, w.bias_part, l->weights[1].d_grad);
    if (s == TNT_OK && dw) { /* dW (C, K) = xs^T dpre: Keras's (1, 1, C, K) as it is */
        float *g = l->weights[0].d_grad;
        if (bf16) s = tnt__gpu_gemm_bf16(true, false, ch, k, rows, 1.0f, w.x16, ch, w.dpre16, k, 0.0f, g, k);
        else s = tnt__gpu_sgemm(true, false, ch, k, rows, 1.0f, xs, ch, dpre, k, 0.0f, g, k);
    }
    if (s != TNT_OK || !a->dx) return s;
    /* dxs (rows, C) = dpre W^T: into dx itself at stride 1, else over xs (read above) */
    float *dxs = strided(c) ? w.xs : a->dx;
    if (bf16) s = tnt__gpu_gemm_bf16(false, true, rows, ch, k, 1.0f, w.dpre16, k, w.w16, k, 0.0f, dxs, ch);
    else s = tnt__gpu_sgemm(false, true, rows, ch, k, 1.0f, dpre, k, l->weights[0].d_value, k, 0.0f, dxs, ch);
    if (s == TNT_OK && strided(c)) s = pixels(false, c, a->batch, dxs, a->dx);
    return s;
}

/* ---- other windows with few taps: im2col, then the same GEMMs --------------------------------- */

/* Float32 2-D convolutions whose kh kw C taps are at most TNT_GPU_CONV_IM2COL (LeNet-5's, a
 * ResNet stem's 7x7x3) run as GEMMs over tnt_k_im2col's matrix col (rows = N Ho Wo, taps) in
 * Keras's HWIO order, so the kernel is the (taps, K) matrix W as it is:
 *   y = col W,  dW = col^T dpre (chunk by chunk, added),  dcol = dpre W^T, dx = col2im(dcol)
 * where cuDNN's deterministic algorithms are slow for so few input channels. col lives in the
 * scratch, a chunk of whole samples at a time (at most IM2COL_FLOATS, tests: smaller), made again
 * in backward. Any padding (asymmetric "same" too), strides and dilation; no cuDNN, so it runs
 * on the emulated device (tests/test_gpu_conv_few_taps.c). Deterministic: fixed chunks, cuBLAS's
 * GEMMs, col2im's fixed order, no atomics. */
int64_t tnt__conv_im2col_floats = 1 << 24; /* 64 MB of col at most */

static int64_t taps(const tnt__conv_cfg *c) { return (int64_t)c->kh * c->kw * c->ic; }

static bool im2col_applies(const tnt_layer *l) {
    const tnt__conv_cfg *c = l->priv;
    const int64_t limit = tnt__config_get()->gpu_conv_im2col;
    /* where cuDNN has no path, im2col always: Conv1D, and padding unlike on the two sides (cuDNN
     * pads alike; TensorFlow's "same" with strides on even sizes pads one more after, "causal" all
     * before) */
    const bool no_cudnn = c->one_d || c->pad_t != c->pad_b || c->pad_l != c->pad_r;
    return c->kd == 0 && c->groups <= 1 && !c->channels_first && !gemm_bf16(l) && (taps(c) <= limit || no_cudnn);
}

/* samples per chunk of col */
static int64_t im2col_chunk(const tnt__conv_cfg *c, int64_t batch) {
    const int64_t per = c->oh * c->ow * taps(c), n = tnt__conv_im2col_floats / (per ? per : 1);
    return n < 1 ? 1 : n < batch ? n : batch;
}

/* scratch: [col (chunk rows, taps)][bias partial sums] */
static size_t im2col_col_bytes(const tnt__conv_cfg *c, int64_t batch) {
    return align256((size_t)(im2col_chunk(c, batch) * c->oh * c->ow * taps(c)) * sizeof(float));
}
static size_t im2col_scratch(tnt_layer *l, int64_t batch) {
    const tnt__conv_cfg *c = l->priv;
    return im2col_col_bytes(c, batch) + align256((size_t)(bias_chunks(c, batch) * c->filters) * sizeof(float));
}

/* forward (col2im false: col of x's samples [b0, b0 + n)) or col2im (dx of them from dcol) */
static tnt_status im2col_kernel(bool col2im, const tnt__conv_cfg *c, int64_t b0, int64_t n, const float *from,
                                float *to) {
    long long nn = n, ih = c->ih, iw = c->iw, ch = c->ic, oh = c->oh, ow = c->ow;
    int kh = c->kh, kw = c->kw, sh = c->sh, sw = c->sw, dh = c->dh, dw = c->dw, pt = (int)c->pad_t, pl = (int)c->pad_l;
    const int64_t x_off = b0 * c->ih * c->iw * c->ic;
    if (col2im) to += x_off;
    else from += x_off;
    void *args[] = {&from, &to, &nn, &ih, &iw, &ch, &oh, &ow, &kh, &kw, &sh, &sw, &dh, &dw, &pt, &pl};
    const int64_t count = col2im ? n * c->ih * c->iw * c->ic : n * c->oh * c->ow * taps(c);
    return tnt__gpu_launch(col2im ? "tnt_k_col2im" : "tnt_k_im2col", tnt__gpu_grid_for(count, GPU_BLOCK), GPU_BLOCK,
                           0, args);
}

/* out (rows, K) = rows of b (or nothing), then out (+)= col W, chunk by chunk */
static tnt_status im2col_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    float *col = a->scratch;
    const int64_t t = taps(c), k = c->filters, pix = c->oh * c->ow, chunk = im2col_chunk(c, a->batch);
    tnt_status s = TNT_OK;
    if (c->use_bias) {
        const float *b = l->weights[1].d_value;
        long long rows = a->batch * pix, kk = k;
        void *args[] = {&out, &b, &rows, &kk};
        s = tnt__gpu_launch("tnt_k_bias_set", tnt__gpu_grid_for(rows * kk, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
    for (int64_t b0 = 0; b0 < a->batch && s == TNT_OK; b0 += chunk) {
        const int64_t n = TNT_MIN(chunk, a->batch - b0);
        if ((s = im2col_kernel(false, c, b0, n, a->x, col)) == TNT_OK)
            s = tnt__gpu_sgemm(false, false, n * pix, k, t, 1.0f, col, t, l->weights[0].d_value, k,
                               c->use_bias ? 1.0f : 0.0f, out + b0 * pix * k, k);
    }
    return s;
}

static tnt_status im2col_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, im2col_run);
}

static tnt_status im2col_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    const int64_t t = taps(c), k = c->filters, pix = c->oh * c->ow, chunk = im2col_chunk(c, a->batch);
    float *col = a->scratch, *part = (float *)((char *)a->scratch + im2col_col_bytes(c, a->batch));
    const float *dpre;
    tnt_status s = tnt__gpu_fused_backward(l, a, &dpre);
    if (s == TNT_OK && c->use_bias && l->weights[1].d_grad)
        s = bias_grad(c, a->batch, dpre, false, part, l->weights[1].d_grad);
    for (int64_t b0 = 0; b0 < a->batch && s == TNT_OK && l->weights[0].d_grad; b0 += chunk) { /* dW = col^T dpre */
        const int64_t n = TNT_MIN(chunk, a->batch - b0);
        if ((s = im2col_kernel(false, c, b0, n, a->x, col)) == TNT_OK)
            s = tnt__gpu_sgemm(true, false, t, k, n * pix, 1.0f, col, t, dpre + b0 * pix * k, k, b0 ? 1.0f : 0.0f,
                               l->weights[0].d_grad, k);
    }
    for (int64_t b0 = 0; b0 < a->batch && s == TNT_OK && a->dx; b0 += chunk) { /* dcol = dpre W^T, then dx */
        const int64_t n = TNT_MIN(chunk, a->batch - b0);
        if ((s = tnt__gpu_sgemm(false, true, n * pix, t, k, 1.0f, dpre + b0 * pix * k, k, l->weights[0].d_value, k,
                                0.0f, col, t)) == TNT_OK)
            s = im2col_kernel(true, c, b0, n, col, a->dx);
    }
    return s;
}

/* ---- few taps, groups: direct kernels -------------------------------------------------------- */

/* Float32 2-D convolutions whose kh kw C / groups taps are at most TNT_GPU_CONV_DIRECT, and every
 * grouped one (DepthwiseConv2D), run as three plain kernels (conv.cu): forward and dx one thread
 * per element, dW as sums over chunks of the output pixels, then over the chunks in order
 * (deterministic, no atomics). LeNet-5's convolutions do 60 and 120 million multiply-adds a pass
 * at batch 512, where cuDNN's deterministic weight-gradient algorithm took 0.8 ms for the first
 * (H200): no col matrix to write and read, no GEMM of 6 columns. A depthwise convolution does a
 * few multiply-adds per output, reading as much as it computes. Any padding, strides, dilation;
 * runs on the emulated device (test_gpu_conv_few_taps). */
int64_t tnt__conv_direct_chunk = 256; /* output pixels a dW partial sum adds, at least (tests: fewer) */
#define DIRECT_PARTIAL_FLOATS (1 << 22) /* at most 16 MB of partial sums: larger chunks beyond */

static int64_t group_taps(const tnt__conv_cfg *c) { return (int64_t)c->kh * c->kw * (c->ic / TNT_MAX(c->groups, 1)); }

static bool direct_applies(const tnt_layer *l) {
    const tnt__conv_cfg *c = l->priv;
    return c->kd == 0 && !c->channels_first && !gemm_bf16(l) &&
           (c->groups > 1 || group_taps(c) <= tnt__config_get()->gpu_conv_direct);
}

static int64_t direct_chunk(const tnt__conv_cfg *c, int64_t batch) {
    const int64_t rows = gemm_rows(c, batch), outs = group_taps(c) * c->filters;
    const int64_t need = (rows * outs + DIRECT_PARTIAL_FLOATS - 1) / DIRECT_PARTIAL_FLOATS;
    return TNT_MAX(tnt__conv_direct_chunk, need);
}
static int64_t direct_chunks(const tnt__conv_cfg *c, int64_t batch) {
    return (gemm_rows(c, batch) + direct_chunk(c, batch) - 1) / direct_chunk(c, batch);
}

/* scratch: [dW partial sums (chunks, taps K)][bias partial sums] */
static size_t direct_partial_bytes(const tnt__conv_cfg *c, int64_t batch) {
    return align256((size_t)(direct_chunks(c, batch) * group_taps(c) * c->filters) * sizeof(float));
}
static size_t direct_scratch(tnt_layer *l, int64_t batch) {
    const tnt__conv_cfg *c = l->priv;
    return direct_partial_bytes(c, batch) + align256((size_t)(bias_chunks(c, batch) * c->filters) * sizeof(float));
}

static tnt_k_conv direct_geometry(const tnt__conv_cfg *c, int64_t batch) {
    return (tnt_k_conv){.n = batch, .ih = c->ih, .iw = c->iw, .c = c->ic, .oh = c->oh, .ow = c->ow, .k = c->filters,
                        .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw, .dh = c->dh, .dw = c->dw,
                        .pt = (int)c->pad_t, .pl = (int)c->pad_l, .groups = TNT_MAX(c->groups, 1)};
}

static tnt_status direct_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    tnt_k_conv g = direct_geometry(c, a->batch);
    const float *x = a->x, *w = l->weights[0].d_value, *b = c->use_bias ? l->weights[1].d_value : w;
    int use_bias = c->use_bias;
    void *args[] = {&g, &x, &w, &b, &out, &use_bias};
    return tnt__gpu_launch("tnt_k_conv_direct_fwd", tnt__gpu_grid_for(g.n * g.oh * g.ow * g.k, GPU_BLOCK), GPU_BLOCK, 0,
                           args);
}

static tnt_status direct_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, direct_run);
}

static tnt_status direct_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const tnt__conv_cfg *c = l->priv;
    tnt_k_conv g = direct_geometry(c, a->batch);
    float *part = a->scratch, *bias_part = (float *)((char *)a->scratch + direct_partial_bytes(c, a->batch));
    const float *dpre, *x = a->x, *w = l->weights[0].d_value;
    tnt_status s = tnt__gpu_fused_backward(l, a, &dpre);
    if (s == TNT_OK && c->use_bias && l->weights[1].d_grad)
        s = bias_grad(c, a->batch, dpre, false, bias_part, l->weights[1].d_grad);
    if (s == TNT_OK && l->weights[0].d_grad) {
        long long chunk = direct_chunk(c, a->batch), chunks = direct_chunks(c, a->batch);
        void *args[] = {&g, &x, &dpre, &part, &chunk};
        s = tnt__gpu_launch("tnt_k_conv_direct_dw_partial", tnt__gpu_grid_for(chunks * group_taps(c) * g.k, GPU_BLOCK),
                            GPU_BLOCK, 0, args);
        if (s == TNT_OK) s = tnt__gpu_col_sums(part, l->weights[0].d_grad, chunks, group_taps(c) * g.k);
    }
    if (s == TNT_OK && a->dx) {
        float *dx = a->dx;
        void *args[] = {&g, &dpre, &w, &dx};
        s = tnt__gpu_launch("tnt_k_conv_direct_dx", tnt__gpu_grid_for(g.n * g.ih * g.iw * g.c, GPU_BLOCK), GPU_BLOCK, 0,
                            args);
    }
    return s;
}

/* ---- Conv2D's device path: GEMMs for 1x1 windows, direct kernels or GEMMs for few taps, cuDNN for the rest */

/* the GEMM path keeps nothing per batch size: its plan is this marker, which plan_destroy skips */
static char gemm_plan;

/* no cuDNN: the GEMM paths and the direct kernels */
static bool own_path(const tnt_layer *l) { return gemm_applies(l) || direct_applies(l) || im2col_applies(l); }

static bool dev_supported(const tnt_layer *l, const char **why) {
    if (own_path(l)) return true;
    return !tnt__conv2d_gpu_ops.supported || tnt__conv2d_gpu_ops.supported(l, why);
}
static void *dev_plan_create(tnt_layer *l, int64_t batch) {
    return own_path(l) ? &gemm_plan : tnt__conv2d_gpu_ops.plan_create(l, batch);
}
static void dev_plan_destroy(void *plan) {
    if (plan != &gemm_plan && tnt__conv2d_gpu_ops.plan_destroy) tnt__conv2d_gpu_ops.plan_destroy(plan);
}
static size_t dev_workspace(tnt_layer *l, void *plan, int64_t batch) {
    if (own_path(l)) return tnt__fused_workspace_size(l, batch);
    return tnt__conv2d_gpu_ops.workspace_size(l, plan, batch);
}
static size_t dev_scratch(tnt_layer *l, void *plan, int64_t batch) {
    return gemm_applies(l)     ? gemm_scratch(l, batch)
           : direct_applies(l) ? direct_scratch(l, batch)
           : im2col_applies(l) ? im2col_scratch(l, batch)
                               : tnt__conv2d_gpu_ops.scratch_size(l, plan, batch);
}
static tnt_status dev_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return gemm_applies(l)     ? gemm_forward(l, plan, a)
           : direct_applies(l) ? direct_forward(l, plan, a)
           : im2col_applies(l) ? im2col_forward(l, plan, a)
                               : tnt__conv2d_gpu_ops.forward(l, plan, a);
}
static tnt_status dev_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    return gemm_applies(l)     ? gemm_backward(l, plan, a)
           : direct_applies(l) ? direct_backward(l, plan, a)
           : im2col_applies(l) ? im2col_backward(l, plan, a)
                               : tnt__conv2d_gpu_ops.backward(l, plan, a);
}

const tnt__gpu_ops tnt__conv2d_device_ops = {
    .supported = dev_supported,
    .plan_create = dev_plan_create,
    .plan_destroy = dev_plan_destroy,
    .workspace_size = dev_workspace,
    .scratch_size = dev_scratch,
    .forward = dev_forward,
    .backward = dev_backward,
};
