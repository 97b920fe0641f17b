"""fit and evaluate of a model that overrides train_step or test_step (Keras's "customizing what
happens in fit"): the loop over batches runs in Python, as Keras's does, and calls the user's step,
whose GradientTape, model calls and optimizer update run in C (keras/_tape.py). What a step uses
of the model: self.compiled_loss / compute_loss (the compiled loss plus model.losses),
self.compiled_metrics / compute_metrics and self.metrics (Keras's metric objects, a "loss"
tracker first), self.optimizer.apply_gradients. On p ranks (tnt.Model) each rank steps on its
contiguous share of every global batch and the tape averages the gradients (Horovod's way); the
logs are the rank's own."""
import numpy as np

from tarantella.keras import _tape


def _user_override(model, hook):
    for c in type(model).__mro__:
        if c.__module__.startswith("tarantella.") or c is object:
            continue
        if hook in vars(c):
            return True
    return False


def overrides_step(model, hook="train_step"):
    return _user_override(model, hook)


def bind_optimizer(model, optimizer):
    """compile(optimizer) without a loss for a train_step of the user's: the library model gets the
    optimizer that apply_gradients runs."""
    from tarantella._core import C
    C.set_optimizer(model._h, optimizer._spec())
    model.__dict__["_tape_optimizer"] = optimizer
    optimizer._bind(model)


def python_loop(model):
    """fit runs the loop in Python: the user's train_step (a compute_loss alone is traced with call
    and trains in C: keras/_compute_loss.py)."""
    return _user_override(model, "train_step")


# ---- compiled loss and metrics as Keras objects --------------------------------------------------

def _metric_object(spec, loss):
    from tarantella.keras import metrics as M
    if isinstance(spec, M.Metric):
        return spec
    if isinstance(spec, type) and issubclass(spec, M.Metric):
        return spec()
    if callable(spec) and not isinstance(spec, str):
        return M.MeanMetricWrapper(spec)
    name = str(spec)
    if name in ("accuracy", "acc"):
        lname = getattr(loss, "_name", None) or str(loss)
        cls = (M.SparseCategoricalAccuracy if "sparse_categorical" in lname else
               M.CategoricalAccuracy if "categorical" in lname else
               M.BinaryAccuracy if "binary" in lname else M.Accuracy)
        return cls(name=name)
    canonical = getattr(M, name, name)
    for cls in M._classes().values():
        if cls._name == canonical:
            return cls(name=name)
    raise ValueError(f"compile: metric {spec!r} has no metric object for a custom train_step")


def state(model):
    """The Python metrics of a model trained by its own train_step: (loss tracker, [metrics])."""
    st = model.__dict__.get("_py_state")
    if st is None:
        from tarantella.keras import metrics as M
        c = model._compiled or {}
        given = c.get("metrics_given") or []
        given = given if isinstance(given, (list, tuple)) else [given]
        mets = [_metric_object(m, c.get("loss")) for m in given]
        mets += [M.MeanMetricWrapper(fn, name=name) for _, fn, name in (c.get("metric_functions") or [])
                 if not isinstance(fn, M.Metric)]
        st = model.__dict__["_py_state"] = (M.Mean(name="loss"), mets)
    return st


class CompiledLoss:
    """Keras 2's model.compiled_loss(y_true, y_pred, sample_weight, regularization_losses)."""

    def __init__(self, model):
        self.model = model

    def __call__(self, y_true, y_pred, sample_weight=None, regularization_losses=None, track=True):
        from tarantella.keras import losses
        loss = self.model._compiled.get("loss") if self.model._compiled else None
        if loss is None:
            raise ValueError(f"model {self.model.name!r}: compiled_loss needs compile(loss=...)")
        fn = losses.get(loss)
        if isinstance(fn, str):
            fn = _loss_object(fn)
        value = fn(y_true, y_pred, sample_weight) if sample_weight is not None else fn(y_true, y_pred)
        for r in regularization_losses or []:
            value = value + r
        if track:  # Keras 2's compiled_loss keeps the loss metric itself
            state(self.model)[0].update_state(value)
        return value


def _loss_object(name):
    from tarantella.keras import losses
    for cls in vars(losses).values():
        if isinstance(cls, type) and issubclass(cls, losses.Loss) and cls._name == name:
            return cls()
    kind, canonical = losses.C.loss_kind(name)
    for cls in vars(losses).values():
        if isinstance(cls, type) and issubclass(cls, losses.Loss) and cls._name == canonical:
            return cls()
    raise ValueError(f"loss {name!r} has no loss object for a custom train_step")


class CompiledMetrics:
    """Keras 2's model.compiled_metrics: update_state(y_true, y_pred, sample_weight)."""

    def __init__(self, model):
        self.model = model

    def update_state(self, y_true, y_pred, sample_weight=None):
        for m in state(self.model)[1]:
            m.update_state(y_true, y_pred, sample_weight)

    @property
    def metrics(self):
        return state(self.model)[1]


def compute_loss(model, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """Keras 3's Model.compute_loss: the compiled loss plus model.losses."""
    return CompiledLoss(model)(y, y_pred, sample_weight, regularization_losses=model.losses, track=False)


def compute_metrics(model, x, y, y_pred, sample_weight=None):
    """Keras 3's Model.compute_metrics: updates the compiled metrics, returns every metric's result."""
    CompiledMetrics(model).update_state(y, y_pred, sample_weight)
    return {m.name: m.result() for m in model.metrics}


def default_train_step(model, data):
    """Keras's train_step, for a model whose fit runs in Python for another override (test_step)."""
    import tarantella.tensorflow as tf
    x, y, sw = _unpack(data)
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sw)
    grads = tape.gradient(loss, model.trainable_weights)
    model.optimizer.apply_gradients(zip(grads, model.trainable_weights))
    _track_loss(model, loss, x)
    return model.compute_metrics(x, y, y_pred, sw)


def _track_loss(model, loss, x):
    """Keras 3's steps: the loss tracker weighs each batch's loss by its sample count."""
    first = x
    while isinstance(first, (list, tuple, dict)):
        first = list(first.values())[0] if isinstance(first, dict) else first[0]
    state(model)[0].update_state(_tape.concrete(loss), sample_weight=len(first))


def default_test_step(model, data):
    x, y, sw = _unpack(data)
    y_pred = model(x, training=False)
    _track_loss(model, model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sw), x)
    return model.compute_metrics(x, y, y_pred, sw)


def _unpack(data):
    if isinstance(data, tuple):
        return (data + (None, None))[:3]
    return data, None, None


# ---- the loops ------------------------------------------------------------------------------------

def _batches(model, x, y, batch_size, shuffle, epoch, what):
    """(x, y) batches of this rank: its contiguous share of each global batch on p ranks."""
    from tarantella import data as tnt_data
    from tarantella._core import get_rank, get_size
    from tarantella.keras import engine
    share = model._dist is not None and get_size() > 1
    if isinstance(x, tnt_data.Dataset) or y is None:
        ds = x if isinstance(x, tnt_data.Dataset) else engine._as_dataset(x, what, shuffle)
        if not isinstance(ds, tnt_data.Dataset):
            raise NotImplementedError(f"{what} with a custom train_step: give arrays x, y or a tnt.data.Dataset")
        if not ds.is_batched:
            ds = ds.batch(batch_size or 32)
        items = ds._elements(epoch)
    else:
        xs, ys = engine._arrays(x, "x"), engine._arrays(y, "y")
        n = engine._n_samples(xs)
        order = np.arange(n)
        if shuffle:  # NumPy's global generator, which keras.utils.set_random_seed seeds
            order = np.random.permutation(n)
        bs = int(batch_size or 32)

        def gen():
            for a in range(0, n, bs):
                idx = order[a:a + bs]
                bx = [np.asarray(v)[idx] for v in xs]
                by = [np.asarray(v)[idx] for v in ys]
                yield (bx if len(bx) > 1 else bx[0]), (by if len(by) > 1 else by[0])
        items = gen()
    for item in items:
        if share:
            item = _share(item, get_rank(), get_size())
        yield item if isinstance(item, tuple) else (item,)


def _share(item, rank, size):
    def cut(v):
        if isinstance(v, (list, tuple)):
            return type(v)(cut(e) for e in v)
        if isinstance(v, dict):
            return {k: cut(e) for k, e in v.items()}
        n = len(v)
        lo = rank * (n // size) + min(rank, n % size)
        return v[lo:lo + n // size + (1 if rank < n % size else 0)]
    return tuple(cut(v) for v in item) if isinstance(item, tuple) else cut(item)


def _floats(logs):
    out = {}
    for k, v in (logs or {}).items():
        try:
            out[k] = float(np.asarray(_tape.concrete(v)))
        except (TypeError, ValueError):
            out[k] = v
    return out


def _check_callbacks(callbacks):
    from tarantella.keras import callbacks as CB
    for cb in callbacks or []:
        if isinstance(cb, CB._Builtin):
            raise NotImplementedError(f"fit with a custom train_step: the built-in callback {type(cb).__name__} "
                                      f"runs in the C fit only; use a keras.callbacks.Callback of your own")


def _call(callbacks, hook, *args):
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(*args)


def reset_metrics(model):
    for m in model.metrics:
        m.reset_state()


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_data, shuffle, initial_epoch,
        steps_per_epoch):
    """Keras's fit loop around the model's train_step."""
    from tarantella.keras.engine import History, _verbose
    _check_callbacks(callbacks)
    callbacks = list(callbacks or [])
    v = _verbose(verbose)
    params = {"verbose": v, "epochs": epochs, "steps": steps_per_epoch}
    history = History(model, params)
    for cb in callbacks:
        cb.set_model(model)
        cb.set_params(params)
    model._stop_training = False
    step_fn = model.train_step if overrides_step(model, "train_step") else \
        (lambda data: default_train_step(model, data))
    _call(callbacks, "on_train_begin", {})
    logs = {}
    for epoch in range(int(initial_epoch), int(epochs)):
        reset_metrics(model)
        _call(callbacks, "on_epoch_begin", epoch, {})
        if v:
            print(f"Epoch {epoch + 1}/{epochs}")
        steps = 0
        for step, data in enumerate(_batches(model, x, y, batch_size, shuffle, epoch, "fit")):
            if steps_per_epoch and step >= steps_per_epoch:
                break
            _call(callbacks, "on_train_batch_begin", step, {})
            logs = _floats(step_fn(data if len(data) > 1 else data[0]))
            _call(callbacks, "on_train_batch_end", step, logs)
            steps += 1
        if steps == 0:
            raise ValueError(f"fit: the training data yielded no batches in epoch {epoch + 1}")
        epoch_logs = dict(logs)
        if validation_data is not None:
            val = evaluate(model, validation_data, None, batch_size, 0)
            epoch_logs.update({"val_" + k: val_v for k, val_v in val.items()})
        if v:
            print(f"{steps}/{steps} - " + " - ".join(f"{k}: {val_v:.4f}" for k, val_v in epoch_logs.items()
                                                      if isinstance(val_v, float)))
        _call(callbacks, "on_epoch_end", epoch, epoch_logs)
        history._extend([epoch_logs], epoch)
        if model._stop_training:
            break
    _call(callbacks, "on_train_end", logs)
    model.history = history
    model._remember_logs(logs)
    return history


def evaluate(model, x, y, batch_size, verbose):
    """Keras's evaluate loop around the model's test_step: the last batch's logs (running means)."""
    if isinstance(x, (list, tuple)) and y is None and len(x) in (2, 3) and not isinstance(x, list):
        x, y = x[0], x[1]
    step_fn = model.test_step if overrides_step(model, "test_step") else \
        (lambda data: default_test_step(model, data))
    reset_metrics(model)
    logs = {}
    for data in _batches(model, x, y, batch_size, False, 0, "evaluate"):
        logs = _floats(step_fn(data if len(data) > 1 else data[0]))
    if verbose:
        print(" - ".join(f"{k}: {v:.4f}" for k, v in logs.items() if isinstance(v, float)))
    return logs
