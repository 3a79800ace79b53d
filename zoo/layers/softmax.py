"""The softmax of the zoo's attention, alignment and pooling layers.

    weights_i = exp(s_i) / sum_{j unmasked} exp(s_j)  at unmasked i, else 0

and a row with no unmasked position gets all-zero weights: never NaN, and
never the uniform weights a plain softmax would give it.
"""

from keras import ops

# Stands in for minus infinity at masked positions: exp(-1e30 - max) is an
# exact 0 next to any real logit (all are far above -1e30), and an
# all-masked row stays finite (no inf - inf). It is only ever written into
# float32 logits: float16 cannot hold it.
_NEGATIVE_LOGIT = -1e30


def masked_softmax(scores, mask=None, axis=-1, *, rows_nonempty=False):
    """Softmax over `axis` that gives masked positions weight 0.

    Computed in float32 whatever the dtype of `scores` (bfloat16 and
    float16 logits lose the small differences that matter, and float16
    cannot hold the large negative value masked positions get), and
    returned in float32: callers cast the weights to the dtype they need.
    A row (along `axis`) with no unmasked position gets all-zero weights.

    Args:
        scores: float tensor of any rank, e.g. `(batch, q_len, k_len)`.
        mask: optional boolean (or 0/1) tensor broadcastable to `scores`,
            True where a position may get weight; None means no mask.
        axis: the axis the weights sum over.
        rows_nonempty: a promise that every row along `axis` has at least
            one unmasked position (a causal mask with the last query on the
            last key, say). The result is then the same; the pass that zeroes
            empty rows is skipped. A row that is empty after all gets
            uniform weights.

    Returns:
        float32 weights of the broadcast shape of `scores` and `mask`:
        summing to 1 along `axis`, or to 0 for a row with no unmasked
        position.

    Example:

    >>> scores = keras.ops.convert_to_tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    >>> mask = keras.ops.convert_to_tensor([[True, True, False], [False] * 3])
    >>> weights = masked_softmax(scores, mask)
    >>> weights.shape
    (2, 3)
    >>> np.round(keras.ops.convert_to_numpy(weights), 3)
    array([[0.269, 0.731, 0.   ],
           [0.   , 0.   , 0.   ]], dtype=float32)
    """
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=axis)
    mask = ops.cast(mask, "bool")
    weights = ops.softmax(ops.where(mask, scores, _NEGATIVE_LOGIT), axis=axis)
    if rows_nonempty:
        # Next to a real logit a masked one already gives an exact 0.
        return weights
    # A row with no real position came out uniform: zero it.
    return weights * ops.cast(mask, "float32")
