"""Transformer encoder and decoder blocks.

Post-LN (the original Transformer, the course's formula):
    X = LN(X + MHA(X));  X = LN(X + MLP(X))
Pre-LN (`normalize_first=True`, GPT-2 and most modern models):
    X = X + MHA(LN(X));  X = X + MLP(LN(X))

Sub-layer names and weight shapes follow keras-hub's `TransformerEncoder` and
`TransformerDecoder`, so weights can be copied between the two.
"""

import keras

from zoo.layers.attention import (
    MultiHeadAttention,
    clone_initializer,
    merge_padding_and_attention_mask,
)
from zoo.layers.stochastic_depth import StochasticDepth
from zoo.layers.sublayers import call_sublayer


def _check_sequence_rank(shape, name):
    if len(shape) != 3:
        raise ValueError(
            f"{name} must have shape (batch, seq, hidden_dim); "
            f"got shape {tuple(shape)}."
        )


def _split_outputs(outputs):
    """An attention layer's `outputs` or `(outputs, *extras)` (scores,
    caches) -> `(outputs, [extras])`."""
    if isinstance(outputs, tuple):
        return outputs[0], list(outputs[1:])
    return outputs, []


def _padding_to_key_mask(padding_mask, attention_mask):
    """(batch, k_len) padding and/or (batch, q_len, k_len) mask -> one mask."""
    if padding_mask is not None and len(padding_mask.shape) != 2:
        raise ValueError(
            "padding masks must have shape (batch, seq); got shape "
            f"{tuple(padding_mask.shape)}."
        )
    if attention_mask is not None and len(attention_mask.shape) != 3:
        raise ValueError(
            "attention masks must have shape (batch, q_len, k_len); got "
            f"shape {tuple(attention_mask.shape)}."
        )
    return merge_padding_and_attention_mask(
        key_mask=padding_mask, attention_mask=attention_mask
    )


class _TransformerBlock(keras.layers.Layer):
    """Shared configuration and sub-layer factories of the two blocks."""

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        drop_path_rate=0.0,
        attention_dropout=None,
        norm_first=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if norm_first is not None:  # the zoo's earlier name, in its files
            if normalize_first and not norm_first:
                raise ValueError(
                    "normalize_first and its alias norm_first disagree: "
                    f"{normalize_first!r} and {norm_first!r}."
                )
            normalize_first = norm_first
        self.num_heads = int(num_heads)
        self.intermediate_dim = int(intermediate_dim)
        self.dropout = float(dropout)
        self.attention_dropout = float(
            dropout if attention_dropout is None else attention_dropout
        )
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(
                    f"{name} must be in [0, 1); got {getattr(self, name)}."
                )
        self.activation = keras.activations.get(activation)
        self.normalize_first = bool(normalize_first)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.drop_path_rate = float(drop_path_rate)
        self.supports_masking = True
        # One per block: either residual branch of an example may be dropped.
        self._drop_path = (
            StochasticDepth(
                self.drop_path_rate, dtype=self.dtype_policy, name="drop_path"
            )
            if self.drop_path_rate
            else None
        )

    def _key_dim(self, hidden_dim):
        if hidden_dim is None or hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must be a multiple of "
                f"num_heads ({self.num_heads})."
            )
        return hidden_dim // self.num_heads

    def _attention(self, hidden_dim, name):
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self._key_dim(hidden_dim),
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _dropout(self, name):
        return keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name=name
        )

    def _build_feedforward(self, shape):
        hidden_dim = shape[-1]
        self._feedforward_layer_norm = self._norm("feedforward_layer_norm")
        self._feedforward_layer_norm.build(shape)
        self._feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feedforward_intermediate_dense",
        )
        self._feedforward_intermediate_dense.build(shape)
        self._feedforward_output_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feedforward_output_dense",
        )
        self._feedforward_output_dense.build(
            tuple(shape[:-1]) + (self.intermediate_dim,)
        )
        self._feedforward_dropout = self._dropout("feedforward_dropout")

    def _branch_dropout(self, dropout, x, training):
        # Skipped at inference: a layer call costs ~40 us in eager PyTorch,
        # which adds up in token-by-token generation.
        if training and self.dropout > 0:
            x = dropout(x, training=training)
        if training and self._drop_path is not None:
            x = self._drop_path(x, training=training)
        return x

    def _feedforward(self, x, training):
        residual = x
        if self.normalize_first:
            x = call_sublayer(self, self._feedforward_layer_norm, x)
        x = call_sublayer(self, self._feedforward_intermediate_dense, x)
        x = call_sublayer(self, self._feedforward_output_dense, x)
        x = self._branch_dropout(self._feedforward_dropout, x, training)
        x = x + residual
        if not self.normalize_first:
            x = call_sublayer(self, self._feedforward_layer_norm, x)
        return x

    @property
    def norm_first(self):
        """The old name of `normalize_first` (keras-hub's), kept for code
        and saved files that use it."""
        return self.normalize_first

    def compute_output_shape(self, *shapes, **kwargs):
        return shapes[0]

    def get_config(self):
        return super().get_config() | {
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "activation": keras.activations.serialize(self.activation),
            "normalize_first": self.normalize_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "bias_initializer": keras.initializers.serialize(
                self.bias_initializer
            ),
            "drop_path_rate": self.drop_path_rate,
            "attention_dropout": self.attention_dropout,
        }


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoder(_TransformerBlock):
    """Transformer encoder block: self-attention then an MLP, each residual.

    Post-LN by default (`X = LN(X + MHA(X)); X = LN(X + MLP(X))`), pre-LN
    with `normalize_first=True`. The head size is `hidden_dim // num_heads`.

    Args:
        num_heads: number of attention heads; must divide `hidden_dim`.
        intermediate_dim: hidden size of the MLP.
        dropout: dropout on each residual branch, and on the attention
            weights unless `attention_dropout` is given.
        activation: MLP activation.
        normalize_first: pre-LN instead of post-LN (keras-hub's name;
            `norm_first` is accepted as an alias).
        layer_norm_epsilon: LayerNormalization epsilon.
        kernel_initializer, bias_initializer: for all projections.
        drop_path_rate: stochastic depth: while training, each residual
            branch of each example is dropped with this probability
            (`zoo.layers.StochasticDepth`); 0 disables it.
        attention_dropout: dropout on the attention weights; default
            `dropout`. With 0, training takes the fused attention kernel
            (`keras.ops.dot_product_attention`: flash/cuDNN on a GPU),
            which has no dropout of its own; with more, the explicit
            softmax path.

    Call arguments:
        inputs: `(batch, seq, hidden_dim)`. A Keras mask on it (e.g. from
            `PositionalEmbedding(mask_zero=True)`) is the padding mask.
        padding_mask: optional `(batch, seq)`, True at real tokens; overrides
            the Keras mask.
        attention_mask: optional `(batch, seq, seq)`, True = may attend.
        return_attention_scores: also return `(batch, heads, seq, seq)`.
        training: enables dropout.

    Returns:
        `(batch, seq, hidden_dim)`, and the attention scores if requested.
        Outputs at real positions do not depend on padded positions.

    Example:

    >>> x = keras.random.normal((2, 10, 64))
    >>> TransformerEncoder(num_heads=4, intermediate_dim=128)(x).shape
    (2, 10, 64)
    """

    # `call_sublayer` may run `call` directly: nothing here needs more
    # from `Layer.__call__` than what it checks (zoo.layers.sublayers).
    _same_when_called_directly = True

    def build(self, inputs_shape):
        _check_sequence_rank(inputs_shape, "TransformerEncoder inputs")
        hidden_dim = inputs_shape[-1]
        self._self_attention_layer = self._attention(
            hidden_dim, "self_attention_layer"
        )
        self._self_attention_layer.build(inputs_shape, inputs_shape)
        self._self_attention_layer_norm = self._norm(
            "self_attention_layer_norm"
        )
        self._self_attention_layer_norm.build(inputs_shape)
        self._self_attention_dropout = self._dropout("self_attention_dropout")
        self._build_feedforward(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
    ):
        if padding_mask is None:
            padding_mask = mask  # the Keras mask of `inputs`
        self_mask = _padding_to_key_mask(padding_mask, attention_mask)

        # Self-attention block.
        x = inputs
        residual = x
        if self.normalize_first:
            x = call_sublayer(self, self._self_attention_layer_norm, x)
        x = call_sublayer(
            self,
            self._self_attention_layer,
            x,
            x,
            attention_mask=self_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        if return_attention_scores:
            x, scores = x
        x = self._branch_dropout(self._self_attention_dropout, x, training)
        x = x + residual
        if not self.normalize_first:
            x = call_sublayer(self, self._self_attention_layer_norm, x)

        # Feedforward block.
        x = self._feedforward(x, training)
        return (x, scores) if return_attention_scores else x

    def compute_output_spec(self, inputs, return_attention_scores=False, **kw):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        batch, length = inputs.shape[0], inputs.shape[1]
        scores = keras.KerasTensor(
            (batch, self.num_heads, length, length), dtype=self.compute_dtype
        )
        return outputs, scores


@keras.saving.register_keras_serializable(package="zoo")
class TransformerDecoder(_TransformerBlock):
    """Transformer decoder block: causal self-attention, optional
    cross-attention to an encoder sequence, then an MLP.

    The block has cross-attention when it is first called (built) with an
    `encoder_sequence`; a GPT-style block is built without one.

    Fast generation (keras-hub's convention): pass a `self_attention_cache`
    `(batch, 2, max_len, heads, head_dim)` and the index of the first new
    token; only the new tokens are computed, and the updated cache is
    returned. For cross-attention, `cross_attention_cache` holds the encoder
    keys/values: compute it once with `compute_cross_attention_cache` (or
    pass `cross_attention_cache_update_index=0` on the first step) and pass
    it with `cross_attention_cache_update_index=None` afterwards.

    Args:
        num_heads, intermediate_dim, dropout, activation, normalize_first,
        layer_norm_epsilon, kernel_initializer, bias_initializer,
        drop_path_rate, attention_dropout: as in `TransformerEncoder`.

    Call arguments:
        decoder_sequence: `(batch, tgt_len, hidden_dim)`; its Keras mask is
            the decoder padding mask.
        encoder_sequence: optional `(batch, src_len, enc_dim)`; its Keras mask
            is the encoder padding mask.
        decoder_padding_mask: optional `(batch, tgt_len)`; with a cache it
            covers the whole cache, `(batch, max_len)`.
        decoder_attention_mask: optional `(batch, tgt_len, tgt_len or
            max_len)`.
        encoder_padding_mask: optional `(batch, src_len)`.
        encoder_attention_mask: optional `(batch, tgt_len, src_len)`.
        self_attention_cache, self_attention_cache_update_index,
        cross_attention_cache, cross_attention_cache_update_index: see above.
        use_causal_mask: causal self-attention (default True).
        return_attention_scores: also return a dict with the
            `"self_attention"` and (if any) `"cross_attention"` scores.
        training: enables dropout.

    Returns:
        `outputs` `(batch, tgt_len, hidden_dim)`; with a cache, then the
        updated self-attention cache and (with cross-attention) the
        cross-attention cache; then the scores dict if requested.

    Example:

    >>> dec = TransformerDecoder(num_heads=4, intermediate_dim=128)
    >>> y = keras.random.normal((2, 7, 64))
    >>> enc = keras.random.normal((2, 9, 64))
    >>> dec(y, enc).shape
    (2, 7, 64)
    """

    # `call_sublayer` may run `call` directly: nothing here needs more
    # from `Layer.__call__` than what it checks (zoo.layers.sublayers).
    _same_when_called_directly = True

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        _check_sequence_rank(decoder_sequence_shape, "decoder_sequence")
        hidden_dim = decoder_sequence_shape[-1]
        self._self_attention_layer = self._attention(
            hidden_dim, "self_attention"
        )
        self._self_attention_layer.build(
            decoder_sequence_shape, decoder_sequence_shape
        )
        self._self_attention_layer_norm = self._norm(
            "self_attention_layer_norm"
        )
        self._self_attention_layer_norm.build(decoder_sequence_shape)
        self._self_attention_dropout = self._dropout("self_attention_dropout")

        self.has_cross_attention = encoder_sequence_shape is not None
        if self.has_cross_attention:
            _check_sequence_rank(encoder_sequence_shape, "encoder_sequence")
            self._cross_attention_layer = self._attention(
                hidden_dim, "cross_attention"
            )
            self._cross_attention_layer.build(
                decoder_sequence_shape, encoder_sequence_shape
            )
            self._cross_attention_layer_norm = self._norm(
                "cross_attention_layer_norm"
            )
            self._cross_attention_layer_norm.build(decoder_sequence_shape)
            self._cross_attention_dropout = self._dropout(
                "cross_attention_dropout"
            )
        self._build_feedforward(decoder_sequence_shape)
        self.built = True

    def compute_cross_attention_cache(self, encoder_sequence):
        """Encoder keys/values `(batch, 2, src_len, heads, head_dim)`."""
        if not self.has_cross_attention:
            raise ValueError("This decoder block has no cross-attention.")
        return self._cross_attention_layer.compute_cache(encoder_sequence)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
        mask=None,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
    ):
        # Keras fills `mask` when the decoder sequence is the only tensor
        # argument, and `<argument>_mask` when there are several.
        if decoder_padding_mask is None:
            decoder_padding_mask = (
                decoder_sequence_mask
                if decoder_sequence_mask is not None
                else mask
            )
            if self_attention_cache is not None:
                decoder_padding_mask = None  # covers new tokens, not the cache
        if encoder_padding_mask is None:
            encoder_padding_mask = encoder_sequence_mask
        uses_encoder = (
            encoder_sequence is not None or cross_attention_cache is not None
        )
        if self.has_cross_attention and not uses_encoder:
            raise ValueError(
                "This TransformerDecoder was built with cross-attention; "
                "call it with an encoder_sequence (or a cross_attention_cache)."
            )
        if uses_encoder and not self.has_cross_attention:
            raise ValueError(
                "This TransformerDecoder was built without cross-attention "
                "(first called without encoder_sequence); it cannot attend "
                "to an encoder sequence."
            )
        scores = {}
        caches = ()

        # Causal self-attention block.
        self_mask = _padding_to_key_mask(
            decoder_padding_mask, decoder_attention_mask
        )
        x = decoder_sequence
        residual = x
        if self.normalize_first:
            x = call_sublayer(self, self._self_attention_layer_norm, x)
        x = call_sublayer(
            self,
            self._self_attention_layer,
            x,
            x,
            attention_mask=self_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
        )
        x, extras = _split_outputs(x)
        if return_attention_scores:
            scores["self_attention"] = extras.pop(0)
        caches += tuple(extras)
        x = self._branch_dropout(self._self_attention_dropout, x, training)
        x = x + residual
        if not self.normalize_first:
            x = call_sublayer(self, self._self_attention_layer_norm, x)

        # Cross-attention block.
        if self.has_cross_attention:
            cross_mask = _padding_to_key_mask(
                encoder_padding_mask, encoder_attention_mask
            )
            residual = x
            if self.normalize_first:
                x = call_sublayer(self, self._cross_attention_layer_norm, x)
            x = call_sublayer(
                self,
                self._cross_attention_layer,
                x,
                encoder_sequence,
                attention_mask=cross_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                cache=cross_attention_cache,
                cache_update_index=cross_attention_cache_update_index,
            )
            x, extras = _split_outputs(x)
            if return_attention_scores:
                scores["cross_attention"] = extras.pop(0)
            caches += tuple(extras)
            x = self._branch_dropout(self._cross_attention_dropout, x, training)
            x = x + residual
            if not self.normalize_first:
                x = call_sublayer(self, self._cross_attention_layer_norm, x)

        # Feedforward block.
        x = self._feedforward(x, training)
        results = (x,) + caches
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        **kwargs,
    ):
        dtype = self.compute_dtype
        results = (keras.KerasTensor(decoder_sequence.shape, dtype=dtype),)
        for cache in (self_attention_cache, cross_attention_cache):
            if cache is not None:
                results += (keras.KerasTensor(cache.shape, dtype=dtype),)
        if return_attention_scores:
            batch, length = decoder_sequence.shape[:2]
            self_len = (
                length
                if self_attention_cache is None
                else self_attention_cache.shape[2]
            )
            scores = {
                "self_attention": keras.KerasTensor(
                    (batch, self.num_heads, length, self_len), dtype=dtype
                )
            }
            if (
                encoder_sequence is not None
                or cross_attention_cache is not None
            ):
                src_len = (
                    encoder_sequence.shape[1]
                    if encoder_sequence is not None
                    else cross_attention_cache.shape[2]
                )
                scores["cross_attention"] = keras.KerasTensor(
                    (batch, self.num_heads, length, src_len), dtype=dtype
                )
            results += (scores,)
        return results[0] if len(results) == 1 else results
