/* conv2d.c: Conv2D, and Conv1D as a convolution of height 1 (Keras): 2-D convolution of NHWC input with a kernel in Keras layout HWIO
 * (kh, kw, in_ch, filters), optional bias and a fused activation, on oneDNN convolution
 * primitives (forward, backward-data, backward-weights with the bias gradient). The same engine
 * runs Conv3D (conv3d.c: 5-D descriptors, kernel DHWIO) and DepthwiseConv2D / SeparableConv2D.
 * data_format channels_first: the activation descriptors say NCHW (NCDHW) instead of NHWC, and
 * oneDNN reads and writes that layout itself; the kernel keeps Keras's layout in both formats. The
 * fused activation runs over the last axis in memory (width when channels first), as Keras's
 * activation of the output tensor does (softmax over axis -1).
 *
 * Layouts, chosen by timing LeNet-5's convolutions at 1 thread, batch 64 (fwd / bwd-data /
 * bwd-weights, ms):
 *   14x14x20 -> 50, 5x5:  nhwc activations 6.3 / 8.5 / 7.0; blocked nChw16c 9.2 / 9.1 / 10.7 plus
 *                         1.7 of activation reorders; plain hwio weights (gemm) 16-20 / 8 / 15.
 *   28x28x1 -> 20, 5x5:   nhwc 0.7-1.0 / - / 1.3; blocked 0.7 / - / 0.8 plus 1.1 of reorders.
 * So activations stay in the model's plain NHWC (no reorders at all), and the weights use
 * oneDNN's preferred blocked layout (format any): they are reordered from the Keras HWIO buffer
 * once per forward (and once more per backward when backward-data prefers another layout), and
 * the weight gradient is reordered back into the HWIO gradient buffer. These reorders move
 * 100 KB for LeNet-5's conv2 (~0.05 ms).
 * Padding "same" is TensorFlow's: total = max((ceil(in/s)-1)*s + (k-1)*d+1 - in, 0), the extra
 * row/column at the bottom/right. oneDNN dilation is 0-based (d-1). */
#include "layers/convolutional/conv2d.h"
#include "layers/keras_config.h"
#include "layers/fused.h"

#include <stdio.h>

/* ---- configuration ------------------------------------------------------------------------ */

typedef tnt__conv_cfg conv_cfg; /* conv2d.h */

bool tnt__conv_axis(int64_t in, int k, int s, int d, tnt_padding pad, int64_t *out, int64_t *pl,
                    int64_t *pr) {
    int64_t ek = (int64_t)(k - 1) * d + 1; /* effective (dilated) kernel extent */
    if (pad == TNT_PADDING_SAME) {
        *out = (in + s - 1) / s;
        int64_t total = TNT_MAX((*out - 1) * s + ek - in, 0);
        *pl = total / 2;
        *pr = total - *pl;
    } else {
        *out = in >= ek ? (in - ek) / s + 1 : 0;
        *pl = *pr = 0;
    }
    return *out > 0;
}

tnt_status tnt__conv_add_weights(tnt_layer *l, tnt_shape kernel) {
    conv_cfg *c = l->priv;
    int64_t k2 = (int64_t)c->kh * c->kw * (c->kd ? c->kd : 1); /* the receptive field */
    l->n_weights = 0;
    if (tnt__layer_add_weight(l, "kernel", kernel, c->kernel_init, k2 * c->ic, k2 * c->filters) < 0)
        return TNT_ERR_ARG;
    if (c->use_bias && tnt__layer_add_weight(l, "bias", TNT_SHAPE(c->filters), c->bias_init, 0, 0) < 0)
        return TNT_ERR_ARG;
    return TNT_OK;
}

tnt_status tnt__conv_input(const tnt_layer *l, const char *cls, tnt_shape in, int n, int64_t *sp, int64_t *channels) {
    static const char *const axes[2][4] = {
        {"", "steps, channels", "height, width, channels", "depth, height, width, channels"},
        {"", "channels, steps", "channels, height, width", "channels, depth, height, width"}};
    const bool cf = l->channels_first;
    char b[96];
    if (in.ndim != n + 1)
        return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has rank %d (expected %d: %s)", cls, l->name,
                          tnt_shape_str(in, b, sizeof b), in.ndim, n + 1, axes[cf][n]);
    for (int i = 0; i <= n; i++)
        if (in.dim[i] <= 0)
            return tnt__error(TNT_ERR_SHAPE, "%s \"%s\": input shape %s has an empty dimension", cls, l->name,
                              tnt_shape_str(in, b, sizeof b));
    *channels = cf ? in.dim[0] : in.dim[n];
    for (int i = 0; i < n; i++) sp[i] = in.dim[cf ? i + 1 : i];
    return TNT_OK;
}

tnt_shape tnt__conv_output(const tnt_layer *l, int n, const int64_t *sp, int64_t c) {
    tnt_shape o = {.ndim = n + 1};
    const bool cf = l->channels_first;
    o.dim[cf ? 0 : n] = c;
    for (int i = 0; i < n; i++) o.dim[cf ? i + 1 : i] = sp[i];
    return o;
}

/* Conv1D: input (steps, channels) is the NHWC image (1, steps, channels), and Keras's kernel
 * (k, in, filters) has the memory of the HWIO kernel (1, k, in, filters), so the Conv2D plans
 * run it unchanged (channels first: (channels, steps) is the NCHW image (channels, 1, steps)).
 * "causal" pads (k-1)*d steps on the left only. */
static tnt_status conv1d_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    conv_cfg *c = l->priv;
    char b[96];
    tnt_status s = tnt__conv_input(l, "Conv1D", in, 1, &c->iw, &c->ic);
    if (s != TNT_OK) return s;
    c->channels_first = l->channels_first;
    c->ih = c->oh = 1;
    c->pad_t = c->pad_b = 0;
    bool ok;
    if (c->padding == TNT_PADDING_CAUSAL) {
        c->pad_l = (int64_t)(c->kw - 1) * c->dw;
        c->pad_r = 0;
        c->ow = (c->iw - 1) / c->sw + 1;
        ok = true;
    } else {
        ok = tnt__conv_axis(c->iw, c->kw, c->sw, c->dw, c->padding, &c->ow, &c->pad_l, &c->pad_r);
    }
    if (!ok)
        return tnt__error(TNT_ERR_SHAPE,
                          "Conv1D \"%s\": input shape %s is smaller than the kernel (%d) with "
                          "dilation %d and padding \"%s\": output would be (%lld, %d)",
                          l->name, tnt_shape_str(in, b, sizeof b), c->kw, c->dw,
                          c->padding == TNT_PADDING_SAME ? "same" : "valid", (long long)c->ow, c->filters);
    s = tnt__conv_add_weights(l, TNT_SHAPE(c->kw, c->ic, c->filters));
    if (s == TNT_OK) *out = tnt__conv_output(l, 1, &c->ow, c->filters);
    return s;
}

static tnt_status conv_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    conv_cfg *c = l->priv;
    char b[96];
    int64_t sp[2] = {0};
    tnt_status s = tnt__conv_input(l, "Conv2D", in, 2, sp, &c->ic);
    if (s != TNT_OK) return s;
    c->channels_first = l->channels_first;
    c->ih = sp[0];
    c->iw = sp[1];
    if (!tnt__conv_axis(c->ih, c->kh, c->sh, c->dh, c->padding, &c->oh, &c->pad_t, &c->pad_b) ||
        !tnt__conv_axis(c->iw, c->kw, c->sw, c->dw, c->padding, &c->ow, &c->pad_l, &c->pad_r))
        return tnt__error(TNT_ERR_SHAPE,
                          "Conv2D \"%s\": input shape %s is smaller than the kernel (%d, %d) with "
                          "dilation (%d, %d) and padding \"valid\": output would be (%lld, %lld, %d)",
                          l->name, tnt_shape_str(in, b, sizeof b), c->kh, c->kw, c->dh, c->dw,
                          (long long)c->oh, (long long)c->ow, c->filters);
    s = tnt__conv_add_weights(l, TNT_SHAPE(c->kh, c->kw, c->ic, c->filters));
    if (s == TNT_OK) *out = tnt__conv_output(l, 2, (int64_t[]){c->oh, c->ow}, c->filters);
    return s;
}

/* ---- plan: primitives for one batch size -------------------------------------------------- */

typedef struct conv_plan {
    int64_t batch;
    bool fused;          /* fwd applies the activation as a post-op */
    tnt__prim fwd;       /* convolution (+ bias, + post-op when fused) */
    tnt__prim fwd_plain; /* without the post-op, made on the first forward that asks for the
                            pre-activation while `fused`; same weights layout as fwd */
    tnt__prim bwd_data, bwd_weights;
    tnt__act act;        /* activation forward (when not fused) and backward */
    /* Keras HWIO <-> the primitives' weight layouts; a NULL prim means the layouts agree and the
     * Keras buffer is used directly. */
    tnt__reorder w_fwd, w_bwd, dw_out;
    float *w_fwd_buf, *w_bwd_buf, *dw_buf;
    bool bwd_uses_fwd_weights; /* bwd_data's weight layout equals fwd's: reuse w_fwd_buf */
    dnnl_memory_t x, y, b, db; /* NHWC activations and the bias (shared by all primitives) */
    dnnl_memory_t wf, wb, dw;  /* weights in each primitive's layout */
    void *bf16; /* mixed_bfloat16: the bf16 engine's plan (conv_bf16.c) instead */
    /* channels_first: the primitives still run on NHWC (NDHWC) copies in the workspace, made by
     * these reorders from and to the layer's NCHW (NCDHW) tensors */
    bool cf;
    tnt__reorder x_in, y_out, dy_in, dx_out;
} conv_plan;

/* Memory descriptors of one plan (conv2d.h); x and y nhwc, the weights hwio. */
typedef tnt__conv_mds conv_mds;

static tnt_status conv_mds_init(const conv_cfg *c, int64_t batch, conv_mds *m) {
    tnt_status status = TNT_OK;
    const bool d3 = c->kd > 0; /* Conv3D: 5-D descriptors */
    const int nd = d3 ? 5 : 4;
    dnnl_dims_t xd = {batch, c->ic, c->ih, c->iw}, yd = {batch, c->filters, c->oh, c->ow},
                wd = {c->filters, c->ic, c->kh, c->kw}, bd = {c->filters};
    if (d3) {
        dnnl_dims_t x3 = {batch, c->ic, c->id, c->ih, c->iw}, y3 = {batch, c->filters, c->od, c->oh, c->ow},
                    w3 = {c->filters, c->ic, c->kd, c->kh, c->kw};
        memcpy(xd, x3, sizeof x3), memcpy(yd, y3, sizeof y3), memcpy(wd, w3, sizeof w3);
    }
    /* The primitives always take channels-last activations: with NCHW ones oneDNN 2.6 falls back to
     * its gemm convolution (Conv3D of batch 16: 4x slower than NDHWC plus the two reorders). */
    dnnl_format_tag_t last = d3 ? dnnl_ndhwc : dnnl_nhwc, user = c->channels_first ? (d3 ? dnnl_ncdhw : dnnl_nchw) : last;
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->x, nd, xd, dnnl_f32, last));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->y, nd, yd, dnnl_f32, last));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->x_user, nd, xd, dnnl_f32, user));
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->y_user, nd, yd, dnnl_f32, user));
    if (c->groups > 1) { /* (g, filters/g, ic/g, kh, kw); Keras's (kh, kw, ic/g, filters) is hwigo */
        dnnl_dims_t gd = {c->groups, c->filters / c->groups, c->ic / c->groups, c->kh, c->kw};
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w, 5, gd, dnnl_f32, dnnl_format_tag_any));
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w_hwio, 5, gd, dnnl_f32, dnnl_hwigo));
    } else {
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w, nd, wd, dnnl_f32, dnnl_format_tag_any));
        TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->w_hwio, nd, wd, dnnl_f32, d3 ? dnnl_dhwio : dnnl_hwio));
    }
    TNT_DNNL(dnnl_memory_desc_init_by_tag(&m->b, 1, bd, dnnl_f32, dnnl_a));
    memset(m->strides, 0, sizeof m->strides);
    memset(m->dil, 0, sizeof m->dil);
    memset(m->pl, 0, sizeof m->pl);
    memset(m->pr, 0, sizeof m->pr);
    int k = 0; /* the spatial axes in oneDNN's order: (depth,) height, width */
    if (d3) m->strides[k] = c->sd, m->dil[k] = c->dd - 1, m->pl[k] = c->pad_f, m->pr[k] = c->pad_k, k++;
    m->strides[k] = c->sh, m->dil[k] = c->dh - 1, m->pl[k] = c->pad_t, m->pr[k] = c->pad_b, k++;
    m->strides[k] = c->sw, m->dil[k] = c->dw - 1, m->pl[k] = c->pad_l, m->pr[k] = c->pad_r;
fail:
    return status;
}

/* Creates a forward convolution primitive like tnt__prim_create (attr must have the user
 * scratchpad mode), but where oneDNN ranks its brgemm kernel (brgconv) first, takes the direct
 * jit kernel that follows (its name starts with jit, "jit:avx512" float32, "jit_bf16" bf16). At 1
 * thread, float32, batch 64, the jit kernel ran LeNet-5's 28x28x1->20 in 0.88 ms against 1.19 ms
 * and 14x14x20->50 in 5.4 ms against 6.0 ms (medians of interleaved runs), and tied with brgconv
 * on ResNet-50 shapes; bf16, batch 16, ResNet-50's 1x1 expansions ran in 4.35 ms (jit_bf16_1x1)
 * against 8.4 ms (brgconv_1x1) for 56x56x64->256 and 4.5 against 5.9 for 28x28x128->512, the other
 * 1x1 and 3x3 shapes within 10% either way. */
static tnt_status create_fwd_prim(tnt__prim *p, const dnnl_convolution_desc_t *d, dnnl_primitive_attr_t attr,
                                  const char *jit) {
    tnt_status status = TNT_OK;
    dnnl_primitive_desc_iterator_t it = NULL;
    memset(p, 0, sizeof *p);
    if (!tnt__engine()) return TNT_ERR_BACKEND;
    TNT_DNNL(dnnl_primitive_desc_iterator_create(&it, d, attr, tnt__engine(), NULL));
    p->pd = dnnl_primitive_desc_iterator_fetch(it);
    const char *first = "";
    if (p->pd) dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &first);
    if (!strncmp(first, "brg", 3)) {
        while (dnnl_primitive_desc_iterator_next(it) == dnnl_success) {
            dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
            const char *name = "";
            if (pd) dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
            if (pd && !strncmp(name, jit, strlen(jit))) {
                dnnl_primitive_desc_destroy(p->pd);
                p->pd = pd;
                break;
            }
            if (pd) dnnl_primitive_desc_destroy(pd);
            if (strncmp(name, "brg", 3)) break; /* past the fast kernels: keep brgconv */
        }
    }
    if (!p->pd) TNT_DNNL(dnnl_unimplemented);
    TNT_DNNL(dnnl_primitive_create(&p->prim, p->pd));
    dnnl_primitive_desc_iterator_destroy(it);
    return TNT_OK;
fail:
    if (it) dnnl_primitive_desc_iterator_destroy(it);
    tnt__prim_destroy(p);
    return status;
}

/* oneDNN 2.x's jit 1x1 backward weights (jit_1x1:avx2, jit_1x1:avx512...) writes past its
 * reduce-to-unit-stride workspace when the stride is above 1, the input is channels-last and a group
 * has fewer input channels than the kernel's block (8 floats on AVX2, 16 on AVX-512): the kernel
 * gradient comes out wrong and varies from run to run, or the program crashes (oneDNN issue #6035,
 * open). Such a layer is cheap; it takes the next implementation oneDNN offers. */
static bool jit_1x1_bwd_weights_broken(const conv_cfg *c, const char *impl) {
    if (strncmp(impl, "jit_1x1", 7)) return false;
    const int block = strstr(impl, "avx512") ? 16 : 8;
    const int64_t group_ic = c->ic / (c->groups > 1 ? c->groups : 1);
    const bool strided = c->sh > 1 || c->sw > 1 || (c->kd && c->sd > 1);
    return strided && group_ic < block;
}

/* The backward-weights primitive (user scratchpad, the forward's pd as the hint): oneDNN's first
 * choice unless that is the broken jit 1x1 kernel above. */
static tnt_status create_bwd_weights_prim(tnt__prim *p, const dnnl_convolution_desc_t *d,
                                          const_dnnl_primitive_desc_t hint, const conv_cfg *c) {
    tnt_status status = tnt__prim_create(p, d, NULL, hint);
    const char *impl = "";
    if (status != TNT_OK) return status;
    dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &impl);
    if (!jit_1x1_bwd_weights_broken(c, impl)) return TNT_OK;
    tnt__prim_destroy(p);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_iterator_t it = NULL;
    TNT_DNNL(dnnl_primitive_attr_create(&attr));
    TNT_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TNT_DNNL(dnnl_primitive_desc_iterator_create(&it, d, attr, tnt__engine(), hint));
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd) continue;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (!jit_1x1_bwd_weights_broken(c, impl)) {
            p->pd = pd;
            break;
        }
        dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    if (!p->pd) TNT_DNNL(dnnl_unimplemented);
    TNT_DNNL(dnnl_primitive_create(&p->prim, p->pd));
fail:
    if (it) dnnl_primitive_desc_iterator_destroy(it);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (status != TNT_OK) tnt__prim_destroy(p);
    return status;
}

tnt_status tnt__conv_create_fwd(tnt_layer *l, const tnt__conv_mds *m, const dnnl_memory_desc_t *xmd,
                                const dnnl_memory_desc_t *wmd, bool fuse_act, tnt__prim *prim) {
    conv_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_convolution_desc_t d;
    TNT_DNNL(dnnl_dilated_convolution_forward_desc_init(
        &d, dnnl_forward_training, dnnl_convolution_direct, xmd, wmd, c->use_bias ? &m->b : NULL,
        &m->y, m->strides, m->dil, m->pl, m->pr));
    TNT_DNNL(dnnl_primitive_attr_create(&attr));
    TNT_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (fuse_act) {
        dnnl_alg_kind_t alg = dnnl_alg_kind_undef;
        float alpha;
        tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
        TNT_DNNL(dnnl_post_ops_create(&ops));
        TNT_DNNL(dnnl_post_ops_append_eltwise(ops, 1.0f, alg, alpha, 0.0f));
        TNT_DNNL(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    status = create_fwd_prim(prim, &d, attr, xmd->data_type == dnnl_bf16 ? "jit_bf16" : "jit:avx512");
fail:
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return status;
}

void tnt__conv_plan_destroy(void *plan) {
    conv_plan *p = plan;
    if (!p) return;
    tnt__conv_bf16_plan_destroy(p->bf16);
    tnt__prim_destroy(&p->fwd);
    tnt__prim_destroy(&p->fwd_plain);
    tnt__prim_destroy(&p->bwd_data);
    tnt__prim_destroy(&p->bwd_weights);
    tnt__act_destroy(&p->act);
    tnt__reorder_destroy(&p->w_fwd);
    tnt__reorder_destroy(&p->w_bwd);
    tnt__reorder_destroy(&p->dw_out);
    tnt__reorder_destroy(&p->x_in);
    tnt__reorder_destroy(&p->y_out);
    tnt__reorder_destroy(&p->dy_in);
    tnt__reorder_destroy(&p->dx_out);
    tnt__free(p->w_fwd_buf);
    tnt__free(p->w_bwd_buf);
    tnt__free(p->dw_buf);
    dnnl_memory_t *mems[] = {&p->x, &p->y, &p->b, &p->db, &p->wf, &p->wb, &p->dw};
    for (size_t i = 0; i < TNT_ARRAY_LEN(mems); i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    free(p);
}

/* A reorder between Keras's HWIO and a primitive's layout (from or to), with its buffer. */
static tnt_status weight_reorder(tnt__reorder *r, float **buf, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to, const dnnl_memory_desc_t *prim_md) {
    tnt_status status = tnt__reorder_create(r, from, to);
    if (status != TNT_OK || !r->prim) return status;
    *buf = tnt__alloc(dnnl_memory_desc_get_size(prim_md));
    return *buf ? TNT_OK : TNT_ERR_NOMEM;
}

void *tnt__conv_plan_create(tnt_layer *l, int64_t batch) {
    conv_cfg *c = l->priv;
    tnt_status status = TNT_OK;
    conv_plan *p = tnt__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->batch = batch;
    bool use_f32 = !tnt__layer_bf16(l);
    if (!use_f32 && !(p->bf16 = tnt__conv_bf16_plan_create(l, batch, &use_f32)) && !use_f32) goto fail;
    if (p->bf16) return p;
    conv_mds m;
    if ((status = conv_mds_init(c, batch, &m)) != TNT_OK) goto fail;
    dnnl_alg_kind_t alg;
    float alpha;
    p->fused = tnt__act_post_op(l->activation, l->activation_alpha, &alg, &alpha);
    if ((status = tnt__conv_create_fwd(l, &m, &m.x, &m.w, p->fused, &p->fwd)) != TNT_OK) goto fail;

    dnnl_convolution_desc_t bd, bw;
    TNT_DNNL(dnnl_dilated_convolution_backward_data_desc_init(
        &bd, dnnl_convolution_direct, &m.x, &m.w, &m.y, m.strides, m.dil, m.pl, m.pr));
    if ((status = tnt__prim_create(&p->bwd_data, &bd, NULL, p->fwd.pd)) != TNT_OK) goto fail;
    TNT_DNNL(dnnl_dilated_convolution_backward_weights_desc_init(
        &bw, dnnl_convolution_direct, &m.x, &m.w, c->use_bias ? &m.b : NULL, &m.y, m.strides,
        m.dil, m.pl, m.pr));
    if ((status = create_bwd_weights_prim(&p->bwd_weights, &bw, p->fwd.pd, c)) != TNT_OK) goto fail;

    const dnnl_memory_desc_t *wf = tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *wb = tnt__prim_md(&p->bwd_data, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dw = tnt__prim_md(&p->bwd_weights, dnnl_query_diff_weights_md, 0);
    p->bwd_uses_fwd_weights = dnnl_memory_desc_equal(wf, wb);
    if ((status = weight_reorder(&p->w_fwd, &p->w_fwd_buf, &m.w_hwio, wf, wf)) ||
        (!p->bwd_uses_fwd_weights &&
         (status = weight_reorder(&p->w_bwd, &p->w_bwd_buf, &m.w_hwio, wb, wb))) ||
        (status = weight_reorder(&p->dw_out, &p->dw_buf, dw, &m.w_hwio, dw)))
        goto fail;

    p->cf = c->channels_first;
    if (p->cf && ((status = tnt__reorder_create(&p->x_in, &m.x_user, &m.x)) || (status = tnt__reorder_create(&p->y_out, &m.y, &m.y_user)) ||
                  (status = tnt__reorder_create(&p->dy_in, &m.y_user, &m.y)) ||
                  (status = tnt__reorder_create(&p->dx_out, &m.x, &m.x_user))))
        goto fail;
    if ((status = tnt__memory(&p->x, &m.x, NULL, false)) ||
        (status = tnt__memory(&p->y, &m.y, NULL, false)) ||
        (status = tnt__memory(&p->wf, wf, NULL, false)) ||
        (status = tnt__memory(&p->wb, wb, NULL, false)) ||
        (status = tnt__memory(&p->dw, dw, NULL, false)) ||
        (c->use_bias && (status = tnt__memory(&p->b, &m.b, NULL, false))) ||
        (c->use_bias && (status = tnt__memory(&p->db, &m.b, NULL, false))))
        goto fail;
    /* the activation over the output's last axis in memory: channels, or width when channels first */
    int64_t cols = l->out_shape.dim[l->out_shape.ndim - 1];
    if (l->activation != TNT_ACT_LINEAR &&
        (status = tnt__act_create(&p->act, l->activation, l->activation_alpha,
                                  batch * tnt_shape_numel(l->out_shape) / cols, cols)) != TNT_OK)
        goto fail;
    return p;
fail:
    (void)status;
    tnt__conv_plan_destroy(p);
    return NULL;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Channels-first workspace, after the fused activation's: [x in NHWC][y or dy in NHWC], each
 * 64-byte aligned; the x copy stays from forward to backward. */
static size_t cf_bytes(tnt_shape s, int64_t batch) {
    return ((size_t)(batch * tnt_shape_numel(s)) * sizeof(float) + 63) & ~(size_t)63;
}
static size_t cf_off(const tnt_layer *l, int64_t batch) { return (tnt__fused_workspace_size(l, batch) + 63) & ~(size_t)63; }
static float *cf_x(const tnt_layer *l, void *ws, int64_t batch) { return (float *)((char *)ws + cf_off(l, batch)); }
static float *cf_y(const tnt_layer *l, void *ws, int64_t batch) {
    return (float *)((char *)ws + cf_off(l, batch) + cf_bytes(l->in_shape, batch));
}
/* A channels-first <-> channels-last copy of n values: a plain copy where the two layouts agree
 * (one channel), for which tnt__reorder_create makes no primitive. */
static tnt_status cf_move(tnt__reorder *r, const float *src, float *dst, int64_t n) {
    if (r->prim) return tnt__reorder_run(r, src, dst);
    memcpy(dst, src, (size_t)n * sizeof(float));
    return TNT_OK;
}

/* x: (batch, ih, iw, ic) -> out: (batch, oh, ow, filters), with the weights already reordered into
 * the forward layout by tnt__conv_forward. A fused plan's variant without the post-op is made on
 * first use: it is needed only when the model asks a fused layer for its pre-activation. */
static tnt_status conv_run(tnt_layer *l, void *plan, const tnt__fwd_args *a, bool post_op, float *out) {
    conv_plan *p = plan;
    conv_cfg *c = l->priv;
    tnt_status status;
    const tnt__prim *prim = &p->fwd;
    if (p->fused && !post_op) {
        if (!p->fwd_plain.prim) {
            conv_mds m;
            if ((status = conv_mds_init(c, p->batch, &m)) != TNT_OK ||
                (status = tnt__conv_create_fwd(l, &m, &m.x, tnt__prim_md(&p->fwd, dnnl_query_weights_md, 0), false,
                                     &p->fwd_plain)) != TNT_OK)
                return status;
        }
        prim = &p->fwd_plain;
    }
    const float *x = a->x;
    float *y = out;
    if (p->cf) { /* channels first: through the channels-last copies */
        x = cf_x(l, a->workspace, p->batch);
        if ((status = cf_move(&p->x_in, a->x, (float *)x, p->batch * tnt_shape_numel(l->in_shape))) != TNT_OK)
            return status;
        y = cf_y(l, a->workspace, p->batch);
    }
    tnt__set_data(p->x, x);
    tnt__set_data(p->wf, p->w_fwd.prim ? p->w_fwd_buf : l->weights[0].value);
    tnt__set_data(p->y, y);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_WEIGHTS, p->wf}, {DNNL_ARG_DST, p->y}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->b, l->weights[1].value);
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
    }
    if ((status = tnt__prim_exec(prim, n, args)) != TNT_OK) return status;
    return p->cf ? cf_move(&p->y_out, y, out, p->batch * tnt_shape_numel(l->out_shape)) : TNT_OK;
}

size_t tnt__conv_workspace_size(tnt_layer *l, void *plan, int64_t batch) {
    conv_plan *p = plan;
    if (p && p->bf16) return tnt__conv_bf16_workspace_size(l, p->bf16, batch);
    const conv_cfg *c = l->priv;
    return cf_off(l, batch) + (c->channels_first ? cf_bytes(l->in_shape, batch) + cf_bytes(l->out_shape, batch) : 0);
}

/* x: (batch, ih, iw, ic); y, preact: (batch, oh, ow, filters) */
tnt_status tnt__conv_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a) {
    conv_plan *p = plan;
    tnt_status status;
    if (p->bf16) return tnt__conv_bf16_forward(l, p->bf16, a);
    if (p->w_fwd.prim &&
        (status = tnt__reorder_run(&p->w_fwd, l->weights[0].value, p->w_fwd_buf)) != TNT_OK)
        return status;
    return tnt__fused_forward(l, plan, a, p->fused, &p->act, conv_run);
}

/* ---- backward ----------------------------------------------------------------------------- */

static tnt_status backward_data(tnt_layer *l, conv_plan *p, const float *dy, float *dx);

/* x: (batch, ih, iw, ic); y, dy: (batch, oh, ow, filters); dx: like x, or NULL */
tnt_status tnt__conv_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a) {
    conv_plan *p = plan;
    conv_cfg *c = l->priv;
    tnt_status status;
    if (p->bf16) return tnt__conv_bf16_backward(l, p->bf16, a);

    /* dpre (batch, oh, ow, filters): the gradient before the activation. */
    const float *dpre;
    if ((status = tnt__fused_backward(l, a, &p->act, &dpre)) != TNT_OK) return status;

    /* channels first: the channels-last copies of x and dpre (x again: a plan may run backward
     * alone, as ConvLSTM2D's weight gradient over all steps does) */
    const float *x = a->x;
    if (p->cf) {
        x = cf_x(l, a->workspace, p->batch);
        float *dy = cf_y(l, a->workspace, p->batch);
        if ((status = cf_move(&p->x_in, a->x, (float *)x, p->batch * tnt_shape_numel(l->in_shape))) != TNT_OK ||
            (status = cf_move(&p->dy_in, dpre, dy, p->batch * tnt_shape_numel(l->out_shape))) != TNT_OK)
            return status;
        dpre = dy;
    }
    /* Weight and bias gradients first: the model can start reducing them while dx runs. */
    tnt__weight *k = &l->weights[0];
    tnt__set_data(p->x, x);
    tnt__set_data(p->y, dpre);
    tnt__set_data(p->dw, p->dw_out.prim ? p->dw_buf : k->grad);
    dnnl_exec_arg_t wargs[4] = {{DNNL_ARG_SRC, p->x}, {DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_DIFF_WEIGHTS, p->dw}};
    int n = 3;
    if (c->use_bias) {
        tnt__set_data(p->db, l->weights[1].grad);
        wargs[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, p->db};
    }
    if ((status = tnt__prim_exec(&p->bwd_weights, n, wargs)) != TNT_OK) return status;
    if (p->dw_out.prim && (status = tnt__reorder_run(&p->dw_out, p->dw_buf, k->grad)) != TNT_OK)
        return status;

    if (!a->dx) return TNT_OK; /* first layer: no data gradient needed */
    if (!p->cf) return backward_data(l, p, dpre, a->dx);
    /* into the x copy (no longer needed), then back to channels first */
    float *dxt = cf_x(l, a->workspace, p->batch);
    if ((status = backward_data(l, p, dpre, dxt)) != TNT_OK) return status;
    return cf_move(&p->dx_out, dxt, a->dx, p->batch * tnt_shape_numel(l->in_shape));
}

tnt_status tnt__conv_backward_data(tnt_layer *l, void *plan, const float *dy, float *dx, void *workspace) {
    conv_plan *p = plan;
    tnt_status status;
    if (!p->cf) return backward_data(l, p, dy, dx);
    float *xt = cf_x(l, workspace, p->batch), *yt = cf_y(l, workspace, p->batch);
    if ((status = cf_move(&p->dy_in, dy, yt, p->batch * tnt_shape_numel(l->out_shape))) != TNT_OK ||
        (status = backward_data(l, p, yt, xt)) != TNT_OK)
        return status;
    return cf_move(&p->dx_out, xt, dx, p->batch * tnt_shape_numel(l->in_shape));
}

/* dx = the data gradient of dy, both in the primitives' channels-last layout */
static tnt_status backward_data(tnt_layer *l, conv_plan *p, const float *dy, float *dx) {
    tnt_status status;
    const tnt__weight *k = &l->weights[0];
    /* The weights in bwd_data's layout: the forward's copy when the layouts agree (weights do not
     * change between forward and backward of a step), else a fresh reorder. */
    const float *w = k->value;
    if (p->bwd_uses_fwd_weights) {
        if (p->w_fwd.prim) w = p->w_fwd_buf;
    } else if (p->w_bwd.prim) {
        if ((status = tnt__reorder_run(&p->w_bwd, w, p->w_bwd_buf)) != TNT_OK) return status;
        w = p->w_bwd_buf;
    }
    tnt__set_data(p->wb, w);
    tnt__set_data(p->y, dy);
    tnt__set_data(p->x, dx);
    dnnl_exec_arg_t dargs[3] = {{DNNL_ARG_DIFF_DST, p->y}, {DNNL_ARG_WEIGHTS, p->wb}, {DNNL_ARG_DIFF_SRC, p->x}};
    return tnt__prim_exec(&p->bwd_data, 3, dargs);
}

/* ---- constructor -------------------------------------------------------------------------- */

static void conv_destroy(tnt_layer *l) { free(l->priv); }

/* Keras Conv2D / Conv1D config (Conv1D: one-element lists). */
static tnt_status conv_get_config(const tnt_layer *l, cJSON *c) {
    const conv_cfg *k = l->priv;
    int n = k->one_d ? 1 : 2;
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", k->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", n, k->one_d ? (int[]){k->kw} : (int[]){k->kh, k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", n, k->one_d ? (int[]){k->sw} : (int[]){k->sh, k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", n, k->one_d ? (int[]){k->dw} : (int[]){k->dh, k->dw}));
    TNT_KJ(cJSON_AddNumberToObject(c, "groups", 1));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", k->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->bias_init));
    return tnt__kj_add_nulls(c, tnt__kj_kernel_nulls);
}

tnt_status tnt__conv_read_config(const cJSON *c, int n, int *ks, tnt_layer_opts *o, const tnt__kj_ctx *k) {
    static const int ones[3] = {1, 1, 1};
    bool use_bias = false;
    int groups = 0;
    tnt_status s;
    if ((s = tnt__kj_sizes(c, "kernel_size", true, n, NULL, ks, k)) != TNT_OK ||
        (s = tnt__kj_sizes(c, "strides", false, n, ones, o->strides, k)) != TNT_OK ||
        (s = tnt__kj_sizes(c, "dilation_rate", false, n, ones, o->dilation, k)) != TNT_OK ||
        (s = tnt__kj_padding(c, &o->padding, k)) != TNT_OK || (s = tnt__kj_check_data_format(c, k)) != TNT_OK ||
        (s = tnt__kj_int(c, "groups", false, 1, &groups, k)) != TNT_OK ||
        (s = tnt__kj_activation(c, &o->activation, k)) != TNT_OK ||
        (s = tnt__kj_bool(c, "use_bias", true, &use_bias, k)) != TNT_OK ||
        (s = tnt__kj_init(c, "bias_initializer", TNT_INIT_ZEROS, &o->bias_initializer, k)) != TNT_OK)
        return s;
    static const char *const nulls[] = {"bias_regularizer", "activity_regularizer", "bias_constraint", NULL};
    if ((s = tnt__kj_check_nulls(c, nulls, k)) != TNT_OK) return s;
    if (groups != 1) return tnt__kj_error(k, TNT_ERR_UNSUPPORTED, "groups %d (only 1 is supported)", groups);
    o->no_bias = !use_bias;
    return TNT_OK;
}

static tnt_layer *conv_from_config(const cJSON *c, const tnt__kj_ctx *k, bool one_d) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[2] = {0};
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__conv_read_config(c, one_d ? 1 : 2, ks, &o, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    static const char *const nulls[] = {"kernel_regularizer", "kernel_constraint", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    return tnt__kj_built(one_d ? tnt_conv1d(filters, ks[0], &o) : tnt_conv2d(filters, ks[0], ks[1], &o), k);
}

static tnt_layer *conv2d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return conv_from_config(c, k, false); }

static tnt_layer *conv1d_from_config(const cJSON *c, const tnt__kj_ctx *k) { return conv_from_config(c, k, true); }

const tnt__layer_ops tnt__conv2d_ops = {
    .class_name = "Conv2D",
    .from_config = conv2d_from_config,
    .get_config = conv_get_config,
    .build = conv_build,
    .plan_create = tnt__conv_plan_create,
    .plan_destroy = tnt__conv_plan_destroy,
    .workspace_size = tnt__conv_workspace_size,
    .forward = tnt__conv_forward,
    .backward = tnt__conv_backward,
    .backward_reads = tnt__reads_inputs,
    .destroy = conv_destroy,
    .set_data_format = tnt__layer_take_data_format,
    .gpu = &tnt__conv2d_device_ops,
};

const tnt__layer_ops tnt__conv1d_ops = {
    .class_name = "Conv1D",
    .from_config = conv1d_from_config,
    .get_config = conv_get_config,
    .build = conv1d_build,
    .plan_create = tnt__conv_plan_create,
    .plan_destroy = tnt__conv_plan_destroy,
    .workspace_size = tnt__conv_workspace_size,
    .forward = tnt__conv_forward,
    .backward = tnt__conv_backward,
    .backward_reads = tnt__reads_inputs,
    .destroy = conv_destroy,
    .set_data_format = tnt__layer_take_data_format,
    .gpu = &tnt__conv2d_device_ops, /* direct kernels or im2col GEMMs: conv2d_gemm_gpu.c */
};

/* The checks every constructor shares; cls names the class in messages. */
tnt_status tnt__conv_opts(const char *cls, conv_cfg *cfg, const tnt_layer_opts *o) {
    if ((cfg->sh > 1 || cfg->sw > 1) && (cfg->dh > 1 || cfg->dw > 1)) {
        if (cfg->one_d)
            return tnt__error(TNT_ERR_ARG, "%s: strides %d with dilation_rate %d (Keras allows strides > 1 or "
                              "dilation_rate > 1, not both)", cls, cfg->sw, cfg->dw);
        return tnt__error(TNT_ERR_ARG, "%s: strides (%d, %d) with dilation_rate (%d, %d) (Keras allows "
                          "strides > 1 or dilation_rate > 1, not both)", cls, cfg->sh, cfg->sw, cfg->dh, cfg->dw);
    }
    bool causal_ok = cfg->one_d && o->padding == TNT_PADDING_CAUSAL;
    if (o->padding != TNT_PADDING_VALID && o->padding != TNT_PADDING_SAME && !causal_ok)
        return tnt__error(TNT_ERR_ARG, "%s: padding %d (expected TNT_PADDING_VALID, TNT_PADDING_SAME%s)", cls,
                          (int)o->padding, cfg->one_d ? " or TNT_PADDING_CAUSAL" : "");
    if ((unsigned)o->activation >= TNT_ACT_COUNT)
        return tnt__error(TNT_ERR_ARG, "%s: activation %d (expected 0..%d)", cls, (int)o->activation,
                          TNT_ACT_COUNT - 1);
    if (!tnt__init_valid(o->kernel_initializer, TNT_INIT_ORTHOGONAL) || !tnt__init_valid(o->bias_initializer, TNT_INIT_ORTHOGONAL))
        return tnt__error(TNT_ERR_ARG, "%s: initializer %d/%d (expected 0..%d)", cls, (int)o->kernel_initializer,
                          (int)o->bias_initializer, (int)TNT_INIT_ORTHOGONAL);
    cfg->padding = o->padding;
    cfg->use_bias = !o->no_bias;
    cfg->kernel_init = o->kernel_initializer ? o->kernel_initializer : TNT_INIT_GLOROT_UNIFORM;
    cfg->bias_init = o->bias_initializer ? o->bias_initializer : TNT_INIT_ZEROS;
    return TNT_OK;
}

/* The shared checks, then the layer. */
static tnt_layer *conv_new(const char *cls, const tnt__layer_ops *ops, conv_cfg cfg,
                           const tnt_layer_opts *o) {
    if (tnt__conv_opts(cls, &cfg, o) != TNT_OK) return NULL;
    conv_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(ops, o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}

tnt_layer *tnt_conv2d(int filters, int kernel_h, int kernel_w, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (filters <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv2D: filters %d (expected > 0)", filters);
        return NULL;
    }
    if (kernel_h <= 0 || kernel_w <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv2D: kernel_size (%d, %d) (expected > 0)", kernel_h, kernel_w);
        return NULL;
    }
    if (o->strides[0] < 0 || o->strides[1] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv2D: strides (%d, %d) (expected > 0, or 0 for the default 1)",
                   o->strides[0], o->strides[1]);
        return NULL;
    }
    if (o->dilation[0] < 0 || o->dilation[1] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv2D: dilation_rate (%d, %d) (expected > 0, or 0 for the default 1)",
                   o->dilation[0], o->dilation[1]);
        return NULL;
    }
    conv_cfg cfg = {.filters = filters, .kh = kernel_h, .kw = kernel_w,
                    .sh = o->strides[0] ? o->strides[0] : 1, .sw = o->strides[1] ? o->strides[1] : 1,
                    .dh = o->dilation[0] ? o->dilation[0] : 1, .dw = o->dilation[1] ? o->dilation[1] : 1};
    return conv_new("Conv2D", &tnt__conv2d_ops, cfg, o);
}

tnt_layer *tnt_conv1d(int filters, int kernel_size, const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (filters <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: filters %d (expected > 0)", filters);
        return NULL;
    }
    if (kernel_size <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: kernel_size %d (expected > 0)", kernel_size);
        return NULL;
    }
    if (o->strides[0] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: strides %d (expected > 0, or 0 for the default 1)", o->strides[0]);
        return NULL;
    }
    if (o->dilation[0] < 0) {
        tnt__error(TNT_ERR_ARG, "Conv1D: dilation_rate %d (expected > 0, or 0 for the default 1)",
                   o->dilation[0]);
        return NULL;
    }
    conv_cfg cfg = {.filters = filters, .kh = 1, .kw = kernel_size, .sh = 1, .dh = 1, .one_d = true,
                    .sw = o->strides[0] ? o->strides[0] : 1, .dw = o->dilation[0] ? o->dilation[0] : 1};
    return conv_new("Conv1D", &tnt__conv1d_ops, cfg, o);
}

tnt_status tnt__conv_mds_init(const tnt__conv_cfg *c, int64_t batch, tnt__conv_mds *m) { return conv_mds_init(c, batch, m); }

const char *tnt__conv_bwd_weights_impl(const void *plan) {
    const conv_plan *p = plan;
    const char *name = "";
    if (p && p->bwd_weights.pd)
        dnnl_primitive_desc_query(p->bwd_weights.pd, dnnl_query_impl_info_str, 0, &name);
    return name;
}
