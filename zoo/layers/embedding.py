"""Token embeddings: a checked, reversible token table, and token + position
embeddings.

`TokenEmbedding` is Keras' `ReversibleEmbedding` (the table that also maps
hidden states back to vocabulary logits, as keras-hub's layer of the same
name does) that refuses out-of-range ids: a gather with an id outside the table
is an error on TensorFlow and PyTorch but silently gives NaN rows on JAX.

`PositionalEmbedding` (also importable under keras-hub's name,
`TokenAndPositionEmbedding`) adds positions to it, `x_t = E[token_t] +
P[t]`, and keeps the reverse direction, so one layer serves a classifier's
input (with the padding mask) and a language model's input *and* output
projection (tied weights, as GPT-2 and BERT's masked-LM head).
"""

import keras
from keras import ops

from zoo.layers.checks import check_sequence_length, check_token_ids
from zoo.layers.positions import (
    LearnedPositionEmbedding,
    SinusoidalPositionEncoding,
)
from zoo.layers.sublayers import call_sublayer

POSITION_KINDS = ("learned", "sinusoidal")


@keras.saving.register_keras_serializable(package="zoo")
class TokenEmbedding(keras.layers.ReversibleEmbedding):
    """`keras.layers.ReversibleEmbedding` that rejects out-of-range ids.

    `layer(ids)` embeds `(batch, seq)` ids to `(batch, seq, dim)`;
    `layer(hidden, reverse=True)` maps `(batch, seq, dim)` back to
    `(batch, seq, vocabulary)` logits, with the same matrix when
    `tie_weights=True` (a language model's output layer), computed in the
    layer's compute dtype unless `reverse_dtype` says otherwise (bfloat16
    under `mixed_bfloat16`, as keras-hub's layer). Ids are checked
    whenever their values are visible (eager calls, and every call on
    PyTorch): an id `>= input_dim` or below 0 is an error naming the id,
    never a NaN row. Inside compiled JAX functions ids have no values yet
    and are not checked.

    Args:
        input_dim: vocabulary size.
        output_dim: embedding size.
        tie_weights: reuse the embedding matrix for `reverse=True`.
        mask_zero: id 0 is padding and gives a Keras mask.
        **kwargs: the rest of `keras.layers.ReversibleEmbedding`'s
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

    # call_sublayer may run `call` directly (PyTorch): __call__ adds nothing
    # here but the id mask, and it does not where mask_zero is off (checked
    # there). A subclass must opt in again.
    _same_when_called_directly = True

    def _check_ids(self, inputs, reverse, check_ids):
        # Generation feeds ids it made itself, and a host copy per step
        # would stall an accelerator, so it passes check_ids=False.
        if not reverse and check_ids:
            check_token_ids(inputs, self.input_dim, self.name)

    def call(self, inputs, reverse=False, check_ids=True):
        self._check_ids(inputs, reverse, check_ids)
        if reverse and self.reverse_dtype is None:
            return self._reverse_in_compute_dtype(inputs)
        return super().call(inputs, reverse=reverse)

    def compute_output_spec(self, inputs, reverse=False, check_ids=True):
        return super().compute_output_spec(inputs, reverse=reverse)

    def compute_mask(self, inputs, mask=None):
        # Keras' `ReversibleEmbedding.call` attaches the id mask itself and
        # returns None here; its quantised `_int8_call`/`_int4_call` do not,
        # so a quantised table would silently drop the padding mask (the
        # padding then counts in a pooled mean or attention). Once
        # quantised, the mask comes from here (ids only: the reverse
        # direction's inputs are float hidden states).
        if (
            self.quantization_mode is None
            or not self.mask_zero
            or "int" not in str(inputs.dtype)
        ):
            return None
        return ops.not_equal(inputs, 0)

    # A quantised layer's __call__ runs `_<mode>_call` instead of `call`.
    def _int8_call(self, inputs, reverse=False, check_ids=True):
        self._check_ids(inputs, reverse, check_ids)
        return super()._int8_call(inputs, reverse=reverse)

    def _int4_call(self, inputs, reverse=False, check_ids=True):
        self._check_ids(inputs, reverse, check_ids)
        return super()._int4_call(inputs, reverse=reverse)

    def _reverse_in_compute_dtype(self, inputs):
        """The projection to logits in the layer's compute dtype.

        Keras documents `reverse_dtype=None` as the compute dtype but then
        multiplies by the table as it is stored: under a mixed policy
        (float32 table, bfloat16 hidden states) the whole vocabulary
        product, forward and backward, ran in float32. Here it runs in
        the compute dtype, as keras-hub's `ReversibleEmbedding` does.
        """
        kernel = (
            ops.transpose(self.embeddings)
            if self.tie_weights
            else self.reverse_embeddings
        )
        dtype = self.compute_dtype
        logits = ops.matmul(ops.cast(inputs, dtype), ops.cast(kernel, dtype))
        if self.logit_soft_cap is not None:
            cap = self.logit_soft_cap
            logits = ops.multiply(ops.tanh(ops.divide(logits, cap)), cap)
        return logits


@keras.saving.register_keras_serializable(package="zoo")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding plus position embedding, reversible to logits.

    `x_t = E[token_t] + P[t]`, with `P` learned or sinusoidal. Token id 0 is
    padding when `mask_zero=True`: the output then carries a Keras mask
    (`token != 0`) that downstream Keras layers and `zoo` blocks use.
    `layer(hidden, reverse=True)` is the output projection of a language
    model: `hidden E^T` with `tie_weights=True` (the token table itself), or
    a separate `(dim, vocabulary)` matrix otherwise.

    Token ids are checked whenever their values are visible (eager calls,
    `predict` on torch): an id outside `[0, vocabulary_size)` raises an error
    instead of reading garbage. Inside compiled functions only the length is
    checked.

    Args:
        vocabulary_size: number of token ids (ids are in `[0, vocab)`).
        sequence_length: maximum number of positions.
        embedding_dim: output feature size.
        positions: `"learned"` or `"sinusoidal"`.
        mask_zero: treat id 0 as padding and produce a mask.
        tie_weights: `reverse=True` uses the token table (True) or a
            separate output matrix (False).
        embeddings_initializer: initializer of the token table.
        position_initializer: initializer of the learned positions.
        max_wavelength: wavelength base of the sinusoidal positions.
        scale_tokens: multiply the token vectors by `sqrt(embedding_dim)`
            before adding the positions (the original Transformer's
            scaling, with a `N(0, 1 / embedding_dim)` table); the reverse
            direction uses the table unscaled.

    Call arguments:
        inputs: integer `(batch, seq)`, `seq <= sequence_length`; `seq` may
            vary between calls (`keras.Input((None,), dtype="int32")`). With
            `reverse=True`: hidden states `(batch, seq, embedding_dim)`.
        start_index: position of the first token (for cached decoding).
        reverse: project hidden states to vocabulary logits.
        check_ids: set False to skip the id check (generation loops).

    Returns:
        `(batch, seq, embedding_dim)`, with a Keras mask when `mask_zero`;
        with `reverse=True`, logits `(batch, seq, vocabulary_size)`.

    Example:

    >>> embed = PositionalEmbedding(1000, 128, 32, positions="sinusoidal")
    >>> x = embed(np.array([[5, 8, 2, 0, 0]]))
    >>> x.shape
    (1, 5, 32)
    >>> embed(x, reverse=True).shape  # tied output projection
    (1, 5, 1000)
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        positions="learned",
        mask_zero=True,
        tie_weights=True,
        embeddings_initializer="uniform",
        position_initializer="glorot_uniform",
        max_wavelength=10000,
        scale_tokens=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if positions not in POSITION_KINDS:
            raise ValueError(
                f"positions must be one of {POSITION_KINDS}; got {positions!r}."
            )
        self.vocabulary_size = int(vocabulary_size)
        self.sequence_length = int(sequence_length)
        self.embedding_dim = int(embedding_dim)
        self.positions = positions
        self.mask_zero = mask_zero
        self.tie_weights = bool(tie_weights)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )
        self.position_initializer = keras.initializers.get(position_initializer)
        self.max_wavelength = max_wavelength
        self.scale_tokens = bool(scale_tokens)
        self.supports_masking = mask_zero
        self.token_embedding = TokenEmbedding(
            self.vocabulary_size,
            self.embedding_dim,
            tie_weights=self.tie_weights,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        if positions == "learned":
            self.position_embedding = LearnedPositionEmbedding(
                self.sequence_length,
                initializer=self.position_initializer,
                dtype=self.dtype_policy,
                name="position_embedding",
            )
        else:
            self.position_embedding = SinusoidalPositionEncoding(
                max_wavelength,
                dtype=self.dtype_policy,
                name="position_encoding",
            )

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(
                "PositionalEmbedding expects token ids of shape (batch, seq); "
                f"got shape {tuple(input_shape)}."
            )
        self.token_embedding.build(input_shape)
        self.position_embedding.build(
            tuple(input_shape) + (self.embedding_dim,)
        )
        self.built = True

    # See TokenEmbedding.
    _same_when_called_directly = True

    def call(self, inputs, start_index=0, reverse=False, check_ids=True):
        if reverse:
            return call_sublayer(
                self, self.token_embedding, inputs, reverse=True
            )
        if len(inputs.shape) != 2:
            raise ValueError(
                "PositionalEmbedding expects token ids of shape (batch, seq); "
                f"got shape {tuple(inputs.shape)}."
            )
        check_sequence_length(
            inputs.shape[1], start_index, self.sequence_length, self.name
        )
        if check_ids:
            check_token_ids(inputs, self.vocabulary_size, self.name)
        tokens = call_sublayer(
            self, self.token_embedding, inputs, check_ids=False
        )
        if self.scale_tokens:
            tokens = tokens * ops.cast(self.embedding_dim**0.5, tokens.dtype)
        return tokens + call_sublayer(
            self, self.position_embedding, tokens, start_index=start_index
        )

    def compute_mask(self, inputs, mask=None):
        # Hidden states going the reverse way (rank 3) carry no id mask.
        if not self.mask_zero or len(inputs.shape) != 2:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape, reverse=False, **kwargs):
        if reverse:
            return tuple(input_shape[:-1]) + (self.vocabulary_size,)
        # Functional models are built from shapes: catch a fixed input length
        # longer than the positions when the model is built, not at predict.
        check_sequence_length(
            input_shape[1], 0, self.sequence_length, self.name
        )
        return tuple(input_shape) + (self.embedding_dim,)

    def compute_output_spec(self, inputs, reverse=False, **kwargs):
        shape = self.compute_output_shape(inputs.shape, reverse=reverse)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        return super().get_config() | {
            "vocabulary_size": self.vocabulary_size,
            "sequence_length": self.sequence_length,
            "embedding_dim": self.embedding_dim,
            "positions": self.positions,
            "mask_zero": self.mask_zero,
            "tie_weights": self.tie_weights,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
            "position_initializer": keras.initializers.serialize(
                self.position_initializer
            ),
            "max_wavelength": self.max_wavelength,
            "scale_tokens": self.scale_tokens,
        }


# keras-hub's name for the same layer. The class keeps its own name: Keras
# files store the weights of a functional model's layers under each layer's
# class name, so a renamed class would not find its weights in the files
# saved before.
TokenAndPositionEmbedding = PositionalEmbedding
