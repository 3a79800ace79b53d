"""Learning-rate schedules the recipes train with."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class InverseSquareRootSchedule(
    keras.optimizers.schedules.LearningRateSchedule
):
    """Linear warm-up, then decay with the inverse square root of the step
    (the Transformer's schedule, scaled to a chosen peak):
    `lr(step) = peak * min(step / warmup, sqrt(warmup / step))`.

    Args:
        peak: the learning rate at the end of the warm-up.
        warmup_steps: steps of the linear warm-up (at least 1).

    Example:

    >>> schedule = InverseSquareRootSchedule(5e-4, warmup_steps=400)
    >>> round(float(schedule(400)), 7), round(float(schedule(1600)), 7)
    (0.0005, 0.00025)
    """

    def __init__(self, peak, warmup_steps):
        self.peak = float(peak)
        self.warmup_steps = max(int(warmup_steps), 1)

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32"), 1.0)
        warmup = float(self.warmup_steps)
        return self.peak * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


def warmup_cosine(peak, total_steps, warmup_fraction, alpha=0.0):
    """Linear warm-up from 0 to `peak` over `warmup_fraction` of the steps,
    then cosine decay to `alpha * peak` at `total_steps` (BERT, ViT/DeiT).

    Args:
        peak: the learning rate at the end of the warm-up.
        total_steps: optimizer steps of the whole training.
        warmup_fraction: share of the steps warming up (at least one step).
        alpha: the final learning rate as a fraction of `peak`.

    Returns:
        A `keras.optimizers.schedules.CosineDecay`.

    Example:

    >>> schedule = warmup_cosine(1e-3, total_steps=1000, warmup_fraction=0.1)
    >>> optimizer = keras.optimizers.AdamW(schedule)
    """
    warmup = max(int(total_steps * warmup_fraction), 1)
    return keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=max(total_steps - warmup, 1),
        alpha=alpha,
        warmup_target=peak,
        warmup_steps=warmup,
    )
