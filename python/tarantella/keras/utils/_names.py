"""Inputs and targets given by name, as Keras takes them: dicts of arrays (or datasets whose
elements hold dicts) keyed by the model's input and output layer names, put in the model's order.
Keys that name no input are ignored with a warning, as Keras does; a missing one is an error."""
import warnings

from tarantella import data as tnt_data


def io_names(model):
    cfg = model.get_config()
    layers = cfg.get("layers", [])
    if "input_layers" in cfg:
        return [i[0] for i in cfg["input_layers"]], [o[0] for o in cfg["output_layers"]]
    first, last = layers[0], layers[-1]  # a Sequential: its one input and output
    return [first["config"]["name"]], [last["config"]["name"]]


def ordered(values, names, what, kind):
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"{what}: the dict of {kind} has no entry for {missing}; the model's {kind} are {names}, "
                         f"the dict's keys {sorted(values)}")
    extra = sorted(set(values) - set(names))
    if extra:
        warnings.warn(f"{what}: the dict of {kind} has keys {extra} that match no model {kind[:-1]}; they are "
                      f"ignored", stacklevel=4)
    parts = [values[n] for n in names]
    return parts[0] if len(parts) == 1 else parts


def _has_dict(spec):
    return isinstance(spec, dict) or (isinstance(spec, tuple) and any(isinstance(s, dict) for s in spec))


def by_name(model, x, y, what):
    """x and y with dicts put in the model's input and output order."""
    if not (isinstance(x, dict) or isinstance(y, dict) or
            (isinstance(x, tnt_data.Dataset) and _has_dict(x.element_spec))):
        return x, y
    inputs, outputs = io_names(model)
    if isinstance(x, dict):
        x = ordered(x, inputs, what, "inputs")
    if isinstance(y, dict):
        y = ordered(y, outputs, what, "outputs")
    if isinstance(x, tnt_data.Dataset):
        def order(element):
            def one(v, names, kind):
                return tuple(ordered(v, names, what, kind)) if isinstance(v, dict) and len(names) > 1 else (
                    ordered(v, names, what, kind) if isinstance(v, dict) else v)
            if isinstance(element, tuple):
                parts = [one(element[0], inputs, "inputs")]
                if len(element) > 1:
                    parts.append(one(element[1], outputs, "outputs"))
                return tuple(parts) + tuple(element[2:])
            return one(element, inputs, "inputs")
        x = x._as_py().map(lambda *e: order(e if len(e) > 1 else e[0]))
    return x, y
