"""BahdanauAttention and LuongAttention under the current backend: the
course's formulas in NumPy, Keras' AdditiveAttention / Attention where the
formulas coincide, padding, one decoder step against the whole sequence,
keys computed once, round trips, mixed precision and a training step."""

import keras
import numpy as np
import pytest

from tests.helpers import (
    config_round_trip,
    keras_round_trip,
    np_softmax,
    random_array,
    to_numpy,
)
from zoo.layers import BahdanauAttention, LuongAttention

B, TQ, TK, DS, DH = 2, 3, 5, 6, 4


def _inputs():
    return random_array((B, TQ, DS), seed=1), random_array((B, TK, DH), seed=2)


def _mask():
    mask = np.ones((B, TK), bool)
    mask[1, 3:] = False
    return mask


def _np_attention(scores, values, mask=None):
    if mask is not None:
        scores = np.where(mask[:, None, :], scores, -np.inf)
    weights = np_softmax(scores)
    return weights @ values, weights


def _weights(layer, name):
    return [to_numpy(w) for w in getattr(layer, name).weights]


def test_bahdanau_is_v_tanh_ws_s_plus_wh_h():
    s, h = _inputs()
    layer = BahdanauAttention(8)
    context, weights = layer(s, h, mask=_mask(), return_attention_scores=True)
    (w_s,) = _weights(layer, "query_dense")
    w_h, b_h = _weights(layer, "key_dense")
    v = to_numpy(layer.score_vector)
    hidden = np.tanh((s @ w_s)[:, :, None, :] + (h @ w_h + b_h)[:, None])
    expected, expected_weights = _np_attention(hidden @ v, h, _mask())
    np.testing.assert_allclose(to_numpy(context), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-6)
    assert (to_numpy(weights)[1, :, 3:] == 0).all()


@pytest.mark.parametrize("score", ["dot", "general"])
def test_luong_scores_match_numpy(score):
    s, h = _inputs()
    if score == "dot":
        s = random_array((B, TQ, DH), seed=3)
    layer = LuongAttention(score)
    context, weights = layer(s, h, mask=_mask(), return_attention_scores=True)
    keys = h if score == "dot" else h @ _weights(layer, "key_dense")[0]
    expected, expected_weights = _np_attention(
        s @ np.swapaxes(keys, 1, 2), h, _mask()
    )
    np.testing.assert_allclose(to_numpy(context), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-6)


def test_bahdanau_equals_keras_additive_attention_on_projected_inputs():
    """keras.layers.AdditiveAttention computes sum(scale * tanh(q + k)):
    with q = W_s s, k = W_h h + b and scale = v it is Bahdanau's score."""
    s, h = _inputs()
    ours = BahdanauAttention(8)
    context = to_numpy(ours(s, h, mask=_mask()))
    theirs = keras.layers.AdditiveAttention(use_scale=True)
    q = ours.query_dense(s)
    k = ours.compute_keys(h)
    theirs.build([q.shape, h.shape, k.shape])
    theirs.scale.assign(ours.score_vector)
    expected = theirs([q, h, k], mask=[None, _mask()])
    np.testing.assert_allclose(context, to_numpy(expected), atol=1e-5)


def test_luong_dot_equals_keras_attention():
    s = random_array((B, TQ, DH), seed=3)
    _, h = _inputs()
    ours = to_numpy(LuongAttention("dot")(s, h, mask=_mask()))
    theirs = keras.layers.Attention()([s, h], mask=[None, _mask()])
    np.testing.assert_allclose(ours, to_numpy(theirs), atol=1e-5)


@pytest.mark.parametrize(
    "make", [lambda: BahdanauAttention(8), lambda: LuongAttention("general")]
)
def test_one_decoder_step_with_precomputed_keys_equals_the_sequence(make):
    s, h = _inputs()
    layer = make()
    whole, weights = layer(s, h, mask=_mask(), return_attention_scores=True)
    keys = layer.compute_keys(h)
    for i in range(TQ):
        step, step_weights = layer(
            s[:, i], h, keys=keys, mask=_mask(), return_attention_scores=True
        )
        assert tuple(step.shape) == (B, DH)
        np.testing.assert_allclose(
            to_numpy(step), to_numpy(whole)[:, i], atol=1e-6
        )
        np.testing.assert_allclose(
            to_numpy(step_weights), to_numpy(weights)[:, i], atol=1e-6
        )


def test_padding_never_changes_the_context_and_empty_rows_give_zeros():
    s, h = _inputs()
    layer = BahdanauAttention(8)
    mask = _mask()
    padded_h = np.concatenate([h, random_array((B, 2, DH), seed=9)], axis=1)
    padded_mask = np.concatenate([mask, np.zeros((B, 2), bool)], axis=1)
    np.testing.assert_allclose(
        to_numpy(layer(s, padded_h, mask=padded_mask)),
        to_numpy(layer(s, h, mask=mask)),
        atol=1e-6,
    )
    empty = np.zeros((B, TK), bool)
    out = to_numpy(layer(s, h, mask=empty))
    assert np.isfinite(out).all() and (out == 0).all()


def test_keras_mask_of_the_values_is_the_source_padding():
    ids = keras.Input((None,), dtype="int32")
    query = keras.Input((DS,))
    h = keras.layers.Embedding(20, DH, mask_zero=True)(ids)
    context = BahdanauAttention(8, name="attention")(query, h)
    model = keras.Model([query, ids], context)
    s = random_array((1, DS))
    short = np.array([[3, 4, 5]], "int32")
    padded = np.array([[3, 4, 5, 0, 0]], "int32")
    np.testing.assert_allclose(
        to_numpy(model([s, padded])), to_numpy(model([s, short])), atol=1e-6
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: BahdanauAttention(8, name="a"),
        lambda: LuongAttention("general", name="a"),
    ],
)
def test_round_trips_and_a_training_step(make, tmp_path):
    layer = make()
    assert config_round_trip(layer).get_config() == layer.get_config()
    query, values = keras.Input((DS,)), keras.Input((TK, DH))
    model = keras.Model([query, values], layer(query, values))
    s, h = random_array((4, DS)), random_array((4, TK, DH), seed=5)
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded([s, h])), to_numpy(model([s, h])), atol=1e-6
    )
    model.compile(optimizer="sgd", loss="mse")
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    loss = model.train_on_batch([s, h], np.ones((4, DH), "float32"))
    assert np.isfinite(loss)
    assert any(
        not np.allclose(b, to_numpy(w))
        for b, w in zip(before, model.trainable_weights)
    )


def test_mixed_precision_and_errors():
    keras.config.set_dtype_policy("mixed_bfloat16")
    s, h = _inputs()
    context, weights = BahdanauAttention(8)(s, h, return_attention_scores=True)
    assert keras.backend.standardize_dtype(context.dtype) == "bfloat16"
    assert np.isfinite(to_numpy(weights)).all()
    keras.config.set_dtype_policy("float32")
    with pytest.raises(ValueError, match='score="general"'):
        LuongAttention("dot")(s, h)
    with pytest.raises(ValueError, match="score must be"):
        LuongAttention("concat")
    with pytest.raises(ValueError, match="expects a query"):
        BahdanauAttention(4)(random_array((2, 3, 4, 5)), h)
