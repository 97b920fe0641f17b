"""tnt.keras.metrics: the metrics of the library under Keras's names (classes and strings). They
are computed in C as (sum, count) pairs (the confusion-matrix counts as sums) summed over ranks,
so every rank sees the global figure; the logs use Keras's names: a string as written
(metrics=["mae"] logs "mae" and "val_mae"), a class by its name (default: Keras's)."""
from tarantella.keras import losses as _losses


class Metric:
    _name = None   # Keras's default name
    _kind = None   # the library's metric
    _options = {}  # Keras's constructor options this metric takes: {name: default}
    _fixed = {}    # options accepted only at Keras's default value
    _positional = ("name", "dtype")  # Keras's constructor arguments in order

    def __init__(self, *args, **kwargs):
        if len(args) > len(self._positional):
            raise TypeError(f"{type(self).__name__}: at most {len(self._positional)} positional arguments "
                            f"{self._positional}")
        for key, v in zip(self._positional, args):
            if key in kwargs:
                raise TypeError(f"{type(self).__name__}: got multiple values for argument {key!r}")
            kwargs[key] = v
        name, dtype = kwargs.pop("name", None), kwargs.pop("dtype", None)
        for k, v in kwargs.items():
            if k in self._options:
                setattr(self, k, v)
            elif k in self._fixed:
                if v != self._fixed[k]:
                    raise NotImplementedError(f"{type(self).__name__}: {k}={v!r} is not supported (only "
                                              f"{self._fixed[k]!r})")
            else:
                raise TypeError(f"{type(self).__name__}: unexpected argument {k!r}")
        for k, v in self._options.items():
            if k not in kwargs:
                setattr(self, k, v)
        self.name = name or self._name
        self.dtype = dtype or "float32"

    def _param(self):
        return ""

    def add_weight(self, *args, **kwargs):
        """A state variable of a Metric subclass (Keras 2's add_weight(name, shape, ...) or Keras 3's
        add_variable(shape, initializer, dtype, aggregation, name)), traced with its update_state
        and result (keras/_custom_objectives.py)."""
        from tarantella.keras import _custom_objectives
        return _custom_objectives.state_variable(self, args, kwargs)

    add_variable = add_weight

    def _c_name(self):
        spec = (self._kind or self._name) + self._param()
        return spec if self.name == spec else f"{self.name}={spec}"

    # ---- outside fit: Keras's update_state / result / reset_state, computed by the library ----
    def _state(self):
        import numpy as np
        from tarantella._core import C
        if getattr(self, "_state_array", None) is None:
            self._state_array = np.zeros(C.metric_state_size(), np.float64)
        return self._state_array

    def _layout(self):
        from tarantella._core import C
        spec = self._c_name().split("=", 1)[-1]
        return spec, (C.loss_kind("sparse_categorical_crossentropy")[0] if spec.startswith("sparse") else 0)

    def update_state(self, y_true, y_pred, sample_weight=None):
        import numpy as np
        from tarantella._core import C
        from tarantella.keras import _custom_objectives, _tape
        y_true, y_pred, sample_weight = (_tape.concrete(v) for v in (y_true, y_pred, sample_weight))
        if _custom_objectives.any_traced(y_true, y_pred):  # a metric updated inside a custom layer's call
            import warnings
            warnings.warn(f"{type(self).__name__}.update_state inside a layer's call: metrics tracked by layers are "
                          f"not logged by fit here (give the metric to compile instead)", stacklevel=2)
            return None
        spec, loss = self._layout()
        C.metric_update(spec, loss, np.asarray(y_true, np.float32), np.asarray(y_pred, np.float32),
                        None if sample_weight is None else np.asarray(sample_weight, np.float32).reshape(-1),
                        self._state())

    def result(self):
        import numpy as np
        from tarantella._core import C
        from tarantella.keras.model_api import as_tensor
        spec, loss = self._layout()
        v = C.metric_result(spec, loss, self._state())
        if np.isnan(v) and not self._state().any():  # nothing seen: Keras divides with divide_no_nan
            v = 0.0
        return as_tensor(np.float32(v))

    def reset_state(self):
        self._state()[:] = 0

    reset_states = reset_state

    def __call__(self, y_true, y_pred, sample_weight=None):
        self.update_state(y_true, y_pred, sample_weight)
        return self.result()

    def get_config(self):
        cfg = {"name": self.name, "dtype": self.dtype}
        cfg.update({k: getattr(self, k) for k in self._options})
        return cfg

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"<tnt.keras.metrics.{type(self).__name__} {self.name!r}>"


def _metric(cls_name, name, kind=None, options=None, fixed=None, param=None, positional=("name", "dtype")):
    attrs = {"_name": name, "_kind": kind, "_options": dict(options or {}), "_fixed": dict(fixed or {}),
             "_positional": positional}
    if param:
        attrs["_param"] = param
    return type(cls_name, (Metric,), attrs)


def _threshold(self):
    t = self.threshold if hasattr(self, "threshold") else self.thresholds
    if t is None or t == 0.5:
        return ""
    if isinstance(t, (list, tuple)):
        if len(t) != 1:
            raise NotImplementedError(f"{type(self).__name__}: several thresholds {t!r} are not supported (one)")
        t = t[0]
    return f":{float(t):.9g}"


def _k(self):
    return "" if self.k == 5 else f":{int(self.k)}"


Accuracy = _metric("Accuracy", "accuracy", kind="equal_accuracy")
BinaryAccuracy = _metric("BinaryAccuracy", "binary_accuracy", options={"threshold": 0.5}, param=_threshold,
                         positional=("name", "dtype", "threshold"))
CategoricalAccuracy = _metric("CategoricalAccuracy", "categorical_accuracy")
SparseCategoricalAccuracy = _metric("SparseCategoricalAccuracy", "sparse_categorical_accuracy")
TopKCategoricalAccuracy = _metric("TopKCategoricalAccuracy", "top_k_categorical_accuracy", options={"k": 5},
                                  param=_k, positional=("k", "name", "dtype"))
SparseTopKCategoricalAccuracy = _metric("SparseTopKCategoricalAccuracy", "sparse_top_k_categorical_accuracy",
                                        options={"k": 5}, param=_k, positional=("k", "name", "dtype"))
MeanSquaredError = _metric("MeanSquaredError", "mean_squared_error")
MeanAbsoluteError = _metric("MeanAbsoluteError", "mean_absolute_error")
MeanAbsolutePercentageError = _metric("MeanAbsolutePercentageError", "mean_absolute_percentage_error")
MeanSquaredLogarithmicError = _metric("MeanSquaredLogarithmicError", "mean_squared_logarithmic_error")
RootMeanSquaredError = _metric("RootMeanSquaredError", "root_mean_squared_error")
KLDivergence = _metric("KLDivergence", "kullback_leibler_divergence", kind="kl_divergence")
Hinge = _metric("Hinge", "hinge")
SquaredHinge = _metric("SquaredHinge", "squared_hinge")
CategoricalHinge = _metric("CategoricalHinge", "categorical_hinge")
LogCoshError = _metric("LogCoshError", "logcosh")
Poisson = _metric("Poisson", "poisson")
CosineSimilarity = _metric("CosineSimilarity", "cosine_similarity", fixed={"axis": -1})
_CE_FIXED = {"from_logits": False, "label_smoothing": 0, "axis": -1}
_CE_ARGS = ("name", "dtype", "from_logits", "label_smoothing")
BinaryCrossentropy = _metric("BinaryCrossentropy", "binary_crossentropy", fixed=_CE_FIXED, positional=_CE_ARGS)
CategoricalCrossentropy = _metric("CategoricalCrossentropy", "categorical_crossentropy", fixed=_CE_FIXED,
                                  positional=_CE_ARGS)
SparseCategoricalCrossentropy = _metric("SparseCategoricalCrossentropy", "sparse_categorical_crossentropy",
                                        fixed={"from_logits": False, "axis": -1, "ignore_class": None})
_CONFUSION = {"thresholds": None}
_CM_ARGS = ("thresholds", "name", "dtype")
TruePositives = _metric("TruePositives", "true_positives", options=_CONFUSION, param=_threshold, positional=_CM_ARGS)
FalsePositives = _metric("FalsePositives", "false_positives", options=_CONFUSION, param=_threshold,
                         positional=_CM_ARGS)
TrueNegatives = _metric("TrueNegatives", "true_negatives", options=_CONFUSION, param=_threshold, positional=_CM_ARGS)
FalseNegatives = _metric("FalseNegatives", "false_negatives", options=_CONFUSION, param=_threshold,
                         positional=_CM_ARGS)
_PR_ARGS = ("thresholds", "top_k", "class_id", "name", "dtype")
Precision = _metric("Precision", "precision", options=_CONFUSION, fixed={"top_k": None, "class_id": None},
                    param=_threshold, positional=_PR_ARGS)
Recall = _metric("Recall", "recall", options=_CONFUSION, fixed={"top_k": None, "class_id": None},
                 param=_threshold, positional=_PR_ARGS)

class AUC(Metric):
    """Keras's AUC with multi_label=False and summation_method "interpolation" (the defaults): the
    ROC or PR curve's area from counts at num_thresholds thresholds, summed over batches and ranks."""
    _name = "auc"
    _options = {"num_thresholds": 200, "curve": "ROC", "summation_method": "interpolation"}
    _fixed = {"thresholds": None, "multi_label": False, "num_labels": None, "label_weights": None,
              "from_logits": False}

    _positional = ("num_thresholds", "curve", "summation_method", "name", "dtype", "thresholds", "multi_label",
                   "num_labels", "label_weights", "from_logits")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if str(self.curve).upper() not in ("ROC", "PR"):
            raise ValueError(f"AUC: curve {self.curve!r} (expected 'ROC' or 'PR')")
        if self.summation_method != "interpolation":
            raise NotImplementedError(f"AUC: summation_method {self.summation_method!r} is not supported "
                                      f"(only 'interpolation')")
        if not 2 <= int(self.num_thresholds) <= 200:
            raise NotImplementedError(f"AUC: num_thresholds {self.num_thresholds} (supported: 2 to 200)")

    def _c_name(self):
        spec = ("pr_auc" if str(self.curve).upper() == "PR" else "auc") + \
            ("" if int(self.num_thresholds) == 200 else f":{int(self.num_thresholds)}")
        return spec if self.name == spec else f"{self.name}={spec}"


def _target_metric(cls_name, name, target):
    """Keras's SensitivitySpecificityBase classes: (target, num_thresholds=200, class_id=None, name,
    dtype), from the same counts at 200 thresholds as AUC."""
    def param(self):
        v = float(getattr(self, target))
        if not 0 <= v <= 1:
            raise ValueError(f"{cls_name}: {target} {v} (expected a number in [0, 1])")
        return f":{v:.9g}"
    cls = _metric(cls_name, name, options={target: None}, fixed={"num_thresholds": 200, "class_id": None},
                  param=param, positional=(target, "num_thresholds", "class_id", "name", "dtype"))
    return cls


PrecisionAtRecall = _target_metric("PrecisionAtRecall", "precision_at_recall", "recall")
RecallAtPrecision = _target_metric("RecallAtPrecision", "recall_at_precision", "precision")
SensitivityAtSpecificity = _target_metric("SensitivityAtSpecificity", "sensitivity_at_specificity", "specificity")
SpecificityAtSensitivity = _target_metric("SpecificityAtSensitivity", "specificity_at_sensitivity", "sensitivity")

# Keras's metric functions, as the names the library reads
binary_accuracy = "binary_accuracy"
categorical_accuracy = "categorical_accuracy"
sparse_categorical_accuracy = "sparse_categorical_accuracy"
top_k_categorical_accuracy = "top_k_categorical_accuracy"
sparse_top_k_categorical_accuracy = "sparse_top_k_categorical_accuracy"
mean_squared_error = mse = MSE = "mean_squared_error"
mean_absolute_error = mae = MAE = "mean_absolute_error"
mean_absolute_percentage_error = mape = MAPE = "mean_absolute_percentage_error"
mean_squared_logarithmic_error = msle = MSLE = "mean_squared_logarithmic_error"
kl_divergence = kld = KLD = kullback_leibler_divergence = "kullback_leibler_divergence"
hinge = "hinge"
squared_hinge = "squared_hinge"
categorical_hinge = "categorical_hinge"
logcosh = log_cosh = "logcosh"
poisson = "poisson"
cosine_similarity = "cosine_similarity"
binary_crossentropy = "binary_crossentropy"
categorical_crossentropy = "categorical_crossentropy"
sparse_categorical_crossentropy = "sparse_categorical_crossentropy"
# Keras's metrics module re-exports the loss functions (keras.metrics.binary_crossentropy is
# keras.losses.binary_crossentropy): the same names, callable on (y_true, y_pred) as there
for _n, _v in list(globals().items()):
    if isinstance(_v, str) and not _n.startswith("_") and _v in _losses._FUNCTIONS | {"kullback_leibler_divergence",
                                                                                       "logcosh"}:
        globals()[_n] = _losses._LossFunction(_v)
del _n, _v

_UNSUPPORTED = ("MeanIoU", "IoU", "BinaryIoU", "OneHotIoU", "OneHotMeanIoU", "F1Score",
                "FBetaScore", "MeanTensor")


from tarantella.keras._value_metrics import Mean, Sum, MeanMetricWrapper  # noqa: E402,F401  (custom loops)
from tarantella.keras._r2_score import R2Score  # noqa: E402,F401  (Keras 3's, traced as a Metric subclass)


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise NotImplementedError(f"tnt.keras.metrics.{name} is not supported yet (the metrics the library "
                                  f"computes: {', '.join(sorted(_classes()))})")
    raise AttributeError(f"module 'tarantella.keras.metrics' has no attribute {name!r}")


def _classes():
    return {k: v for k, v in globals().items() if isinstance(v, type) and issubclass(v, Metric) and v is not Metric}


def names(metrics, output_names=None):
    """The library's metric specs of compile's metrics list: a list (every metric on every output, as
    Keras), or per output a dict {output name: metric(s)} or a list of lists in output order (each
    spec then ends with "@K", the output's index)."""
    if metrics is None:
        return []
    if isinstance(metrics, dict) or (isinstance(metrics, (list, tuple)) and metrics and
                                     all(isinstance(m, (list, tuple)) for m in metrics)):
        if output_names is None:
            return None  # per output: resolved once the outputs are known
        if isinstance(metrics, dict):
            unknown = sorted(set(metrics) - set(output_names))
            if unknown:
                raise ValueError(f"compile: metrics for {unknown}, which are not outputs of the model {output_names}")
            per = [metrics.get(n) for n in output_names]
        else:
            per = list(metrics)
        out = []
        for k, ms in enumerate(per):
            for spec in names(ms if ms is None or isinstance(ms, (list, tuple)) else [ms]):
                out.append(f"{spec}@{k}")
        return out
    if not isinstance(metrics, (list, tuple)):
        metrics = [metrics]
    out = []
    for m in metrics:
        if isinstance(m, type) and issubclass(m, Metric):
            m = m()
        if isinstance(m, Metric):
            spec = m._c_name()
        elif isinstance(m, str):
            spec = m
        else:
            raise ValueError(f"could not interpret metric {m!r} (custom Python metrics are not supported)")
        if spec not in out:
            out.append(spec)
    return out


def _log_name(spec):
    """The log key of a library spec: "name=kind:param@K" logs name, "mae@1" mae."""
    return spec.split("@", 1)[0].split("=", 1)[0]


def _output_of(spec):
    return int(spec.rsplit("@", 1)[1]) if "@" in spec else None


def _weighted_name(name, taken):
    """Keras's MetricsContainer._set_metric_names: a weighted metric keeps its name unless a plain
    metric of its output has it, then it is "weighted_<name>" (the output prefix comes before)."""
    return "weighted_" + name if name in taken else name


def with_weighted(specs, weighted, functions, weighted_functions, output_names):
    """compile's metrics and weighted_metrics as the library's specs and the user's functions: the
    weighted ones marked "~" (the library weights them by the sample weights, the others not, as
    Keras 2.4+), named as Keras names them. functions: (output index, name or None for all, fn,
    log name) as _custom_objectives.split_metrics gives them."""
    n = len(output_names)

    def outputs(k):
        if k is None:
            return list(range(n))
        return [output_names.index(k) if isinstance(k, str) else int(k)]

    taken = [set() for _ in range(n)]  # the plain metrics' log names per output
    for spec in specs:
        for o in outputs(_output_of(spec)):
            taken[o].add(_log_name(spec))
    for k, _, name in functions:
        for o in outputs(k):
            taken[o].add(name)
    out = list(specs)
    for spec in weighted:
        name, k = _log_name(spec), _output_of(spec)
        body = spec.split("@", 1)[0]
        kind = body.split("=", 1)[1] if "=" in body else body
        renamed = {o: _weighted_name(name, taken[o]) for o in outputs(k)}
        if len(set(renamed.values())) == 1:
            new = next(iter(renamed.values()))
            out.append("~" + (body if new == name else f"{new}={kind}") + (f"@{k}" if k is not None else ""))
        else:  # the name clashes on some outputs only: one spec per output
            out.extend("~" + (body if new == name else f"{new}={kind}") + f"@{o}" for o, new in renamed.items())
    fns = list(functions)
    for k, fn, name in weighted_functions:
        news = {_weighted_name(name, taken[o]) for o in outputs(k)}
        if len(news) != 1:
            raise NotImplementedError(f"compile: weighted metric {name!r} clashes with a metric of some outputs only; "
                                      f"give it per output")
        fns.append((k, fn, "~" + news.pop()))
    return out, fns


def serialize(metric):
    if isinstance(metric, Metric):
        return {"class_name": type(metric).__name__, "config": metric.get_config()}
    return metric


def deserialize(config, custom_objects=None):
    if isinstance(config, str):
        return config
    cls = _classes().get(config["class_name"])
    if cls is None:
        raise ValueError(f"unknown metric class {config['class_name']!r}")
    return cls.from_config(config.get("config", {}))


def get(identifier):
    if isinstance(identifier, dict):
        return deserialize(identifier)
    return identifier
