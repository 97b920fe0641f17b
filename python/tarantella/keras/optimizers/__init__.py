"""tnt.keras.optimizers: Keras's optimizers (Keras 2.11+ formulas and defaults), run by the library
in one pass over the flat parameter buffer. An optimizer given to compile becomes the model's:
its learning_rate and iterations then read (and learning_rate writes) the library's."""
import weakref

from tarantella.keras.optimizers import schedules
from tarantella.keras.optimizers.schedules import LearningRateSchedule

_UNSUPPORTED = ("clipnorm", "global_clipnorm", "use_ema", "ema_momentum", "ema_overwrite_frequency",
                "jit_compile")


def _bound(lr, optimizer):
    """A number learning rate that K.set_value can write back (as Keras's tf.Variable)."""
    from tarantella.keras.backend import BoundValue
    if isinstance(lr, (int, float)) and not isinstance(lr, bool):
        return BoundValue(lr, optimizer, "learning_rate")
    return lr


class Optimizer:
    _c_name = None
    _defaults = {}

    def __init__(self, name=None, **kwargs):
        if "lr" in kwargs:  # Keras's old name
            lr = kwargs.pop("lr")
            if kwargs.get("learning_rate") is None:
                kwargs["learning_rate"] = lr
        if kwargs.get("learning_rate") is None:
            kwargs["learning_rate"] = self._defaults.get("learning_rate")
        decay = kwargs.pop("decay", None)
        if decay:  # Keras 2's (up to 2.10) time decay: lr / (1 + decay * iterations)
            if isinstance(kwargs["learning_rate"], LearningRateSchedule):
                raise ValueError(f"{type(self).__name__}: decay={decay} with a learning-rate schedule (Keras "
                                 f"applies decay to a number learning rate only)")
            kwargs["learning_rate"] = schedules.InverseTimeDecay(kwargs["learning_rate"], decay_steps=1,
                                                                 decay_rate=float(decay))
        for k in _UNSUPPORTED:
            v = kwargs.pop(k, None)
            if v not in (None, False):
                raise NotImplementedError(f"{type(self).__name__}: {k} is not supported")
        kwargs.pop("is_legacy_optimizer", None)
        unknown = set(kwargs) - set(self._defaults)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(unknown)}")
        self._hyper = dict(self._defaults)
        self._hyper.update({k: v for k, v in kwargs.items() if v is not None or k == "weight_decay"})
        self.name = name or type(self).__name__
        self._model = None

    def _bind(self, model):
        self._model = weakref.ref(model)

    def _h(self):
        m = self._model() if self._model is not None else None
        return m._h if m is not None and m._h is not None else None

    def _spec(self):
        lr = self._hyper.get("learning_rate")
        hp = {k: v for k, v in self._hyper.items() if v is not None and not isinstance(v, LearningRateSchedule)}
        sched = lr._spec() if isinstance(lr, LearningRateSchedule) else None
        if sched is not None:
            hp.pop("learning_rate", None)
        return (self._c_name, hp, sched)

    @property
    def learning_rate(self):
        h = self._h()
        if h is not None:
            info = h.optimizer_info()
            if info is not None:
                return _bound(info[1], self)
        return _bound(self._hyper.get("learning_rate"), self)

    @learning_rate.setter
    def learning_rate(self, value):
        h = self._h()
        if h is not None:
            h.set_learning_rate(float(value))
        else:
            self._hyper["learning_rate"] = value

    lr = learning_rate

    @property
    def iterations(self):
        h = self._h()
        info = h.optimizer_info() if h is not None else None
        return info[2] if info is not None else 0

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False, **kwargs):
        """One update of the model weights given, from their gradients (a custom training loop's
        tape.gradient), by the library's optimizer; its slots persist across calls."""
        from tarantella.keras import _tape
        _tape.apply_gradients(self, grads_and_vars)
        return self.iterations

    def apply(self, grads, trainable_variables=None):
        """Keras 3's optimizer.apply(grads, trainable_variables)."""
        if trainable_variables is None:
            raise ValueError(f"{type(self).__name__}.apply: give trainable_variables (the weights the gradients are "
                             f"of)")
        return self.apply_gradients(zip(grads, trainable_variables))

    def get_config(self):
        cfg = {"name": self.name}
        for k, v in self._hyper.items():
            cfg[k] = v.get_config() if isinstance(v, LearningRateSchedule) else v
        if self._h() is not None and not isinstance(self._hyper.get("learning_rate"), LearningRateSchedule):
            cfg["learning_rate"] = self.learning_rate
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(**config)

    def __repr__(self):
        return f"<tnt.keras.optimizers.{type(self).__name__} learning_rate={self.learning_rate}>"


def _opt(cls_name, c_name, **defaults):
    def __init__(self, learning_rate=None, name=None, **kwargs):  # None: lr=, or the default
        Optimizer.__init__(self, name=name, learning_rate=learning_rate, **kwargs)
    cls = type(cls_name, (Optimizer,), {"_c_name": c_name,
                                        "_defaults": dict(defaults, weight_decay=None, clipvalue=None),
                                        "__init__": __init__, "__module__": __name__,
                                        "__doc__": f"Keras's {cls_name}: defaults {defaults}."})
    if cls_name == "AdamW":
        cls._defaults["weight_decay"] = 0.004
    return cls


SGD = _opt("SGD", "sgd", learning_rate=0.01, momentum=0.0, nesterov=False)
Adam = _opt("Adam", "adam", learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False)
AdamW = _opt("AdamW", "adamw", learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False)
RMSprop = _opt("RMSprop", "rmsprop", learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False)
Adagrad = _opt("Adagrad", "adagrad", learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7)
Adadelta = _opt("Adadelta", "adadelta", learning_rate=0.001, rho=0.95, epsilon=1e-7)
Adamax = _opt("Adamax", "adamax", learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7)
Nadam = _opt("Nadam", "nadam", learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7)


class Ftrl(Optimizer):
    def __init__(self, *a, **k):
        raise NotImplementedError("Ftrl is not supported (as in Tarantella)")


_BY_NAME = {c.__name__.lower(): c for c in (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam)}


def get(identifier):
    """An optimizer from a Keras name ("adam"), a config dict, or an optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier.lower())
        if cls is None:
            raise ValueError(f"unknown optimizer {identifier!r} (expected one of {sorted(_BY_NAME)})")
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    raise ValueError(f"could not interpret optimizer {identifier!r}")


def deserialize(config):
    cls = _BY_NAME.get(config["class_name"].lower())
    if cls is None:
        raise ValueError(f"unknown optimizer {config['class_name']!r}")
    return cls.from_config(config.get("config", {}))


def serialize(opt):
    return {"class_name": type(opt).__name__, "config": opt.get_config()}


def from_handle(model):
    """The optimizer a model loaded with its training configuration came with."""
    name = model._h.optimizer_info()[0]
    cls = _BY_NAME.get(name.lower(), Optimizer)
    opt = cls.__new__(cls)
    opt._hyper = dict(cls._defaults)
    opt.name = cls.__name__
    opt._bind(model)
    return opt


class legacy:  # tf.keras.optimizers.legacy.*: the same optimizers
    SGD, Adam, RMSprop, Adagrad, Adadelta, Adamax, Nadam = SGD, Adam, RMSprop, Adagrad, Adadelta, Adamax, Nadam


class experimental:
    AdamW, SGD, Adam = AdamW, SGD, Adam
