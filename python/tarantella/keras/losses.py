"""tnt.keras.losses: the losses of the library under Keras's names (classes and strings)."""
from tarantella._core import C


class Loss:
    _name = None

    def __init__(self, from_logits=False, label_smoothing=0.0, ignore_class=None, reduction="auto", name=None,
                 axis=-1):
        if reduction not in ("auto", "sum_over_batch_size", None):
            raise NotImplementedError(f"{type(self).__name__}: reduction {reduction!r} is not supported")
        if axis != -1:
            raise NotImplementedError(f"{type(self).__name__}: axis {axis} (only -1) is not supported")
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)
        self.ignore_class = ignore_class
        self.name = name or self._name

    def _spec(self):
        kind, _ = C.loss_kind(self._name)
        return kind, self.from_logits, self.label_smoothing, self.ignore_class

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits, "label_smoothing": self.label_smoothing}


class SparseCategoricalCrossentropy(Loss):
    _name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits=False, ignore_class=None, reduction="auto", name=None):
        super().__init__(from_logits=from_logits, ignore_class=ignore_class, reduction=reduction, name=name)


class CategoricalCrossentropy(Loss):
    _name = "categorical_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None):
        super().__init__(from_logits=from_logits, label_smoothing=label_smoothing, axis=axis, reduction=reduction,
                         name=name)


class BinaryCrossentropy(Loss):
    _name = "binary_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None):
        super().__init__(from_logits=from_logits, label_smoothing=label_smoothing, axis=axis, reduction=reduction,
                         name=name)


class MeanSquaredError(Loss):
    _name = "mean_squared_error"

    def __init__(self, reduction="auto", name=None):
        super().__init__(reduction=reduction, name=name)


class MeanAbsoluteError(Loss):
    _name = "mean_absolute_error"

    def __init__(self, reduction="auto", name=None):
        super().__init__(reduction=reduction, name=name)


# Keras's function names, as strings the library reads
sparse_categorical_crossentropy = "sparse_categorical_crossentropy"
categorical_crossentropy = "categorical_crossentropy"
binary_crossentropy = "binary_crossentropy"
mean_squared_error = mse = MSE = "mean_squared_error"
mean_absolute_error = mae = MAE = "mean_absolute_error"


def spec(loss):
    """(kind, from_logits, label_smoothing, ignore_class) of a loss given to compile."""
    if loss is None:
        return 0, False, 0.0, None
    if isinstance(loss, (list, tuple)):
        specs = {spec(x) for x in loss}
        if len(specs) != 1:
            raise NotImplementedError("compile: one loss for all outputs (different losses per output are not "
                                      "supported)")
        return specs.pop()
    if isinstance(loss, dict):
        return spec(list(loss.values()))
    if isinstance(loss, Loss):
        return loss._spec()
    if isinstance(loss, str):
        kind, _ = C.loss_kind(loss)
        return kind, False, 0.0, None
    if isinstance(loss, type) and issubclass(loss, Loss):
        return loss()._spec()
    raise ValueError(f"could not interpret loss {loss!r} (custom Python losses are not supported)")


def get(identifier):
    return identifier
