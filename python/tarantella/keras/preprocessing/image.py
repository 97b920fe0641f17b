"""keras.preprocessing.image: ImageDataGenerator (flow, flow_from_directory, fit, standardize,
random transforms) with Keras's formulas; the affine transform samples as SciPy's
ndimage.affine_transform does (SciPy is not needed), order 0 or 1. Its iterators are Sequences,
which fit takes; their order follows the seed (default: the global seed) and the epoch, the same
on every rank, so a global batch is split exactly. As in Keras, the transform matrix is composed in
(x, y) order and swapped to (row, column), so height_shift_range (tx) shifts along the columns
(Keras's known quirk, keras-team/keras#17398), kept for the same results."""
import os

import numpy as np

from tarantella import _random
from tarantella.keras.utils._arrays import to_categorical
from tarantella.keras.utils._image import load_img, img_to_array, array_to_img, save_img  # noqa: F401
from tarantella.keras.utils._dataset_utils import IMAGE_FORMATS
from tarantella.keras.utils._sequence import Sequence


# ---- transforms ----

def _fold(idx, n, mode):
    """Indices outside 0..n-1 by SciPy's modes: nearest (edge), reflect (d c b a | a b c d),
    wrap (periodic), mirror (d c b | a b c d)."""
    if mode == "nearest" or mode == "constant":
        return np.clip(idx, 0, n - 1)
    if mode == "wrap":
        return np.mod(idx, n)
    if mode == "reflect":
        period = 2 * n
        k = np.mod(idx, period)
        return np.where(k < n, k, period - 1 - k)
    if mode == "mirror":
        if n == 1:
            return np.zeros_like(idx)
        period = 2 * n - 2
        k = np.mod(idx, period)
        return np.where(k < n, k, period - k)
    raise ValueError(f"fill_mode must be 'constant', 'nearest', 'reflect', 'wrap' or 'mirror', got {mode!r}")


def _affine_sample(img, matrix, offset, order, mode, cval):
    """out[i, j] = img at matrix @ (i, j) + offset (one channel), as ndimage.affine_transform."""
    h, w = img.shape
    ii, jj = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    r = matrix[0, 0] * ii + matrix[0, 1] * jj + offset[0]
    c = matrix[1, 0] * ii + matrix[1, 1] * jj + offset[1]
    if order == 0:
        out = img[_fold(np.floor(r + 0.5).astype(np.int64), h, mode), _fold(np.floor(c + 0.5).astype(np.int64), w, mode)]
    elif order == 1:
        r0, c0 = np.floor(r).astype(np.int64), np.floor(c).astype(np.int64)
        fr, fc = r - r0, c - c0
        out = 0
        for dr, wr in ((0, 1 - fr), (1, fr)):
            for dc, wc in ((0, 1 - fc), (1, fc)):
                out = out + wr * wc * img[_fold(r0 + dr, h, mode), _fold(c0 + dc, w, mode)]
    else:
        raise NotImplementedError(f"interpolation_order {order} is not supported (0 or 1)")
    if mode == "constant":  # no interpolation beyond the edges: cval there
        eps = 1e-6
        outside = (r < -eps) | (r > h - 1 + eps) | (c < -eps) | (c > w - 1 + eps)
        out = np.where(outside, cval, out)
    return out


def transform_matrix_offset_center(matrix, x, y):
    o_x, o_y = float(x) / 2 - 0.5, float(y) / 2 - 0.5
    offset = np.array([[1, 0, o_x], [0, 1, o_y], [0, 0, 1]])
    reset = np.array([[1, 0, -o_x], [0, 1, -o_y], [0, 0, 1]])
    return offset @ matrix @ reset


def apply_affine_transform(x, theta=0, tx=0, ty=0, shear=0, zx=1, zy=1, row_axis=1, col_axis=2, channel_axis=0,
                           fill_mode="nearest", cval=0.0, order=1):
    """Rotation theta (degrees), shift (tx rows, ty columns), shear (degrees) and zoom about the
    centre, as Keras composes them."""
    m = None
    if theta != 0:
        t = np.deg2rad(theta)
        m = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    for part, on in ((np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]]), tx != 0 or ty != 0),
                     (np.array([[1, -np.sin(np.deg2rad(shear)), 0], [0, np.cos(np.deg2rad(shear)), 0], [0, 0, 1]]),
                      shear != 0),
                     (np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]), zx != 1 or zy != 1)):
        if on:
            m = part if m is None else m @ part
    if m is None:
        return x
    h, w = x.shape[row_axis], x.shape[col_axis]
    m = transform_matrix_offset_center(m, h, w)
    x = np.rollaxis(x, channel_axis, 0)
    if col_axis > row_axis:  # the matrix is in (x, y) order, arrays in (row, column): M' = PMP
        m[:, [0, 1]] = m[:, [1, 0]]
        m[[0, 1]] = m[[1, 0]]
    out = np.stack([_affine_sample(ch, m[:2, :2], m[:2, 2], order, fill_mode, cval) for ch in x], axis=0)
    return np.rollaxis(out, 0, channel_axis + 1).astype(x.dtype, copy=False)


def apply_channel_shift(x, intensity, channel_axis=0):
    x = np.rollaxis(x, channel_axis, 0)
    lo, hi = np.min(x), np.max(x)
    x = np.stack([np.clip(ch + intensity, lo, hi) for ch in x], axis=0)
    return np.rollaxis(x, 0, channel_axis + 1)


def apply_brightness_shift(x, brightness, scale=True):
    from PIL import ImageEnhance
    x_min, x_max = np.min(x), np.max(x)
    local_scale = (x_min < 0) or (x_max > 255)
    x = array_to_img(x, scale=local_scale or scale)
    x = ImageEnhance.Brightness(x).enhance(brightness)
    x = img_to_array(x)
    if not scale and local_scale:
        x = x / 255 * (x_max - x_min) + x_min
    return x


def flip_axis(x, axis):
    return np.flip(np.asarray(x), axis)


# ---- the generator ----

class ImageDataGenerator:
    def __init__(self, featurewise_center=False, samplewise_center=False, featurewise_std_normalization=False,
                 samplewise_std_normalization=False, zca_whitening=False, zca_epsilon=1e-6, rotation_range=0,
                 width_shift_range=0.0, height_shift_range=0.0, brightness_range=None, shear_range=0.0,
                 zoom_range=0.0, channel_shift_range=0.0, fill_mode="nearest", cval=0.0, horizontal_flip=False,
                 vertical_flip=False, rescale=None, preprocessing_function=None, data_format=None,
                 validation_split=0.0, interpolation_order=1, dtype=None):
        from tarantella.keras import backend
        data_format = data_format or backend.image_data_format()
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
        if fill_mode not in ("constant", "nearest", "reflect", "wrap", "mirror"):
            raise ValueError(f"fill_mode must be 'constant', 'nearest', 'reflect' or 'wrap', got {fill_mode!r}")
        if not 0 <= validation_split < 1:
            raise ValueError(f"validation_split must be in [0, 1), got {validation_split}")
        self.featurewise_center, self.samplewise_center = featurewise_center, samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.zca_whitening, self.zca_epsilon = zca_whitening, zca_epsilon
        self.rotation_range = rotation_range
        self.width_shift_range, self.height_shift_range = width_shift_range, height_shift_range
        self.shear_range, self.channel_shift_range = shear_range, channel_shift_range
        self.fill_mode, self.cval = fill_mode, cval
        self.horizontal_flip, self.vertical_flip = horizontal_flip, vertical_flip
        self.rescale, self.preprocessing_function = rescale, preprocessing_function
        self.dtype = dtype or backend.floatx()
        self.interpolation_order = interpolation_order
        self.data_format = data_format
        self.channel_axis, self.row_axis, self.col_axis = (1, 2, 3) if data_format == "channels_first" else (3, 1, 2)
        self._validation_split = validation_split
        self.mean = self.std = self.zca_whitening_matrix = None
        if np.isscalar(zoom_range):
            self.zoom_range = [1 - zoom_range, 1 + zoom_range]
        elif len(zoom_range) == 2:
            self.zoom_range = [zoom_range[0], zoom_range[1]]
        else:
            raise ValueError(f"zoom_range should be a float or a tuple or list of two floats, got {zoom_range!r}")
        if brightness_range is not None and (np.isscalar(brightness_range) or len(brightness_range) != 2):
            raise ValueError(f"brightness_range should be a tuple or list of two floats, got {brightness_range!r}")
        self.brightness_range = brightness_range
        if zca_whitening and not featurewise_center:
            self.featurewise_center = True  # Keras: zca_whitening implies featurewise_center
        if featurewise_std_normalization and not featurewise_center:
            self.featurewise_center = True

    def flow(self, x, y=None, batch_size=32, shuffle=True, sample_weight=None, seed=None, save_to_dir=None,
             save_prefix="", save_format="png", ignore_class_split=False, subset=None):
        return NumpyArrayIterator(x, y, self, batch_size=batch_size, shuffle=shuffle, sample_weight=sample_weight,
                                  seed=seed, data_format=self.data_format, subset=subset,
                                  ignore_class_split=ignore_class_split, dtype=self.dtype)

    def flow_from_directory(self, directory, target_size=(256, 256), color_mode="rgb", classes=None,
                            class_mode="categorical", batch_size=32, shuffle=True, seed=None, save_to_dir=None,
                            save_prefix="", save_format="png", follow_links=False, subset=None,
                            interpolation="nearest", keep_aspect_ratio=False):
        return DirectoryIterator(directory, self, target_size=target_size, color_mode=color_mode, classes=classes,
                                 class_mode=class_mode, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                 follow_links=follow_links, subset=subset, interpolation=interpolation,
                                 keep_aspect_ratio=keep_aspect_ratio)

    def standardize(self, x):
        """preprocessing_function, rescale, sample-wise then feature-wise centring and scaling, ZCA."""
        if self.preprocessing_function:
            x = self.preprocessing_function(x)
        if self.rescale:
            x = x * self.rescale
        if self.samplewise_center:
            x = x - np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x = x / (np.std(x, keepdims=True) + 1e-6)
        if self.featurewise_center and self.mean is not None:
            x = x - self.mean
        if self.featurewise_std_normalization and self.std is not None:
            x = x / (self.std + 1e-6)
        if self.zca_whitening and self.zca_whitening_matrix is not None:
            flat = x.reshape(-1, int(np.prod(x.shape[-3:])))
            x = (flat @ self.zca_whitening_matrix).reshape(x.shape)
        return x

    def get_random_transform(self, img_shape, seed=None):
        row, col = self.row_axis - 1, self.col_axis - 1
        if seed is not None:
            np.random.seed(seed)

        def shift(rng_range, size):
            if not rng_range:
                return 0
            try:  # an int or a list: a choice of whole pixels, either way
                t = np.random.choice(rng_range)
                t *= np.random.choice([-1, 1])
            except ValueError:  # a float: a fraction of the size
                t = np.random.uniform(-rng_range, rng_range)
            if np.max(rng_range) < 1:
                t *= size
            return t
        theta = np.random.uniform(-self.rotation_range, self.rotation_range) if self.rotation_range else 0
        tx = shift(self.height_shift_range, img_shape[row])
        ty = shift(self.width_shift_range, img_shape[col])
        shear = np.random.uniform(-self.shear_range, self.shear_range) if self.shear_range else 0
        if self.zoom_range[0] == 1 and self.zoom_range[1] == 1:
            zx, zy = 1, 1
        else:
            zx, zy = np.random.uniform(self.zoom_range[0], self.zoom_range[1], 2)
        flip_h = (np.random.random() < 0.5) * self.horizontal_flip
        flip_v = (np.random.random() < 0.5) * self.vertical_flip
        channel_shift = None
        if self.channel_shift_range != 0:
            channel_shift = np.random.uniform(-self.channel_shift_range, self.channel_shift_range)
        brightness = None
        if self.brightness_range is not None:
            brightness = np.random.uniform(self.brightness_range[0], self.brightness_range[1])
        return {"theta": theta, "tx": tx, "ty": ty, "shear": shear, "zx": zx, "zy": zy, "flip_horizontal": flip_h,
                "flip_vertical": flip_v, "channel_shift_intensity": channel_shift, "brightness": brightness}

    def apply_transform(self, x, transform_parameters):
        p = transform_parameters
        row, col, ch = self.row_axis - 1, self.col_axis - 1, self.channel_axis - 1
        x = apply_affine_transform(x, p.get("theta", 0), p.get("tx", 0), p.get("ty", 0), p.get("shear", 0),
                                   p.get("zx", 1), p.get("zy", 1), row_axis=row, col_axis=col, channel_axis=ch,
                                   fill_mode=self.fill_mode, cval=self.cval, order=self.interpolation_order)
        if p.get("channel_shift_intensity") is not None:
            x = apply_channel_shift(x, p["channel_shift_intensity"], ch)
        if p.get("flip_horizontal", False):
            x = flip_axis(x, col)
        if p.get("flip_vertical", False):
            x = flip_axis(x, row)
        if p.get("brightness") is not None:
            x = apply_brightness_shift(x, p["brightness"], False)
        return x

    def random_transform(self, x, seed=None):
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def fit(self, x, augment=False, rounds=1, seed=None):
        """The feature-wise mean, std and ZCA matrix of x (after rescale), per channel."""
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 4:
            raise ValueError(f"ImageDataGenerator.fit: expected a rank-4 array of images, got shape {x.shape}")
        if seed is not None:
            np.random.seed(seed)
        x = np.copy(x)
        if self.rescale:
            x *= self.rescale
        if augment:
            ax = np.zeros((rounds * x.shape[0],) + x.shape[1:], dtype=self.dtype)
            for r in range(rounds):
                for i in range(x.shape[0]):
                    ax[i + r * x.shape[0]] = self.random_transform(x[i])
            x = ax
        shape = [1, 1, 1]
        shape[self.channel_axis - 1] = x.shape[self.channel_axis]
        if self.featurewise_center:
            self.mean = np.mean(x, axis=(0, self.row_axis, self.col_axis)).reshape(shape)
            x -= self.mean
        if self.featurewise_std_normalization:
            self.std = np.std(x, axis=(0, self.row_axis, self.col_axis)).reshape(shape)
            x /= self.std + 1e-6
        if self.zca_whitening:
            flat = x.reshape(x.shape[0], -1)
            u, s, _ = np.linalg.svd(flat.T @ flat / flat.shape[0])
            self.zca_whitening_matrix = (u * (1.0 / np.sqrt(s[np.newaxis] + self.zca_epsilon))) @ u.T


class Iterator(Sequence):
    """Batches of transformed samples; the order is a permutation by seed and epoch (shuffle)."""

    def __init__(self, n, batch_size, shuffle, seed):
        super().__init__()
        self.n, self.batch_size, self.shuffle, self.seed = int(n), int(batch_size), shuffle, seed
        self.batch_index = 0
        self.total_batches_seen = 0
        self.epoch = 0
        self.index_array = None

    def _set_index_array(self):
        self.index_array = np.arange(self.n)
        if self.shuffle:
            seed = self.seed if self.seed is not None else (_random.global_seed() or 0)
            self.index_array = np.random.RandomState((int(seed) + 1000003 * self.epoch) % (2 ** 32)).permutation(self.n)

    def __len__(self):
        return (self.n + self.batch_size - 1) // self.batch_size

    def __getitem__(self, idx):
        if idx >= len(self):
            raise ValueError(f"Asked to retrieve element {idx}, but the Sequence has length {len(self)}")
        if self.index_array is None:
            self._set_index_array()
        return self._get_batches_of_transformed_samples(
            self.index_array[self.batch_size * idx:self.batch_size * (idx + 1)])

    def on_epoch_end(self):
        self.epoch += 1
        self._set_index_array()

    def reset(self):
        self.batch_index = 0

    def __iter__(self):
        return self

    def __next__(self):
        """Keras's endless iteration: batch after batch, a new order after the last one."""
        if self.batch_index >= len(self):
            self.batch_index = 0
            self.on_epoch_end()
        batch = self[self.batch_index]
        self.batch_index += 1
        self.total_batches_seen += 1
        return batch

    next = __next__

    def _transform(self, x):
        g = self.image_data_generator
        params = g.get_random_transform(x.shape)
        return g.standardize(g.apply_transform(x.astype(self.dtype), params))


class NumpyArrayIterator(Iterator):
    def __init__(self, x, y, image_data_generator, batch_size=32, shuffle=False, sample_weight=None, seed=None,
                 data_format=None, save_to_dir=None, save_prefix="", save_format="png", subset=None,
                 ignore_class_split=False, dtype=None):
        self.dtype = dtype or "float32"
        x_misc = None
        if isinstance(x, (tuple, list)):
            x, x_misc = x[0], [np.asarray(v) for v in x[1:]]
            if x_misc:
                raise NotImplementedError("flow: extra inputs besides the images are not supported")
        if y is not None and len(x) != len(y):
            raise ValueError(f"flow: x (images tensor) and y (labels) should have the same length, got "
                             f"{len(x)} and {len(y)}")
        if sample_weight is not None:
            raise NotImplementedError("flow: sample_weight is not supported")
        if subset is not None:
            if subset not in ("training", "validation"):
                raise ValueError(f'subset must be "training" or "validation", got {subset!r}')
            split = int(len(x) * image_data_generator._validation_split)
            if y is not None and not ignore_class_split and not np.array_equal(
                    np.unique(np.asarray(y)[:split]), np.unique(np.asarray(y)[split:])):
                raise ValueError("Training and validation subsets have different number of classes after the "
                                 "split. If your numpy arrays are sorted by the label, you might want to shuffle "
                                 "them.")
            sl = slice(None, split) if subset == "validation" else slice(split, None)
            x = x[sl]
            y = y[sl] if y is not None else None
        self.x = np.asarray(x, dtype=self.dtype)
        if self.x.ndim != 4:
            raise ValueError(f"flow: input data should have rank 4, got shape {self.x.shape}")
        self.y = np.asarray(y) if y is not None else None
        self.image_data_generator = image_data_generator
        super().__init__(self.x.shape[0], batch_size, shuffle, seed)

    def _get_batches_of_transformed_samples(self, index_array):
        batch_x = np.zeros((len(index_array),) + self.x.shape[1:], dtype=self.dtype)
        for i, j in enumerate(index_array):
            batch_x[i] = self._transform(self.x[j])
        return batch_x if self.y is None else (batch_x, self.y[index_array])


class DirectoryIterator(Iterator):
    def __init__(self, directory, image_data_generator, target_size=(256, 256), color_mode="rgb", classes=None,
                 class_mode="categorical", batch_size=32, shuffle=True, seed=None, data_format=None,
                 save_to_dir=None, save_prefix="", save_format="png", follow_links=False, subset=None,
                 interpolation="nearest", keep_aspect_ratio=False, dtype=None):
        if class_mode not in ("categorical", "binary", "sparse", "input", None):
            raise ValueError(f'class_mode must be "categorical", "binary", "sparse", "input" or None, got '
                             f'{class_mode!r}')
        if color_mode not in ("rgb", "rgba", "grayscale"):
            raise ValueError(f'color_mode must be "rgb", "rgba" or "grayscale", got {color_mode!r}')
        self.dtype = dtype or image_data_generator.dtype
        self.image_data_generator = image_data_generator
        self.directory, self.target_size = os.fspath(directory), tuple(target_size)
        self.color_mode, self.class_mode = color_mode, class_mode
        self.interpolation, self.keep_aspect_ratio = interpolation, keep_aspect_ratio
        channels = {"rgb": 3, "rgba": 4, "grayscale": 1}[color_mode]
        self.image_shape = self.target_size + (channels,) if image_data_generator.data_format == "channels_last" \
            else (channels,) + self.target_size
        split = None
        if subset is not None:
            v = image_data_generator._validation_split
            split = {"validation": (0, v), "training": (v, 1)}.get(subset)
            if split is None:
                raise ValueError(f'subset must be "training" or "validation", got {subset!r}')
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(f"flow_from_directory: no such folder {self.directory!r}")
        if not classes:
            classes = sorted(d for d in os.listdir(self.directory) if os.path.isdir(os.path.join(self.directory, d)))
        self.num_classes = len(classes)
        self.class_indices = dict(zip(classes, range(len(classes))))
        self.filenames, labels = [], []
        for c in classes:
            folder = os.path.join(self.directory, c)
            files = [os.path.relpath(os.path.join(root, f), self.directory)
                     for root, _, names in sorted(os.walk(folder, followlinks=follow_links), key=lambda w: w[0])
                     for f in sorted(names) if f.lower().endswith(IMAGE_FORMATS)]
            if split is not None:
                files = files[int(split[0] * len(files)):int(split[1] * len(files))]
            self.filenames += files
            labels += [self.class_indices[c]] * len(files)
        self.classes = np.array(labels, dtype="int32")
        self.samples = len(self.filenames)
        self.filepaths = [os.path.join(self.directory, f) for f in self.filenames]
        print(f"Found {self.samples} images belonging to {self.num_classes} classes.")
        super().__init__(self.samples, batch_size, shuffle, seed)

    def _get_batches_of_transformed_samples(self, index_array):
        batch_x = np.zeros((len(index_array),) + self.image_shape, dtype=self.dtype)
        for i, j in enumerate(index_array):
            img = load_img(self.filepaths[j], color_mode=self.color_mode, target_size=self.target_size,
                           interpolation=self.interpolation, keep_aspect_ratio=self.keep_aspect_ratio)
            batch_x[i] = self._transform(img_to_array(img, data_format=self.image_data_generator.data_format))
        if self.class_mode == "input":
            return batch_x, batch_x.copy()
        if self.class_mode is None:
            return batch_x
        y = self.classes[index_array]
        if self.class_mode == "binary":
            return batch_x, y.astype(self.dtype)
        if self.class_mode == "sparse":
            return batch_x, y.astype(self.dtype)
        return batch_x, to_categorical(y, self.num_classes, dtype=self.dtype)
