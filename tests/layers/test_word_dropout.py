"""WordDropout under the current backend: drops real tokens to the padding id
at the given rate while training, never empties a row, is the identity at
inference, and works in a masked model (save/load, a training step)."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip, keras_round_trip
from zoo.layers import AttentionPooling, WordDropout

BATCH, SEQ, REAL = 256, 40, 30


def _token_ids(seed=0):
    ids = np.random.default_rng(seed).integers(1, 100, (BATCH, SEQ))
    ids[:, REAL:] = 0  # padding
    ids[0, 1:] = 0  # a one-word review
    return ids.astype("int32")


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_drops_real_tokens_at_the_rate_and_leaves_the_rest_alone():
    ids = _token_ids()
    out = _numpy(WordDropout(0.3, seed=1)(ids, training=True))
    assert out.dtype == ids.dtype
    dropped = (out == 0) & (ids != 0)
    # 256 x 30 Bernoulli(0.3) draws: the rate is within 3 standard errors.
    rate = dropped[1:, :REAL].mean()
    assert abs(rate - 0.3) < 3 * np.sqrt(0.3 * 0.7 / dropped[1:, :REAL].size)
    # Kept tokens keep their id; padding stays padding.
    kept = out != 0
    np.testing.assert_array_equal(out[kept], ids[kept])
    assert (out[:, REAL:] == 0).all()


def test_never_empties_a_row():
    ids = _token_ids()
    # At rate 0.95 most rows would lose every word; they are kept whole.
    out = _numpy(WordDropout(0.95, seed=2)(ids, training=True))
    assert ((out != 0).sum(1) >= 1).all()
    emptied = ~(((ids != 0) & (out != 0)).any(1))
    assert not emptied.any()
    whole = (out == ids).all(1)
    assert whole[0]  # the one-word review cannot lose its word
    assert whole.sum() > 1  # and other rows were kept whole rather than emptied


def test_identity_at_inference_and_rate_zero():
    ids = _token_ids()
    np.testing.assert_array_equal(_numpy(WordDropout(0.5)(ids)), ids)
    np.testing.assert_array_equal(
        _numpy(WordDropout(0.0)(ids, training=True)), ids
    )


def test_seeded_layers_drop_the_same_words():
    ids = _token_ids()
    a = _numpy(WordDropout(0.3, seed=7)(ids, training=True))
    b = _numpy(WordDropout(0.3, seed=7)(ids, training=True))
    np.testing.assert_array_equal(a, b)


def test_dropped_words_are_masked_downstream():
    """A dropped word is padding for the embedding's mask, so attention
    pooling gives it weight 0."""
    ids = _token_ids()[:8]
    dropped = _numpy(WordDropout(0.5, seed=3)(ids, training=True))
    embedding = keras.layers.Embedding(100, 8, mask_zero=True)
    pooling = AttentionPooling()
    x = embedding(dropped)
    _, weights = pooling(
        x, mask=embedding.compute_mask(dropped), return_attention_scores=True
    )
    weights = _numpy(weights)
    assert (weights[dropped == 0] == 0).all()
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(rate=1.0), "rate"), (dict(rate=-0.1), "rate")],
)
def test_invalid_rate_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WordDropout(**kwargs)


@pytest.mark.parametrize("training", [True, False])
def test_rank_3_input_raises(training):
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        WordDropout(0.2)(np.ones((2, 3, 4), "int32"), training=training)


def _classifier(rate=0.3):
    ids = keras.Input((None,), dtype="int32")
    words = WordDropout(rate, seed=0)(ids)
    x = keras.layers.Embedding(100, 8, mask_zero=True)(words)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(ids, keras.layers.Dense(1, activation="sigmoid")(x))


def test_config_and_keras_file_round_trip(tmp_path):
    layer = WordDropout(0.25, padding_id=0, seed=4)
    restored = config_round_trip(layer)
    assert restored.get_config() == layer.get_config()
    model = _classifier()
    ids = _token_ids()[:16]
    before = model.predict(ids, verbose=0)
    np.testing.assert_allclose(
        keras_round_trip(model, tmp_path).predict(ids, verbose=0),
        before,
        atol=1e-6,
    )


def test_one_training_step_is_finite():
    """Mean pooling over the kept words: no 0/0 even at a high rate."""
    model = _classifier(rate=0.9)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    ids = _token_ids()[:32]
    labels = (np.arange(32) % 2).astype("float32")[:, None]
    history = model.fit(ids, labels, batch_size=32, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
