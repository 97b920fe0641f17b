"""tnt.keras.initializers: the library's weight initializers under Keras's names."""


class Initializer:
    class_name = None

    def __init__(self, **config):
        self._config = config

    def get_config(self):
        return dict(self._config)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _init(name, **defaults):
    def __init__(self, *args, **kwargs):
        cfg = dict(defaults)
        cfg.update(zip(defaults, args))
        unknown = set(kwargs) - set(defaults)
        if unknown:
            raise TypeError(f"{name}: unexpected arguments {sorted(unknown)}")
        cfg.update(kwargs)
        Initializer.__init__(self, **cfg)
    return type(name, (Initializer,), {"class_name": name, "__init__": __init__, "__module__": __name__})


GlorotUniform = glorot_uniform = _init("GlorotUniform", seed=None)
GlorotNormal = glorot_normal = _init("GlorotNormal", seed=None)
HeUniform = he_uniform = _init("HeUniform", seed=None)
HeNormal = he_normal = _init("HeNormal", seed=None)
LecunUniform = lecun_uniform = _init("LecunUniform", seed=None)
LecunNormal = lecun_normal = _init("LecunNormal", seed=None)
Zeros = zeros = _init("Zeros")
Ones = ones = _init("Ones")
RandomUniform = random_uniform = _init("RandomUniform", minval=-0.05, maxval=0.05, seed=None)
RandomNormal = random_normal = _init("RandomNormal", mean=0.0, stddev=0.05, seed=None)
Orthogonal = orthogonal = OrthogonalInitializer = _init("Orthogonal", gain=1.0, seed=None)
TruncatedNormal = truncated_normal = _init("TruncatedNormal", mean=0.0, stddev=0.05, seed=None)
VarianceScaling = variance_scaling = _init("VarianceScaling", scale=1.0, mode="fan_in",
                                           distribution="truncated_normal", seed=None)
Constant = constant = _init("Constant", value=0.0)
Identity = identity = IdentityInitializer = _init("Identity", gain=1.0)


def _install_serial():
    import sys
    from tarantella.keras import _serial
    _serial.install(sys.modules[__name__], Initializer, "initializers")


_install_serial()
