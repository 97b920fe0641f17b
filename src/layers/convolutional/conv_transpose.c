/* conv_transpose.c: Conv2DTranspose, Conv1DTranspose as a transposed convolution of height 1, and
 * Conv3DTranspose (Keras): NHWC (NDHWC) input, kernel in Keras layout (kh, kw, filters, in_ch) or
 * (kd, kh, kw, filters, in_ch), optional bias and activation, on oneDNN deconvolution primitives (forward, backward-data, backward-weights with
 * the bias gradient). The primitives read and write the Keras kernel buffer in place through a
 * strided memory descriptor, so no weight reorders are needed.
 *
 * Output size (Keras deconv_output_length), with k the dilated kernel extent:
 *   no output_padding: valid in*s + max(k - s, 0), same in*s;
 *   output_padding op: (in - 1)*s + k - 2*pad + op, pad = 0 (valid) or k / 2 (same).
 * TensorFlow runs it as the gradient of the convolution from that output back to the input, whose
 * padding is TensorFlow's "same" (before = total / 2) or none; oneDNN's right padding is whatever
 * closes the size equation (in - 1)*s + k - before - after = out, and may be negative down to
 * 1 - s (output rows that no input reaches stay at the bias).
 * data_format channels_first: NCHW activation descriptors, which oneDNN reads and writes itself. */
#include "gpu/gpu.h"
#include "gpu/kernels/kargs.h"
#include "layers/convolutional/conv2d.h"
#include "layers/fused.h"
#include "layers/keras_config.h"

#include <stdio.h>

typedef struct convt_cfg {
    int filters, kh, kw;
    int sh, sw, dh, dw;   /* strides, dilation (1-based, Keras) */
    int oph, opw;         /* output_padding; -1: None */
    int kd, sd, opd;      /* Conv3DTranspose's depth axis (kernel, stride, output_padding); dilation 1 */
    tnt_padding padding;
    bool use_bias, one_d, three_d;
    tnt_initializer kernel_init, bias_init;
    int64_t ih, iw, ic, oh, ow; /* from build */
    int64_t pad_t, pad_b, pad_l, pad_r;
    int64_t id, od, pad_f, pad_k; /* Conv3DTranspose: depth in and out, padding front and back */
} convt_cfg;

static const char *convt_class(const convt_cfg *c) {
    return c->one_d ? "Conv1DTranspose" : c->three_d ? "Conv3DTranspose" : "Conv2DTranspose";
}

/* Output length and oneDNN's paddings along one axis; false when the output would be empty or
 * the paddings cannot close the size equation. */
static bool convt_axis(int64_t in, int k, int s, int d, int op, tnt_padding pad, int64_t *out, int64_t *before,
                       int64_t *after) {
    int64_t ek = (int64_t)(k - 1) * d + 1;
    if (op < 0) *out = pad == TNT_PADDING_SAME ? in * s : in * s + TNT_MAX(ek - s, 0);
    else *out = (in - 1) * s + ek - 2 * (pad == TNT_PADDING_SAME ? ek / 2 : 0) + op;
    *before = pad == TNT_PADDING_SAME ? TNT_MAX((in - 1) * s + ek - *out, 0) / 2 : 0;
    *after = (in - 1) * s + ek - *before - *out;
    return *out > 0 && *after + s > 0 && *after < ek;
}

static tnt_status convt_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    convt_cfg *c = l->priv;
    const char *cls = convt_class(c);
    char b[96];
    int64_t sp[3] = {0};
    int n = c->one_d ? 1 : c->three_d ? 3 : 2;
    tnt_status s = tnt__conv_input(l, cls, in, n, sp, &c->ic);
    if (s != TNT_OK) return s;
    c->id = c->three_d ? sp[0] : 1;
    c->ih = c->one_d ? 1 : sp[n - 2];
    c->iw = sp[n - 1];
    if (c->three_d && !convt_axis(c->id, c->kd, c->sd, 1, c->opd, c->padding, &c->od, &c->pad_f, &c->pad_k))
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s with kernel depth %d, stride %d, output_padding %d "
                          "and padding \"%s\" gives no valid output depth (%lld)", cls, l->name,
                          tnt_shape_str(in, b, sizeof b), c->kd, c->sd, c->opd, tnt__kj_padding_name(c->padding),
                          (long long)c->od);
    if (!c->three_d) c->od = 1;
    if (!convt_axis(c->ih, c->kh, c->sh, c->dh, c->one_d ? -1 : c->oph, c->one_d ? TNT_PADDING_VALID : c->padding,
                    &c->oh, &c->pad_t, &c->pad_b) ||
        !convt_axis(c->iw, c->kw, c->sw, c->dw, c->opw, c->padding, &c->ow, &c->pad_l, &c->pad_r))
        return tnt__error(TNT_ERR_SHAPE,
                          "%s \"%s\": input shape %s with kernel (%d, %d), strides (%d, %d), output_padding "
                          "(%d, %d) and padding \"%s\" gives no valid output (%lld, %lld)",
                          cls, l->name, tnt_shape_str(in, b, sizeof b), c->kh, c->kw, c->sh, c->sw, c->oph, c->opw,
                          tnt__kj_padding_name(c->padding), (long long)c->oh, (long long)c->ow);
    int64_t k2 = (int64_t)(c->three_d ? c->kd : 1) * c->kh * c->kw;
    tnt_shape kshape = c->one_d     ? TNT_SHAPE(c->kw, c->filters, c->ic)
                       : c->three_d ? TNT_SHAPE(c->kd, c->kh, c->kw, c->filters, c->ic)
                                    : TNT_SHAPE(c->kh, c->kw, c->filters, c->ic);
    l->n_weights = 0;
    /* Keras's fans for a transposed kernel: receptive field times the last two axes' sizes */
    if (tnt__layer_add_weight(l, "kernel", kshape, c->kernel_init, k2 * c->filters, k2 * c->ic) < 0)
        return TNT_ERR_ARG;
    if (c->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(c->filters), c->bias_init, 0, 0) < 0)
        return TNT_ERR_ARG;
    *out = c->one_d     ? tnt__conv_output(l, 1, &c->ow, c->filters)
           : c->three_d ? tnt__conv_output(l, 3, (int64_t[]){c->od, c->oh, c->ow}, c->filters)
                        : tnt__conv_output(l, 2, (int64_t[]){c->oh, c->ow}, c->filters);
    return TNT_OK;
}

/* ---- plan --------------------------------------------------------------------------------- */

typedef struct convt_plan {
    tnt__prim fwd, bwd_data, bwd_weights;
    tnt__act act;
    dnnl_memory_t x, y, w, dw, b, db;
} convt_plan;

static void convt_plan_destroy(void *plan) {
    convt_plan *p = plan;
    if (!p) return;
    tnt__prim_destroy(&p->fwd);
    tnt__prim_destroy(&p->bwd_data);
    tnt__prim_destroy(&p->bwd_weights);
    tnt__act_destroy(&p->act);
    dnnl_memory_t mems[] = {p->x, p->y, p->w, p->dw, p->b, p->db};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(p);
}

static void *convt_plan_create(tnt_layer *l, int64_t batch) {
    convt_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    convt_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    dnnl_memory_desc_t xm, ym, wm, bm;
    dnnl_dims_t bd = {c->filters};
    /* Keras (kh, kw, filters, ic) seen as the logical (filters, ic, kh, kw); 3-D: (kd, kh, kw,
     * filters, ic) as (filters, ic, kd, kh, kw). 2-D sizes below; 3-D puts depth first. */
    int64_t fi = (int64_t)c->filters * c->ic;
    dnnl_dims_t xd = {batch, c->ic, c->ih, c->iw}, yd = {batch, c->filters, c->oh, c->ow},
                wd = {c->filters, c->ic, c->kh, c->kw}, ws = {c->ic, 1, (int64_t)c->kw * fi, fi};
    dnnl_dims_t strides = {c->sh, c->sw}, dil = {c->dh - 1, c->dw - 1}, pl = {c->pad_t, c->pad_l},
                pr = {c->pad_b, c->pad_r};
    int nd = 4;
    if (c->three_d) {
        nd = 5;
        int64_t x3[5] = {batch, c->ic, c->id, c->ih, c->iw}, y3[5] = {batch, c->filters, c->od, c->oh, c->ow},
                w3[5] = {c->filters, c->ic, c->kd, c->kh, c->kw},
                s3[5] = {c->ic, 1, (int64_t)c->kh * c->kw * fi, (int64_t)c->kw * fi, fi};
        int64_t st3[3] = {c->sd, c->sh, c->sw}, pl3[3] = {c->pad_f, c->pad_t, c->pad_l},
                pr3[3] = {c->pad_k, c->pad_b, c->pad_r};
        memcpy(xd, x3, sizeof x3), memcpy(yd, y3, sizeof y3), memcpy(wd, w3, sizeof w3), memcpy(ws, s3, sizeof s3);
        memcpy(strides, st3, sizeof st3), memcpy(pl, pl3, sizeof pl3), memcpy(pr, pr3, sizeof pr3);
        memset(dil, 0, sizeof dil);
    }
    dnnl_format_tag_t act = c->three_d ? (l->channels_first ? dnnl_ncdhw : dnnl_ndhwc)
                                       : (l->channels_first ? dnnl_nchw : dnnl_nhwc);
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&xm, nd, xd, dnnl_f32, act));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&ym, nd, yd, dnnl_f32, act));
    TNT_DNNL(dnnl_memory_desc_init_by_strides(&wm, nd, wd, dnnl_f32, ws));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&bm, 1, bd, dnnl_f32, dnnl_a));
    const dnnl_memory_desc_t *bias = c->use_bias ? &bm : NULL;
    dnnl_deconvolution_desc_t fd, bdd, bwd;
    TNT_DNNL(dnnl_dilated_deconvolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_deconvolution_direct,
                                                          &xm, &wm, bias, &ym, strides, dil, pl, pr));
    if ((status = tnt__prim_create(&p->fwd, &fd, NULL, NULL)) != TNT_OK) goto fail;
    TNT_DNNL(dnnl_dilated_deconvolution_backward_data_desc_init(&bdd, dnnl_deconvolution_direct, &xm, &wm, &ym,
                                                                strides, dil, pl, pr));
    if ((status = tnt__prim_create(&p->bwd_data, &bdd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    TNT_DNNL(dnnl_dilated_deconvolution_backward_weights_desc_init(&bwd, dnnl_deconvolution_direct, &xm, &wm,
                                                                   bias, &ym, strides, dil, pl, pr));
    if ((status = tnt__prim_create(&p->bwd_weights, &bwd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    if ((status = tnt__memory(&p->x, &xm, NULL, false)) || (status = tnt__memory(&p->y, &ym, NULL, false)) ||
        (status = tnt__memory(&p->w, &wm, NULL, false)) || (status = tnt__memory(&p->dw, &wm, NULL, false)) ||
        (c->use_bias && (status = tnt__memory(&p->b, &bm, NULL, false))) ||
        (c->use_bias && (status = tnt__memory(&p->db, &bm, NULL, false))))
        goto fail;
    /* the activation over the output's last axis in memory: channels, or width when channels first */
    int64_t cols = l->out_shape.dim[l->out_shape.ndim - 1];
    if (l->activation != TNT_ACT_LINEAR &&
        (status = tnt__act_create(&p->act, l->activation, l->activation_alpha,
                                  batch * tnt_shape_numel(l->out_shape) / cols, cols)) != TNT_OK)
        goto fail;
    return p;
fail:
    tnt__error_prefix(status, "%s \"%s\": ", convt_class(c), l->name);
    convt_plan_destroy(p);
    return NULL;
}

static size_t convt_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return tnt__fused_workspace_size(l, batch);
}

/* x: (batch, ih, iw, ic) -> out: (batch, oh, ow, filters), before the activation */
static tnt_status convt_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op, float *out) {
    (void)post_op;
    convt_plan *p = plan;
    const convt_cfg *c = l->priv;
    tnt__set_data(p->x, a->x);
    tnt__set_data(p->w, l->weights[0].value);
    tnt__set_data(p->y, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DST, p->y}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->b, l->weights[1].value);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
    }
    return tnt__prim_exec(&p->fwd, n, args);
}

static tnt_status convt_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__fused_forward(l, plan, a, false, &((convt_plan *)plan)->act, convt_run);
}

/* dy: (batch, oh, ow, filters) -> kernel and bias gradients, dx: (batch, ih, iw, ic) or NULL */
static tnt_status convt_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    convt_plan *p = plan;
    const convt_cfg *c = l->priv;
    const float *dpre;
    tnt_status status = tnt__fused_backward(l, a, &p->act, &dpre);
    if (status != TNT_OK) return status;
    tnt__set_data(p->x, a->x);
    tnt__set_data(p->y, dpre);
    tnt__set_data(p->dw, l->weights[0].grad);
    dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_DIFF_WEIGHTS, p->dw}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->db, l->weights[1].grad);
        wargs[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, p->db};
    }
    if ((status = tnt__prim_exec(&p->bwd_weights, n, wargs)) != TNT_OK) return status;
    if (!a->dx) return TNT_OK;
    tnt__set_data(p->w, l->weights[0].value);
    tnt__set_data(p->x, a->dx);
    dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_WEIGHTS, p->w}, {DNNL_ARG_DIFF_SRC, p->x}};
    return tnt__prim_exec(&p->bwd_data, 3, dargs);
}

/* ---- config ------------------------------------------------------------------------------- */

static void convt_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status convt_get_config(const tnt_layer *l, cJSON *c) {
    const convt_cfg *k = l->priv;
    int n = k->one_d ? 1 : k->three_d ? 3 : 2, f = 3 - n; /* the last n of (depth, height, width) */
    int ks[3] = {k->kd, k->kh, k->kw}, st[3] = {k->sd, k->sh, k->sw}, op[3] = {k->opd, k->oph, k->opw},
        dil[3] = {1, k->dh, k->dw};
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", k->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", n, ks + f));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", n, st + f));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    if (k->opw < 0) TNT_KJ(cJSON_AddNullToObject(c, "output_padding"));
    else TNT_KJ_S(tnt__kj_add_ints(c, "output_padding", n, op + f));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", n, dil + f));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", k->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->bias_init));
    return tnt__kj_add_nulls(c, tnt__kj_kernel_nulls);
}

/* Conv2D's keys (conv2d.h) plus output_padding (null: None) */
static tnt_layer *convt_from_config(const cJSON *c, const tnt__kj_ctx *k, int n) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[3] = {0}, op[3] = {-1, -1, -1};
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__conv_read_config(c, n, ks, &o, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    TNT_KJ_READ(tnt__kj_check_nulls(c, tnt__kj_kernel_nulls, k));
    if (!tnt__kj_absent(tnt__kj_item(c, "output_padding")))
        TNT_KJ_READ(tnt__kj_ints(c, "output_padding", true, n, NULL, op, k));
    if (n == 1) return tnt__kj_built(tnt_conv1d_transpose(filters, ks[0], op[0], &o), k);
    if (n == 3) return tnt__kj_built(tnt_conv3d_transpose(filters, ks, op[0] < 0 ? NULL : op, &o), k);
    return tnt__kj_built(tnt_conv2d_transpose(filters, ks[0], ks[1], op[0] < 0 ? NULL : op, &o), k);
}

static tnt_layer *convt2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return convt_from_config(c, k, 2); }
static tnt_layer *convt1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return convt_from_config(c, k, 1); }
static tnt_layer *convt3d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return convt_from_config(c, k, 3); }

/* ---- on the device: the transposed convolution as the adjoint of the convolution C from its
 * output back to its input (TensorFlow's view above), on conv.cu's direct kernels, C's geometry: C
 * reads (oh, ow, filters) and writes (ih, iw, ic) with Keras's kernel (kh, kw, filters, ic) as its
 * own (kh, kw, c, k), the same strides, dilation and padding before. So
 *   y = C's input gradient of x (+ bias),  dx = C of dy,  dW = C's weight gradient (x of dy's
 *   pixels, chunked as conv2d_gemm_gpu.c's direct path),  db = column sums of dy.
 * 2-D and 1-D, channels last, float32; deterministic (no atomics). ---------------------------- */

#define CONVT_GPU_BLOCK 256
#define CONVT_CHUNK 256
#define CONVT_PARTIAL_FLOATS (1 << 22)

static bool convt_gpu_supported(const tnt_layer *l, const char **why) {
    const convt_cfg *c = l->priv;
    if (c->three_d) *why = "Conv3DTranspose has no device path yet";
    else if (l->channels_first) *why = "channels_first has no device path yet";
    else if (l->dtype_policy == TNT__POLICY_MIXED_BF16) *why = "mixed_bfloat16 has no device path yet";
    else return true;
    return false;
}

static tnt_k_conv convt_geometry(const convt_cfg *c, int64_t batch) {
    return (tnt_k_conv){.n = batch, .ih = c->oh, .iw = c->ow, .c = c->filters, .oh = c->ih, .ow = c->iw, .k = c->ic,
                        .kh = c->kh, .kw = c->kw, .sh = c->sh, .sw = c->sw, .dh = c->dh, .dw = c->dw,
                        .pt = (int)c->pad_t, .pl = (int)c->pad_l, .groups = 1};
}

/* C's weight gradient in chunks of its output pixels (the layer's input pixels) */
static int64_t convt_chunk(const convt_cfg *c, int64_t batch) {
    const int64_t rows = batch * c->ih * c->iw, outs = (int64_t)c->kh * c->kw * c->filters * c->ic;
    return TNT_MAX(CONVT_CHUNK, (rows * outs + CONVT_PARTIAL_FLOATS - 1) / CONVT_PARTIAL_FLOATS);
}

static size_t convt_gpu_scratch(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    const convt_cfg *c = l->priv;
    const int64_t rows = batch * c->ih * c->iw, chunks = (rows + convt_chunk(c, batch) - 1) / convt_chunk(c, batch);
    return (size_t)(chunks * c->kh * c->kw * c->filters * c->ic) * sizeof(float);
}

static size_t convt_gpu_workspace(tnt_layer *l, void *plan, int64_t batch) {
    (void)plan;
    return tnt__fused_workspace_size(l, batch);
}

static tnt_status convt_gpu_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, float *out) {
    (void)plan;
    const convt_cfg *c = l->priv;
    tnt_k_conv g = convt_geometry(c, a->batch);
    const float *x = a->x, *w = l->weights[0].d_value;
    void *args[] = {&g, &x, &w, &out};
    tnt_status s = tnt__gpu_launch("tnt_k_conv_direct_dx", tnt__gpu_grid_for(g.n * g.ih * g.iw * g.c, CONVT_GPU_BLOCK),
                                   CONVT_GPU_BLOCK, 0, args);
    if (s != TNT_OK || !c->use_bias) return s;
    const float *b = l->weights[1].d_value;
    long long rows = g.n * g.ih * g.iw, cols = c->filters;
    void *bargs[] = {&out, &b, &rows, &cols};
    return tnt__gpu_launch("tnt_k_bias_add", tnt__gpu_grid_for(rows * cols, CONVT_GPU_BLOCK), CONVT_GPU_BLOCK, 0, bargs);
}

static tnt_status convt_gpu_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    return tnt__gpu_fused_forward(l, plan, a, convt_gpu_run);
}

static tnt_status convt_gpu_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    (void)plan;
    const convt_cfg *c = l->priv;
    tnt_k_conv g = convt_geometry(c, a->batch);
    const float *dpre, *x = a->x, *w = l->weights[0].d_value;
    tnt_status s = tnt__gpu_fused_backward(l, a, &dpre);
    if (s == TNT_OK && c->use_bias && l->weights[1].d_grad)
        s = tnt__gpu_col_sums(dpre, l->weights[1].d_grad, g.n * g.ih * g.iw, c->filters);
    if (s == TNT_OK && l->weights[0].d_grad) {
        long long chunk = convt_chunk(c, a->batch), rows = g.n * g.oh * g.ow, chunks = (rows + chunk - 1) / chunk;
        const long long outs = (long long)g.kh * g.kw * g.c * g.k;
        float *part = a->scratch;
        void *args[] = {&g, &dpre, &x, &part, &chunk};
        s = tnt__gpu_launch("tnt_k_conv_direct_dw_partial", tnt__gpu_grid_for(chunks * outs, CONVT_GPU_BLOCK),
                            CONVT_GPU_BLOCK, 0, args);
        if (s == TNT_OK) s = tnt__gpu_col_sums(part, l->weights[0].d_grad, chunks, outs);
    }
    if (s == TNT_OK && a->dx) {
        int use_bias = 0;
        float *dx = a->dx;
        void *args[] = {&g, &dpre, &w, &w, &dx, &use_bias};
        s = tnt__gpu_launch("tnt_k_conv_direct_fwd", tnt__gpu_grid_for(g.n * g.oh * g.ow * g.k, CONVT_GPU_BLOCK),
                            CONVT_GPU_BLOCK, 0, args);
    }
    return s;
}

static const tnt__gpu_ops convt_gpu_ops = {
    .supported = convt_gpu_supported,
    .workspace_size = convt_gpu_workspace,
    .scratch_size = convt_gpu_scratch,
    .forward = convt_gpu_forward,
    .backward = convt_gpu_backward,
};

#define CONVT_OPS(var, cls, fromcfg)                                                              \
    const tnt__layer_ops var = {                                                                 \
        .class_name = cls,                                                                        \
        .get_config = convt_get_config,                                                           \
        .from_config = fromcfg,                                                                   \
        .build = convt_build,                                                                     \
        .plan_create = convt_plan_create,                                                         \
        .plan_destroy = convt_plan_destroy,                                                       \
        .workspace_size = convt_workspace_size,                                                   \
        .forward = convt_forward,                                                                 \
        .backward = convt_backward,                                                               \
        .destroy = convt_destroy,                                                                 \
        .set_data_format = tnt__layer_take_data_format,                                           \
        .gpu = &convt_gpu_ops,                                                                    \
    }
CONVT_OPS(tnt__conv2d_transpose_ops, "Conv2DTranspose", convt2d_from_config);
CONVT_OPS(tnt__conv1d_transpose_ops, "Conv1DTranspose", convt1d_from_config);
CONVT_OPS(tnt__conv3d_transpose_ops, "Conv3DTranspose", convt3d_from_config);

/* ---- constructors ------------------------------------------------------------------------- */

static tnt_layer *convt_new(convt_cfg cfg, const tnt_layer_opts *o) {
    const char *cls = convt_class(&cfg);
    if (cfg.filters <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: filters %d (expected > 0)", cls, cfg.filters);
        return NULL;
    }
    if (cfg.kh <= 0 || cfg.kw <= 0) {
        tnt__error(TNT_ERR_ARG, "%s: kernel_size (%d, %d) (expected > 0)", cls, cfg.kh, cfg.kw);
        return NULL;
    }
    if (o->strides[0] < 0 || o->strides[1] < 0 || o->dilation[0] < 0 || o->dilation[1] < 0) {
        tnt__error(TNT_ERR_ARG, "%s: strides (%d, %d), dilation_rate (%d, %d) (expected > 0, or 0 for the default 1)",
                   cls, o->strides[0], o->strides[1], o->dilation[0], o->dilation[1]);
        return NULL;
    }
    cfg.sh = cfg.one_d ? 1 : o->strides[0] ? o->strides[0] : 1;
    cfg.sw = o->strides[cfg.one_d ? 0 : 1] ? o->strides[cfg.one_d ? 0 : 1] : 1;
    cfg.dh = cfg.one_d ? 1 : o->dilation[0] ? o->dilation[0] : 1;
    cfg.dw = o->dilation[cfg.one_d ? 0 : 1] ? o->dilation[cfg.one_d ? 0 : 1] : 1;
    if ((cfg.sh > 1 || cfg.sw > 1) && (cfg.dh > 1 || cfg.dw > 1)) {
        tnt__error(TNT_ERR_ARG, "%s: strides (%d, %d) with dilation_rate (%d, %d) (Keras allows strides > 1 or "
                   "dilation_rate > 1, not both)", cls, cfg.sh, cfg.sw, cfg.dh, cfg.dw);
        return NULL;
    }
    if ((cfg.oph >= 0) != (cfg.opw >= 0) || (cfg.oph >= 0 && (cfg.oph >= cfg.sh || cfg.opw >= cfg.sw))) {
        tnt__error(TNT_ERR_ARG, "%s: output_padding (%d, %d) (expected each 0 <= p < its stride (%d, %d), or none)",
                   cls, cfg.oph, cfg.opw, cfg.sh, cfg.sw);
        return NULL;
    }
    if (o->padding != TNT_PADDING_VALID && o->padding != TNT_PADDING_SAME) {
        tnt__error(TNT_ERR_ARG, "%s: padding %d (expected TNT_PADDING_VALID or TNT_PADDING_SAME)", cls, (int)o->padding);
        return NULL;
    }
    if ((unsigned)o->activation >= TNT_ACT_COUNT) {
        tnt__error(TNT_ERR_ARG, "%s: activation %d (expected 0..%d)", cls, (int)o->activation, TNT_ACT_COUNT - 1);
        return NULL;
    }
    if (!tnt__init_valid(o->kernel_initializer, TNT_INIT_ORTHOGONAL) || !tnt__init_valid(o->bias_initializer, TNT_INIT_ORTHOGONAL)) {
        tnt__error(TNT_ERR_ARG, "%s: initializer %d/%d (expected 0..%d)", cls, (int)o->kernel_initializer,
                   (int)o->bias_initializer, (int)TNT_INIT_ORTHOGONAL);
        return NULL;
    }
    cfg.padding = o->padding;
    cfg.use_bias = !o->no_bias;
    cfg.kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM;
    cfg.bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS;
    convt_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(cfg.one_d     ? &tnt__conv1d_transpose_ops
                                  : cfg.three_d ? &tnt__conv3d_transpose_ops
                                                : &tnt__conv2d_transpose_ops,
                                  o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}

tnt_layer *tnt_conv2d_transpose(int filters, int kernel_h, int kernel_w, const int *output_padding,
                                const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    return convt_new((convt_cfg){.filters = filters, .kh = kernel_h, .kw = kernel_w,
                                 .oph = output_padding ? output_padding[0] : -1,
                                 .opw = output_padding ? output_padding[1] : -1},
                     opts ? opts : &defaults);
}

tnt_layer *tnt_conv1d_transpose(int filters, int kernel_size, int output_padding, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    return convt_new((convt_cfg){.filters = filters, .kh = 1, .kw = kernel_size, .one_d = true,
                                 .oph = output_padding < 0 ? -1 : 0, .opw = output_padding < 0 ? -1 : output_padding},
                     opts ? opts : &defaults);
}

tnt_layer *tnt_conv3d_transpose(int filters, const int kernel_size[3], const int *output_padding,
                                const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (!kernel_size) {
        tnt__error(TNT_ERR_ARG, "Conv3DTranspose: kernel_size is NULL");
        return NULL;
    }
    if (kernel_size[0] <= 0 || o->strides[0] < 0 || (o->dilation[0] > 1 || o->dilation[1] > 1 || o->dilation[2] > 1)) {
        tnt__error(TNT_ERR_ARG, "Conv3DTranspose: kernel_size (%d, %d, %d), strides (%d, %d, %d), dilation_rate "
                   "(%d, %d, %d) (expected kernel sizes > 0, strides >= 0 (0: 1) and dilation 1: Keras's "
                   "conv3d_transpose runs undilated)", kernel_size[0], kernel_size[1], kernel_size[2], o->strides[0],
                   o->strides[1], o->strides[2], o->dilation[0], o->dilation[1], o->dilation[2]);
        return NULL;
    }
    int sd = o->strides[0] ? o->strides[0] : 1;
    if (output_padding && (output_padding[0] < 0 || output_padding[0] >= sd)) {
        tnt__error(TNT_ERR_ARG, "Conv3DTranspose: output_padding (%d, %d, %d) (expected each 0 <= p < its stride)",
                   output_padding[0], output_padding[1], output_padding[2]);
        return NULL;
    }
    /* height and width through the 2-D checks, on opts shifted by one axis */
    tnt_layer_opts o2 = *o;
    o2.strides[0] = o->strides[1], o2.strides[1] = o->strides[2], o2.strides[2] = 0;
    o2.dilation[0] = o2.dilation[1] = o2.dilation[2] = 0;
    return convt_new((convt_cfg){.filters = filters, .kh = kernel_size[1], .kw = kernel_size[2], .three_d = true,
                                 .kd = kernel_size[0], .sd = sd, .opd = output_padding ? output_padding[0] : -1,
                                 .oph = output_padding ? output_padding[1] : -1,
                                 .opw = output_padding ? output_padding[2] : -1},
                     &o2);
}
