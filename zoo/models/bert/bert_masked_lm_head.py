"""BERT's masked-LM head: hidden states at the masked positions -> logits
over the vocabulary, through the (tied) token embedding."""

import keras
import keras_hub
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class MaskedLMHead(keras_hub.layers.MaskedLMHead):
    """keras-hub's `MaskedLMHead`, also under mixed precision on TensorFlow.

    For each position in `mask_positions`: `h -> LayerNorm(act(h W1 + b1))
    -> h E^T + b`, with `E` the token embedding when one is given (tied
    weights: one variable) or a kernel of the head's own. keras-hub's layer
    adds its float32 bias to bfloat16 logits, which TensorFlow refuses in
    eager calls; here the bias is cast to the logits' dtype first.

    Args:
        vocabulary_size: number of token ids (or taken from
            `token_embedding`).
        token_embedding: a reversible embedding to tie the output
            projection to (`keras.layers.ReversibleEmbedding` or a
            `zoo.layers.TokenEmbedding`).
        intermediate_activation: activation of the first dense layer (BERT:
            "gelu").
        activation: applied to the logits (None: raw logits).
        layer_norm_epsilon, kernel_initializer, bias_initializer: as in
            keras-hub.

    Call arguments:
        inputs: hidden states `(batch, seq, dim)`.
        mask_positions: `(batch, n_masks)` int positions to predict.

    Returns:
        `(batch, n_masks, vocabulary_size)` logits.

    Example:

    >>> from zoo.layers.embedding import TokenEmbedding
    >>> embedding = TokenEmbedding(100, 16)
    >>> head = MaskedLMHead(token_embedding=embedding,
    ...                     intermediate_activation="gelu")
    >>> hidden = keras.random.normal((2, 10, 16))
    >>> head(hidden, mask_positions=np.array([[1, 4], [2, 3]])).shape
    (2, 2, 100)
    """

    def call(self, inputs, mask_positions):
        x = ops.take_along_axis(
            inputs, ops.expand_dims(mask_positions, axis=-1), axis=1
        )
        x = self._intermediate_dense(x)
        x = self._intermediate_layer_norm(x)
        if self.token_embedding:
            outputs = self.token_embedding(x, reverse=True)
        else:
            outputs = ops.matmul(x, self._kernel)
        outputs = ops.cast(outputs, self.compute_dtype)
        outputs = outputs + ops.cast(self._bias, self.compute_dtype)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
