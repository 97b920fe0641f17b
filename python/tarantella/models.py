"""tnt.models: Tarantella's load and save functions, giving data-parallel tnt.Model objects."""
from tarantella.keras import models as _km
from tarantella.model import Model


def load_model(filepath, compile=True, **kwargs):
    return Model(_km.load_model(filepath, compile=compile, **kwargs))


def save_model(model, filepath, **kwargs):
    model.save(filepath, **kwargs)


def model_from_json(json_string, **kwargs):
    return Model(_km.model_from_json(json_string))


def model_from_config(config, **kwargs):
    return Model(_km.model_from_config(config))


def clone_model(model, **kwargs):
    return Model(_km.clone_model(model, **kwargs))


def model_from_yaml(yaml_string, **kwargs):
    return Model(_km.model_from_yaml(yaml_string))
