"""Model.compute_loss(x, y, y_pred, sample_weight) overridden in a subclassed model (Keras 3's
knowledge distillation: a frozen teacher called inside compute_loss, two losses combined).

The override is traced once on the model's symbolic tensors, like call: the labels become one more
input of the model (fit and evaluate feed y there as well as to the metrics; predict feeds
zeros), the models it calls join the graph (a model called only in compute_loss, the teacher, with
its weights frozen), its operations become traced layers, and the loss it returns is added to the
model's loss (an added loss, as add_loss), so training stays in C. The compiled loss is then a zero
that reads the labels, which the compiled metrics compare with call's output."""
import inspect
import json

import numpy as np

from tarantella.keras import layers as L


def overrides(model_class):
    """Whether a subclass of Model defines compute_loss."""
    return any("compute_loss" in vars(c) for c in model_class.__mro__
               if c.__module__.split(".")[0] != "tarantella")


def label_shape(y):
    """The labels' per-sample shape as the label input takes it: (1,) for one value per sample."""
    shape = tuple(np.shape(y)[1:])
    return shape if shape else (1,)


def trace_loss(model, inputs, arg, outs):
    """After call was traced on inputs (passed as arg, returning outs): the label input, the
    override on the model's tensors, and the added loss on the first output. Returns the inputs and
    outputs of the training graph."""
    shape = model._loss_labels
    y_in = L.Input(shape=shape, name="compute_loss_y")
    from tarantella.keras import ops
    y = ops.reshape(y_in, (-1,)) if model._loss_labels_flat else y_in
    y_pred = outs[0] if model._single_out else list(outs)
    before = {id(layer) for layer in _reached(outs)}
    fn = model.compute_loss
    kw = {"x": arg, "y": y, "y_pred": y_pred, "sample_weight": None}
    params = inspect.signature(fn).parameters
    if "training" in params:
        kw["training"] = True
    loss = fn(**kw)
    if not isinstance(loss, L.KerasTensor):
        raise TypeError(f"{type(model).__name__}.compute_loss returned {type(loss).__name__}, expected the loss "
                        f"computed from x, y and y_pred (a tensor)")
    from tarantella.keras import _custom
    from tarantella.keras.engine import Model
    outs = list(outs)
    outs[0] = _custom.attach_loss(outs[0], loss)
    # models called only by compute_loss (the teacher) are frozen: the loss trains the model's own
    model._loss_frozen = {layer.name for layer in _reached([loss]) if isinstance(layer, Model) and
                          id(layer) not in before}
    return inputs + [y_in], outs


def _reached(tensors):
    from tarantella.keras.functional import _walk
    pairs, _ = _walk(list(tensors))
    return [layer for layer, _ in pairs]


def freeze_json(model, js):
    """The architecture with the loss-only models' layers not trainable."""
    frozen = getattr(model, "_loss_frozen", None)
    if not frozen:
        return js
    arch = json.loads(js)

    def freeze(entry):
        cfg = entry.get("config", {})
        cfg["trainable"] = False
        for inner in cfg.get("layers", []) if isinstance(cfg, dict) else []:
            freeze(inner)

    for e in arch["config"]["layers"]:
        if e.get("config", {}).get("name") in frozen or e.get("name") in frozen:
            freeze(e)
    return json.dumps(arch)


def ensure_graph(model, xs, y):
    """Before fit or evaluate: the training graph for inputs xs and labels like y (built again,
    weights kept by name, when the model was built without labels or for other label shapes)."""
    shape = label_shape(y)
    flat = np.ndim(y) == 1
    if getattr(model, "_loss_labels", None) == shape and model._loss_labels_flat == flat and model._h is not None:
        return
    old = {}
    if model._h is not None:
        old = {n: w for (n, _), w in zip(model._h.weights_info(), model._h.get_weights())}
        model._h = None
        model._inputs = model._outputs = None
    model._loss_labels, model._loss_labels_flat = shape, flat
    model.__dict__["_loss_old_weights"] = old
    shapes = [tuple(np.shape(v)[1:]) for v in xs]
    model._handle(shapes if len(shapes) > 1 else shapes[0])


def restore_weights(model, h):
    """The weights the model had before it was built again with its labels."""
    old = model.__dict__.pop("_loss_old_weights", None)
    if not old:
        return
    ws = h.get_weights()
    for i, (n, _) in enumerate(h.weights_info()):
        if n in old and np.shape(old[n]) == np.shape(ws[i]):
            ws[i] = old[n]
    h.set_weights(ws)


def prepare(model, x, y, what):
    """fit/evaluate/predict data for a model with compute_loss: the labels also go to the label
    input (predict: zeros of their shape, once the model has one)."""
    from tarantella import data as tnt_data
    if what == "predict" and getattr(model, "_loss_labels", None) is None:
        return x, y  # built from call alone: no label input
    if isinstance(x, tnt_data.Dataset):
        raise NotImplementedError(f"{what}: a model that overrides compute_loss takes arrays x and y (a Dataset is "
                                  f"not supported yet)")
    if isinstance(x, dict):
        raise NotImplementedError(f"{what}: a model that overrides compute_loss takes arrays (not a dict by name)")
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if what == "predict":
        return xs + [np.zeros((len(xs[0]),) + model._loss_labels, np.float32)], y
    if y is None:
        raise ValueError(f"{what}: {type(model).__name__} overrides compute_loss, which takes the labels: give y")
    if isinstance(y, (list, tuple, dict)):
        raise NotImplementedError(f"{what}: a model that overrides compute_loss takes one array of labels (no "
                                  f"sample_weight or class_weight: compute_loss is given sample_weight=None)")
    y = np.asarray(y)
    ensure_graph(model, xs, y)
    return xs + [y.reshape((len(y),) + label_shape(y)).astype(np.float32)], y


class ZeroLoss:
    """The compiled loss of a model whose loss is its compute_loss: zero, reading the labels (so
    that fit takes y, for the metrics). stand_in: the library's loss kind whose labels these are
    (one class index per sample: sparse categorical, which the sparse metrics check for)."""
    __name__ = "compute_loss"

    def __init__(self, sparse):
        self.stand_in = "sparse_categorical_crossentropy" if sparse else "mean_squared_error"

    def __call__(self, y_true, y_pred):
        return zero_loss(y_true, y_pred)


def zero_loss(y_true, y_pred):
    from tarantella.keras import ops
    flat = ops.reshape(y_pred, (-1, int(np.prod(y_pred.shape[1:], dtype=np.int64))))
    labels = ops.reshape(ops.cast(y_true, "float32"), (-1, int(np.prod(y_true.shape[1:], dtype=np.int64))))
    return ops.sum(flat * 0.0, axis=-1) + ops.sum(labels * 0.0, axis=-1)
