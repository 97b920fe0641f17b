"""Keras's registry of custom objects: get_custom_objects, custom_object_scope,
register_keras_serializable, get_registered_name/object. Models run in C, so the objects are
only looked up by name (a custom Python layer still cannot run in the library)."""
import contextlib
import inspect

_GLOBAL_CUSTOM_OBJECTS = {}
_GLOBAL_CUSTOM_NAMES = {}


def get_custom_objects():
    """The global dict of custom objects, which a program may change in place."""
    return _GLOBAL_CUSTOM_OBJECTS


class CustomObjectScope(contextlib.ContextDecorator):
    """with custom_object_scope({"name": obj}): the objects are known inside, as before after."""

    def __init__(self, *args):
        for a in args:
            if a is not None and not isinstance(a, dict):
                raise TypeError(f"custom_object_scope: expected dicts of name -> object, got {type(a).__name__}")
        self.custom_objects = args
        self._backup = None

    def __enter__(self):
        self._backup = dict(_GLOBAL_CUSTOM_OBJECTS)
        for objects in self.custom_objects:
            _GLOBAL_CUSTOM_OBJECTS.update(objects or {})
        return self

    def __exit__(self, *exc):
        _GLOBAL_CUSTOM_OBJECTS.clear()
        _GLOBAL_CUSTOM_OBJECTS.update(self._backup)
        return False


custom_object_scope = CustomObjectScope


def register_keras_serializable(package="Custom", name=None):
    """Decorator: registers a class or function as 'package>name' (Keras's registered name)."""
    def decorator(arg):
        class_name = name if name is not None else arg.__name__
        registered = f"{package}>{class_name}"
        if inspect.isclass(arg) and not hasattr(arg, "get_config"):
            raise ValueError(f"register_keras_serializable: {arg.__name__} is a class without get_config(), "
                             f"which Keras requires of a registered class")
        if registered in _GLOBAL_CUSTOM_OBJECTS:
            raise ValueError(f"register_keras_serializable: {registered} has already been registered to "
                             f"{_GLOBAL_CUSTOM_OBJECTS[registered]}")
        if arg in _GLOBAL_CUSTOM_NAMES:
            raise ValueError(f"register_keras_serializable: {arg} has already been registered to "
                             f"{_GLOBAL_CUSTOM_NAMES[arg]}")
        _GLOBAL_CUSTOM_OBJECTS[registered] = arg
        _GLOBAL_CUSTOM_NAMES[arg] = registered
        return arg
    return decorator


def get_registered_name(obj):
    return _GLOBAL_CUSTOM_NAMES.get(obj, getattr(obj, "__name__", None))


def get_registered_object(name, custom_objects=None, module_objects=None):
    for table in (_GLOBAL_CUSTOM_OBJECTS, custom_objects or {}, module_objects or {}):
        if name in table:
            return table[name]
    return None
