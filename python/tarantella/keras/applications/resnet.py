"""keras.applications.resnet: ResNet50, ResNet101 and ResNet152 (v1), with Keras's layer names,
so that Keras's weight files (and ImageNet's, from Keras's cache folder) load into them."""
from tarantella.keras import backend as K
from tarantella.keras import layers as L
from tarantella.keras.applications import imagenet_utils as U

_BASE = "https://storage.googleapis.com/tensorflow/keras-applications/resnet/"


def _block(x, filters, stride=1, conv_shortcut=True, name=None):
    """The bottleneck block of ResNet v1: 1x1, 3x3, 1x1 (4 * filters) convolutions with batch
    norm, and a projected (conv_shortcut) or identity shortcut."""
    axis = U.bn_axis()
    if conv_shortcut:
        shortcut = L.Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(x)
        shortcut = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_0_bn")(shortcut)
    else:
        shortcut = x
    x = L.Conv2D(filters, 1, strides=stride, name=f"{name}_1_conv")(x)
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_1_bn")(x)
    x = L.Activation("relu", name=f"{name}_1_relu")(x)
    x = L.Conv2D(filters, 3, padding="same", name=f"{name}_2_conv")(x)
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_2_bn")(x)
    x = L.Activation("relu", name=f"{name}_2_relu")(x)
    x = L.Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_3_bn")(x)
    x = L.Add(name=f"{name}_add")([shortcut, x])
    return L.Activation("relu", name=f"{name}_out")(x)


def _stack(x, filters, blocks, stride1=2, name=None):
    x = _block(x, filters, stride=stride1, name=f"{name}_block1")
    for i in range(2, blocks + 1):
        x = _block(x, filters, conv_shortcut=False, name=f"{name}_block{i}")
    return x


def ResNet(blocks, model_name, include_top=True, weights="imagenet", input_tensor=None, input_shape=None,
           pooling=None, classes=1000, classifier_activation="softmax", name=None):
    """ResNet v1 with `blocks` bottleneck blocks in its four stages (conv2..conv5)."""
    U.check_weights(weights, include_top, classes)
    input_shape = U.obtain_input_shape(input_shape, default_size=224, min_size=32,
                                       data_format=K.image_data_format(), require_flatten=include_top,
                                       weights=weights)
    img_input = U.image_input(input_tensor, input_shape)
    axis = U.bn_axis()
    x = L.ZeroPadding2D(padding=((3, 3), (3, 3)), name="conv1_pad")(img_input)
    x = L.Conv2D(64, 7, strides=2, name="conv1_conv")(x)
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name="conv1_bn")(x)
    x = L.Activation("relu", name="conv1_relu")(x)
    x = L.ZeroPadding2D(padding=((1, 1), (1, 1)), name="pool1_pad")(x)
    x = L.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for stage, (filters, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        x = _stack(x, filters, n, stride1=1 if stage == 0 else 2, name=f"conv{stage + 2}")
    x = U.classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, weights)
    suffix = "" if include_top else "_notop"
    return U.finish(img_input, x, name or model_name, weights, input_tensor,
                    f"{model_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5",
                    f"{_BASE}{model_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5")


def ResNet50(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name="resnet50"):
    """Keras's ResNet50 (25,636,712 parameters with the 1000-class top)."""
    return ResNet((3, 4, 6, 3), "resnet50", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name)


def ResNet101(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
              classifier_activation="softmax", name="resnet101"):
    """Keras's ResNet101 (44,707,176 parameters with the 1000-class top)."""
    return ResNet((3, 4, 23, 3), "resnet101", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name)


def ResNet152(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
              classifier_activation="softmax", name="resnet152"):
    """Keras's ResNet152 (60,419,944 parameters with the 1000-class top)."""
    return ResNet((3, 8, 36, 3), "resnet152", include_top, weights, input_tensor, input_shape, pooling, classes,
                  classifier_activation, name)


def preprocess_input(x, data_format=None):
    """Caffe's: RGB to BGR, ImageNet's mean subtracted (no scaling)."""
    return U.preprocess_input(x, data_format=data_format, mode="caffe")


decode_predictions = U.decode_predictions
