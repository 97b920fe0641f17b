"""The parts of Keras's Model API around fit, evaluate and predict (keras/engine/training.py):
model(x) as a tensor, train_on_batch/test_on_batch, metrics, inputs/outputs of a Sequential,
compute_output_shape, input_spec, reset_states, run_eagerly. Mixed into tnt.keras.Model."""
import warnings

import numpy as np


def _trainable_flags(model):
    from tarantella._core import C
    return C.trainable_flags(model._handle())


def _warn_generator(what):
    warnings.warn(f"`Model.{what}_generator` is deprecated and will be removed in a future version. Please use "
                  f"`Model.{what}`, which supports generators.", stacklevel=3)


class Tensor(np.ndarray):
    """What model(x) returns, as Keras's eager tensor: .numpy(), .shape, .dtype, and NumPy interop
    (it is a NumPy array)."""

    def numpy(self):
        return self.view(np.ndarray)

    def __repr__(self):
        return f"<tnt.Tensor: shape={self.shape}, dtype={self.dtype}, numpy=\n{self.view(np.ndarray)!r}>"


def as_tensor(a):
    if isinstance(a, list):
        return [as_tensor(x) for x in a]
    return np.asarray(a).view(Tensor)


class InputSpec:
    """Keras's InputSpec: the shape (batch axis None), ndim and dtype an input takes."""

    def __init__(self, shape=None, ndim=None, dtype=None, **kwargs):
        self.shape = tuple(shape) if shape is not None else None
        self.ndim = ndim if ndim is not None else (len(self.shape) if self.shape is not None else None)
        self.dtype = dtype or "float32"

    def __repr__(self):
        return f"InputSpec(shape={self.shape}, ndim={self.ndim})"


class LoggedMetric:
    """An entry of model.metrics: Keras's metric object's name, result() (the last fit or evaluate
    figure) and reset_state()."""

    def __init__(self, model, name):
        self._model, self.name = model, name

    def result(self):
        return self._model._last_logs.get(self.name, 0.0)

    def reset_state(self):
        self._model._last_logs.pop(self.name, None)

    reset_states = reset_state

    def __repr__(self):
        return f"<Metric {self.name!r}>"


def sample_weights(y, sample_weight, class_weight, what):
    """Keras's per-sample weights: sample_weight (n,) times, with class_weight {class: weight}, the
    weight of each sample's class (its integer label, or the argmax of a one-hot row); None when
    neither is given."""
    if sample_weight is None and class_weight is None:
        return None
    ys = y if isinstance(y, (list, tuple)) else [y]
    n = int(np.shape(ys[0])[0])
    w = np.ones(n, np.float64)
    if isinstance(sample_weight, (list, tuple)) and len(sample_weight) == 1:
        sample_weight = sample_weight[0]
    if isinstance(sample_weight, (list, tuple)) and len(ys) > 1:  # Keras: one array (or None) per output
        if len(sample_weight) != len(ys):
            raise ValueError(f"{what}: sample_weight has {len(sample_weight)} arrays for a model of {len(ys)} outputs")
        sample_weight = np.stack([np.ones(n) if v is None else np.asarray(v, np.float64).reshape(-1)
                                  for v in sample_weight], axis=1)
    if sample_weight is not None and len(ys) > 1 and np.ndim(sample_weight) == 2 and \
            np.shape(sample_weight) == (n, len(ys)):  # one column per output
        if class_weight is not None:
            raise ValueError(f"{what}: class_weight is only supported for models with a single output (as Keras)")
        return np.asarray(sample_weight, np.float32)
    if sample_weight is not None:
        sw = np.asarray(sample_weight, np.float64)
        if sw.ndim == 2 and sw.shape[1] == 1:
            sw = sw[:, 0]
        if sw.shape != (n,):
            raise ValueError(f"{what}: sample_weight of shape {sw.shape}: expected ({n},), one weight per sample "
                             f"(temporal weights per time step are not supported)")
        w *= sw
    if class_weight is not None:
        if len(ys) != 1:
            raise ValueError(f"{what}: class_weight is only supported for models with a single output (as Keras)")
        if not isinstance(class_weight, dict):
            raise TypeError(f"{what}: class_weight must be a dict {{class index: weight}}")
        lab = np.asarray(ys[0])
        if lab.ndim == 1 or (lab.ndim == 2 and lab.shape[1] == 1):
            cls = lab.reshape(n).astype(np.int64)
        elif lab.ndim == 2:
            cls = lab.argmax(axis=1)
        else:
            raise ValueError(f"{what}: class_weight is not supported for targets of 3 or more dimensions "
                             f"(shape {lab.shape}), as in Keras; use sample_weight")
        table = {int(k): float(v) for k, v in class_weight.items()}
        missing = sorted(set(np.unique(cls).tolist()) - set(table))
        if missing:
            raise ValueError(f"{what}: class_weight has no weight for classes {missing[:10]} of the labels")
        w *= np.array([table[c] for c in cls.tolist()])
    return w.astype(np.float32)


def with_weights(y, w):
    """The labels with the weights as one more array (the library reads them after the labels)."""
    if w is None:
        return y
    return (list(y) if isinstance(y, (list, tuple)) else [y]) + [w]


def _batch_len(x):
    xs = list(x.values()) if isinstance(x, dict) else x if isinstance(x, (list, tuple)) else [x]
    return int(np.shape(xs[0])[0])


class ModelAPI:
    """The mixin: needs _handle(), fit, evaluate, predict_on_batch, metrics_names."""

    # ---- eager calls ----
    def _call_on_data(self, inputs, training=None):
        from tarantella.keras import _tape  # under a GradientTape, or in training mode
        out = _tape.model_call(self, inputs, training)
        return as_tensor(self.predict_on_batch(inputs)) if out is None else out

    @property
    def trainable_weights(self):
        """Keras's trainable_weights: the weights the optimizer trains (not BatchNormalization's
        moving statistics, nor those of layers with trainable=False)."""
        flags = _trainable_flags(self)
        return [w for w, t in zip(self.weights, flags) if t]

    @property
    def non_trainable_weights(self):
        flags = _trainable_flags(self)
        return [w for w, t in zip(self.weights, flags) if not t]

    trainable_variables = trainable_weights

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, reset_metrics=True,
                       return_dict=False):
        """One optimizer step on this batch (split over the ranks of a tnt.Model); the batch's loss
        and metrics."""
        n = _batch_len(x)
        h = self.fit(x, y, batch_size=n, epochs=1, verbose=0, shuffle=False, sample_weight=sample_weight,
                     class_weight=class_weight)
        logs = {k: v[-1] for k, v in h.history.items()}
        return self._logs_result(logs, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, reset_metrics=True, return_dict=False):
        logs = self.evaluate(x, y, batch_size=_batch_len(x), verbose=0, sample_weight=sample_weight,
                             return_dict=True)
        return self._logs_result(logs, return_dict)

    def _logs_result(self, logs, return_dict):
        logs = self._keras_order(logs)
        if return_dict:
            return logs
        values = [logs[k] for k in self.metrics_names if k in logs] or list(logs.values())
        return values[0] if len(values) == 1 else values

    # Keras 2's generator methods, deprecated but kept by Keras 2.11: they call fit/evaluate/predict
    def fit_generator(self, generator, steps_per_epoch=None, epochs=1, verbose=1, callbacks=None,
                      validation_data=None, validation_steps=None, validation_freq=1, class_weight=None,
                      max_queue_size=10, workers=1, use_multiprocessing=False, shuffle=True, initial_epoch=0):
        _warn_generator("fit")
        return self.fit(generator, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=verbose,
                        callbacks=callbacks, validation_data=validation_data, validation_steps=validation_steps,
                        validation_freq=validation_freq, class_weight=class_weight, max_queue_size=max_queue_size,
                        workers=workers, use_multiprocessing=use_multiprocessing, shuffle=shuffle,
                        initial_epoch=initial_epoch)

    def evaluate_generator(self, generator, steps=None, callbacks=None, max_queue_size=10, workers=1,
                           use_multiprocessing=False, verbose=0):
        _warn_generator("evaluate")
        return self.evaluate(generator, steps=steps, callbacks=callbacks, max_queue_size=max_queue_size,
                             workers=workers, use_multiprocessing=use_multiprocessing, verbose=verbose)

    def predict_generator(self, generator, steps=None, callbacks=None, max_queue_size=10, workers=1,
                          use_multiprocessing=False, verbose=0):
        _warn_generator("predict")
        return self.predict(generator, steps=steps, callbacks=callbacks, max_queue_size=max_queue_size,
                            workers=workers, use_multiprocessing=use_multiprocessing, verbose=verbose)

    # ---- metrics ----
    @property
    def _last_logs(self):
        if "_last_logs_store" not in self.__dict__:
            self.__dict__["_last_logs_store"] = {}
        return self.__dict__["_last_logs_store"]

    def _remember_logs(self, logs):
        self._last_logs.clear()
        self._last_logs.update(logs)

    def _keras_order(self, logs):
        """The logs with the metrics in compile's order, as Keras has them (its evaluate list and
        metrics_names follow it): the library logs the metrics it computes before those of Python
        functions and Metric subclasses. Only the metrics of a flat compile list move, among
        themselves; the losses, validation block and anything else keep their places."""
        order = (getattr(self, "_compiled", None) or {}).get("metric_order")
        if not order or not isinstance(logs, dict):
            return logs
        rank = {n: i for i, n in enumerate(order)}
        keys = list(logs)
        for prefix in ("", "val_"):
            at = [i for i, k in enumerate(keys) if k.startswith(prefix) and k[len(prefix):] in rank and
                  (prefix or not k.startswith("val_"))]
            for i, k in zip(at, sorted((keys[i] for i in at), key=lambda k: rank[k[len(prefix):]])):
                keys[i] = k
        return {k: logs[k] for k in keys}

    @property
    def metrics(self):
        """Keras 2: the loss tracker and the compiled metrics, once the model has trained or been
        evaluated (empty before)."""
        from tarantella.keras import _custom_fit
        if _custom_fit.python_loop(self):  # a train_step of the user's: Keras's metric objects
            loss_tracker, mets = _custom_fit.state(self)
            return [loss_tracker] + mets
        if not self._last_logs:
            return []
        return [LoggedMetric(self, n) for n in self.metrics_names]

    def reset_metrics(self):
        from tarantella.keras import _custom_fit
        if _custom_fit.python_loop(self):
            _custom_fit.reset_metrics(self)
        self._last_logs.clear()

    # ---- what a train_step of the user's calls (keras/_custom_fit.py) ----
    @property
    def compiled_loss(self):
        from tarantella.keras import _custom_fit
        return _custom_fit.CompiledLoss(self)

    @property
    def compiled_metrics(self):
        from tarantella.keras import _custom_fit
        return _custom_fit.CompiledMetrics(self)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        from tarantella.keras import _custom_fit
        return _custom_fit.compute_loss(self, x, y, y_pred, sample_weight, training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        from tarantella.keras import _custom_fit
        return _custom_fit.compute_metrics(self, x, y, y_pred, sample_weight)

    @property
    def losses(self):
        """Keras's added losses (regularization penalties as tensors): the library adds the
        penalties inside its loss, so there are none to list here; under a GradientTape, the
        penalties of the model's recorded call (keras/_tape.py)."""
        from tarantella.keras import _tape
        return _tape.model_losses(self)

    # ---- structure ----
    @property
    def input(self):
        ins = self.inputs
        return ins[0] if len(ins) == 1 else ins

    @property
    def output(self):
        outs = self.outputs
        return outs[0] if len(outs) == 1 else outs

    @property
    def input_names(self):
        return [t._layer.name for t in self.inputs]

    @property
    def input_spec(self):
        specs = [InputSpec(shape=(None,) + tuple(s)) for s in self._handle().input_shapes()]
        return specs[0] if len(specs) == 1 else specs

    def compute_output_shape(self, input_shape):
        """Output shape(s) for an input shape with its batch axis."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        batch = tuple(shapes[0])[0] if shapes and len(tuple(shapes[0])) else None
        out = [(batch,) + tuple(s) for s in self._handle().output_shapes()]
        return out[0] if len(out) == 1 else out

    # ---- Keras's switches the library has no use for ----
    @property
    def run_eagerly(self):
        return bool(self.__dict__.get("_run_eagerly", False))

    @run_eagerly.setter
    def run_eagerly(self, value):
        if value:
            warnings.warn("run_eagerly=True: the model runs in the C library either way (there is no graph "
                          "to leave); Python callbacks and map functions run as in eager mode", stacklevel=2)
        self.__dict__["_run_eagerly"] = bool(value)

    @property
    def stateful(self):
        """Whether a layer is stateful (recurrent layers with stateful=True)."""
        import json
        return '"stateful": true' in json.dumps(json.loads(self._handle().to_json()))

    def reset_states(self):
        """The states of the stateful recurrent layers back to zeros (on p ranks each rank's rows)."""
        if self._h is not None:
            self._h.reset_states()

    @property
    def distribute_strategy(self):
        return None

    @property
    def variables(self):
        return self.weights

    def to_yaml(self, **kwargs):
        """The architecture as YAML (TF <= 2.5's Model.to_yaml, which Tarantella documents; needs
        PyYAML); model_from_yaml reads it."""
        import json
        import yaml
        return yaml.safe_dump(json.loads(self.to_json()), **kwargs)

    def get_compile_config(self):
        return dict(self._compiled) if self._compiled is not None else None
