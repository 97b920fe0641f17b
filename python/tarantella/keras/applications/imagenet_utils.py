"""keras.applications.imagenet_utils: what the architectures share (input shape rules, the ImageNet
weights in Keras's cache folder, preprocess_input's three modes, decode_predictions)."""
import json
import os

import numpy as np

from tarantella.keras import backend as K
from tarantella.keras import layers as L

_CLASS_INDEX = None


def obtain_input_shape(input_shape, default_size, min_size, data_format, require_flatten, weights=None):
    """Keras's rule for an architecture's input shape: the default (default_size square, 3
    channels) when none is given and a classifier follows (require_flatten), else the user's
    shape checked against min_size, with None sides allowed without the classifier."""
    first = data_format == "channels_first"
    if weights != "imagenet" and input_shape and len(input_shape) == 3:
        ch = input_shape[0] if first else input_shape[-1]
        default = (ch, default_size, default_size) if first else (default_size, default_size, ch)
    else:
        default = (3, default_size, default_size) if first else (default_size, default_size, 3)
    if weights == "imagenet" and require_flatten:
        if input_shape is not None and tuple(input_shape) != default:
            raise ValueError(f"When setting `include_top=True` and loading `imagenet` weights, `input_shape` "
                             f"should be {default}.  Received: input_shape={tuple(input_shape)}")
        return default
    if input_shape:
        input_shape = tuple(input_shape)
        if len(input_shape) != 3:
            raise ValueError(f"`input_shape` must be a tuple of three integers; received {input_shape}")
        ch = input_shape[0] if first else input_shape[-1]
        sides = input_shape[1:] if first else input_shape[:2]
        if ch != 3 and weights == "imagenet":
            raise ValueError(f"The input must have 3 channels; Received `input_shape={input_shape}`")
        if any(s is not None and s < min_size for s in sides):
            raise ValueError(f"Input size must be at least {min_size}x{min_size}; Received: "
                             f"input_shape={input_shape}")
    elif require_flatten:
        input_shape = default
    else:
        input_shape = (3, None, None) if first else (None, None, 3)
    if require_flatten and None in input_shape:
        raise ValueError(f"If `include_top` is True, you should specify a static `input_shape`. Received: "
                         f"input_shape={input_shape}")
    return input_shape


def check_weights(weights, include_top, classes):
    """The checks every architecture makes of weights and classes."""
    if not (weights in ("imagenet", None) or os.path.exists(str(weights))):
        raise ValueError(f"The `weights` argument should be either `None` (random initialization), 'imagenet' "
                         f"(pre-training on ImageNet), or the path to the weights file to be loaded.  Received: "
                         f"weights={weights}")
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(f"If using `weights='imagenet'` with `include_top=True`, `classes` should be 1000.  "
                         f"Received classes={classes}")


def validate_activation(classifier_activation, weights):
    """With ImageNet weights the classifier is a softmax (or logits), as Keras requires."""
    if weights is None:
        return
    name = getattr(classifier_activation, "__name__", classifier_activation)
    if name not in ("softmax", None):
        raise ValueError(f"Only `None` and `softmax` activations are allowed for the `classifier_activation` "
                         f"argument when using pretrained weights, with `include_top=True`; Received: "
                         f"classifier_activation={classifier_activation}")


def image_input(input_tensor, input_shape):
    """The model's input: a new Input of input_shape, or the given symbolic tensor."""
    if input_tensor is None:
        return L.Input(shape=input_shape)
    if not isinstance(input_tensor, L.KerasTensor):
        raise TypeError(f"input_tensor: expected a symbolic tensor (keras.Input or a layer's output), got "
                        f"{type(input_tensor).__name__}")
    return input_tensor


def source_inputs(tensor):
    """The Inputs a tensor depends on (Keras's get_source_inputs), in the order first reached."""
    from tarantella.keras.functional import _walk
    _, inputs = _walk([tensor])
    seen, out = set(), []
    for t in reversed(inputs):
        if id(t._layer) not in seen:
            seen.add(id(t._layer))
            out.append(t)
    return out[0] if len(out) == 1 else out


def classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, weights, pool_names=True):
    """The end every architecture shares: global average pooling and the "predictions" Dense, or
    the pooling asked for (pool_names: Keras names these layers avg_pool/max_pool)."""
    if include_top:
        validate_activation(classifier_activation, weights)
        x = L.GlobalAveragePooling2D(**({"name": "avg_pool"} if pool_names else {}))(x)
        return L.Dense(classes, activation=classifier_activation, name="predictions")(x)
    if pooling == "avg":
        return L.GlobalAveragePooling2D(**({"name": "avg_pool"} if pool_names else {}))(x)
    if pooling == "max":
        return L.GlobalMaxPooling2D(**({"name": "max_pool"} if pool_names else {}))(x)
    return x


def finish(inputs, x, name, weights, input_tensor, weights_file, origin):
    """The Functional model, with the ImageNet weights from Keras's cache folder (models/) or the
    weights file given."""
    from tarantella.keras.engine import Model
    if input_tensor is not None:
        inputs = source_inputs(input_tensor)
    model = Model(inputs, x, name=name)
    if weights == "imagenet":
        from tarantella.keras.utils import get_file
        model.load_weights(get_file(weights_file, origin, cache_subdir="models"))
    elif weights is not None:
        model.load_weights(weights)
    return model


# ---- preprocess_input ----

_CAFFE_MEAN = (103.939, 116.779, 123.68)  # BGR
_TORCH_MEAN, _TORCH_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def preprocess_input(x, data_format=None, mode="caffe"):
    """Keras's three preprocessings of images in [0, 255]: "tf" to [-1, 1]; "torch" to [0, 1] then
    each channel normalized by ImageNet's mean and std; "caffe" RGB to BGR, then ImageNet's BGR mean
    subtracted. An array (3D or 4D, float arrays changed in place as Keras does) or a symbolic tensor."""
    if mode not in ("caffe", "tf", "torch"):
        raise ValueError(f"Expected mode to be one of `caffe`, `tf` or `torch`. Received: mode={mode}")
    data_format = data_format or K.image_data_format()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"Expected data_format to be 'channels_first' or 'channels_last'. Received: {data_format}")
    if isinstance(x, L.KerasTensor):
        return _preprocess_tensor(x, data_format, mode)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float32)
    if mode == "tf":
        x /= 127.5
        x -= 1.0
        return x
    axis = (0 if x.ndim == 3 else 1) if data_format == "channels_first" else x.ndim - 1
    shape = [1] * x.ndim
    shape[axis] = 3
    if mode == "torch":
        x /= 255.0
        x -= np.reshape(_TORCH_MEAN, shape).astype(x.dtype)
        x /= np.reshape(_TORCH_STD, shape).astype(x.dtype)
        return x
    x = np.flip(x, axis=axis)
    return x - np.reshape(_CAFFE_MEAN, shape).astype(x.dtype)


def _preprocess_tensor(x, data_format, mode):
    from tarantella.keras import ops
    if mode == "tf":
        return x / 127.5 - 1.0
    ndim = len(x.shape)
    axis = 1 if data_format == "channels_first" else ndim - 1
    shape = [1] * (ndim - 1)
    shape[axis - 1] = 3  # the constants have no batch axis; they broadcast over it
    if mode == "torch":
        mean = np.reshape(np.array(_TORCH_MEAN, np.float32), shape)
        std = np.reshape(np.array(_TORCH_STD, np.float32), shape)
        return (x / 255.0 - mean) / std
    index = [slice(None)] * ndim
    channels = []
    for c in (2, 1, 0):
        index[axis] = slice(c, c + 1)
        channels.append(x[tuple(index)])
    bgr = ops.concatenate(channels, axis=axis)
    return bgr - np.reshape(np.array(_CAFFE_MEAN, np.float32), shape)


def decode_predictions(preds, top=5):
    """The top classes of each ImageNet prediction as (class_name, description, score), from
    imagenet_class_index.json in Keras's cache folder (models/)."""
    global _CLASS_INDEX
    preds = np.asarray(preds.numpy() if hasattr(preds, "numpy") else preds)
    if preds.ndim != 2 or preds.shape[1] != 1000:
        raise ValueError(f"`decode_predictions` expects a batch of predictions (i.e. a 2D array of shape (samples, "
                         f"1000)). Received array with shape: {preds.shape}")
    if _CLASS_INDEX is None:
        from tarantella.keras.utils import get_file
        path = get_file("imagenet_class_index.json",
                        "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json",
                        cache_subdir="models")
        with open(path) as f:
            _CLASS_INDEX = json.load(f)
    results = []
    for pred in preds:
        best = pred.argsort()[-top:][::-1]
        results.append(sorted((tuple(_CLASS_INDEX[str(i)]) + (pred[i],) for i in best), key=lambda r: r[2],
                              reverse=True))
    return results


def correct_pad(inputs, kernel_size):
    """The ZeroPadding2D before a stride-2 'valid' convolution that matches TensorFlow's 'same'."""
    first = K.image_data_format() == "channels_first"
    sides = inputs.shape[2:4] if first else inputs.shape[1:3]
    k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    adjust = (1, 1) if sides[0] is None else (1 - sides[0] % 2, 1 - sides[1] % 2)
    return ((k[0] // 2 - adjust[0], k[0] // 2), (k[1] // 2 - adjust[1], k[1] // 2))


def bn_axis():
    return 1 if K.image_data_format() == "channels_first" else 3
