"""Keras's metrics of values (Mean, Sum, MeanMetricWrapper) for custom training loops: state kept
in NumPy (float64) on the caller's side, reduced as Keras 3's reduction metrics reduce
(values with more axes than the sample weights are first averaged, or summed for Sum, over the
extra axes; a Mean counts samples, or the sum of their weights)."""
import numpy as np

from tarantella.keras.metrics import Metric


def _same_rank(a, b):
    """Ranks one apart with a trailing axis of 1: Keras squeezes it (or expands a rank-1 partner)."""
    if a.ndim == b.ndim + 1 and a.shape[-1] == 1:
        return (a, b[..., None]) if b.ndim == 1 else (a[..., 0], b)
    if b.ndim == a.ndim + 1 and b.shape[-1] == 1:
        return (a[..., None], b) if a.ndim == 1 else (a, b[..., 0])
    return a, b


def _samplewise(values, sample_weight, reduce_fn):
    """(values per sample, weights per sample or None)."""
    from tarantella.keras import _tape
    values = np.asarray(_tape.concrete(values), np.float64)
    if sample_weight is not None:
        w = np.asarray(_tape.concrete(sample_weight), np.float64)
        values, w = _same_rank(values, w)
        if values.ndim > w.ndim:
            values = reduce_fn(values, axis=tuple(range(w.ndim, values.ndim)))
        try:
            w = np.broadcast_to(w, values.shape)
        except ValueError:
            raise ValueError(f"sample_weight of shape {np.shape(sample_weight)} does not broadcast to the values' "
                             f"shape {values.shape}") from None
        values = values * w
        if w.ndim > 1:
            w = reduce_fn(w, axis=tuple(range(1, w.ndim)))
        sample_weight = w
    if values.ndim > 1:
        values = reduce_fn(values, axis=tuple(range(1, values.ndim)))
    return values, sample_weight


class _ValueMetric(Metric):
    _positional = ("name", "dtype")

    def _state(self):
        if getattr(self, "_state_array", None) is None:
            self._state_array = np.zeros(2, np.float64)  # total, count
        return self._state_array

    def _c_name(self):
        raise NotImplementedError(f"keras.metrics.{type(self).__name__} in compile: Keras calls a compiled metric's "
                                  f"update_state(y_true, y_pred), which {type(self).__name__} does not take; use it in "
                                  f"a custom training loop, or a metric function in compile")

    def reset_state(self):
        self._state()[:] = 0

    reset_states = reset_state

    def __call__(self, *args, **kwargs):
        self.update_state(*args, **kwargs)
        return self.result()

    @property
    def variables(self):
        return [np.float32(v) for v in self._state()]


class Sum(_ValueMetric):
    """keras.metrics.Sum: the (weighted) sum of the values given."""
    _name = "sum"

    def update_state(self, values, sample_weight=None):
        v, _ = _samplewise(values, sample_weight, np.sum)
        self._state()[0] += float(np.sum(v))

    def result(self):
        from tarantella.keras.model_api import as_tensor
        return as_tensor(np.float32(self._state()[0]))


class Mean(_ValueMetric):
    """keras.metrics.Mean: the (weighted) mean of the values given, total / count."""
    _name = "mean"

    def update_state(self, values, sample_weight=None):
        v, w = _samplewise(values, sample_weight, np.mean)
        st = self._state()
        st[0] += float(np.sum(v))
        st[1] += float(np.sum(w)) if w is not None else (v.shape[0] if v.ndim >= 1 else 1)

    def result(self):
        from tarantella.keras.model_api import as_tensor
        total, count = self._state()
        return as_tensor(np.float32(total / count if count != 0 else 0.0))  # divide_no_nan


class MeanMetricWrapper(Mean):
    """keras.metrics.MeanMetricWrapper(fn): the mean of fn(y_true, y_pred, **kwargs) per sample."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        super().__init__(name=name or getattr(fn, "__name__", "mean_metric_wrapper"), dtype=dtype)
        self._fn, self._fn_kwargs = fn, kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
        from tarantella.keras import _tape
        values = self._fn(np.asarray(_tape.concrete(y_true)), np.asarray(_tape.concrete(y_pred)), **self._fn_kwargs)
        super().update_state(values, sample_weight)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "fn": getattr(self._fn, "__name__", None)}
