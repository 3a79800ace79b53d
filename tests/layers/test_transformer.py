"""TransformerEncoder and TransformerDecoder, under the current backend."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from tests.helpers import (
    config_round_trip,
    keras_round_trip,
    np_layer_norm,
    np_multi_head_attention,
    random_array,
    to_numpy,
)
from zoo.layers import (
    PositionalEmbedding,
    TransformerDecoder,
    TransformerEncoder,
)

ATOL = 1e-5
HIDDEN, HEADS, INTERMEDIATE = 16, 4, 32


def _weights_by_name(layer):
    return {w.path.split("/", 1)[1]: to_numpy(w) for w in layer.weights}


def _copy_by_name(source, target):
    """Copies weights between layers whose sub-layers have the same names."""
    values = _weights_by_name(source)
    for weight in target.weights:
        weight.assign(values[weight.path.split("/", 1)[1]])


# ---- NumPy reference of the course's block -------------------------------------


def _np_encoder_block(x, layer, norm_first, mask=None):
    w = _weights_by_name(layer)
    attention = [
        w[f"self_attention_layer/{name}/{part}"]
        for name in ("query", "key", "value", "attention_output")
        for part in ("kernel", "bias")
    ]
    eps = layer.layer_norm_epsilon
    ln1 = lambda h: np_layer_norm(
        h,
        w["self_attention_layer_norm/gamma"],
        w["self_attention_layer_norm/beta"],
        eps,
    )
    ln2 = lambda h: np_layer_norm(
        h,
        w["feedforward_layer_norm/gamma"],
        w["feedforward_layer_norm/beta"],
        eps,
    )
    mlp = lambda h: (
        np.maximum(
            h @ w["feedforward_intermediate_dense/kernel"]
            + w["feedforward_intermediate_dense/bias"],
            0,
        )
        @ w["feedforward_output_dense/kernel"]
        + w["feedforward_output_dense/bias"]
    )
    mha = lambda h: np_multi_head_attention(h, h, attention, HEADS, mask)
    if norm_first:  # X = X + MHA(LN(X)); X = X + MLP(LN(X))
        x = x + mha(ln1(x))
        return x + mlp(ln2(x))
    x = ln1(x + mha(x))  # X = LN(X + MHA(X))
    return ln2(x + mlp(x))  # X = LN(X + MLP(X))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_encoder_matches_numpy_block(norm_first):
    layer = TransformerEncoder(HEADS, INTERMEDIATE, norm_first=norm_first)
    x = random_array((2, 6, HIDDEN), 0)
    padding = np.array([[True] * 6, [True] * 4 + [False] * 2])
    out = to_numpy(layer(x, padding_mask=padding))
    expected = _np_encoder_block(x, layer, norm_first, mask=padding[:, None, :])
    np.testing.assert_allclose(out, expected, atol=1e-4)


# ---- keras-hub equivalence ------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_encoder_equals_keras_hub_with_copied_weights(norm_first):
    ours = TransformerEncoder(
        HEADS, INTERMEDIATE, normalize_first=norm_first, activation="gelu"
    )
    theirs = keras_hub.layers.TransformerEncoder(
        INTERMEDIATE, HEADS, normalize_first=norm_first, activation="gelu"
    )
    x = random_array((2, 7, HIDDEN), 0)
    padding = np.array([[True] * 7, [True] * 5 + [False] * 2])
    ours(x)
    theirs(x)
    _copy_by_name(theirs, ours)
    np.testing.assert_allclose(
        to_numpy(ours(x, padding_mask=padding)),
        to_numpy(theirs(x, padding_mask=padding)),
        atol=ATOL,
    )


@pytest.mark.parametrize(
    "cross", [False, True], ids=["decoder_only", "with_cross_attention"]
)
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_equals_keras_hub_with_copied_weights(cross, norm_first):
    ours = TransformerDecoder(HEADS, INTERMEDIATE, normalize_first=norm_first)
    theirs = keras_hub.layers.TransformerDecoder(
        INTERMEDIATE, HEADS, normalize_first=norm_first
    )
    y, enc = random_array((2, 6, HIDDEN), 0), random_array((2, 8, HIDDEN), 1)
    masks = {}
    args = (y,)
    if cross:
        args = (y, enc)
        masks = {
            "encoder_padding_mask": np.array(
                [[True] * 8, [True] * 5 + [False] * 3]
            )
        }
    ours(*args)
    theirs(*args)
    _copy_by_name(theirs, ours)
    masks["decoder_padding_mask"] = np.array(
        [[True] * 6, [True] * 4 + [False] * 2]
    )
    np.testing.assert_allclose(
        to_numpy(ours(*args, **masks)),
        to_numpy(theirs(*args, **masks)),
        atol=ATOL,
    )


# ---- masking and causality -------------------------------------------------------


def test_encoder_padding_never_changes_real_positions():
    """Through a Keras mask from PositionalEmbedding: appending padding tokens
    leaves every real position's output as it was."""
    embed = PositionalEmbedding(50, 16, HIDDEN)
    encoder = TransformerEncoder(HEADS, INTERMEDIATE)
    short = np.array([[5, 9, 3, 7]])
    padded = np.array([[5, 9, 3, 7, 0, 0, 0]])
    out_short = to_numpy(encoder(embed(short)))
    out_padded = to_numpy(encoder(embed(padded)))
    np.testing.assert_allclose(out_padded[:, :4], out_short, atol=ATOL)
    assert np.isfinite(out_padded).all()


def test_explicit_padding_mask_overrides_nothing_else():
    encoder = TransformerEncoder(HEADS, INTERMEDIATE)
    x = random_array((1, 6, HIDDEN), 0)
    padding = np.array([[True] * 4 + [False] * 2])
    changed = x.copy()
    changed[:, 4:] = 100.0  # garbage in the padded slots
    np.testing.assert_allclose(
        to_numpy(encoder(x, padding_mask=padding))[:, :4],
        to_numpy(encoder(changed, padding_mask=padding))[:, :4],
        atol=ATOL,
    )


def test_decoder_output_at_t_ignores_later_steps():
    decoder = TransformerDecoder(HEADS, INTERMEDIATE)
    y, enc = random_array((2, 6, HIDDEN), 0), random_array((2, 5, HIDDEN), 1)
    changed = y.copy()
    changed[:, 3:] = random_array((2, 3, HIDDEN), 2)
    before, after = to_numpy(decoder(y, enc)), to_numpy(decoder(changed, enc))
    np.testing.assert_allclose(before[:, :3], after[:, :3], atol=ATOL)
    assert np.abs(before[:, 3:] - after[:, 3:]).max() > 1e-3


def test_decoder_encoder_padding_never_changes_outputs():
    decoder = TransformerDecoder(HEADS, INTERMEDIATE)
    y, enc = random_array((1, 4, HIDDEN), 0), random_array((1, 5, HIDDEN), 1)
    padded_enc = np.concatenate([enc, random_array((1, 3, HIDDEN), 2)], axis=1)
    mask = np.array([[True] * 5 + [False] * 3])
    np.testing.assert_allclose(
        to_numpy(decoder(y, padded_enc, encoder_padding_mask=mask)),
        to_numpy(decoder(y, enc)),
        atol=ATOL,
    )


# ---- cached decoding ---------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_only_cached_decoding_equals_full_pass(norm_first):
    decoder = TransformerDecoder(HEADS, INTERMEDIATE, norm_first=norm_first)
    y = random_array((2, 6, HIDDEN), 0)
    full = to_numpy(decoder(y))
    cache = ops.zeros((2, 2, 6, HEADS, HIDDEN // HEADS))
    steps = []
    for t in range(6):
        out, cache = decoder(
            y[:, t : t + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=t,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=ATOL)


@pytest.mark.parametrize(
    "precompute", [True, False], ids=["compute_cache", "index_0"]
)
def test_encoder_decoder_cached_decoding_equals_full_pass(precompute):
    decoder = TransformerDecoder(HEADS, INTERMEDIATE)
    y, enc = random_array((2, 5, HIDDEN), 0), random_array((2, 7, HIDDEN), 1)
    enc_mask = np.array([[True] * 7, [True] * 4 + [False] * 3])
    full = to_numpy(decoder(y, enc, encoder_padding_mask=enc_mask))
    self_cache = ops.zeros((2, 2, 5, HEADS, HIDDEN // HEADS))
    if precompute:
        cross_cache, cross_index = (
            decoder.compute_cross_attention_cache(enc),
            None,
        )
    else:
        cross_cache, cross_index = (
            ops.zeros((2, 2, 7, HEADS, HIDDEN // HEADS)),
            0,
        )
    steps = []
    for t in range(5):
        out, self_cache, cross_cache = decoder(
            y[:, t : t + 1],
            enc if t == 0 else None,
            encoder_padding_mask=enc_mask,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=t,
            cross_attention_cache=cross_cache,
            cross_attention_cache_update_index=cross_index if t == 0 else None,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=ATOL)


# ---- scores, serialization, training, dtypes ---------------------------------------


def test_encoder_returns_attention_scores_for_plots():
    encoder = TransformerEncoder(HEADS, INTERMEDIATE)
    x = random_array((2, 5, HIDDEN), 0)
    padding = np.array([[True] * 5, [True] * 3 + [False] * 2])
    out, scores = encoder(x, padding_mask=padding, return_attention_scores=True)
    scores = to_numpy(scores)
    assert scores.shape == (2, HEADS, 5, 5)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
    assert np.all(scores[1, :, :, 3:] == 0)  # padded keys get no weight
    np.testing.assert_allclose(
        to_numpy(out), to_numpy(encoder(x, padding_mask=padding)), atol=ATOL
    )


def test_decoder_returns_self_and_cross_scores():
    decoder = TransformerDecoder(HEADS, INTERMEDIATE)
    out, scores = decoder(
        random_array((2, 4, HIDDEN), 0),
        random_array((2, 6, HIDDEN), 1),
        return_attention_scores=True,
    )
    assert tuple(scores["self_attention"].shape) == (2, HEADS, 4, 4)
    assert tuple(scores["cross_attention"].shape) == (2, HEADS, 4, 6)
    assert np.all(np.triu(to_numpy(scores["self_attention"])[0, 0], k=1) == 0)


def _seq2seq_model():
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    encoded = TransformerEncoder(HEADS, INTERMEDIATE)(
        PositionalEmbedding(30, 12, HIDDEN)(source)
    )
    decoded = TransformerDecoder(HEADS, INTERMEDIATE, norm_first=True)(
        PositionalEmbedding(30, 12, HIDDEN, positions="sinusoidal")(target),
        encoded,
    )
    return keras.Model([source, target], keras.layers.Dense(30)(decoded))


def _seq2seq_batch():
    source = np.array([[4, 8, 2, 0], [5, 1, 7, 3]])
    target = np.array([[1, 6, 9, 2, 0], [1, 3, 3, 0, 0]])
    return source, target


def test_seq2seq_model_keras_round_trip(tmp_path):
    model = _seq2seq_model()
    inputs = _seq2seq_batch()
    expected = model.predict(inputs, verbose=0)
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        loaded.predict(inputs, verbose=0), expected, atol=1e-6
    )


def test_int8_blocks_stay_close_save_and_decode_with_the_cache(tmp_path):
    """`quantize_matrices` on Transformer blocks (what the int8 translators
    and captioners store), in a tiny seq2seq backbone: outputs near the
    float ones, every int8 layer int8 again after a `.keras` round trip with
    the same outputs, and the cached decoding path (`cross_attention` runs
    it) the same."""
    from zoo.models.quantization import quantize_matrices
    from zoo.models.seq2seq import TransformerSeq2SeqBackbone

    backbone = TransformerSeq2SeqBackbone(
        30,
        num_layers=1,
        num_heads=2,
        hidden_dim=HIDDEN,
        intermediate_dim=INTERMEDIATE,
        encoder_sequence_length=6,
        decoder_sequence_length=6,
    )
    source, target = _seq2seq_batch()
    inputs = {
        "encoder_token_ids": source,
        "encoder_padding_mask": source > 0,
        "decoder_token_ids": target,
        "decoder_padding_mask": target > 0,
    }
    output = lambda model: to_numpy(model(inputs)["decoder_sequence_output"])
    before = output(backbone)
    count = quantize_matrices(backbone)
    after = output(backbone)
    assert 0 < np.abs(after - before).max() < 0.1 * np.abs(before).max()
    loaded = keras_round_trip(backbone, tmp_path)
    int8 = [
        layer
        for layer in loaded._flatten_layers()
        if layer.quantization_mode == "int8"
    ]
    assert len(int8) == count
    np.testing.assert_allclose(output(loaded), after, atol=1e-5)
    weights = [
        to_numpy(model.cross_attention(source, source > 0, target[:, :4]))
        for model in (backbone, loaded)
    ]
    np.testing.assert_allclose(weights[1], weights[0], atol=1e-5)


@pytest.mark.parametrize(
    "layer_class", [TransformerEncoder, TransformerDecoder]
)
def test_block_config_round_trip(layer_class):
    layer = layer_class(
        num_heads=2,
        intermediate_dim=24,
        dropout=0.1,
        activation="gelu",
        norm_first=True,
        layer_norm_epsilon=1e-6,
        kernel_initializer="he_normal",
        name="block",
        attention_dropout=0.0,
    )
    assert config_round_trip(layer).get_config() == layer.get_config()
    assert layer.get_config()["attention_dropout"] == 0.0
    # A config saved before attention_dropout existed: the same as dropout.
    config = layer.get_config()
    del config["attention_dropout"]
    assert layer_class.from_config(config).attention_dropout == 0.1


def test_one_training_step_on_seq2seq():
    model = _seq2seq_model()
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    source, target = _seq2seq_batch()
    before = [to_numpy(w) for w in model.trainable_weights]
    history = model.fit((source, target), target, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in model.trainable_weights]
    changed = sum(np.abs(a - b).max() > 0 for a, b in zip(before, after))
    assert changed == len(before)  # every weight gets a gradient


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_blocks_run_under_mixed_precision(policy):
    keras.config.set_dtype_policy(policy)
    model = _seq2seq_model()
    out = model(_seq2seq_batch())
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert np.isfinite(to_numpy(out)).all()


def test_dropout_is_active_only_in_training():
    encoder = TransformerEncoder(HEADS, INTERMEDIATE, dropout=0.5)
    x = random_array((2, 5, HIDDEN), 0)
    np.testing.assert_allclose(to_numpy(encoder(x)), to_numpy(encoder(x)))
    assert (
        np.abs(to_numpy(encoder(x, training=True)) - to_numpy(encoder(x))).max()
        > 1e-3
    )


@pytest.mark.parametrize(
    "layer_class", [TransformerEncoder, TransformerDecoder]
)
def test_attention_dropout_zero_trains_on_the_fused_kernel(
    layer_class, monkeypatch
):
    """Attention-weight dropout needs the explicit softmax; without it a
    training call takes the fused kernel, and the residual dropout stays."""
    from zoo.layers import attention_kernels as kernels

    paths = []
    for name in ("_fused_attention", "_explicit_attention"):
        original = getattr(kernels, name)
        monkeypatch.setattr(
            kernels,
            name,
            lambda *a, _f=original, _n=name, **k: (
                paths.append(_n),
                _f(*a, **k),
            )[1],
        )
    x = random_array((2, 5, HIDDEN), 0)
    fused = layer_class(HEADS, INTERMEDIATE, dropout=0.5, attention_dropout=0.0)
    assert fused.attention_dropout == 0.0 and fused.dropout == 0.5
    train_a, train_b = (
        to_numpy(fused(x, training=True)),
        to_numpy(fused(x, training=True)),
    )
    assert paths == ["_fused_attention"] * 2
    assert np.abs(train_a - train_b).max() > 1e-3  # residual dropout
    paths.clear()
    layer_class(HEADS, INTERMEDIATE, dropout=0.5)(x, training=True)
    assert paths == [
        "_explicit_attention"
    ]  # default: dropout on the weights too


def test_clear_errors():
    with pytest.raises(
        ValueError, match=r"attention_dropout must be in \[0, 1\); got 1.0"
    ):
        TransformerEncoder(2, 8, attention_dropout=1.0)
    with pytest.raises(
        ValueError, match=r"dropout must be in \[0, 1\); got -0.1"
    ):
        TransformerDecoder(2, 8, dropout=-0.1)
    with pytest.raises(ValueError, match="multiple of num_heads"):
        TransformerEncoder(3, 8)(random_array((1, 4, 16)))
    with pytest.raises(ValueError, match=r"\(batch, seq, hidden_dim\)"):
        TransformerEncoder(2, 8)(random_array((4, 16)))
    decoder = TransformerDecoder(2, 8)
    decoder(random_array((1, 3, 16)), random_array((1, 4, 16)))
    with pytest.raises(ValueError, match="encoder_sequence"):
        decoder(random_array((1, 3, 16)))
    decoder_only = TransformerDecoder(2, 8)
    decoder_only(random_array((1, 3, 16)))
    with pytest.raises(ValueError, match="without cross-attention"):
        decoder_only(random_array((1, 3, 16)), random_array((1, 4, 16)))


def test_padding_mask_of_the_wrong_length_is_a_clear_error():
    """A mask with one entry too few would otherwise fail deep inside the
    attention with a backend broadcasting message."""
    short = np.ones((1, 3), bool)
    with pytest.raises(
        ValueError,
        match="3 entries on its k_len axis but the attention has k_len=4",
    ):
        TransformerEncoder(2, 8)(random_array((1, 4, 16)), padding_mask=short)
    decoder = TransformerDecoder(2, 8)
    target, source = random_array((1, 4, 16)), random_array((1, 5, 16))
    decoder(target, source)
    with pytest.raises(
        ValueError,
        match="3 entries on its k_len axis but the attention has k_len=4",
    ):
        decoder(target, source, decoder_padding_mask=short)
    with pytest.raises(
        ValueError,
        match="3 entries on its k_len axis but the attention has k_len=5",
    ):
        decoder(target, source, encoder_padding_mask=short)
    # With a cache the keys are the cache's positions, not the new token's.
    cache = ops.zeros((1, 2, 6, 2, 8))
    with pytest.raises(
        ValueError,
        match="3 entries on its k_len axis but the attention has k_len=6",
    ):
        TransformerDecoder(2, 8)(
            random_array((1, 1, 16)),
            decoder_padding_mask=short,
            self_attention_cache=cache,
            self_attention_cache_update_index=0,
        )


@pytest.mark.parametrize("block", [TransformerEncoder, TransformerDecoder])
def test_norm_first_is_an_alias_of_keras_hubs_normalize_first(block):
    layer = block(HEADS, INTERMEDIATE, normalize_first=True)
    config = layer.get_config()
    assert config["normalize_first"] is True and "norm_first" not in config
    assert layer.norm_first is True
    # A config written with the old name (the shipped files) still loads.
    old = dict(config)
    old["norm_first"] = old.pop("normalize_first")
    assert block.from_config(old).normalize_first is True
    assert block(HEADS, INTERMEDIATE, norm_first=True).normalize_first
    with pytest.raises(ValueError, match="disagree"):
        block(HEADS, INTERMEDIATE, normalize_first=True, norm_first=False)
