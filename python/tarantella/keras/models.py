"""tnt.keras.models: load_model, save_model, model_from_json, model_from_config, clone_model."""
import json
import os

from tarantella._core import C, ensure_init
from tarantella.keras.engine import Model, Sequential


def _wrap(h):
    cfg = json.loads(h.to_json())
    m = Sequential.__new__(Sequential) if cfg.get("class_name") == "Sequential" else Model.__new__(Model)
    m._input_layer = None
    Model.__init__(m, _handle=h)
    return m


def load_model(filepath, custom_objects=None, compile=True, options=None):
    """A model saved by Keras or by model.save: a Keras 3 .keras zip or a Keras 2 .h5 file (told apart
    by content). With compile and a stored training configuration, the model comes compiled, with
    its optimizer's state, so that fit resumes exactly. Every rank reads the file."""
    # custom layers saved by this package carry their traced operations ("tnt_ops"), which the
    # library runs: custom_objects are accepted for Keras compatibility and not needed
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise TypeError(f"load_model: custom_objects must be a dict of name -> class, got "
                        f"{type(custom_objects).__name__}")
    ensure_init()
    path = os.fspath(filepath)
    if os.path.isdir(path):
        raise NotImplementedError(f"load_model: {path!r} is a folder (a TensorFlow SavedModel), which is not "
                                  f"supported; save the model as .h5 or .keras")
    return _wrap(C.load_model(path, compile=bool(compile)))


def save_model(model, filepath, overwrite=True, include_optimizer=True, save_format=None, **kwargs):
    model.save(filepath, overwrite=overwrite, include_optimizer=include_optimizer, save_format=save_format, **kwargs)


def model_from_json(json_string, custom_objects=None):
    """A model from a Keras JSON architecture (Sequential or Functional, Keras 2 or 3), with fresh
    weights."""
    ensure_init()
    h = C.model_from_json(json_string)
    from tarantella import _random
    _random.seed_new_model(h)
    return _wrap(h)


def model_from_config(config, custom_objects=None):
    """config: {"class_name": ..., "config": ...} (Keras's model_from_config), or model.get_config()
    itself (a Functional config has input_layers; a Sequential one only layers)."""
    if not isinstance(config, dict):
        raise TypeError(f"model_from_config: expected a dict, got {type(config).__name__}")
    if "class_name" not in config:
        if "layers" not in config:
            raise ValueError("model_from_config: expected {'class_name', 'config'} or a model's get_config()")
        config = {"class_name": "Functional" if "input_layers" in config else "Sequential", "config": config}
    return model_from_json(json.dumps(config))


def clone_model(model, input_tensors=None, clone_function=None):
    """The same architecture with freshly initialized weights."""
    if input_tensors is not None or clone_function is not None:
        raise NotImplementedError("clone_model: input_tensors and clone_function are not supported")
    return model_from_json(model.to_json())


def model_from_yaml(yaml_string, custom_objects=None):
    """A model from the YAML that model.to_yaml wrote (TF <= 2.5's format, which Tarantella
    documents; needs PyYAML)."""
    import yaml
    return model_from_config(yaml.safe_load(yaml_string))
