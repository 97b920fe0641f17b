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
from tarantella import _padded, _random
from tarantella.keras import layers as L
from tarantella.keras import _shapes, _sharing
from tarantella.keras.model_api import ModelAPI, sample_weights, with_weights
from tarantella.keras.model_compile import CompileAPI
from tarantella.keras.functional import functional_json, _walk, tensor_shape, _loaded_graph  # noqa: F401


# ---- data --------------------------------------------------------------------------------------

def _arrays(v, what):
    if isinstance(v, (list, tuple)):  # one per input; each may itself be a (nested) Python list, as Keras 2.0-2.3 took
        return [np.asarray(p) if isinstance(p, (list, tuple)) else p for p in v]
    if isinstance(v, dict):
        raise NotImplementedError(f"{what}: dicts of inputs are not supported; pass a list in the model's input "
                                  f"order")
    return [v]


def _n_samples(xs):
    return np.asarray(xs[0]).shape[0] if np.ndim(xs[0]) else 0


def _slice(xs, a, b):
    return [np.asarray(x)[a:b] for x in xs]


def _as_dataset(x, what, shuffle=False, class_weight=None):
    from tarantella.keras.utils._sequence import as_dataset
    return as_dataset(x, what, shuffle, class_weight)


def _by_name(model, x, y, what):
    from tarantella.keras.utils._names import by_name
    return by_name(model, x, y, what)


def _from_arrays(x, y):
    xs = _arrays(x, "x")
    if y is None:
        return tnt_data.Dataset.from_tensor_slices(xs if len(xs) > 1 else xs[0])
    return tnt_data.Dataset.from_tensor_slices((xs, _arrays(y, "y")))


def _weights_of_elements(ds):
    """A dataset of (x, y, sample_weight) elements, as Keras takes: (x, (y..., sample_weight)), the
    weight after the labels where the library reads it; (dataset, whether it carries weights)."""
    spec = getattr(ds, "element_spec", None)
    if not (isinstance(ds, tnt_data.Dataset) and isinstance(spec, tuple) and len(spec) == 3):
        return ds, False
    return ds.map(lambda a, b, c: (a, (tuple(b) if isinstance(b, (list, tuple)) else (b,)) + (c,))), True


def _custom_labels(model, y, ds):
    from tarantella.keras import _custom_objectives
    _custom_objectives.labels_seen(model, y, ds)


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

_warned_ignored = set()


def _ignored_keras2_arguments(who, kwargs, ignorable):
    """Keras 2 arguments that Keras itself ignores: one warning each; anything else is an error."""
    import warnings
    unknown = sorted(k for k in kwargs if k not in ignorable)
    if unknown:
        raise TypeError(f"{who}: unexpected arguments {unknown}")
    for k in kwargs:
        if (who, k) not in _warned_ignored:
            _warned_ignored.add((who, k))
            warnings.warn(f"{who}: argument {k!r} is ignored (as Keras ignores it)", stacklevel=3)


def _verbose(v):
    return 1 if v == "auto" or v is None else int(v)


class _ModelType(type):
    """isinstance(tnt.Model(m), keras.Model) holds, as for Keras's own wrappers: Tarantella's
    data-parallel wrapper counts as an instance of the class of the model it wraps."""

    def __instancecheck__(cls, obj):
        if type.__instancecheck__(cls, obj):
            return True
        return getattr(type(obj), "_tnt_wraps_model", False) and isinstance(obj.model, cls)


class Model(ModelAPI, CompileAPI, metaclass=_ModelType):
    """A Keras model. Functional: Model(inputs, outputs, name=None), with tensors from
    tnt.keras.Input and layer calls. Also the class of the models that load_model and
    model_from_json return."""

    _kind = "functional"

    def _init_state(self):
        """The state every model starts with (functional, Sequential, subclassed)."""
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

    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        if inputs is None and outputs is None and "_handle" not in kwargs:
            if type(self).call is not Model.call:  # traced once its input shape is known (keras/_submodel.py)
                from tarantella.keras import _submodel
                return _submodel.init(self, kwargs)
            raise TypeError("Model(inputs, outputs): give the inputs (tnt.keras.Input) and outputs")
        self._init_state()
        if "_handle" in kwargs:    # a model read by the library
            self._kind = "loaded"
            self._set_handle(kwargs["_handle"])
            return
        if isinstance(outputs, dict):  # Keras 3: predict returns a dict by these keys
            self._output_keys = list(outputs)
            outputs = list(outputs.values())
        if isinstance(inputs, dict):  # data is given by input name (keras/utils/_names.py)
            inputs = list(inputs.values())
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

    def add_loss(self, losses):
        """Keras's model.add_loss(tensor): a loss computed from the model's tensors, added to the
        compiled loss (keras/_custom.py: model_add_loss)."""
        from tarantella.keras import _custom
        _custom.model_add_loss(self, losses)

    def call(self, inputs, training=None, mask=None):
        raise NotImplementedError

    # ---- the library model ----
    def _arch_json(self, input_shape=None):
        if self._kind == "subclassed":
            from tarantella.keras import _submodel, _compute_loss
            _submodel.trace(self, input_shape)
            return _compute_loss.freeze_json(self, functional_json(self._inputs, self._outputs, self.name))
        return functional_json(self._inputs, self._outputs, self.name)

    def _can_build(self, input_shape=None):
        if self._kind == "subclassed":
            from tarantella.keras import _submodel
            return _submodel.can_build(self, input_shape)
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
                self._metrics = [m.lstrip("~") for m in info["metrics"].split(",") if m]
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
            _sharing.sync_in(self)  # layers shared with another model: their newest values
            return self._h
        if not self._can_build(input_shape):
            raise ValueError(f"model {self.name!r} has no input shape yet: add an InputLayer (tnt.keras.Input), "
                             f"give the first layer input_shape=..., call build(input_shape), or fit it on data")
        ensure_init()
        js = self._arch_json(input_shape)
        old = _sharing.old_weights(self)
        h = C.model_from_json(js)
        _random.seed_new_model(h)  # before anything draws its weights
        self._set_handle(h)
        from tarantella.keras import _custom  # weights of custom layers whose initial values Python made
        _custom.apply_initial_values(self, h)
        if getattr(self, "_loss_override", False):  # built again with its labels (keras/_compute_loss.py)
            from tarantella.keras import _compute_loss
            _compute_loss.restore_weights(self, h)
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

    @property
    def built(self):
        return self._h is not None

    @property
    def trainable(self):
        return self.__dict__.get("_trainable", True)

    @trainable.setter
    def trainable(self, value):
        _sharing.set_trainable(self, value)

    def build(self, input_shape=None):
        self._handle(tuple(input_shape)[1:] if input_shape is not None else None)

    # ---- Tarantella: data-parallel (tnt.Model) ----
    def _distribute(self, fusion_threshold_kb=None, comm_mode=None, reducer=None):
        modes = {None: 0, "default": 0, "thread": 1, "nonblocking": 2}
        if comm_mode not in modes:
            raise ValueError(f"comm_mode {comm_mode!r} (expected None, 'thread' or 'nonblocking')")
        reducers = {None: 0, "default": 0, "auto": 0, "flat": 1, "node": 2, "sharded": 3}
        if reducer not in reducers:
            raise ValueError(f"reducer {reducer!r} (expected None, 'auto', 'flat', 'node' or 'sharded')")
        self._dist = {"fusion_threshold_kb": fusion_threshold_kb, "comm_mode": modes[comm_mode],
                      "reducer": reducers[reducer]}
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
        if self._kind == "loaded":
            return list(_loaded_graph(self)[0])
        return list(self._inputs) if self._kind == "functional" else None

    @property
    def outputs(self):
        if self._kind == "loaded":
            return list(_loaded_graph(self)[1])
        return list(self._outputs) if self._kind == "functional" else None

    @property
    def output_names(self):
        cfg = json.loads(self._handle().to_json()).get("config", {})
        if isinstance(cfg, dict) and cfg.get("output_layers"):
            return [o[0] for o in cfg["output_layers"]]
        layers = cfg.get("layers", []) if isinstance(cfg, dict) else cfg
        return [layers[-1].get("config", {}).get("name")] if layers else []

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

    @property
    def stop_training(self):
        return getattr(self, "_stop_training", False)

    @stop_training.setter
    def stop_training(self, value):
        self._stop_training = bool(value)
        if value and self._h is not None:
            self._h.stop_training()

    # ---- data in, the library's datasets ----
    def _dataset(self, x, y, batch_size, shuffle, what, micro):
        """x, y as a batched tnt.data.Dataset (or unbatched when tnt_micro_batch_size is given)."""
        if getattr(self, "_loss_override", False):  # compute_loss: the labels are an input too
            from tarantella.keras import _compute_loss
            x, y = _compute_loss.prepare(self, x, y, what.split()[0])
        given = x
        x = _as_dataset(x, what, shuffle)  # a keras.utils.Sequence/PyDataset, a generator
        if x is not given and isinstance(x, tnt_data.Dataset) and x.is_batched:
            batch_size = None  # Keras ignores batch_size for a PyDataset/Sequence (it makes its batches)
        from tarantella.keras import _submodel
        _submodel.build_from_dict(self, x)
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
        self.__dict__["_tape_generation"] = self.__dict__.get("_tape_generation", 0) + 1  # a tape's forward is gone
        if self._h is None and not self._can_build(None):
            spec = ds.element_spec
            xs = spec[0] if isinstance(spec, tuple) and isinstance(spec[0], tuple) else spec
            self._handle(tuple(xs[1:]) if ds.is_batched else tuple(xs))
        h = self._handle()
        lowered = ds._lower() if hasattr(ds, "_lower") else ds
        _padded.fit_to_model(ds, h.input_shapes())  # padded batches for a model of fixed input sizes
        _shapes.set_packed(self, getattr(lowered, "_x_parts", None))
        return h

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
        from tarantella.keras import _custom_fit  # a train_step of the user's: Keras's loop, in Python
        if _custom_fit.python_loop(self):
            if sample_weight is not None or class_weight is not None or validation_split:
                raise NotImplementedError("fit with a custom train_step/compute_loss: sample_weight, class_weight "
                                          "and validation_split are not supported (put weights in the data)")
            return _custom_fit.fit(self, x, y, batch_size, epochs, verbose, callbacks, validation_data, shuffle,
                                   initial_epoch, steps_per_epoch)
        weighted = sample_weight is not None or class_weight is not None
        if class_weight is not None and sample_weight is None and y is None and x is not None and \
                not isinstance(x, tnt_data.Dataset):  # a Sequence or generator: the weights go with its batches
            given = x
            x = _as_dataset(x, "fit", shuffle, class_weight=class_weight)
            if x is not given:
                class_weight, batch_size = None, None  # in the batches now; Keras ignores batch_size there
        if weighted and (isinstance(x, tnt_data.Dataset) or y is None) and (sample_weight is not None or
                                                                            class_weight is not None):
            raise NotImplementedError("fit: sample_weight needs arrays x and y, and class_weight arrays, a "
                                      "keras.utils.Sequence or a generator (not a Dataset)")
        if not isinstance(validation_freq, int):
            raise NotImplementedError("fit: validation_freq must be an int (lists of epochs are not supported)")
        micro = int(tnt_micro_batch_size or 0)
        sw_val = None
        if validation_split and not isinstance(x, tnt_data.Dataset):
            if validation_data is not None:
                raise ValueError("fit: give validation_split or validation_data, not both")
            xs = _arrays(x, "x")
            n = _n_samples(xs)
            cut = int(n * (1.0 - validation_split))  # Keras: the last samples, before shuffling
            ys = _arrays(y, "y") if y is not None else None
            if sample_weight is not None:  # Keras splits the sample weights too (not the class weights)
                sw = sample_weight
                if isinstance(sw, (list, tuple)):  # one array per output: a column each
                    sw = np.stack([np.ones(n) if v is None else np.asarray(v).reshape(-1) for v in sw], axis=1)
                sw = np.asarray(sw)
                sample_weight, sw_val = sw[:cut], sw[cut:]
            validation_data = (_slice(xs, cut, n), _slice(ys, cut, n) if ys else None)
            x, y = _slice(xs, 0, cut), (_slice(ys, 0, cut) if ys else None)
            x = x if len(x) > 1 else x[0]
            y = (y if len(y) > 1 else y[0]) if y is not None else None
        elif validation_split:
            raise ValueError("fit: validation_split needs arrays, not a Dataset")
        train = self._dataset(x, with_weights(y, sample_weights(y, sample_weight, class_weight, "fit")), batch_size,
                              shuffle, "fit", micro)
        train, in_data = _weights_of_elements(train)
        weighted = weighted or in_data
        val = None
        val_weighted = False
        if validation_data is not None:
            validation_data = _as_dataset(validation_data, "fit validation_data")
            if isinstance(validation_data, tnt_data.Dataset):
                val = validation_data
            else:
                vx, vy = validation_data[0], validation_data[1] if len(validation_data) > 1 else None
                if len(validation_data) > 2 and validation_data[2] is not None:  # (x, y, sample_weight)
                    sw_val = validation_data[2]
                if sw_val is not None:
                    vy, val_weighted = with_weights(vy, sample_weights(vy, sw_val, None, "fit validation")), True
                val = self._dataset(vx, vy, validation_batch_size or batch_size, False, "fit validation_data", micro)
            val, val_in_data = _weights_of_elements(val)
            val_weighted = val_weighted or val_in_data
            if validation_steps:
                val = val.take(int(validation_steps))
        h = self._ensure_built_for(train)
        _padded.fit_to_model(val, h.input_shapes())
        _custom_labels(self, y, train)
        v = _verbose(verbose)
        self._stop_training = False
        params = {"verbose": v, "epochs": epochs, "steps": steps_per_epoch}
        cbs = self._callbacks(callbacks, params)
        logs = h.fit(train._handle(), epochs=int(epochs), initial_epoch=int(initial_epoch),
                     validation_data=val._handle() if val is not None else None, validation_freq=validation_freq,
                     verbose=v, steps_per_epoch=int(steps_per_epoch or 0), callbacks=cbs,
                     no_distribute=not tnt_distribute_dataset,
                     no_distribute_validation=not tnt_distribute_validation_dataset, micro_batch_size=micro,
                     sample_weights=weighted, validation_sample_weights=val_weighted)
        _sharing.claim(self)
        logs = [self._keras_order(epoch_logs) for epoch_logs in logs]
        history = History(self, params)
        history._extend(logs, int(initial_epoch))
        if logs:
            self._remember_logs(logs[-1])
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
        from tarantella.keras import _custom_fit
        if _custom_fit.python_loop(self) or _custom_fit.overrides_step(self, "test_step"):
            logs = _custom_fit.evaluate(self, x, y, batch_size, _verbose(verbose))
            return logs if return_dict else (list(logs.values()) if len(logs) > 1 else next(iter(logs.values())))
        if sample_weight is not None and (isinstance(x, tnt_data.Dataset) or y is None):
            raise NotImplementedError("evaluate: sample_weight needs arrays x and y (not a Dataset)")
        micro = int(tnt_micro_batch_size or 0)
        ds = self._dataset(x, with_weights(y, sample_weights(y, sample_weight, None, "evaluate")), batch_size, False,
                           "evaluate", micro)
        prev = self.__dict__.get("_packed_now")
        ds, in_data = _weights_of_elements(ds)
        sample_weight = sample_weight if sample_weight is not None else (True if in_data else None)
        h = self._ensure_built_for(ds)
        _custom_labels(self, y, ds)
        v = _verbose(verbose)
        logs = h.evaluate(ds._handle(), verbose=v, steps=int(steps or 0),
                          callbacks=self._callbacks(callbacks, {"verbose": v, "steps": steps}),
                          no_distribute=not tnt_distribute_dataset, micro_batch_size=micro,
                          sample_weights=sample_weight is not None)
        _shapes.restore_packed(self, prev)
        logs = self._keras_order(logs)
        self._remember_logs(logs)
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, max_queue_size=10,
                workers=1, use_multiprocessing=False, tnt_micro_batch_size=None, tnt_distribute_dataset=True,
                tnt_all_ranks=True, root_rank=None):
        """Outputs for every sample, in order; on every rank (tnt_all_ranks=False, or root_rank= the
        master rank: on the master only, the others get 0 rows). Several outputs: a list of arrays."""
        if root_rank is not None:
            from tarantella._core import get_master_rank
            if int(root_rank) != get_master_rank():
                raise NotImplementedError(f"predict: root_rank={root_rank}: the outputs can be gathered on every "
                                          f"rank or on the master rank ({get_master_rank()}) only")
            tnt_all_ranks = False
        micro = int(tnt_micro_batch_size or 0)
        ds = self._dataset(x, None, batch_size, False, "predict", micro)
        if steps:
            ds = ds.take(int(steps))
        prev = self.__dict__.get("_packed_now")
        h = self._ensure_built_for(ds)
        v = _verbose(verbose)
        out = h.predict(ds._handle(), verbose=v, callbacks=self._callbacks(callbacks, {"verbose": v}),
                        no_distribute=not tnt_distribute_dataset, all_ranks=bool(tnt_all_ranks),
                        micro_batch_size=micro)
        out = self._split_outputs(out)
        _shapes.restore_packed(self, prev)
        return out

    def _split_outputs(self, out):
        return _shapes.split_outputs(self, out)

    def predict_on_batch(self, x):
        self._touched = True
        self.__dict__["_tape_generation"] = self.__dict__.get("_tape_generation", 0) + 1  # a tape's forward is gone
        if getattr(self, "_loss_override", False):  # zeros for the label input of compute_loss
            from tarantella.keras import _compute_loss
            x, _ = _compute_loss.prepare(self, x, None, "predict")
        if isinstance(x, dict):  # by input name
            from tarantella.keras import _submodel
            _submodel.build_from_dict(self, x)
            x, _ = _by_name(self, x, None, "predict_on_batch")
        xs = _arrays(x, "x")
        if self._h is None and not self._can_build(None):
            self._handle(tuple(np.shape(xs[0])[1:]))
        batch = tnt_data._flatten_inputs(xs, "predict_on_batch")
        self._handle()
        prev = self.__dict__.get("_packed_now")
        _shapes.set_packed(self, [np.shape(v)[1:] for v in xs])
        shapes = self._h.input_shapes()
        if len(shapes) == 1 and not any(d is None for d in shapes[0]):
            batch = batch.reshape((batch.shape[0],) + tuple(shapes[0]))
        out = self._split_outputs(self._h.predict_on_batch(batch))
        _shapes.restore_packed(self, prev)
        return out

    def __call__(self, inputs, training=None, mask=None):
        flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        from tarantella.keras import _custom  # inside a traced call: the custom layer runs on model tensors
        if any(isinstance(t, _custom.SymTensor) and not hasattr(t, "value") for t in flat):  # (not a tape's)
            raise _custom.BuiltinInTrace(f"model {self.name!r} called inside a Lambda or a custom layer with weights")
        if all(isinstance(t, L.KerasTensor) for t in flat):  # a model used as a layer
            if self._h is None and not self._can_build(None) and len(flat) == 1:  # built on its first call
                self._handle(tuple(flat[0].shape[1:]))
            self._nodes.append(L._Node(list(flat), {}))
            k = len(self._nodes) - 1
            n_out = len(self._handle().output_shapes()) if (self._h is not None or self._can_build(None)) else 1
            outs = [L.KerasTensor(self, k, i) for i in range(n_out)]
            return outs[0] if n_out == 1 else outs
        return self._call_on_data(inputs, training)

    @property
    def class_name(self):
        return "Sequential" if isinstance(self, Sequential) else "Functional"

    def __repr__(self):
        return f"<tnt.keras.{type(self).__name__} {self.name!r}>"


class Sequential(Model):
    """Keras's Sequential: Sequential([layers], name=None), add(layer), pop()."""

    _kind = "sequential"

    def __init__(self, layers=None, name=None):
        self._init_state()
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
        if shape is not None and any(getattr(layer, "_custom", False) or layer.class_name == "Lambda"
                                     for layer in self._layers):
            from tarantella.keras import _custom  # traced layers are traced on their input's shape
            return _custom.sequential_json(self, shape)
        entries = []
        if shape is not None:
            if self._input_layer is not None:
                name = self._input_layer.name
            else:
                name = f"{self._layers[0].name}_input"
            entries.append({"class_name": "InputLayer", "config": {
                "batch_input_shape": [None] + [None if d is None else int(d) for d in shape], "dtype": "float32",
                "sparse": False,
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

    def _graph(self):
        """Keras's Sequential has a graph once built: its layers called in order on an Input, so
        that model.input and layer.output make new Functional models (feature extractors)."""
        g = self.__dict__.get("_seq_graph")
        if g is None or g[2] != len(self._layers):
            shape = tuple(self._handle().input_shapes()[0])
            name = self._input_layer.name if self._input_layer is not None else f"{self._layers[0].name}_input"
            t = inp = L.Input(shape=shape, name=L.unique_name(name) if g is not None else name)
            for layer in self._layers:
                t = layer(t)
            g = self.__dict__["_seq_graph"] = ([inp], [t] if not isinstance(t, list) else t, len(self._layers))
        return g

    @property
    def inputs(self):
        return list(self._graph()[0])

    @property
    def outputs(self):
        return list(self._graph()[1])
