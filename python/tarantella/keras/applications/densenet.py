"""keras.applications.densenet: DenseNet121, DenseNet169 and DenseNet201 with Keras's layer names."""
from tarantella.keras import backend as K
from tarantella.keras import layers as L
from tarantella.keras.applications import imagenet_utils as U

_BASE = "https://storage.googleapis.com/tensorflow/keras-applications/densenet/"


def _conv_block(x, growth_rate, name):
    """BN-ReLU-1x1 conv (4 * growth_rate), BN-ReLU-3x3 conv (growth_rate), concatenated to x."""
    axis = U.bn_axis()
    x1 = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_0_bn")(x)
    x1 = L.Activation("relu", name=f"{name}_0_relu")(x1)
    x1 = L.Conv2D(4 * growth_rate, 1, use_bias=False, name=f"{name}_1_conv")(x1)
    x1 = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_1_bn")(x1)
    x1 = L.Activation("relu", name=f"{name}_1_relu")(x1)
    x1 = L.Conv2D(growth_rate, 3, padding="same", use_bias=False, name=f"{name}_2_conv")(x1)
    return L.Concatenate(axis=axis, name=f"{name}_concat")([x, x1])


def _transition(x, reduction, name):
    axis = U.bn_axis()
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name=f"{name}_bn")(x)
    x = L.Activation("relu", name=f"{name}_relu")(x)
    x = L.Conv2D(int(x.shape[axis] * reduction), 1, use_bias=False, name=f"{name}_conv")(x)
    return L.AveragePooling2D(2, strides=2, name=f"{name}_pool")(x)


def DenseNet(blocks, include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
             classes=1000, classifier_activation="softmax", name="densenet"):
    U.check_weights(weights, include_top, classes)
    input_shape = U.obtain_input_shape(input_shape, default_size=224, min_size=32,
                                       data_format=K.image_data_format(), require_flatten=include_top,
                                       weights=weights)
    img_input = U.image_input(input_tensor, input_shape)
    axis = U.bn_axis()
    x = L.ZeroPadding2D(padding=((3, 3), (3, 3)))(img_input)
    x = L.Conv2D(64, 7, strides=2, use_bias=False, name="conv1_conv")(x)
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name="conv1_bn")(x)
    x = L.Activation("relu", name="conv1_relu")(x)
    x = L.ZeroPadding2D(padding=((1, 1), (1, 1)))(x)
    x = L.MaxPooling2D(3, strides=2, name="pool1")(x)
    for stage, n in enumerate(blocks):
        for i in range(n):
            x = _conv_block(x, 32, name=f"conv{stage + 2}_block{i + 1}")
        if stage < len(blocks) - 1:
            x = _transition(x, 0.5, name=f"pool{stage + 2}")
    x = L.BatchNormalization(axis=axis, epsilon=1.001e-5, name="bn")(x)
    x = L.Activation("relu", name="relu")(x)
    x = U.classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, weights)
    depth = {(6, 12, 24, 16): 121, (6, 12, 32, 32): 169, (6, 12, 48, 32): 201}.get(tuple(blocks))
    if weights == "imagenet" and depth is None:
        raise ValueError(f"DenseNet: no ImageNet weights for blocks {list(blocks)}")
    file = f"densenet{depth}_weights_tf_dim_ordering_tf_kernels{'' if include_top else '_notop'}.h5"
    return U.finish(img_input, x, name, weights, input_tensor, file, _BASE + file)


def DenseNet121(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet121"):
    """Keras's DenseNet121 (8,062,504 parameters with the 1000-class top)."""
    return DenseNet((6, 12, 24, 16), include_top, weights, input_tensor, input_shape, pooling, classes,
                    classifier_activation, name)


def DenseNet169(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet169"):
    return DenseNet((6, 12, 32, 32), include_top, weights, input_tensor, input_shape, pooling, classes,
                    classifier_activation, name)


def DenseNet201(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet201"):
    return DenseNet((6, 12, 48, 32), include_top, weights, input_tensor, input_shape, pooling, classes,
                    classifier_activation, name)


def preprocess_input(x, data_format=None):
    """Torch's: to [0, 1], then each channel normalized by ImageNet's mean and standard deviation."""
    return U.preprocess_input(x, data_format=data_format, mode="torch")


decode_predictions = U.decode_predictions
