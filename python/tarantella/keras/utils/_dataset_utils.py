"""keras.utils' dataset builders, with Keras's orders and splits: timeseries_dataset_from_array,
text_dataset_from_directory, image_dataset_from_directory, split_dataset. Images and windows are
made when a sample is materialized (a map over indices in the C pipeline: each rank loads only
its share); text elements are str, in a Python dataset."""
import os
import random

import numpy as np

from tarantella import data as tnt_data
from tarantella.keras.utils import _image
from tarantella.keras.utils._arrays import to_categorical

IMAGE_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1, sampling_rate=1,
                                  batch_size=128, shuffle=False, seed=None, start_index=None, end_index=None):
    """Windows data[start + p + k * sampling_rate] for k < sequence_length, p = 0, stride, ...;
    with targets, the window at p has the target targets[start + p]."""
    data = np.asarray(data)
    for name, v in (("sequence_length", sequence_length), ("sequence_stride", sequence_stride),
                    ("sampling_rate", sampling_rate)):
        if int(v) <= 0:
            raise ValueError(f"timeseries_dataset_from_array: {name} must be positive, got {v}")
    start_index = 0 if start_index is None else int(start_index)
    end_index = len(data) if end_index is None else int(end_index)
    if not 0 <= start_index < len(data):
        raise ValueError(f"timeseries_dataset_from_array: start_index must be in [0, {len(data)}), got {start_index}")
    if not start_index < end_index <= len(data):
        raise ValueError(f"timeseries_dataset_from_array: end_index must be in ({start_index}, {len(data)}], got "
                         f"{end_index}")
    num_seqs = end_index - start_index - (sequence_length - 1) * sampling_rate
    if targets is not None:
        targets = np.asarray(targets)
        num_seqs = min(num_seqs, len(targets))
    if num_seqs <= 0:
        raise ValueError(f"timeseries_dataset_from_array: {end_index - start_index} time steps hold no window of "
                         f"{sequence_length} steps at sampling_rate {sampling_rate}")
    starts = np.arange(0, num_seqs, sequence_stride, dtype=np.int64)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(starts)
    offsets = np.arange(sequence_length, dtype=np.int64) * sampling_rate
    window_data = data[start_index:end_index]
    target_data = targets[start_index:end_index] if targets is not None else None
    positions = starts.astype(np.float32)

    if targets is None:
        ds = tnt_data.Dataset.from_tensor_slices(positions).map(lambda p: window_data[int(p) + offsets])
    else:
        ds = tnt_data.Dataset.from_tensor_slices((positions, positions)).map(
            lambda p, _: (window_data[int(p) + offsets], target_data[int(p)]))
    if batch_size is not None:
        if shuffle:
            ds = ds.shuffle(batch_size * 8, seed=seed)
        ds = ds.batch(batch_size)
    return ds


# ---- folders of files, one subfolder per class ----

def _check_split(validation_split, subset, shuffle, seed):
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(f"validation_split must be between 0 and 1, got {validation_split}")
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("if subset is set, validation_split must be set, and inversely")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(f'subset must be "training", "validation" or "both", got {subset!r}')
    if validation_split and shuffle and seed is None:
        raise ValueError("if using validation_split and shuffling the data, you must provide a seed argument, to "
                         "make sure that there is no overlap between the training and validation subset")


def index_directory(directory, labels, formats, class_names=None, shuffle=True, seed=None, follow_links=False):
    """(file paths, labels, class names) as Keras lists them: the class subfolders sorted, the files
    of each sorted by folder then name, then shuffled with RandomState(seed)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no such folder {directory!r}")
    if labels is None:
        subdirs = [""]
        class_names = subdirs
    else:
        subdirs = [d for d in sorted(os.listdir(directory)) if os.path.isdir(os.path.join(directory, d))]
        if not class_names:
            class_names = subdirs
        elif set(class_names) != set(subdirs):
            raise ValueError(f"the class_names passed did not match the names of the subdirectories of the target "
                             f"directory: expected {subdirs}, got {class_names}")
    class_indices = {c: i for i, c in enumerate(class_names)}
    filenames, inferred = [], []
    for sub in subdirs:
        folder = os.path.join(directory, sub)
        dirname = os.path.basename(folder)
        for root, _, files in sorted(os.walk(folder, followlinks=follow_links), key=lambda w: w[0]):
            for fname in sorted(files):
                if fname.lower().endswith(formats):
                    filenames.append(os.path.join(dirname, os.path.relpath(os.path.join(root, fname), folder)))
                    inferred.append(class_indices.get(dirname, 0))
    if labels not in ("inferred", None):
        if len(labels) != len(filenames):
            raise ValueError(f"expected the lengths of labels to match the number of files in the target directory: "
                             f"{len(labels)} labels, {len(filenames)} files")
        class_names = sorted(set(labels))
        labels = np.asarray(labels)
    else:
        labels = np.asarray(inferred, dtype=np.int32)
    paths = [os.path.join(directory, f) for f in filenames]
    print(f"Found {len(paths)} files." if class_names == [""] else
          f"Found {len(paths)} files belonging to {len(class_names)} classes.")
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(paths)
        np.random.RandomState(seed).shuffle(labels)
    return paths, labels, class_names


def _split(paths, labels, validation_split, subset):
    if not validation_split:
        return paths, labels
    n_val = int(validation_split * len(paths))
    if subset == "training":
        print(f"Using {len(paths) - n_val} files for training.")
        return paths[:-n_val], labels[:-n_val]
    print(f"Using {n_val} files for validation.")
    return paths[-n_val:], labels[-n_val:]


def _label(label_mode, num_classes):
    if label_mode == "int":
        return lambda v: np.int32(v)
    if label_mode == "categorical":
        return lambda v: to_categorical(int(v), num_classes)
    if label_mode == "binary":
        return lambda v: np.array([v], dtype=np.float32)
    raise ValueError(f'label_mode must be "int", "categorical", "binary" or None, got {label_mode!r}')


def _from_directory(builder, directory, labels, label_mode, class_names, batch_size, shuffle, seed, validation_split,
                    subset, follow_links, formats, kind):
    if labels not in ("inferred", None) and not isinstance(labels, (list, tuple)):
        raise ValueError(f'labels must be "inferred", None or a list of labels, got {labels!r}')
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    _check_split(validation_split, subset, shuffle, seed)
    if subset == "both":
        return tuple(_from_directory(builder, directory, labels, label_mode, class_names, batch_size, shuffle, seed,
                                     validation_split, s, follow_links, formats, kind)
                     for s in ("training", "validation"))
    paths, label_values, names = index_directory(directory, labels, formats, class_names, shuffle, seed,
                                                 follow_links)
    if label_mode == "binary" and len(names) != 2:
        raise ValueError(f'label_mode="binary" needs exactly 2 classes, found {len(names)}: {names}')
    paths, label_values = _split(paths, label_values, validation_split, subset)
    if not paths:
        raise ValueError(f"No {kind} files found in directory {directory}. Allowed formats: {formats}")
    ds = builder(paths, label_values, label_mode, len(names))
    if batch_size is not None:
        if shuffle:
            ds = ds.shuffle(batch_size * 8, seed=seed)
        ds = ds.batch(batch_size)
    elif shuffle:
        ds = ds.shuffle(1024, seed=seed)
    ds.class_names = names
    ds.file_paths = paths
    return ds


def text_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, batch_size=32,
                                max_length=None, shuffle=True, seed=None, validation_split=None, subset=None,
                                follow_links=False):
    """Elements (text, label): the contents of each .txt file as str (the first max_length
    characters), labels by subfolder."""
    def build(paths, label_values, mode, num_classes):
        def read(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            return text[:max_length] if max_length is not None else text
        if mode is None:
            return tnt_data.Dataset.from_tensor_slices((np.array(paths, dtype=object),)).map(read)
        to_label = _label(mode, num_classes)
        return tnt_data.Dataset.from_tensor_slices((np.array(paths, dtype=object), np.asarray(label_values))).map(
            lambda p, v: (read(p), to_label(v)))
    return _from_directory(build, directory, labels, label_mode, class_names, batch_size, shuffle, seed,
                           validation_split, subset, follow_links, (".txt",), "text")


def _load_image(path, channels, image_size, interpolation, crop_to_aspect_ratio):
    mode = {1: "grayscale", 3: "rgb", 4: "rgba"}[channels]
    img = _image.img_to_array(_image.load_img(path, color_mode=mode), data_format="channels_last")
    if crop_to_aspect_ratio:  # Keras's smart_resize: the largest centred crop of the target's aspect
        h, w = img.shape[:2]
        th, tw = image_size
        crop_h = min(h, int(w * th / tw))
        crop_w = min(w, int(h * tw / th))
        y0, x0 = (h - crop_h) // 2, (w - crop_w) // 2
        img = img[y0:y0 + crop_h, x0:x0 + crop_w]
    if interpolation == "bilinear":
        return _image.resize_bilinear(img, *image_size)
    if interpolation == "nearest":  # tf.image.resize nearest: half-pixel centres, rounded down
        h, w = img.shape[:2]
        ys = np.minimum(np.floor((np.arange(image_size[0]) + 0.5) * h / image_size[0]).astype(int), h - 1)
        xs = np.minimum(np.floor((np.arange(image_size[1]) + 0.5) * w / image_size[1]).astype(int), w - 1)
        return img[ys][:, xs]
    raise NotImplementedError(f"image_dataset_from_directory: interpolation {interpolation!r} is not supported "
                              f"(bilinear, nearest)")


def image_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None,
                                 color_mode="rgb", batch_size=32, image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear", follow_links=False,
                                 crop_to_aspect_ratio=False, **kwargs):
    """Elements (image, label): float32 images (height, width, channels) resized as
    tf.image.resize does, labels by subfolder."""
    channels = {"grayscale": 1, "rgb": 3, "rgba": 4}.get(color_mode)
    if channels is None:
        raise ValueError(f'color_mode must be "rgb", "rgba" or "grayscale", got {color_mode!r}')
    image_size = (int(image_size[0]), int(image_size[1]))

    def build(paths, label_values, mode, num_classes):
        index = np.arange(len(paths), dtype=np.float32)

        def image(i):
            return _load_image(paths[int(i)], channels, image_size, interpolation, crop_to_aspect_ratio)
        if mode is None:
            return tnt_data.Dataset.from_tensor_slices(index).map(image)
        to_label = _label(mode, num_classes)
        return tnt_data.Dataset.from_tensor_slices((index, index)).map(
            lambda i, _: (image(i), to_label(label_values[int(i)])))
    return _from_directory(build, directory, labels, label_mode, class_names, batch_size, shuffle, seed,
                           validation_split, subset, follow_links, IMAGE_FORMATS, "image")


# ---- split_dataset ----

def _split_sizes(left_size, right_size, total):
    for name, v in (("left_size", left_size), ("right_size", right_size)):
        if v is not None and type(v) not in (int, float):
            raise TypeError(f"split_dataset: {name} must be an int or a float, got {type(v).__name__}")
        if isinstance(v, float) and not 0 < v < 1:
            raise ValueError(f"split_dataset: a float {name} must be in (0, 1), got {v}")
        if isinstance(v, int) and not 0 < v < total:
            raise ValueError(f"split_dataset: an int {name} must be in (0, {total}) for {total} samples, got {v}")
    if left_size is None and right_size is None:
        raise ValueError("split_dataset: you must specify either left_size or right_size")
    if isinstance(left_size, float) and isinstance(right_size, float) and left_size + right_size > 1:
        raise ValueError(f"split_dataset: left_size + right_size = {left_size + right_size} is more than 1")
    left = round(left_size * total) if isinstance(left_size, float) else left_size
    right = round(right_size * total) if isinstance(right_size, float) else right_size
    left = total - right if left is None else left
    right = total - left if right is None else right
    if left + right > total:
        raise ValueError(f"split_dataset: {left} + {right} samples is more than the {total} there are")
    if left == 0 or right == 0:
        raise ValueError(f"split_dataset: a split of 0 samples (left {left}, right {right}) for {total} samples")
    return int(left), int(right)


def split_dataset(dataset, left_size=None, right_size=None, shuffle=False, seed=None):
    """Two Datasets: the first left_size samples and the last right_size ones (after a shuffle with
    Python's random seeded by seed, as Keras does)."""
    if isinstance(dataset, tnt_data.Dataset):
        samples = list(dataset)
        as_tuple = isinstance(samples[0], tuple) if samples else False
    elif isinstance(dataset, (tuple, list)) and dataset and not np.isscalar(dataset[0]) and \
            len({len(d) for d in dataset}) == 1 and isinstance(dataset, tuple):
        samples = list(zip(*dataset))
        as_tuple = True
    else:
        samples = list(np.asarray(dataset))
        as_tuple = False
    total = len(samples)
    if total == 0:
        raise ValueError("split_dataset: the dataset is empty")
    left, right = _split_sizes(left_size, right_size, total)
    if shuffle:
        if seed is None:
            seed = random.randint(0, int(1e6))
        random.Random(seed).shuffle(samples)

    def restore(part):
        if as_tuple:
            return tuple(np.stack(c) for c in zip(*part))
        return np.stack(part)
    return (tnt_data.Dataset.from_tensor_slices(restore(samples[:left])),
            tnt_data.Dataset.from_tensor_slices(restore(samples[-right:])))
