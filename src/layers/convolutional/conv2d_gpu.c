/* conv2d_gpu.c: Conv2D on the device through cuDNN (GPU-DESIGN.md 4.4): NHWC activations,
 * CUDNN_CROSS_CORRELATION, FMA math (no TF32 unless TNT_GPU_TF32), algorithms from the _v7
 * heuristics or cuDNN's own timing (TNT_GPU_CONV_ALGO; the first deterministic one, so runs repeat
 * bitwise, unless "fastest").
 * Keras's kernel is HWIO, neither of cuDNN's filter layouts: each forward (and backward)
 * transposes it to KRSC (cuDNN's NHWC filter) in the plan's scratch, and the weight gradient comes
 * back the same way, so the flat buffers, the allreduce, the optimizer and the files keep the Keras layout. The bias and the
 * activation are the library's own kernels (fused_gpu.c), as Dense's.
 *
 * Device path for the common case: 2-D, channels last, no groups, padding that cuDNN's symmetric
 * padding expresses (valid, and "same" with an odd window at stride 1, LeNet-5's and ResNet's);
 * the rest stays on the CPU and dispatch names the layer. 1x1 convolutions do not come here: they
 * are cuBLAS GEMMs (conv2d_gemm_gpu.c), also without cuDNN; without cuDNN (not installed, or the
 * emulated device) the other Conv2D layers have no device path.
 *
 * mixed_bfloat16 (Keras: the layer computes in bf16, its variables stay float32; TNT_GPU_CONV_BF16=0
 * keeps such layers off the GPU): cuDNN's PSEUDO_BFLOAT16_CONFIG (x, w and y descriptors
 * CUDNN_DATA_BFLOAT16, the convolution's compute type CUDNN_DATA_FLOAT, tensor-op math), the only
 * bf16 configuration of the legacy API, whose output is bf16 too. So x and the KRSC weights are
 * rounded to bf16 into the scratch
 * (tnt_k_f32_to_bf16, nearest even, as the CPU's conversion), cuDNN writes bf16 y, dx and dW,
 * and each is widened back to the float32 the rest of the step reads (exactly). Against the CPU's
 * bf16 engine (conv_bf16.c: the same bf16 operands, float32 results) each of the three carries
 * one more rounding, to bf16, as Keras's own bf16 convolution does. The bias, its gradient (from
 * float32 dpre) and the fused activation stay float32. test_gpu_precision checks it on a GPU. */
#include "layers/convolutional/conv2d.h"
#include "core/config.h"
#include "layers/fused.h"
#include "gpu/api.h"

#include <stdio.h>

#define GPU_BLOCK 256
#define BIAS_CHUNK 256 /* rows each partial column sum adds, before the sums of the partials */
#define CUDNN_DETERMINISTIC 1

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static bool conv_gpu_supported(const tnt_layer *l, const char **why) {
    const tnt__conv_cfg *c = l->priv;
    if (!tnt__gpu_cudnn_usable()) *why = "needs cuDNN, which this device does not have (the emulated device never has it)";
    else if (c->kd > 0 || c->one_d) *why = "only 2-D convolutions have a device path yet";
    else if (c->groups > 1) *why = "grouped convolutions have no device path yet";
    else if (c->channels_first) *why = "channels_first has no device path yet";
    else if (c->pad_t != c->pad_b || c->pad_l != c->pad_r) *why = "asymmetric \"same\" padding has no device path yet";
    else if (l->dtype_policy == TNT__POLICY_MIXED_BF16 && !tnt__config_get()->gpu_conv_bf16)
        *why = "its mixed_bfloat16 path (cuDNN bf16) is off (TNT_GPU_CONV_BF16=0)";
    else return true;
    return false;
}

static bool conv_gpu_bf16(const tnt_layer *l) { return l->dtype_policy == TNT__POLICY_MIXED_BF16; }

typedef struct conv_gpu_plan {
    int64_t batch;
    bool bf16; /* mixed_bfloat16: every descriptor bf16 (PSEUDO_BFLOAT16_CONFIG) */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t algo_bytes; /* the largest of the three algorithms' workspaces */
    /* bf16: the math type of each chosen algorithm (cuDNN's answer), and the descriptor's now */
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math, math_now;
} conv_gpu_plan;

/* bf16: cuDNN's heuristics (and Find) may answer with an algorithm of another math type than the
 * descriptor's; the call then needs that type on the descriptor (PyTorch sets it likewise before
 * each call). float32 keeps its one type: FMA must not become DEFAULT, which allows TF32. */
static tnt_status use_math(conv_gpu_plan *p, cudnnMathType_t m) {
    tnt_status status = TNT_OK;
    if (!p->bf16 || m == p->math_now) return TNT_OK;
    TNT_GPU_CHECK(cudnn, cudnnSetConvolutionMathType(p->conv, m));
    p->math_now = m;
out:
    return status;
}

static void conv_gpu_plan_destroy(void *plan) {
    conv_gpu_plan *p = plan;
    if (!p) return;
    if (p->x) tnt__cuda.cudnnDestroyTensorDescriptor(p->x);
    if (p->y) tnt__cuda.cudnnDestroyTensorDescriptor(p->y);
    if (p->w) tnt__cuda.cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) tnt__cuda.cudnnDestroyConvolutionDescriptor(p->conv);
    free(p);
}

/* The first algorithm cuDNN can run (status 0; results come best first) that is deterministic (or
 * any, under TNT_GPU_CONV_ALGO=fastest) and, when `fma`, timed with FMA math (Find also times the
 * default math, which allows TF32); else the first such one of any math; else the first it can
 * run; -1 when none. The three records have the same fields. */
#define PICK_ALGO(perf, n, idx, any, fma)                                                          \
    do {                                                                                           \
        (idx) = -1;                                                                                \
        for (int pass_ = 0; pass_ < 3 && (idx) < 0; pass_++)                                       \
            for (int i_ = 0; i_ < (n); i_++)                                                       \
                if ((perf)[i_].status == 0 &&                                                      \
                    (pass_ == 2 || (any) || (perf)[i_].determinism == CUDNN_DETERMINISTIC) &&      \
                    (pass_ > 0 || !(fma) || (perf)[i_].mathType == TNT_CUDNN_FMA_MATH)) {          \
                    (idx) = i_;                                                                    \
                    break;                                                                         \
                }                                                                                  \
    } while (0)

/* The descriptors in p->bf16's data type and the three algorithms with their workspace. */
static tnt_status conv_gpu_plan_setup(tnt_layer *l, conv_gpu_plan *p, cudnnHandle_t h) {
    const tnt__conv_cfg *c = l->priv;
    const int batch = (int)p->batch;
    tnt_status status = TNT_OK;
    /* the data type of x, y and w; the sums are float32 either way (the convolution's compute type) */
    const cudnnDataType_t dt = p->bf16 ? TNT_CUDNN_DATA_BFLOAT16 : TNT_CUDNN_DATA_FLOAT;
    TNT_GPU_CHECK(cudnn, cudnnSetTensor4dDescriptor(p->x, TNT_CUDNN_TENSOR_NHWC, dt, batch, (int)c->ic, (int)c->ih,
                                                    (int)c->iw));
    TNT_GPU_CHECK(cudnn, cudnnSetTensor4dDescriptor(p->y, TNT_CUDNN_TENSOR_NHWC, dt, batch, c->filters, (int)c->oh,
                                                    (int)c->ow));
    /* KRSC: cuDNN's NHWC filter format */
    TNT_GPU_CHECK(cudnn, cudnnSetFilter4dDescriptor(p->w, dt, TNT_CUDNN_TENSOR_NHWC, c->filters,
                                                    (int)c->ic, c->kh, c->kw));
    TNT_GPU_CHECK(cudnn, cudnnSetConvolution2dDescriptor(p->conv, (int)c->pad_t, (int)c->pad_l, c->sh, c->sw, c->dh,
                                                         c->dw, TNT_CUDNN_CROSS_CORRELATION, TNT_CUDNN_DATA_FLOAT));
    /* float32: FMA unless TF32 is allowed; bf16: tensor cores (the operands are bf16 already, so
     * nothing is converted down there) */
    const cudnnMathType_t math = p->bf16      ? TNT_CUDNN_TENSOR_OP_MATH
                                 : tnt__gpu.tf32 ? TNT_CUDNN_DEFAULT_MATH
                                                 : TNT_CUDNN_FMA_MATH;
    TNT_GPU_CHECK(cudnn, cudnnSetConvolutionMathType(p->conv, math));
    p->fwd_math = p->bwd_data_math = p->bwd_filter_math = p->math_now = math;
    enum { MAX_ALGOS = 16 };
    int n = 0, i = -1;
    cudnnConvolutionFwdAlgoPerf_t fwd[MAX_ALGOS];
    cudnnConvolutionBwdDataAlgoPerf_t bd[MAX_ALGOS];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[MAX_ALGOS];
    size_t bytes = 0;
    /* measured (TNT_GPU_CONV_ALGO=measure: cuDNN times each algorithm once per shape, as PyTorch's
     * cudnn.benchmark) or cuDNN's heuristics; either way the fastest deterministic one (any one
     * under fastest). float32
     * keeps the first answer when none can run (the call then names the error); bf16 falls back
     * to float32 (conv_gpu_plan_create). */
    const bool measure = tnt__config_get()->gpu_conv_algo != 0;
    const bool any = tnt__config_get()->gpu_conv_algo == 2; /* fastest: non-deterministic ones too */
    const bool fma = math == TNT_CUDNN_FMA_MATH;
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y, MAX_ALGOS, &n, fwd));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, MAX_ALGOS, &n, fwd));
    PICK_ALGO(fwd, n, i, any, fma);
    if (i < 0 && p->bf16) goto none;
    p->fwd = fwd[i < 0 ? 0 : i].algo;
    if (p->bf16) p->fwd_math = fwd[i].mathType;
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionBackwardDataAlgorithm(h, p->w, p->y, p->conv, p->x, MAX_ALGOS, &n, bd));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, MAX_ALGOS, &n, bd));
    PICK_ALGO(bd, n, i, any, fma);
    if (i < 0 && p->bf16) goto none;
    p->bwd_data = bd[i < 0 ? 0 : i].algo;
    if (p->bf16) p->bwd_data_math = bd[i].mathType;
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionBackwardFilterAlgorithm(h, p->x, p->y, p->conv, p->w, MAX_ALGOS, &n, bf));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w, MAX_ALGOS, &n, bf));
    PICK_ALGO(bf, n, i, any, fma);
    if (i < 0 && p->bf16) goto none;
    p->bwd_filter = bf[i < 0 ? 0 : i].algo;
    if (p->bf16) p->bwd_filter_math = bf[i].mathType;
    if ((status = use_math(p, p->fwd_math)) != TNT_OK) goto out;
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, p->fwd, &bytes));
    p->algo_bytes = bytes;
    if ((status = use_math(p, p->bwd_data_math)) != TNT_OK) goto out;
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->conv, p->x, p->bwd_data, &bytes));
    p->algo_bytes = TNT_MAX(p->algo_bytes, bytes);
    if ((status = use_math(p, p->bwd_filter_math)) != TNT_OK) goto out;
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->conv, p->w, p->bwd_filter, &bytes));
    p->algo_bytes = TNT_MAX(p->algo_bytes, bytes);
out:
    return status;
none:
    return tnt__error(TNT_ERR_UNSUPPORTED, "Conv2D \"%s\": cuDNN offers no bf16 algorithm it can run for this shape",
                      l->name);
}

static void *conv_gpu_plan_create(tnt_layer *l, int64_t batch) {
    tnt_status status = TNT_OK;
    cudnnHandle_t h = tnt__gpu_cudnn();
    conv_gpu_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = batch;
    p->bf16 = conv_gpu_bf16(l);
    if (!h) {
        status = tnt__error(TNT_ERR_UNSUPPORTED, "Conv2D \"%s\": no cuDNN", l->name);
        goto out;
    }
    if ((status = tnt__gpu_enter("Conv2D")) != TNT_OK) goto out;
    TNT_GPU_CHECK(cudnn, cudnnCreateTensorDescriptor(&p->x));
    TNT_GPU_CHECK(cudnn, cudnnCreateTensorDescriptor(&p->y));
    TNT_GPU_CHECK(cudnn, cudnnCreateFilterDescriptor(&p->w));
    TNT_GPU_CHECK(cudnn, cudnnCreateConvolutionDescriptor(&p->conv));
    status = conv_gpu_plan_setup(l, p, h);
    if (status != TNT_OK && p->bf16) {
        /* as the CPU's bf16 engine where oneDNN has no bf16 kernels: this layer computes float32 */
        tnt_log(TNT_LOG_WARNING, "Conv2D \"%s\" (mixed_bfloat16): cuDNN refused bf16 here, float32 instead: %s",
                l->name, tnt_last_error());
        p->bf16 = false;
        status = conv_gpu_plan_setup(l, p, h);
    }
out:
    if (status == TNT_OK) return p;
    conv_gpu_plan_destroy(p);
    return NULL;
}

/* Workspace (forward to backward): the fused activation's (fused.c). Scratch (one call, shared by
 * the plan's layers): [KRSC weights][KRSC weight gradient][bias partial sums], under
 * mixed_bfloat16 then [KRSC weights bf16][KRSC weight gradient bf16][x bf16][y bf16], and last
 * [cuDNN's]. Backward makes the KRSC weights and x16 again; x16 is then dx's bf16 result, and
 * y16, forward's bf16 output, backward's bf16 dpre. */
typedef struct conv_gpu_ws {
    float *w_krsc, *dw_krsc, *bias_part;
    uint16_t *w16, *dw16, *x16, *y16;
    void *algo;
} conv_gpu_ws;

static int64_t x_numel(const tnt__conv_cfg *c, int64_t batch) { return batch * c->ih * c->iw * c->ic; }
static int64_t y_numel(const tnt__conv_cfg *c, int64_t batch) { return batch * c->oh * c->ow * c->filters; }

static int64_t bias_chunks(const tnt__conv_cfg *c, int64_t batch) {
    return (batch * c->oh * c->ow + BIAS_CHUNK - 1) / BIAS_CHUNK;
}

static size_t conv_gpu_layout(const tnt_layer *l, const conv_gpu_plan *p, int64_t batch, void *scratch, conv_gpu_ws *w) {
    const tnt__conv_cfg *c = l->priv;
    size_t wbytes = align256((size_t)((int64_t)c->kh * c->kw * c->ic * c->filters) * sizeof(float));
    size_t off = 0;
    if (w) w->w_krsc = (float *)((char *)scratch + off);
    off += wbytes;
    if (w) w->dw_krsc = (float *)((char *)scratch + off);
    off += wbytes;
    if (w) w->bias_part = (float *)((char *)scratch + off);
    off += align256((size_t)(bias_chunks(c, batch) * c->filters) * sizeof(float));
    if (p ? p->bf16 : conv_gpu_bf16(l)) {
        const size_t w16 = align256((size_t)((int64_t)c->kh * c->kw * c->ic * c->filters) * sizeof(uint16_t));
        if (w) w->w16 = (uint16_t *)((char *)scratch + off);
        off += w16;
        if (w) w->dw16 = (uint16_t *)((char *)scratch + off);
        off += w16;
        if (w) w->x16 = (uint16_t *)((char *)scratch + off);
        off += align256((size_t)x_numel(c, batch) * sizeof(uint16_t));
        if (w) w->y16 = (uint16_t *)((char *)scratch + off);
        off += align256((size_t)y_numel(c, batch) * sizeof(uint16_t));
    }
    if (w) w->algo = (char *)scratch + off;
    return off + (p ? p->algo_bytes : 0);
}

static size_t conv_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return tnt__fused_workspace_size(l, batch);
}
static size_t conv_gpu_scratch(tnt_layer *l, void *plan, int64_t batch) {
    return conv_gpu_layout(l, plan, batch, NULL, NULL);
}

static tnt_status transpose(const float *x, float *y, long long rows, long long cols) {
    void *args[] = {&x, &y, &rows, &cols};
    return tnt__gpu_launch("tnt_k_transpose", tnt__gpu_grid_for(rows * cols, GPU_BLOCK), GPU_BLOCK, 0, args);
}

/* out (batch, oh, ow, filters) = conv(x, W) + b: the linear part, for the fused activation */
static tnt_status conv_gpu_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    const tnt__conv_cfg *c = l->priv;
    conv_gpu_plan *p = plan;
    conv_gpu_ws w = {0};
    conv_gpu_layout(l, p, a->batch, a->scratch, &w);
    const int64_t rsck = (int64_t)c->kh * c->kw * c->ic * c->filters;
    tnt_status status = transpose(l->weights[0].d_value, w.w_krsc, (long long)c->kh * c->kw * c->ic, c->filters);
    if (status != TNT_OK) return status;
    /* alpha and beta are floats for bf16 data too (cuDNN's scaling parameters) */
    const float one = 1.0f, zero = 0.0f;
    if (p->bf16) { /* bf16 x and W, bf16 y from cuDNN, widened into out */
        if ((status = tnt__gpu_to_bf16(w.w_krsc, w.w16, rsck)) != TNT_OK ||
            (status = tnt__gpu_to_bf16(a->x, w.x16, x_numel(c, a->batch))) != TNT_OK)
            return status;
        if ((status = use_math(p, p->fwd_math)) != TNT_OK) return status;
        TNT_GPU_CHECK(cudnn, cudnnConvolutionForward(tnt__gpu_cudnn(), &one, p->x, w.x16, p->w, w.w16, p->conv, p->fwd,
                                                     w.algo, p->algo_bytes, &zero, p->y, w.y16));
        if ((status = tnt__gpu_from_bf16(w.y16, out, y_numel(c, a->batch))) != TNT_OK) return status;
    } else {
        TNT_GPU_CHECK(cudnn, cudnnConvolutionForward(tnt__gpu_cudnn(), &one, p->x, a->x, p->w, w.w_krsc, p->conv, p->fwd,
                                                     w.algo, p->algo_bytes, &zero, p->y, out));
    }
    if (c->use_bias) {
        const float *b = l->weights[1].d_value;
        long long rows = a->batch * c->oh * c->ow, cols = c->filters;
        void *args[] = {&out, &b, &rows, &cols};
        status = tnt__gpu_launch("tnt_k_bias_add", tnt__gpu_grid_for(rows * cols, GPU_BLOCK), GPU_BLOCK, 0, args);
    }
out:
    return status;
}

static tnt_status conv_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, conv_gpu_run);
}

static tnt_status conv_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    const tnt__conv_cfg *c = l->priv;
    conv_gpu_plan *p = plan;
    conv_gpu_ws w = {0};
    conv_gpu_layout(l, p, a->batch, a->scratch, &w);
    const float *dpre;
    tnt_status status = tnt__gpu_fused_backward(l, a, &dpre);
    if (status != TNT_OK) return status;
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = tnt__gpu_cudnn();
    long long rsc = (long long)c->kh * c->kw * c->ic, k = c->filters;
    /* forward's KRSC weights (and bf16 x and W) once more: the scratch held them for its call only */
    if (a->dx && (status = transpose(l->weights[0].d_value, w.w_krsc, rsc, k)) != TNT_OK) return status;
    if (p->bf16 && a->dx && (status = tnt__gpu_to_bf16(w.w_krsc, w.w16, k * rsc)) != TNT_OK) return status;
    if (p->bf16 && l->weights[0].d_grad && (status = tnt__gpu_to_bf16(a->x, w.x16, x_numel(c, a->batch))) != TNT_OK)
        return status;
    /* bf16: cuDNN reads dpre rounded to bf16 (into y16, free since forward widened it) */
    const void *x_in = p->bf16 ? (const void *)w.x16 : (const void *)a->x, *dy_in = dpre;
    if (p->bf16) {
        if ((status = tnt__gpu_to_bf16(dpre, w.y16, y_numel(c, a->batch))) != TNT_OK) return status;
        dy_in = w.y16;
    }
    if (l->weights[0].d_grad) { /* dW: KRSC from cuDNN (bf16: widened), HWIO into the flat gradient buffer */
        if ((status = use_math(p, p->bwd_filter_math)) != TNT_OK) return status;
        TNT_GPU_CHECK(cudnn, cudnnConvolutionBackwardFilter(h, &one, p->x, x_in, p->y, dy_in, p->conv, p->bwd_filter,
                                                            w.algo, p->algo_bytes, &zero, p->w,
                                                            p->bf16 ? (void *)w.dw16 : (void *)w.dw_krsc));
        if (p->bf16 && (status = tnt__gpu_from_bf16(w.dw16, w.dw_krsc, k * rsc)) != TNT_OK) return status;
        if ((status = transpose(w.dw_krsc, l->weights[0].d_grad, k, rsc)) != TNT_OK) return status;
    }
    if (c->use_bias && l->weights[1].d_grad) { /* db: column sums of dpre in chunks of rows, then of the chunks */
        long long rows = a->batch * c->oh * c->ow, chunk = BIAS_CHUNK, chunks = bias_chunks(c, a->batch);
        float *db = l->weights[1].d_grad;
        void *part_args[] = {&dpre, &w.bias_part, &rows, &k, &chunk};
        status = tnt__gpu_launch("tnt_k_col_sums_partial", tnt__gpu_grid_for(chunks * k, GPU_BLOCK), GPU_BLOCK, 0, part_args);
        if (status == TNT_OK) status = tnt__gpu_col_sums(w.bias_part, db, chunks, k);
        if (status != TNT_OK) return status;
    }
    if (a->dx && p->bf16) { /* dx16 into x16, which the weight gradient above was the last to read */
        if ((status = use_math(p, p->bwd_data_math)) != TNT_OK) return status;
        TNT_GPU_CHECK(cudnn, cudnnConvolutionBackwardData(h, &one, p->w, w.w16, p->y, dy_in, p->conv, p->bwd_data,
                                                          w.algo, p->algo_bytes, &zero, p->x, w.x16));
        status = tnt__gpu_from_bf16(w.x16, a->dx, x_numel(c, a->batch));
    } else if (a->dx) { /* dx = the transposed convolution of dpre with the forward's KRSC weights */
        TNT_GPU_CHECK(cudnn, cudnnConvolutionBackwardData(h, &one, p->w, w.w_krsc, p->y, dpre, p->conv, p->bwd_data,
                                                          w.algo, p->algo_bytes, &zero, p->x, a->dx));
    }
out:
    return status;
}

const tnt__gpu_ops tnt__conv2d_gpu_ops = {
    .supported = conv_gpu_supported,
    .plan_create = conv_gpu_plan_create,
    .plan_destroy = conv_gpu_plan_destroy,
    .workspace_size = conv_gpu_workspace,
    .scratch_size = conv_gpu_scratch,
    .forward = conv_gpu_forward,
    .backward = conv_gpu_backward,
};
