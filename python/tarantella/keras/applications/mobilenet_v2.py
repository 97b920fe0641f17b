"""keras.applications.mobilenet_v2: MobileNetV2 with Keras's layer names (inverted residual
blocks of depthwise convolutions, ReLU6)."""
import warnings

from tarantella.keras import backend as K
from tarantella.keras import layers as L
from tarantella.keras.applications import imagenet_utils as U

_BASE = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"
_SIDES = (96, 128, 160, 192, 224)  # the input sides ImageNet weights exist for

# (filters, stride, expansion) of blocks 0..16
_BLOCKS = ((16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
           (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6), (160, 1, 6),
           (320, 1, 6))


def _make_divisible(v, divisor, min_value=None):
    """The channel count rounded to a multiple of divisor, never more than 10% below v."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _bn(name):
    return L.BatchNormalization(axis=-1 if K.image_data_format() == "channels_last" else 1, epsilon=1e-3,
                                momentum=0.999, name=name)


def _inverted_res_block(inputs, expansion, stride, alpha, filters, block_id):
    axis = 1 if K.image_data_format() == "channels_first" else -1
    in_channels = inputs.shape[axis]
    pointwise = _make_divisible(int(filters * alpha), 8)
    x = inputs
    prefix = f"block_{block_id}_"
    if block_id:
        x = L.Conv2D(expansion * in_channels, kernel_size=1, padding="same", use_bias=False, activation=None,
                     name=f"{prefix}expand")(x)
        x = _bn(f"{prefix}expand_BN")(x)
        x = L.ReLU(6.0, name=f"{prefix}expand_relu")(x)
    else:
        prefix = "expanded_conv_"
    if stride == 2:
        x = L.ZeroPadding2D(padding=U.correct_pad(x, 3), name=f"{prefix}pad")(x)
    x = L.DepthwiseConv2D(kernel_size=3, strides=stride, activation=None, use_bias=False,
                          padding="same" if stride == 1 else "valid", name=f"{prefix}depthwise")(x)
    x = _bn(f"{prefix}depthwise_BN")(x)
    x = L.ReLU(6.0, name=f"{prefix}depthwise_relu")(x)
    x = L.Conv2D(pointwise, kernel_size=1, padding="same", use_bias=False, activation=None,
                 name=f"{prefix}project")(x)
    x = _bn(f"{prefix}project_BN")(x)
    if in_channels == pointwise and stride == 1:
        return L.Add(name=f"{prefix}add")([inputs, x])
    return x


def _default_size(input_shape, input_tensor):
    """Keras's: the input's side when it is square and one of the ImageNet sides, else 224."""
    first = K.image_data_format() == "channels_first"
    if input_shape is not None:
        rows, cols = (input_shape[1], input_shape[2]) if first else (input_shape[0], input_shape[1])
    elif input_tensor is not None:
        s = input_tensor.shape
        rows, cols = (s[2], s[3]) if first else (s[1], s[2])
    else:
        return 224
    return rows if rows == cols and rows in _SIDES else 224


def MobileNetV2(input_shape=None, alpha=1.0, include_top=True, weights="imagenet", input_tensor=None, pooling=None,
                classes=1000, classifier_activation="softmax", name=None):
    """Keras's MobileNetV2 (3,538,984 parameters at alpha 1.0 with the 1000-class top)."""
    U.check_weights(weights, include_top, classes)
    input_shape = U.obtain_input_shape(input_shape, default_size=_default_size(input_shape, input_tensor),
                                       min_size=32, data_format=K.image_data_format(),
                                       require_flatten=include_top, weights=weights)
    first = K.image_data_format() == "channels_first"
    rows, cols = (input_shape[1], input_shape[2]) if first else (input_shape[0], input_shape[1])
    if weights == "imagenet":
        if alpha not in (0.35, 0.50, 0.75, 1.0, 1.3, 1.4):
            raise ValueError(f"If imagenet weights are being loaded, alpha must be one of `0.35`, `0.50`, `0.75`, "
                             f"`1.0`, `1.3` or `1.4` only; Received `alpha={alpha}`")
        if rows != cols or rows not in _SIDES:
            rows = 224
            warnings.warn("`input_shape` is undefined or non-square, or `rows` is not in [96, 128, 160, 192, 224]. "
                          "Weights for input shape (224, 224) will be loaded as the default.", stacklevel=2)
    img_input = U.image_input(input_tensor, input_shape)
    x = L.Conv2D(_make_divisible(32 * alpha, 8), kernel_size=3, strides=(2, 2), padding="same", use_bias=False,
                 name="Conv1")(img_input)
    x = _bn("bn_Conv1")(x)
    x = L.ReLU(6.0, name="Conv1_relu")(x)
    for block_id, (filters, stride, expansion) in enumerate(_BLOCKS):
        x = _inverted_res_block(x, filters=filters, alpha=alpha, stride=stride, expansion=expansion,
                                block_id=block_id)
    last = _make_divisible(1280 * alpha, 8) if alpha > 1.0 else 1280
    x = L.Conv2D(last, kernel_size=1, use_bias=False, name="Conv_1")(x)
    x = _bn("Conv_1_bn")(x)
    x = L.ReLU(6.0, name="out_relu")(x)
    x = U.classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, weights, pool_names=False)
    if name is None:
        name = f"mobilenetv2_{alpha:0.2f}_{rows}"
    file = (f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{float(alpha)}_{rows}"
            f"{'' if include_top else '_no_top'}.h5")
    return U.finish(img_input, x, name, weights, input_tensor, file, _BASE + file)


def preprocess_input(x, data_format=None):
    """To [-1, 1]: x / 127.5 - 1."""
    return U.preprocess_input(x, data_format=data_format, mode="tf")


decode_predictions = U.decode_predictions
