"""tnt.keras: the Keras API of the package (what `from tensorflow import keras` gives)."""
from tarantella.keras import layers, activations, initializers, regularizers, constraints  # noqa: F401
from tarantella.keras import optimizers, losses, metrics, callbacks, datasets, mixed_precision  # noqa: F401
from tarantella.keras.engine import Model, Sequential  # noqa: F401
from tarantella.keras.layers import Input, InputLayer  # noqa: F401
from tarantella.keras import models  # noqa: F401
from tarantella.keras import utils, backend, config, preprocessing  # noqa: F401

__version__ = "2.11.0"  # the Keras whose behaviour the library follows
from tarantella.keras import ops, _custom  # noqa: F401,E402  (traced user code: keras.ops, Lambda, Layer subclasses)
from tarantella.keras import applications  # noqa: F401,E402  (the ImageNet architectures)
from tarantella.keras import wrappers  # noqa: F401,E402  (Keras 2's scikit-learn wrappers)
