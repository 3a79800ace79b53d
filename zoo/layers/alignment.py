"""Attention for RNN encoder-decoders: the alignment a_ij between output
step i and input word j.

Bahdanau et al. (2014), additive:  e_ij = v^T tanh(W_s s_i + W_h h_j)
Luong et al. (2015), multiplicative: e_ij = s_i^T h_j        ("dot")
                                     e_ij = s_i^T W_a h_j    ("general")
Then a_ij = softmax_j(e_ij) over the real (unmasked) source positions and
the context c_i = sum_j a_ij h_j.

`s_i` is the decoder state (the query), `h_j` the encoder states (the
values). The source-side projection (`W_h h_j` or `W_a h_j`) does not depend
on the decoder, so it can be computed once per sentence with
`compute_keys` and passed to every decoder step.
"""

import keras
from keras import ops

from zoo.layers.attention import clone_initializer
from zoo.layers.softmax import masked_softmax
from zoo.layers.sublayers import call_sublayer


class _AlignmentAttention(keras.layers.Layer):
    """Shared call logic: query rank 2 or 3, the padding mask, the context."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def _scores(self, query, keys):  # (b, tq, dq), (b, tk, *) -> (b, tq, tk)
        raise NotImplementedError

    def compute_keys(self, values):
        """The source-side part of the scores, `(batch, src_len, ...)`,
        computed once per sentence."""
        raise NotImplementedError

    def call(
        self,
        query,
        values,
        keys=None,
        mask=None,
        return_attention_scores=False,
        query_mask=None,
        values_mask=None,
    ):
        single_step = len(query.shape) == 2
        if len(query.shape) not in (2, 3) or len(values.shape) != 3:
            raise ValueError(
                f"{type(self).__name__} expects a query (batch, dim) or "
                "(batch, tgt_len, dim) and values (batch, src_len, dim); got "
                f"{tuple(query.shape)} and {tuple(values.shape)}."
            )
        # Keras passes the values' mask as `values_mask` (several tensor
        # arguments); the decoder's own padding does not restrict a_ij.
        if mask is None:
            mask = values_mask
        if single_step:
            query = query[:, None, :]
        if keys is None:
            keys = self.compute_keys(values)
        if mask is not None:  # (batch, src_len), the same for every step
            mask = ops.cast(mask, "bool")[:, None, :]
        # float32 weights, 0 at padding and for a source with no real word.
        weights = masked_softmax(self._scores(query, keys), mask)
        context = ops.einsum(
            "bqk,bkd->bqd", ops.cast(weights, values.dtype), values
        )
        if single_step:
            context, weights = context[:, 0], weights[:, 0]
        if return_attention_scores:
            return context, ops.cast(weights, self.compute_dtype)
        return context

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(
        self,
        query,
        values,
        keys=None,
        mask=None,
        return_attention_scores=False,
        **kwargs,
    ):
        shape = tuple(query.shape[:-1]) + (values.shape[-1],)
        context = keras.KerasTensor(shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return context
        weights = keras.KerasTensor(
            tuple(query.shape[:-1]) + (values.shape[1],),
            dtype=self.compute_dtype,
        )
        return context, weights


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauAttention(_AlignmentAttention):
    """Additive attention (Bahdanau et al., 2014).

    `e_ij = v^T tanh(W_s s_i + W_h h_j + b)`, `a_ij = softmax_j(e_ij)`,
    `c_i = sum_j a_ij h_j`.

    Args:
        units: size of the hidden layer of the score (rows of `W_s`, `W_h`).
        kernel_initializer: for `W_s`, `W_h` and `v`.

    Call arguments:
        query: decoder states, `(batch, dim_s)` for one step or `(batch,
            tgt_len, dim_s)`.
        values: encoder states `(batch, src_len, dim_h)`.
        keys: optional `compute_keys(values)`, to compute it once per
            sentence.
        mask: optional `(batch, src_len)`, True at real source positions
            (the Keras mask of `values` when not given).
        return_attention_scores: also return the weights a_ij.

    Returns:
        The context `(batch, [tgt_len,] dim_h)`, and the weights `(batch,
        [tgt_len,] src_len)` if requested (0 at padded positions).

    Example:

    >>> attention = BahdanauAttention(units=32)
    >>> s, h = keras.random.normal((2, 16)), keras.random.normal((2, 7, 24))
    >>> context, a = attention(s, h, return_attention_scores=True)
    >>> context.shape, a.shape
    ((2, 24), (2, 7))
    """

    _same_when_called_directly = True  # see zoo.layers.sublayers

    def __init__(self, units, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, values_shape, keys_shape=None):
        self.query_dense = keras.layers.Dense(
            self.units,
            use_bias=False,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="query_dense",
        )
        self.query_dense.build(query_shape)
        self.key_dense = keras.layers.Dense(
            self.units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="key_dense",
        )
        self.key_dense.build(values_shape)
        self.score_vector = self.add_weight(
            name="score_vector",
            shape=(self.units,),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.built = True

    def compute_keys(self, values):
        """`W_h h_j + b`, `(batch, src_len, units)`."""
        return call_sublayer(self, self.key_dense, values)

    def _scores(self, query, keys):
        projected = call_sublayer(self, self.query_dense, query)[:, :, None, :]
        hidden = ops.tanh(projected + keys[:, None, :, :])
        return ops.einsum(
            "bqku,u->bqk", hidden, ops.cast(self.score_vector, hidden.dtype)
        )

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
        }


@keras.saving.register_keras_serializable(package="zoo")
class LuongAttention(_AlignmentAttention):
    """Multiplicative attention (Luong et al., 2015).

    `score="dot"`: `e_ij = s_i^T h_j` (the decoder and encoder states must
    have the same size); `score="general"`: `e_ij = s_i^T W_a h_j`. Then
    `a_ij = softmax_j(e_ij)` and `c_i = sum_j a_ij h_j`.

    Args:
        score: "dot" or "general".
        kernel_initializer: for `W_a`.

    Call arguments:
        query, values, keys, mask, return_attention_scores: as in
            `BahdanauAttention`.

    Returns:
        The context `(batch, [tgt_len,] dim_h)`, and the weights `(batch,
        [tgt_len,] src_len)` if requested.

    Example:

    >>> attention = LuongAttention(score="general")
    >>> s, h = keras.random.normal((2, 5, 16)), keras.random.normal((2, 7, 24))
    >>> attention(s, h).shape
    (2, 5, 24)
    """

    _same_when_called_directly = True  # see zoo.layers.sublayers

    def __init__(
        self, score="general", kernel_initializer="glorot_uniform", **kwargs
    ):
        super().__init__(**kwargs)
        if score not in ("dot", "general"):
            raise ValueError(
                f"score must be 'dot' or 'general'; got {score!r}."
            )
        self.score = score
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, values_shape, keys_shape=None):
        if self.score == "dot":
            if query_shape[-1] != values_shape[-1]:
                raise ValueError(
                    'score="dot" needs decoder and encoder states of one '
                    f"size; got {query_shape[-1]} and {values_shape[-1]}. "
                    'Use score="general".'
                )
        else:
            # W_a maps h_j to the decoder's size: s_i^T (W_a h_j).
            self.key_dense = keras.layers.Dense(
                query_shape[-1],
                use_bias=False,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="key_dense",
            )
            self.key_dense.build(values_shape)
        self.built = True

    def compute_keys(self, values):
        """`h_j` ("dot") or `W_a h_j` ("general")."""
        if self.score == "dot":
            return values
        return call_sublayer(self, self.key_dense, values)

    def _scores(self, query, keys):
        return ops.einsum("bqd,bkd->bqk", query, keys)

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
        }
