"""tnt.keras.callbacks: Keras's callbacks, and Python callbacks.

The built-in ones (EarlyStopping, ModelCheckpoint, ...) are the library's, in C. A Python callback
subclasses Callback and overrides Keras's methods (on_epoch_end(self, epoch, logs), ...); only the
methods it overrides are called, each with the GIL, from the C training loop. The logs are the
exact global figures, identical on every rank.

Tarantella's wrapper: Callback(keras_callback, aggregate_logs=True, run_on_all_ranks=True).
run_on_all_ranks=False runs it on the master only; aggregate_logs=False gives it this rank's own
training figures (its share of each batch) instead of the global ones. Subclasses may set both as
class attributes too. on_predict_batch_end gets the batch's predictions as logs["outputs"], as
Keras passes them (on p ranks this rank's share of the batch).
"""
from tarantella._core import C

_HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
          "on_train_batch_end", "on_test_begin", "on_test_end", "on_predict_begin", "on_predict_end",
          "on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end")


class Callback:
    """Keras's Callback base class, and Tarantella's wrapper of one."""

    run_on_all_ranks = True
    aggregate_logs = True

    def __init__(self, keras_callback=None, aggregate_logs=True, run_on_all_ranks=True):
        self._wrapped = keras_callback
        if keras_callback is not None or aggregate_logs is not True or run_on_all_ranks is not True:
            self.aggregate_logs = aggregate_logs
            self.run_on_all_ranks = run_on_all_ranks
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model
        if getattr(self, "_wrapped", None) is not None and hasattr(self._wrapped, "set_model"):
            self._wrapped.set_model(model)
        elif getattr(self, "_wrapped", None) is not None:
            self._wrapped.model = model

    def set_params(self, params):
        self.params = params
        if getattr(self, "_wrapped", None) is not None:
            if hasattr(self._wrapped, "set_params"):
                self._wrapped.set_params(params)
            else:
                self._wrapped.params = params

    # Keras's hooks. A wrapper passes them on to the callback it wraps; the train batch hooks fall
    # back to on_batch_* as in Keras.
    def _pass(self, name, alias, *args):
        w = getattr(self, "_wrapped", None)
        if w is None:
            return None
        fn = getattr(w, name, None) or (getattr(w, alias, None) if alias else None)
        return fn(*args) if fn is not None else None

    def on_train_begin(self, logs=None):
        self._pass("on_train_begin", None, logs)

    def on_train_end(self, logs=None):
        self._pass("on_train_end", None, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._pass("on_epoch_begin", None, epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._pass("on_epoch_end", None, epoch, logs)

    def on_batch_begin(self, batch, logs=None):
        self._pass("on_batch_begin", None, batch, logs)

    def on_batch_end(self, batch, logs=None):
        self._pass("on_batch_end", None, batch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        if getattr(self, "_wrapped", None) is not None:
            self._pass("on_train_batch_begin", "on_batch_begin", batch, logs)
        else:
            self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        if getattr(self, "_wrapped", None) is not None:
            self._pass("on_train_batch_end", "on_batch_end", batch, logs)
        else:
            self.on_batch_end(batch, logs)

    def on_test_begin(self, logs=None):
        self._pass("on_test_begin", None, logs)

    def on_test_end(self, logs=None):
        self._pass("on_test_end", None, logs)

    def on_predict_begin(self, logs=None):
        self._pass("on_predict_begin", None, logs)

    def on_predict_end(self, logs=None):
        self._pass("on_predict_end", None, logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._pass("on_test_batch_begin", None, batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._pass("on_test_batch_end", None, batch, logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._pass("on_predict_batch_begin", None, batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._pass("on_predict_batch_end", None, batch, logs)

    # ---- how fit runs it ----
    def _hooks(self):
        """The hooks this callback implements (the others are not called at all, so that a
        callback without batch hooks costs nothing per batch)."""
        w = getattr(self, "_wrapped", None)
        if isinstance(w, Callback):
            return w._hooks()
        if w is not None:  # any object with Keras's hook methods
            out = [h for h in _HOOKS if callable(getattr(w, h, None))]
            for h in ("on_train_batch_begin", "on_train_batch_end"):
                if h not in out and callable(getattr(w, h.replace("train_batch", "batch"), None)):
                    out.append(h)
            return out
        cls = type(self)
        out = [h for h in _HOOKS if h in vars(self) or getattr(cls, h) is not getattr(Callback, h)]
        for h in ("on_train_batch_begin", "on_train_batch_end"):
            alias = h.replace("train_batch", "batch")
            if h not in out and (alias in vars(self) or getattr(cls, alias) is not getattr(Callback, alias)):
                out.append(h)
        return out

    def _tnt_handle(self, model, params):
        self.set_model(model)
        self.set_params(params)
        w = getattr(self, "_wrapped", None)
        if isinstance(w, _Builtin):  # a wrapped built-in: its C callback with the flags
            h = w._tnt_handle(model, params)
            h.master_only = not self.run_on_all_ranks
            h.local_logs = not self.aggregate_logs
            return h
        hooks = self._hooks()
        target = _WithOutputs(self, model) if "on_predict_batch_end" in hooks else self
        return C.python_callback(target, hooks, not self.run_on_all_ranks, not self.aggregate_logs)


class _WithOutputs:
    """What the library calls for a callback with on_predict_batch_end: Keras passes that hook the
    batch's predictions as logs["outputs"] (as predict returns them: one array, a list or a dict;
    on p ranks this rank's rows of the batch); the other hooks go to the callback as they are."""

    def __init__(self, callback, model):
        self._callback, self._model = callback, model

    def __getattr__(self, name):
        return getattr(self._callback, name)

    def on_predict_batch_end(self, batch, logs=None):
        from tarantella.keras.model_api import as_tensor
        out = self._model._split_outputs(self._model._h.batch_outputs())
        logs = dict(logs or {})
        logs["outputs"] = {k: as_tensor(v) for k, v in out.items()} if isinstance(out, dict) else as_tensor(out)
        return self._callback.on_predict_batch_end(batch, logs)


def handle_of(cb, model, params):
    """The C callback of a callback given to fit, evaluate or predict."""
    if isinstance(cb, (Callback, _Builtin)):
        return cb._tnt_handle(model, params)
    if any(hasattr(cb, h) for h in _HOOKS):  # a duck-typed callback object
        return Callback(cb)._tnt_handle(model, params)
    raise TypeError(f"callbacks: {cb!r} is not a callback")


class LambdaCallback(Callback):
    """Keras's LambdaCallback(on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None,
    on_batch_end=None, on_train_begin=None, on_train_end=None, **kwargs)."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None, on_batch_end=None,
                 on_train_begin=None, on_train_end=None, **kwargs):
        super().__init__()
        fns = dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end, on_train_begin=on_train_begin,
                   on_train_end=on_train_end, on_train_batch_begin=kwargs.pop("on_train_batch_begin", on_batch_begin),
                   on_train_batch_end=kwargs.pop("on_train_batch_end", on_batch_end))
        for h in ("on_test_begin", "on_test_end", "on_predict_begin", "on_predict_end", "on_test_batch_begin",
                  "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end"):
            fns[h] = kwargs.pop(h, None)
        if kwargs:
            raise TypeError(f"LambdaCallback: unexpected arguments {sorted(kwargs)}")
        for k, fn in fns.items():
            if fn is not None:
                setattr(self, k, fn)


class History(Callback):
    """Keras's History: .history {name: [value per epoch]} and .epoch, filled by fit."""

    def __init__(self):
        super().__init__()
        self.history, self.epoch = {}, []

    def _extend(self, logs_per_epoch, first_epoch):
        for i, logs in enumerate(logs_per_epoch):
            self.epoch.append(first_epoch + i)
            for k, v in logs.items():
                self.history.setdefault(k, []).append(v)

    def _hooks(self):
        return []


class ProgbarLogger(Callback):
    """Progress output comes from fit's verbose argument; this callback changes nothing."""

    def __init__(self, count_mode="samples", stateful_metrics=None):
        super().__init__()

    def _hooks(self):
        return []


class BaseLogger(Callback):
    def __init__(self, *a, **k):
        raise NotImplementedError("BaseLogger cannot be added explicitly (as in Tarantella)")


# ---- the library's callbacks ---------------------------------------------------------------------

class _Builtin:
    """A callback of the library (C). Its state lasts across fits, as a Keras callback's."""

    _h = None

    def _tnt_handle(self, model, params):
        self.model = model
        return self._h

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params


class EarlyStopping(_Builtin):
    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        self._h = C.early_stopping(monitor=monitor, min_delta=float(min_delta), patience=int(patience),
                                   verbose=int(verbose), mode=mode, baseline=baseline,
                                   restore_best_weights=bool(restore_best_weights),
                                   start_from_epoch=int(start_from_epoch))
        self.monitor, self.patience = monitor, patience

    @property
    def stopped_epoch(self):
        return self._h.stopped_epoch()

    @property
    def best(self):
        return self._h.best()


class ReduceLROnPlateau(_Builtin):
    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0, **kwargs):
        if "epsilon" in kwargs:  # Keras's old name
            min_delta = kwargs.pop("epsilon")
        if kwargs:
            raise TypeError(f"ReduceLROnPlateau: unexpected arguments {sorted(kwargs)}")
        self._h = C.reduce_lr_on_plateau(monitor=monitor, factor=float(factor), patience=int(patience),
                                         verbose=int(verbose), mode=mode, min_delta=float(min_delta),
                                         cooldown=int(cooldown), min_lr=float(min_lr))


class LearningRateScheduler(_Builtin):
    """schedule(epoch, lr) -> new lr (or schedule(epoch)), at the beginning of every epoch."""

    def __init__(self, schedule, verbose=0):
        def call(epoch, lr):
            try:
                return float(schedule(epoch, lr))
            except TypeError:  # Keras's fallback for one-argument schedules
                return float(schedule(epoch))
        self.schedule = schedule
        self._h = C.learning_rate_scheduler(call, int(verbose))


class TerminateOnNaN(_Builtin):
    def __init__(self):
        self._h = C.terminate_on_nan()


class CSVLogger(_Builtin):
    def __init__(self, filename, separator=",", append=False):
        self._h = C.csv_logger(str(filename), separator, bool(append))


class ModelCheckpoint(_Builtin):
    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", options=None, initial_value_threshold=None,
                 tnt_save_all_devices=False, **kwargs):
        if "period" in kwargs:
            raise NotImplementedError("ModelCheckpoint: period is not supported; use save_freq")
        if kwargs:
            raise TypeError(f"ModelCheckpoint: unexpected arguments {sorted(kwargs)}")
        if save_freq == "epoch":
            freq = 0
        elif isinstance(save_freq, int) and save_freq > 0:
            freq = save_freq
        else:
            raise ValueError(f"ModelCheckpoint: save_freq {save_freq!r} (expected 'epoch' or a positive int)")
        self._h = C.model_checkpoint(str(filepath), monitor=monitor, verbose=int(verbose),
                                     save_best_only=bool(save_best_only), save_weights_only=bool(save_weights_only),
                                     mode=mode, save_freq=freq, initial_value_threshold=initial_value_threshold,
                                     save_all_devices=bool(tnt_save_all_devices))


class RemoteMonitor(_Builtin):
    def __init__(self, root="http://localhost:9000", path="/publish/epoch/end/", field="data", headers=None,
                 send_as_json=False):
        self._h = C.remote_monitor(root=root, path=path, field=field, headers=headers,
                                   send_as_json=bool(send_as_json))


class TensorBoard(_Builtin):
    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False, write_steps_per_second=False,
                 update_freq="epoch", profile_batch=0, embeddings_freq=0, embeddings_metadata=None, **kwargs):
        if embeddings_freq:
            raise NotImplementedError("TensorBoard: embeddings are not written")
        freq = 0 if update_freq == "epoch" else int(update_freq) if update_freq != "batch" else 1
        self._h = C.tensorboard(str(log_dir), freq, int(histogram_freq or 0))  # weight histograms, as Keras
