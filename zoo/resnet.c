/* resnet.c: ResNet-50 as tf.keras.applications.ResNet50, and basic-block ResNet-18/34; see
 * resnet.h for the choices. */
#include "resnet.h"

#include <stdio.h>
#include <string.h>

#define BN_EPSILON 1.001e-5f
#define BN_MOMENTUM 0.99f

typedef struct builder {
    tnt_graph *g;
    bool sync_bn;
    bool conv_bias; /* Keras ResNet-50: use_bias=True */
} builder;

/* prefix + suffix; block names ("conv4_block6") are far shorter than the 64 bytes of a name */
static const char *nm(char *buf, const char *prefix, const char *suffix) {
    size_t a = strlen(prefix), b = strlen(suffix);
    if (a + b >= 64) a = 63 - b;
    memcpy(buf, prefix, a);
    memcpy(buf + a, suffix, b + 1);
    return buf;
}

static tnt_ktensor conv(builder *b, tnt_ktensor x, int filters, int k, int stride, bool same, const char *name) {
    tnt_layer_opts o = {.name = name, .strides = {stride, stride},
                        .padding = same ? TNT_PADDING_SAME : TNT_PADDING_VALID, .no_bias = !b->conv_bias};
    return tnt_call(b->g, tnt_conv2d(filters, k, k, &o), x);
}

static tnt_ktensor bn(builder *b, tnt_ktensor x, const char *name) {
    tnt_layer *l = b->sync_bn ? tnt_sync_batch_normalization(BN_MOMENTUM, BN_EPSILON, name)
                              : tnt_batch_normalization(BN_MOMENTUM, BN_EPSILON, name);
    return tnt_call(b->g, l, x);
}

static tnt_ktensor relu(builder *b, tnt_ktensor x, const char *name) {
    return tnt_call(b->g, tnt_activation_layer(TNT_ACT_RELU, &(tnt_layer_opts){.name = name}), x);
}

/* Keras resnet.block1: the bottleneck block (1x1, 3x3, 1x1 x4), stride on the first 1x1. */
static tnt_ktensor block1(builder *b, tnt_ktensor x, int filters, int stride, bool conv_shortcut, const char *name) {
    char buf[64];
    tnt_ktensor shortcut = x;
    if (conv_shortcut) {
        shortcut = conv(b, x, 4 * filters, 1, stride, false, nm(buf, name, "_0_conv"));
        shortcut = bn(b, shortcut, nm(buf, name, "_0_bn"));
    }
    x = conv(b, x, filters, 1, stride, false, nm(buf, name, "_1_conv"));
    x = bn(b, x, nm(buf, name, "_1_bn"));
    x = relu(b, x, nm(buf, name, "_1_relu"));
    x = conv(b, x, filters, 3, 1, true, nm(buf, name, "_2_conv"));
    x = bn(b, x, nm(buf, name, "_2_bn"));
    x = relu(b, x, nm(buf, name, "_2_relu"));
    x = conv(b, x, 4 * filters, 1, 1, false, nm(buf, name, "_3_conv"));
    x = bn(b, x, nm(buf, name, "_3_bn"));
    x = tnt_call2(b->g, tnt_add(nm(buf, name, "_add")), shortcut, x);
    return relu(b, x, nm(buf, name, "_out"));
}

/* Basic block (3x3, 3x3), stride on the first 3x3; projection shortcut when the shape changes. */
static tnt_ktensor basic_block(builder *b, tnt_ktensor x, int filters, int stride, bool conv_shortcut,
                               const char *name) {
    char buf[64];
    tnt_ktensor shortcut = x;
    if (conv_shortcut) {
        shortcut = conv(b, x, filters, 1, stride, false, nm(buf, name, "_0_conv"));
        shortcut = bn(b, shortcut, nm(buf, name, "_0_bn"));
    }
    if (stride == 1) {
        x = conv(b, x, filters, 3, 1, true, nm(buf, name, "_1_conv"));
    } else { /* torchvision's 3x3/2 with padding 1: pad 1 all round, then valid */
        x = tnt_call(b->g, tnt_zero_padding2d(1, 1, 1, 1, nm(buf, name, "_1_pad")), x);
        x = conv(b, x, filters, 3, stride, false, nm(buf, name, "_1_conv"));
    }
    x = bn(b, x, nm(buf, name, "_1_bn"));
    x = relu(b, x, nm(buf, name, "_1_relu"));
    x = conv(b, x, filters, 3, 1, true, nm(buf, name, "_2_conv"));
    x = bn(b, x, nm(buf, name, "_2_bn"));
    x = tnt_call2(b->g, tnt_add(nm(buf, name, "_add")), shortcut, x);
    return relu(b, x, nm(buf, name, "_out"));
}

/* Keras resnet.stack1 (bottleneck) or its basic-block counterpart. in_filters: the channels
 * entering the stack (a basic block needs a projection only when they change or stride > 1). */
static tnt_ktensor stack(builder *b, tnt_ktensor x, bool bottleneck, int filters, int blocks, int stride1,
                         int in_filters, const char *name) {
    char buf[64];
    for (int i = 1; i <= blocks; i++) {
        snprintf(buf, sizeof buf, "%s_block%d", name, i);
        if (bottleneck)
            x = block1(b, x, filters, i == 1 ? stride1 : 1, i == 1, buf);
        else
            x = basic_block(b, x, filters, i == 1 ? stride1 : 1, i == 1 && (stride1 != 1 || in_filters != filters), buf);
    }
    return x;
}

/* Keras's ImageNet stem: conv1_pad, conv1_conv, conv1_bn, conv1_relu, pool1_pad, pool1_pool. */
static tnt_ktensor imagenet_stem(builder *b, tnt_ktensor x) {
    x = tnt_call(b->g, tnt_zero_padding2d(3, 3, 3, 3, "conv1_pad"), x);
    x = conv(b, x, 64, 7, 2, false, "conv1_conv");
    x = bn(b, x, "conv1_bn");
    x = relu(b, x, "conv1_relu");
    x = tnt_call(b->g, tnt_zero_padding2d(1, 1, 1, 1, "pool1_pad"), x);
    return tnt_call(b->g, tnt_max_pooling2d(3, 3, &(tnt_layer_opts){.name = "pool1_pool", .strides = {2, 2}}), x);
}

tnt_model *resnet_build(const resnet_config *cfg) {
    if (!cfg) return NULL;
    static const int blocks50[4] = {3, 4, 6, 3}, blocks34[4] = {3, 4, 6, 3}, blocks18[4] = {2, 2, 2, 2};
    const int *blocks;
    const char *default_name;
    switch (cfg->arch) {
    case RESNET50: blocks = blocks50, default_name = "resnet50"; break;
    case RESNET34: blocks = blocks34, default_name = "resnet34"; break;
    case RESNET18: blocks = blocks18, default_name = "resnet18"; break;
    default: /* let a layer constructor report it: an unknown architecture builds nothing */
        return NULL;
    }
    bool bottleneck = cfg->arch == RESNET50;
    builder b = {.g = tnt_graph_new(), .sync_bn = cfg->sync_bn, .conv_bias = bottleneck};
    if (!b.g) return NULL;
    tnt_ktensor in = tnt_graph_input(b.g, TNT_SHAPE(cfg->image_size, cfg->image_size, 3), "input_1");
    tnt_ktensor x;
    if (bottleneck || cfg->image_size >= 128) {
        x = imagenet_stem(&b, in);
    } else { /* CIFAR stem: 3x3/1, no max pool */
        x = conv(&b, in, 64, 3, 1, true, "conv1_conv");
        x = bn(&b, x, "conv1_bn");
        x = relu(&b, x, "conv1_relu");
    }
    static const char *names[4] = {"conv2", "conv3", "conv4", "conv5"};
    int in_filters = 64;
    for (int s = 0; s < 4; s++) {
        int filters = 64 << s;
        x = stack(&b, x, bottleneck, filters, blocks[s], s == 0 ? 1 : 2, in_filters, names[s]);
        in_filters = bottleneck ? 4 * filters : filters;
    }
    x = tnt_call(b.g, tnt_global_average_pooling2d("avg_pool"), x);
    x = tnt_call(b.g, tnt_dense(cfg->classes, &(tnt_layer_opts){.name = "predictions", .activation = TNT_ACT_SOFTMAX}), x);
    tnt_model *m = tnt_functional(b.g, 1, &in, 1, &x, cfg->name ? cfg->name : default_name);
    tnt_graph_free(b.g);
    return m;
}

tnt_model *resnet50(int classes, int image_size) {
    return resnet_build(&(resnet_config){.arch = RESNET50, .classes = classes, .image_size = image_size});
}
tnt_model *resnet34(int classes, int image_size) {
    return resnet_build(&(resnet_config){.arch = RESNET34, .classes = classes, .image_size = image_size});
}
tnt_model *resnet18(int classes, int image_size) {
    return resnet_build(&(resnet_config){.arch = RESNET18, .classes = classes, .image_size = image_size});
}

resnet_arch resnet_arch_from_name(const char *name) {
    if (!name) return 0;
    if (!strcmp(name, "resnet50")) return RESNET50;
    if (!strcmp(name, "resnet34")) return RESNET34;
    if (!strcmp(name, "resnet18")) return RESNET18;
    return 0;
}
