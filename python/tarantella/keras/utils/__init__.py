"""keras.utils: Keras's names, signatures and defaults (see each helper's module)."""
from tarantella._random import set_random_seed  # noqa: F401
from tarantella.keras.utils._arrays import to_categorical, normalize, pad_sequences  # noqa: F401
from tarantella.keras.utils._objects import (  # noqa: F401
    CustomObjectScope, custom_object_scope, get_custom_objects, register_keras_serializable, get_registered_name,
    get_registered_object)
from tarantella.keras.utils._progbar import Progbar  # noqa: F401
from tarantella.keras.utils._sequence import Sequence, PyDataset  # noqa: F401
from tarantella.keras.utils._files import get_file  # noqa: F401
from tarantella.keras.utils._image import load_img, img_to_array, array_to_img, save_img  # noqa: F401
from tarantella.keras.utils._plot import model_to_dot, plot_model  # noqa: F401
from tarantella.keras.utils._dataset_utils import (  # noqa: F401
    timeseries_dataset_from_array, text_dataset_from_directory, image_dataset_from_directory, split_dataset)


def serialize_keras_object(instance):
    """{"class_name", "config"} of an object with get_config (Keras's serialization)."""
    if instance is None:
        return None
    if hasattr(instance, "get_config"):
        name = getattr(instance, "class_name", None)
        name = name() if callable(name) else (name or type(instance).__name__)
        return {"class_name": get_registered_name(type(instance)) if type(instance) in
                _objects_names() else name, "config": instance.get_config()}
    if hasattr(instance, "__name__"):
        return get_registered_name(instance)
    raise ValueError(f"serialize_keras_object: cannot serialize {instance!r}")


def _objects_names():
    from tarantella.keras.utils._objects import _GLOBAL_CUSTOM_NAMES
    return _GLOBAL_CUSTOM_NAMES


def deserialize_keras_object(config, module_objects=None, custom_objects=None, printable_module_name="object"):
    """An object from its name or {"class_name", "config"}, looked up in the custom objects, then
    custom_objects, then module_objects."""
    if isinstance(config, str):
        obj = get_registered_object(config, custom_objects, module_objects)
        if obj is None:
            raise ValueError(f"Unknown {printable_module_name}: {config!r}")
        return obj
    if isinstance(config, dict) and "class_name" in config:
        cls = get_registered_object(config["class_name"], custom_objects, module_objects)
        if cls is None:
            raise ValueError(f"Unknown {printable_module_name}: {config['class_name']!r}")
        cfg = config.get("config", {})
        return cls.from_config(cfg) if hasattr(cls, "from_config") else cls(**cfg)
    raise ValueError(f"deserialize_keras_object: cannot deserialize {config!r}")


def to_ordinal(y, num_classes=None, dtype="float32"):
    """Ordinal regression targets: row k has k ones (Keras's to_ordinal)."""
    import numpy as np
    y = np.array(y, dtype="int64")
    shape = y.shape[:-1] if y.ndim > 1 and y.shape[-1] == 1 else y.shape
    y = y.ravel()
    num_classes = int(np.max(y)) + 1 if num_classes is None else int(num_classes)
    out = (np.arange(num_classes - 1)[None, :] < y[:, None]).astype(dtype)
    return out.reshape(shape + (num_classes - 1,))


from tarantella.keras.config import (  # noqa: E402,F401  (keras.utils' names of these settings)
    enable_interactive_logging, disable_interactive_logging, is_interactive_logging_enabled)
from tarantella.keras.utils import np_utils, vis_utils, data_utils, generic_utils  # noqa: E402,F401
