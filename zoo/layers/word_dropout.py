"""Word dropout: drop whole tokens while training (Iyyer et al., 2015).

Dropped tokens become the padding id 0, so every mask-aware layer after the
embedding ignores them: a mean is taken over the words kept, attention is
spread over the words kept. A model cannot then lean on a few words.
"""

import keras
from keras import ops

from zoo.layers.checks import check_token_id_rank


@keras.saving.register_keras_serializable(package="zoo")
class WordDropout(keras.layers.Layer):
    """Replaces each real token id by the padding id 0 with probability `rate`
    while training; the identity at inference.

    A sequence never loses all its words: if every real token of a row would
    be dropped, the row is left whole (an empty row would make a mean 0/0).

    Args:
        rate: probability of dropping each real (non-zero) token, in [0, 1).
        padding_id: the id that marks padding (default 0, as with
            `mask_zero=True`).
        seed: optional integer seed for the drop decisions.

    Call arguments:
        token_ids: integer `(batch, seq)`.
        training: drop only when True.

    Returns:
        `(batch, seq)` token ids of the same dtype.

    Example:

    >>> layer = WordDropout(0.5, seed=1)
    >>> dropped = layer(np.array([[5, 6, 7, 0]]), training=True)
    >>> dropped.shape  # random: e.g. [[5, 0, 7, 0]], never all padding
    (1, 4)
    """

    def __init__(self, rate, padding_id=0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1); got {rate}.")
        self.rate = float(rate)
        self.padding_id = int(padding_id)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, token_ids, training=None):
        check_token_id_rank(token_ids.shape, "WordDropout")
        if not training or self.rate == 0.0:
            return token_ids
        real = ops.not_equal(token_ids, self.padding_id)
        draws = keras.random.uniform(
            ops.shape(token_ids), seed=self.seed_generator
        )
        kept = ops.logical_and(real, draws >= self.rate)
        # Rows that would lose every word keep them all.
        kept = ops.where(ops.any(kept, axis=1, keepdims=True), kept, real)
        return ops.where(
            kept, token_ids, ops.full_like(token_ids, self.padding_id)
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "rate": self.rate,
            "padding_id": self.padding_id,
            "seed": self.seed,
        }
