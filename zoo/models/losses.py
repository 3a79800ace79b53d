"""Losses the zoo's tasks train with."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SparseCategoricalCrossentropyWithSmoothing(keras.losses.Loss):
    """Cross-entropy of integer targets against logits, with label
    smoothing (Szegedy et al., 2016; the Transformer's epsilon = 0.1).

    The target distribution puts `1 - smoothing` on the true class and
    spreads `smoothing` uniformly over all classes:
    `loss = (1 - smoothing) * -log p(y) + smoothing * mean_k(-log p(k))`.
    Keras' `SparseCategoricalCrossentropy` has no smoothing, and its
    `CategoricalCrossentropy` would need one-hot targets as large as the
    vocabulary.

    Args:
        smoothing: the mass spread over the classes, in [0, 1).
        from_logits: `y_pred` holds logits (True) or probabilities.
        name, reduction, dtype: as for any Keras loss.

    Call arguments:
        y_true: int `(batch, ...)`.
        y_pred: `(batch, ..., num_classes)`.

    Returns:
        The loss per example `(batch, ...)`, reduced as `reduction` says.

    Example:

    >>> loss = SparseCategoricalCrossentropyWithSmoothing(0.1)
    >>> value = loss(np.array([[1, 2]]), keras.random.normal((1, 2, 5)))
    >>> tuple(value.shape)
    ()
    """

    def __init__(
        self,
        smoothing=0.1,
        from_logits=True,
        name="sparse_categorical_crossentropy_with_smoothing",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(smoothing) < 1.0:
            raise ValueError(f"smoothing must be in [0, 1); got {smoothing}.")
        self.smoothing = float(smoothing)
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)
        else:
            log_probs = ops.log(ops.clip(y_pred, 1e-7, 1.0))
        y_true = ops.cast(y_true, "int32")
        true_log_prob = ops.squeeze(
            ops.take_along_axis(log_probs, y_true[..., None], axis=-1), -1
        )
        loss = -true_log_prob
        if self.smoothing:
            loss = (1.0 - self.smoothing) * loss - self.smoothing * ops.mean(
                log_probs, axis=-1
            )
        return loss

    def get_config(self):
        return {
            **super().get_config(),
            "smoothing": self.smoothing,
            "from_logits": self.from_logits,
        }
