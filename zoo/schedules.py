"""Learning-rate schedules the recipes train with."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then decay with the inverse square root of the step
    (the Transformer's schedule, scaled to a chosen peak):
    `lr(step) = peak * min(step / warmup, sqrt(warmup / step))`.

    Args:
        peak: the learning rate at the end of the warm-up.
        warmup_steps: steps of the linear warm-up (at least 1).

    Example:

    >>> schedule = InverseSquareRootSchedule(5e-4, warmup_steps=400)
    >>> float(schedule(400)), float(schedule(1600))
    (0.0005, 0.00025)
    """

    def __init__(self, peak, warmup_steps):
        self.peak = float(peak)
        self.warmup_steps = max(int(warmup_steps), 1)

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32"), 1.0)
        warmup = float(self.warmup_steps)
        return self.peak * ops.minimum(step / warmup,
                                       ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}
