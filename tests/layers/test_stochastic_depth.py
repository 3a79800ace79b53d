"""StochasticDepth under the current backend: whole examples dropped at the
rate and the kept ones rescaled while training, the identity at inference;
in a Transformer block, a dropped example skips both residual branches."""

import keras
import numpy as np
import pytest

from tests.helpers import (
    config_round_trip,
    keras_round_trip,
    random_array,
    to_numpy,
)
from zoo.layers import StochasticDepth, TransformerEncoder


def test_drops_whole_examples_at_the_rate_and_rescales_the_rest():
    x = random_array((2000, 3, 4), 0) + 5.0  # no zeros of its own
    out = to_numpy(StochasticDepth(0.25, seed=1)(x, training=True))
    dropped = (out == 0).all(axis=(1, 2))
    kept = np.isclose(out, x / 0.75, rtol=1e-6).all(axis=(1, 2))
    assert (dropped | kept).all()  # all or nothing per example
    rate = dropped.mean()
    assert abs(rate - 0.25) < 3 * np.sqrt(0.25 * 0.75 / dropped.size)
    # The expectation is the input: E[out] = x.
    np.testing.assert_allclose(out.mean(0), x.mean(0), rtol=0.1)


def test_identity_at_inference_and_rate_zero():
    x = random_array((4, 5), 1)
    np.testing.assert_array_equal(to_numpy(StochasticDepth(0.5)(x)), x)
    np.testing.assert_array_equal(
        to_numpy(StochasticDepth(0.0)(x, training=True)), x
    )


@pytest.mark.parametrize("rate", [1.0, -0.1])
def test_invalid_rate_raises(rate):
    with pytest.raises(ValueError, match="rate must be in"):
        StochasticDepth(rate)


def test_under_mixed_bfloat16_keeps_the_dtype():
    layer = StochasticDepth(0.5, seed=2, dtype="mixed_bfloat16")
    x = keras.ops.cast(random_array((8, 3), 2), "bfloat16")
    assert (
        keras.backend.standardize_dtype(layer(x, training=True).dtype)
        == "bfloat16"
    )


def test_config_round_trip():
    layer = StochasticDepth(0.2, seed=3)
    assert config_round_trip(layer).get_config() == layer.get_config()


# ---- inside a Transformer block -------------------------------------------------


def test_pre_ln_block_drops_both_branches_per_example_while_training():
    """With pre-LN, an example whose two branches are both dropped leaves the
    block unchanged; at inference the block is the one without drop path."""
    block = TransformerEncoder(2, 16, norm_first=True, drop_path_rate=0.5)
    plain = TransformerEncoder(2, 16, norm_first=True)
    x = np.repeat(random_array((1, 4, 8), 3), 64, axis=0)
    block(x), plain(x)
    for mine, source in zip(block.weights, plain.weights):
        mine.assign(source)
    np.testing.assert_allclose(
        to_numpy(block(x)), to_numpy(plain(x)), atol=1e-6
    )
    out = to_numpy(block(x, training=True))
    untouched = np.isclose(out, x, atol=1e-6).all(axis=(1, 2))
    # Each example keeps neither branch with probability 1/4.
    assert 0 < untouched.sum() < 64
    assert len({tuple(np.round(row.ravel(), 4)) for row in out}) > 2


def test_block_with_drop_path_saves_and_trains(tmp_path):
    inputs = keras.Input((6, 8))
    x = TransformerEncoder(2, 16, drop_path_rate=0.2)(inputs)
    outputs = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    data = random_array((16, 6, 8), 4)
    history = model.fit(data, np.ones((16, 1)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    restored = keras_round_trip(model, tmp_path)
    assert restored.layers[1].drop_path_rate == 0.2
    np.testing.assert_allclose(
        restored.predict(data, verbose=0),
        model.predict(data, verbose=0),
        atol=1e-6,
    )
