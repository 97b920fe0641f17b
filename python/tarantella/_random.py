"""The global seed of tf.random.set_seed / keras.utils.set_random_seed: models compiled without a
seed and datasets shuffled without one take it (as TensorFlow derives op seeds from its global
seed); None until a program sets it."""
import random

import numpy as np

_state = {"seed": None, "models": 0}


def set_seed(seed):
    if seed is None:
        _state["seed"] = None
        _state["models"] = 0
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"set_seed: expected an int seed, got {seed!r}")
    _state["seed"] = int(seed)
    _state["models"] = 0  # the models built from here on draw their weights as after any other set_seed


def set_random_seed(seed):
    """keras.utils.set_random_seed: Python's random, NumPy's and the library's global seed."""
    set_seed(seed)
    random.seed(int(seed))
    np.random.seed(int(seed) % (2 ** 32))


def global_seed():
    return _state["seed"]


def seed_new_model(handle):
    """Gives a model just made by the library its own seed from the global one: its weights are
    drawn once, when first needed, from it, so that the same program after the same set_seed gets
    the same weights whether get_weights, compile or fit reads them first (Keras draws a layer's
    weights when it is built, from the seeded generator, in build order). The n-th model since
    set_seed gets the n-th seed."""
    if _state["seed"] is None:
        return
    _state["models"] += 1
    mixed = np.random.SeedSequence([_state["seed"] % (2 ** 63), _state["models"]]).generate_state(2, np.uint32)
    handle.set_seed((int(mixed[0]) << 32 | int(mixed[1])) or 1)
