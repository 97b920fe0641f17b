/* conv2d_gpu.c: Conv2D on the device through cuDNN (GPU-DESIGN.md 4.4): NHWC activations,
 * CUDNN_CROSS_CORRELATION, FMA math (no TF32 unless TNT_GPU_TF32), algorithms from the _v7
 * heuristics (the first deterministic one for the weight gradient, so runs repeat bitwise).
 * Keras's kernel is HWIO, neither of cuDNN's filter layouts: each forward transposes it to KRSC
 * (cuDNN's NHWC filter) in the workspace, and the weight gradient comes back the same way, so the
 * flat buffers, the allreduce, the optimizer and the files keep the Keras layout. The bias and the
 * activation are the library's own kernels (fused_gpu.c), as Dense's.
 *
 * Device path for the common case: 2-D, channels last, no groups, float32, padding that cuDNN's
 * symmetric padding expresses (valid, and "same" with an odd window at stride 1, LeNet-5's and
 * ResNet's); the rest stays on the CPU and dispatch names the layer. Without cuDNN (not
 * installed, or the emulated device) Conv2D has no device path at all.
 * Not yet run on a GPU: the tests that run this file need one (test_gpu_model_device). */
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
    else if (l->dtype_policy == TNT__POLICY_MIXED_BF16) *why = "the mixed_bfloat16 policy has no device path yet";
    else if (c->pad_t != c->pad_b || c->pad_l != c->pad_r) *why = "asymmetric \"same\" padding has no device path yet";
    else return true;
    return false;
}

typedef struct conv_gpu_plan {
    int64_t batch;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t algo_bytes; /* the largest of the three algorithms' workspaces */
} conv_gpu_plan;

static void conv_gpu_plan_destroy(void *plan) {
    conv_gpu_plan *p = plan;
    if (!p) return;
    if (p->x) tnt__cuda.cudnnDestroyTensorDescriptor(p->x);
    if (p->y) tnt__cuda.cudnnDestroyTensorDescriptor(p->y);
    if (p->w) tnt__cuda.cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) tnt__cuda.cudnnDestroyConvolutionDescriptor(p->conv);
    free(p);
}

static void *conv_gpu_plan_create(tnt_layer *l, int64_t batch) {
    const tnt__conv_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    cudnnHandle_t h = tnt__gpu_cudnn();
    conv_gpu_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = batch;
    if (!h) {
        status = tnt__error(TNT_ERR_UNSUPPORTED, "Conv2D \"%s\": no cuDNN", l->name);
        goto out;
    }
    if ((status = tnt__gpu_enter("Conv2D")) != TNT_OK) goto out;
    TNT_GPU_CHECK(cudnn, cudnnCreateTensorDescriptor(&p->x));
    TNT_GPU_CHECK(cudnn, cudnnCreateTensorDescriptor(&p->y));
    TNT_GPU_CHECK(cudnn, cudnnCreateFilterDescriptor(&p->w));
    TNT_GPU_CHECK(cudnn, cudnnCreateConvolutionDescriptor(&p->conv));
    TNT_GPU_CHECK(cudnn, cudnnSetTensor4dDescriptor(p->x, TNT_CUDNN_TENSOR_NHWC, TNT_CUDNN_DATA_FLOAT, (int)batch,
                                                    (int)c->ic, (int)c->ih, (int)c->iw));
    TNT_GPU_CHECK(cudnn, cudnnSetTensor4dDescriptor(p->y, TNT_CUDNN_TENSOR_NHWC, TNT_CUDNN_DATA_FLOAT, (int)batch,
                                                    c->filters, (int)c->oh, (int)c->ow));
    /* KRSC: cuDNN's NHWC filter format */
    TNT_GPU_CHECK(cudnn, cudnnSetFilter4dDescriptor(p->w, TNT_CUDNN_DATA_FLOAT, TNT_CUDNN_TENSOR_NHWC, c->filters,
                                                    (int)c->ic, c->kh, c->kw));
    TNT_GPU_CHECK(cudnn, cudnnSetConvolution2dDescriptor(p->conv, (int)c->pad_t, (int)c->pad_l, c->sh, c->sw, c->dh,
                                                         c->dw, TNT_CUDNN_CROSS_CORRELATION, TNT_CUDNN_DATA_FLOAT));
    TNT_GPU_CHECK(cudnn, cudnnSetConvolutionMathType(p->conv, tnt__gpu.tf32 ? TNT_CUDNN_DEFAULT_MATH : TNT_CUDNN_FMA_MATH));
    enum { MAX_ALGOS = 16 };
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[MAX_ALGOS];
    cudnnConvolutionBwdDataAlgoPerf_t bd[MAX_ALGOS];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[MAX_ALGOS];
    size_t bytes = 0;
    /* measured (TNT_GPU_CONV_ALGO=measure: cuDNN times each algorithm once per shape, as PyTorch's
     * cudnn.benchmark) or cuDNN's heuristics; either way the fastest deterministic one */
    const bool measure = tnt__config_get()->gpu_conv_measure != 0;
    const bool any = tnt__config_get()->gpu_conv_measure == 2; /* fastest: non-deterministic ones too */
    /* TF32 off: results timed with FMA math first (Find also times the default math, TF32's) */
    const bool fma = !tnt__gpu.tf32;
/* the best (results come best first) successful, deterministic unless `any`, FMA-timed if there is one */
#define PICK_ALGO(perf, count, out)                                                                        \
    do {                                                                                                   \
        int found_ = -1;                                                                                   \
        for (int pass = 0; pass < 2 && found_ < 0; pass++)                                                 \
            for (int i = 0; i < (count) && found_ < 0; i++)                                                \
                if (perf[i].status == 0 && (perf[i].determinism == CUDNN_DETERMINISTIC || any) &&          \
                    (pass || !fma || perf[i].mathType == TNT_CUDNN_FMA_MATH))                              \
                    found_ = i;                                                                            \
        (out) = perf[found_ < 0 ? 0 : found_].algo;                                                        \
    } while (0)
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y, MAX_ALGOS, &n, fwd));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, MAX_ALGOS, &n, fwd));
    PICK_ALGO(fwd, n, p->fwd);
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionBackwardDataAlgorithm(h, p->w, p->y, p->conv, p->x, MAX_ALGOS, &n, bd));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, MAX_ALGOS, &n, bd));
    PICK_ALGO(bd, n, p->bwd_data);
    if (measure) TNT_GPU_CHECK(cudnn, cudnnFindConvolutionBackwardFilterAlgorithm(h, p->x, p->y, p->conv, p->w, MAX_ALGOS, &n, bf));
    else TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w, MAX_ALGOS, &n, bf));
    PICK_ALGO(bf, n, p->bwd_filter);
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, p->fwd, &bytes));
    p->algo_bytes = bytes;
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->conv, p->x, p->bwd_data, &bytes));
    p->algo_bytes = TNT_MAX(p->algo_bytes, bytes);
    TNT_GPU_CHECK(cudnn, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->conv, p->w, p->bwd_filter, &bytes));
    p->algo_bytes = TNT_MAX(p->algo_bytes, bytes);
out:
    if (status == TNT_OK) return p;
    conv_gpu_plan_destroy(p);
    return NULL;
}

/* Workspace: [the fused activation's (fused.c)][KRSC weights][KRSC weight gradient][bias partial
 * sums][cuDNN's] */
typedef struct conv_gpu_ws {
    float *w_krsc, *dw_krsc, *bias_part;
    void *algo;
} conv_gpu_ws;

static int64_t bias_chunks(const tnt__conv_cfg *c, int64_t batch) {
    return (batch * c->oh * c->ow + BIAS_CHUNK - 1) / BIAS_CHUNK;
}

static size_t conv_gpu_layout(const tnt_layer *l, const conv_gpu_plan *p, int64_t batch, void *ws, conv_gpu_ws *w) {
    const tnt__conv_cfg *c = l->priv;
    size_t wbytes = align256((size_t)((int64_t)c->kh * c->kw * c->ic * c->filters) * sizeof(float));
    size_t off = align256(tnt__fused_workspace_size(l, batch));
    if (w) w->w_krsc = (float *)((char *)ws + off);
    off += wbytes;
    if (w) w->dw_krsc = (float *)((char *)ws + off);
    off += wbytes;
    if (w) w->bias_part = (float *)((char *)ws + off);
    off += align256((size_t)(bias_chunks(c, batch) * c->filters) * sizeof(float));
    if (w) w->algo = (char *)ws + off;
    return off + (p ? p->algo_bytes : 0);
}

static size_t conv_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
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
    conv_gpu_ws w;
    conv_gpu_layout(l, p, a->batch, a->workspace, &w);
    tnt_status status = transpose(l->weights[0].d_value, w.w_krsc, (long long)c->kh * c->kw * c->ic, c->filters);
    if (status != TNT_OK) return status;
    const float one = 1.0f, zero = 0.0f;
    TNT_GPU_CHECK(cudnn, cudnnConvolutionForward(tnt__gpu_cudnn(), &one, p->x, a->x, p->w, w.w_krsc, p->conv, p->fwd,
                                                 w.algo, p->algo_bytes, &zero, p->y, out));
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
    conv_gpu_ws w;
    conv_gpu_layout(l, p, a->batch, a->workspace, &w);
    const float *dpre;
    tnt_status status = tnt__gpu_fused_backward(l, a, &dpre);
    if (status != TNT_OK) return status;
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = tnt__gpu_cudnn();
    long long rsc = (long long)c->kh * c->kw * c->ic, k = c->filters;
    if (l->weights[0].d_grad) { /* dW: KRSC from cuDNN, HWIO into the flat gradient buffer */
        TNT_GPU_CHECK(cudnn, cudnnConvolutionBackwardFilter(h, &one, p->x, a->x, p->y, dpre, p->conv, p->bwd_filter,
                                                            w.algo, p->algo_bytes, &zero, p->w, w.dw_krsc));
        if ((status = transpose(w.dw_krsc, l->weights[0].d_grad, k, rsc)) != TNT_OK) return status;
    }
    if (c->use_bias && l->weights[1].d_grad) { /* db: column sums of dpre in chunks of rows, then of the chunks */
        long long rows = a->batch * c->oh * c->ow, chunk = BIAS_CHUNK, chunks = bias_chunks(c, a->batch);
        float *db = l->weights[1].d_grad;
        void *part_args[] = {&dpre, &w.bias_part, &rows, &k, &chunk};
        status = tnt__gpu_launch("tnt_k_col_sums_partial", tnt__gpu_grid_for(chunks * k, GPU_BLOCK), GPU_BLOCK, 0, part_args);
        void *sum_args[] = {&w.bias_part, &db, &chunks, &k};
        if (status == TNT_OK)
            status = tnt__gpu_launch("tnt_k_col_sums", tnt__gpu_grid_for(k, GPU_BLOCK), GPU_BLOCK, 0, sum_args);
        if (status != TNT_OK) return status;
    }
    if (a->dx) /* dx = the transposed convolution of dpre with the forward's KRSC weights */
        TNT_GPU_CHECK(cudnn, cudnnConvolutionBackwardData(h, &one, p->w, w.w_krsc, p->y, dpre, p->conv, p->bwd_data,
                                                          w.algo, p->algo_bytes, &zero, p->x, a->dx));
out:
    return status;
}

const tnt__gpu_ops tnt__conv2d_gpu_ops = {
    .supported = conv_gpu_supported,
    .plan_create = conv_gpu_plan_create,
    .plan_destroy = conv_gpu_plan_destroy,
    .workspace_size = conv_gpu_workspace,
    .forward = conv_gpu_forward,
    .backward = conv_gpu_backward,
};
