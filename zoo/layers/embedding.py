"""Token embeddings that refuse out-of-range ids.

A gather with an id outside the table is an error on TensorFlow and PyTorch
but silently gives NaN rows on JAX, so zoo's models embed through
`TokenEmbedding`, which checks the ids whenever their values are visible.
"""

import keras
import keras_hub

from zoo.layers.positions import check_token_ids


@keras.saving.register_keras_serializable(package="zoo")
class TokenEmbedding(keras_hub.layers.ReversibleEmbedding):
    """keras-hub's `ReversibleEmbedding` that rejects out-of-range ids.

    `layer(ids)` embeds `(batch, seq)` ids to `(batch, seq, dim)`;
    `layer(hidden, reverse=True)` maps `(batch, seq, dim)` back to
    `(batch, seq, vocabulary)` logits, with the same matrix when
    `tie_weights=True` (a language model's output layer). Ids are checked
    whenever their values are visible (eager calls, and every call on
    PyTorch): an id `>= input_dim` or below 0 is an error naming the id,
    never a NaN row. Inside compiled JAX functions ids have no values yet
    and are not checked.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding size.
        tie_weights: reuse the embedding matrix for `reverse=True`.
        mask_zero: id 0 is padding and gives a Keras mask.
        **kwargs: the rest of `keras_hub.layers.ReversibleEmbedding`'s
            arguments (`embeddings_initializer`, `reverse_dtype`, ...).

    Call arguments:
        inputs: `(batch, seq)` int ids, or `(batch, seq, dim)` hidden states
            with `reverse=True`.
        reverse: map hidden states to logits instead of ids to vectors.
        check_ids: set False to skip the check (a generation loop that feeds
            back ids it sampled itself).

    Example:

    >>> layer = TokenEmbedding(100, 16, mask_zero=True)
    >>> layer(np.array([[1, 2, 3, 0]])).shape
    (1, 4, 16)
    """

    def call(self, inputs, reverse=False, check_ids=True):
        # Generation feeds ids it made itself, and a host copy per step
        # would stall an accelerator, so it passes check_ids=False.
        if not reverse and check_ids:
            check_token_ids(inputs, self.input_dim, self.name)
        return super().call(inputs, reverse=reverse)
