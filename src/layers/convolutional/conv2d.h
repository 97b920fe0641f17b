/* conv2d.h: the Conv2D engine (conv2d.c) shared with the layers that run on its plans:
 * DepthwiseConv2D (a grouped convolution) and, through it and a 1x1 Conv2D, SeparableConv2D
 * (depthwise_conv.c). A layer using the engine has a tnt__conv_cfg as the first member of its
 * priv, weights[0] the kernel and weights[1] the bias (when use_bias). */
#ifndef TNT_CONV2D_H
#define TNT_CONV2D_H

#include "kernels/dnnl_util.h"
#include "layers/layer.h"

typedef struct tnt__conv_cfg {
    int filters, kh, kw;
    int sh, sw;  /* strides */
    int dh, dw;  /* dilation (1-based, Keras) */
    int kd, sd, dd; /* Conv3D's depth axis (kernel, stride, dilation); kd 0: a 2-D convolution */
    tnt_padding padding;
    bool use_bias;
    bool one_d; /* Conv1D: (steps, channels) inputs run as height-1 images, kernel (1, k) */
    /* Grouped convolution when > 1 (DepthwiseConv2D: groups = ic): the kernel is Keras's
     * (kh, kw, ic / groups, filters), output channel g * (filters / groups) + o reading input
     * channels g * (ic / groups) ...; 0 or 1: an ordinary convolution. Set in build. */
    int groups;
    tnt_initializer kernel_init, bias_init;
    /* from build */
    bool channels_first; /* the layer's data_format: NCHW (NCDHW) activations, else NHWC (NDHWC) */
    int64_t ih, iw, ic, oh, ow;
    int64_t pad_t, pad_l, pad_b, pad_r;
    int64_t id, od, pad_f, pad_k; /* Conv3D: depth in and out, padding front and back */
} tnt__conv_cfg;

/* Conv2D's device path (conv2d_gemm_gpu.c): 1x1 windows as GEMMs, few taps as direct kernels or
 * im2col GEMMs (no cuDNN), the rest through tnt__conv2d_gpu_ops (conv2d_gpu.c: cuDNN). */
extern const tnt__gpu_ops tnt__conv2d_device_ops;
extern const tnt__gpu_ops tnt__conv2d_gpu_ops;
/* The im2col path's largest chunk of col, in floats (tests make it small to see several chunks) */
extern int64_t tnt__conv_im2col_floats;
/* The direct path's fewest output pixels a partial sum of dW adds (tests: 1, to see many chunks) */
extern int64_t tnt__conv_direct_chunk;

/* Output size and padding along one axis (valid, or TensorFlow's same); false when the output
 * would be empty. */
bool tnt__conv_axis(int64_t in, int k, int s, int d, tnt_padding pad, int64_t *out, int64_t *pl,
                    int64_t *pr);
/* Declares the kernel (Keras's shape; fans from the receptive field) and, with use_bias, the bias. */
tnt_status tnt__conv_add_weights(tnt_layer *l, tnt_shape kernel);
/* Checks opts (strides with dilation, padding, activation, initializers) for class cls and fills
 * cfg's padding, use_bias and initializers (defaults resolved). */
tnt_status tnt__conv_opts(const char *cls, tnt__conv_cfg *cfg, const tnt_layer_opts *o);

/* The Keras config keys Conv1D, Conv2D, Conv3D, DepthwiseConv2D and SeparableConv2D share, for their
 * from_config: kernel_size into ks[0 .. n) (n = 1, 2 or 3 spatial axes), strides, dilation_rate,
 * padding, data_format, groups, activation, use_bias, bias_initializer into o, and no bias
 * regularizer or constraint. */
tnt_status tnt__conv_read_config(const struct cJSON *c, int n, int *ks, tnt_layer_opts *o,
                                 const struct tnt__kj_ctx *k);

/* Checks a layer's input shape (rank n + 1, no empty dimension; the message names class cls and
 * the axes of the layer's data_format) and gives its spatial sizes sp[0 .. n) and channels. */
tnt_status tnt__conv_input(const tnt_layer *l, const char *cls, tnt_shape in, int n, int64_t *sp, int64_t *channels);
/* The output shape of n spatial sizes sp and c channels in the layer's data_format. */
tnt_shape tnt__conv_output(const tnt_layer *l, int n, const int64_t *sp, int64_t c);

/* Memory descriptors of one plan (float32): x (batch, ic, ih, iw) and y (batch, filters, oh, ow)
 * as nhwc (ndhwc), the weights (filters, ic, kh, kw) as any (for the primitives) and as Keras's
 * buffer, the bias (filters); x_user and y_user in the layer's own layout (they differ when
 * channels first). The bf16 engine takes them with its own data types. */
typedef struct tnt__conv_mds {
    dnnl_memory_desc_t x, y, w, w_hwio, b;
    dnnl_memory_desc_t x_user, y_user;
    dnnl_dims_t strides, dil, pl, pr;
} tnt__conv_mds;
tnt_status tnt__conv_mds_init(const tnt__conv_cfg *c, int64_t batch, tnt__conv_mds *m);

/* The forward primitive of a plan (attr: user scratchpad; the fused activation as a post-op when
 * fuse_act) on src xmd (m->x, or its bf16 twin) and weights wmd (any, or the fused primitive's
 * layout), preferring oneDNN's direct jit kernel over brgconv (conv2d.c says why). */
tnt_status tnt__conv_create_fwd(tnt_layer *l, const tnt__conv_mds *m, const dnnl_memory_desc_t *xmd,
                                const dnnl_memory_desc_t *wmd, bool fuse_act, tnt__prim *prim);

/* The bf16 engine (conv_bf16.c) for mixed_bfloat16 layers: its plan, or NULL with *use_f32 set
 * when oneDNN has only reference bf16 kernels for this shape (the layer then runs float32), or
 * NULL with an error. Same contract as the float32 functions below. */
void *tnt__conv_bf16_plan_create(tnt_layer *l, int64_t batch, bool *use_f32);
void tnt__conv_bf16_plan_destroy(void *plan);
size_t tnt__conv_bf16_workspace_size(tnt_layer *l, void *plan, int64_t batch);
tnt_status tnt__conv_bf16_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a);
tnt_status tnt__conv_bf16_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a);

/* The layer-contract functions of the engine, for a layer built as above. */
void *tnt__conv_plan_create(tnt_layer *l, int64_t batch);
void tnt__conv_plan_destroy(void *plan);
size_t tnt__conv_workspace_size(tnt_layer *l, void *plan, int64_t batch);
tnt_status tnt__conv_forward(tnt_layer *l, void *plan, const tnt__fwd_args *a);
tnt_status tnt__conv_backward(tnt_layer *l, void *plan, const tnt__bwd_args *a);
/* dx = the data gradient of dy alone (no weight gradients), for a layer without activation; needs
 * the plan's forward to have run with the current weights (it may reuse their reordered copy), and
 * a workspace of tnt__conv_workspace_size (scratch for a channels-first layer). */
tnt_status tnt__conv_backward_data(tnt_layer *l, void *plan, const float *dy, float *dx, void *workspace);
/* The implementation name (oneDNN's impl info) of a float32 plan's backward-weights primitive
 * ("" for a bf16 plan), for the tests. */
const char *tnt__conv_bwd_weights_impl(const void *plan);

#endif
