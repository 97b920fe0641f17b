"""keras.metrics.R2Score (Keras 3; tf.keras 2.13+), and compile's metrics=["r2_score"].

The coefficient of determination per output column from four sums over every batch and rank:
sum(w y), sum(w y^2), sum(w (y - p)^2), sum(w); r2 = 1 - SS_res / SS_tot with
SS_tot = sum(w y^2) - sum(w y)^2 / sum(w), then averaged over the columns ("uniform_average"),
weighted by SS_tot ("variance_weighted_average") or per column (None); num_regressors gives the
adjusted R2, 1 - (1 - r2) (n - 1) / (n - k - 1). A column whose labels do not vary scores 0 (Keras:
an infinite score becomes 0). In fit and evaluate the sums are the metric's state in the library
(a Metric subclass traced by keras/_custom_objectives.py); on arrays they are kept here."""
import numpy as np

from tarantella.keras.metrics import Metric

_AGGREGATIONS = ("uniform_average", "variance_weighted_average", None)


def _finish(s, sq, res, cnt, n, aggregation, num_regressors, xp):
    """r2 from the sums (xp: numpy on arrays, keras.ops while traced)."""
    mean = s / xp.where(xp.equal(cnt, 0.0), 1.0, cnt)
    total = sq - s * mean
    flat = xp.equal(total, 0.0)
    raw = xp.where(flat, 0.0, 1.0 - res / xp.where(flat, 1.0, total))
    if aggregation == "uniform_average":
        r2 = xp.mean(raw)
    elif aggregation == "variance_weighted_average":
        r2 = xp.sum(total * raw) / xp.sum(total)
    else:
        r2 = raw
    if num_regressors:
        r2 = 1.0 - (1.0 - r2) * (n - 1.0) / (n - float(num_regressors) - 1.0)
    return r2


class R2Score(Metric):
    _name = "r2_score"
    _positional = ("class_aggregation", "num_regressors", "name", "dtype")

    def __init__(self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None):
        if class_aggregation not in _AGGREGATIONS:
            raise ValueError(f"R2Score: class_aggregation {class_aggregation!r} (expected one of {_AGGREGATIONS})")
        if int(num_regressors) < 0:
            raise ValueError(f"R2Score: num_regressors {num_regressors} (expected >= 0)")
        self.name, self.dtype = name or self._name, dtype or "float32"
        self.class_aggregation, self.num_regressors = class_aggregation, int(num_regressors)
        self._sums = None  # on arrays: [sum y, sum y^2, sum residual^2, sum w, samples]

    def _tnt_build(self, y_shape, p_shape):
        """The state, once the output's columns are known (compile traces update_state then)."""
        if getattr(self, "_tnt_state", None):
            return
        k = int(p_shape[-1]) if len(p_shape) else 1
        self._s, self._sq, self._res, self._cnt = (self.add_weight(name=n, shape=(k,), initializer="zeros")
                                                   for n in ("sum", "squared_sum", "total_mse", "count"))
        self._n = self.add_weight(name="num_samples", shape=(), initializer="zeros")

    @staticmethod
    def _columns(y_true, y_pred, xp):
        """(y, p) as (batch, columns): labels of one rank less get the columns' axis, as Keras."""
        if len(y_true.shape) == len(y_pred.shape) - 1:
            y_true = xp.expand_dims(y_true, -1)
        if len(y_pred.shape) == 1:
            y_true, y_pred = xp.expand_dims(y_true, -1), xp.expand_dims(y_pred, -1)
        if len(y_pred.shape) != 2:
            raise ValueError(f"R2Score: outputs of shape {tuple(y_pred.shape)}: expected (batch, columns)")
        return y_true, y_pred

    def update_state(self, y_true, y_pred, sample_weight=None):
        from tarantella.keras import _custom_objectives, ops
        if _custom_objectives.any_traced(y_true, y_pred):  # in the library: increments of the state
            y, p = self._columns(ops.cast(y_true, "float32"), y_pred, ops)
            w = ops.ones_like(y) if sample_weight is None else ops.expand_dims(sample_weight, -1) + 0.0 * y
            self._s.assign_add(ops.sum(w * y, axis=0))
            self._sq.assign_add(ops.sum(w * y * y, axis=0))
            self._res.assign_add(ops.sum(w * ops.square(y - p), axis=0))
            self._cnt.assign_add(ops.sum(w, axis=0))
            self._n.assign_add(ops.sum(ops.ones_like(y)))
            return None
        y, p = self._columns(np.asarray(y_true, np.float64), np.asarray(y_pred, np.float64), np)
        w = np.ones_like(y) if sample_weight is None else np.broadcast_to(
            np.asarray(sample_weight, np.float64).reshape(-1, 1), y.shape)
        add = [np.sum(w * y, 0), np.sum(w * y * y, 0), np.sum(w * (y - p) ** 2, 0), np.sum(w, 0), float(y.size)]
        self._sums = add if self._sums is None else [a + b for a, b in zip(self._sums, add)]
        return None

    def result(self):
        from tarantella.keras import ops
        from tarantella.keras.model_api import as_tensor
        if getattr(self, "_tnt_state", None) and getattr(self._s, "_mode", None) == "result":
            return _finish(self._s, self._sq, self._res, self._cnt, self._n, self.class_aggregation,
                           self.num_regressors, ops)
        if self._sums is None:
            return as_tensor(np.float32(0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            return as_tensor(np.float32(_finish(*self._sums, self.class_aggregation, self.num_regressors, np)))

    def reset_state(self):
        self._sums = None

    reset_states = reset_state

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "class_aggregation": self.class_aggregation,
                "num_regressors": self.num_regressors}
