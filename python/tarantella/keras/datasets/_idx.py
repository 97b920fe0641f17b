"""IDX files (MNIST's format), plain or gzip-compressed, as NumPy arrays."""
import gzip
import os

import numpy as np

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, dtype=_DTYPES[raw[2]], offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} values, the header says {tuple(dims)}")
    return data.reshape(tuple(dims)).astype(np.dtype(_DTYPES[raw[2]]).newbyteorder("="))


def load(dirs, package, name):
    """((x_train, y_train), (x_test, y_test)) from the first folder of dirs holding the files."""
    files = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")
    for d in dirs:
        if d and all(os.path.exists(os.path.join(d, f + ".gz")) or os.path.exists(os.path.join(d, f))
                     for f in files):
            paths = [os.path.join(d, f + ".gz") if os.path.exists(os.path.join(d, f + ".gz"))
                     else os.path.join(d, f) for f in files]
            xtr, ytr, xte, yte = (read_idx(p) for p in paths)
            return (xtr, ytr), (xte, yte)
    raise FileNotFoundError(f"{name}: the IDX files are not in {[d for d in dirs if d]}; install the Debian package "
                            f"{package} (apt-get install {package}) or pass path=FOLDER")
