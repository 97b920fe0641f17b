"""Subclassed keras.Model (a call method in Python): traced once, when the input shape is known
(build, fit, predict), by calling call on symbolic inputs; the layers it calls and the operations
it does (keras.ops, operators, custom layers) make a functional model the library builds."""
from tarantella.keras import layers as L


def init(model, kwargs):
    """Model.__init__ of a subclass with call: the model is made later, from its first input shape."""
    bad = set(kwargs) - {"name", "trainable", "dtype"}
    if bad:
        raise TypeError(f"{type(model).__name__}: unexpected keyword arguments {sorted(bad)} for Model.__init__")
    for hook in ("predict_step",):  # train_step, test_step: keras/_custom_fit.py
        if any(hook in vars(c) for c in type(model).__mro__ if c.__module__ != __name__ and
               c.__name__ != "Model" and c.__name__ != "Sequential"):
            raise NotImplementedError(f"{type(model).__name__}.{hook}: overriding {hook} is not supported (predict "
                                      f"runs in C); define call and predict")
    from tarantella.keras import _compute_loss, _custom_fit
    # compute_loss alone is traced with call, so training stays in C (keras/_compute_loss.py); under
    # a train_step of the user's it is Python's, called by that step (keras/_custom_fit.py)
    model._loss_override = _compute_loss.overrides(type(model)) and not _custom_fit.overrides_step(model)
    model._loss_labels = model._loss_labels_flat = None
    model._kind = "subclassed"
    model._init_state()
    model._inputs = model._outputs = None
    model._layers = []
    model._single_in = model._single_out = True
    model.name = kwargs.get("name") or L.unique_name(L._snake(type(model).__name__))


def can_build(model, input_shape):
    return model._inputs is not None or input_shape is not None


def trace(model, input_shape):
    """Calls model.call once on a symbolic input of input_shape (without the batch axis)."""
    import inspect
    from tarantella.keras.engine import _walk
    if model._inputs is not None:
        return
    if isinstance(input_shape, dict):  # call(inputs) on a dict by input name
        inputs = [L.Input(shape=tuple(s), name=k) for k, s in input_shape.items()]
        arg = dict(zip(input_shape, inputs))
    elif input_shape and isinstance(input_shape[0], (list, tuple)):
        inputs = [L.Input(shape=tuple(s)) for s in input_shape]
        arg = inputs
    else:
        inputs = [L.Input(shape=tuple(input_shape))]
        arg = inputs[0]
    params = inspect.signature(model.call).parameters
    kw = {"training": None} if "training" in params else {}
    out = model.call(arg, **kw)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    for o in outs:
        if not isinstance(o, L.KerasTensor):
            raise TypeError(f"{type(model).__name__}.call returned {type(o).__name__}, expected the tensors of its "
                            f"layers and operations")
        if isinstance(o._layer, L.InputLayer):
            raise ValueError(f"{type(model).__name__}.call returned its input unchanged")
    model._single_in, model._single_out = len(inputs) == 1, not isinstance(out, (list, tuple))
    if getattr(model, "_loss_labels", None) is not None:  # fit or evaluate: the labels and compute_loss
        from tarantella.keras import _compute_loss
        inputs, outs = _compute_loss.trace_loss(model, inputs, arg, outs)
    model._inputs, model._outputs = inputs, outs
    pairs, _ = _walk(outs)
    seen, layers = set(), []
    for layer, ni in sorted(pairs, key=lambda p: p[0]._nodes[p[1]].order):
        if id(layer) not in seen:
            seen.add(id(layer))
            layers.append(layer)
    model._layers = layers


def build_from_dict(model, x):
    """A subclassed model not built yet, given a dict of arrays by input name: traced on a dict of
    inputs of those names and shapes (the data then goes in by name)."""
    import numpy as np
    if model._h is None and getattr(model, "_kind", None) == "subclassed" and model._inputs is None and \
            isinstance(x, dict):
        model._handle({k: tuple(np.shape(v)[1:]) for k, v in x.items()})
