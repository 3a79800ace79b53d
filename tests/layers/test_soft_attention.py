"""SoftAttentionLSTM and the doubly stochastic penalty under the current
backend: Show, Attend and Tell's step in NumPy, attention that sums to 1
over the regions, padded steps, one step against the unrolled sequence,
round trips, mixed precision and a training step."""

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
from zoo.layers import DoublyStochasticPenalty, SoftAttentionLSTM
from zoo.layers.soft_attention import doubly_stochastic_penalty

B, T, M, L, D, UNITS, ATT = 2, 4, 5, 6, 3, 7, 8


def _inputs():
    return random_array((B, T, M), seed=1), random_array((B, L, D), seed=2)


def _mask():
    mask = np.ones((B, T), bool)
    mask[1, 2:] = False
    return mask


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_soft_attention_lstm(layer, words, regions, mask):
    """The paper's equations, step by step, with the layer's weights."""
    w = {v.path.split("/", 1)[1]: to_numpy(v) for v in layer.weights}
    mean = regions.mean(axis=1)
    h = np.tanh(mean @ w["init_h/kernel"] + w["init_h/bias"])
    c = np.tanh(mean @ w["init_c/kernel"] + w["init_c/bias"])
    keys = (
        regions @ w["attention/key_dense/kernel"]
        + w["attention/key_dense/bias"]
    )
    hs, zs, alphas = [], [], []
    for t in range(words.shape[1]):
        query = h @ w["attention/query_dense/kernel"]
        scores = np.tanh(query[:, None] + keys) @ w["attention/score_vector"]
        alpha = np_softmax(scores)
        z = (alpha[:, :, None] * regions).sum(1)
        z = z * _sigmoid(h @ w["gate/kernel"] + w["gate/bias"])
        gates = (
            words[:, t] @ w["word_gates/kernel"]
            + w["word_gates/bias"]
            + z @ w["context_gates/kernel"]
            + h @ w["recurrent_gates/kernel"]
        )
        i, f, g, o = np.split(gates, 4, axis=-1)
        new_c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        new_h = _sigmoid(o) * np.tanh(new_c)
        keep = mask[:, t][:, None]
        h, c = np.where(keep, new_h, h), np.where(keep, new_c, c)
        hs.append(h)
        zs.append(z)
        alphas.append(alpha * keep)
    return np.stack(hs, 1), np.stack(zs, 1), np.stack(alphas, 1)


def test_the_recurrence_matches_show_attend_and_tell_in_numpy():
    words, regions = _inputs()
    layer = SoftAttentionLSTM(UNITS, ATT)
    h, z, alphas = layer(words, regions, mask=_mask())
    expected = _np_soft_attention_lstm(layer, words, regions, _mask())
    for got, want in zip((h, z, alphas), expected):
        np.testing.assert_allclose(to_numpy(got), want, atol=1e-5)


def test_attention_sums_to_one_over_regions_and_is_zero_at_padding():
    words, regions = _inputs()
    h, _, alphas = SoftAttentionLSTM(UNITS, ATT)(words, regions, mask=_mask())
    alphas = to_numpy(alphas)
    assert alphas.shape == (B, T, L)
    np.testing.assert_allclose(alphas.sum(-1), _mask().astype(float), atol=1e-6)
    assert (alphas[_mask()] > 0).all()  # every region of every real step
    # The state is carried through the padded steps unchanged.
    h = to_numpy(h)
    np.testing.assert_array_equal(h[1, 2], h[1, 1])
    np.testing.assert_array_equal(h[1, 3], h[1, 1])


def test_without_the_gate_the_context_is_the_weighted_mean():
    words, regions = _inputs()
    _, z, alphas = SoftAttentionLSTM(UNITS, ATT, use_gate=False)(words, regions)
    expected = (to_numpy(alphas)[..., None] * regions[:, None]).sum(2)
    np.testing.assert_allclose(to_numpy(z), expected, atol=1e-5)


def test_one_step_at_a_time_equals_the_unrolled_sequence():
    words, regions = _inputs()
    layer = SoftAttentionLSTM(UNITS, ATT)
    h_all, z_all, alphas_all = (to_numpy(x) for x in layer(words, regions))
    state = layer.initial_state(regions)
    keys = layer.compute_keys(regions)
    for t in range(T):
        h, z, alpha, state = layer.step(
            keras.ops.convert_to_tensor(words[:, t]),
            state,
            keras.ops.convert_to_tensor(regions),
            keys,
        )
        np.testing.assert_allclose(to_numpy(h), h_all[:, t], atol=1e-5)
        np.testing.assert_allclose(to_numpy(z), z_all[:, t], atol=1e-5)
        np.testing.assert_allclose(to_numpy(alpha), alphas_all[:, t], atol=1e-6)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="a TensorFlow trace on unknown sizes (a SavedModel or ONNX export)",
)
def test_a_tensorflow_function_of_unknown_lengths_gives_the_eager_outputs():
    import tensorflow as tf

    words, regions = _inputs()
    layer = SoftAttentionLSTM(UNITS, ATT)
    eager = layer(words, regions, mask=_mask())
    traced = tf.function(
        lambda w, r, m: layer(w, r, mask=m),
        input_signature=[
            tf.TensorSpec((None, None, M)),
            tf.TensorSpec((None, None, D)),
            tf.TensorSpec((None, None), tf.bool),
        ],
    )(words, regions, _mask())
    for got, want in zip(traced, eager):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=1e-6)


def test_the_penalty_is_its_formula():
    alphas = np_softmax(random_array((B, T, L), seed=3) * 3)
    mask = _mask()
    expected = ((1.0 - (alphas * mask[..., None]).sum(1)) ** 2).sum(-1)
    np.testing.assert_allclose(
        to_numpy(doubly_stochastic_penalty(alphas, mask)), expected, rtol=1e-5
    )
    layer = DoublyStochasticPenalty(weight=0.5)
    out = layer(alphas, mask=mask, training=True)
    np.testing.assert_array_equal(to_numpy(out), alphas)
    (loss,) = layer.losses
    np.testing.assert_allclose(
        float(to_numpy(loss)), 0.5 / L * expected.mean(), rtol=1e-5
    )
    quiet = DoublyStochasticPenalty(weight=0.5)
    quiet(alphas, mask=mask, training=False)
    assert not quiet.losses  # evaluate's loss is the cross-entropy alone
    # Looking at every region exactly once over the caption costs nothing.
    once = np.eye(L, dtype="float32")[None]
    assert float(to_numpy(doubly_stochastic_penalty(once))[0]) == 0.0


def test_a_negative_penalty_weight_is_refused():
    with pytest.raises(ValueError, match="weight must be >= 0"):
        DoublyStochasticPenalty(weight=-1.0)


def _model(dtype=None):
    words = keras.Input((T, M))
    regions = keras.Input((L, D))
    mask = keras.Input((T,), dtype="bool")
    h, z, alphas = SoftAttentionLSTM(UNITS, ATT, dtype=dtype, name="lstm")(
        words, regions, mask=mask
    )
    alphas = DoublyStochasticPenalty(1.0, dtype=dtype, name="penalty")(
        alphas, mask=mask
    )
    out = keras.layers.Dense(3, dtype=dtype)(
        keras.ops.concatenate(
            [h, keras.ops.cast(z, h.dtype), keras.ops.cast(alphas, h.dtype)], -1
        )
    )
    return keras.Model([words, regions, mask], out)


def test_config_and_keras_round_trips(tmp_path):
    layer = SoftAttentionLSTM(UNITS, ATT, use_gate=False)
    assert config_round_trip(layer).get_config() == layer.get_config()
    model = _model()
    inputs = [*_inputs(), _mask()]
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(model.predict_on_batch(inputs)),
        to_numpy(loaded.predict_on_batch(inputs)),
        atol=1e-6,
    )


def test_mixed_bfloat16():
    words, regions = _inputs()
    layer = SoftAttentionLSTM(UNITS, ATT, dtype="mixed_bfloat16")
    h, z, alphas = layer(words, regions)
    assert keras.backend.standardize_dtype(h.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(alphas.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(alphas).sum(-1), 1.0, atol=1e-2)


def test_a_training_step_lowers_the_loss_with_the_penalty_in_it():
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    inputs = [*_inputs(), _mask()]
    target = random_array((B, T, 3), seed=5)
    mse = float(
        np.mean((to_numpy(model.predict_on_batch(inputs)) - target) ** 2)
    )
    first = float(model.train_on_batch(inputs, target))
    assert first > mse  # the penalty is part of the training loss
    losses = [float(model.train_on_batch(inputs, target)) for _ in range(5)]
    assert losses[-1] < first
    assert np.isfinite(losses).all()


def test_the_forget_gate_starts_open_and_the_gates_quantise():
    model = _model()
    layer = model.get_layer("lstm")
    bias = to_numpy(layer.word_gates.bias)
    np.testing.assert_array_equal(bias[UNITS : 2 * UNITS], 1.0)
    assert not bias[:UNITS].any() and not bias[2 * UNITS :].any()
    # Every weight matrix is a Dense layer: Keras' int8 (weight-only)
    # quantisation applies to all of them.
    inputs = [*_inputs(), _mask()]
    before = to_numpy(model.predict_on_batch(inputs))
    model.quantize(
        "int8",
        config=keras.quantizers.Int8QuantizationConfig(
            activation_quantizer=None
        ),
    )
    assert layer.recurrent_gates.quantization_mode == "int8"
    after = to_numpy(model.predict_on_batch(inputs))
    assert 0 < np.abs(after - before).max() < 0.05
