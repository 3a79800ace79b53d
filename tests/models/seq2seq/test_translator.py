"""zoo.models.seq2seq under the current backend: the preprocessor, both
backbones (padding, causality, cross-attention over real source tokens,
cached decoding against the full pass), generation (greedy with and
without the cache, beam search), training on raw pairs, saving, the
label-smoothed loss, mixed precision, presets and the errors."""

import warnings

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import keras_round_trip, np_softmax, to_numpy
from zoo.data.multi30k import make_synthetic_pairs
from zoo.data.tokenizers import SubwordTokenizer, train_subword_tokenizer
from zoo.models import (
    RNNSeq2SeqBackbone,
    SparseCategoricalCrossentropyWithSmoothing,
    TransformerSeq2SeqBackbone,
    TranslationPreprocessor,
    Translator,
)
from zoo.models.generation import BeamSampler, get_sampler
from zoo.models.quantization import quantize_matrices
from zoo.saving import load_model

GERMAN, ENGLISH = make_synthetic_pairs(300, seed=0)
KINDS = ("transformer", "rnn")
_PROTO = []


def tokenizer():
    """A fresh tokenizer per call (the SentencePiece model is trained once):
    the suite clears the Keras session between tests, which frees the
    TensorFlow resource an earlier tokenizer held."""
    if not _PROTO:
        _PROTO.append(train_subword_tokenizer(GERMAN + ENGLISH, 250).proto)
    return SubwordTokenizer(proto=_PROTO[0])


def backbone(kind, vocabulary_size=100, dropout=0.0, **kwargs):
    if kind == "transformer":
        return TransformerSeq2SeqBackbone(
            vocabulary_size,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            encoder_sequence_length=32,
            decoder_sequence_length=32,
            dropout=dropout,
            **kwargs,
        )
    return RNNSeq2SeqBackbone(
        vocabulary_size,
        embedding_dim=8,
        encoder_units=8,
        decoder_units=16,
        attention_units=8,
        dropout=dropout,
        encoder_sequence_length=32,
        decoder_sequence_length=32,
        **kwargs,
    )


def translator(kind, **kwargs):
    preprocessor = TranslationPreprocessor(tokenizer(), 32, 32)
    return Translator(
        backbone(kind, tokenizer().vocabulary_size(), **kwargs), preprocessor
    )


def ids_batch(rng_seed=0, source_length=9, target_length=7):
    rng = np.random.default_rng(rng_seed)
    source = rng.integers(4, 90, (2, source_length)).astype("int32")
    target = rng.integers(4, 90, (2, target_length)).astype("int32")
    source_mask = np.ones_like(source)
    source_mask[1, 6:] = 0
    source[1, 6:] = 0
    return {
        "encoder_token_ids": source,
        "encoder_padding_mask": source_mask,
        "decoder_token_ids": target,
        "decoder_padding_mask": np.ones_like(target),
    }


def decoder_output(model, batch):
    return to_numpy(model(batch)["decoder_sequence_output"])


# ---- Preprocessor ------------------------------------------------------------


def test_preprocessor_packs_sources_and_shifted_targets():
    pre = TranslationPreprocessor(tokenizer(), 24, 24)
    x, y, weights = pre(["Zwei Hunde spielen."], ["Two dogs play."])
    for key in ("encoder_token_ids", "encoder_padding_mask"):
        assert tuple(x[key].shape) == (1, 24)
    assert (
        TranslationPreprocessor.from_config(
            pre.get_config()
        ).encoder_sequence_length
        == 24
    )
    decoder = to_numpy(x["decoder_token_ids"])[0]
    assert decoder[0] == tokenizer().start_token_id
    np.testing.assert_array_equal(to_numpy(y)[0][:-1], decoder[1:])
    real = int(to_numpy(weights)[0].sum())
    assert to_numpy(y)[0][real - 1] == tokenizer().end_token_id
    with pytest.raises(ValueError, match="needs targets"):
        pre(["Zwei Hunde spielen."])


def test_preprocessor_pads_batches_only_to_their_longest_sentence():
    pre = TranslationPreprocessor(tokenizer(), 24, 24, pad_to_multiple_of=8)
    x, y, weights = pre(["Der Hund."], ["The dog."])
    assert tuple(x["encoder_token_ids"].shape)[1] % 8 == 0
    assert tuple(x["encoder_token_ids"].shape)[1] < 24
    assert tuple(y.shape) == tuple(x["decoder_token_ids"].shape)
    assert pre.get_config()["pad_to_multiple_of"] == 8


# ---- Backbones ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_source_padding_never_changes_the_outputs(kind):
    model = backbone(kind)
    batch = ids_batch()
    padded = dict(batch)
    for key in ("encoder_token_ids", "encoder_padding_mask"):
        padded[key] = np.concatenate(
            [batch[key], np.zeros((2, 4), "int32")], axis=1
        )
    padded["encoder_token_ids"][1, 6:] = 5  # garbage under the mask
    full, more = model(batch), model(padded)
    np.testing.assert_allclose(
        to_numpy(more["encoder_sequence_output"])[0, :9],
        to_numpy(full["encoder_sequence_output"])[0],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        decoder_output(model, padded), decoder_output(model, batch), atol=1e-5
    )


@pytest.mark.parametrize("kind", KINDS)
def test_the_decoder_is_causal(kind):
    model = backbone(kind)
    batch = ids_batch()
    changed = dict(batch)
    changed["decoder_token_ids"] = batch["decoder_token_ids"].copy()
    changed["decoder_token_ids"][:, 4:] = 7
    a, b = decoder_output(model, batch), decoder_output(model, changed)
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_equals_the_full_pass_token_by_token(kind):
    model = backbone(kind)
    batch = ids_batch()
    full = to_numpy(model.token_logits(model(batch)["decoder_sequence_output"]))
    encoder = model.encode(
        batch["encoder_token_ids"], batch["encoder_padding_mask"]
    )
    cache = model.decoder_cache(encoder, batch["encoder_padding_mask"], 7)
    for t in range(7):
        hidden, cache, weights = model.decode_step(
            batch["decoder_token_ids"][:, t : t + 1],
            cache,
            t,
            return_attention_scores=True,
        )
        np.testing.assert_allclose(
            to_numpy(model.token_logits(hidden))[:, 0], full[:, t], atol=1e-4
        )
        # Cross-attention: a distribution over the real source tokens only.
        weights = to_numpy(weights)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (weights[1, ..., 6:] == 0).all()


def test_transformer_ties_and_shares_its_embeddings():
    tied = backbone("transformer")
    assert tied.encoder_embedding is tied.decoder_embedding
    untied = backbone("transformer", share_embeddings=False, tie_weights=False)
    assert untied.count_params() > tied.count_params()
    batch = ids_batch()
    assert to_numpy(
        untied.token_logits(untied(batch)["decoder_sequence_output"])
    ).shape == (2, 7, 100)


# ---- Generation --------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_with_the_cache_equals_greedy_without(kind):
    model = translator(kind)
    sources = GERMAN[:3]
    cached = model.generate(sources, max_length=12)
    assert cached == model.generate(sources, max_length=12, use_cache=False)
    assert isinstance(model.generate(sources[0], max_length=12), str)
    beams = model.generate(sources, max_length=12, sampler="beam", num_beams=3)
    assert len(beams) == 3 and all(isinstance(b, str) for b in beams)
    assert beams == model.generate(
        sources, max_length=12, sampler="beam", num_beams=3, use_cache=False
    )


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_precision_generation_is_the_same_with_reused_casts(
    kind, monkeypatch
):
    # Under PyTorch the decoding loop casts each weight once per call
    # (zoo.layers.sublayers.reused_casts); the translations must not move.
    import contextlib

    from zoo.models import generation

    keras.config.set_dtype_policy("mixed_bfloat16")
    model = translator(kind)
    sources = GERMAN[:2]
    options = [{}, {"sampler": "beam", "num_beams": 3}]
    reused = [model.generate(sources, max_length=10, **o) for o in options]
    monkeypatch.setattr(generation, "reused_casts", contextlib.nullcontext)
    assert reused == [
        model.generate(sources, max_length=10, **o) for o in options
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_training_on_raw_pairs_lowers_the_loss_and_survives_saving(
    kind, tmp_path
):
    model = translator(kind)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), label_smoothing=0.0)
    history = model.fit(
        GERMAN[:64], ENGLISH[:64], batch_size=16, epochs=4, verbose=0
    )
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    loaded = keras_round_trip(model, tmp_path)
    assert isinstance(loaded, Translator)
    assert loaded.generate(GERMAN[:2], max_length=12) == model.generate(
        GERMAN[:2], max_length=12
    )


def test_the_compiled_beam_search_is_saved_with_the_model(tmp_path):
    model = translator("transformer")
    model.compile(sampler=get_sampler("beam", num_beams=4, length_penalty=1.5))
    sources = GERMAN[:3]
    before = model.generate(sources, max_length=12)
    path = str(tmp_path / "translator.keras")
    model.save(path)
    loaded = load_model(path, expected=Translator)
    assert type(loaded.sampler) is BeamSampler
    assert (loaded.sampler.num_beams, loaded.sampler.length_penalty) == (4, 1.5)
    assert loaded.get_compile_config()["sampler"]["config"]["num_beams"] == 4
    assert loaded.generate(sources, max_length=12) == before


def test_alignments_are_distributions_over_the_source_tokens():
    model = translator("transformer")
    out = model.alignments(GERMAN[0], ENGLISH[0])
    layers, heads, target, source = out["weights"].shape
    assert (layers, heads) == (2, 2)
    assert source == len(out["source_tokens"])
    assert target == len(out["target_tokens"])
    # Row t predicts target token t: the sentence's pieces, then </s>.
    pieces = [
        model.preprocessor.tokenizer.id_to_token(int(i))
        for i in np.asarray(
            model.preprocessor.tokenizer.tokenize(ENGLISH[0])
        ).reshape(-1)
    ]
    assert out["target_tokens"] == pieces + ["</s>"]
    np.testing.assert_allclose(out["mean"].sum(-1), 1.0, atol=1e-5)
    rnn = translator("rnn").alignments(GERMAN[0], ENGLISH[0])
    assert rnn["weights"].shape[:2] == (1, 1)


def stepwise_cross_attention(backbone, source, source_mask, target):
    """The reference: the decoder fed one target token at a time through its
    cache, each step's attention over the source kept."""
    encoder_output = backbone.encode(source, source_mask)
    cache = backbone.decoder_cache(encoder_output, source_mask, target.shape[1])
    steps = []
    for i in range(target.shape[1]):
        _, cache, weights = backbone.decode_step(
            target[:, i : i + 1], cache, i, return_attention_scores=True
        )
        steps.append(keras.ops.convert_to_numpy(weights)[:, :, :, 0])
    return np.stack(steps, axis=3)


@pytest.mark.parametrize("kind", KINDS)
def test_cross_attention_in_one_pass_equals_decoding_step_by_step(kind):
    model = translator(kind)
    batch = ids_batch(target_length=9)
    source = batch["encoder_token_ids"]
    mask = batch["encoder_padding_mask"]
    target = batch["decoder_token_ids"]
    one_pass = keras.ops.convert_to_numpy(
        model.backbone.cross_attention(source, mask, target)
    )
    expected = stepwise_cross_attention(model.backbone, source, mask, target)
    assert one_pass.shape == expected.shape
    assert one_pass.shape[3:] == (9, source.shape[1])
    np.testing.assert_allclose(one_pass, expected, atol=2e-6)
    # Each target position sees the targets before it only: a longer target
    # leaves the first rows as they were.
    longer = np.concatenate([target, target[:, :4]], axis=1)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(
            model.backbone.cross_attention(source, mask, longer)
        )[:, :, :, :9],
        one_pass,
        atol=2e-6,
    )


def test_generation_errors_and_truncation_warning():
    model = translator("transformer")
    with pytest.raises(ValueError, match="at least one sentence"):
        model.generate([])
    with pytest.raises(ValueError, match="Source sentence 0 is empty"):
        model.generate([""])
    with pytest.raises(ValueError, match=r"Source sentence 1 is empty \(blank"):
        model.generate([GERMAN[0], "   "])
    with pytest.raises(
        ValueError,
        match=r"predict\(\) reads sources with "
        r"their target sentences.*generate\(sentences\)",
    ):
        model.predict(GERMAN[:2], verbose=0)
    logits = model.predict(
        {"encoder_text": GERMAN[:2], "decoder_text": ENGLISH[:2]}, verbose=0
    )
    assert logits.shape[:2] == (2, 32)
    for bad in (33, 2.5, float("nan")):
        with pytest.raises(
            ValueError,
            match=r"max_length must be an integer in \[2, 32\] \(the "
            r"decoder.s sequence length\)",
        ):
            model.generate(GERMAN[:1], max_length=bad)
    with pytest.raises(ValueError, match="num_beams must be an integer >= 1"):
        model.generate(GERMAN[:1], sampler="beam", num_beams=0)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        model.generate(GERMAN[:1], sampler="top_k", k=0)
    for bad in (None, 3, [GERMAN[0], None]):
        with pytest.raises(TypeError, match="generate\\(\\) reads text"):
            model.generate(bad)
    with pytest.raises(TypeError, match="alignments\\(\\) reads text"):
        model.alignments(None)
    with pytest.raises(ValueError, match="one source sentence; got 2"):
        model.alignments(GERMAN[:2])
    with pytest.raises(ValueError, match="one target sentence; got 2"):
        model.alignments(GERMAN[0], ENGLISH[:2])
    # A character the tokenizer never saw (an emoji): the encoder reads
    # <unk>, as the GPT's prompts do; a warning names it.
    with pytest.warns(
        UserWarning,
        match=r"generate\(\): sentence 1 has 1 piece\(s\) outside the "
        r"vocabulary \('\U0001f600'\); the model reads them as the unknown",
    ):
        model.generate([GERMAN[0], GERMAN[1] + " \U0001f600"], max_length=4)
    with pytest.warns(UserWarning, match="truncated"):
        model.generate(" ".join(GERMAN[:12]), max_length=8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.generate(GERMAN[0], max_length=8)
    assert not [w for w in caught if "truncated" in str(w.message)]


# ---- Loss, precision, presets ------------------------------------------------


def test_label_smoothed_loss_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype("float32")
    targets = np.array([[1, 2, 0], [4, 4, 3]])
    log_p = np.log(np_softmax(logits))
    true = -np.take_along_axis(log_p, targets[..., None], -1)[..., 0]
    expected = 0.9 * true - 0.1 * log_p.mean(-1)
    loss = SparseCategoricalCrossentropyWithSmoothing(0.1, reduction=None)
    np.testing.assert_allclose(
        to_numpy(loss(targets, logits)), expected, rtol=1e-5
    )
    plain = SparseCategoricalCrossentropyWithSmoothing(0.0)
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(
        to_numpy(plain(targets, logits)),
        to_numpy(reference(targets, logits)),
        rtol=1e-5,
    )
    with pytest.raises(ValueError, match="smoothing"):
        SparseCategoricalCrossentropyWithSmoothing(1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_bfloat16_gives_finite_float32_logits(kind):
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = translator(kind)
    logits = model(ids_batch(target_length=5))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert np.isfinite(to_numpy(logits)).all()


def test_presets_and_configs():
    pre = TranslationPreprocessor.from_preset(
        "transformer_cpu_small", tokenizer=tokenizer()
    )
    assert pre.encoder_sequence_length == 64 and pre.pad_to_multiple_of == 16
    model = Translator.from_preset("smoke", preprocessor=pre)
    assert model.backbone.num_layers == 1 and model.backbone.hidden_dim == 32
    rnn = Translator.from_preset(
        "rnn_smoke", preprocessor=pre, backbone_attention="luong_general"
    )
    assert rnn.backbone.attention == "luong_general"
    for kind in KINDS:
        b = backbone(kind)
        assert (
            type(b).from_config(b.get_config()).get_config() == b.get_config()
        )
    with pytest.raises(ValueError, match="attention must be"):
        backbone("rnn", attention="luong_concat")
    with pytest.raises(ValueError, match="divisible"):
        TransformerSeq2SeqBackbone(50, num_heads=3, hidden_dim=16)
    assert ops.convert_to_numpy(ops.ones(1)).shape == (1,)


def test_a_tokenizer_larger_than_the_backbone_is_refused():
    preprocessor = TranslationPreprocessor(tokenizer(), 32, 32)
    small = tokenizer().vocabulary_size() - 1
    for kind in ("transformer", "rnn"):
        with pytest.raises(ValueError, match="vocabulary_size="):
            Translator(backbone(kind, small), preprocessor)


def test_rnn_ids_outside_the_vocabulary_are_a_clear_error():
    model = backbone("rnn", vocabulary_size=100)
    batch = ids_batch()
    batch["encoder_token_ids"][0, 0] = 160
    with pytest.raises(ValueError, match="token id 160 is outside"):
        model(batch)


def test_sample_weight_and_beam_options_without_a_sampler_are_refused():
    model = translator("transformer")
    model.compile(sampler="beam")
    with pytest.raises(ValueError, match="sample_weight"):
        model.fit(GERMAN[:4], ENGLISH[:4], sample_weight=np.zeros(4), verbose=0)
    with pytest.raises(ValueError, match="sample_weight"):
        model.evaluate(
            GERMAN[:4], ENGLISH[:4], sample_weight=np.zeros(4), verbose=0
        )
    with pytest.raises(
        ValueError, match="num_beams needs the sampler it belongs to"
    ):
        model.generate(GERMAN[:1], num_beams=3)


def test_the_loss_is_per_real_target_token_whatever_the_padding():
    losses = []
    for length in (32, 64):
        preprocessor = TranslationPreprocessor(tokenizer(), length, length)
        model = Translator(
            TransformerSeq2SeqBackbone(
                tokenizer().vocabulary_size(),
                num_layers=1,
                num_heads=2,
                hidden_dim=16,
                intermediate_dim=32,
                encoder_sequence_length=64,
                decoder_sequence_length=64,
            ),
            preprocessor,
        )
        model.backbone.set_weights(
            [
                np.random.default_rng(i).normal(0, 0.1, w.shape)
                for i, w in enumerate(model.backbone.get_weights())
            ]
        )
        model.compile()
        losses.append(
            model.evaluate(
                GERMAN[:16], ENGLISH[:16], verbose=0, return_dict=True
            )["loss"]
        )
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)


def test_int8_matrices_load_int8_translate_as_before_and_save_again(tmp_path):
    # The RNN translator (the shipped int8 one); the Transformer blocks'
    # int8 path is the captioning family's test's.
    model = translator("rnn")
    sources = GERMAN[:4]
    before = model.generate(sources, max_length=12)
    count = quantize_matrices(model)
    quantized = [
        layer
        for layer in model.backbone._flatten_layers()
        if layer.quantization_mode == "int8"
    ]
    assert count == len(quantized) > 0
    assert any(isinstance(layer, keras.layers.Embedding) for layer in quantized)
    after = model.generate(sources, max_length=12)
    assert len(after) == len(before)
    loaded = keras_round_trip(model, tmp_path)
    assert (
        sum(
            layer.quantization_mode == "int8"
            for layer in loaded.backbone._flatten_layers()
        )
        == count
    )
    assert loaded.generate(sources, max_length=12) == after
    assert loaded.generate(
        sources, max_length=12, sampler="beam", num_beams=2
    ) == model.generate(sources, max_length=12, sampler="beam", num_beams=2)
    # A loaded int8 model saves again: the same int8 weights and scales.
    again = keras_round_trip(loaded, tmp_path, "again.keras")
    for old, new in zip(loaded.weights, again.weights, strict=True):
        assert old.dtype == new.dtype
        np.testing.assert_array_equal(
            ops.convert_to_numpy(old.value), ops.convert_to_numpy(new.value)
        )
