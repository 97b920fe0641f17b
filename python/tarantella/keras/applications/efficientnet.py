"""keras.applications.efficientnet: EfficientNetB0..B7 with Keras's layer names (the stem's
Rescaling and Normalization, MBConv blocks with squeeze-and-excitation, swish)."""
import copy
import math

from tarantella.keras import backend as K
from tarantella.keras import layers as L
from tarantella.keras.applications import imagenet_utils as U

_BASE = "https://storage.googleapis.com/keras-applications/"
_STDDEV_RGB = (0.229, 0.224, 0.225)

# kernel, repeats, filters in, filters out, expansion, stride of the seven stages (B0)
_BLOCKS = [(3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
           (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1)]
_CONV_INIT = {"class_name": "VarianceScaling",
              "config": {"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal"}}
_DENSE_INIT = {"class_name": "VarianceScaling", "config": {"scale": 1.0 / 3.0, "mode": "fan_out",
                                                          "distribution": "uniform"}}


def _block(inputs, drop_rate, name, filters_in, filters_out, kernel_size, strides, expand_ratio, se_ratio=0.25):
    """MBConv: 1x1 expansion, depthwise convolution, squeeze-and-excitation, 1x1 projection, and
    the residual (with drop connect) when the shape allows."""
    axis = U.bn_axis()
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = L.Conv2D(filters, 1, padding="same", use_bias=False, kernel_initializer=_CONV_INIT,
                     name=f"{name}expand_conv")(x)
        x = L.BatchNormalization(axis=axis, name=f"{name}expand_bn")(x)
        x = L.Activation("swish", name=f"{name}expand_activation")(x)
    if strides == 2:
        x = L.ZeroPadding2D(padding=U.correct_pad(x, kernel_size), name=f"{name}dwconv_pad")(x)
    x = L.DepthwiseConv2D(kernel_size, strides=strides, padding="valid" if strides == 2 else "same", use_bias=False,
                          depthwise_initializer=_CONV_INIT, name=f"{name}dwconv")(x)
    x = L.BatchNormalization(axis=axis, name=f"{name}bn")(x)
    x = L.Activation("swish", name=f"{name}activation")(x)
    filters_se = max(1, int(filters_in * se_ratio))
    se = L.GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se = L.Reshape((filters, 1, 1) if axis == 1 else (1, 1, filters), name=f"{name}se_reshape")(se)
    se = L.Conv2D(filters_se, 1, padding="same", activation="swish", kernel_initializer=_CONV_INIT,
                  name=f"{name}se_reduce")(se)
    se = L.Conv2D(filters, 1, padding="same", activation="sigmoid", kernel_initializer=_CONV_INIT,
                  name=f"{name}se_expand")(se)
    x = L.multiply([x, se], name=f"{name}se_excite")
    x = L.Conv2D(filters_out, 1, padding="same", use_bias=False, kernel_initializer=_CONV_INIT,
                 name=f"{name}project_conv")(x)
    x = L.BatchNormalization(axis=axis, name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = L.Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = L.add([x, inputs], name=f"{name}add")
    return x


def EfficientNet(width, depth, default_size, dropout_rate, model_name, include_top=True, weights="imagenet",
                 input_tensor=None, input_shape=None, pooling=None, classes=1000, classifier_activation="softmax",
                 name=None, drop_connect_rate=0.2, depth_divisor=8):
    U.check_weights(weights, include_top, classes)
    input_shape = U.obtain_input_shape(input_shape, default_size=default_size, min_size=32,
                                       data_format=K.image_data_format(), require_flatten=include_top,
                                       weights=weights)
    img_input = U.image_input(input_tensor, input_shape)
    axis = U.bn_axis()

    def round_filters(filters):
        filters *= width
        new = max(depth_divisor, int(filters + depth_divisor / 2) // depth_divisor * depth_divisor)
        return int(new + depth_divisor if new < 0.9 * filters else new)

    def round_repeats(repeats):
        return int(math.ceil(depth * repeats))

    x = L.Rescaling(1.0 / 255.0)(img_input)
    x = L.Normalization(axis=axis)(x)
    if weights == "imagenet":  # the weights were trained on inputs divided by the std, not its square root
        x = L.Rescaling([1.0 / math.sqrt(s) for s in _STDDEV_RGB])(x)
    x = L.ZeroPadding2D(padding=U.correct_pad(x, 3), name="stem_conv_pad")(x)
    x = L.Conv2D(round_filters(32), 3, strides=2, padding="valid", use_bias=False, kernel_initializer=_CONV_INIT,
                 name="stem_conv")(x)
    x = L.BatchNormalization(axis=axis, name="stem_bn")(x)
    x = L.Activation("swish", name="stem_activation")(x)
    stages = copy.deepcopy(_BLOCKS)
    total = float(sum(round_repeats(s[1]) for s in stages))
    b = 0
    for i, (kernel, repeats, f_in, f_out, expand, stride) in enumerate(stages):
        f_in, f_out = round_filters(f_in), round_filters(f_out)
        for j in range(round_repeats(repeats)):
            x = _block(x, drop_connect_rate * b / total, f"block{i + 1}{chr(j + 97)}_", f_in if j == 0 else f_out,
                       f_out, kernel, stride if j == 0 else 1, expand)
            b += 1
    x = L.Conv2D(round_filters(1280), 1, padding="same", use_bias=False, kernel_initializer=_CONV_INIT,
                 name="top_conv")(x)
    x = L.BatchNormalization(axis=axis, name="top_bn")(x)
    x = L.Activation("swish", name="top_activation")(x)
    if include_top:
        U.validate_activation(classifier_activation, weights)
        x = L.GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = L.Dropout(dropout_rate, name="top_dropout")(x)
        x = L.Dense(classes, activation=classifier_activation, kernel_initializer=_DENSE_INIT,
                    name="predictions")(x)
    else:
        x = U.classifier_or_pooling(x, False, pooling, classes, classifier_activation, weights)
    file = f"{model_name}{'' if include_top else '_notop'}.h5"
    return U.finish(img_input, x, name or model_name, weights, input_tensor, file, _BASE + file)


# width, depth, default input side, dropout of B0..B7 (Keras's)
_VARIANTS = {0: (1.0, 1.0, 224, 0.2), 1: (1.0, 1.1, 240, 0.2), 2: (1.1, 1.2, 260, 0.3), 3: (1.2, 1.4, 300, 0.3),
             4: (1.4, 1.8, 380, 0.4), 5: (1.6, 2.2, 456, 0.4), 6: (1.8, 2.6, 528, 0.5), 7: (2.0, 3.1, 600, 0.5)}


def _variant(k):
    def make(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name=f"efficientnetb{k}"):
        return EfficientNet(*_VARIANTS[k], f"efficientnetb{k}", include_top, weights, input_tensor, input_shape,
                            pooling, classes, classifier_activation, name)
    make.__name__ = make.__qualname__ = f"EfficientNetB{k}"
    make.__doc__ = f"Keras's EfficientNetB{k}" + (" (5,330,571 weights with the 1000-class top)" if k == 0 else "")
    return make


EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3 = (_variant(k) for k in range(4))
EfficientNetB4, EfficientNetB5, EfficientNetB6, EfficientNetB7 = (_variant(k) for k in range(4, 8))


def preprocess_input(x, data_format=None):
    """The identity: EfficientNet rescales and normalizes inside the model (Keras's)."""
    return x


decode_predictions = U.decode_predictions
