"""tnt.keras.metrics: the metrics of the library under Keras's names (classes and strings). They
are computed as (sum, count) pairs summed over ranks, so every rank sees the global figure."""


class Metric:
    _name = None

    def __init__(self, name=None, dtype=None):
        if name is not None and name != self._name:
            raise NotImplementedError(f"{type(self).__name__}: a metric's own name ({name!r}) is not supported; "
                                      f"it logs as {self._name!r}")
        self.name = self._name

    def _c_name(self):
        return self._name


class SparseCategoricalAccuracy(Metric):
    _name = "sparse_categorical_accuracy"


class CategoricalAccuracy(Metric):
    _name = "categorical_accuracy"


class BinaryAccuracy(Metric):
    _name = "binary_accuracy"

    def __init__(self, name=None, dtype=None, threshold=0.5):
        if threshold != 0.5:
            raise NotImplementedError("BinaryAccuracy: only threshold 0.5 is supported")
        super().__init__(name, dtype)


class TopKCategoricalAccuracy(Metric):
    _name = "top_k_categorical_accuracy"

    def __init__(self, k=5, name=None, dtype=None):
        super().__init__(name, dtype)
        self.k = int(k)

    def _c_name(self):
        return self._name if self.k == 5 else f"{self._name}:{self.k}"


class SparseTopKCategoricalAccuracy(TopKCategoricalAccuracy):
    _name = "sparse_top_k_categorical_accuracy"


class MeanSquaredError(Metric):
    _name = "mean_squared_error"


class MeanAbsoluteError(Metric):
    _name = "mean_absolute_error"


_ALIASES = {"acc": "accuracy", "mse": "mean_squared_error", "mae": "mean_absolute_error"}


def names(metrics):
    """The library's metric names of compile's metrics list."""
    if metrics is None:
        return []
    if isinstance(metrics, dict):
        metrics = [m for v in metrics.values() for m in (v if isinstance(v, (list, tuple)) else [v])]
    if not isinstance(metrics, (list, tuple)):
        metrics = [metrics]
    out = []
    for m in metrics:
        if isinstance(m, type) and issubclass(m, Metric):
            m = m()
        if isinstance(m, Metric):
            out.append(m._c_name())
        elif isinstance(m, str):
            out.append(_ALIASES.get(m, m))
        else:
            raise ValueError(f"could not interpret metric {m!r} (custom Python metrics are not supported)")
    return out
