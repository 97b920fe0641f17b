"""The values a Dataset yields: NumPy arrays that also answer TensorFlow's .numpy(), so that
`for images, labels in ds.take(1): images[0].numpy()` runs as written."""
import numpy as np


class EagerArray(np.ndarray):
    def numpy(self):
        return np.asarray(self)


def eager(v):
    """v as an EagerArray (a view, no copy); a Python str stays a str."""
    if isinstance(v, np.ndarray):
        return v.view(EagerArray)
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return np.asarray(v).view(EagerArray)
    return v
