"""Attention pooling: a softmax-weighted mean of a sequence.

    log p(a_i | t) = const + q . x_i,   pooled = sum_i p(a_i | t) v(x_i)

with q either a learned vector or computed from the text (a linear map of the
masked mean of x), and v the identity or a learned linear map.
"""

import keras
from keras import ops

from zoo.layers.softmax import masked_softmax


def attention_entropy(weights, mask=None):
    """Entropy in nats of each row of attention weights.

    Args:
        weights: `(..., seq)` probabilities summing to 1 (or 0 for an empty
            row) over the last axis.
        mask: optional `(..., seq)`; masked entries are ignored.

    Returns:
        `(...)` entropies, `-sum_i w_i log w_i`; 0 for an empty row.
    """
    weights = ops.cast(weights, "float32")
    if mask is not None:
        weights = weights * ops.cast(mask, "float32")
    # w log w -> 0 as w -> 0; the `where` keeps log(0) out of the gradient.
    safe = ops.where(weights > 0, weights, 1.0)
    return -ops.sum(weights * ops.log(safe), axis=-1)


@keras.saving.register_keras_serializable(package="zoo")
class AttentionPooling(keras.layers.Layer):
    """Pools `(batch, seq, dim)` to `(batch, dim)` with attention weights.

    The course's attention classifiers: one learned query
    (`query="learned"`), or a query computed from the text
    (`query="computed"`: `q = W mean(x) + b`), optionally with a value
    transform `v(x_i) = W_v x_i + b_v`. Padded positions get weight 0; a
    sequence with no real position pools to zeros.

    Args:
        query: `"learned"` or `"computed"`.
        use_value_transform: apply a learned linear map to each `x_i` before
            the weighted sum.
        value_dim: output size of the value transform; defaults to `dim`.
        entropy_weight: if non-zero, adds `entropy_weight * mean entropy` of
            the attention weights to the model's losses while training
            (positive: sharper attention; negative: flatter).
        kernel_initializer: for the query and value maps.
        query_initializer: for the learned query vector, or the kernel of
            the computed query's map; defaults to `kernel_initializer`.
            `"zeros"` starts the attention as the plain (masked) mean, so
            training moves away from mean pooling only where that helps.
        query_bias_initializer: for the bias `b` of the computed query's
            map, the part of the query that does not depend on the text.
            With `query_initializer="zeros"` and this set as a learned
            query would be (e.g. `"glorot_uniform"`), the computed query
            starts as a learned one.
        value_initializer: for the kernel of the value map; defaults to
            `kernel_initializer`. `"identity"` starts `v(x_i) = x_i`.
        map_scale: the kernels of the query and value maps are trained as
            `W = map_scale * theta`, with `theta` the stored weight (so
            initializers give `W`, and `theta = W / map_scale` at the
            start). Adam steps each weight by about the learning rate
            whatever its gradient's size, so `W` then moves `map_scale`
            times as fast as the rest of the model: a learning-rate factor
            that needs no optimizer support. These square maps get a
            gradient at every step while a word's embedding gets one only
            where the word occurs, so at full speed they can fit the
            training texts long before the embeddings do (docs/log/imdb.md).
            1.0 (default) is a plain dense map.

    Call arguments:
        sequence: `(batch, seq, dim)`.
        mask: optional `(batch, seq)`, True at real positions (the Keras mask
            of `sequence` is used when not given).
        return_attention_scores: also return the weights `(batch, seq)`.

    Returns:
        `(batch, value_dim or dim)`, and the weights if requested.

    Example:

    >>> x = keras.random.normal((2, 6, 16))
    >>> pooled, w = AttentionPooling()(x, return_attention_scores=True)
    >>> pooled.shape, w.shape
    ((2, 16), (2, 6))
    """

    def __init__(
        self,
        query="learned",
        use_value_transform=False,
        value_dim=None,
        entropy_weight=0.0,
        kernel_initializer="glorot_uniform",
        query_initializer=None,
        query_bias_initializer="zeros",
        value_initializer=None,
        map_scale=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if query not in ("learned", "computed"):
            raise ValueError(
                f"query must be 'learned' or 'computed'; got {query!r}."
            )
        if value_dim is not None and not use_value_transform:
            raise ValueError("value_dim needs use_value_transform=True.")
        if not float(map_scale) > 0:
            raise ValueError(f"map_scale must be > 0; got {map_scale!r}.")
        self.query = query
        self.use_value_transform = use_value_transform
        self.value_dim = value_dim
        self.entropy_weight = float(entropy_weight)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.query_initializer = (
            None
            if query_initializer is None
            else keras.initializers.get(query_initializer)
        )
        self.query_bias_initializer = keras.initializers.get(
            query_bias_initializer
        )
        self.value_initializer = (
            None
            if value_initializer is None
            else keras.initializers.get(value_initializer)
        )
        self.map_scale = float(map_scale)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                "AttentionPooling expects (batch, seq, dim); got shape "
                f"{tuple(input_shape)}."
            )
        dim = input_shape[-1]
        query_initializer = self.query_initializer or self.kernel_initializer
        if self.query == "learned":
            self.query_vector = self.add_weight(
                name="query", shape=(dim,), initializer=query_initializer
            )
        else:
            self.query_dense = keras.layers.Dense(
                dim,
                kernel_initializer=_Scaled(query_initializer, self.map_scale),
                bias_initializer=self.query_bias_initializer,
                dtype=self.dtype_policy,
                name="query_dense",
            )
            self.query_dense.build((input_shape[0], dim))
        if self.use_value_transform:
            value_initializer = (
                self.value_initializer or self.kernel_initializer
            )
            self.value_dense = keras.layers.Dense(
                self.value_dim or dim,
                kernel_initializer=_Scaled(value_initializer, self.map_scale),
                dtype=self.dtype_policy,
                name="value_dense",
            )
            self.value_dense.build(input_shape)
        self.built = True

    def call(
        self, sequence, mask=None, return_attention_scores=False, training=None
    ):
        x = sequence
        valid = None if mask is None else ops.cast(mask, "bool")
        if valid is not None and not _mask_fits(valid.shape, x.shape):
            raise ValueError(
                "AttentionPooling's mask must have shape (batch, seq) = "
                f"(batch, {x.shape[1]}); got shape {tuple(valid.shape)}."
            )
        if self.query == "learned":
            query = ops.cast(self.query_vector, x.dtype)
            logits = ops.einsum("bsd,d->bs", x, query)
        else:
            # Scaling the input scales the kernel (W = map_scale * theta),
            # not the bias.
            query = self.query_dense(self._scaled(_masked_mean(x, valid)))
            logits = ops.einsum("bsd,bd->bs", x, query)
        # float32 weights; an all-padding sequence gets weights 0.
        weights = masked_softmax(logits, valid)
        if training and self.entropy_weight:
            self.add_loss(
                self.entropy_weight * ops.mean(attention_entropy(weights))
            )
        values = (
            self.value_dense(self._scaled(x)) if self.use_value_transform else x
        )
        weights = ops.cast(weights, values.dtype)
        pooled = ops.einsum("bs,bsd->bd", weights, values)
        return (pooled, weights) if return_attention_scores else pooled

    def _scaled(self, x):
        return x if self.map_scale == 1.0 else x * self.map_scale

    def compute_mask(self, sequence, mask=None):
        return None  # the sequence axis is pooled away

    def compute_output_shape(self, input_shape):
        dim = self.value_dim or input_shape[-1]
        return (input_shape[0], dim)

    def compute_output_spec(
        self, sequence, return_attention_scores=False, **kw
    ):
        shape = self.compute_output_shape(sequence.shape)
        pooled = keras.KerasTensor(shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return pooled
        weights = keras.KerasTensor(
            sequence.shape[:2], dtype=self.compute_dtype
        )
        return pooled, weights

    def get_config(self):
        return super().get_config() | {
            "query": self.query,
            "use_value_transform": self.use_value_transform,
            "value_dim": self.value_dim,
            "entropy_weight": self.entropy_weight,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "query_initializer": (
                None
                if self.query_initializer is None
                else keras.initializers.serialize(self.query_initializer)
            ),
            "query_bias_initializer": keras.initializers.serialize(
                self.query_bias_initializer
            ),
            "value_initializer": (
                None
                if self.value_initializer is None
                else keras.initializers.serialize(self.value_initializer)
            ),
            "map_scale": self.map_scale,
        }


class _Scaled(keras.initializers.Initializer):
    """`initializer(shape) / scale`: theta's start when `W = scale * theta`
    should start as `initializer` would."""

    def __init__(self, initializer, scale):
        self.initializer = initializer
        self.scale = scale

    def __call__(self, shape, dtype=None):
        values = self.initializer(shape, dtype=dtype)
        return values if self.scale == 1.0 else values / self.scale


def _mask_fits(mask_shape, sequence_shape):
    """A `(batch, seq)` mask for a `(batch, seq, dim)` sequence (a length
    not known yet is taken to fit)."""
    if len(mask_shape) != 2:
        return False
    mask_length, length = mask_shape[1], sequence_shape[1]
    return None in (mask_length, length) or mask_length == length


def _masked_mean(x, valid):
    """Mean over the sequence axis of the real positions; 0 if there are none."""
    if valid is None:
        return ops.mean(x, axis=1)
    # `expand_dims`, not `[:, :, None]`: TFLite's own strided slice takes
    # no new axis on unknown sizes (a LiteRT export would need TensorFlow's).
    weights = ops.expand_dims(ops.cast(valid, x.dtype), -1)
    total = ops.sum(x * weights, axis=1)
    count = ops.maximum(ops.sum(weights, axis=1), 1.0)
    return total / count
