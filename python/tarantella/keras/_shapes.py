"""Input shapes from the data for models with None dimensions (issue 21): Keras takes a model's
input shapes from each call's data and retraces when they change. The library does so itself for
a single input; several inputs reach it packed in one array per sample, so their shapes are set
here from the arrays (or the dataset's record of them) before each call."""
import numpy as np


def set_packed(model, shapes):
    """Several inputs with None dimensions: their sample shapes for the next library calls."""
    declared = model._h.input_shapes()
    if len(declared) < 2 or not any(d is None for s in declared for d in s) or shapes is None:
        return
    if len(shapes) != len(declared):
        raise ValueError(f"model {model.name!r} has {len(declared)} inputs, the data brings {len(shapes)}")
    shapes = [tuple(int(d) for d in s) for s in shapes]
    model._h.set_input_shapes(shapes)
    model.__dict__["_packed_now"] = shapes


def restore_packed(model, prev):
    """After evaluate or predict inside fit (a callback's): the shapes fit runs on again."""
    if prev is not None and model.__dict__.get("_packed_now") != prev:
        model._h.set_input_shapes(prev)
        model.__dict__["_packed_now"] = prev


def split_outputs(model, out):
    """The library's output rows (n, values) as Keras's outputs: one array, or a list of several."""
    shapes = model._h.output_shapes()
    if any(d is None for s in shapes for d in s):  # None dimensions: the sizes of the data just run
        shapes = model._h.output_shapes_now()
    if len(shapes) == 1:
        want = (out.shape[0],) + tuple(shapes[0])
        return out.reshape(want) if int(np.prod(want)) == out.size else out
    n = out.shape[0]
    flat = out.reshape(n, -1)
    parts, at = [], 0
    for s in shapes:
        k = int(np.prod(s))
        parts.append(flat[:, at:at + k].reshape((n,) + tuple(s)))
        at += k
    keys = getattr(model, "_output_keys", None)  # a model built from a dict of outputs
    return dict(zip(keys, parts)) if keys and len(keys) == len(parts) else parts
