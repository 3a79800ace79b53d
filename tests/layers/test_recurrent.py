"""PackedBidirectional under the current backend: a NumPy GRU that skips
masked steps, keras.layers.Bidirectional with the same weights (both
strategies, GRU and LSTM, every merge mode, packed RNNs run in chunks),
masking, gradients, save/load, a training step and mixed precision."""

import keras
import numpy as np
import pytest

from tests.helpers import (
    config_round_trip,
    keras_round_trip,
    random_array,
    to_numpy,
)
from zoo.layers import PackedBidirectional, recurrent

ATOL = 1e-5
BATCH, SEQ, DIM, UNITS = 5, 7, 4, 3
STRATEGIES = ("packed", "masked")


def _mask():
    mask = np.ones((BATCH, SEQ), bool)
    mask[1, 4:] = False  # trailing padding
    mask[2, [0, 3, 5]] = False  # holes, as WordDropout leaves them
    mask[3, :] = False  # no real token
    mask[4, : SEQ - 1] = False  # one token, at the end
    return mask


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_gru_skipping(x, mask, kernel, recurrent_kernel, bias):
    """Keras' GRU (reset_after=True, gates z, r, h) over the real steps of
    each row; a masked step keeps the state. Returns (batch, seq, units)."""
    units = recurrent_kernel.shape[0]
    outputs = np.zeros(x.shape[:2] + (units,))
    for b in range(x.shape[0]):
        h = np.zeros(units)
        for t in range(x.shape[1]):
            if not mask[b, t]:
                continue
            x_proj = x[b, t] @ kernel + bias[0]
            h_proj = h @ recurrent_kernel + bias[1]
            z = _sigmoid(x_proj[:units] + h_proj[:units])
            r = _sigmoid(x_proj[units : 2 * units] + h_proj[units : 2 * units])
            candidate = np.tanh(x_proj[2 * units :] + r * h_proj[2 * units :])
            h = z * h + (1 - z) * candidate
            outputs[b, t] = h
    return outputs


def _copy_weights(ours, keras_bidirectional):
    ours.forward_layer.set_weights(
        keras_bidirectional.forward_layer.get_weights()
    )
    ours.backward_layer.set_weights(
        keras_bidirectional.backward_layer.get_weights()
    )


def _random_weights(layer, seed=0):
    # Biases start at zero; random ones make every weight count.
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [
            rng.normal(scale=0.5, size=w.shape).astype("float32")
            for w in layer.get_weights()
        ]
    )


# ---- Values ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_matches_a_numpy_gru_that_skips_masked_steps(strategy):
    x, mask = random_array((BATCH, SEQ, DIM)), _mask()
    layer = PackedBidirectional(
        keras.layers.GRU(UNITS, return_sequences=True), strategy=strategy
    )
    layer.build(x.shape)
    _random_weights(layer)
    out = to_numpy(layer(x, mask=mask))
    fwd = [to_numpy(w) for w in layer.forward_layer.weights]
    bwd = [to_numpy(w) for w in layer.backward_layer.weights]
    expected_fwd = _np_gru_skipping(x, mask, *fwd)
    expected_bwd = _np_gru_skipping(x[:, ::-1], mask[:, ::-1], *bwd)[:, ::-1]
    np.testing.assert_allclose(out[..., :UNITS], expected_fwd, atol=ATOL)
    np.testing.assert_allclose(out[..., UNITS:], expected_bwd, atol=ATOL)
    assert np.all(out[~mask] == 0.0)  # padding reads zeros


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("return_sequences", (True, False))
@pytest.mark.parametrize("cell", ("GRU", "LSTM"))
def test_matches_keras_bidirectional_with_the_same_weights(
    cell, return_sequences, strategy
):
    x, mask = random_array((BATCH, SEQ, DIM)), _mask()
    rnn = getattr(keras.layers, cell)
    reference = keras.layers.Bidirectional(
        rnn(UNITS, return_sequences=return_sequences)
    )
    ours = PackedBidirectional(
        rnn(UNITS, return_sequences=return_sequences), strategy=strategy
    )
    reference.build(x.shape)
    _random_weights(reference)
    ours.build(x.shape)
    _copy_weights(ours, reference)
    expected = to_numpy(reference(x, mask=mask))
    got = to_numpy(ours(x, mask=mask))
    if not return_sequences:
        # A row with no real token: Keras returns its initial state, 0.
        assert np.all(got[3] == 0.0)
    np.testing.assert_allclose(got, expected, atol=ATOL)
    # No mask: every step is real.
    np.testing.assert_allclose(
        to_numpy(ours(x)), to_numpy(reference(x)), atol=ATOL
    )


@pytest.mark.parametrize("merge_mode", ("concat", "sum", "mul", "ave"))
def test_merge_modes_match_keras(merge_mode):
    x, mask = random_array((BATCH, SEQ, DIM)), _mask()
    reference = keras.layers.Bidirectional(
        keras.layers.GRU(UNITS, return_sequences=True), merge_mode=merge_mode
    )
    ours = PackedBidirectional(
        keras.layers.GRU(UNITS, return_sequences=True),
        merge_mode=merge_mode,
        strategy="packed",
    )
    reference.build(x.shape)
    _random_weights(reference)
    ours.build(x.shape)
    _copy_weights(ours, reference)
    got = to_numpy(ours(x, mask=mask))
    assert got.shape == tuple(ours.compute_output_shape(x.shape))
    np.testing.assert_allclose(
        got[mask], to_numpy(reference(x, mask=mask))[mask], atol=ATOL
    )


def test_auto_strategy_packs_only_under_torch():
    layer = PackedBidirectional(keras.layers.GRU(UNITS))
    assert layer._packs() == (keras.backend.backend() == "torch")
    assert PackedBidirectional(
        keras.layers.GRU(UNITS), strategy="packed"
    )._packs()
    assert not PackedBidirectional(
        keras.layers.GRU(UNITS), strategy="masked"
    )._packs()


def test_inside_an_onnx_export_the_masked_rnns_run(monkeypatch):
    monkeypatch.setattr(recurrent, "exporting_onnx", lambda: True)
    assert not PackedBidirectional(
        keras.layers.GRU(UNITS), strategy="packed"
    )._packs()


@pytest.fixture
def chunked(monkeypatch):
    # 3-step calls on every backend, so 7 steps run as 3 + 3 + 1 (the
    # layer chunks only under PyTorch; the computation is the same).
    monkeypatch.setattr(recurrent, "STEPS_PER_CALL", 3)
    monkeypatch.setattr(PackedBidirectional, "_chunks", lambda self, rnn: True)


@pytest.mark.parametrize("return_sequences", (True, False))
@pytest.mark.parametrize("cell", ("GRU", "LSTM"))
def test_packed_rnns_run_in_chunks_match_keras(chunked, cell, return_sequences):
    test_matches_keras_bidirectional_with_the_same_weights(
        cell, return_sequences, "packed"
    )


def test_packed_rnns_chunk_only_under_torch_and_without_dropout():
    torch = keras.backend.backend() == "torch"
    layer = PackedBidirectional(keras.layers.GRU(UNITS))
    assert layer._chunks(layer.forward_layer) == torch
    for dropout in ({"dropout": 0.1}, {"recurrent_dropout": 0.1}):
        # Dropout masks are drawn per call: chunks would change them.
        layer = PackedBidirectional(keras.layers.LSTM(UNITS, **dropout))
        assert not layer._chunks(layer.forward_layer)


# ---- Masking -----------------------------------------------------------------


def test_padding_values_do_not_reach_real_tokens_and_the_mask_passes_on():
    token_ids = np.array([[3, 4, 0, 5, 0, 0], [6, 0, 0, 0, 0, 0]], "int32")
    embedding = keras.layers.Embedding(10, DIM, mask_zero=True)
    rnn = PackedBidirectional(keras.layers.GRU(UNITS, return_sequences=True))
    x = embedding(token_ids)
    out = to_numpy(rnn(x))
    mask = token_ids != 0
    noisy = np.where(mask[..., None], to_numpy(x), 100.0).astype("float32")
    np.testing.assert_allclose(to_numpy(rnn(noisy, mask=mask)), out, atol=ATOL)
    # Dropping the padding between tokens gives the same outputs.
    compact = to_numpy(rnn(to_numpy(x)[:1, [0, 1, 3]]))
    np.testing.assert_allclose(compact[0], out[0, [0, 1, 3]], atol=ATOL)
    np.testing.assert_array_equal(
        to_numpy(rnn.compute_mask(x, mask)).astype(bool), mask
    )
    last = PackedBidirectional(keras.layers.GRU(UNITS))
    assert last.compute_mask(x, mask) is None


def test_gradients_of_chunked_packed_rnns_match_keras(chunked):
    test_gradients_match_keras_bidirectional("packed")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gradients_match_keras_bidirectional(strategy):
    # A training step of either strategy moves the weights as Keras' would.
    token_ids = np.random.default_rng(1).integers(1, 20, (BATCH, SEQ))
    mask = _mask()
    mask[3, 0] = True  # a masked mean of no token would be 0/0
    token_ids[~mask] = 0
    labels = np.arange(BATCH, dtype="float32")[:, None] % 2

    def model(wrapper):
        keras.utils.set_random_seed(7)
        inputs = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(20, DIM, mask_zero=True)(inputs)
        x = wrapper(keras.layers.GRU(UNITS, return_sequences=True))(x)
        x = keras.layers.GlobalAveragePooling1D()(x)
        out = keras.layers.Dense(1, activation="sigmoid")(x)
        m = keras.Model(inputs, out)
        m.compile(keras.optimizers.SGD(1.0), "binary_crossentropy")
        return m

    reference = model(keras.layers.Bidirectional)
    ours = model(lambda rnn: PackedBidirectional(rnn, strategy=strategy))
    ours.set_weights(reference.get_weights())
    before = [to_numpy(w) for w in ours.weights]
    loss_ours = float(ours.train_on_batch(token_ids.astype("int32"), labels))
    loss_ref = float(
        reference.train_on_batch(token_ids.astype("int32"), labels)
    )
    assert np.isfinite(loss_ours)
    np.testing.assert_allclose(loss_ours, loss_ref, atol=ATOL)
    for w_ours, w_ref in zip(ours.weights, reference.weights):
        np.testing.assert_allclose(to_numpy(w_ours), to_numpy(w_ref), atol=1e-4)
    assert any(
        not np.allclose(to_numpy(w), b) for w, b in zip(ours.weights, before)
    )


# ---- Serialization, precision, errors ----------------------------------------


def test_config_and_keras_file_round_trip(tmp_path):
    layer = PackedBidirectional(
        keras.layers.LSTM(UNITS, return_sequences=True, dropout=0.1),
        merge_mode="sum",
        strategy="packed",
    )
    again = config_round_trip(layer)
    assert again.get_config() == layer.get_config()
    assert again.strategy == "packed" and again.merge_mode == "sum"
    assert isinstance(again.forward_layer, keras.layers.LSTM)
    assert again.forward_layer.dropout == 0.1

    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, DIM, mask_zero=True)(inputs)
    x = PackedBidirectional(keras.layers.GRU(UNITS))(x)
    model = keras.Model(inputs, x)
    ids = np.array([[1, 2, 3, 0], [4, 0, 0, 0]], "int32")
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded(ids)), to_numpy(model(ids)), atol=ATOL
    )


def test_mixed_bfloat16_runs_close_to_float32():
    x, mask = random_array((BATCH, SEQ, DIM)), _mask()
    full = PackedBidirectional(keras.layers.GRU(UNITS, return_sequences=True))
    expected = to_numpy(full(x, mask=mask))
    keras.config.set_dtype_policy("mixed_bfloat16")
    half = PackedBidirectional(keras.layers.GRU(UNITS, return_sequences=True))
    half.build(x.shape)
    half.set_weights(full.get_weights())
    out = half(x, mask=mask)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    out = to_numpy(out)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, expected, atol=0.05)


def test_clear_errors():
    with pytest.raises(ValueError, match="keras.layers.RNN"):
        PackedBidirectional(keras.layers.Dense(3))
    with pytest.raises(ValueError, match="go_backwards"):
        PackedBidirectional(keras.layers.GRU(3, go_backwards=True))
    with pytest.raises(ValueError, match="merge_mode"):
        PackedBidirectional(keras.layers.GRU(3), merge_mode="max")
    with pytest.raises(ValueError, match="strategy"):
        PackedBidirectional(keras.layers.GRU(3), strategy="fast")
    with pytest.raises(ValueError, match=r"\(batch, seq, features\)"):
        PackedBidirectional(keras.layers.GRU(3))(random_array((2, 4)))
