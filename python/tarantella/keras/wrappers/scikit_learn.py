"""keras.wrappers.scikit_learn as Keras 2 (up to 2.11) has it: KerasClassifier and KerasRegressor
make a model-building function an estimator scikit-learn can clone, fit, score and search
(cross_val_score, GridSearchCV, Pipeline). Deprecated in Keras for SciKeras, still in wide use.

build_fn(**its arguments) builds and compiles a fresh model at every fit. The keyword arguments
given to the wrapper (sk_params) are either build_fn's or fit's/predict's/evaluate's (epochs,
batch_size, verbose, ...): each call takes the ones its function names, then its own keyword
arguments."""
import copy
import inspect
import types
import warnings

import numpy as np


def _names_argument(fn, name):
    """Whether fn takes an argument called name explicitly (a **kwargs catch-all does not count)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(name)
    return p is not None and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)


def _model_methods():
    from tarantella.keras.engine import Sequential
    return Sequential.fit, Sequential.predict, Sequential.evaluate


def _is_categorical_crossentropy(loss):
    from tarantella.keras import losses
    if isinstance(loss, losses.CategoricalCrossentropy):
        return True
    name = loss if isinstance(loss, str) else getattr(loss, "__name__", None)
    return name == "categorical_crossentropy"


class BaseWrapper:
    """The parts common to the classifier and the regressor (use those)."""

    def __init__(self, build_fn=None, **sk_params):
        self.build_fn = build_fn
        self.sk_params = sk_params
        self.check_params(sk_params)

    def _builder(self):
        """The function that builds the model: build_fn, its __call__ (a callable object), or this
        class's own __call__ (a subclass without build_fn)."""
        if self.build_fn is None:
            return self.__call__
        if isinstance(self.build_fn, (types.FunctionType, types.MethodType)):
            return self.build_fn
        return self.build_fn.__call__

    def check_params(self, params):
        """A ValueError for a parameter that neither build_fn nor fit/predict/evaluate takes (a typo)."""
        takers = list(_model_methods()) + [self._builder()]
        for name in params:
            if name != "nb_epoch" and not any(_names_argument(fn, name) for fn in takers):
                raise ValueError(f"{name} is not a legal parameter (an argument of build_fn or of the model's fit, "
                                 f"predict or evaluate)")

    def get_params(self, **params):
        """The estimator's parameters (scikit-learn's clone reads them; deep= is ignored)."""
        res = self.sk_params.copy()
        res.update({"build_fn": self.build_fn})
        return res

    def set_params(self, **params):
        self.check_params(params)
        self.sk_params.update(params)
        return self

    def filter_sk_params(self, fn, override=None):
        """The sk_params that fn takes, updated with override."""
        res = {name: v for name, v in self.sk_params.items() if _names_argument(fn, name)}
        res.update(override or {})
        return res

    def fit(self, x, y, **kwargs):
        """A new model from build_fn, trained on (x, y); the History. Integer labels become one-hot
        when the model's loss is categorical cross-entropy."""
        builder = self._builder()
        self.model = builder(**self.filter_sk_params(builder))
        y = np.asarray(y)
        if _is_categorical_crossentropy(self.model.loss) and y.ndim != 2:
            from tarantella.keras.utils import to_categorical
            y = to_categorical(y)
        fit_args = copy.deepcopy(self.filter_sk_params(_model_methods()[0]))
        fit_args.update(kwargs)
        return self.model.fit(x, y, **fit_args)


class KerasClassifier(BaseWrapper):
    """scikit-learn's classifier interface: classes_ from the labels fit saw; predict gives labels,
    predict_proba probabilities ((n, 2) for one sigmoid output), score the accuracy."""

    def __init__(self, build_fn=None, **sk_params):
        warnings.warn("KerasClassifier is deprecated (as in Keras): SciKeras replaces it", DeprecationWarning,
                      stacklevel=2)
        super().__init__(build_fn, **sk_params)

    def fit(self, x, y, **kwargs):
        y = np.array(y)
        if y.ndim == 2 and y.shape[1] > 1:  # one-hot
            self.classes_ = np.arange(y.shape[1])
        elif y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
            self.classes_ = np.unique(y)
            y = np.searchsorted(self.classes_, y)
        else:
            raise ValueError(f"KerasClassifier.fit: labels of shape {y.shape}: expected (n,), (n, 1) or one-hot "
                             f"(n, classes)")
        self.n_classes_ = len(self.classes_)
        return super().fit(x, y, **kwargs)

    def predict(self, x, **kwargs):
        proba = np.asarray(self.model.predict(x, **kwargs))
        classes = proba.argmax(axis=-1) if proba.shape[-1] > 1 else (proba > 0.5).astype("int32")
        return self.classes_[classes]

    def predict_proba(self, x, **kwargs):
        probs = np.asarray(self.model.predict(x, **kwargs))
        if probs.shape[1] == 1:  # one sigmoid output: scikit-learn's two columns
            probs = np.hstack([1 - probs, probs])
        return probs

    def score(self, x, y, **kwargs):
        """The model's accuracy on (x, y) (it must be compiled with metrics=["accuracy"])."""
        y = np.searchsorted(self.classes_, y)
        kwargs = self.filter_sk_params(_model_methods()[2], kwargs)
        if _is_categorical_crossentropy(self.model.loss) and np.ndim(y) != 2:
            from tarantella.keras.utils import to_categorical
            y = to_categorical(y)
        outputs = self.model.evaluate(x, y, **kwargs)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        for name, value in zip(self.model.metrics_names, outputs):
            if name in ("accuracy", "acc"):
                return value
        raise ValueError('KerasClassifier.score: the model computes no accuracy; compile it with '
                         'metrics=["accuracy"]')


class KerasRegressor(BaseWrapper):
    """scikit-learn's regressor interface: predict gives the squeezed outputs, score the negated loss
    (greater is better, as scikit-learn's scores)."""

    def __init__(self, build_fn=None, **sk_params):
        warnings.warn("KerasRegressor is deprecated (as in Keras): SciKeras replaces it", DeprecationWarning,
                      stacklevel=2)
        super().__init__(build_fn, **sk_params)

    def predict(self, x, **kwargs):
        kwargs = self.filter_sk_params(_model_methods()[1], kwargs)
        return np.squeeze(self.model.predict(x, **kwargs))

    def score(self, x, y, **kwargs):
        kwargs = self.filter_sk_params(_model_methods()[2], kwargs)
        loss = self.model.evaluate(x, y, **kwargs)
        return -loss[0] if isinstance(loss, list) else -loss
