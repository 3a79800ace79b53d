"""Stochastic depth (Huang et al., 2016), "drop path" in timm.

While training, a residual branch is dropped for a whole example at a time:
`x + StochasticDepth(rate)(f(x))` is `x` for that example with probability
`rate`, and `x + f(x) / (1 - rate)` otherwise, so the expected output is the
one used at inference, `x + f(x)`. Deep ViTs and DeiT train with it.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class StochasticDepth(keras.layers.Layer):
    """Zeroes a residual branch per example with probability `rate` while
    training and rescales the kept ones by `1 / (1 - rate)`; the identity at
    inference.

    Args:
        rate: probability of dropping the branch of each example, in [0, 1).
        seed: optional integer seed for the drop decisions.

    Call arguments:
        inputs: the branch output, `(batch, ...)`, any rank >= 1.
        training: drop only when True.

    Returns:
        A tensor of the input's shape and dtype.

    Example:

    >>> drop_path = StochasticDepth(0.1)
    >>> x = keras.random.normal((4, 10, 32))
    >>> y = x + drop_path(keras.layers.Dense(32)(x), training=True)
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(
                f"StochasticDepth rate must be in [0, 1); got {rate}."
            )
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=None):
        if not training or self.rate == 0.0:
            return inputs
        shape = (ops.shape(inputs)[0],) + (1,) * (len(inputs.shape) - 1)
        keep = (
            keras.random.uniform(shape, seed=self.seed_generator) >= self.rate
        )
        scale = ops.cast(keep, inputs.dtype) / ops.cast(
            1.0 - self.rate, inputs.dtype
        )
        return inputs * scale

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
