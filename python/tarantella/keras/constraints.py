"""tnt.keras.constraints: weight constraints, applied after each optimizer update."""


class Constraint:
    class_name = None

    def get_config(self):
        return dict(self._config)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class MaxNorm(Constraint):
    class_name = "MaxNorm"

    def __init__(self, max_value=2, axis=0):
        self._config = {"max_value": max_value, "axis": axis}


class NonNeg(Constraint):
    class_name = "NonNeg"

    def __init__(self):
        self._config = {}


class UnitNorm(Constraint):
    class_name = "UnitNorm"

    def __init__(self, axis=0):
        self._config = {"axis": axis}


class MinMaxNorm(Constraint):
    class_name = "MinMaxNorm"

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self._config = {"min_value": min_value, "max_value": max_value, "rate": rate, "axis": axis}


max_norm, non_neg, unit_norm, min_max_norm = MaxNorm, NonNeg, UnitNorm, MinMaxNorm


def _install_serial():
    import sys
    from tarantella.keras import _serial
    _serial.install(sys.modules[__name__], Constraint, "constraints")


_install_serial()
