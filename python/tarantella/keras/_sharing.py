"""Layers shared between models (a model called as a layer of another, as a GAN's discriminator
in the combined model, or a layer used in two models): Keras keeps one set of weights for them.
Here each model has its own copy in the library, and the copies are kept one: the model that used
a layer last holds its newest values (layer._model), and any other model takes them from there
before it runs, trains or shows its weights. Which weights a model trains stays its own (Keras 2
reads trainable when a model is compiled): a discriminator frozen in the combined model still
trains in its own fit, and a base model unfrozen for fine-tuning trains after the next compile."""
import warnings
import weakref


def _indices(info, layer_name):
    prefix = layer_name + "/"
    return [i for i, (n, _) in enumerate(info) if n.startswith(prefix)]


def sync_in(model):
    """The newest values of model's layers, copied into model's handle from the models that hold
    them; model holds them from now on."""
    groups = {}
    for layer in model._all_layers():
        owner = layer._model() if getattr(layer, "_model", None) is not None else None
        if owner is None or owner is model or owner._h is None:
            continue
        groups.setdefault(id(owner), (owner, []))[1].append(layer)
    if not groups:
        return
    h = model._h
    info = h.weights_info()
    for owner, layers in groups.values():
        theirs_info, pairs = owner._h.weights_info(), []
        for layer in layers:
            src, dst = _indices(theirs_info, layer.name), _indices(info, layer.name)
            if src and len(src) == len(dst) and all(tuple(theirs_info[i][1]) == tuple(info[j][1])
                                                   for i, j in zip(src, dst)):
                pairs += zip(src, dst)
            elif src or dst:  # names that two layers of one model share: which weights are whose is unclear
                warnings.warn(f"layer {layer.name!r} is shared by models {owner.name!r} and {model.name!r}, but its "
                              f"weights cannot be told apart by name in one of them (another layer has its name): "
                              f"{model.name!r} keeps its own copy")
            layer._model = weakref.ref(model)
        if pairs:  # only the shared weights, from library model to library model
            h.copy_weights_from(owner._h, [i for i, _ in pairs], [j for _, j in pairs])


def claim(model):
    """After model trained (its callbacks may have run other models meanwhile): its layers' newest
    values are its own."""
    ref = weakref.ref(model)
    for layer in model._all_layers():
        layer._model = ref


def set_trainable(model, value):
    """Keras's model.trainable = value: the model and every layer in it; a model that calls it as a
    layer and is built afterwards freezes it (its entry's trainable)."""
    model.__dict__["_trainable"] = bool(value)
    if getattr(model, "_layers", None) is None:  # a subclass setting it before Model.__init__
        return
    for layer in model._all_layers():
        layer.trainable = bool(value)


def apply_trainable(model):
    """At compile (Keras 2's rule): each layer of model trains or not as its trainable and that of
    every model around it in model say now."""
    from tarantella.keras.engine import Model
    loss_only = getattr(model, "_loss_frozen", None) or set()  # a teacher called by compute_loss

    def walk(m, on):
        for layer in m._layers:
            if isinstance(layer, Model):
                walk(layer, on and layer.trainable and layer.name not in loss_only)
            else:
                model._h.set_trainable(layer.name, bool(on and getattr(layer, "trainable", True)))
    walk(model, True)


def old_weights(model):
    """When model is built: the newest values of its layers that other models hold (by weight
    name), and of its nested models built on their own."""
    from tarantella.keras.engine import Model
    out = {}
    for layer in model._all_layers():
        m = layer._model() if layer._model is not None else None
        if m is None or m is model or m._h is None:
            continue
        info = m._h.weights_info()
        idx = _indices(info, layer.name)
        if idx:
            ws = m._h.get_weights()
            out.update({info[i][0]: ws[i] for i in idx})
    for layer in model._layers:  # nested models built on their own (their layers' newest values first)
        if isinstance(layer, Model) and layer._h is not None:
            for (n, _), w in zip(layer._h.weights_info(), layer._h.get_weights()):
                out.setdefault(n, w)
    return out
