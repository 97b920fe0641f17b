"""keras.utils.generic_utils (Keras 2's module name)."""
from tarantella.keras.utils._objects import (  # noqa: F401
    CustomObjectScope, custom_object_scope, get_custom_objects, register_keras_serializable, get_registered_name,
    get_registered_object)
from tarantella.keras.utils._progbar import Progbar  # noqa: F401
