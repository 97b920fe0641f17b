"""keras.utils' image helpers on Pillow (Debian's python3-pil): load_img, img_to_array,
array_to_img, save_img; and TensorFlow's bilinear resize (tf.image.resize: half-pixel centres, no
antialiasing), which image_dataset_from_directory uses."""
import os

import numpy as np

_PIL_INTERPOLATION = {"nearest": 0, "bilinear": 2, "bicubic": 3, "hamming": 5, "box": 4, "lanczos": 1}


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("the image helpers need Pillow: apt-get install python3-pil") from None
    return Image


def _data_format(data_format):
    if data_format is None:
        from tarantella.keras import backend
        data_format = backend.image_data_format()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"data_format must be 'channels_first' or 'channels_last', got {data_format!r}")
    return data_format


def load_img(path, grayscale=False, color_mode="rgb", target_size=None, interpolation="nearest",
             keep_aspect_ratio=False):
    """A PIL image of the file, in color_mode 'grayscale', 'rgb' or 'rgba', resized to
    target_size=(height, width) if given."""
    Image = _pil()
    if grayscale:
        color_mode = "grayscale"
    if color_mode not in ("grayscale", "rgb", "rgba"):
        raise ValueError(f"load_img: color_mode must be 'grayscale', 'rgb' or 'rgba', got {color_mode!r}")
    if interpolation not in _PIL_INTERPOLATION:
        raise ValueError(f"load_img: interpolation {interpolation!r} is not one of {sorted(_PIL_INTERPOLATION)}")
    if hasattr(path, "read"):
        img = Image.open(path)
    else:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load_img: no such file {path!r}")
        with open(path, "rb") as f:
            img = Image.open(f)
            img.load()
    mode = {"grayscale": ("L", "I;16", "I"), "rgb": ("RGB",), "rgba": ("RGBA",)}[color_mode]
    if img.mode not in mode:
        img = img.convert(mode[0])
    if target_size is not None:
        width_height = (int(target_size[1]), int(target_size[0]))
        if img.size != width_height:
            resample = _PIL_INTERPOLATION[interpolation]
            if keep_aspect_ratio:  # Keras: crop the centre to the target's aspect ratio first
                w, h = img.size
                tw, th = width_height
                crop_h = min(h, int(round(w * th / tw)))
                crop_w = min(w, int(round(h * tw / th)))
                x0, y0 = (w - crop_w) // 2, (h - crop_h) // 2
                img = img.crop((x0, y0, x0 + crop_w, y0 + crop_h))
            img = img.resize(width_height, resample)
    return img


def img_to_array(img, data_format=None, dtype=None):
    """A float32 (h, w, c) array (channels_first: (c, h, w)) of a PIL image."""
    data_format = _data_format(data_format)
    x = np.asarray(img, dtype=dtype or "float32")
    if x.ndim == 3:
        if data_format == "channels_first":
            x = x.transpose(2, 0, 1)
    elif x.ndim == 2:
        x = x[None] if data_format == "channels_first" else x[..., None]
    else:
        raise ValueError(f"img_to_array: unsupported image shape {x.shape}")
    return x


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """A PIL image of a 3-D array; scale=True maps the values to 0..255 (min to 0, max to 255)."""
    Image = _pil()
    data_format = _data_format(data_format)
    x = np.asarray(x, dtype=dtype or "float32")
    if x.ndim != 3:
        raise ValueError(f"array_to_img: expected an image array of rank 3, got shape {x.shape}")
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        x_max = np.max(x)
        if x_max != 0:
            x = x / x_max
        x = x * 255
    c = x.shape[2]
    if c == 4:
        return Image.fromarray(x.astype("uint8"), "RGBA")
    if c == 3:
        return Image.fromarray(x.astype("uint8"), "RGB")
    if c == 1:
        if np.max(x) > 255:
            return Image.fromarray(x[:, :, 0].astype("int32"), "I")
        return Image.fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"array_to_img: unsupported number of channels {c} (expected 1, 3 or 4)")


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and (file_format == "jpeg" or str(path).lower().endswith((".jpg", ".jpeg"))):
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


def resize_bilinear(image, height, width):
    """tf.image.resize(method='bilinear', antialias=False) of an (h, w, c) array: source
    coordinate (i + 0.5) * in / out - 0.5, clamped, and linear weights."""
    image = np.asarray(image, dtype=np.float32)
    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image.copy()

    def axis(n_in, n_out):
        src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        src = np.clip(src, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo).astype(np.float32)
    y0, y1, fy = axis(h, height)
    x0, x1, fx = axis(w, width)
    top = image[y0][:, x0] * (1 - fx)[None, :, None] + image[y0][:, x1] * fx[None, :, None]
    bottom = image[y1][:, x0] * (1 - fx)[None, :, None] + image[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]
