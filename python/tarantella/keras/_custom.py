"""The user's own layers on the C engine: keras.layers.Layer subclasses (build/add_weight/call),
keras.layers.Lambda, and keras.ops / operators on a functional model's tensors. Each is traced
once on symbolic tensors (keras/_trace.py) into an operation graph that the model's JSON carries
under "tnt_ops"; the C library builds a traced layer from it (src/layers/core/traced.c), whose
weights are the graph's (the add_weight variables), and differentiates it."""
import inspect

from tarantella.keras import _trace, layers as L
from tarantella.keras._trace import SymTensor, TraceError

PASS = object()  # intercept: go on with the ordinary layer call


class BuiltinInTrace(NotImplementedError):
    """A built-in layer (or model) called on traced tensors: the custom layer around it is then
    called on the model's tensors instead (its layers and operations inline in the model)."""


def _is_kt(v):
    return isinstance(v, L.KerasTensor)


def _flat(v):
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _flat(x)]
    return [v]


def _to_graph(v, g, kts):
    """v with each KerasTensor replaced by a new input of g (recorded in kts)."""
    if _is_kt(v):
        kts.append(v)
        return g.input(v.shape)
    if isinstance(v, (list, tuple)):
        return type(v)(_to_graph(x, g, kts) for x in v)
    if isinstance(v, dict):
        return {k: _to_graph(x, g, kts) for k, x in v.items()}
    return v


def _outputs(out, what):
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    for o in outs:
        if not isinstance(o, SymTensor):
            raise TraceError(f"{what} returned {type(o).__name__}, expected a tensor computed from its inputs")
    return outs


class TracedLayer(L.Layer):
    """A layer of the user's code, traced: its config carries the operation graph as "tnt_ops"."""

    class_name = "TracedOps"

    def __init__(self, graph_json=None, class_name=None, name=None, extra_config=None, n_outputs=1):
        if class_name is not None:
            self.class_name = class_name
        _base_init(self, {"name": name})
        self._graph_json = graph_json
        self._extra = dict(extra_config or {})
        self._n_traced_outputs = n_outputs

    def _n_outputs(self):
        return self._n_traced_outputs

    def _json_config(self):
        if self._config is not None:
            return dict(self._config)
        if self._graph_json is None:
            raise ValueError(f"layer {self.name!r} ({self.class_name}) has not been called on a tensor yet")
        return {"name": self.name, "trainable": self.trainable, "dtype": "float32", **self._extra,
                "tnt_ops": self._graph_json}

    get_config = _json_config


def _base_init(layer, kwargs):
    """What Layer.__init__ sets, for the user's classes (no Keras argument signature)."""
    name = kwargs.get("name")
    layer.name = name or L.unique_name(L._snake(type(layer).__name__ if layer.class_name is None
                                                else layer.class_name.split(">")[-1]))
    layer.trainable = kwargs.get("trainable", True)
    layer._dtype_policy = "float32"
    layer._args = {}
    layer._input_shape = None
    shape = kwargs.get("input_shape")
    if kwargs.get("batch_input_shape") is not None:
        shape = tuple(kwargs["batch_input_shape"])[1:]
    if shape is not None:
        layer._input_shape = tuple(int(d) for d in shape)
    layer._initial_weights = None
    layer._nodes = []
    layer._model = None
    layer._config = None


_FUSE_MAX_NODES = 48  # a chain of operations fused into one layer up to this size
_FUSE_MAX_INPUTS = 16  # the inputs a layer takes (TNT_MAX_LAYER_INPUTS): fusing stops before more


def _fused_input(v, g, kts, memo):
    """A KerasTensor as a value of g: the output of an earlier one-operation layer (x * 2 + 1) is
    recomputed inside g from that layer's inputs, so a chain of operations becomes one layer (the
    earlier layer stays in the model only where its output is used elsewhere)."""
    if id(v) in memo:
        return memo[id(v)]
    src = getattr(v._layer, "_fusable", None)
    if src is None or len(g.nodes) + len(src[0].nodes) > _FUSE_MAX_NODES or memo.get("no_fusion"):
        kts.append(v)
        t = memo[id(v)] = g.input(v.shape)
        return t
    old, old_outs, old_kts = src
    vals = {}
    for (_, t_old), kt in zip(old.inputs, old_kts):
        vals[id(t_old)] = _fused_input(kt, g, kts, memo)
    for op, ins, attrs, outs in old.nodes:
        new = [SymTensor(g, (op, len(g.nodes), k), t._dummies) for k, t in enumerate(outs)]
        g.nodes.append((op, [vals[id(t)] for t in ins], dict(attrs), new))
        vals.update({id(t): n for t, n in zip(outs, new)})
    t = memo[id(v)] = vals[id(old_outs[v._tensor_index])]
    return t


def _to_graph_fused(v, g, kts, memo):
    if _is_kt(v):
        return _fused_input(v, g, kts, memo)
    if isinstance(v, (list, tuple)):
        return type(v)(_to_graph_fused(x, g, kts, memo) for x in v)
    if isinstance(v, dict):
        return {k: _to_graph_fused(x, g, kts, memo) for k, x in v.items()}
    return v


def functional_op(fn, args, kwargs):
    """An operation on a model's tensors: a traced layer, called on them (fused with the operations
    that made its inputs, see _fused_input)."""
    if _TRACING:  # a custom layer's call reached a model tensor that is not one of its inputs
        captured = next((v for v in _flat([list(args), list(kwargs.values())]) if _is_kt(v)), None)
        raise TypeError(f"{_trace._user_line()}: a custom layer's call used {captured!r}, a tensor of the model "
                        f"that is not one of the layer's inputs (Keras 2.4+ refuses it too: 'an intermediate "
                        f"Keras symbolic input/output'); pass it to the layer as one more input, "
                        f"layer([x, ..., tensor]), and read it from the inputs in call")
    for fuse in (True, False):  # unfused when fusing would give the layer too many inputs
        g, kts, memo = _trace.Graph(), [], {"no_fusion": not fuse}
        a2 = _to_graph_fused(list(args), g, kts, memo)
        k2 = _to_graph_fused(dict(kwargs), g, kts, memo)
        outs = _outputs(fn(*a2, **k2), getattr(fn, "__name__", "operation"))
        if len(kts) <= _FUSE_MAX_INPUTS:
            break
    name = getattr(fn, "__name__", "op").strip("_")
    layer = TracedLayer(g.to_json(outs), "TracedOps", L.unique_name("tf_op_" + name), {"function": name},
                        len(outs))
    layer._fusable = (g, outs, list(kts))
    res = layer(kts if len(kts) > 1 else kts[0])
    for kt, o in zip(res if isinstance(res, list) else [res], outs):  # known here: no shape probe of the model
        if o.shape and o.shape[0] is None and None not in o.shape[1:]:
            kt._shape = tuple(o.shape[1:])
    return res


# ---- keras.layers.Layer subclasses ----------------------------------------------------------------

_INIT_DEFAULTS = {"GlorotUniform": {}, "GlorotNormal": {}, "HeUniform": {}, "HeNormal": {}, "LecunUniform": {},
                  "LecunNormal": {}, "Zeros": {}, "Ones": {}, "Orthogonal": {"gain": 1.0},
                  "RandomUniform": {"minval": -0.05, "maxval": 0.05}, "RandomNormal": {"mean": 0.0, "stddev": 0.05}}


def _initializer(init, shape, where):
    """(the Keras initializer name the graph carries, initial values set by Python or None): a
    name or an initializer with its defaults is the library's; RandomNormal/RandomUniform with
    other arguments and Python functions (shape, dtype) -> array give the values here (the graph
    then names the nearest default)."""
    import numpy as np
    if init is None:
        return "glorot_uniform", None
    if isinstance(init, str):
        return init, None
    cls = getattr(init, "class_name", None)
    full = init.get_config() if hasattr(init, "get_config") else {}
    cfg = {k: v for k, v in full.items() if k != "seed"}
    if cls in _INIT_DEFAULTS and all(cfg.get(k, d) == d for k, d in _INIT_DEFAULTS[cls].items()):
        return L._snake(cls), None
    shape = tuple(int(d) for d in shape)
    rng = np.random.default_rng(full.get("seed"))
    if cls == "RandomNormal":
        return "random_normal", rng.normal(cfg["mean"], cfg["stddev"], shape).astype(np.float32)
    if cls == "RandomUniform":
        return "random_uniform", rng.uniform(cfg["minval"], cfg["maxval"], shape).astype(np.float32)
    if cls is None and callable(init):
        v = np.asarray(init(shape, dtype="float32"), dtype=np.float32)
        if v.shape != shape:
            raise ValueError(f"{where}: the initializer gave shape {v.shape}, expected {shape}")
        return "zeros", v
    raise NotImplementedError(f"{where}: initializer {cls or type(init).__name__} {cfg} is not supported on a "
                              f"traced layer's weight")


def apply_initial_values(model, h):
    """Sets the weights whose initial values Python computed (_initializer), once the library has
    built the model."""
    values = {}
    for layer in model._all_layers():
        for wname, v in getattr(layer, "_initial_values", {}).items():
            values[f"{layer.name}/{wname}:0"] = v
    if not values:
        return
    ws = h.get_weights()
    for i, (n, _) in enumerate(h.weights_info()):
        if n in values:
            ws[i] = values[n]
    h.set_weights(ws)


def add_weight(self, *args, **kwargs):
    """Keras's Layer.add_weight, inside build (or call): a weight of the layer's traced graph.
    Keras 2 order (name, shape, dtype, initializer, ...) or Keras 3's (shape, initializer, dtype,
    trainable, ...), told apart by the first positional argument."""
    keras3 = bool(args) and isinstance(args[0], (list, tuple))
    order = ("shape", "initializer", "dtype", "trainable", "autocast", "regularizer", "constraint", "aggregation",
             "name") if keras3 else ("name", "shape", "dtype", "initializer", "regularizer", "trainable",
                                     "constraint")
    if len(args) > len(order):
        raise TypeError(f"{type(self).__name__}.add_weight: {len(args)} positional arguments")
    for k, v in zip(order, args):
        if k in kwargs:
            raise TypeError(f"{type(self).__name__}.add_weight: {k} given twice")
        kwargs[k] = v
    return _add_weight(self, **kwargs)


def _add_weight(self, name=None, shape=(), dtype=None, initializer=None, regularizer=None, trainable=True,
                constraint=None, **kwargs):
    g = getattr(self, "_tracing_graph", None)
    where = f"{type(self).__name__}.add_weight({name!r})"
    if getattr(self, "_functional_mode", False):
        raise NotImplementedError(f"{where}: {type(self).__name__} calls built-in layers and makes weights of its "
                                  f"own; a custom layer may do one or the other (not yet both)")
    if g is None:
        raise TraceError(f"{where}: weights are made while the layer is built (in build or call, when the layer is "
                         f"first called on a tensor)")
    constraint = _constraint_config(constraint, shape or (), where) if constraint is not None else None
    prefix = getattr(self, "_weight_prefix", "")
    if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
        raise NotImplementedError(f"{where}: dtype {dtype!r} (a traced layer's weights are float32)")
    wname = prefix + (name or f"variable_{len(g.weights)}")
    init_name, values = _initializer(initializer, shape or (), where)
    t = g.weight(wname, shape or (), init_name, True if trainable is None else trainable)
    if values is not None:  # set once the model is built; kept on the layer the graph belongs to
        owner = getattr(g, "owner", None) or self
        owner.__dict__.setdefault("_initial_values", {})[wname] = values
    if regularizer is not None:  # Keras adds the penalty to the loss: an added loss of the graph
        g.__dict__.setdefault("added_losses", []).append(_weight_penalty(regularizer, t, where))
    if constraint is not None and trainable is not False:  # Keras's optimizer projects what it updates
        g.__dict__.setdefault("constraints", {})[wname] = constraint
    return t


_CONSTRAINTS = ("MaxNorm", "NonNeg", "UnitNorm", "MinMaxNorm")


def _constraint_config(constraint, shape, where):
    """A weight's constraint as Keras serializes it ({"class_name", "config"}): Keras's MaxNorm,
    NonNeg, UnitNorm, MinMaxNorm, as objects, names or dicts; the library projects the weight with it
    after each optimizer update (the traced layer's "tnt_constraints")."""
    from tarantella.keras import constraints
    try:
        obj = constraints.get(constraint)
    except ValueError as e:
        raise ValueError(f"{where}: constraint {constraint!r}: {e}") from None
    cls = getattr(obj, "class_name", None)
    if cls not in _CONSTRAINTS:
        raise NotImplementedError(f"{where}: constraint {cls or getattr(obj, '__name__', type(obj).__name__)} on a "
                                  f"traced layer's weight is not supported (MaxNorm, NonNeg, UnitNorm or MinMaxNorm)")
    cfg = constraints.serialize(obj)
    axis = cfg["config"].get("axis", 0)
    for a in (axis if isinstance(axis, (list, tuple)) else [axis]) if cls != "NonNeg" else []:
        if not isinstance(a, int) or not -len(shape) <= a < len(shape):
            raise ValueError(f"{where}: {cls} axis {axis!r} for a weight of shape {tuple(shape)} (expected axes of "
                             f"the weight)")
    return cfg


def _weight_penalty(regularizer, w, where):
    """regularizer(w) on the traced weight: Keras's L1/L2/L1L2 (names or objects) or a function."""
    from tarantella.keras import ops, regularizers
    if isinstance(regularizer, (str, dict)):
        regularizer = regularizers.get(regularizer)
    cls = getattr(regularizer, "class_name", None)
    if cls in ("L1", "L2", "L1L2"):
        cfg = regularizer.get_config()
        l1, l2 = float(cfg.get("l1", 0.0)), float(cfg.get("l2", 0.0))
        terms = ([l1 * ops.sum(ops.abs(w))] if l1 else []) + ([l2 * ops.sum(ops.square(w))] if l2 else [])
        penalty = terms[0] if terms else ops.sum(w) * 0.0
        for t in terms[1:]:
            penalty = penalty + t
    elif cls is None and callable(regularizer):
        penalty = regularizer(w)
        if not isinstance(penalty, SymTensor):
            raise TraceError(f"{where}: the regularizer returned {type(penalty).__name__}, expected a tensor of the "
                             f"weight")
        if penalty.shape != ():
            penalty = ops.sum(penalty)
    else:
        raise NotImplementedError(f"{where}: regularizer {cls or type(regularizer).__name__} on a traced layer's "
                                  f"weight is not supported (L1, L2, L1L2 or a function)")
    return penalty


def _accepts(fn, arg):
    try:
        p = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return arg in p or any(x.kind == x.VAR_KEYWORD for x in p.values())


def _call_traced(layer, sym_inputs, kwargs, g, prefix=""):
    """Builds (once) and runs layer.call on the graph g's tensors."""
    layer._tracing_graph = g
    layer._weight_prefix = prefix
    _TRACING.append(g)
    try:
        if not getattr(layer, "built", False):
            shapes = [t.shape for t in sym_inputs] if isinstance(sym_inputs, (list, tuple)) else sym_inputs.shape
            layer.build(shapes)
            layer.built = True
            g.built_layers.append(layer)
        kw = {k: v for k, v in kwargs.items() if k in ("training", "mask") and _accepts(layer.call, k)}
        kw.update(kwargs.get("_kwargs", {}))
        return layer.call(sym_inputs, *kwargs.get("_args", ()), **kw)
    finally:
        _TRACING.pop()
        layer._tracing_graph = None


def _first_call_parameter(layer):
    try:
        params = list(inspect.signature(layer.call).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0].name if params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                                           params[0].POSITIONAL_OR_KEYWORD) else None


def _user_kwargs(kwargs):
    """A call's keyword arguments of the user's call signature (not Keras's training, nor a mask
    unless it is a tensor, which becomes an input of the traced call as the other tensors)."""
    return {k: v for k, v in kwargs.items() if k not in ("training", "mask", "inputs") or
            (k == "mask" and _is_kt(v))}


def intercept(layer, args, kwargs):
    """Layer.__call__'s first step: traces the user's layers; PASS lets the ordinary call go on."""
    if not args and "inputs" not in kwargs and getattr(layer, "_custom", False):
        first = _first_call_parameter(layer)  # call(logits=..., targets=...): the first one is the input
        if first in kwargs:
            kwargs = dict(kwargs)
            args = (kwargs.pop(first),)
    inputs = args[0] if args else kwargs.get("inputs")
    flat = _flat(inputs)
    if any(isinstance(t, SymTensor) for t in flat):  # a layer called inside a traced call
        if getattr(layer, "_custom", False):
            inner = {k: v for k, v in kwargs.items() if k in ("training", "mask")}
            return _call_traced(layer, inputs, {**inner, "_args": args[1:], "_kwargs": _user_kwargs(kwargs)},
                                flat[0].graph, layer.name + "/")
        simple = _weightless_builtin(layer, inputs)
        if simple is not None:
            return simple
        raise BuiltinInTrace(f"{layer.class_name} {layer.name!r}: a built-in layer called inside a Lambda or inside "
                             f"a custom layer with weights of its own is not supported yet; write it with "
                             f"tnt.keras.ops")
    if not getattr(layer, "_custom", False) and not isinstance(layer, Lambda):
        if flat and all(_is_data(v) for v in flat) and not isinstance(inputs, dict):
            if _TRACING:  # a built-in layer on constants inside a traced call: the call runs functionally
                raise BuiltinInTrace(f"{layer.class_name} {layer.name!r} called on a constant")
            if _FUNCTIONAL_INPUTS and _FUNCTIONAL_INPUTS[-1]:
                const = _batched_constant(_FUNCTIONAL_INPUTS[-1][0], inputs)
                return L.Layer.__call__(layer, const, *args[1:], **{k: v for k, v in kwargs.items() if k != "inputs"})
            return eager_call(layer, args, kwargs)
        return PASS
    if flat and all(_is_data(v) for v in flat) and not _TRACING and not isinstance(inputs, dict):
        return eager_call(layer, args, kwargs)
    if not flat or not all(_is_kt(t) for t in flat):
        raise TypeError(f"{layer.name} ({type(layer).__name__}): a custom layer is called on symbolic tensors "
                        f"(tnt.keras.Input or another layer's output) or on data (arrays)")
    if kwargs.get("mask") is None and _is_kt(inputs) and _accepts(layer.call, "mask") and \
            not isinstance(layer, Lambda):  # Keras passes the input's mask to a call that takes one
        m = keras_mask(inputs)
        if m is not None:
            kwargs = {**kwargs, "mask": m}
    extra, ukw = list(args[1:]), _user_kwargs(kwargs)
    extra_kts = [t for t in _flat([extra, ukw]) if _is_kt(t)]
    if ukw and not extra_kts and isinstance(layer, Lambda):
        raise TypeError(f"Lambda {layer.name!r}: unsupported call arguments {sorted(ukw)} (give them in arguments=)")
    extra_kts = extra_kts or ([None] if ukw else [])  # other keyword arguments: passed to call, traced
    if extra_kts and (isinstance(layer, Lambda) or getattr(layer, "_functional_mode", False)):
        raise NotImplementedError(f"{type(layer).__name__}: extra positional tensor arguments of a Lambda or of a "
                                  f"layer made of built-in layers are not supported")
    if getattr(layer, "_functional_mode", False):
        return _call_functional(layer, inputs, kwargs)
    if layer._graph_json is None or extra_kts:
        if layer._graph_json is not None:
            raise NotImplementedError(f"{type(layer).__name__}: a layer with extra positional tensor arguments "
                                      f"is called once")
        g, kts = _trace.Graph(), []
        sym = _to_graph(inputs, g, kts)
        sym_extra = _to_graph(extra, g, kts)
        sym_kw = _to_graph(ukw, g, kts)
        layer._all_inputs = list(kts)
        kwargs = {k: v for k, v in kwargs.items() if k in ("training", "mask")}
        if isinstance(layer, Lambda):
            outs = _outputs(layer._function(sym, **layer._arguments), f"Lambda {layer.name!r}")
        else:
            g.owner = layer  # the layer of the model whose graph this is (nested layers' weights included)
            try:
                outs = _outputs(_call_traced(layer, sym, {**kwargs, "_args": tuple(sym_extra), "_kwargs": sym_kw}, g),
                                f"{type(layer).__name__}.call")
            except BuiltinInTrace:
                if any(not w["name"].count("/") for w in g.weights):  # weights of its own
                    raise
                for built in g.built_layers:  # built again on the model's tensors
                    built.built = False
                layer._functional_mode = True
                return _call_functional(layer, inputs, kwargs)
        added = list(getattr(g, "added_losses", []))
        layer._graph_json = g.to_json(outs + added)
        layer._n_traced_outputs = len(outs)
        layer._n_added_losses = len(added)
        layer._weight_constraints = dict(getattr(g, "constraints", {}))
    if extra_kts:  # the extra tensors are more inputs of the layer, after the first argument's
        all_in = layer._all_inputs
        return L.Layer.__call__(layer, all_in if len(all_in) > 1 else all_in[0],
                                **{k: v for k, v in kwargs.items() if k == "training"})
    return PASS


_ACTIVATIONS = {"relu", "tanh", "sigmoid", "softmax", "gelu", "elu", "softplus", "softsign", "silu", "swish",
                "relu6", "log_softmax", "linear", None}


def _weightless_builtin(layer, x):
    """Built-in layers without weights that are one operation (Dropout, Activation), recorded into
    the trace; None for the others."""
    from tarantella.keras import ops
    cfg = layer._args if layer._config is None else layer._config
    if not isinstance(x, SymTensor):
        return None
    if layer.class_name == "Dropout" and cfg.get("noise_shape") is None:
        seed = cfg.get("seed")
        return _trace.record("dropout", [x], {"rate": float(cfg["rate"]), "training_only": True,
                                              "seed": None if seed is None else int(seed)}, lambda a: a)
    if layer.class_name == "Activation":
        act = cfg.get("activation")
        act = getattr(act, "__name__", act)
        if act in _ACTIVATIONS:
            return x if act in ("linear", None) else getattr(ops, "silu" if act == "swish" else act)(x)
    return None


_FUNCTIONAL_INPUTS = []  # the model tensors of the custom layers whose call runs functionally, innermost last
_TRACING = []            # the graphs of the traced calls under way, innermost last


def _call_functional(layer, inputs, kwargs):
    """A custom layer made of built-in layers (a Transformer block): its call runs on the model's
    tensors, so its layers and operations become the model's own (as if written inline)."""
    if not layer.built:
        layer.build([t.shape for t in inputs] if isinstance(inputs, (list, tuple)) else inputs.shape)
        layer.built = True
    kw = {k: v for k, v in kwargs.items() if k in ("training", "mask") and _accepts(layer.call, k)}
    _FUNCTIONAL_INPUTS.append([t for t in _flat(inputs) if _is_kt(t)])
    try:
        return layer.call(inputs, **kw)
    finally:
        _FUNCTIONAL_INPUTS.pop()


def eager_call(layer, args, kwargs):
    """layer(x) on data, outside a model (Keras runs the layer eagerly): a model of this one call runs
    on x (the layer keeps its weights across such calls); the result is a tensor as model(x) gives,
    with _keras_mask where the layer makes or passes a mask (compute_mask)."""
    import numpy as np
    from tarantella.keras.engine import Model
    from tarantella.keras.model_api import as_tensor
    data = args[0] if args else kwargs.get("inputs")
    parts = list(data) if isinstance(data, (list, tuple)) and all(np.ndim(p) > 0 for p in data) else [data]
    arrays = [np.asarray(p) for p in parts]
    if any(a.ndim == 0 for a in arrays):
        raise TypeError(f"{layer.name} ({type(layer).__name__}): called on a scalar; layers take a batch of samples")
    in_mask = getattr(parts[0], "_keras_mask", None) if len(parts) == 1 else None
    ins = [L.Input(shape=a.shape[1:]) for a in arrays]
    kw = {k: v for k, v in kwargs.items() if k not in ("inputs", "mask", "training")}
    out = layer(ins if len(ins) > 1 else ins[0], *args[1:], **kw)
    model = Model(ins if len(ins) > 1 else ins[0], out)
    layer._eager_model = model  # the layer's weights live there (get_weights, the next call)
    res = model.predict(arrays if len(arrays) > 1 else arrays[0], batch_size=max(1, int(arrays[0].shape[0])),
                        verbose=0)
    t = as_tensor(res)
    mask = layer.compute_mask(data if len(parts) > 1 else arrays[0], mask=in_mask)
    for k, o in enumerate(t if isinstance(t, list) else [t]):
        mk = mask[k] if isinstance(mask, (list, tuple)) else mask
        if mk is not None:
            o._keras_mask = as_tensor(np.asarray(mk).astype(bool))
    return t


def compute_mask(self, inputs, mask=None):
    """Keras's Layer.compute_mask: Embedding(mask_zero) and Masking make a mask from their input;
    other layers pass the input's mask on when they support masking, else none."""
    from tarantella.keras import ops
    cfg = (self._args if self._config is None else self._config) if hasattr(self, "_args") else {}
    if getattr(self, "class_name", None) == "Embedding":
        return ops.not_equal(inputs, 0) if cfg.get("mask_zero") else None
    if getattr(self, "class_name", None) == "Masking":
        return ops.any(ops.not_equal(inputs, float(cfg.get("mask_value", 0.0))), axis=-1)
    return mask if getattr(self, "supports_masking", not getattr(self, "_custom", False)) else None


_PASSES_MASK = {"Dense", "Activation", "Dropout", "LayerNormalization", "BatchNormalization", "TimeDistributed",
                "SpatialDropout1D", "GaussianNoise", "GaussianDropout", "ActivityRegularization", "AlphaDropout"}
_RECURRENT = {"LSTM", "GRU", "SimpleRNN", "Bidirectional", "ConvLSTM2D"}


def keras_mask(kt):
    """KerasTensor._keras_mask: the mask Keras attaches to a model tensor (None when none), from
    the layer that made it: Embedding(mask_zero)/Masking make one, the user's layers by their
    compute_mask, elementwise built-in layers and sequence-returning recurrent layers pass theirs."""
    layer = kt._layer
    if isinstance(layer, L.InputLayer) or not layer._nodes:
        return None
    ins = layer._nodes[kt._node_index].inputs
    inputs = ins[0] if len(ins) == 1 else list(ins)
    in_mask = keras_mask(ins[0]) if ins and _is_kt(ins[0]) else None
    cls = getattr(layer, "class_name", None)
    cfg = (layer._args if layer._config is None else layer._config) if hasattr(layer, "_args") else {}
    if getattr(layer, "_custom", False) or cls in ("Embedding", "Masking"):
        m = layer.compute_mask(inputs, mask=in_mask)
        return m[kt._tensor_index] if isinstance(m, (list, tuple)) else m
    if cls in _PASSES_MASK or (cls in _RECURRENT and cfg.get("return_sequences")):
        return in_mask
    return None


def _is_data(v):
    import numpy as np
    return isinstance(v, (np.ndarray, np.generic, int, float)) or (
        isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, (int, float, np.generic)) for x in v))


def _batched_constant(ref, value):
    """A constant (positions = ops.arange(maxlen)) as a model tensor: the value for every sample of
    ref's batch, so that a built-in layer (an Embedding) runs on it inside the model."""
    import numpy as np
    from tarantella.keras import ops
    a = np.asarray(value, np.float32)

    def constant(r):
        flat = ops.reshape(r, (-1, int(np.prod([int(d) for d in r.shape[1:]], dtype=np.int64))))
        zero = ops.reshape(ops.zeros_like(flat[:, :1]), (-1,) + (1,) * a.ndim)
        return zero + a
    constant.__name__ = "constant"
    return functional_op(constant, (ref,), {})


def sequential_json(model, shape):
    """A Sequential holding custom layers or Lambdas: its layers called in turn on a symbolic input
    (each traced on its input's shape), written as the functional graph of those calls."""
    from tarantella.keras.engine import functional_json
    name = model._input_layer.name if model._input_layer is not None else f"{model._layers[0].name}_input"
    inp = L.Input(shape=tuple(shape), name=name)
    x = inp
    for layer in model._layers:
        x = layer(x)
    return functional_json([inp], [x], model.name)


def init_layer(layer, kwargs):
    """Layer.__init__ of a subclass of the user's own."""
    from tarantella.keras.utils import get_registered_name
    bad = set(kwargs) - set(L._BASE_KWARGS)
    if bad:
        raise TypeError(f"{type(layer).__name__}: unexpected keyword arguments {sorted(bad)} for Layer.__init__")
    layer.class_name = get_registered_name(type(layer))
    _base_init(layer, kwargs)
    layer._custom = True
    layer.built = False
    layer._graph_json = None
    layer._n_traced_outputs = 1
    layer._tracing_graph = None


def custom_config(layer):
    """The config of a user's layer in a model: its get_config() and the traced graph."""
    if layer._config is not None:
        return dict(layer._config)
    if layer._graph_json is None:
        raise ValueError(f"layer {layer.name!r} ({type(layer).__name__}) has not been called on a tensor yet")
    cfg = dict(type(layer).get_config(layer))
    bad = [k for k, v in cfg.items() if not isinstance(v, (str, int, float, bool, type(None), list, tuple, dict))]
    if bad:
        raise TypeError(f"{type(layer).__name__}.get_config(): values of {bad} are not JSON (numbers, strings, "
                        f"lists, dicts)")
    cfg["name"] = layer.name
    cfg["tnt_ops"] = layer._graph_json
    if getattr(layer, "_n_added_losses", 0):
        cfg["tnt_losses"] = layer._n_added_losses
    if getattr(layer, "_weight_constraints", None):
        cfg["tnt_constraints"] = dict(layer._weight_constraints)
    return L.serialize(cfg)


def base_get_config(layer):
    """Layer.get_config of the user's layers (what super().get_config() returns)."""
    cfg = {"name": layer.name, "trainable": layer.trainable, "dtype": "float32"}
    if layer._input_shape is not None:
        cfg["batch_input_shape"] = [None] + list(layer._input_shape)
    return cfg


# ---- keras.layers.Lambda -------------------------------------------------------------------------

class Lambda(TracedLayer):
    """keras.layers.Lambda(function, output_shape=None, mask=None, arguments=None): the function
    traced once on the symbolic inputs (output_shape is then known and not needed)."""

    class_name = "Lambda"

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {type(function).__name__}")
        if mask is not None:
            raise NotImplementedError("Lambda: mask is not supported (masks do not pass a traced layer)")
        TracedLayer.__init__(self, None, "Lambda", kwargs.get("name") or L.unique_name("lambda"),
                             {"function": getattr(function, "__name__", "lambda")})
        self._function = function
        self._arguments = dict(arguments or {})
        self.trainable = kwargs.get("trainable", True)


def _install():
    """The user-facing methods of keras.layers.Layer for subclasses (layers.py calls the hooks)."""
    L.Layer.add_weight = add_weight
    L.Layer.build = lambda self, input_shape: setattr(self, "built", True)
    L.Layer.compute_output_shape = lambda self, input_shape: None
    L.Layer.add_loss = _add_loss
    L.Layer.compute_mask = compute_mask
    if not hasattr(L.Layer, "call"):
        L.Layer.call = _call_not_defined
    L.Lambda = Lambda


def _add_loss(self, losses, inputs=None, **kwargs):
    """Layer.add_loss inside call: each loss (reduced to a scalar by its sum, as Keras 3) becomes an
    output of the layer's traced graph that the library adds to the loss fit minimizes and reports
    (a batch's value counts as the batch's: on p ranks each rank's value weighted by its share)."""
    import numpy as np
    from tarantella.keras import ops
    g = getattr(self, "_tracing_graph", None)
    if g is None:
        raise NotImplementedError(f"{type(self).__name__}.add_loss: losses are added inside call (while the layer "
                                  f"is traced); model.add_loss and add_loss outside call are not supported yet")
    for v in (losses if isinstance(losses, (list, tuple)) else [losses]):
        if callable(v) and not isinstance(v, SymTensor):
            v = v()
        if not isinstance(v, SymTensor):
            v = _trace.constant(g, np.float32(np.sum(np.asarray(v, np.float32))), "float32")
        if v.graph is not g:
            raise TraceError(f"{type(self).__name__}.add_loss: the loss is a tensor of another traced function")
        if v.shape != ():
            v = ops.sum(v)
        if v.dtype != "float32":
            v = ops.cast(v, "float32")
        g.__dict__.setdefault("added_losses", []).append(v)


def _call_not_defined(self, inputs, *a, **k):
    raise NotImplementedError(f"{type(self).__name__}: a Layer subclass must define call(inputs)")


_install()


def attach_loss(output, loss_tensor):
    """A traced layer that passes output through and adds loss_tensor (a model tensor; its
    operations fused into the layer's graph, summed when not a scalar) to the loss; returns the
    passed-through output, which takes output's place in the model."""
    from tarantella.keras import ops
    g, kts, memo = _trace.Graph(), [], {}
    out0 = _to_graph(output, g, kts)
    loss = _to_graph_fused(loss_tensor, g, kts, memo)
    if loss.shape != ():
        loss = ops.sum(loss)
    if loss.dtype != "float32":
        loss = ops.cast(loss, "float32")
    through = ops.identity(out0)
    layer = TracedLayer(g.to_json([through, loss]), "TracedOps", L.unique_name("add_loss"),
                        {"function": "add_loss", "tnt_losses": 1}, 1)
    layer._n_added_losses = 1
    return layer(kts if len(kts) > 1 else kts[0])


def model_add_loss(model, losses):
    """Model.add_loss(tensor) on a functional model: the loss, computed from the model's tensors
    (its operations fused into one graph), becomes an added loss of a traced layer placed on the
    model's first output (which it passes through), and the model is built again with its weights."""
    import numpy as np
    from tarantella.keras.engine import _walk
    if getattr(model, "_kind", None) != "functional":
        raise NotImplementedError(f"{type(model).__name__}.add_loss: losses added to a Sequential or subclassed "
                                  f"model are not supported (add them in a layer's call)")
    items = losses if isinstance(losses, (list, tuple)) else [losses]
    for v in items:
        if callable(v) and not _is_kt(v):
            v = v()
        if not _is_kt(v):
            raise NotImplementedError(f"{model.name}.add_loss: {type(v).__name__} (a loss computed from the "
                                      f"model's tensors is supported)")
        model._outputs[0] = attach_loss(model._outputs[0], v)
    old = {}
    if model._h is not None:
        old = {n: w for (n, _), w in zip(model._h.weights_info(), model._h.get_weights())}
    pairs, _ = _walk(model._outputs)
    seen, layers = set(), []
    for layer, ni in sorted(pairs, key=lambda p: p[0]._nodes[p[1]].order):
        if id(layer) not in seen:
            seen.add(id(layer))
            layers.append(layer)
    model._layers = layers
    model._h = None
    h = model._handle()
    ws = h.get_weights()
    for i, (n, _) in enumerate(h.weights_info()):
        if n in old and np.shape(old[n]) == np.shape(ws[i]):
            ws[i] = old[n]
    h.set_weights(ws)
