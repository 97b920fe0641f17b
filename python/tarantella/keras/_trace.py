"""Symbolic tensors that record operations into an operation graph (the "tnt_ops" JSON that the C
library's traced layer runs and differentiates; include/tarantella_ops.h lists the operations).

The user's Keras code (a custom Layer's call, a Lambda, arithmetic on a model's tensors) runs once
on SymTensors; each operation appends a node. Shapes and dtypes are inferred by running NumPy on
small zero arrays at two batch sizes (2 and 4): a dimension that differs is the batch (None), so
every NumPy shape rule (broadcasting, einsum, slicing) is NumPy's own.
"""
import inspect
import os

import numpy as np

_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float32", np.dtype(np.float16): "float32",
           np.dtype(np.int32): "int32", np.dtype(np.int64): "int32", np.dtype(np.bool_): "bool"}
_NP = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}
_BATCHES = (2, 4)


def _dt_name(a):
    d = np.asarray(a).dtype
    if d in _DTYPES:
        return _DTYPES[d]
    return "int32" if np.issubdtype(d, np.integer) else "float32"


def _user_line():
    """file:line of the first frame outside this package (the user's code)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for fr in inspect.stack()[1:]:
        if not os.path.abspath(fr.filename).startswith(here):
            return f"{fr.filename}:{fr.lineno}"
    return "?"


class TraceError(ValueError):
    """An operation that cannot be traced (value-dependent control flow, a bad shape), naming the
    user's line."""


class Graph:
    """The operation graph being recorded: inputs, weights, nodes (ids assigned on to_json)."""

    def __init__(self):
        self.inputs, self.weights, self.nodes = [], [], []
        self.built_layers = []  # custom layers built while tracing (built again if the trace is abandoned)

    def input(self, shape, dtype="float32"):
        """A traced input; shape includes the batch axis (None)."""
        t = SymTensor(self, ("input", len(self.inputs)), [_zeros(shape, dtype, b) for b in _BATCHES])
        self.inputs.append((tuple(shape), t))
        return t

    def weight(self, name, shape, initializer="glorot_uniform", trainable=True, value=None):
        shape = tuple(int(d) for d in shape)
        t = SymTensor(self, ("weight", len(self.weights)), [np.zeros(shape, np.float32)] * 2)
        self.weights.append({"name": name, "shape": list(shape), "initializer": initializer,
                             "trainable": bool(trainable), "tensor": t, "value": value})
        return t

    def to_json(self, outputs):
        ids, n = {}, 0
        for _, t in self.inputs:
            ids[id(t)] = n
            n += 1
        for w in self.weights:
            ids[id(w["tensor"])] = n
            n += 1
        nodes = []
        for op, ins, attrs, outs in self.nodes:
            try:
                in_ids = [ids[id(t)] for t in ins]
            except KeyError:
                raise TraceError(f"operation {op}: an input comes from another traced function (a tensor of "
                                 f"one trace used in another)") from None
            nodes.append({"op": op, "in": in_ids, **attrs})
            for t in outs:
                ids[id(t)] = n
                n += 1
        for o in outputs:
            if not isinstance(o, SymTensor) or o.graph is not self:
                raise TraceError(f"the traced function returned {type(o).__name__}, not a tensor computed from its "
                                 f"inputs")
        return {"format": "tnt_ops", "version": 1,
                "inputs": [{"shape": [None if d is None else int(d) for d in s]} for s, _ in self.inputs],
                "weights": [{k: w[k] for k in ("name", "shape", "initializer", "trainable")} for w in self.weights],
                "nodes": nodes, "outputs": [ids[id(o)] for o in outputs]}


def _zeros(shape, dtype, batch):
    return np.zeros(tuple(batch if d is None else int(d) for d in shape), _NP[dtype])


class SymTensor:
    """A value of a traced graph: its shape (None for the batch axis) and dtype; Python operators and
    the functions of tnt.keras.ops record operations."""

    __array_priority__ = 1000  # numpy_array + tensor records an operation too

    def __init__(self, graph, key, dummies):
        self.graph, self._key, self._dummies = graph, key, dummies

    @property
    def shape(self):
        a, b = self._dummies[0].shape, self._dummies[1].shape
        return tuple(None if x != y else x for x, y in zip(a, b))

    @property
    def dtype(self):
        return _dt_name(self._dummies[0])

    @property
    def ndim(self):
        return self._dummies[0].ndim

    def __len__(self):
        d = self.shape[0] if self.shape else None
        if d is None:
            raise TraceError(f"len() of a tensor whose first axis is the batch (unknown while tracing) at "
                             f"{_user_line()}")
        return d

    def __bool__(self):
        raise TraceError(f"{_user_line()}: a Python `if`, `while`, `and`/`or` or bool() on a tensor's value cannot be "
                         f"traced (the code runs once, on symbolic tensors); use ops.where, or branch on shapes "
                         f"and on the training flag only")

    def __iter__(self):
        raise TraceError(f"{_user_line()}: iterating over a symbolic tensor is not supported; use ops.split or "
                         f"ops.unstack-style slicing")

    def __float__(self):
        raise TraceError(f"{_user_line()}: float() of a symbolic tensor: its value is not known while tracing")

    __int__ = __index__ = __float__

    def __repr__(self):
        return f"<SymTensor shape={self.shape} dtype={self.dtype}>"

    def numpy(self):
        raise TraceError(f"{_user_line()}: .numpy() of a symbolic tensor: its value is not known while tracing")

    # operators: defined in ops (below the tensor type, to use the same functions)


# operations whose outputs carry no gradient (include/tarantella_ops.h), besides casts to int or bool
NO_GRADIENT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
               "logical_not", "argmax", "argmin", "any", "all", "stop_gradient", "one_hot", "constant", "zeros_like",
               "ones_like", "full_like", "random_uniform", "random_normal"}


def gradient_cut(g, source, out):
    """None if out is differentiable w.r.t. source (a value of g), else the user's line of an
    operation without gradient between them (or "?" when out does not depend on source at all)."""
    dep, grad = {id(source)}, {id(source)}
    cut = None
    for i, (op, ins, attrs, outs) in enumerate(g.nodes):
        reads = any(id(t) in dep for t in ins)
        if reads:
            dep.update(id(t) for t in outs)
        nograd = op in NO_GRADIENT or (op == "cast" and attrs.get("dtype") != "float32")
        if any(id(t) in grad for t in ins) and not nograd:
            grad.update(id(t) for t in outs if t.dtype == "float32")
        elif reads and nograd and cut is None:
            cut = getattr(g, "lines", {}).get(i, "?") + f" ({op})"
    if id(out) in grad:
        return None
    return cut or "?"


# operations whose np_fn computes the values themselves: on plain arrays they run at once (as
# Keras 3's ops take NumPy data); the others' np_fn give shapes only
EAGER = {"reshape", "transpose", "expand_dims", "squeeze", "broadcast_to", "concatenate", "stack", "split", "tile",
         "repeat", "take", "cast", "cumsum", "matmul", "einsum", "argmax", "argmin", "sum", "mean", "max", "min",
         "prod", "var", "std", "any", "all", "slice"}


def record(op, inputs, attrs, np_fn, n_out=1):
    """Appends one operation on the SymTensors inputs; np_fn computes the outputs' NumPy dummies
    (shape and dtype) from the inputs' dummies. Returns the output tensor (a list if n_out > 1)."""
    if not any(isinstance(t, SymTensor) for t in inputs):  # plain data
        if op not in EAGER:  # Keras 3's ops on data: run once by the C engine (keras/_tape.py)
            from tarantella.keras import _tape
            return _tape.eager_op(op, inputs, attrs, np_fn, n_out)
        with np.errstate(all="ignore"):
            r = np_fn(*[np.asarray(t) for t in inputs])
        fix = (lambda a: np.asarray(a).astype(np.float32) if np.asarray(a).dtype == np.float64 else np.asarray(a))
        return [fix(a) for a in r] if n_out > 1 else fix(r)
    g = next(t for t in inputs if isinstance(t, SymTensor)).graph
    for t in inputs:
        if t.graph is not g:
            raise TraceError(f"{_user_line()}: {op} on tensors of two different traces")
    attrs = {k: v for k, v in attrs.items() if v is not None}
    outs_d = []
    reps = 1 if getattr(g, "concrete_shapes", False) else 2  # a tape's shapes have no batch to find
    for b in range(reps):
        with np.errstate(all="ignore"):
            try:
                r = np_fn(*[t._dummies[b] for t in inputs])
            except (ValueError, IndexError, TypeError) as e:
                shapes = ", ".join(str(t.shape) for t in inputs)
                raise TraceError(f"{_user_line()}: {op} on shapes {shapes} {attrs or ''}: {e}") from None
        outs_d.append(r if n_out > 1 else [r])
    if reps == 1:
        outs_d.append(outs_d[0])
    cls = getattr(g, "tensor_type", SymTensor)  # a GradientTape's graph makes tensors with values (keras/_tape.py)
    outs = [cls(g, (op, len(g.nodes), k), [np.asarray(outs_d[0][k]), np.asarray(outs_d[1][k])])
            for k in range(n_out)]
    if op in NO_GRADIENT or (op == "cast" and attrs.get("dtype") != "float32"):
        g.__dict__.setdefault("lines", {})[len(g.nodes)] = _user_line()  # named if it cuts a loss's gradient
    g.nodes.append((op, list(inputs), attrs, outs))
    return outs if n_out > 1 else outs[0]


def constant(g, value, dtype=None):
    """A constant node (Python numbers, NumPy arrays)."""
    a = np.asarray(value)
    if getattr(g, "data_input", None) is not None and a.size > 16:  # a tape's data: an input, not JSON
        return g.data_input(a, dtype)
    dt = dtype or ("bool" if a.dtype == np.bool_ else "int32" if np.issubdtype(a.dtype, np.integer) else "float32")
    a = a.astype(_NP[dt])
    dummy = [a, a]
    t = getattr(g, "tensor_type", SymTensor)(g, ("constant", len(g.nodes), 0), dummy)
    v = a.tolist()
    g.nodes.append(("constant", [], {"value": v, "dtype": dt}, [t]))
    return t
