"""CIFAR's pickled batches (Keras's cifar-10-batches-py and cifar-100-python folders)."""
import os
import pickle

import numpy as np


def load_batch(fpath, label_key="labels"):
    if not os.path.isfile(fpath):
        raise FileNotFoundError(f"CIFAR: {fpath} is missing from the extracted folder")
    with open(fpath, "rb") as f:
        d = pickle.load(f, encoding="bytes")
    d = {(k.decode("utf8") if isinstance(k, bytes) else k): v for k, v in d.items()}
    data = d["data"]
    return data.reshape(data.shape[0], 3, 32, 32), d[label_key]


def channels(x):
    from tarantella.keras import backend
    return x.transpose(0, 2, 3, 1) if backend.image_data_format() == "channels_last" else x
