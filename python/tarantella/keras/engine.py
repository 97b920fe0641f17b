"""tnt.keras.Model and tnt.keras.Sequential: Keras models on libtarantella.

A model is described in Python (its layers, or its graph of layer calls) and built by the C library
from the Keras JSON of that description, once its input shape is known; from then on it is a
libtarantella model (a handle of the extension), which compile, fit, evaluate, predict, the weights
and the files work on. Models loaded from files or JSON are such handles from the start.
"""
import json
import weakref

import numpy as np

from tarantella._core import C, ensure_init
from tarantella import data as tnt_data
from tarantella import _random
from tarantella.keras import layers as L


# ---- Functional graphs -------------------------------------------------------------------------

def _tensor_refs(v):
    """The KerasTensors in a node's kwargs value."""
    if isinstance(v, L.KerasTensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensor_refs(x)]
    return []


def _walk(outputs):
    """The (layer, node index) pairs the outputs depend on, and the InputLayers reached."""
    seen, order, inputs = set(), [], []
    stack = list(outputs)
    while stack:
        t = stack.pop()
        key = (id(t._layer), t._node_index)
        if key in seen:
            continue
        seen.add(key)
        order.append((t._layer, t._node_index))
        node = t._layer._nodes[t._node_index]
        if isinstance(t._layer, L.InputLayer):
            inputs.append(t)
            continue
        stack.extend(node.inputs)
        for v in node.kwargs.values():
            stack.extend(_tensor_refs(v))
    return order, inputs


def _layer_entry(layer):
    if isinstance(layer, Model):  # a model called as a layer
        cfg = json.loads(layer.to_json())
        return {"class_name": cfg["class_name"], "config": cfg["config"], "name": layer.name}
    return {"class_name": layer.class_name, "config": layer._json_config(), "name": layer.name}


def functional_json(inputs, outputs, name):
    """Keras 2 Functional JSON of the graph from inputs to outputs."""
    pairs, reached = _walk(outputs)
    declared = {id(t._layer) for t in inputs}
    for t in reached:
        if id(t._layer) not in declared:
            raise ValueError(f"Graph disconnected: the outputs depend on input {t._layer.name!r}, which is not "
                             f"among the model's inputs {[t._layer.name for t in inputs]}")
    # per layer, its nodes in this graph in call order, renumbered (a model counts its own node first)
    nodes = {}
    for layer, ni in pairs:
        nodes.setdefault(id(layer), (layer, []))[1].append(ni)
    renum = {}
    for layer, nis in nodes.values():
        base = 1 if isinstance(layer, Model) else 0
        for k, ni in enumerate(sorted(nis, key=lambda i: layer._nodes[i].order)):
            renum[(id(layer), ni)] = base + k

    def ref(t):
        return [t._layer.name, renum[(id(t._layer), t._node_index)], t._tensor_index]

    names = {}
    entries = []
    for layer, nis in sorted(nodes.values(), key=lambda e: min(e[0]._nodes[i].order for i in e[1])):
        if names.setdefault(layer.name, id(layer)) != id(layer):
            raise ValueError(f"two layers of the model are named {layer.name!r}")
        e = _layer_entry(layer)
        inbound = []
        if not isinstance(layer, L.InputLayer):
            for ni in sorted(nis, key=lambda i: layer._nodes[i].order):
                node = layer._nodes[ni]
                refs = [ref(t) + [{}] for t in node.inputs]
                for k, v in node.kwargs.items():
                    refs[0][3][k] = ref(v) if isinstance(v, L.KerasTensor) else v
                inbound.append(refs)
        e["inbound_nodes"] = inbound
        entries.append(e)
    return json.dumps({"class_name": "Functional", "config": {
        "name": name, "layers": entries, "input_layers": [ref(t) for t in inputs],
        "output_layers": [ref(t) for t in outputs]}})


def tensor_shape(t):
    """Shape of a symbolic tensor (without batch), from the library's build of its subgraph."""
    _, reached = _walk([t])
    ensure_init()
    h = C.model_from_json(functional_json(reached[::-1], [t], "shape_probe"))
    return h.output_shapes()[0]


# ---- data --------------------------------------------------------------------------------------

def _arrays(v, what):
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, dict):
        raise NotImplementedError(f"{what}: dicts of inputs are not supported; pass a list in the model's input "
                                  f"order")
    return [v]


def _n_samples(xs):
    return np.asarray(xs[0]).shape[0] if np.ndim(xs[0]) else 0


def _slice(xs, a, b):
    return [np.asarray(x)[a:b] for x in xs]


def _as_dataset(x, what, shuffle=False):
    from tarantella.keras.utils._sequence import as_dataset
    return as_dataset(x, what, shuffle)


def _by_name(model, x, y, what):
    from tarantella.keras.utils._names import by_name
    return by_name(model, x, y, what)


def _from_arrays(x, y):
    xs = _arrays(x, "x")
    if y is None:
        return tnt_data.Dataset.from_tensor_slices(xs if len(xs) > 1 else xs[0])
    return tnt_data.Dataset.from_tensor_slices((xs, _arrays(y, "y")))


# ---- History -----------------------------------------------------------------------------------

class History:
    """What fit returns: .history {name: [value per epoch]}, .epoch, .params, .model."""

    def __init__(self, model=None, params=None):
        self.history, self.epoch, self.params, self.model = {}, [], params or {}, model

    def _extend(self, logs_per_epoch, first_epoch):
        for i, logs in enumerate(logs_per_epoch):
            self.epoch.append(first_epoch + i)
            for k, v in logs.items():
                self.history.setdefault(k, []).append(v)

    def __repr__(self):
        return f"<History epochs={len(self.epoch)} keys={sorted(self.history)}>"


# ---- models ------------------------------------------------------------------------------------

def _verbose(v):
    return 1 if v == "auto" or v is None else int(v)


class Model:
    """A Keras model. Functional: Model(inputs, outputs, name=None), with tensors from
    tnt.keras.Input and layer calls. Also the class of the models that load_model and
    model_from_json return."""

    _kind = "functional"

    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        if inputs is None and outputs is None and "_handle" not in kwargs:
            if type(self).call is not Model.call:
                raise NotImplementedError("subclassed models (a call method in Python) are not supported: "
                                          "the model runs in C; build it with the Functional or Sequential API")
            raise TypeError("Model(inputs, outputs): give the inputs (tnt.keras.Input) and outputs")
        self._h = None
        self._touched = False      # weights read, written or trained
        self._dist = None          # tnt.Model's options, or None
        self._compiled = None      # compile's arguments, applied when the handle is built
        self._optimizer = None
        self._pending_weights = None
        self._nodes = []           # calls of this model as a layer of another
        self.history = None
        self._loss = None
        self._metrics = []
        if "_handle" in kwargs:    # a model read by the library
            self._kind = "loaded"
            self._set_handle(kwargs["_handle"])
            return
        self._inputs = [inputs] if isinstance(inputs, L.KerasTensor) else list(inputs)
        self._outputs = [outputs] if isinstance(outputs, L.KerasTensor) else list(outputs)
        self._single_in = isinstance(inputs, L.KerasTensor)
        self._single_out = isinstance(outputs, L.KerasTensor)
        for t in self._inputs + self._outputs:
            if not isinstance(t, L.KerasTensor):
                raise TypeError(f"Model: inputs and outputs must be symbolic tensors, got {type(t).__name__}")
        self.name = name or L.unique_name("model")
        pairs, _ = _walk(self._outputs)
        seen, layers = set(), []
        for layer, ni in sorted(pairs, key=lambda p: p[0]._nodes[p[1]].order):
            if id(layer) not in seen:
                seen.add(id(layer))
                layers.append(layer)
        self._layers = layers
        self._handle()  # the input shapes are known: build now, shape errors show here

    def call(self, inputs, training=None, mask=None):
        raise NotImplementedError

    # ---- the library model ----
    def _arch_json(self, input_shape=None):
        return functional_json(self._inputs, self._outputs, self.name)

    def _can_build(self, input_shape=None):
        return True

    def _set_handle(self, h):
        self._h = h
        js = json.loads(h.to_json())
        cfg = js.get("config", {})
        self.name = cfg.get("name") or getattr(self, "name", None) or "model"
        if self._kind == "loaded":  # layers as the library describes them
            self._layers = []
            entries = cfg.get("layers", []) if isinstance(cfg, dict) else cfg
            for e in entries:
                cfg_e = e.get("config", {})
                lname = e.get("name") or cfg_e.get("name")
                if isinstance(self, Sequential) and e["class_name"] == "InputLayer":
                    self._input_layer = L.InputLayer(input_shape=h.input_shapes()[0], name=lname)
                    continue
                cls = L.CLASSES.get(e["class_name"], L.Layer)
                layer = cls._from_config_entry(e["class_name"], cfg_e)
                layer.name = lname
                self._layers.append(layer)
            self._single_in = len(h.input_shapes()) == 1
            self._single_out = len(h.output_shapes()) == 1
            info = h.compile_info()
            if info is not None:
                from tarantella.keras import optimizers
                self._optimizer = optimizers.from_handle(self)
                self._loss = info["loss"]
                self._metrics = [m for m in info["metrics"].split(",") if m]
        for layer in self._all_layers():
            layer._model = weakref.ref(self)

    def _all_layers(self):
        out = []
        for layer in self._layers:
            if isinstance(layer, Model):
                out.extend(layer._all_layers())
            else:
                out.append(layer)
        return out

    def _handle(self, input_shape=None):
        """The library model, built from the architecture when first needed."""
        if self._h is not None:
            return self._h
        if not self._can_build(input_shape):
            raise ValueError(f"model {self.name!r} has no input shape yet: add an InputLayer (tnt.keras.Input), "
                             f"give the first layer input_shape=..., call build(input_shape), or fit it on data")
        ensure_init()
        js = self._arch_json(input_shape)
        old = self._old_weights()
        h = C.model_from_json(js)
        self._set_handle(h)
        if old:
            ws = h.get_weights()
            for i, (name, shape) in enumerate(h.weights_info()):
                if name in old and old[name].shape == tuple(shape):
                    ws[i] = old[name]
            h.set_weights(ws)
        if self._pending_weights is not None:
            w, self._pending_weights = self._pending_weights, None
            h.set_weights(w)
        self._apply_dist()
        if self._compiled is not None:
            self._apply_compile()
        return h

    def _old_weights(self):
        """Weights of this model's layers in models built before (layers reused in a new model keep
        their trained values, as in Keras; here they are copied)."""
        out = {}
        for layer in self._all_layers():
            m = layer._model() if layer._model is not None else None
            if m is None or m is self or m._h is None:
                continue
            prefix = layer.name + "/"
            info = m._h.weights_info()
            idx = [i for i, (n, _) in enumerate(info) if n.startswith(prefix)]
            if idx:
                ws = m._h.get_weights()
                out.update({info[i][0]: ws[i] for i in idx})
        for layer in self._layers:  # nested models built on their own
            if isinstance(layer, Model) and layer._h is not None:
                out.update({n: w for (n, _), w in zip(layer._h.weights_info(), layer._h.get_weights())})
        return out

    @property
    def built(self):
        return self._h is not None

    def build(self, input_shape=None):
        self._handle(tuple(input_shape)[1:] if input_shape is not None else None)

    # ---- Tarantella: data-parallel (tnt.Model) ----
    def _distribute(self, fusion_threshold_kb=None, comm_mode=None):
        modes = {None: 0, "default": 0, "thread": 1, "nonblocking": 2}
        if comm_mode not in modes:
            raise ValueError(f"comm_mode {comm_mode!r} (expected None, 'thread' or 'nonblocking')")
        self._dist = {"fusion_threshold_kb": fusion_threshold_kb, "comm_mode": modes[comm_mode]}
        if self._h is not None:
            self._apply_dist()

    def _apply_dist(self):
        if self._dist is not None:
            self._h.distribute(**self._dist)

    # ---- structure ----
    @property
    def layers(self):
        return list(self._layers)

    def get_layer(self, name=None, index=None):
        if index is not None:
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"no such layer: {name!r}")

    @property
    def inputs(self):
        return list(self._inputs) if self._kind == "functional" else None

    @property
    def outputs(self):
        return list(self._outputs) if self._kind == "functional" else None

    @property
    def input_shape(self):
        shapes = [(None,) + tuple(s) for s in self._handle().input_shapes()]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def output_shape(self):
        shapes = [(None,) + tuple(s) for s in self._handle().output_shapes()]
        return shapes[0] if len(shapes) == 1 else shapes

    def count_params(self):
        return self._handle().count_params()

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, show_trainable=False):
        text = self._handle().summary().rstrip("\n")
        (print_fn or print)(text)

    def to_json(self, **kwargs):
        if self._h is not None:
            return self._h.to_json()
        return self._arch_json(None)

    def get_config(self):
        return json.loads(self.to_json())["config"]

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from tarantella.keras.models import model_from_json
        kind = "Sequential" if cls is Sequential else "Functional"
        return model_from_json(json.dumps({"class_name": kind, "config": config}))

    # ---- weights ----
    def get_weights(self):
        self._touched = True
        return self._handle().get_weights()

    def set_weights(self, weights):
        if self._h is None and not self._can_build(None):
            self._pending_weights = [np.asarray(w, dtype=np.float32) for w in weights]
            return
        self._touched = True
        self._handle().set_weights(weights)

    @property
    def weights(self):
        h = self._handle()
        return [L.Weight(self, i, n, s) for i, (n, s) in enumerate(h.weights_info())]

    trainable_weights = weights

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None, tnt_save_all_devices=False):
        self._handle().save(str(filepath), weights_only=True, save_all_devices=tnt_save_all_devices)

    def load_weights(self, filepath, by_name=False, skip_mismatch=False, options=None):
        if skip_mismatch:
            raise NotImplementedError("load_weights: skip_mismatch=True is not supported")
        self._touched = True
        self._handle().load_weights(str(filepath), by_name=by_name)

    def save(self, filepath, overwrite=True, include_optimizer=True, save_format=None, signatures=None,
             options=None, save_traces=True, tnt_save_all_devices=False):
        """Keras's model.save: a Keras 3 .keras zip when the name ends in .keras, else a Keras 2
        whole-model .h5 (architecture, weights, and the training configuration and optimizer state
        of a compiled model). Written by the master rank; every rank must call it."""
        h = self._handle()
        path = str(filepath)
        if save_format not in (None, "h5", "keras"):
            raise NotImplementedError(f"save: save_format {save_format!r} (TensorFlow SavedModel) is not supported; "
                                      f"use a .h5 or .keras file name")
        if not include_optimizer and h.compile_info() is not None:
            bare = C.model_from_json(h.to_json())
            bare.set_weights(h.get_weights())
            h = bare
        h.save(path, save_all_devices=tnt_save_all_devices)

    # ---- compile ----
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=None, jit_compile=None, seed=None, **kwargs):
        from tarantella.keras import losses, metrics as M, optimizers
        for k, v in (("loss_weights", loss_weights), ("weighted_metrics", weighted_metrics)):
            if v is not None:
                raise NotImplementedError(f"compile: {k} is not supported")
        if kwargs:
            raise TypeError(f"compile: unexpected arguments {sorted(kwargs)}")
        opt = optimizers.get(optimizer)
        lspec = losses.spec(loss)
        mnames = M.names(metrics)
        self._compiled = {"optimizer": opt, "loss": lspec, "metrics": mnames, "seed": seed}
        self._optimizer = opt
        self._touched = True
        self._loss = loss
        self._metrics = mnames
        if self._h is not None:
            self._apply_compile()

    def _apply_compile(self):
        c = self._compiled
        kind, from_logits, smoothing, ignore = c["loss"]
        self._h.compile(c["optimizer"]._spec(), kind, from_logits=from_logits, metrics=",".join(c["metrics"]) or None,
                        seed=int(c["seed"] or _random.global_seed() or 0), label_smoothing=smoothing, ignore_class=ignore)
        c["optimizer"]._bind(self)

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def loss(self):
        return self._loss

    @property
    def metrics_names(self):
        info = self._h.compile_info() if self._h is not None else None
        if info is None:
            return []
        return ["loss"] + [m for m in info["metrics"].split(",") if m]

    @property
    def stop_training(self):
        return False

    @stop_training.setter
    def stop_training(self, value):
        if value and self._h is not None:
            self._h.stop_training()

    # ---- data in, the library's datasets ----
    def _dataset(self, x, y, batch_size, shuffle, what, micro):
        """x, y as a batched tnt.data.Dataset (or unbatched when tnt_micro_batch_size is given)."""
        x = _as_dataset(x, what, shuffle)  # a keras.utils.Sequence/PyDataset, a generator
        x, y = _by_name(self, x, y, what)  # dicts keyed by input/output names
        if isinstance(x, tnt_data.Dataset):
            if y is not None:
                raise ValueError(f"{what}: y must be None when x is a Dataset (the dataset holds the labels)")
            if batch_size is not None and x.is_batched:
                raise ValueError(f"{what}: batch_size is given but the dataset is batched already (Tarantella: "
                                 f"batch the dataset with the global batch size and leave batch_size out)")
            if batch_size is not None:
                return x.batch(batch_size)
            return x
        if x is None:
            raise ValueError(f"{what}: x is None")
        ds = _from_arrays(x, y)
        if shuffle:
            ds = ds.shuffle(_n_samples(_arrays(x, "x")))
        return ds if micro else ds.batch(batch_size or 32)

    def _ensure_built_for(self, ds):
        self._touched = True
        if self._h is None and not self._can_build(None):
            spec = ds.element_spec
            xs = spec[0] if isinstance(spec, tuple) and isinstance(spec[0], tuple) else spec
            self._handle(tuple(xs[1:]) if ds.is_batched else tuple(xs))
        return self._handle()

    def _callbacks(self, callbacks, params):
        from tarantella.keras import callbacks as CB
        return [CB.handle_of(cb, self, params) for cb in (callbacks or [])]

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1,
            max_queue_size=10, workers=1, use_multiprocessing=False, tnt_micro_batch_size=None,
            tnt_distribute_dataset=True, tnt_distribute_validation_dataset=True):
        """Keras's fit on NumPy arrays (x, y) or a tnt.data.Dataset (batched with the global batch
        size). Returns a History. Runs in C without the GIL; Python callbacks and map functions take
        it back when they run."""
        for k, v in (("class_weight", class_weight), ("sample_weight", sample_weight)):
            if v is not None:
                raise NotImplementedError(f"fit: {k} is not supported")
        if not isinstance(validation_freq, int):
            raise NotImplementedError("fit: validation_freq must be an int (lists of epochs are not supported)")
        micro = int(tnt_micro_batch_size or 0)
        if validation_split and not isinstance(x, tnt_data.Dataset):
            if validation_data is not None:
                raise ValueError("fit: give validation_split or validation_data, not both")
            xs = _arrays(x, "x")
            n = _n_samples(xs)
            cut = int(n * (1.0 - validation_split))  # Keras: the last samples, before shuffling
            ys = _arrays(y, "y") if y is not None else None
            validation_data = (_slice(xs, cut, n), _slice(ys, cut, n) if ys else None)
            x, y = _slice(xs, 0, cut), (_slice(ys, 0, cut) if ys else None)
            x = x if len(x) > 1 else x[0]
            y = (y if len(y) > 1 else y[0]) if y is not None else None
        elif validation_split:
            raise ValueError("fit: validation_split needs arrays, not a Dataset")
        train = self._dataset(x, y, batch_size, shuffle, "fit", micro)
        val = None
        if validation_data is not None:
            validation_data = _as_dataset(validation_data, "fit validation_data")
            if isinstance(validation_data, tnt_data.Dataset):
                val = validation_data
            else:
                vx, vy = validation_data[0], validation_data[1] if len(validation_data) > 1 else None
                val = self._dataset(vx, vy, validation_batch_size or batch_size, False, "fit validation_data", micro)
            if validation_steps:
                val = val.take(int(validation_steps))
        h = self._ensure_built_for(train)
        v = _verbose(verbose)
        params = {"verbose": v, "epochs": epochs, "steps": steps_per_epoch}
        cbs = self._callbacks(callbacks, params)
        logs = h.fit(train._handle(), epochs=int(epochs), initial_epoch=int(initial_epoch),
                     validation_data=val._handle() if val is not None else None, validation_freq=validation_freq,
                     verbose=v, steps_per_epoch=int(steps_per_epoch or 0), callbacks=cbs,
                     no_distribute=not tnt_distribute_dataset,
                     no_distribute_validation=not tnt_distribute_validation_dataset, micro_batch_size=micro)
        history = History(self, params)
        history._extend(logs, int(initial_epoch))
        from tarantella.keras.callbacks import History as HistoryCallback
        for cb in callbacks or []:
            if isinstance(cb, HistoryCallback):
                cb._extend(logs, int(initial_epoch))
        self.history = history
        return history

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, max_queue_size=10, workers=1, use_multiprocessing=False, return_dict=False,
                 tnt_micro_batch_size=None, tnt_distribute_dataset=True):
        """Loss and metrics (exact global figures on every rank): a list [loss, metrics...], the loss
        alone when there are no metrics, or a dict with return_dict=True."""
        if sample_weight is not None:
            raise NotImplementedError("evaluate: sample_weight is not supported")
        micro = int(tnt_micro_batch_size or 0)
        ds = self._dataset(x, y, batch_size, False, "evaluate", micro)
        h = self._ensure_built_for(ds)
        v = _verbose(verbose)
        logs = h.evaluate(ds._handle(), verbose=v, steps=int(steps or 0),
                          callbacks=self._callbacks(callbacks, {"verbose": v, "steps": steps}),
                          no_distribute=not tnt_distribute_dataset, micro_batch_size=micro)
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, max_queue_size=10,
                workers=1, use_multiprocessing=False, tnt_micro_batch_size=None, tnt_distribute_dataset=True,
                tnt_all_ranks=True):
        """Outputs for every sample, in order; on every rank (tnt_all_ranks=False: the master only,
        the others get 0 rows). Several outputs: a list of arrays."""
        micro = int(tnt_micro_batch_size or 0)
        ds = self._dataset(x, None, batch_size, False, "predict", micro)
        if steps:
            ds = ds.take(int(steps))
        h = self._ensure_built_for(ds)
        v = _verbose(verbose)
        out = h.predict(ds._handle(), verbose=v, callbacks=self._callbacks(callbacks, {"verbose": v}),
                        no_distribute=not tnt_distribute_dataset, all_ranks=bool(tnt_all_ranks),
                        micro_batch_size=micro)
        return self._split_outputs(out)

    def _split_outputs(self, out):
        shapes = self._h.output_shapes()
        if len(shapes) == 1:
            return out.reshape((out.shape[0],) + tuple(shapes[0]))
        n = out.shape[0]
        flat = out.reshape(n, -1)
        parts, at = [], 0
        for s in shapes:
            k = int(np.prod(s))
            parts.append(flat[:, at:at + k].reshape((n,) + tuple(s)))
            at += k
        return parts

    def predict_on_batch(self, x):
        self._touched = True
        xs = _arrays(x, "x")
        if self._h is None and not self._can_build(None):
            self._handle(tuple(np.shape(xs[0])[1:]))
        batch = tnt_data._flatten_inputs(xs, "predict_on_batch")
        shapes = self._handle().input_shapes()
        if len(shapes) == 1:
            batch = batch.reshape((batch.shape[0],) + tuple(shapes[0]))
        return self._split_outputs(self._h.predict_on_batch(batch))

    def __call__(self, inputs, training=None, mask=None):
        flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        if all(isinstance(t, L.KerasTensor) for t in flat):  # a model used as a layer
            self._nodes.append(L._Node(list(flat), {}))
            k = len(self._nodes) - 1
            n_out = len(self._handle().output_shapes()) if (self._h is not None or self._can_build(None)) else 1
            outs = [L.KerasTensor(self, k, i) for i in range(n_out)]
            return outs[0] if n_out == 1 else outs
        return self.predict_on_batch(inputs)

    @property
    def class_name(self):
        return "Sequential" if isinstance(self, Sequential) else "Functional"

    def __repr__(self):
        return f"<tnt.keras.{type(self).__name__} {self.name!r}>"


class Sequential(Model):
    """Keras's Sequential: Sequential([layers], name=None), add(layer), pop()."""

    _kind = "sequential"

    def __init__(self, layers=None, name=None):
        self._h = None
        self._touched = False
        self._dist = None
        self._compiled = None
        self._optimizer = None
        self._pending_weights = None
        self._nodes = []
        self.history = None
        self._loss = None
        self._metrics = []
        self._input_layer = None
        self._layers = []
        self._single_in = self._single_out = True
        self.name = name or L.unique_name("sequential")
        for layer in layers or []:
            self._add(layer)
        if self._can_build(None):  # as Keras builds a Sequential whose input shape is known
            self._handle()

    def add(self, layer):
        self._add(layer)
        self._rebuild()

    def _add(self, layer):
        if isinstance(layer, L.KerasTensor) and isinstance(layer._layer, L.InputLayer):
            layer = layer._layer  # model.add(tnt.keras.Input(shape))
        if isinstance(layer, L.InputLayer):
            if self._layers or self._input_layer is not None:
                raise ValueError("Sequential.add: an InputLayer must come first")
            self._input_layer = layer
        elif isinstance(layer, (L.Layer, Model)):
            self._layers.append(layer)
        else:
            raise TypeError(f"Sequential.add: expected a layer, got {type(layer).__name__}")

    def pop(self):
        if not self._layers:
            raise TypeError("There are no layers in the model.")
        self._layers.pop()
        self._rebuild()

    def _rebuild(self):
        """A model that changes is built again (shape errors show at add, as in Keras), keeping the
        weights of its layers once they have been used."""
        old = None
        if self._h is not None and self._touched:
            old = {n: w for (n, _), w in zip(self._h.weights_info(), self._h.get_weights())}
        self._h = None
        if self._can_build(None):
            h = self._handle()
            if old:
                ws = h.get_weights()
                for i, (n, s) in enumerate(h.weights_info()):
                    if n in old and old[n].shape == tuple(s):
                        ws[i] = old[n]
                h.set_weights(ws)

    def _input_shape_known(self):
        if self._input_layer is not None:
            return self._input_layer._input_shape
        if self._layers:
            first = self._layers[0]
            if isinstance(first, Model):
                return tuple(first._handle().input_shapes()[0]) if first._h is not None or first._can_build(None) \
                    else None
            return first._input_shape
        return None

    def _can_build(self, input_shape=None):
        return bool(self._layers) and (input_shape is not None or self._input_shape_known() is not None)

    def _arch_json(self, input_shape=None):
        shape = self._input_shape_known() if input_shape is None else tuple(input_shape)
        entries = []
        if shape is not None:
            if self._input_layer is not None:
                name = self._input_layer.name
            else:
                name = f"{self._layers[0].name}_input"
            entries.append({"class_name": "InputLayer", "config": {
                "batch_input_shape": [None] + [int(d) for d in shape], "dtype": "float32", "sparse": False,
                "ragged": False, "name": name}})
        for layer in self._layers:
            if isinstance(layer, Model):
                cfg = json.loads(layer.to_json())
                entries.append({"class_name": cfg["class_name"], "config": cfg["config"]})
            else:
                cfg = layer._json_config()
                cfg.pop("batch_input_shape", None)
                entries.append({"class_name": layer.class_name, "config": cfg})
        return json.dumps({"class_name": "Sequential", "config": {"name": self.name, "layers": entries}})

    def _set_handle(self, h):
        super()._set_handle(h)

    @property
    def inputs(self):
        return None

    @property
    def outputs(self):
        return None
