"""The global seed of tf.random.set_seed / keras.utils.set_random_seed: models compiled without a
seed and datasets shuffled without one take it (as TensorFlow derives op seeds from its global
seed); None until a program sets it."""
import random

import numpy as np

_state = {"seed": None}


def set_seed(seed):
    if seed is None:
        _state["seed"] = None
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"set_seed: expected an int seed, got {seed!r}")
    _state["seed"] = int(seed)


def set_random_seed(seed):
    """keras.utils.set_random_seed: Python's random, NumPy's and the library's global seed."""
    set_seed(seed)
    random.seed(int(seed))
    np.random.seed(int(seed) % (2 ** 32))


def global_seed():
    return _state["seed"]
