"""tf.GradientTape for custom training loops, on the C engine (no Python autodiff of values).

Under a tape, a model call runs the library's forward on the batch (in training mode when called
with training=True) and keeps it for one backward; its outputs are tensors with values that are
also the inputs of an operation graph (keras/_trace.py). What the loop computes from them (a
built-in loss object or function, a traced custom loss, keras.ops / tf math, sum(model.losses)) is
recorded into that graph. tape.gradient(loss, model.trainable_weights) runs the graph once in C
with its backward (tnt_opgraph_run), which gives d loss / d outputs, then the model's C backward
from there (tnt_model_tape_backward): the weights' gradients, averaged over the ranks of a
distributed model (tnt.Model) as Horovod's DistributedGradientTape does. optimizer.apply_gradients
runs the library's optimizer on them (tnt_model_apply_gradients).
"""
import json

import numpy as np

from tarantella._core import C
from tarantella.keras import _trace
from tarantella.keras._trace import SymTensor

_recording = []  # the tapes recording now, innermost last


class TapeTensor(SymTensor):
    """A value under a GradientTape: a symbolic tensor of the tape's graph (operations on it are
    recorded) whose value is computed in C when read (.numpy(), float(), NumPy)."""

    def value(self):
        v = self.graph.values.get(id(self))
        if v is None:
            v = self.graph.evaluate(self)
        return v

    def numpy(self):
        return np.array(self.value())

    def __array__(self, dtype=None, copy=None):
        v = self.value()
        return v if dtype is None else v.astype(dtype)

    def __float__(self):
        return float(self.value())

    def __int__(self):
        return int(self.value())

    __index__ = __int__

    def __bool__(self):
        return bool(self.value())

    def __len__(self):
        return len(self.value())

    def __iter__(self):
        return iter(self.value())

    def __format__(self, spec):
        v = self.value()
        return format(float(v), spec) if v.ndim == 0 else format(str(v), spec)

    def item(self):
        return self.value().item()

    def tolist(self):
        return self.value().tolist()

    def __repr__(self):
        return f"<tf.Tensor: shape={self.shape}, dtype={self.dtype}, numpy={self.value()!r}>"

    __str__ = __repr__


class _Call:
    """A model call recorded by the tape: its outputs (graph inputs), penalty, and whether it can
    still be differentiated."""

    def __init__(self, model, n, outputs, penalty, generation, inputs, batch_shape):
        self.model, self.n, self.outputs, self.penalty, self.generation = model, n, outputs, penalty, generation
        self.inputs = inputs          # the call's inputs that are values of the graph (None: plain data)
        self.batch_shape = batch_shape  # the packed batch (the inputs' gradient comes back so)
        self.fed_by = []              # earlier recorded calls whose outputs this call's inputs come from


class TapeGraph(_trace.Graph):
    """The operations recorded under one or more nested tapes."""

    tensor_type = TapeTensor
    concrete_shapes = True  # every value's shape is known: its dummies are computed once

    def __init__(self):
        super().__init__()
        self.values = {}  # id(tensor) -> its value (inputs, and values read so far)
        self.keep = []    # the tensors whose values are kept (their ids stay valid)
        self.calls = []

    def value_input(self, array):
        """A graph input holding array (float32 storage)."""
        a = np.asarray(array)
        v = a.astype(np.float32)
        t = TapeTensor(self, ("input", len(self.inputs)), [np.zeros(v.shape, np.float32)] * 2)
        self.inputs.append((tuple(v.shape), t))
        self.values[id(t)] = v
        self.keep.append(t)
        return t

    def data_input(self, a, dtype=None):
        """NumPy data in an operation (the labels y): an input, cast when it is not float."""
        t = self.value_input(a)
        dt = dtype or ("bool" if a.dtype == np.bool_ else "int32" if np.issubdtype(a.dtype, np.integer) else
                       "float32")
        if dt == "float32":
            return t
        from tarantella.keras import ops
        return ops.cast(t, dt)

    def _run(self, outputs, seeds=None):
        for _, t in self.inputs:
            if id(t) not in self.values:
                raise _trace.TraceError("GradientTape: an input of the recorded operations has no value")
        js = json.dumps(self.to_json(outputs))
        return C.opgraph_run(js, [self.values[id(t)] for _, t in self.inputs], seeds)

    def evaluate(self, t):
        outs, _ = self._run([t])
        v = outs[0].reshape(t.shape)
        if t.dtype == "int32":
            v = v.astype(np.int32)
        elif t.dtype == "bool":
            v = v.astype(np.bool_)
        self.values[id(t)] = v
        self.keep.append(t)
        return v

    def ancestors(self, ts):
        """The ids of every value the tensors ts are computed from (themselves included)."""
        producer = {}
        for op, ins, attrs, outs in self.nodes:
            for o in outs:
                producer[id(o)] = ins
        seen, stack = set(), [t for t in ts if isinstance(t, SymTensor)]
        while stack:
            t = stack.pop()
            if id(t) in seen:
                continue
            seen.add(id(t))
            stack.extend(producer.get(id(t), []))
        return seen


def _flat(v):
    if isinstance(v, (list, tuple)):
        return [x for e in v for x in _flat(e)]
    if isinstance(v, dict):
        return [x for e in v.values() for x in _flat(e)]
    return [v]


def concrete(v):
    """A tape's tensor as its value (metrics read values); anything else as it is."""
    return v.value() if isinstance(v, TapeTensor) else v


def eager_op(op, inputs, attrs, np_fn, n_out):
    """One operation on NumPy data (keras.ops outside traced code), run by the C engine."""
    from tarantella.keras.model_api import as_tensor
    g = TapeGraph()
    ins = [g.data_input(np.asarray(t)) if np.asarray(t).size > 16 else _trace.constant(g, np.asarray(t))
           for t in inputs]
    outs = _trace.record(op, ins, attrs, np_fn, n_out)
    vals = [as_tensor(o.value()) for o in (outs if n_out > 1 else [outs])]
    return vals if n_out > 1 else vals[0]


def active_graph():
    return _recording[-1].graph if _recording else None


# ---- model calls --------------------------------------------------------------------------------

def _packed_batch(model, x):
    """x as the library's packed batch for model (the model built on its first call)."""
    from tarantella import data as tnt_data
    from tarantella.keras import engine, _shapes
    if isinstance(x, dict):
        from tarantella.keras import _submodel
        _submodel.build_from_dict(model, x)
        x, _ = engine._by_name(model, x, None, "model call")
    xs = [np.asarray(v, np.float32) for v in engine._arrays(x, "x")]
    if model._h is None and not model._can_build(None):
        model._handle(tuple(np.shape(xs[0])[1:]))
    batch = tnt_data._flatten_inputs(xs, "model call")
    h = model._handle()
    _shapes.set_packed(model, [np.shape(v)[1:] for v in xs])
    shapes = h.input_shapes()
    if len(shapes) == 1 and not any(d is None for d in shapes[0]):
        batch = batch.reshape((batch.shape[0],) + tuple(shapes[0]))
    return batch


def model_call(model, inputs, training):
    """model(x, training=...) on data: recorded under a tape; training=True runs the training-mode
    forward also outside one (Dropout, BatchNormalization's batch statistics and moving averages)."""
    from tarantella.keras.model_api import as_tensor
    g = active_graph()
    if g is None and not training:
        return None  # the ordinary inference call
    model._touched = True
    batch = _packed_batch(model, inputs)
    flat_in = _flat(inputs)
    fed = g is not None and any(isinstance(t, SymTensor) and t.graph is g for t in flat_in)
    out = C.tape_forward(model._h, batch, bool(training), fed)
    model.__dict__["_tape_generation"] = model.__dict__.get("_tape_generation", 0) + 1
    outs = model._split_outputs(out)
    if g is None:
        return as_tensor(outs)
    fed_by = []
    if fed:  # a value computed from recorded calls: the gradient goes back through this call to them
        up = g.ancestors([t for t in flat_in if isinstance(t, SymTensor)])
        fed_by = [c for c in g.calls if any(id(t) in up for t in c.outputs)]
    keys = None
    if isinstance(outs, dict):
        keys, outs = list(outs), list(outs.values())
    many = isinstance(outs, list)
    tensors = [g.value_input(o) for o in (outs if many else [outs])]
    penalty_value = C.tape_penalty(model._h)
    penalty = g.value_input(np.float32(penalty_value)) if penalty_value != 0 else None
    call = _Call(model, batch.shape[0], tensors, penalty, model.__dict__["_tape_generation"],
                 flat_in if fed else None, batch.shape)
    call.fed_by = fed_by
    g.calls.append(call)
    if keys is not None:
        return dict(zip(keys, tensors))
    return tensors if many else tensors[0]


def model_losses(model):
    """model.losses under a tape: the regularization penalties of the model's last recorded call
    (one value, their sum), so that loss + sum(model.losses) is differentiated as Keras does."""
    g = active_graph()
    if g is None:  # the weights' penalties now (Keras's model.losses outside a tape)
        if model._h is None:
            return []
        from tarantella.keras.model_api import as_tensor
        value = C.tape_penalty(model._h)
        return [as_tensor(np.float32(value))] if value != 0 else []
    for c in reversed(g.calls):
        if c.model is model:
            return [c.penalty] if c.penalty is not None else []
    return []


# ---- the tape -----------------------------------------------------------------------------------

class GradientTape:
    """tf.GradientTape: records the model calls and the operations on their outputs made while it is
    active; gradient(target, sources) differentiates once (persistent tapes are not supported)."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        if persistent:
            raise NotImplementedError("GradientTape(persistent=True) is not supported: each tape computes one set of "
                                      "gradients (use one tape per gradient)")
        self.graph = None
        self._used = False

    def __enter__(self):
        # nested tapes see the same calls and operations (one graph)
        self.graph = _recording[-1].graph if _recording else TapeGraph()
        _recording.append(self)
        return self

    def __exit__(self, *exc):
        if self in _recording:
            _recording.remove(self)
        return False

    def watch(self, tensor):
        from tarantella.keras.layers import Weight
        for t in _flat(tensor):
            if not isinstance(t, Weight):  # model weights are watched already
                raise NotImplementedError(f"GradientTape.watch({type(t).__name__}): only model weights can be "
                                          f"watched (gradients w.r.t. model inputs are not supported)")

    def stop_recording(self):
        tape = self

        class _Paused:
            def __enter__(self_inner):
                if tape in _recording:
                    _recording.remove(tape)

            def __exit__(self_inner, *exc):
                _recording.append(tape)
                return False
        return _Paused()

    def reset(self):
        self.graph = TapeGraph()
        self._used = False

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=None):
        from tarantella.keras.layers import Weight
        from tarantella.keras.model_api import as_tensor
        g = self.graph
        if g is None:
            raise RuntimeError("GradientTape.gradient: the tape has recorded nothing (use it in a `with` block)")
        if self._used:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of gradients")
        targets = _flat(target)
        for t in targets:
            if not isinstance(t, TapeTensor) or t.graph is not g:
                raise ValueError(f"GradientTape.gradient: the target is {type(t).__name__}, not a value computed under "
                                 f"this tape from a model call recorded by it (call the model inside the `with` "
                                 f"block)")
            if t.dtype != "float32":
                raise ValueError(f"GradientTape.gradient: the target has dtype {t.dtype} (a float is needed)")
        flat = _flat(sources)
        for s in flat:
            if isinstance(s, Weight) or (isinstance(s, TapeTensor) and s.graph is g and
                                         any(s is o for c in g.calls for o in c.outputs)):
                continue
            what = f"{type(s).__name__} {getattr(s, 'name', '')}".strip() if not isinstance(s, SymTensor) else \
                "a tensor computed from a model's outputs"
            raise ValueError(f"GradientTape.gradient: cannot differentiate w.r.t. {what}: the sources must be weights "
                             f"of a model called under the tape (model.trainable_weights) or the outputs of such a "
                             f"call")
        self._used = True
        seeds = []
        outs = output_gradients if isinstance(output_gradients, (list, tuple)) else [output_gradients]
        for k, t in enumerate(targets):
            og = outs[k] if k < len(outs) else None
            seeds.append(np.ones(t.shape, np.float32) if og is None else np.asarray(og, np.float32).reshape(t.shape))
        values, dinputs = g._run(targets, seeds)
        for t, v in zip(targets, values):
            g.values[id(t)] = v.reshape(t.shape)
            g.keep.append(t)
        grad_of_input = {id(t): dinputs[i] for i, (_, t) in enumerate(g.inputs)}
        wanted = {}  # model -> weight indices
        for s in flat:
            if isinstance(s, Weight):
                wanted.setdefault(id(s._model), (s._model, set()))[1].add(s._index)
        model_grads = _backward_through_calls(g, targets, wanted, grad_of_input)
        reach = g.ancestors(targets)
        result = []
        for s in flat:
            if isinstance(s, Weight):
                gs = model_grads[id(s._model)]
                v = gs[s._index] if gs is not None else None
            else:
                v = grad_of_input[id(s)].reshape(s.shape) if id(s) in reach else None
            if v is None and "zero" in str(unconnected_gradients).lower():  # UnconnectedGradients.ZERO
                v = np.zeros(tuple(s.shape), np.float32)
            result.append(None if v is None else as_tensor(np.asarray(v).reshape(tuple(s.shape))))
        return _restructure(sources, result)


def _restructure(sources, flat):
    it = iter(flat)

    def build(v):
        if isinstance(v, (list, tuple)):
            return type(v)(build(e) for e in v) if isinstance(v, list) else tuple(build(e) for e in v)
        if isinstance(v, dict):
            return {k: build(e) for k, e in v.items()}
        return next(it)
    return build(sources)


def _backward_through_calls(g, targets, wanted, grad_of_input):
    """The weights' gradients of the models in wanted ({id: (model, indices)}), None for a model the
    targets do not depend on. The recorded calls are differentiated last first: a call's inputs'
    gradient goes back through the operations between it and the calls that fed it (grad_of_input
    collects, per graph input, the gradients of every path)."""
    reach = g.ancestors(targets)
    live = []
    for c in reversed(g.calls):  # a call reached: its inputs are reached too
        if any(id(t) in reach for t in c.outputs) or (c.penalty is not None and id(c.penalty) in reach):
            live.append(c)
            if c.inputs is not None:
                reach |= g.ancestors([t for t in c.inputs if isinstance(t, SymTensor)])
    needed = set(id(c) for c in live if id(c.model) in wanted)
    for c in live:  # last first: a call is needed when a needed call is upstream of it
        if id(c) in needed:
            continue
        if any(id(u) in needed for u in _upstream(c)):
            needed.add(id(c))
    out = {key: None for key in wanted}
    for c in live:
        if id(c) not in needed:
            continue
        model, name = c.model, getattr(c.model, "name", "model")
        calls = [x for x in g.calls if x.model is model]
        if len(calls) > 1:
            raise NotImplementedError(f"GradientTape.gradient: model {name!r} was called {len(calls)} times under the "
                                      f"tape; its gradients need one call per tape (concatenate the batches into one "
                                      f"call)")
        if c.generation != model.__dict__.get("_tape_generation"):
            raise RuntimeError(f"GradientTape.gradient: model {name!r} was called again after the tape's call "
                               f"(outside the tape); differentiate before calling it again")
        parts = [np.asarray(grad_of_input[id(t)], np.float32).reshape(c.n, -1) for t in c.outputs]
        dout = np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1))
        scale = float(grad_of_input[id(c.penalty)]) if c.penalty is not None else 0.0
        upstream = c.inputs is not None and any(id(u) in needed for u in c.fed_by)
        dx = np.zeros(c.batch_shape, np.float32) if upstream else None
        idx = sorted(wanted[id(model)][1]) if id(model) in wanted else []
        grads = C.tape_backward(model._h, dout, scale, idx, dx)
        if id(model) in wanted:
            out[id(model)] = grads
        if upstream:
            _through_graph(g, c, dx, grad_of_input)
    return out


def _upstream(c):
    seen, stack = [], list(c.fed_by)
    while stack:
        u = stack.pop()
        if all(u is not x for x in seen):
            seen.append(u)
            stack.extend(u.fed_by)
    return seen


def _through_graph(g, c, dx, grad_of_input):
    """Adds the gradient w.r.t. call c's inputs (dx, packed) to the graph inputs they come from."""
    flat = dx.reshape(c.n, -1)
    at, seeds, outs = 0, [], []
    for t in c.inputs:
        k = int(np.prod(np.shape(t)[1:])) if np.ndim(t) > 1 else 1
        if isinstance(t, SymTensor) and t.graph is g:
            part = flat[:, at:at + k].reshape(tuple(t.shape))
            if any(t is u for _, u in g.inputs):  # another call's output as it is
                grad_of_input[id(t)] = grad_of_input[id(t)] + part
            elif t.dtype == "float32":
                outs.append(t)
                seeds.append(np.ascontiguousarray(part))
        at += k
    if outs:
        _, dinputs = g._run(outs, seeds)
        for i, (_, t) in enumerate(g.inputs):
            grad_of_input[id(t)] = grad_of_input[id(t)] + dinputs[i]


# ---- optimizer.apply_gradients ------------------------------------------------------------------

def apply_gradients(optimizer, grads_and_vars):
    """Keras's optimizer.apply_gradients(zip(grads, vars)): the library's optimizer updates the
    weights given (any order; None gradients are skipped, as Keras warns and skips them)."""
    from tarantella.keras.layers import Weight
    by_model = {}
    for pair in grads_and_vars:
        grad, var = pair
        if not isinstance(var, Weight):
            raise TypeError(f"apply_gradients: the variable {var!r} is not a model weight (model.trainable_weights)")
        if grad is None:
            continue
        by_model.setdefault(id(var._model), (var._model, []))[1].append((var._index, np.asarray(grad, np.float32)))
    for model, items in by_model.values():
        h = model._handle()
        compiled = model._optimizer is optimizer and model._compiled is not None and h.compile_info() is not None
        if not compiled and model.__dict__.get("_tape_optimizer") is not optimizer:
            C.set_optimizer(h, optimizer._spec())  # this optimizer's slots, kept from step to step
            model.__dict__["_tape_optimizer"] = optimizer
        optimizer._bind(model)
        C.apply_gradients(h, [i for i, _ in items], [gr for _, gr in items])
