"""tnt.keras.losses: the losses of the library under Keras's names (classes and strings).

Every loss reduces over the last axis and averages the other axes, as Keras's; the library
computes them (with their gradients) in C."""
from tarantella._core import C


class Loss:
    _name = None

    def __init__(self, from_logits=False, label_smoothing=0.0, ignore_class=None, reduction="auto", name=None,
                 axis=-1, delta=None, **kwargs):
        kwargs.pop("dtype", None)  # Keras 3: the loss's computation dtype (float32 here)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        if reduction not in ("auto", "sum_over_batch_size", None):
            raise NotImplementedError(f"{type(self).__name__}: reduction {reduction!r} is not supported")
        if axis != -1:
            raise NotImplementedError(f"{type(self).__name__}: axis {axis} (only -1) is not supported")
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)
        self.ignore_class = ignore_class
        self.reduction = reduction
        self.delta = None if delta is None else float(delta)
        if self.delta is not None and not self.delta > 0:
            raise ValueError(f"{type(self).__name__}: delta {delta!r} (expected a number > 0)")
        self.name = name or self._name

    def _spec(self):
        kind, _ = C.loss_kind(self._name)
        return kind, self.from_logits, self.label_smoothing, self.ignore_class, self.delta or 0.0

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The loss of a batch as Keras's loss object computes it: sum_i w_i loss_i / batch size."""
        import numpy as np
        from tarantella.keras import _custom_objectives
        from tarantella.keras.model_api import as_tensor
        if _custom_objectives.any_traced(y_true, y_pred, sample_weight):  # inside a custom layer's call
            return _custom_objectives.builtin_loss_value(self, y_true, y_pred, sample_weight)
        if _custom_objectives.any_model_tensor(y_true, y_pred, sample_weight):  # on a model's tensors
            from tarantella.keras._custom import functional_op

            def loss_value(a, b, w=None):
                return _custom_objectives.builtin_loss_value(self, a, b, w)
            return functional_op(loss_value, (y_true, y_pred) + (() if sample_weight is None else (sample_weight,)),
                                 {})
        kind, from_logits, smoothing, ignore, delta = self._spec()
        if ignore is not None:
            raise NotImplementedError(f"{type(self).__name__}: ignore_class outside fit is not supported")
        w = None if sample_weight is None else np.asarray(sample_weight, np.float32).reshape(-1)
        return as_tensor(np.float32(C.loss_value(kind, from_logits, smoothing, delta, np.asarray(y_true, np.float32),
                                                 np.asarray(y_pred, np.float32), w)))

    def get_config(self):
        cfg = {"name": self.name, "reduction": self.reduction}
        if isinstance(self, _CROSSENTROPIES):
            cfg["from_logits"] = self.from_logits
        if isinstance(self, (CategoricalCrossentropy, BinaryCrossentropy)):
            cfg["label_smoothing"] = self.label_smoothing
        if isinstance(self, SparseCategoricalCrossentropy):
            cfg["ignore_class"] = self.ignore_class
        if isinstance(self, Huber):
            cfg["delta"] = self.delta or 1.0
        return cfg

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class SparseCategoricalCrossentropy(Loss):
    _name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits=False, ignore_class=None, reduction="auto", name=None, **kwargs):
        super().__init__(from_logits=from_logits, ignore_class=ignore_class, reduction=reduction, name=name, **kwargs)


class CategoricalCrossentropy(Loss):
    _name = "categorical_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None, **kwargs):
        super().__init__(from_logits=from_logits, label_smoothing=label_smoothing, axis=axis, reduction=reduction,
                         name=name, **kwargs)


class BinaryCrossentropy(Loss):
    _name = "binary_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None, **kwargs):
        super().__init__(from_logits=from_logits, label_smoothing=label_smoothing, axis=axis, reduction=reduction,
                         name=name, **kwargs)


_CROSSENTROPIES = (SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy)


class _Plain(Loss):
    """A loss without options beyond reduction and name."""

    def __init__(self, reduction="auto", name=None, **kwargs):
        super().__init__(reduction=reduction, name=name, **kwargs)


class MeanSquaredError(_Plain):
    _name = "mean_squared_error"


class MeanAbsoluteError(_Plain):
    _name = "mean_absolute_error"


class MeanAbsolutePercentageError(_Plain):
    _name = "mean_absolute_percentage_error"


class MeanSquaredLogarithmicError(_Plain):
    _name = "mean_squared_logarithmic_error"


class KLDivergence(_Plain):
    _name = "kl_divergence"


class Hinge(_Plain):
    _name = "hinge"


class SquaredHinge(_Plain):
    _name = "squared_hinge"


class CategoricalHinge(_Plain):
    _name = "categorical_hinge"


class LogCosh(_Plain):
    _name = "log_cosh"


class Poisson(_Plain):
    _name = "poisson"


class CosineSimilarity(Loss):
    _name = "cosine_similarity"

    def __init__(self, axis=-1, reduction="auto", name=None, **kwargs):
        super().__init__(axis=axis, reduction=reduction, name=name, **kwargs)


class Huber(Loss):
    _name = "huber"

    def __init__(self, delta=1.0, reduction="auto", name="huber_loss", **kwargs):
        super().__init__(delta=delta, reduction=reduction, name=name, **kwargs)


_FUNCTIONS = {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
              "mean_squared_error", "mean_absolute_error", "mean_absolute_percentage_error",
              "mean_squared_logarithmic_error", "kl_divergence", "hinge", "squared_hinge", "categorical_hinge",
              "huber", "log_cosh", "poisson", "cosine_similarity"}


class _LossFunction(str):
    """Keras's loss functions (keras.losses.mse, ...): the name compile reads, and callable as
    Keras's function: fn(y_true, y_pred) -> the per-sample losses."""

    def __call__(self, y_true, y_pred):
        import numpy as np
        from tarantella.keras import _custom_objectives
        from tarantella.keras.model_api import as_tensor
        if _custom_objectives.any_traced(y_true, y_pred):  # in a traced loss or layer: Keras's formula
            return _custom_objectives.builtin_per_sample(str(self), y_true, y_pred)
        if _custom_objectives.any_model_tensor(y_true, y_pred):  # on a model's tensors: an operation of it
            from tarantella.keras._custom import functional_op
            name = str(self)

            def loss_fn(a, b):
                return _custom_objectives.builtin_per_sample(name, a, b)
            loss_fn.__name__ = name
            return functional_op(loss_fn, (y_true, y_pred), {})
        kind, _ = C.loss_kind(str(self))
        y, p = np.asarray(y_true, np.float32), np.asarray(y_pred, np.float32)
        if p.ndim < 2:
            raise ValueError(f"{self}: y_pred of shape {p.shape}: expected (batch, ...)")
        return as_tensor(np.array([C.loss_value(kind, False, 0.0, 0.0, y[i:i + 1], p[i:i + 1], None)
                                   for i in range(p.shape[0])], np.float32))


# Keras's function names, as strings the library reads (and callables)
sparse_categorical_crossentropy = "sparse_categorical_crossentropy"
categorical_crossentropy = "categorical_crossentropy"
binary_crossentropy = "binary_crossentropy"
mean_squared_error = mse = MSE = "mean_squared_error"
mean_absolute_error = mae = MAE = "mean_absolute_error"
mean_absolute_percentage_error = mape = MAPE = "mean_absolute_percentage_error"
mean_squared_logarithmic_error = msle = MSLE = "mean_squared_logarithmic_error"
kl_divergence = kld = KLD = kullback_leibler_divergence = "kl_divergence"
hinge = "hinge"
squared_hinge = "squared_hinge"
categorical_hinge = "categorical_hinge"
huber = "huber"
log_cosh = logcosh = "log_cosh"
poisson = "poisson"
cosine_similarity = "cosine_similarity"
for _n, _v in list(globals().items()):
    if isinstance(_v, str) and not _n.startswith("_") and _v in _FUNCTIONS:
        globals()[_n] = _LossFunction(_v)
del _n, _v


def per_output(loss, output_names):
    """compile's loss as (spec, kinds per output or None): a list in output order, or a dict by
    output name (outputs left out of the dict get no loss in Keras; here every output needs one)."""
    if isinstance(loss, dict):
        unknown = sorted(set(loss) - set(output_names))
        if unknown:
            raise ValueError(f"compile: losses for {unknown}, which are not outputs of the model {output_names}")
        missing = [n for n in output_names if n not in loss]
        if missing:
            raise NotImplementedError(f"compile: outputs {missing} have no loss (every output needs one)")
        loss = [loss[n] for n in output_names]
    if not isinstance(loss, (list, tuple)):
        return spec(loss), None
    if len(loss) != len(output_names):
        raise ValueError(f"compile: {len(loss)} losses for the {len(output_names)} outputs {output_names}")
    specs = [spec(x) for x in loss]
    options = {sp[1:] for sp in specs}
    if len(options) != 1:
        raise NotImplementedError("compile: losses per output with different options (from_logits, "
                                  "label_smoothing, ignore_class, delta) are not supported")
    kinds = [sp[0] for sp in specs]
    return specs[0], (kinds if len(set(kinds)) > 1 else None)


def spec(loss):
    """(kind, from_logits, label_smoothing, ignore_class, huber_delta) of a loss given to compile."""
    if loss is None:
        return 0, False, 0.0, None, 0.0
    if isinstance(loss, (list, tuple)):
        specs = {spec(x) for x in loss}
        if len(specs) != 1:
            raise ValueError("a list of different losses needs the model's outputs (losses.per_output)")
        return specs.pop()
    if isinstance(loss, dict):
        return spec(list(loss.values()))
    from tarantella.keras import _custom_objectives
    if _custom_objectives.is_custom_loss(loss):  # traced at compile; the kind is a stand-in
        kind, _ = C.loss_kind(getattr(loss, "stand_in", "mean_squared_error"))
        return kind, False, 0.0, None, 0.0
    if isinstance(loss, Loss):
        return loss._spec()
    if isinstance(loss, str):
        kind, _ = C.loss_kind(loss)
        return kind, False, 0.0, None, 0.0
    if isinstance(loss, type) and issubclass(loss, Loss):
        return loss()._spec()
    raise ValueError(f"could not interpret loss {loss!r} (custom Python losses are not supported)")


def serialize(loss):
    if isinstance(loss, Loss):
        return {"class_name": type(loss).__name__, "config": loss.get_config()}
    return loss


def deserialize(config, custom_objects=None):
    if isinstance(config, str):
        return config
    cls = globals().get(config["class_name"])
    if not (isinstance(cls, type) and issubclass(cls, Loss)):
        raise ValueError(f"unknown loss class {config['class_name']!r}")
    return cls.from_config(config.get("config", {}))


def get(identifier):
    if isinstance(identifier, dict):
        return deserialize(identifier)
    return identifier
