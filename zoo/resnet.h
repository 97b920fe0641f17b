/* resnet.h: ResNet model builders on the Functional API (shared by examples/resnet50.c, the
 * benchmark and the tests).
 *
 * resnet50: tf.keras.applications.ResNet50(include_top=True, weights=None, classes, input_shape
 *   (image_size, image_size, 3)) layer for layer: the same layer names, the same order of layer
 *   creation as Keras's ResNet/stack1/block1 (the projection shortcut _0_conv/_0_bn of a stack's
 *   first block before its _1_conv), the same hyperparameters (conv1: ZeroPadding2D(3) +
 *   Conv2D(64, 7, strides 2) with bias; BatchNormalization epsilon 1.001e-5, momentum 0.99;
 *   pool1: ZeroPadding2D(1) + MaxPooling2D(3, strides 2); the stride of a stack on the first 1x1
 *   conv of its first block; every Conv2D with a bias; Add([shortcut, x]); GlobalAveragePooling2D
 *   "avg_pool"; Dense(classes, softmax) "predictions"). With classes 1000 and image_size 224:
 *   25,636,712 parameters (25,583,592 trainable, 53,120 non-trainable), 177 layers counting the
 *   InputLayer, as Keras's model.layers.
 *
 * resnet18 / resnet34: He et al.'s basic-block ResNets (two 3x3 convs per block; [2,2,2,2] and
 *   [3,4,6,3] blocks of 64, 128, 256, 512 filters; stacks conv3..conv5 halve the resolution on the
 *   first 3x3 conv of their first block, whose shortcut is then a 1x1 conv + BN projection, as
 *   torchvision's option B). Keras has no ResNet-18/34; the choices here:
 *   - stem: for image_size < 128 (CIFAR-like inputs, e.g. 32x32) a 3x3/1 conv of 64 filters,
 *     BN, ReLU and no max pool (the CIFAR variant, as kuangliu/pytorch-cifar); for
 *     image_size >= 128 the ImageNet stem of ResNet-50 (7x7/2 conv after ZeroPadding2D(3), BN,
 *     ReLU, ZeroPadding2D(1) + MaxPooling2D(3, 2));
 *   - convs followed by BN have no bias (torchvision; the BN beta makes it redundant), unlike
 *     Keras's ResNet-50, which keeps the biases;
 *   - the same Keras-style names as ResNet-50 (conv1_conv, conv2_block1_1_conv, ...,
 *     conv2_block1_add, conv2_block1_out, avg_pool, predictions) and the same BN
 *     hyperparameters (epsilon 1.001e-5, momentum 0.99).
 *   ResNet-18 with 10 classes on 32x32: 11,181,642 parameters (11,173,962 trainable).
 *
 * All builders return NULL with tnt_last_error() set on failure. */
#ifndef TNT_EXAMPLES_RESNET_H
#define TNT_EXAMPLES_RESNET_H

#include <tarantella.h>

typedef enum resnet_arch { RESNET18 = 18, RESNET34 = 34, RESNET50 = 50 } resnet_arch;

typedef struct resnet_config {
    resnet_arch arch;
    int classes;      /* >= 1 */
    int image_size;   /* square RGB input (image_size, image_size, 3); >= 32 for ResNet-50 */
    bool sync_bn;     /* SyncBatchNormalization instead of BatchNormalization (statistics over
                         all ranks of a distributed model: 2 ranks train as 1) */
    const char *name; /* NULL: "resnet50", "resnet34", "resnet18" */
} resnet_config;

tnt_model *resnet_build(const resnet_config *cfg);
tnt_model *resnet50(int classes, int image_size);
tnt_model *resnet34(int classes, int image_size);
tnt_model *resnet18(int classes, int image_size);
/* "resnet50" -> RESNET50 etc.; 0 when unknown. */
resnet_arch resnet_arch_from_name(const char *name);

#endif
