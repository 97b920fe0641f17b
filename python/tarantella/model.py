"""tnt.Model: Tarantella's data-parallel wrapper of a Keras model (the C tnt_distribute)."""
import enum

from tarantella._core import ensure_init, get_rank, get_size
from tarantella.keras.engine import Model as _KerasModel


class ParallelStrategy(enum.Flag):
    """Tarantella's parallelization strategies (tnt.Model(model, parallel_strategy=...)): DATA is
    what this library does; PIPELINING (and ALL = DATA | PIPELINING) are not supported."""
    NONE = 0
    DATA = 1
    PIPELINING = 2
    ALL = DATA | PIPELINING


class Model:
    """tnt.Model(keras_model): the model, data-parallel. fit, evaluate and predict split every global
    batch into one micro-batch per rank; the weights are broadcast from the master at the first
    use; gradients are summed with fused allreduces overlapped with backward; logs are exact global
    figures on every rank. With one rank it changes nothing. Everything else is the Keras model's
    (attributes and methods are passed through).

    fusion_threshold_kb: gradient bucket size (default TNT_FUSION_THRESHOLD_KB, 32); comm_mode:
    None, "thread" or "nonblocking" (default TNT_COMM_MODE); reducer: None, "auto", "flat", "node"
    or "sharded" (node-aware with a sharded optimizer; default TNT_REDUCER, auto: sharded on the
    CPU, node on a GPU)."""

    _tnt_wraps_model = True  # isinstance(tnt.Model(m), keras.Model) holds

    def __init__(self, model, parallel_strategy=None, num_pipeline_stages=1, fusion_threshold_kb=None,
                 comm_mode=None, reducer=None):
        if isinstance(model, Model):
            model = model.model
        if not isinstance(model, _KerasModel):
            raise TypeError(f"tnt.Model: expected a tnt.keras model, got {type(model).__name__}")
        if num_pipeline_stages != 1:
            raise NotImplementedError("tnt.Model: pipeline parallelism is not supported (data parallelism only)")
        if isinstance(parallel_strategy, str):
            parallel_strategy = ParallelStrategy[parallel_strategy.upper()]
        if parallel_strategy is not None and not isinstance(parallel_strategy, ParallelStrategy):
            raise TypeError(f"tnt.Model: parallel_strategy {parallel_strategy!r} (expected a tnt.ParallelStrategy)")
        if parallel_strategy is not None and parallel_strategy & ParallelStrategy.PIPELINING:
            raise NotImplementedError(f"tnt.Model: parallel_strategy {parallel_strategy} is not supported: "
                                      f"pipeline parallelism is not implemented (use tnt.ParallelStrategy.DATA)")
        ensure_init()
        object.__setattr__(self, "model", model)
        model._distribute(fusion_threshold_kb=fusion_threshold_kb, comm_mode=comm_mode, reducer=reducer)

    @classmethod
    def from_config(cls, config, **kwargs):
        """Tarantella's tnt.Model.from_config: a data-parallel model of that architecture."""
        from tarantella.keras import models as km
        return cls(km.model_from_config(config))

    @property
    def rank(self):
        return get_rank()

    @property
    def comm_size(self):
        return get_size()

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __setattr__(self, name, value):
        if name == "model":
            object.__setattr__(self, name, value)
        else:
            setattr(self.model, name, value)

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def __repr__(self):
        return f"<tnt.Model of {self.model!r}>"
