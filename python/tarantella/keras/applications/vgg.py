"""keras.applications.vgg16 and vgg19: VGG16 and VGG19 with Keras's layer names."""
from tarantella.keras import backend as K
from tarantella.keras import layers as L
from tarantella.keras.applications import imagenet_utils as U

_BASE = "https://storage.googleapis.com/tensorflow/keras-applications/"


def VGG(convs, model_name, include_top=True, weights="imagenet", input_tensor=None, input_shape=None,
        pooling=None, classes=1000, classifier_activation="softmax", name=None):
    """VGG with convs[i] 3x3 convolutions in block i+1 (64, 128, 256, 512, 512 filters), each block
    ending in 2x2 max pooling; the top: Flatten, two Dense(4096) and the classifier."""
    U.check_weights(weights, include_top, classes)
    input_shape = U.obtain_input_shape(input_shape, default_size=224, min_size=32,
                                       data_format=K.image_data_format(), require_flatten=include_top,
                                       weights=weights)
    img_input = U.image_input(input_tensor, input_shape)
    x = img_input
    for block, (filters, n) in enumerate(zip((64, 128, 256, 512, 512), convs), start=1):
        for i in range(1, n + 1):
            x = L.Conv2D(filters, (3, 3), activation="relu", padding="same", name=f"block{block}_conv{i}")(x)
        x = L.MaxPooling2D((2, 2), strides=(2, 2), name=f"block{block}_pool")(x)
    if include_top:
        U.validate_activation(classifier_activation, weights)
        x = L.Flatten(name="flatten")(x)
        x = L.Dense(4096, activation="relu", name="fc1")(x)
        x = L.Dense(4096, activation="relu", name="fc2")(x)
        x = L.Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = U.classifier_or_pooling(x, False, pooling, classes, classifier_activation, weights, pool_names=False)
    suffix = "" if include_top else "_notop"
    folder = model_name
    return U.finish(img_input, x, name or model_name, weights, input_tensor,
                    f"{model_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5",
                    f"{_BASE}{folder}/{model_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5")


def VGG16(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
          classifier_activation="softmax", name="vgg16"):
    """Keras's VGG16 (138,357,544 parameters with the 1000-class top)."""
    return VGG((2, 2, 3, 3, 3), "vgg16", include_top, weights, input_tensor, input_shape, pooling, classes,
               classifier_activation, name)


def VGG19(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
          classifier_activation="softmax", name="vgg19"):
    """Keras's VGG19 (143,667,240 parameters with the 1000-class top)."""
    return VGG((2, 2, 4, 4, 4), "vgg19", include_top, weights, input_tensor, input_shape, pooling, classes,
               classifier_activation, name)


def preprocess_input(x, data_format=None):
    """Caffe's: RGB to BGR, ImageNet's mean subtracted (no scaling)."""
    return U.preprocess_input(x, data_format=data_format, mode="caffe")


decode_predictions = U.decode_predictions
