"""zoo.models.captioning under the current backend: the preprocessor
(resizing, caption packing, every bad image as one clear error), both
backbones (attention over the regions, causality, cached decoding against
the full pass), generation (greedy with and without the cache, beam search
on a hand-made distribution), attention maps, training on raw images,
the encoder swap after training on cached features, saving and mixed
precision."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import counted, keras_round_trip, to_numpy
from zoo.data.captions import CaptionPairs, make_synthetic_captions
from zoo.data.tokenizers import SubwordTokenizer, train_subword_tokenizer
from zoo.models.captioning import (
    ConvStackEncoder,
    EfficientNetLiteEncoder,
    FeatureGridInput,
    ImageCaptioner,
    ImageCaptionerPreprocessor,
    ShowAttendTellBackbone,
    TransformerCaptionBackbone,
    image_encoders,
)
from zoo.models.generation import BeamSampler, get_sampler

IMAGES, CAPTIONS = make_synthetic_captions(96, size=16, seed=0)
KINDS = ("lstm", "transformer")
LENGTH = 10
_PROTO = []


def tokenizer():
    """A fresh tokenizer per call (the suite clears the Keras session
    between tests, which frees the TensorFlow resource of an earlier one)."""
    if not _PROTO:
        _PROTO.append(
            train_subword_tokenizer(
                [c for options in CAPTIONS for c in options],
                40,
                model_type="word",
            ).proto
        )
    return SubwordTokenizer(proto=_PROTO[0])


def encoder(dtype=None):
    return ConvStackEncoder(
        (16, 16), 3, filters=(4, 8), convs_per_stage=1, dtype=dtype
    )


def backbone(kind, image_encoder=None, dtype=None, **kwargs):
    image_encoder = image_encoder or encoder(dtype)
    vocabulary = tokenizer().vocabulary_size()
    if kind == "lstm":
        return ShowAttendTellBackbone(
            image_encoder,
            vocabulary,
            embedding_dim=8,
            hidden_dim=16,
            attention_units=8,
            dropout=0.0,
            decoder_sequence_length=LENGTH,
            dtype=dtype,
            **kwargs,
        )
    return TransformerCaptionBackbone(
        image_encoder,
        vocabulary,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        dropout=0.0,
        decoder_sequence_length=LENGTH,
        dtype=dtype,
        **kwargs,
    )


def preprocessor(**kwargs):
    return ImageCaptionerPreprocessor(
        tokenizer(), (16, 16), 3, LENGTH, **kwargs
    )


def captioner(kind, **kwargs):
    return ImageCaptioner(backbone(kind, **kwargs), preprocessor())


def ids_batch(seed=0, length=6):
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, tokenizer().vocabulary_size(), (2, length)).astype(
        "int32"
    )
    ids[:, 0] = tokenizer().start_token_id
    return {
        "images": IMAGES[:2].astype("float32"),
        "decoder_token_ids": ids,
        "decoder_padding_mask": np.ones_like(ids),
    }


# ---- Preprocessor ------------------------------------------------------------


def test_preprocessor_resizes_images_and_packs_shifted_captions():
    pre = preprocessor()
    # Another aspect ratio is resized, not refused (documented: the
    # Flickr8k loader squeezes the training photographs the same way).
    big = np.full((1, 40, 24, 3), 200, "uint8")
    x, y, weights = pre(big, ["A red Square, on the LEFT!"])
    assert tuple(x["images"].shape) == (1, 16, 16, 3)
    np.testing.assert_allclose(to_numpy(x["images"]), 200.0, atol=1e-3)
    ids = to_numpy(x["decoder_token_ids"])[0]
    targets, weights = to_numpy(y)[0], to_numpy(weights)[0]
    tok = tokenizer()
    words = tok.tokenize("a red square on the left")
    assert ids[0] == tok.start_token_id
    np.testing.assert_array_equal(ids[1:7], words)
    np.testing.assert_array_equal(targets[:6], words)
    assert targets[6] == tok.end_token_id
    np.testing.assert_array_equal(weights, np.arange(LENGTH) < 7)
    # A list of images of different sizes, one image alone.
    batch, single = pre.image_batch([IMAGES[0], big[0]])
    assert batch.shape == (2, 16, 16, 3) and not single
    batch, single = pre.image_batch(IMAGES[0])
    assert batch.shape == (1, 16, 16, 3) and single


def test_preprocessor_config_round_trip():
    pre = preprocessor(normalize_captions=False)
    again = ImageCaptionerPreprocessor.from_config(pre.get_config())
    assert again.image_size == (16, 16) and again.num_channels == 3
    assert again.decoder_sequence_length == LENGTH
    assert not again.normalize_captions


@pytest.mark.parametrize(
    "images, message",
    [
        (np.zeros((0, 16, 16, 3), "uint8"), "empty batch"),
        ([], "empty list"),
        (None, "got None"),
        (np.zeros((2, 16, 16), "uint8"), "batch of grey images"),
        (np.zeros((16, 16), "uint8"), "grey image"),
        (np.zeros((1, 16, 16, 1), "uint8"), "grey image"),
        (np.zeros((1, 16, 16, 4), "uint8"), "RGBA"),
        (np.zeros((1, 3, 16, 16), "uint8"), "channels first"),
        (np.full((1, 16, 16, 3), 0.5, "float32"), "scaled to \\[0, 1\\]"),
        (
            np.zeros((1, 16, 16, 3), bool),
            r"^got bool images; .*"
            r"images.astype\('uint8'\) \* 255",
        ),
        (np.zeros((16, 16, 3), bool), "got a bool image"),
        ([np.zeros((16, 16, 3), bool)], "^image 0: got a bool image"),
        (
            np.zeros((2, 1, 28, 28), "uint8"),
            r"^got a batch of shape "
            r"2x1x28x28, channels first\? .*np.moveaxis\(images, 1, -1\)",
        ),
        (np.zeros((2, 3, 16, 16), "uint8"), "channels first"),
        (np.zeros((1, 0, 16, 3), "uint8"), "empty image"),
        (np.full((1, 16, 16, 3), np.nan, "float32"), "NaN"),
        (np.full((1, 16, 16, 3), 300.0, "float32"), "\\[0, 255\\]"),
        (np.zeros((1, 2, 16, 16, 3), "uint8"), "expected a batch of images"),
        ("image.jpg", "got str"),
    ],
)
def test_every_bad_image_is_one_clear_error(images, message):
    model = captioner("lstm")
    with pytest.raises(ValueError, match=message) as error:
        model.generate(images)
    assert "\n" not in str(error.value)


def test_a_dataset_of_bad_images_is_refused_by_its_spec():
    import tensorflow as tf

    model = captioner("lstm")
    model.compile()
    captions = [c[0] for c in CAPTIONS[:4]]
    for images, message in (
        (np.zeros((4, 16, 16, 3), bool), "^got bool images"),
        (np.zeros((4, 3, 16, 16), "uint8"), "^got a batch of shape nx3x16x16"),
    ):
        dataset = tf.data.Dataset.from_tensor_slices((images, captions))
        with pytest.raises(ValueError, match=message) as error:
            model.fit(dataset.batch(2), verbose=0)
        assert "\n" not in str(error.value)


def test_generation_arguments_out_of_range_are_refused():
    model = captioner("lstm")
    for bad in (0, 1, LENGTH + 1, 2.5, "long", float("nan")):
        with pytest.raises(
            ValueError,
            match=f"max_length must be an integer in \\[2, {LENGTH}\\]",
        ):
            model.generate(IMAGES[:1], max_length=bad)
    with pytest.raises(ValueError, match="num_beams must be an integer >= 1"):
        model.generate(IMAGES[:1], sampler="beam", num_beams=0)
    with pytest.raises(ValueError, match=r"p must be a number in \(0, 1\]"):
        model.generate(IMAGES[:1], sampler="top_p", p=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        model.generate(IMAGES[:1], batch_size=0)
    with pytest.raises(ValueError, match="needs the sampler it belongs to"):
        model.generate(IMAGES[:1], num_beams=2)
    with pytest.raises(ValueError, match="generate\\(images\\)"):
        model.predict(IMAGES[:2])
    with pytest.raises(ValueError, match="needs captions"):
        model.fit(IMAGES[:2])
    with pytest.raises(ValueError, match="sample_weight"):
        model.fit(IMAGES[:2], ["a", "b"], sample_weight=np.ones(2))


# ---- Backbones ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_attention_maps_are_distributions_over_the_regions(kind):
    model = backbone(kind)
    batch = ids_batch()
    maps = to_numpy(
        model.attention_maps(batch["images"], batch["decoder_token_ids"])
    )
    assert maps.shape == (2, 6, model.num_regions)
    assert model.grid_size == (4, 4)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    assert (maps > 0).all()  # no region is left out


@pytest.mark.parametrize("kind", KINDS)
def test_the_decoder_is_causal(kind):
    model = backbone(kind)
    batch = ids_batch()
    changed = dict(batch, decoder_token_ids=batch["decoder_token_ids"].copy())
    changed["decoder_token_ids"][:, 4:] = 7
    a = to_numpy(model(batch)["sequence_output"])
    b = to_numpy(model(changed)["sequence_output"])
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-5)
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-4


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_equals_the_full_pass_token_by_token(kind):
    model = backbone(kind)
    batch = ids_batch()
    full = to_numpy(model.token_logits(model(batch)["sequence_output"]))
    maps = to_numpy(
        model.attention_maps(batch["images"], batch["decoder_token_ids"])
    )
    encoded = model.encode(batch["images"])
    cache = model.decoder_cache(encoded, model.encoder_mask(encoded), 6)
    ids = ops.convert_to_tensor(batch["decoder_token_ids"])
    for t in range(6):
        hidden, cache, weights = model.decode_step(
            ids[:, t : t + 1], cache, t, return_attention_scores=True
        )
        np.testing.assert_allclose(
            to_numpy(model.token_logits(hidden))[:, 0], full[:, t], atol=1e-4
        )
        step_map = to_numpy(weights)[:, -1].mean(axis=1)[:, 0]
        np.testing.assert_allclose(step_map, maps[:, t], atol=1e-5)


def test_the_lstm_adds_the_doubly_stochastic_penalty_while_training():
    model = backbone("lstm", attention_penalty=2.0)
    batch = ids_batch()
    model(batch, training=False)
    assert not model.losses
    # (training: the encoder's batch normalisation reads batch statistics)
    alphas = to_numpy(model(batch, training=True)["attention_weights"])
    (loss,) = model.losses
    expected = (
        2.0 / alphas.shape[-1] * ((1 - alphas.sum(1)) ** 2).sum(-1).mean()
    )
    np.testing.assert_allclose(float(to_numpy(loss)), expected, rtol=1e-5)


# ---- Generation --------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_with_the_cache_equals_greedy_without(kind):
    model = captioner(kind)
    cached = model.generate(IMAGES[:3])
    assert cached == model.generate(IMAGES[:3], use_cache=False)
    assert len(cached) == 3 and all(isinstance(c, str) for c in cached)
    assert isinstance(model.generate(IMAGES[0]), str)
    beams = model.generate(IMAGES[:3], sampler="beam", num_beams=3)
    assert len(beams) == 3


def test_generate_tells_the_depthwise_convolutions_when_xla_compiles(
    monkeypatch,
):
    # TensorFlow compiles generate with XLA unless compile() says
    # jit_compile=False; the EfficientNet's depthwise convolutions are told
    # (they sum shifted copies there) and caption as Keras' layer does.
    seen = []
    told = image_encoders.compiling_with_xla
    monkeypatch.setattr(
        image_encoders,
        "compiling_with_xla",
        lambda: seen.append(told()) or seen[-1],
    )
    lite = EfficientNetLiteEncoder(image_size=(16, 16), output="stage5")
    model = ImageCaptioner(backbone("lstm", image_encoder=lite), preprocessor())
    with_xla = model.generate(IMAGES[:3], sampler="beam", num_beams=2)
    backend = keras.backend.backend()
    assert seen and set(seen) == {backend != "torch"}
    if backend == "tensorflow":  # the backend where compile() decides it
        seen.clear()
        model.compile(jit_compile=False)
        without = model.generate(IMAGES[:3], sampler="beam", num_beams=2)
        assert without == with_xla
        assert seen and set(seen) == {False}


def test_beam_search_finds_the_likelier_caption_greedy_misses():
    # Step 1: token 4 (0.6) or 5 (0.4). After 4 the end (token 3) has
    # p=0.3 and the rest is spread; after 5 the end is certain. Greedy
    # takes 4 then the end: 0.6 * 0.3 = 0.18 < 0.4 * 1.0 for 5 then end.
    vocabulary, end = 8, 3

    def next(prompt, cache, index):
        previous = ops.take(prompt, index - 1, axis=1)
        probs = np.full((3, vocabulary), 1e-9, "float32")
        probs[0, 4], probs[0, 5] = 0.6, 0.4
        probs[1, end] = 0.3
        probs[1, 6:] = 0.35
        probs[2, end] = 1.0
        row = ops.where(previous == 4, 1, ops.where(previous == 5, 2, 0))
        logits = ops.log(ops.take(ops.convert_to_tensor(probs), row, axis=0))
        return logits, None, cache

    prompt = np.zeros((1, 4), "int32")
    mask = np.array([[True, False, False, False]])
    greedy_ids = to_numpy(
        get_sampler("greedy")(
            next, prompt, index=1, mask=mask, stop_token_ids=(end,)
        )
    )
    beam_ids = to_numpy(
        BeamSampler(num_beams=2, length_penalty=0.0)(
            next, prompt, index=1, mask=mask, stop_token_ids=(end,)
        )
    )
    assert greedy_ids[0, 1:3].tolist() == [4, 6]  # 0.35 beats the end
    assert beam_ids[0, 1:3].tolist() == [5, end]


@pytest.mark.parametrize("kind", KINDS)
def test_attention_maps_of_generated_words(kind):
    model = captioner(kind)
    results = model.attention_maps(IMAGES[:2])
    assert len(results) == 2
    for item, caption in zip(results, model.generate(IMAGES[:2])):
        assert item["caption"] == caption
        assert len(item["words"]) == len(item["maps"])
        assert item["maps"].shape[1:] == (4, 4)
        np.testing.assert_allclose(item["maps"].sum((1, 2)), 1.0, atol=1e-5)
    given = model.attention_maps(IMAGES[0], "a red bar on the left")
    assert given["words"] == ["a", "red", "bar", "on", "the", "left"]
    with pytest.raises(ValueError, match="2 images but 1 captions"):
        model.attention_maps(IMAGES[:2], ["a red bar"])


# ---- Training, saving --------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_training_on_raw_images_lowers_the_loss_and_survives_saving(
    kind, tmp_path
):
    model = captioner(kind)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(
        IMAGES[:48], CAPTIONS[:48], batch_size=48, epochs=3, verbose=0
    )
    losses = history.history["loss"]
    assert losses[-1] < losses[0] and np.isfinite(losses).all()
    model.backbone.image_encoder.trainable = False
    loaded = keras_round_trip(model, tmp_path)
    assert not loaded.backbone.image_encoder.trainable  # a frozen encoder
    assert loaded.generate(IMAGES[:4]) == model.generate(IMAGES[:4])
    np.testing.assert_allclose(
        to_numpy(
            loaded.predict(
                {"images": IMAGES[:2], "captions": ["a red bar", "a blue bar"]},
                verbose=0,
            )
        ),
        to_numpy(
            model.predict(
                {"images": IMAGES[:2], "captions": ["a red bar", "a blue bar"]},
                verbose=0,
            )
        ),
        atol=1e-5,
    )


def test_an_int8_decoder_loads_int8_and_captions_as_before_saving(tmp_path):
    # The shipped captioners' decoder (LSTM). The Transformer decoder's
    # int8 blocks are the translator's, checked in its int8 test.
    model = captioner("lstm")
    batch = {"images": IMAGES[:4], "captions": [c[0] for c in CAPTIONS[:4]]}
    before = to_numpy(model.predict(batch, verbose=0))
    model.quantize_decoder()
    quantized = [
        layer
        for layer in model.backbone._flatten_layers()
        if layer.quantization_mode == "int8"
    ]
    assert any(isinstance(layer, keras.layers.Embedding) for layer in quantized)
    assert not any(
        layer.quantization_mode
        for layer in model.backbone.image_encoder._flatten_layers()
    )
    after = to_numpy(model.predict(batch, verbose=0))
    assert 0 < np.abs(after - before).max() < 0.1 * np.abs(before).max()
    loaded = keras_round_trip(model, tmp_path)
    assert sum(
        layer.quantization_mode == "int8"
        for layer in loaded.backbone._flatten_layers()
    ) == len(quantized)
    np.testing.assert_allclose(
        to_numpy(loaded.predict(batch, verbose=0)), after, atol=1e-5
    )
    captions = loaded.generate(IMAGES[:4])
    assert len(captions) == 4 and all(isinstance(c, str) for c in captions)
    assert captions == model.generate(IMAGES[:4])


def test_a_loaded_captioner_keeps_its_sampler_and_its_special_tokens(
    tmp_path,
):
    """The sampler given to `compile` is saved with its settings. The
    suppression of padding, the unknown word and the start token is read
    from the tokenizer when generating: a loaded tokenizer gets its
    vocabulary after the task is built."""
    model = captioner("lstm")
    model.compile(sampler=get_sampler("beam", num_beams=3, length_penalty=1.0))
    loaded = keras_round_trip(model, tmp_path)
    assert (loaded.sampler.num_beams, loaded.sampler.length_penalty) == (3, 1.0)
    assert loaded.generate(IMAGES[:2]) == model.generate(IMAGES[:2])
    tokenizer = loaded.preprocessor.tokenizer
    bias = np.asarray(loaded.token_bias)
    for name in ("pad_token_id", "unknown_token_id", "start_token_id"):
        assert bias[getattr(tokenizer, name)] == -1e9, name
    np.testing.assert_array_equal(bias, np.asarray(model.token_bias))


def test_fit_on_ready_batches_traces_its_step_once():
    """A PyDataset of preprocessed batches trains through Keras' own `fit`;
    the optimizer is still built before TensorFlow traces the step."""
    model = captioner("lstm")
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    ready = CaptionPairs(
        IMAGES[:4], CAPTIONS[:4], 3, preprocessor=model.preprocessor
    )
    traces = []
    model.train_step = counted(model.train_step, traces)
    history = model.fit(ready, epochs=2, verbose=0)
    assert model.optimizer.built
    assert np.all(np.isfinite(history.history["loss"]))
    if keras.backend.backend() == "tensorflow":
        assert len(traces) == 1


def test_a_decoder_trained_on_cached_features_gets_its_encoder_back():
    image_encoder = encoder()
    grid = to_numpy(image_encoder(IMAGES[:8].astype("float32")))
    cached = ImageCaptioner(
        backbone("lstm", image_encoder=FeatureGridInput((4, 4), 8)),
        ImageCaptionerPreprocessor(
            tokenizer(), (4, 4), 8, LENGTH, raw_pixels=False
        ),
    )
    cached.compile(optimizer=keras.optimizers.Adam(1e-2))
    cached.fit(
        CaptionPairs(grid, CAPTIONS[:8], 4).dataset(), epochs=1, verbose=0
    )
    image_encoder.trainable = False
    full = cached.with_image_encoder(image_encoder, preprocessor())
    assert not full.backbone.image_encoder.trainable  # stays frozen
    assert full.generate(IMAGES[:8]) == cached.generate(grid)
    np.testing.assert_allclose(
        to_numpy(full.encode_images(IMAGES[:8])), grid, atol=1e-5
    )
    with pytest.raises(ValueError, match="grid"):
        cached.with_image_encoder(ConvStackEncoder((16, 16), 3, (4,)))


def test_caption_pairs_serve_every_pair_or_one_caption_per_image():
    pairs = CaptionPairs(IMAGES[:4], CAPTIONS[:4], 3, shuffle=True, seed=1)
    assert len(pairs) == 7  # 20 pairs
    rows = pairs.pairs(epoch=0)
    assert sorted(map(tuple, rows)) == [
        (i, j) for i in range(4) for j in range(5)
    ]
    np.testing.assert_array_equal(rows, pairs.pairs(epoch=0))
    assert not np.array_equal(rows, pairs.pairs(epoch=1))
    one = CaptionPairs(
        IMAGES[:4], CAPTIONS[:4], 3, seed=1, one_caption_per_image=True
    )
    assert len(one) == 2 and sorted(one.pairs()[:, 0]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="4 images but 3 caption"):
        CaptionPairs(IMAGES[:4], CAPTIONS[:3])
    # With the preprocessor: ready batches, as the preprocessor makes them.
    ready = CaptionPairs(
        IMAGES[:4],
        CAPTIONS[:4],
        3,
        shuffle=True,
        seed=1,
        preprocessor=preprocessor(),
    )
    x, y, weights = ready[1]
    rows = ready.pairs(epoch=0)[3:6]
    want_x, want_y, want_w = preprocessor()(
        IMAGES[rows[:, 0]], [CAPTIONS[i][j] for i, j in rows]
    )
    for key in want_x:
        np.testing.assert_array_equal(x[key], to_numpy(want_x[key]))
    np.testing.assert_array_equal(y, to_numpy(want_y))
    np.testing.assert_array_equal(weights, to_numpy(want_w))
    with pytest.raises(ValueError, match="resize them first"):
        CaptionPairs(
            np.zeros((2, 8, 8, 3), "uint8"),
            ["a", "b"],
            preprocessor=preprocessor(),
        )
    with pytest.raises(ValueError, match="image 1 has no caption"):
        CaptionPairs(IMAGES[:2], [["a"], []])


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_bfloat16_trains_and_captions(kind):
    model = ImageCaptioner(
        backbone(kind, dtype="mixed_bfloat16"), preprocessor()
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    logs = model.train_on_batch(
        IMAGES[:8].astype("float32"),
        [c[0] for c in CAPTIONS[:8]],
        return_dict=True,
    )
    assert np.isfinite(logs["loss"])
    logits = model.predict(
        {"images": IMAGES[:2], "captions": ["a", "b"]}, verbose=0
    )
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert len(model.generate(IMAGES[:2])) == 2


def test_a_tokenizer_larger_than_the_backbone_is_refused():
    with pytest.raises(ValueError, match="vocabulary"):
        ImageCaptioner(
            ShowAttendTellBackbone(
                encoder(), 10, embedding_dim=8, hidden_dim=8, attention_units=8
            ),
            preprocessor(),
        )
