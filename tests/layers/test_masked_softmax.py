"""masked_softmax under the current backend, against a NumPy reference:
weight 0 at masked positions, all-zero weights for a row with nothing
unmasked, float32 whatever the scores' dtype; and the layers built on it."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import gradient, random_array, to_numpy
from zoo.layers import (
    AttentionPooling,
    LuongAttention,
    MultiHeadAttention,
    masked_softmax,
)

ATOL = 1e-6


def np_masked_softmax(scores, mask=None, axis=-1):
    """float64 reference: softmax over the unmasked positions, 0 elsewhere
    and on rows with no unmasked position."""
    scores = np.asarray(scores, "float64")
    if mask is None:
        mask = np.ones(scores.shape, bool)
    mask = np.broadcast_to(mask, np.broadcast_shapes(scores.shape, mask.shape))
    scores = np.broadcast_to(scores, mask.shape)
    shifted = np.where(mask, scores, -np.inf)
    peak = shifted.max(axis=axis, keepdims=True)
    exps = np.where(
        mask,
        np.exp(shifted - np.where(mask.any(axis, keepdims=True), peak, 0.0)),
        0.0,
    )
    total = exps.sum(axis=axis, keepdims=True)
    return exps / np.where(total > 0, total, 1.0)


def _random_mask(shape, seed, axis=-1, empty_rows=2):
    """About 60% True, with `empty_rows` rows (along `axis`) all False."""
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) > 0.4
    moved = np.moveaxis(mask, axis, -1)  # a view: writes reach `mask`
    rows = moved.reshape(-1, moved.shape[-1])
    for row in rng.choice(len(rows), size=empty_rows, replace=False):
        moved[np.unravel_index(row, moved.shape[:-1])] = False
    return mask


# ---- Values against NumPy ----------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_random_masks_match_numpy(axis):
    scores = random_array((3, 5, 7), 0) * 4.0
    mask = _random_mask(scores.shape, 1, axis)
    weights = masked_softmax(scores, mask, axis=axis)
    assert keras.backend.standardize_dtype(weights.dtype) == "float32"
    expected = np_masked_softmax(scores, mask, axis)
    np.testing.assert_allclose(to_numpy(weights), expected, atol=ATOL)
    sums = to_numpy(weights).sum(axis)
    np.testing.assert_allclose(sums, mask.any(axis).astype(float), atol=ATOL)


def test_fully_masked_rows_get_zeros_not_nan_or_uniform():
    scores = random_array((2, 3, 4), 0)
    mask = np.ones((2, 3, 4), bool)
    mask[0, 1] = False  # one empty row
    mask[1] = False  # a whole example with nothing to attend to
    weights = to_numpy(masked_softmax(scores, mask))
    assert np.isfinite(weights).all()
    assert np.all(weights[0, 1] == 0.0) and np.all(weights[1] == 0.0)
    np.testing.assert_allclose(
        weights, np_masked_softmax(scores, mask), atol=ATOL
    )


def test_masked_positions_get_exact_zeros():
    scores = random_array((4, 9), 2) * 30.0  # large logits, large spread
    mask = _random_mask(scores.shape, 3, empty_rows=1)
    weights = to_numpy(masked_softmax(scores, mask))
    assert np.all(weights[~mask] == 0.0)


def test_without_a_mask_it_is_the_softmax():
    scores = random_array((3, 6), 4)
    np.testing.assert_allclose(
        to_numpy(masked_softmax(scores)), np_masked_softmax(scores), atol=ATOL
    )
    np.testing.assert_allclose(
        to_numpy(masked_softmax(scores, axis=0)),
        np_masked_softmax(scores, axis=0),
        atol=ATOL,
    )


def test_mask_broadcasts_and_may_be_zeros_and_ones():
    scores = random_array((2, 3, 4, 5), 5)  # (batch, heads, q, k)
    key_padding = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], "int32")
    mask = key_padding[:, None, None, :]  # the second example sees no key
    weights = to_numpy(masked_softmax(scores, mask))
    assert weights.shape == scores.shape
    np.testing.assert_allclose(
        weights, np_masked_softmax(scores, mask.astype(bool)), atol=ATOL
    )
    assert np.all(weights[1] == 0.0)


def test_a_promise_of_nonempty_rows_gives_the_same_weights():
    scores = random_array((3, 4, 6), 6)
    mask = _random_mask(scores.shape, 7, empty_rows=0)
    mask[..., 0] = True  # every row has an unmasked position
    promised = to_numpy(masked_softmax(scores, mask, rows_nonempty=True))
    np.testing.assert_array_equal(
        promised, to_numpy(masked_softmax(scores, mask))
    )
    # Broken, the promise gives an empty row uniform weights, as documented.
    mask[0, 0] = False
    broken = to_numpy(masked_softmax(scores, mask, rows_nonempty=True))
    np.testing.assert_allclose(broken[0, 0], np.full(6, 1 / 6), atol=ATOL)


# ---- Low precision -----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_low_precision_scores_are_computed_in_float32(dtype):
    """bfloat16 and float16 scores (what mixed precision gives) come back
    as float32 weights of their exact values; large scores and empty rows
    neither overflow nor give NaN."""
    scores = random_array((4, 8), 8) * 8.0
    scores[0, :2] = [6e4, -6e4]  # near float16's largest finite value
    mask = _random_mask(scores.shape, 9, empty_rows=1)
    mask[0, :2] = True
    low = ops.cast(ops.convert_to_tensor(scores), dtype)
    weights = masked_softmax(low, ops.convert_to_tensor(mask))
    assert keras.backend.standardize_dtype(weights.dtype) == "float32"
    weights = to_numpy(weights)
    assert np.isfinite(weights).all()
    exact = to_numpy(ops.cast(low, "float32"))  # the scores' rounded values
    np.testing.assert_allclose(
        weights, np_masked_softmax(exact, mask), atol=ATOL
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_layers_under_mixed_precision_give_zero_weights_to_empty_rows(policy):
    """The alignment, pooling and attention layers compute their scores in
    the compute dtype; a source, sequence or query with nothing unmasked
    gets exact zero weights, the others sum to 1."""
    keras.config.set_dtype_policy(policy)
    x = random_array((2, 5, 8), 10)
    lengths = np.array([3, 0])
    mask = np.arange(5)[None, :] < lengths[:, None]
    query = random_array((2, 4, 8), 11)

    _, pooled = AttentionPooling()(x, mask=mask, return_attention_scores=True)
    _, aligned = LuongAttention(score="dot")(
        query, x, mask=mask, return_attention_scores=True
    )
    _, attended = MultiHeadAttention(num_heads=2, key_dim=4)(
        query,
        x,
        attention_mask=np.broadcast_to(mask[:, None, :], (2, 4, 5)),
        return_attention_scores=True,
    )
    for weights in (pooled, aligned, attended):
        weights = to_numpy(weights)
        assert np.isfinite(weights).all()
        assert np.all(weights[1] == 0.0)
        np.testing.assert_allclose(weights[0].sum(-1), 1.0, atol=1e-2)
        assert np.all(weights[0][..., 3:] == 0.0)


# ---- Gradients ---------------------------------------------------------------


def test_gradient_is_finite_and_zero_where_nothing_is_weighted():
    scores = ops.convert_to_tensor(random_array((3, 6), 12))
    mask = _random_mask((3, 6), 13, empty_rows=1)
    weight_of = ops.convert_to_tensor(random_array((3, 6), 14))

    def loss(s):
        return ops.sum(
            masked_softmax(s, ops.convert_to_tensor(mask)) * weight_of
        )

    grads = gradient(loss, scores)
    assert np.isfinite(grads).all()
    assert np.all(grads[~mask] == 0.0)
    assert np.all(grads[~mask.any(-1)] == 0.0)
