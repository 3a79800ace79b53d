"""AttentionPooling and attention_entropy, under the current backend, checked
against NumPy references of pooled = sum_i softmax(q . x_i) v(x_i)."""

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
from zoo.layers import AttentionPooling, PositionalEmbedding, attention_entropy

ATOL = 1e-5
BATCH, SEQ, DIM = 3, 6, 8
# Row 0 is all real, row 1 has 2 padded positions, row 2 has 4.
MASK = np.arange(SEQ)[None, :] < np.array([[SEQ], [SEQ - 2], [2]])


def _np_masked_softmax(logits, mask):
    weights = np_softmax(np.where(mask, logits, -np.inf))
    return np.where(mask, weights, 0.0)


def _np_entropy(weights):
    safe = np.where(weights > 0, weights, 1.0)
    return -(weights * np.log(safe)).sum(-1)


# ---- Values against NumPy ----------------------------------------------------


def test_learned_query_matches_numpy():
    x = random_array((BATCH, SEQ, DIM))
    layer = AttentionPooling(query="learned")
    pooled, weights = layer(x, return_attention_scores=True)
    q = to_numpy(layer.query_vector)
    expected_w = np_softmax(x @ q)
    np.testing.assert_allclose(to_numpy(weights), expected_w, atol=ATOL)
    np.testing.assert_allclose(
        to_numpy(weights).sum(-1), np.ones(BATCH), atol=ATOL
    )
    np.testing.assert_allclose(
        to_numpy(pooled), np.einsum("bs,bsd->bd", expected_w, x), atol=ATOL
    )


def test_value_transform_matches_numpy():
    x = random_array((BATCH, SEQ, DIM))
    layer = AttentionPooling(use_value_transform=True, value_dim=5)
    pooled, weights = layer(x, return_attention_scores=True)
    assert tuple(pooled.shape) == (BATCH, 5)
    kernel = to_numpy(layer.value_dense.kernel)
    bias = to_numpy(layer.value_dense.bias)
    expected_w = np_softmax(x @ to_numpy(layer.query_vector))
    values = x @ kernel + bias
    np.testing.assert_allclose(to_numpy(weights), expected_w, atol=ATOL)
    np.testing.assert_allclose(
        to_numpy(pooled), np.einsum("bs,bsd->bd", expected_w, values), atol=ATOL
    )


def test_computed_query_uses_masked_mean_and_zero_weights_on_padding():
    x = random_array((BATCH, SEQ, DIM))
    x[~MASK] = 50.0  # padding values that would change an unmasked mean a lot
    layer = AttentionPooling(
        query="computed", kernel_initializer="random_normal"
    )
    pooled, weights = layer(x, mask=MASK, return_attention_scores=True)
    real = MASK[..., None]
    mean = (x * real).sum(1) / real.sum(1)  # counts real positions only
    q = mean @ to_numpy(layer.query_dense.kernel) + to_numpy(
        layer.query_dense.bias
    )
    expected_w = _np_masked_softmax(np.einsum("bsd,bd->bs", x, q), MASK)
    weights = to_numpy(weights)
    assert np.all(weights[~MASK] == 0.0)
    np.testing.assert_allclose(weights, expected_w, atol=ATOL)
    np.testing.assert_allclose(weights.sum(-1), np.ones(BATCH), atol=ATOL)
    np.testing.assert_allclose(
        to_numpy(pooled), np.einsum("bs,bsd->bd", expected_w, x), atol=ATOL
    )


@pytest.mark.parametrize("query", ["learned", "computed"])
def test_zero_query_initializer_starts_as_masked_mean(query):
    x = random_array((BATCH, SEQ, DIM))
    layer = AttentionPooling(query=query, query_initializer="zeros")
    pooled, weights = layer(x, mask=MASK, return_attention_scores=True)
    real = MASK[..., None]
    np.testing.assert_allclose(
        to_numpy(weights), MASK / MASK.sum(1, keepdims=True), atol=ATOL
    )
    np.testing.assert_allclose(
        to_numpy(pooled), (x * real).sum(1) / real.sum(1), atol=ATOL
    )


def test_query_initializer_defaults_to_kernel_initializer():
    layer = AttentionPooling(kernel_initializer="ones")
    layer.build((BATCH, SEQ, DIM))
    np.testing.assert_array_equal(to_numpy(layer.query_vector), np.ones(DIM))
    # Configs saved before the option existed still load.
    config = layer.get_config()
    assert config.pop("query_initializer") is None
    assert AttentionPooling.from_config(config).query_initializer is None


def test_map_scale_scales_the_trained_kernels_and_keeps_the_initial_maps():
    x = random_array((BATCH, SEQ, DIM))
    layer = AttentionPooling(
        query="computed",
        use_value_transform=True,
        map_scale=0.1,
        kernel_initializer=keras.initializers.RandomNormal(stddev=1.0),
        query_bias_initializer="ones",
    )
    pooled, weights = layer(x, mask=MASK, return_attention_scores=True)
    theta_q, b_q = (to_numpy(w) for w in layer.query_dense.weights)
    theta_v, b_v = (to_numpy(w) for w in layer.value_dense.weights)
    np.testing.assert_array_equal(b_q, np.ones(DIM))
    # The stored kernels are W / map_scale: W starts at unit scale, so
    # theta at 10.
    assert 5 < theta_q.std() < 20 and 5 < theta_v.std() < 20
    real = MASK[..., None]
    mean = (x * real).sum(1) / real.sum(1)
    q = mean @ (0.1 * theta_q) + b_q
    expected_w = _np_masked_softmax(np.einsum("bsd,bd->bs", x, q), MASK)
    values = x @ (0.1 * theta_v) + b_v
    np.testing.assert_allclose(to_numpy(weights), expected_w, atol=ATOL)
    np.testing.assert_allclose(
        to_numpy(pooled),
        np.einsum("bs,bsd->bd", expected_w, values),
        atol=1e-4,
    )


def test_value_and_query_bias_initializers():
    layer = AttentionPooling(
        query="computed",
        use_value_transform=True,
        map_scale=0.25,
        query_initializer="zeros",
        query_bias_initializer="ones",
        value_initializer="identity",
    )
    layer.build((BATCH, SEQ, DIM))
    np.testing.assert_array_equal(to_numpy(layer.query_dense.kernel), 0.0)
    np.testing.assert_array_equal(to_numpy(layer.query_dense.bias), 1.0)
    np.testing.assert_allclose(
        0.25 * to_numpy(layer.value_dense.kernel), np.eye(DIM), atol=1e-7
    )
    # So v(x_i) = x_i and q = (1, ..., 1) whatever the text.
    x = random_array((BATCH, SEQ, DIM))
    pooled = to_numpy(layer(x, mask=MASK))
    expected_w = _np_masked_softmax(x.sum(-1), MASK)
    np.testing.assert_allclose(
        pooled, np.einsum("bs,bsd->bd", expected_w, x), atol=1e-5
    )


def _value_map(pool):
    """The value map W_v as the layer applies it, read off its outputs: a
    one-word sequence pools to v(x) = x W_v + b_v."""
    probe = np.concatenate([np.eye(DIM), np.zeros((1, DIM))])[:, None, :]
    out = to_numpy(pool(probe.astype("float32")))
    return out[:DIM] - out[DIM]


@pytest.mark.parametrize("map_scale", [1.0, 0.1])
def test_adam_moves_the_maps_map_scale_times_the_learning_rate(map_scale):
    # Adam's first step moves each weight by the learning rate times the
    # sign of its gradient; W = map_scale * theta then moves map_scale
    # times as far.
    learning_rate = 0.01
    inputs = keras.Input((SEQ, DIM))
    pool = AttentionPooling(
        query="computed", use_value_transform=True, map_scale=map_scale
    )
    model = keras.Model(inputs, keras.layers.Dense(1)(pool(inputs)))
    # A tiny epsilon, so that small gradients too take the full step.
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, epsilon=1e-12),
        loss="mse",
    )
    value_map = _value_map(pool)
    query_map = map_scale * to_numpy(pool.query_dense.kernel)
    model.fit(
        random_array((4, SEQ, DIM)),
        np.ones((4, 1), "float32"),
        batch_size=4,
        epochs=1,
        verbose=0,
    )
    steps = (
        np.abs(_value_map(pool) - value_map),
        np.abs(map_scale * to_numpy(pool.query_dense.kernel) - query_map),
    )
    for step in steps:
        moved = step[step > 0]
        assert moved.size > 0.9 * step.size
        np.testing.assert_allclose(moved, map_scale * learning_rate, rtol=0.02)


# ---- Masking -----------------------------------------------------------------


@pytest.mark.parametrize("query", ["learned", "computed"])
def test_appending_padding_does_not_change_output(query):
    x = random_array((BATCH, 4, DIM))
    layer = AttentionPooling(query=query, use_value_transform=True)
    unpadded = to_numpy(layer(x))
    padding = 10.0 * random_array((BATCH, SEQ - 4, DIM), seed=1)
    padded_x = np.concatenate([x, padding], axis=1)
    mask = np.broadcast_to(np.arange(SEQ) < 4, (BATCH, SEQ))
    padded = to_numpy(layer(padded_x, mask=mask))
    np.testing.assert_allclose(padded, unpadded, atol=1e-6)


@pytest.mark.parametrize("query", ["learned", "computed"])
def test_fully_masked_sequence_pools_to_zeros(query):
    x = random_array((BATCH, SEQ, DIM))
    mask = MASK.copy()
    mask[1] = False  # row 1 has no real position
    layer = AttentionPooling(query=query, use_value_transform=True)
    pooled, weights = layer(x, mask=mask, return_attention_scores=True)
    pooled, weights = to_numpy(pooled), to_numpy(weights)
    assert not np.isnan(pooled).any() and not np.isnan(weights).any()
    np.testing.assert_array_equal(pooled[1], np.zeros(DIM))
    np.testing.assert_array_equal(weights[1], np.zeros(SEQ))
    np.testing.assert_allclose(weights[[0, 2]].sum(-1), [1.0, 1.0], atol=ATOL)


def test_keras_mask_from_positional_embedding_reaches_pooling():
    inputs = keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(20, 10, DIM, mask_zero=True)
    pool = AttentionPooling()
    model = keras.Model(inputs, pool(embed(inputs)))
    ids = np.array([[3, 4, 5, 0, 0], [7, 0, 0, 0, 0]], dtype="int32")
    out = model.predict(ids, verbose=0)
    x = to_numpy(embed(ids))
    mask = ids != 0
    expected_w = _np_masked_softmax(x @ to_numpy(pool.query_vector), mask)
    np.testing.assert_allclose(
        out, np.einsum("bs,bsd->bd", expected_w, x), atol=ATOL
    )


# ---- attention_entropy -------------------------------------------------------

ENTROPY_ROWS = np.array(
    [
        [0.25, 0.25, 0.25, 0.25],
        [0.1, 0.2, 0.3, 0.4],
        [0.5, 0.0, 0.5, 0.0],  # zeros inside a row: 0 log 0 = 0
        [0.0, 0.0, 0.0, 0.0],  # an empty (fully masked) row
    ],
    dtype="float32",
)


def test_attention_entropy_matches_numpy():
    entropy = to_numpy(attention_entropy(ENTROPY_ROWS))
    assert not np.isnan(entropy).any()
    np.testing.assert_allclose(entropy, _np_entropy(ENTROPY_ROWS), atol=ATOL)
    np.testing.assert_allclose(
        entropy[[0, 2, 3]], [np.log(4.0), np.log(2.0), 0.0], atol=ATOL
    )


def test_attention_entropy_ignores_masked_entries():
    mask = np.array([[True, True, False, False]] * 4)
    entropy = to_numpy(attention_entropy(ENTROPY_ROWS, mask=mask))
    np.testing.assert_allclose(
        entropy, _np_entropy(ENTROPY_ROWS * mask), atol=ATOL
    )


# ---- Entropy regularisation --------------------------------------------------


def _entropy_model():
    inputs = keras.Input((4, DIM))
    pool = AttentionPooling(entropy_weight=0.5)
    return keras.Model(inputs, keras.layers.Dense(1)(pool(inputs))), pool


def test_entropy_weight_adds_loss_while_training():
    model, pool = _entropy_model()
    x = random_array((BATCH, 4, DIM))
    model(x, training=True)
    assert len(model.losses) == 1
    loss = to_numpy(model.losses[0])  # read it before calling the layer again
    _, weights = pool(x, return_attention_scores=True, training=False)
    expected = 0.5 * _np_entropy(to_numpy(weights)).mean()
    assert expected > 0.1  # the check below is not trivially 0 == 0
    np.testing.assert_allclose(loss, expected, atol=ATOL)


def test_entropy_weight_adds_no_loss_at_inference():
    model, _ = _entropy_model()
    model(random_array((BATCH, 4, DIM)), training=False)
    assert len(model.losses) == 0


# ---- Serialization -----------------------------------------------------------

LAYER_KWARGS = {
    "learned": dict(query="learned"),
    "computed_value": dict(
        query="computed",
        use_value_transform=True,
        value_dim=5,
        entropy_weight=0.1,
        kernel_initializer="he_normal",
    ),
    "zero_query": dict(query="computed", query_initializer="zeros"),
    "scaled_maps": dict(
        query="computed",
        use_value_transform=True,
        map_scale=0.1,
        query_initializer="zeros",
        query_bias_initializer="glorot_uniform",
        value_initializer="identity",
    ),
}


def test_config_round_trip():
    for name, kwargs in LAYER_KWARGS.items():
        layer = AttentionPooling(**kwargs)
        restored = config_round_trip(layer)
        assert type(restored) is AttentionPooling, name
        assert restored.get_config() == layer.get_config(), name


@pytest.mark.parametrize("name", list(LAYER_KWARGS))
def test_keras_file_round_trip_keeps_predictions(name, tmp_path):
    inputs = keras.Input((SEQ, DIM))
    model = keras.Model(inputs, AttentionPooling(**LAYER_KWARGS[name])(inputs))
    x = random_array((BATCH, SEQ, DIM))
    before = model.predict(x, verbose=0)
    restored = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        restored.predict(x, verbose=0), before, atol=1e-6
    )


# ---- Training ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(LAYER_KWARGS))
def test_one_training_step_updates_pooling_weights(name):
    inputs = keras.Input((SEQ, DIM))
    pool = AttentionPooling(**LAYER_KWARGS[name])
    model = keras.Model(
        inputs, keras.layers.Dense(1, activation="sigmoid")(pool(inputs))
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy"
    )
    before = [to_numpy(w).copy() for w in pool.weights]
    history = model.fit(
        random_array((4, SEQ, DIM)),
        np.array([[0], [1], [1], [0]], "float32"),
        batch_size=4,
        epochs=1,
        verbose=0,
    )
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in pool.weights]
    assert any(not np.allclose(b, a) for b, a in zip(before, after))


# ---- Mixed precision ---------------------------------------------------------


@pytest.mark.parametrize(
    "policy, compute_dtype",
    [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")],
)
def test_mixed_precision_output_uses_compute_dtype(policy, compute_dtype):
    keras.config.set_dtype_policy(policy)
    x = random_array((BATCH, SEQ, DIM))
    for name, kwargs in LAYER_KWARGS.items():
        pooled, weights = AttentionPooling(**kwargs)(
            x, mask=MASK, return_attention_scores=True
        )
        assert keras.backend.standardize_dtype(pooled.dtype) == compute_dtype, (
            name
        )
        assert (
            keras.backend.standardize_dtype(weights.dtype) == compute_dtype
        ), name
        assert not np.isnan(to_numpy(pooled)).any(), name
        assert not np.isnan(to_numpy(weights)).any(), name


# ---- Argument checks ---------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(query="nope"), "query"),
        (dict(value_dim=3), "use_value_transform"),
        (dict(map_scale=0.0), "map_scale must be > 0"),
    ],
    ids=["unknown_query", "value_dim_without_transform", "zero_map_scale"],
)
def test_invalid_constructor_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionPooling(**kwargs)


def test_rank_2_input_raises():
    with pytest.raises(ValueError, match=r"\(batch, seq, dim\)"):
        AttentionPooling()(random_array((BATCH, DIM)))


def test_a_mask_of_the_wrong_shape_is_a_clear_error():
    x = random_array((2, 5, 8), 0)
    with pytest.raises(ValueError, match=r"\(batch, 5\); got shape \(2, 4\)"):
        AttentionPooling()(x, mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"got shape \(2, 5, 1\)"):
        AttentionPooling()(x, mask=np.ones((2, 5, 1), bool))
