"""Scaled dot-product attention and multi-head attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Each query is compared with every key (the dot products, scaled by
1 / sqrt(d_k) so that their spread does not grow with the head size), the
softmax over the keys turns the scores into weights, and the output is the
weighted sum of the values. A mask removes keys from the softmax (padding,
or the future in a decoder: `causal_mask`); a query whose mask allows no key
gets zeros. Multi-head attention runs h such attentions on learned
projections of Q, K and V and projects their concatenation:

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Everything is written with `keras.ops` only, so one code path runs under
JAX, TensorFlow and PyTorch; which kernel computes the formula on each
backend (a fused one, or an explicit float32 softmax) is
`zoo.layers.attention_kernels`'s choice.
"""

import keras
from keras import ops

from zoo.accelerator import slice_update
from zoo.layers.attention_kernels import _attend, _check_mask_fits, _static_dim
from zoo.layers.sublayers import call_sublayer


def causal_mask(query_length, key_length, offset=None):
    """Boolean `(query_length, key_length)` mask for causal attention.

    Query `i` may attend to key `j` iff `j <= i + offset`. The default offset
    `key_length - query_length` aligns the last query with the last key, which
    is what decoding with a key/value cache needs.

    Args:
        query_length: int or scalar tensor, number of queries.
        key_length: int or scalar tensor, number of keys.
        offset: optional int or scalar tensor: absolute position of query 0.

    Returns:
        Boolean tensor of shape `(query_length, key_length)`.
    """
    if offset is None:
        offset = key_length - query_length
    # `arange(0, n)` here and below: under jax2onnx (ONNX export on JAX),
    # Keras' `arange(n)` reads as a start with no stop.
    query_positions = ops.arange(0, query_length, dtype="int32")[:, None]
    key_positions = ops.arange(0, key_length, dtype="int32")[None, :]
    return key_positions <= query_positions + ops.cast(offset, "int32")


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    is_causal=False,
    scale=None,
    return_weights=False,
):
    """softmax(Q K^T / sqrt(d_k)) V.

    Uses `keras.ops.dot_product_attention` (cuDNN/flash attention on JAX, SDPA
    on PyTorch) unless the weights are requested, in which case it computes an
    explicit float32 softmax. Both paths give the same numbers, and a query
    that may attend to no key gets zeros on both.

    Args:
        query: `(batch, q_len, dim)` or `(batch, q_len, heads, dim)`.
        key: `(batch, k_len, dim)` or `(batch, k_len, heads, dim)`.
        value: `(batch, k_len, dim_v)` or `(batch, k_len, heads, dim_v)`.
        mask: optional boolean, `True` where attention is allowed. Shape
            `(batch, k_len)` (key padding), `(batch, q_len, k_len)`, or for
            4-D inputs `(batch, heads, q_len, k_len)`; size-1 axes broadcast.
        is_causal: if True, query `i` only sees keys `j <= i + k_len - q_len`
            (aligned to the end, as with a key/value cache).
        scale: logit scale; defaults to `1 / sqrt(dim)`.
        return_weights: also return the attention weights.

    Returns:
        `outputs` shaped like `query` with `dim_v` last, and, when
        `return_weights`, `weights` of shape `(batch, q_len, k_len)` for 3-D
        inputs or `(batch, heads, q_len, k_len)` for 4-D inputs.

    Example:

    >>> q = keras.random.normal((2, 5, 8))
    >>> out, w = scaled_dot_product_attention(q, q, q, is_causal=True,
    ...                                       return_weights=True)
    >>> out.shape, w.shape
    ((2, 5, 8), (2, 5, 5))
    """
    outputs, weights = _attend(
        query,
        key,
        value,
        mask=mask,
        is_causal=is_causal,
        scale=scale,
        return_weights=return_weights,
    )
    return (outputs, weights) if return_weights else outputs


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """Multi-head attention: Concat(head_1, ..., head_h) W^O.

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). This is
    `keras.layers.MultiHeadAttention` (same arguments, weights, call
    signature, LoRA, quantisation, gating, sliding windows, higher-rank
    inputs with `attention_axes`), with three additions:

    * **a key/value cache** for incremental decoding (the keras-hub
      convention): `cache` of shape `(batch, 2, max_len, num_heads,
      key_dim)` holds projected keys (`cache[:, 0]`) and values
      (`cache[:, 1]`). With `cache_update_index=i`, only the new tokens are
      projected and written at positions `i, i+1, ...`; attention runs over
      the whole cache and, with `use_causal_mask=True`, query `t` sees cache
      slots `<= i + t`. With `cache_update_index=None` the cache is used as
      it is (e.g. encoder keys/values for cross-attention, computed once by
      `compute_cache`);
    * **a query whose mask allows no key gives zeros** (and zero weights) on
      every backend and kernel, never NaN and never the mean of the values;
    * **the fused kernel is chosen per backend**
      (`zoo.layers.attention_kernels`), causal attention included, also for
      subclasses of this class.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for query and key.
        value_dim: size of each head for value; defaults to `key_dim`.
        dropout: dropout rate on the attention weights (training only), in
            [0, 1).
        use_bias: whether the projections have biases.
        output_shape: size (or shape) of the output's trailing axes;
            defaults to the query's last axis.
        attention_axes, sliding_window, flash_attention, use_gate,
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer, activity_regularizer, kernel_constraint,
        bias_constraint, seed: as in `keras.layers.MultiHeadAttention`.

    Call arguments:
        query: `(batch, q_len, query_dim)` (or higher rank, see
            `attention_axes`).
        value: `(batch, k_len, value_dim_in)`; may be None with a
            precomputed cache.
        key: optional `(batch, k_len, key_dim_in)`; defaults to `value`.
        attention_mask: optional boolean `(batch, q_len, k_len)` (True =
            attend). Keras masks on query, value and key are merged in.
        use_causal_mask: mask out keys after each query (decoder
            self-attention).
        return_attention_scores: also return the weights
            `(batch, num_heads, q_len, k_len)`.
        training: enables dropout.
        cache, cache_update_index: see above (rank-3 inputs only).

    Returns:
        `outputs` of shape `(batch, q_len, output_dim)`, then the scores if
        requested, then the updated cache if a cache was given.

    Example:

    >>> mha = MultiHeadAttention(num_heads=4, key_dim=16)
    >>> x = keras.random.normal((2, 10, 64))
    >>> y, scores = mha(x, x, use_causal_mask=True,
    ...                 return_attention_scores=True)
    >>> y.shape, scores.shape
    ((2, 10, 64), (2, 4, 10, 10))

    Incremental decoding, one token at a time into an 8-slot cache:

    >>> cache = keras.ops.zeros((2, 2, 8, 4, 16))
    >>> y, cache = mha(x[:, :1], x[:, :1], use_causal_mask=True,
    ...                cache=cache, cache_update_index=0)
    >>> y.shape, cache.shape
    ((2, 1, 64), (2, 2, 8, 4, 16))
    """

    # `call_sublayer` may run `call` directly: nothing here needs more
    # from `Layer.__call__` than what it checks (zoo.layers.sublayers).
    _same_when_called_directly = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, **kw):
        if (
            isinstance(dropout, bool)
            or not isinstance(dropout, (int, float))
            or not 0.0 <= dropout < 1.0
        ):
            raise ValueError(f"dropout must be in [0, 1); got {dropout!r}.")
        super().__init__(
            num_heads,
            key_dim,
            value_dim=value_dim,
            dropout=float(dropout),
            **kw,
        )

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (
            ("query", query_shape),
            ("value", value_shape),
            ("key", key_shape),
        ):
            if len(shape) < 3:
                raise ValueError(
                    f"MultiHeadAttention expects {name} of rank 3 (batch, "
                    f"seq, dim) or more; got shape {tuple(shape)}."
                )
        for dense in (
            self._query_dense,
            self._key_dense,
            self._value_dense,
            self._output_dense,
        ):
            # Each position is projected on its own, so a padding mask on
            # the input still describes the output: pass it on instead of
            # warning.
            dense.supports_masking = True

    def _uses_zoo_kernels(self, projected_query):
        """Rank-4 projections attending over one axis, no forced flash
        kernel: the zoo's `_attend` serves them. Anything else is Keras'."""
        return (
            len(projected_query.shape) == 4
            and tuple(self._attention_axes) == (1,)
            and not self._flash_attention
        )

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        """Keras' override point: attention on projected `(batch, seq,
        heads, dim)` tensors, returning `(outputs, scores or None)`."""
        if not self._uses_zoo_kernels(query):
            return super()._compute_attention(
                query,
                key,
                value,
                attention_mask,
                training,
                return_attention_scores,
                use_causal_mask=use_causal_mask,
            )
        return self._attend_projected(
            query,
            key,
            value,
            mask=attention_mask,  # `_attend` casts it to bool
            is_causal=use_causal_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )

    def _attend_projected(
        self,
        query,
        key,
        value,
        mask,
        is_causal,
        training,
        return_attention_scores,
        rows_have_keys=False,
    ):
        dropout = None
        if self._dropout > 0 and training:
            dropout = lambda w: self._dropout_layer(w, training=training)
        outputs, scores = _attend(
            query,
            key,
            value,
            mask=mask,
            is_causal=is_causal,
            scale=self._inverse_sqrt_key_dim,
            return_weights=return_attention_scores,
            weights_dropout=dropout,
            rows_have_keys=rows_have_keys,
        )
        return outputs, scores

    def compute_cache(self, value, key=None):
        """Projects keys and values once: `(batch, 2, k_len, heads, key_dim)`.

        Used for cross-attention during generation, where the encoder output
        does not change from one step to the next.
        """
        key = value if key is None else key
        return ops.stack(
            [self._key_dense(key), self._value_dense(value)], axis=1
        )

    def call(
        self,
        query,
        value=None,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        if key is None:
            key = value
            key_mask = None  # value's mask already covers the keys
        if value is None and (cache is None or cache_update_index is not None):
            raise ValueError(_VALUE_NEEDED)
        if cache is not None and len(query.shape) != 3:
            raise ValueError(
                "A key/value cache needs rank-3 (batch, seq, dim) inputs; "
                f"got a query of shape {tuple(query.shape)}."
            )

        gate = None
        if self._use_gate:
            gate = call_sublayer(self, self._gate_dense, query)
        projected_query = call_sublayer(self, self._query_dense, query)
        if cache is None:
            projected_key = call_sublayer(self, self._key_dense, key)
            projected_value = call_sublayer(self, self._value_dense, value)
        else:
            if self._value_dim != self._key_dim:
                raise ValueError(
                    "A key/value cache needs value_dim == key_dim; got "
                    f"value_dim={self._value_dim}, key_dim={self._key_dim}."
                )
            # Keras masks of the new tokens do not describe the whole cache;
            # padding inside the cache is expressed with attention_mask.
            value_mask = key_mask = None
            if cache_update_index is None:
                projected_key, projected_value = cache[:, 0], cache[:, 1]
            else:
                # One update of the whole (batch, 2, len, heads, dim) cache
                # (keys and values apart, then re-stacked, copied it 3 times
                # under PyTorch), in place inside zoo's decoding loop
                # (`zoo.accelerator.in_place_updates`).
                new = ops.stack(
                    [
                        call_sublayer(self, self._key_dense, key),
                        call_sublayer(self, self._value_dense, value),
                    ],
                    axis=1,
                )
                cache = slice_update(
                    cache, [0, 0, cache_update_index, 0, 0], new
                )
                projected_key, projected_value = cache[:, 0], cache[:, 1]

        if not self._uses_zoo_kernels(projected_query):
            # Higher-rank inputs, other attention axes, a forced flash
            # kernel: Keras' masks and attention.
            mask = self._compute_attention_mask(
                query,
                value,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
            )
            attended, scores = self._compute_attention(
                projected_query,
                projected_key,
                projected_value,
                mask,
                training,
                return_attention_scores,
            )
        else:
            attended, scores = self._zoo_attention(
                projected_query,
                projected_key,
                projected_value,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
                cache is not None,
                cache_update_index,
                training,
                return_attention_scores,
            )
        if gate is not None:
            attended = ops.multiply(attended, gate)
        outputs = call_sublayer(self, self._output_dense, attended)

        results = (outputs,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _zoo_attention(
        self,
        query,
        key,
        value,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        cached,
        cache_update_index,
        training,
        return_attention_scores,
    ):
        """Masks merged, then attention on the projected tensors: causal
        attention stays a fused kernel's flag where nothing else masks."""
        per_head = None
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            if len(attention_mask.shape) == 2:  # (q_len, k_len), as in Keras
                attention_mask = attention_mask[None]
            elif len(attention_mask.shape) == 4:  # (batch, heads, q, k)
                per_head, attention_mask = attention_mask, None
        mask = merge_padding_and_attention_mask(
            query_mask, value_mask, attention_mask
        )
        if key_mask is not None:
            mask = merge_padding_and_attention_mask(None, key_mask, mask)
        if per_head is not None:
            mask = per_head if mask is None else per_head & mask[:, None]
        q_len, k_len = _static_dim(query.shape, 1), _static_dim(key.shape, 1)
        if mask is not None:  # before the causal mask is combined with it
            _check_mask_fits(mask, q_len, k_len)
        # Absolute positions: new queries start at cache_update_index.
        offset = 0
        if cached and cache_update_index is not None:
            offset = cache_update_index
        if self._sliding_window is not None:
            window = _sliding_window_mask(
                ops.shape(query)[1],
                ops.shape(key)[1],
                offset,
                self._sliding_window,
            )
            mask = _and_masks(mask, window[None])
        # A subclass's attention sees one explicit mask, as in Keras.
        overridden = (
            type(self)._compute_attention
            is not MultiHeadAttention._compute_attention
        )
        is_causal = use_causal_mask
        rows_have_keys = False
        if use_causal_mask and (
            cached or overridden or q_len is None or q_len != k_len
        ):
            # Query i sees keys j <= offset + i (Keras' convention where
            # there are more or fewer keys than queries): an explicit mask.
            causal = causal_mask(ops.shape(query)[1], ops.shape(key)[1], offset)
            # Causal alone from slot 0: every query sees key 0.
            rows_have_keys = mask is None
            mask = _and_masks(mask, causal[None])
            is_causal = False
        if overridden:
            return self._compute_attention(
                query, key, value, mask, training, return_attention_scores
            )
        return self._attend_projected(
            query,
            key,
            value,
            mask=mask,
            is_causal=is_causal,
            training=training,
            return_attention_scores=return_attention_scores,
            rows_have_keys=rows_have_keys,
        )

    def compute_output_spec(
        self,
        query,
        value=None,
        key=None,
        return_attention_scores=False,
        cache=None,
        **kwargs,
    ):
        if cache is None:
            if value is None:
                raise ValueError(_VALUE_NEEDED)
            outputs = super().compute_output_spec(query, value, key)
        else:
            shape = self.compute_output_shape(query.shape, query.shape)
            outputs = keras.KerasTensor(shape, dtype=self.compute_dtype)
        results = (outputs,)
        if return_attention_scores:
            k_len = cache.shape[2] if cache is not None else value.shape[1]
            scores_shape = (
                query.shape[0],
                self._num_heads,
                query.shape[1],
                k_len,
            )
            results += (keras.KerasTensor(scores_shape, self.compute_dtype),)
        if cache is not None:
            results += (keras.KerasTensor(cache.shape, self.compute_dtype),)
        return results[0] if len(results) == 1 else results


def clone_initializer(initializer):
    """A fresh copy, so each sub-layer gets its own (stateless) initializer."""
    return initializer.__class__.from_config(initializer.get_config())


def merge_padding_and_attention_mask(
    query_mask=None, key_mask=None, attention_mask=None
):
    """AND-combines padding masks into a `(batch, q_len, k_len)` mask or None.

    Args:
        query_mask: optional `(batch, q_len)`, True at real query positions.
        key_mask: optional `(batch, k_len)`, True at real key positions.
        attention_mask: optional `(batch, q_len, k_len)`.
    """
    mask = None
    # `expand_dims`, not `[:, None]`: TFLite's own strided slice takes no
    # new axis on unknown sizes (a LiteRT export would need TensorFlow's).
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), 2)
    if key_mask is not None:
        key_mask = ops.expand_dims(ops.cast(key_mask, "bool"), 1)
        mask = key_mask if mask is None else mask & key_mask
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        mask = attention_mask if mask is None else mask & attention_mask
    return mask


_VALUE_NEEDED = (
    "value may be None only when a precomputed cache is given "
    "(cache=..., cache_update_index=None)."
)


def _and_masks(mask, other):
    """`mask & other`, where `mask` may be None (no mask yet)."""
    return other if mask is None else mask & other


def _sliding_window_mask(q_len, k_len, offset, window):
    """`(q_len, k_len)`, True where |(offset + i) - j| < window."""
    rows = ops.arange(0, q_len, dtype="int32")[:, None] + offset
    cols = ops.arange(0, k_len, dtype="int32")[None, :]
    return ops.less(ops.abs(rows - cols), window)
