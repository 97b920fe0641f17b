"""Losses and metrics of the user's own: Python functions of (y_true, y_pred) and
keras.losses.Loss subclasses with call(y_true, y_pred), traced once on symbolic tensors
(keras/_trace.py) into an operation graph that the library runs each batch and differentiates
(tnt_model_set_loss_graph, tnt_model_add_metric_graph). y_true is traced with the labels' shape
per sample (y_pred's until fit sees the data), y_pred with the output's."""
import json

import numpy as np

from tarantella.keras import _trace
from tarantella.keras._trace import SymTensor, TraceError


def is_custom_loss(loss):
    """A Python loss of the user's own (not one of the library's names or classes)."""
    from tarantella.keras import losses as LS
    if isinstance(loss, LS.Loss):
        return getattr(type(loss), "call", None) is not None
    if isinstance(loss, (str, type, list, tuple, dict)) or loss is None:
        return False
    return callable(loss)


def is_custom_metric(metric):
    """A metric function of the user's own (not a name, class or object of the library)."""
    from tarantella.keras import losses as LS, metrics as M
    if isinstance(metric, (str, type, list, tuple, dict, M.Metric, LS._LossFunction)) or metric is None:
        return False
    return callable(metric) and not hasattr(metric, "_spec")


def _name_of(fn):
    return getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__


def trace(fn, y_shape, p_shape, what):
    """The JSON of fn(y_true, y_pred) traced: inputs y_true (None,) + y_shape and y_pred
    (None,) + p_shape, one output (per-sample values or a scalar)."""
    from tarantella.keras import losses as LS
    g = _trace.Graph()
    yt = g.input((None,) + tuple(int(d) for d in y_shape))
    yp = g.input((None,) + tuple(int(d) for d in p_shape))
    call = fn.call if isinstance(fn, LS.Loss) else fn
    out = call(yt, yp)
    if isinstance(out, (list, tuple)) and len(out) == 1:
        out = out[0]
    if not isinstance(out, SymTensor) or out.graph is not g:
        raise TraceError(f"{what} {_name_of(fn)!r} returned {type(out).__name__}, expected a tensor computed from "
                         f"y_true and y_pred (with tnt.keras.ops, keras.backend or TensorFlow functions)")
    if out.dtype != "float32":
        out = _trace.record("cast", [out], {"dtype": "float32"}, lambda a: a.astype(np.float32))
    if what == "loss":  # Keras: "No gradients provided for any variable"
        cut = _trace.gradient_cut(g, yp, out)
        if cut is not None:
            code = getattr(call, "__code__", None)
            where = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""
            raise TraceError(f"loss {_name_of(fn)!r}{where} has no gradient with respect to y_pred: "
                             + (f"the operation at {cut} has none, so training would not change the weights"
                                if cut != "?" else "its result does not depend on y_pred"))
    shape = out.shape
    if shape and shape[0] is not None:
        raise TraceError(f"{what} {_name_of(fn)!r}: its result has shape {shape}: expected the value per sample "
                         f"(batch axis first) or a scalar")
    js = g.to_json([out])
    js["name"] = str(_name_of(fn))  # the loss's name in a saved file's training_config, as Keras writes it
    return json.dumps(js)


def _per_output(spec, names):
    """compile's loss (or a metric list entry) as one entry per output."""
    if isinstance(spec, dict):
        return [spec.get(n) for n in names]
    if isinstance(spec, (list, tuple)):
        return list(spec)
    return [spec] * len(names)


def _output_shapes(model):
    return [tuple(s) for s in model._h.output_shapes()]


def bind(model):
    """After the library's compile: the user's losses and metric functions of model._compiled,
    traced (y_true shaped as y_pred, or as the labels fit saw last) and handed to the library."""
    c = model._compiled
    h = model._h
    names = model.output_names
    shapes = _output_shapes(model)
    label_shapes = c.get("label_shapes") or [None] * len(names)
    c["custom_losses"], c["custom_metrics"], c["custom_pending"] = [], [], []

    def traced(fn, o, what):
        """The graph, or None when the labels' shape is a guess (y_pred's) that the function does not
        take (sparse labels): traced again once fit or evaluate sees the labels."""
        if label_shapes[o] is not None:
            return trace(fn, label_shapes[o], shapes[o], what), tuple(label_shapes[o])
        try:
            return trace(fn, shapes[o], shapes[o], what), tuple(shapes[o])
        except Exception as e:  # noqa: BLE001 (reported when the labels are known, or never come)
            if isinstance(e, TraceError) and " on shapes " not in str(e):
                raise  # not about shapes: the labels' shape would not help
            c["custom_pending"].append((o, e))
            return None, None

    for k, loss in enumerate(_per_output(c["loss"], names)):
        if isinstance(loss, NoLabelsLoss):
            g = _trace.Graph()
            out = loss(None, g.input((None,) + tuple(int(d) for d in shapes[k])))
            h.set_loss_graph(k, json.dumps(g.to_json([out])))
            continue
        if is_custom_loss(loss):
            js, ys = traced(loss, k, "loss")
            if js is not None:
                h.set_loss_graph(k, js)
            c["custom_losses"].append((k, loss, ys))
    for k, fn, name in c.get("metric_functions", []):
        if isinstance(k, str):
            k = names.index(k)
        outs = range(len(names)) if k is None else [k]
        for o in outs:
            if is_stateful_metric(fn):
                ys = tuple(label_shapes[o] if label_shapes[o] is not None else shapes[o])
                try:
                    update_json, result_json = trace_stateful(fn, ys, shapes[o], weighted=name.startswith("~"))
                except TraceError as e:
                    if label_shapes[o] is not None or " on shapes " not in str(e):
                        raise
                    c["custom_pending"].append((o, e))
                    ys = None
                else:
                    h.add_metric_graph(name, o, update_json, result_json)
                c["custom_metrics"].append((o, fn, name, ys))
                continue
            js, ys = traced(fn, o, "metric")
            if js is not None:
                h.add_metric_graph(name, o, js)
            c["custom_metrics"].append((o, fn, name, ys))


def labels_seen(model, y, ds=None):
    """Before fit/evaluate: if the labels of an output with a custom loss or metric have another
    shape than traced, trace again with theirs (compile again, as Keras traces per input spec).
    y: the labels given, or None (a dataset's: its element spec, one output only)."""
    c = model._compiled
    if c is None or not (c.get("custom_losses") or c.get("custom_metrics")):
        return
    names = model.output_names
    if y is None:
        spec = getattr(ds, "element_spec", None)
        if len(names) == 1 and isinstance(spec, tuple) and len(spec) >= 2 and hasattr(spec[1], "shape"):
            shape = tuple(spec[1].shape)
            y = np.zeros((1,) + (shape[1:] if ds.is_batched else shape), np.float32)
    if y is None:
        ys = []
    elif isinstance(y, dict):
        ys = [y.get(n) for n in names]
    elif isinstance(y, (list, tuple)) and len(names) > 1:
        ys = list(y)
    else:
        ys = [y]
    shapes = [None if a is None else tuple(np.shape(a)[1:]) for a in ys] if len(ys) == len(names) else None
    traced = {k: s for k, _, s in c["custom_losses"]}
    traced.update({o: s for o, _, _, s in c["custom_metrics"]})
    if shapes is not None and any(shapes[k] is not None and shapes[k] != s for k, s in traced.items()):
        c["label_shapes"] = shapes
        model._apply_compile()
    if c.get("custom_pending"):
        o, e = c["custom_pending"][0]
        raise TraceError(f"the loss or metric function of output {names[o]!r} could not be traced with labels shaped "
                         f"as the output {_output_shapes(model)[o]} (the labels' shape is not known here: give y as "
                         f"arrays): {e}") from e


def split_metrics(metrics):
    """compile's metrics without the user's functions, and those as (output index, output name or
    None for all, fn, name)."""
    fns = []
    if metrics is None:
        return None, fns

    from tarantella.keras import _value_metrics as VM

    def strip(lst, k):
        keep = []
        for m in lst:
            if isinstance(m, str) and m == "r2_score":  # Keras 3's name of R2Score
                from tarantella.keras.metrics import R2Score
                m = R2Score()
            if isinstance(m, VM.MeanMetricWrapper):  # the mean of its function: a metric function
                fn, kw = m._fn, m._fn_kwargs
                fns.append((k, (lambda a, b: fn(a, b, **kw)) if kw else fn, m.name))
            elif isinstance(m, VM._ValueMetric) or (isinstance(m, type) and issubclass(m, VM._ValueMetric)):
                (m() if isinstance(m, type) else m)._c_name()  # Mean and Sum take values: an error
            elif is_stateful_metric(m):
                m = m() if isinstance(m, type) else m
                fns.append((k, m, m.name or _name_of(m)))
            elif is_custom_metric(m):
                fns.append((k, m, _name_of(m)))
            else:
                keep.append(m)
        return keep

    if isinstance(metrics, dict):
        out = {}
        for key, v in metrics.items():
            vs = strip(v if isinstance(v, (list, tuple)) else [v], key)
            if vs:
                out[key] = vs
        return out, fns
    if isinstance(metrics, (list, tuple)) and metrics and all(isinstance(v, (list, tuple)) for v in metrics):
        return [strip(list(v), k) for k, v in enumerate(metrics)], fns
    if not isinstance(metrics, (list, tuple)):
        metrics = [metrics]
    return strip(list(metrics), None), fns


# ---- keras.metrics.Metric subclasses with state -------------------------------------------------

def is_stateful_metric(metric):
    """A Metric subclass of the user's own: its update_state and result (state by add_weight)."""
    from tarantella.keras import metrics as M
    if isinstance(metric, type) and issubclass(metric, M.Metric):
        return type.__getattribute__(metric, "update_state") is not M.Metric.update_state
    return isinstance(metric, M.Metric) and type(metric).update_state is not M.Metric.update_state


class StateVariable(SymTensor):
    """A Metric's add_weight variable: while update_state is traced, assign_add records the
    batch's increment (the state is the sum of increments over batches and ranks); while result
    is traced, it is an input of the result graph."""

    def __init__(self, metric, name, shape, dtype):
        super().__init__(None, ("state", name), [np.zeros(shape, np.float32)] * 2)
        self.metric, self.name, self._shape, self._dtype = metric, name, tuple(shape), dtype
        self._increment = None

    def _bind(self, g, key, dummy):
        self.graph, self._key, self._dummies = g, key, [dummy, dummy]

    @property
    def value(self):
        return self

    def read_value(self):
        return self

    def assign_add(self, value):
        from tarantella.keras import _compat_math, ops
        if getattr(self, "_mode", None) != "update":
            raise TraceError(f"{_trace._user_line()}: {self.name}.assign_add outside update_state: a metric's state "
                             f"changes only in update_state")
        if isinstance(value, _compat_math.BatchDim):  # tf.shape(y_pred)[0]: the batch's samples
            like = value.like
            flat = ops.reshape(like, (-1, int(np.prod([int(d) for d in like.shape[1:]], dtype=np.int64))))
            value = ops.sum(ops.ones_like(flat[:, 0]))
        if value is None:
            raise TraceError(f"{_trace._user_line()}: {self.name}.assign_add(None): the batch size is ops.shape(x)[0] "
                             f"(x.shape[0] is None while tracing)")
        if not isinstance(value, SymTensor):
            value = _trace.constant(self._graph_for_update, np.asarray(value, np.float32), "float32")
        if value.dtype != "float32":
            value = ops.cast(value, "float32")
        if tuple(value.shape) != self._shape:
            value = ops.reshape(value, self._shape) if int(np.prod(value.shape or (1,))) == int(
                np.prod(self._shape or (1,))) and None not in value.shape else value
        self._increment = value if self._increment is None else self._increment + value
        return self

    def assign(self, value):
        if getattr(self, "_mode", None) == "reset":
            return self
        raise TraceError(f"{_trace._user_line()}: {self.name}.assign in update_state: a metric's state is summed "
                         f"over batches and ranks, so update_state adds to it with assign_add")

    def assign_sub(self, value):
        from tarantella.keras import ops
        return self.assign_add(ops.negative(value) if isinstance(value, SymTensor) else -np.asarray(value))

    def numpy(self):
        raise TraceError(f"{self.name}: the state of a metric lives in the library during fit and evaluate; read the "
                         f"metric's value in the logs")


def state_variable(metric, args, kwargs):
    """Metric.add_weight / add_variable of a subclass."""
    keras2 = bool(args) and isinstance(args[0], str)
    order = ("name", "shape", "aggregation", "synchronization", "initializer", "dtype") if keras2 else (
        "shape", "initializer", "dtype", "aggregation", "name")
    for k, v in zip(order, args):
        kwargs[k] = v
    shape = tuple(int(d) for d in (kwargs.get("shape") or ()))
    init = kwargs.get("initializer")
    init_name = getattr(init, "class_name", init)
    if init is not None and str(init_name).replace("_", "").lower() not in ("zeros", "zero"):
        raise NotImplementedError(f"{type(metric).__name__}.add_weight: initializer {init!r} (a metric's state starts "
                                  f"at zeros here)")
    states = metric.__dict__.setdefault("_tnt_state", [])
    v = StateVariable(metric, kwargs.get("name") or f"variable_{len(states)}", shape, kwargs.get("dtype"))
    states.append(v)
    return v


def trace_stateful(metric, y_shape, p_shape, weighted=False):
    """(update graph JSON, result graph JSON) of a Metric subclass. weighted (one of compile's
    weighted_metrics): update_state gets the sample weights, a third input of shape (None,) (the
    library feeds ones when fit has none); otherwise sample_weight=None, as Keras 2.4+ calls it."""
    from tarantella.keras import ops
    if hasattr(metric, "_tnt_build"):  # a library metric whose state's shape follows the outputs (R2Score)
        metric._tnt_build(tuple(y_shape), tuple(p_shape))
    states = metric.__dict__.get("_tnt_state", [])
    name = type(metric).__name__
    if not states:
        raise ValueError(f"{name}: a Metric subclass needs state made with add_weight/add_variable")
    g = _trace.Graph()
    yt = g.input((None,) + tuple(int(d) for d in y_shape))
    yp = g.input((None,) + tuple(int(d) for d in p_shape))
    for v in states:
        v._mode, v._increment, v._graph_for_update = "update", None, g
        v._bind(g, ("state0", v.name), np.zeros(v._shape, np.float32))
    try:
        import inspect
        params = inspect.signature(metric.update_state).parameters
        takes = "sample_weight" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
        if weighted and not takes:  # Keras calls update_state(y_true, y_pred, sample_weight=...)
            raise TypeError(f"{name}.update_state takes no sample_weight argument, which a metric in "
                            f"weighted_metrics receives")
        sw = g.input((None,)) if weighted else None
        metric.update_state(yt, yp, **({"sample_weight": sw} if takes else {}))
        outs = []
        for v in states:
            inc = v._increment
            if inc is None:  # never added to in update_state: stays zero
                inc = ops.zeros_like(ops.sum(yp)) if v._shape == () else _trace.constant(
                    g, np.zeros(v._shape, np.float32), "float32")
            if tuple(inc.shape) != v._shape:
                raise TraceError(f"{name}.update_state: {v.name} of shape {v._shape} receives an increment of shape "
                                 f"{tuple(inc.shape)} (assign_add a value reduced over the batch)")
            if not any(t is inc for _, _, _, o in g.nodes for t in o):  # an input or constant: copy it
                inc = ops.identity(inc) if hasattr(ops, "identity") else inc + 0.0
            outs.append(inc)
        update_json = json.dumps(g.to_json(outs))
    finally:
        for v in states:
            v._mode = None
    r = _trace.Graph()
    for v in states:
        v._bind(r, ("input", len(r.inputs)), np.zeros(v._shape, np.float32))
        r.inputs.append((v._shape, v))
    for v in states:
        v._mode = "result"
    try:
        out = metric.result()
    finally:
        for v in states:
            v._mode = None
    if isinstance(out, StateVariable) or (isinstance(out, SymTensor) and out.graph is r and
                                          not any(t is out for _, _, _, o in r.nodes for t in o)):
        out = out + 0.0  # the result is a state variable itself: an operation makes it an output
    if not isinstance(out, SymTensor) or out.graph is not r:
        raise TraceError(f"{name}.result returned {type(out).__name__}, expected a tensor computed from its state")
    if out.dtype != "float32":
        out = ops.cast(out, "float32")
    return update_json, json.dumps(r.to_json([out]))


# ---- the library's losses on traced values (a loss object called inside a custom layer) --------

def _traced(v):
    return isinstance(v, SymTensor)


def any_traced(*vs):
    return any(_traced(v) for v in vs)


def any_model_tensor(*vs):
    from tarantella.keras.layers import KerasTensor
    return any(isinstance(v, KerasTensor) for v in vs)


def builtin_per_sample(name, y_true, y_pred, from_logits=False, label_smoothing=0.0, delta=None):
    """Keras's formula of a built-in loss per sample (reduced over the last axis), on traced values."""
    from tarantella.keras import ops
    eps = 1e-7
    y = ops.cast(y_true, "float32") if _traced(y_true) else np.asarray(y_true, np.float32)
    if name == "mean_squared_error":
        return ops.mean(ops.square(y_pred - y), axis=-1)
    if name == "mean_absolute_error":
        return ops.mean(ops.abs(y_pred - y), axis=-1)
    if name == "binary_crossentropy":
        if label_smoothing:
            y = y * (1.0 - label_smoothing) + 0.5 * label_smoothing
        if from_logits:  # max(x, 0) - x y + log(1 + exp(-|x|))
            per = ops.relu(y_pred) - y_pred * y + ops.log1p(ops.exp(-ops.abs(y_pred)))
        else:
            p = ops.clip(y_pred, eps, 1.0 - eps)
            per = -(y * ops.log(p + eps) + (1.0 - y) * ops.log(1.0 - p + eps))
        return ops.mean(per, axis=-1)
    if name in ("categorical_crossentropy", "sparse_categorical_crossentropy"):
        classes = int(y_pred.shape[-1])
        if name.startswith("sparse"):
            idx = ops.cast(y, "int32")
            if len(idx.shape if _traced(idx) else np.shape(idx)) == len(y_pred.shape):
                idx = ops.squeeze(idx, axis=-1)
            y = ops.one_hot(idx, classes)
        if label_smoothing:
            y = y * (1.0 - label_smoothing) + label_smoothing / classes
        if from_logits:
            return -ops.sum(y * ops.log_softmax(y_pred, axis=-1), axis=-1)
        p = ops.clip(y_pred / ops.sum(y_pred, axis=-1, keepdims=True), eps, 1.0 - eps)
        return -ops.sum(y * ops.log(p), axis=-1)
    if name in ("kl_divergence", "kullback_leibler_divergence"):
        t, p = ops.clip(y, eps, 1.0), ops.clip(y_pred, eps, 1.0)
        return ops.sum(t * ops.log(t / p), axis=-1)
    if name == "mean_absolute_percentage_error":
        return 100.0 * ops.mean(ops.abs((y - y_pred) / ops.maximum(ops.abs(y), eps)), axis=-1)
    if name == "mean_squared_logarithmic_error":
        return ops.mean(ops.square(ops.log(ops.maximum(y_pred, eps) + 1.0) - ops.log(ops.maximum(y, eps) + 1.0)),
                        axis=-1)
    if name == "poisson":
        return ops.mean(y_pred - y * ops.log(y_pred + eps), axis=-1)
    if name in ("log_cosh", "logcosh"):
        d = y_pred - y
        return ops.mean(d + ops.softplus(-2.0 * d) - float(np.log(2.0)), axis=-1)
    if name == "huber":
        d = float(delta or 1.0)
        err = ops.abs(y_pred - y)
        return ops.mean(ops.where(err <= d, 0.5 * ops.square(err), d * err - 0.5 * d * d), axis=-1)
    raise NotImplementedError(f"loss {name!r} called on traced tensors (inside a custom layer) is not supported; "
                              f"write it with tnt.keras.ops")


def builtin_loss_value(loss, y_true, y_pred, sample_weight=None):
    """A loss object's __call__ on traced values: the mean over the batch of the weighted
    per-sample losses (Keras's sum_over_batch_size)."""
    from tarantella.keras import ops
    if loss.ignore_class is not None:
        raise NotImplementedError(f"{type(loss).__name__}: ignore_class on traced tensors is not supported")
    per = builtin_per_sample(loss._name, y_true, y_pred, loss.from_logits, loss.label_smoothing, loss.delta)
    if sample_weight is not None:
        w = ops.cast(sample_weight, "float32") if _traced(sample_weight) else np.asarray(sample_weight, np.float32)
        w = ops.reshape(w, (-1,)) if len(per.shape) == 1 else w
        per = per * w
    return ops.mean(per)


class NoLabelsLoss:
    """compile(loss=None) on a model whose layers add their losses (add_loss): each output's loss is
    zero and reads no labels (y_true of zero values per sample), so fit takes x alone."""
    __name__ = "no_loss"
    labels_shape = (0,)

    def __call__(self, y_true, y_pred):
        from tarantella.keras import ops
        return ops.sum(ops.reshape(y_pred, (-1, int(np.prod(y_pred.shape[1:], dtype=np.int64)))) * 0.0, axis=-1)


def fill_missing_losses(loss, names):
    """Keras's loss=[None, ...] or a dict without some outputs: those outputs have no loss (a zero
    loss that reads no labels, so y holds the other outputs' labels only, as Keras takes them)."""
    if isinstance(loss, dict) and len(names) > 1:
        unknown = sorted(set(loss) - set(names))
        if unknown:
            raise ValueError(f"compile: losses for {unknown}, which are not outputs of the model {names}")
        loss = [loss.get(n) for n in names]
    if isinstance(loss, (list, tuple)) and any(v is None for v in loss):
        if all(v is None for v in loss):
            raise ValueError("compile: every output's loss is None: give compile a loss")
        return [NoLabelsLoss() if v is None else v for v in loss]
    return loss


def only_added_losses(model, c):
    """No loss given to compile, and a layer of the model adds losses."""
    if c.get("loss") is not None and not isinstance(c.get("loss"), NoLabelsLoss):
        return False
    if isinstance(c.get("loss"), NoLabelsLoss):
        return True
    if any(getattr(layer, "_n_added_losses", 0) or (getattr(layer, "_config", None) or {}).get("tnt_losses")
           for layer in model._all_layers()):
        return True
    raise ValueError(f"compile: model {model.name!r}: no loss given (loss=None) and no layer adds a loss "
                     f"(add_loss): give compile a loss")
