"""tnt.keras.regularizers: L1, L2, L1L2 and OrthogonalRegularizer penalties, added to the loss fit
minimizes (Keras 2)."""


class Regularizer:
    class_name = None

    def get_config(self):
        return dict(self._config)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class L1L2(Regularizer):
    class_name = "L1L2"

    def __init__(self, l1=0.0, l2=0.0):
        self._config = {"l1": float(l1), "l2": float(l2)}


class L1(Regularizer):
    class_name = "L1"

    def __init__(self, l1=0.01):
        self._config = {"l1": float(l1)}


class L2(Regularizer):
    class_name = "L2"

    def __init__(self, l2=0.01):
        self._config = {"l2": float(l2)}


class OrthogonalRegularizer(Regularizer):
    class_name = "OrthogonalRegularizer"

    def __init__(self, factor=0.01, mode="rows"):
        if mode not in ("rows", "columns"):
            raise ValueError(f"OrthogonalRegularizer: mode {mode!r} (expected 'rows' or 'columns')")
        self._config = {"factor": float(factor), "mode": mode}


l1, l2, l1_l2, orthogonal_regularizer = L1, L2, L1L2, OrthogonalRegularizer


def _install_serial():
    import sys
    from tarantella.keras import _serial
    _serial.install(sys.modules[__name__], Regularizer, "regularizers")


_install_serial()
