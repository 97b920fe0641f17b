/* conv3d.c: Conv3D (Keras): 3-D convolution of (depth, height, width, channels) input (channels
 * first: (channels, depth, height, width)) with a kernel in Keras layout DHWIO (kd, kh, kw, in,
 * filters), optional bias and a fused activation. It runs on the Conv2D engine (conv2d.h) with 5-D
 * oneDNN descriptors: NDHWC or NCDHW activations, the kernel reordered once per step into oneDNN's
 * preferred layout, TensorFlow's "same" padding on each axis. */
#include "layers/convolutional/conv2d.h"
#include "layers/keras_config.h"

#include <stdio.h>

typedef tnt__conv_cfg conv_cfg;

static tnt_status conv3d_build(tnt_layer *l, tnt_shape in, tnt_shape *out) {
    conv_cfg *c = l->priv;
    char b[96];
    int64_t sp[3] = {0};
    tnt_status s = tnt__conv_input(l, "Conv3D", in, 3, sp, &c->ic);
    if (s != TNT_OK) return s;
    c->channels_first = l->channels_first;
    c->id = sp[0], c->ih = sp[1], c->iw = sp[2];
    if (!tnt__conv_axis(c->id, c->kd, c->sd, c->dd, c->padding, &c->od, &c->pad_f, &c->pad_k) ||
        !tnt__conv_axis(c->ih, c->kh, c->sh, c->dh, c->padding, &c->oh, &c->pad_t, &c->pad_b) ||
        !tnt__conv_axis(c->iw, c->kw, c->sw, c->dw, c->padding, &c->ow, &c->pad_l, &c->pad_r))
        return tnt__error(TNT_ERR_SHAPE,
                          "Conv3D \"%s\": input shape %s is smaller than the kernel (%d, %d, %d) with dilation "
                          "(%d, %d, %d) and padding \"valid\": output would be (%lld, %lld, %lld, %d)",
                          l->name, tnt_shape_str(in, b, sizeof b), c->kd, c->kh, c->kw, c->dd, c->dh, c->dw,
                          (long long)c->od, (long long)c->oh, (long long)c->ow, c->filters);
    s = tnt__conv_add_weights(l, TNT_SHAPE(c->kd, c->kh, c->kw, c->ic, c->filters));
    if (s == TNT_OK) *out = tnt__conv_output(l, 3, (int64_t[]){c->od, c->oh, c->ow}, c->filters);
    return s;
}

static void conv3d_destroy(tnt_layer *l) { free(l->priv); }

static tnt_status conv3d_get_config(const tnt_layer *l, cJSON *c) {
    const conv_cfg *k = l->priv;
    TNT_KJ(cJSON_AddNumberToObject(c, "filters", k->filters));
    TNT_KJ_S(tnt__kj_add_ints(c, "kernel_size", 3, (int[]){k->kd, k->kh, k->kw}));
    TNT_KJ_S(tnt__kj_add_ints(c, "strides", 3, (int[]){k->sd, k->sh, k->sw}));
    TNT_KJ(cJSON_AddStringToObject(c, "padding", tnt__kj_padding_name(k->padding)));
    TNT_KJ_S(tnt__kj_add_data_format(c, l));
    TNT_KJ_S(tnt__kj_add_ints(c, "dilation_rate", 3, (int[]){k->dd, k->dh, k->dw}));
    TNT_KJ(cJSON_AddNumberToObject(c, "groups", 1));
    TNT_KJ_S(tnt__kj_add_activation(c, l->activation, l->activation_alpha));
    TNT_KJ(cJSON_AddBoolToObject(c, "use_bias", k->use_bias));
    TNT_KJ_S(tnt__kj_add_initializer(c, "kernel_initializer", k->kernel_init));
    TNT_KJ_S(tnt__kj_add_initializer(c, "bias_initializer", k->bias_init));
    return tnt__kj_add_nulls(c, tnt__kj_kernel_nulls);
}

static tnt_layer *conv3d_from_config(const cJSON *c, const tnt__kj_ctx *k) {
    tnt_layer_opts o = {.name = k->name};
    int filters = 0, ks[3] = {0};
    TNT_KJ_READ(tnt__kj_int(c, "filters", true, 0, &filters, k));
    TNT_KJ_READ(tnt__conv_read_config(c, 3, ks, &o, k));
    TNT_KJ_READ(tnt__kj_init(c, "kernel_initializer", TNT_INIT_GLOROT_UNIFORM, &o.kernel_initializer, k));
    static const char *const nulls[] = {"kernel_regularizer", "kernel_constraint", NULL};
    TNT_KJ_READ(tnt__kj_check_nulls(c, nulls, k));
    return tnt__kj_built(tnt_conv3d(filters, ks, &o), k);
}

const tnt__layer_ops tnt__conv3d_ops = {
    .class_name = "Conv3D",
    .from_config = conv3d_from_config,
    .get_config = conv3d_get_config,
    .build = conv3d_build,
    .plan_create = tnt__conv_plan_create,
    .plan_destroy = tnt__conv_plan_destroy,
    .workspace_size = tnt__conv_workspace_size,
    .forward = tnt__conv_forward,
    .backward = tnt__conv_backward,
    .destroy = conv3d_destroy,
    .set_data_format = tnt__layer_take_data_format,
};

tnt_layer *tnt_conv3d(int filters, const int kernel_size[3], const tnt_layer_opts *opts) {
    static const tnt_layer_opts defaults;
    const tnt_layer_opts *o = opts ? opts : &defaults;
    if (filters <= 0) {
        tnt__error(TNT_ERR_ARG, "Conv3D: filters %d (expected > 0)", filters);
        return NULL;
    }
    if (!kernel_size || kernel_size[0] <= 0 || kernel_size[1] <= 0 || kernel_size[2] <= 0) {
        if (kernel_size)
            tnt__error(TNT_ERR_ARG, "Conv3D: kernel_size (%d, %d, %d) (expected > 0)", kernel_size[0], kernel_size[1],
                       kernel_size[2]);
        else
            tnt__error(TNT_ERR_ARG, "Conv3D: kernel_size is NULL");
        return NULL;
    }
    int st[3], dil[3];
    bool strided = false, dilated = false;
    for (int i = 0; i < 3; i++) {
        if (o->strides[i] < 0 || o->dilation[i] < 0) {
            tnt__error(TNT_ERR_ARG, "Conv3D: strides (%d, %d, %d), dilation_rate (%d, %d, %d) (expected > 0, or 0 "
                       "for the default 1)", o->strides[0], o->strides[1], o->strides[2], o->dilation[0],
                       o->dilation[1], o->dilation[2]);
            return NULL;
        }
        st[i] = o->strides[i] ? o->strides[i] : 1;
        dil[i] = o->dilation[i] ? o->dilation[i] : 1;
        strided |= st[i] > 1, dilated |= dil[i] > 1;
    }
    if (strided && dilated) {
        tnt__error(TNT_ERR_ARG, "Conv3D: strides (%d, %d, %d) with dilation_rate (%d, %d, %d) (Keras allows "
                   "strides > 1 or dilation_rate > 1, not both)", st[0], st[1], st[2], dil[0], dil[1], dil[2]);
        return NULL;
    }
    conv_cfg cfg = {.filters = filters, .kd = kernel_size[0], .kh = kernel_size[1], .kw = kernel_size[2],
                    .sd = st[0], .sh = st[1], .sw = st[2], .dd = dil[0], .dh = dil[1], .dw = dil[2]};
    if (tnt__conv_opts("Conv3D", &cfg, o) != TNT_OK) return NULL;
    conv_cfg *c = tnt__calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = cfg;
    tnt_layer *l = tnt__layer_new(&tnt__conv3d_ops, o->name, c);
    if (!l) {
        free(c);
        return NULL;
    }
    l->activation = o->activation;
    l->activation_alpha = o->activation_alpha;
    return l;
}
