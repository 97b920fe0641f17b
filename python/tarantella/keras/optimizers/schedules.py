"""tnt.keras.optimizers.schedules: Keras's learning-rate schedules, evaluated by the library at
each step (lr = schedule(iterations)). Calling one gives its value at a step."""
from tarantella._core import C


class LearningRateSchedule:
    _keys = ()

    def __init__(self, **config):
        self._config = config

    def __call__(self, step):
        return C.schedule_value(self._spec(), int(step))

    def _spec(self):
        return (type(self).__name__, dict(self._config))

    def get_config(self):
        return dict(self._config)

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        super().__init__(initial_learning_rate=initial_learning_rate, decay_steps=decay_steps,
                         decay_rate=decay_rate, staircase=staircase, name=name)


class InverseTimeDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        super().__init__(initial_learning_rate=initial_learning_rate, decay_steps=decay_steps,
                         decay_rate=decay_rate, staircase=staircase, name=name)


class PolynomialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                 name=None):
        super().__init__(initial_learning_rate=initial_learning_rate, decay_steps=decay_steps,
                         end_learning_rate=end_learning_rate, power=power, cycle=cycle, name=name)


class CosineDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None, warmup_target=None,
                 warmup_steps=0):
        super().__init__(initial_learning_rate=initial_learning_rate, decay_steps=decay_steps, alpha=alpha,
                         name=name, warmup_target=warmup_target, warmup_steps=warmup_steps)


class PiecewiseConstantDecay(LearningRateSchedule):
    def __init__(self, boundaries, values, name=None):
        super().__init__(boundaries=list(boundaries), values=list(values), name=name)
