"""serialize / deserialize / get of keras.initializers, regularizers and constraints (Keras 2's
forms): an object as {"class_name", "config"}, back from that dict, from a name ("glorot_uniform",
"GlorotUniform", "l2") or from the object itself."""


def _key(name):
    return name.replace("_", "").lower()


def _classes(module, base):
    out = {}
    for n, v in vars(module).items():
        if isinstance(v, type) and issubclass(v, base) and v is not base:
            out.setdefault(_key(n), v)
    return out


def install(module, base, what):
    """Adds serialize, deserialize and get to module (its classes derive from base)."""

    def serialize(obj):
        if obj is None:
            return None
        if isinstance(obj, base):
            return {"class_name": obj.class_name or type(obj).__name__, "config": obj.get_config()}
        raise ValueError(f"{what}.serialize: cannot serialize {obj!r}")

    def deserialize(config, custom_objects=None):
        if isinstance(config, str):
            config = {"class_name": config, "config": {}}
        if not isinstance(config, dict) or "class_name" not in config:
            raise ValueError(f"{what}.deserialize: expected a dict with class_name and config, got {config!r}")
        name = config["class_name"]
        cls = (custom_objects or {}).get(name) or _classes(module, base).get(_key(name))
        if cls is None:
            raise ValueError(f"{what}: unknown {what[:-1]} {name!r}")
        cfg = config.get("config") or {}
        return cls.from_config(cfg) if hasattr(cls, "from_config") else cls(**cfg)

    def get(identifier):
        if identifier is None or isinstance(identifier, base) or (callable(identifier) and
                                                                  not isinstance(identifier, (str, dict, type))):
            return identifier
        if isinstance(identifier, type) and issubclass(identifier, base):
            return identifier()
        if isinstance(identifier, (str, dict)):
            return deserialize(identifier)
        raise ValueError(f"{what}.get: could not interpret identifier {identifier!r}")

    module.serialize, module.deserialize, module.get = serialize, deserialize, get
