"""keras.config (Keras 3): the global settings, shared with keras.backend."""
from tarantella._random import set_random_seed  # noqa: F401
from tarantella.keras.backend import (  # noqa: F401
    image_data_format, set_image_data_format, epsilon, set_epsilon, floatx, set_floatx)
from tarantella.keras.mixed_precision import set_global_policy as set_dtype_policy  # noqa: F401
from tarantella.keras.mixed_precision import global_policy as dtype_policy  # noqa: F401

_state = {"traceback_filtering": True, "interactive_logging": True}


def backend():
    return "tensorflow"


def enable_unsafe_deserialization():
    """Accepted: the library loads no Python code from model files."""


def enable_traceback_filtering():
    _state["traceback_filtering"] = True


def disable_traceback_filtering():
    _state["traceback_filtering"] = False


def is_traceback_filtering_enabled():
    return _state["traceback_filtering"]


def enable_interactive_logging():
    _state["interactive_logging"] = True


def disable_interactive_logging():
    _state["interactive_logging"] = False


def is_interactive_logging_enabled():
    return _state["interactive_logging"]
