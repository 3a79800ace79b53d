"""zoo.models.bert: the backbone against keras-hub's BERT and a NumPy
reference, padding, masking, the tied masked-LM head, fill_mask, the
classifier on a pretrained backbone, errors, saving, mixed precision and a
training step, under the current backend."""

import functools

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

import zoo  # noqa: F401  (registers the classes for loading)
from tests.helpers import keras_round_trip, np_layer_norm, to_numpy
from zoo.data.imdb import make_synthetic_imdb
from zoo.data.tokenizers import train_bert_tokenizer
from zoo.models.bert import (
    BertBackbone,
    BertClassifier,
    BertClassifierPreprocessor,
    BertMaskedLM,
    BertMaskedLMPreprocessor,
    strip_markup,
)

SIZE = dict(
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=24,
    dropout=0.0,
)


@functools.lru_cache(maxsize=None)
def _data():
    splits = make_synthetic_imdb(num_train=160, num_validation=32, num_test=0)
    texts, labels = splits["train"]
    vocabulary = train_bert_tokenizer(list(texts), 120).get_vocabulary()
    return list(texts), labels, vocabulary


def tokenizer():
    # A new tokenizer per test: Keras' clear_session between tests frees the
    # TF lookup tables an old one holds.
    vocabulary = _data()[2]
    return keras_hub.models.BertTokenizer(
        vocabulary=vocabulary,
        lowercase=True,
        strip_accents=True,
        special_tokens_in_strings=True,
    )


def make_masked_lm(dtype=None, sequence_length=24, **preprocessor_options):
    preprocessor = BertMaskedLMPreprocessor(
        tokenizer(), sequence_length=sequence_length, **preprocessor_options
    )
    backbone = BertBackbone(
        preprocessor.tokenizer.vocabulary_size(), dtype=dtype, **SIZE
    )
    return BertMaskedLM(backbone, preprocessor)


def random_inputs(batch=2, length=10, vocabulary=50, seed=0, pad_from=None):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocabulary, (batch, length)).astype("int32")
    ids[:, 0] = 2
    mask = np.ones((batch, length), bool)
    if pad_from is not None:
        ids[-1, pad_from:] = 0
        mask[-1, pad_from:] = False
    return {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "padding_mask": mask,
    }


def randomize(model, seed=0):
    """Random values everywhere, so every weight matters to a comparison
    (biases and LayerNorm betas start at 0)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))


# ---- the architecture ----------------------------------------------------------


def test_backbone_equals_keras_hub_bert_with_copied_weights():
    ours = BertBackbone(50, **SIZE)
    theirs = keras_hub.models.BertBackbone(50, **SIZE)
    randomize(theirs)
    assert len(ours.weights) == len(theirs.weights)
    for mine, source in zip(ours.weights, theirs.weights):
        # The same sub-layer names; ours nests token and position tables in
        # one PositionalEmbedding ("embeddings/").
        assert mine.path.removeprefix("embeddings/") == source.path
        mine.assign(source)
    inputs = random_inputs(pad_from=6)
    a, b = ours(inputs), theirs(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(
            to_numpy(a[key]), to_numpy(b[key]), atol=2e-5
        )


def test_masked_lm_equals_keras_hub_bert_masked_lm_with_copied_weights():
    ours = make_masked_lm()
    vocabulary = ours.backbone.vocabulary_size
    theirs = keras_hub.models.BertMaskedLM(
        keras_hub.models.BertBackbone(vocabulary, **SIZE), preprocessor=None
    )
    randomize(theirs, seed=1)
    for mine, source in zip(ours.weights, theirs.weights):
        assert mine.path.removeprefix("embeddings/") == source.path
        mine.assign(source)
    inputs = random_inputs(vocabulary=vocabulary, pad_from=7)
    inputs["mask_positions"] = np.array([[1, 3], [2, 0]], "int32")
    np.testing.assert_allclose(
        to_numpy(ours(inputs)), to_numpy(theirs(inputs)), atol=5e-5
    )


def test_pre_ln_variant_has_pre_ln_blocks_and_a_final_layer_norm(tmp_path):
    backbone = BertBackbone(50, **SIZE, norm_first=True)
    assert all(block.norm_first for block in backbone.transformer_layers)
    randomize(backbone, seed=5)
    inputs = random_inputs(pad_from=6)
    out = to_numpy(backbone(inputs)["sequence_output"])
    w = {v.path: to_numpy(v) for v in backbone.weights}
    last = keras.Model(backbone.inputs, backbone.transformer_layers[-1].output)
    np.testing.assert_allclose(
        out,
        np_layer_norm(
            to_numpy(last(inputs)),
            w["final_layer_norm/gamma"],
            w["final_layer_norm/beta"],
            1e-12,
        ),
        atol=1e-4,
    )
    restored = keras_round_trip(backbone, tmp_path)
    assert restored.get_config()["norm_first"] is True
    np.testing.assert_allclose(
        to_numpy(restored(inputs)["sequence_output"]), out, atol=1e-5
    )
    # The default is BERT's post-LN, with no final LayerNorm.
    assert BertBackbone(50, **SIZE).final_layer_norm is None


def test_embeddings_and_pooled_output_follow_their_formulas():
    backbone = BertBackbone(50, **SIZE)
    randomize(backbone, seed=2)
    inputs = random_inputs()
    inputs["segment_ids"][:, 5:] = 1
    w = {v.path: to_numpy(v) for v in backbone.weights}
    ids, segments = inputs["token_ids"], inputs["segment_ids"]
    length = ids.shape[1]
    # x = LN(E[token] + P[t] + S[segment])
    x = (
        w["embeddings/token_embedding/embeddings"][ids]
        + w["embeddings/position_embedding/embeddings"][:length]
        + w["segment_embedding/embeddings"][segments]
    )
    x = np_layer_norm(
        x,
        w["embeddings_layer_norm/gamma"],
        w["embeddings_layer_norm/beta"],
        1e-12,
    )
    embed = keras.Model(backbone.inputs, backbone.embeddings_layer_norm.output)
    np.testing.assert_allclose(to_numpy(embed(inputs)), x, atol=1e-5)
    # pooled = tanh(h_[CLS] W + b)
    out = backbone(inputs)
    h0 = to_numpy(out["sequence_output"])[:, 0]
    pooled = np.tanh(h0 @ w["pooled_dense/kernel"] + w["pooled_dense/bias"])
    np.testing.assert_allclose(
        to_numpy(out["pooled_output"]), pooled, atol=1e-5
    )


def test_padding_never_changes_outputs_at_real_positions():
    backbone = BertBackbone(50, **SIZE)
    randomize(backbone, seed=3)
    short = random_inputs(batch=1, length=6)
    long = random_inputs(batch=1, length=10, pad_from=6)
    long["token_ids"][:, :6] = short["token_ids"]
    long["token_ids"][:, 6:] = 7  # garbage under the mask, not zeros
    a, b = backbone(short), backbone(long)
    np.testing.assert_allclose(
        to_numpy(a["sequence_output"]),
        to_numpy(b["sequence_output"])[:, :6],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        to_numpy(a["pooled_output"]), to_numpy(b["pooled_output"]), atol=1e-5
    )


def test_the_head_is_tied_to_the_token_embedding():
    mlm = make_masked_lm()
    table = mlm.backbone.token_embedding.embeddings
    assert mlm.masked_lm_head.token_embedding is mlm.backbone.token_embedding
    shape = tuple(table.shape)
    # One variable of the table's shape in the whole task: no copy.
    assert sum(tuple(v.shape) == shape for v in mlm.weights) == 1


def test_segment_ids_outside_the_segments_are_a_clear_error():
    backbone = BertBackbone(50, **SIZE)
    ids = np.ones((1, 6), "int32")
    inputs = {
        "token_ids": ids,
        "segment_ids": np.full_like(ids, 5),
        "padding_mask": np.ones_like(ids),
    }
    # One line, before Keras runs the model (zoo.models.token_ids).
    with pytest.raises(
        ValueError,
        match=r"^BertBackbone\(\.\.\.\): segment id 5 is outside "
        r"\[0, num_segments=2\)\.$",
    ):
        backbone(inputs)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="divisible"):
        BertBackbone(50, num_heads=3, hidden_dim=16)
    with pytest.raises(ValueError, match="num_classes"):
        BertClassifier(BertBackbone(50, **SIZE), num_classes=0)


# ---- preprocessing and masking -------------------------------------------------


def test_masking_skips_special_tokens_and_padding_and_reaches_the_rate():
    texts = _data()[0]
    preprocessor = BertMaskedLMPreprocessor(tokenizer(), sequence_length=24)
    special = set(preprocessor.tokenizer.special_token_ids) | {
        preprocessor.tokenizer.token_to_id("[UNK]")
    }
    chosen = real = mask_kept = mask_replaced = 0
    for _ in range(3):  # masks are drawn anew each pass
        x, y, weights = preprocessor(texts)
        x = {k: to_numpy(v) for k, v in x.items()}
        y, weights = to_numpy(y), to_numpy(weights)
        clean = to_numpy(
            BertClassifierPreprocessor(
                preprocessor.tokenizer, sequence_length=24
            )(texts)["token_ids"]
        )
        for row in range(len(texts)):
            picked = x["mask_positions"][row][weights[row] > 0].astype(int)
            assert len(set(picked.tolist())) == len(picked)
            for position in picked:
                assert clean[row, position] not in special
                assert x["padding_mask"][row, position]
            np.testing.assert_array_equal(
                y[row][weights[row] > 0], clean[row, picked]
            )
            now = x["token_ids"][row, picked]
            mask_replaced += int((now == 4).sum())
            mask_kept += int((now == clean[row, picked]).sum())
            chosen += len(picked)
            real += int(np.isin(clean[row], list(special), invert=True).sum())
    assert 0.12 < chosen / real < 0.18, chosen / real
    assert 0.7 < mask_replaced / chosen < 0.9
    assert 0.04 < mask_kept / chosen < 0.2


def test_the_classifier_preprocessor_packs_cls_text_sep():
    preprocessor = BertClassifierPreprocessor(tokenizer(), sequence_length=12)
    x = preprocessor(
        [
            "a great film",
            "the plot was awful and the acting "
            "was boring and the music was dull too",
        ]
    )
    ids = to_numpy(x["token_ids"])
    assert ids.shape == (2, 12)
    assert ids[0, 0] == 2 and 3 in ids[0] and ids[0, -1] == 0
    assert ids[1, 0] == 2 and ids[1, -1] == 3  # cut, then [SEP]
    np.testing.assert_array_equal(to_numpy(x["padding_mask"]), ids != 0)


def test_line_break_tags_are_dropped():
    assert strip_markup("good.<br /><br />Bad.") == "good.  Bad."
    preprocessor = BertClassifierPreprocessor(tokenizer(), sequence_length=12)
    a = to_numpy(preprocessor(["a great<br />film"])["token_ids"])
    b = to_numpy(preprocessor(["a great film"])["token_ids"])
    np.testing.assert_array_equal(a, b)


# ---- fill_mask, errors ----------------------------------------------------------


def test_fill_mask_ranks_tokens_for_every_mask():
    mlm = make_masked_lm()
    out = mlm.fill_mask(
        ["the film was [MASK]", "a [MASK] [MASK] plot"], top_k=3
    )
    assert [len(per_text) for per_text in out] == [1, 2]
    for per_text in out:
        for candidates in per_text:
            assert len(candidates) == 3
            probabilities = [p for _, p in candidates]
            assert probabilities == sorted(probabilities, reverse=True)
            assert all(isinstance(t, str) for t, _ in candidates)
    # The model's own logits at the masked position, by hand.
    ids = [
        2,
        *np.asarray(mlm.preprocessor.tokenizer("the film was [MASK]")).tolist(),
        3,
    ]
    ids = np.array([ids + [0] * (24 - len(ids))], "int32")
    logits = to_numpy(
        mlm(
            {
                "token_ids": ids,
                "segment_ids": np.zeros_like(ids),
                "padding_mask": ids != 0,
                "mask_positions": np.array([[4]], "int32"),
            }
        )
    )
    best = mlm.preprocessor.tokenizer.id_to_token(int(logits[0, 0].argmax()))
    assert out[0][0][0][0] == best


def test_fill_mask_errors_are_clear():
    mlm = make_masked_lm()
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        mlm.fill_mask("no mask here")
    with pytest.raises(ValueError, match="no texts"):
        mlm.fill_mask([])
    for top_k in (0, 2.5, "3"):
        with pytest.raises(ValueError, match="top_k must be an integer in"):
            mlm.fill_mask("the [MASK]", top_k=top_k)
    # A long text is quoted by its start, not echoed whole.
    with pytest.raises(ValueError, match="no \\[MASK\\]") as error:
        mlm.fill_mask("x" * 100_000)
    assert len(str(error.value)) < 200 and "..." in str(error.value)
    with pytest.raises(TypeError, match="fill_mask\\(\\) reads text"):
        mlm.fill_mask(None)
    # No known token besides the mask (only emoji): a warning, once.
    with pytest.warns(
        UserWarning,
        match=r"fill_mask\(\): 1 of 2 texts have no token in the model's "
        r"vocabulary \(the first at index 1",
    ):
        mlm.fill_mask(["the [MASK]", "\U0001f600 [MASK] \U0001f600"], top_k=1)


def test_predict_on_no_texts_is_a_clear_error():
    classifier = BertClassifier(
        BertBackbone(tokenizer().vocabulary_size(), **SIZE),
        BertClassifierPreprocessor(tokenizer(), 24),
    )
    with pytest.raises(ValueError, match="no texts"):
        classifier.predict([])
    with pytest.raises(
        TypeError, match="predict\\(\\) reads text, but got int"
    ):
        classifier.predict(["a fine film", 7])
    with pytest.raises(
        TypeError, match="predict\\(\\) reads text, but got None"
    ):
        classifier.predict(None)
    with pytest.raises(ValueError, match="but got a nested list"):
        classifier.predict([["a fine film", "dull"]])
    # Only emoji: every WordPiece token is [UNK]. A warning naming how
    # many, and the share of [UNK] per text (pairs: over both segments).
    emoji = "\U0001f600 \U0001f600"
    np.testing.assert_allclose(
        classifier.unknown_token_share(["a fine film", emoji, "film " + emoji]),
        [0, 1, 2 / 3],
    )
    with pytest.warns(
        UserWarning,
        match=r"predict\(\): 1 of 2 texts have no token in the model's "
        r"vocabulary \(the first at index 1: '\U0001f600",
    ):
        classifier.predict(["a fine film", emoji], verbose=0)
    np.testing.assert_allclose(
        classifier.unknown_token_share((["a fine", emoji], ["film", emoji])),
        [0, 1],
    )
    # Pairs of segments (a tuple of two batches) are text too, as arrays or
    # lists, and give the same probabilities either way.
    first, second = ["a fine film", "dull"], ["truly", "and too long"]
    from_lists = classifier.predict((first, second), verbose=0)
    from_arrays = classifier.predict(
        (np.array(first), np.array(second)), verbose=0
    )
    np.testing.assert_allclose(from_lists, from_arrays, atol=1e-6)
    assert from_lists.shape == (2, 1)


# ---- pretraining -> fine-tuning, saving -------------------------------------------


def test_pretrain_save_load_fine_tune_save_load(tmp_path):
    texts, labels, _ = _data()
    mlm = make_masked_lm()
    mlm.compile(optimizer=keras.optimizers.AdamW(3e-3))
    history = mlm.fit(texts, epochs=2, batch_size=32, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]
    path = tmp_path / "mlm.keras"
    mlm.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.fill_mask("the [MASK] was great", top_k=2) == (
        mlm.fill_mask("the [MASK] was great", top_k=2)
    )

    classifier = BertClassifier.from_pretrained(str(path), num_classes=1)
    # Every backbone weight is the pretrained one.
    for mine, pretrained in zip(
        classifier.backbone.weights, loaded.backbone.weights
    ):
        np.testing.assert_array_equal(to_numpy(mine), to_numpy(pretrained))
    assert (
        classifier.preprocessor.sequence_length == SIZE["max_sequence_length"]
    )
    classifier.compile(optimizer=keras.optimizers.AdamW(1e-3))
    history = classifier.fit(texts, labels, epochs=1, batch_size=32, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    reviews = ["an utterly wonderful film", "a waste of two hours"]
    before = classifier.predict(reviews, verbose=0)
    assert before.shape == (2, 1) and np.all((before > 0) & (before < 1))
    path = tmp_path / "classifier.keras"
    classifier.save(path)
    after = keras.saving.load_model(path).predict(reviews, verbose=0)
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_masked_lm_loss_is_the_mean_over_real_masked_tokens():
    mlm = make_masked_lm()
    mlm.compile()
    vocabulary = mlm.backbone.vocabulary_size
    inputs = random_inputs(vocabulary=vocabulary, pad_from=7)
    inputs["mask_positions"] = np.array([[1, 3, 0], [2, 0, 0]], "int32")
    labels = np.array([[5, 9, 0], [7, 0, 0]], "int32")
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")  # 3 real of 6
    logits = to_numpy(mlm(inputs)).astype("float64")
    top = logits.max(-1, keepdims=True)
    log_probs = (
        logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    )
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    expected = (nll * weights).sum() / weights.sum()
    loss = keras.Model.evaluate(
        mlm, inputs, labels, sample_weight=weights, verbose=0, return_dict=True
    )["loss"]
    np.testing.assert_allclose(loss, expected, rtol=1e-4)


def test_from_pretrained_fine_tunes_in_the_policy_asked_for():
    mlm = make_masked_lm()  # float32
    shared = BertClassifier.from_pretrained(mlm, num_classes=1)
    assert shared.backbone is mlm.backbone  # no dtype: the LM's own
    mixed = BertClassifier.from_pretrained(
        mlm, num_classes=1, dtype="mixed_bfloat16"
    )
    assert mixed.backbone is not mlm.backbone
    assert mixed.backbone.compute_dtype == "bfloat16"
    assert mixed.backbone.variable_dtype == "float32"
    for mine, pretrained in zip(mixed.backbone.weights, mlm.backbone.weights):
        np.testing.assert_array_equal(to_numpy(mine), to_numpy(pretrained))
    same = BertClassifier.from_pretrained(mlm, num_classes=1, dtype="float32")
    assert same.backbone is mlm.backbone
    reviews = ["an utterly wonderful film", "a waste of two hours"]
    mixed.set_weights(shared.get_weights())  # the same head too
    np.testing.assert_allclose(
        mixed.predict(reviews, verbose=0),
        shared.predict(reviews, verbose=0),
        atol=2e-2,
    )


def test_classifier_fit_holds_out_a_validation_split():
    texts, labels, _ = _data()
    classifier = BertClassifier.from_pretrained(make_masked_lm(), num_classes=1)
    classifier.compile(optimizer=keras.optimizers.AdamW(1e-3))
    history = classifier.fit(
        texts, labels, epochs=1, batch_size=32, validation_split=0.25, verbose=0
    )
    assert np.isfinite(history.history["val_loss"][0])


def test_classifier_refuses_bad_labels_before_training():
    texts = _data()[0][:4]
    classifier = BertClassifier.from_pretrained(make_masked_lm(), num_classes=2)
    classifier.compile()
    for labels, error, message in (
        (
            [0, 1, 2, 5],
            ValueError,
            r"^fit\(\): label 2 at index 2 is outside "
            "the classes: labels are class ids 0..1 for this 2-class",
        ),
        ([0, 1, np.nan, 1], ValueError, "label nan at index 2 is not a number"),
        (["pos"] * 4, TypeError, "label 'pos' at index 0 is a str"),
        ([1, 0, 1, 0, 1], ValueError, "4 examples but 5 labels"),
    ):
        with pytest.raises(error, match=message) as info:
            classifier.fit(texts, labels, epochs=1, verbose=0)
        assert "\n" not in str(info.value)
    assert int(classifier.optimizer.iterations) == 0


def test_from_pretrained_refuses_other_models():
    with pytest.raises(ValueError, match="BertMaskedLM"):
        BertClassifier.from_pretrained(keras.Sequential([keras.Input((2,))]))


def test_configs_round_trip():
    mlm = make_masked_lm()
    config = mlm.backbone.get_config()
    again = BertBackbone.from_config(config)
    assert again.get_config() == config
    config = mlm.preprocessor.get_config()
    assert config["mask_selection_length"] == 5  # ceil(1.25 * .15 * 24)
    classifier = BertClassifier(mlm.backbone, num_classes=3, dropout=0.2)
    config = classifier.get_config()
    assert config["num_classes"] == 3 and config["dropout"] == 0.2


def test_presets_build_their_sizes():
    preprocessor = BertMaskedLMPreprocessor.from_preset(
        "cpu_mini", tokenizer=tokenizer()
    )
    assert preprocessor.sequence_length == 256
    # The smoke preset has 64 positions: too few for 256-token packs.
    with pytest.raises(
        ValueError,
        match=r"BertMaskedLM: the preprocessor "
        r"packs 256 tokens but the backbone has 64 positions.*"
        r"backbone_max_sequence_length=256",
    ):
        BertMaskedLM.from_preset("smoke", preprocessor=preprocessor)
    mlm = BertMaskedLM.from_preset(
        "smoke", preprocessor=preprocessor, backbone_max_sequence_length=256
    )
    assert mlm.backbone.hidden_dim == 32 and mlm.backbone.num_layers == 2
    with pytest.raises(
        ValueError, match="BertTextClassifier: the preprocessor"
    ):
        BertClassifier(
            mlm.backbone,
            BertClassifierPreprocessor(tokenizer(), sequence_length=300),
        )
    classifier = BertClassifier.from_preset(
        "cpu_mini",
        preprocessor=BertClassifierPreprocessor.from_preset(
            "cpu_mini", tokenizer=tokenizer()
        ),
        backbone_num_layers=1,
    )
    assert classifier.backbone.max_sequence_length == 256
    assert classifier.preprocessor.sequence_length == 256
    with pytest.raises(ValueError, match="Unknown bert preset"):
        BertBackbone.from_preset("huge", vocabulary_size=10)


def test_mixed_bfloat16_gives_float32_outputs():
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        mlm = make_masked_lm(dtype="mixed_bfloat16")
        inputs = random_inputs(vocabulary=mlm.backbone.vocabulary_size)
        inputs["mask_positions"] = np.array([[1], [2]], "int32")
        logits = mlm(inputs)
        assert ops.dtype(logits) == "float32"
        assert np.all(np.isfinite(to_numpy(logits)))
        classifier = BertClassifier(mlm.backbone)
        inputs.pop("mask_positions")
        probabilities = classifier(inputs)
        assert ops.dtype(probabilities) == "float32"
        assert np.all(np.isfinite(to_numpy(probabilities)))
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def test_masked_lm_head_equals_keras_hub_and_runs_in_bfloat16():
    from zoo.layers import TokenEmbedding
    from zoo.models.bert import MaskedLMHead

    embedding = TokenEmbedding(30, 8)
    embedding.build((None, None))
    ours = MaskedLMHead(
        token_embedding=embedding, intermediate_activation="gelu"
    )
    theirs = keras_hub.layers.MaskedLMHead(
        token_embedding=embedding, intermediate_activation="gelu"
    )
    hidden = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    positions = np.array([[1, 4], [0, 2]], "int32")
    ours(hidden, positions), theirs(hidden, positions)
    randomize(theirs, seed=4)
    for mine, source in zip(ours.weights, theirs.weights):
        mine.assign(source)
    np.testing.assert_allclose(
        to_numpy(ours(hidden, positions)),
        to_numpy(theirs(hidden, positions)),
        atol=1e-5,
    )
    # keras-hub's head adds a float32 bias to bfloat16 logits, which
    # TensorFlow refuses; this one runs everywhere.
    embedding = TokenEmbedding(30, 8, dtype="mixed_bfloat16")
    embedding.build((None, None))
    head = MaskedLMHead(
        token_embedding=embedding,
        intermediate_activation="gelu",
        dtype="mixed_bfloat16",
    )
    out = head(ops.cast(hidden, "bfloat16"), positions)
    assert out.shape == (2, 2, 30)
    assert np.all(np.isfinite(to_numpy(ops.cast(out, "float32"))))


def test_attention_scores_are_distributions_over_real_tokens():
    backbone = BertBackbone(50, **SIZE)
    randomize(backbone, seed=5)
    inputs = random_inputs(pad_from=6)
    for layer in (0, -1):
        scores = to_numpy(backbone.attention_scores(inputs, layer))
        assert scores.shape == (2, SIZE["num_heads"], 10, 10)
        np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
        assert np.all(scores[1, :, :, 6:] < 1e-6)  # padded keys
    with pytest.raises(IndexError):
        backbone.attention_scores(inputs, 5)


def test_head_tail_truncation_keeps_a_long_review_s_ending(tmp_path):
    texts = [
        "the plot was awful and the acting was boring and the music was "
        "dull and the ending was great",
        "a great film",
    ]
    preprocessor = BertClassifierPreprocessor(
        tokenizer(), sequence_length=12, truncate="head_tail", head_length=3
    )
    tokens = [to_numpy(preprocessor.tokenizer(t)) for t in texts]
    ids = to_numpy(preprocessor(texts)["token_ids"])
    assert len(tokens[0]) > 10  # long enough to be cut
    np.testing.assert_array_equal(ids[0, 1:4], tokens[0][:3])
    np.testing.assert_array_equal(ids[0, 4:11], tokens[0][-7:])
    np.testing.assert_array_equal(ids[1, 1 : 1 + len(tokens[1])], tokens[1])
    # The classifier keeps the cut through .keras: the same predictions.
    backbone = BertBackbone(preprocessor.tokenizer.vocabulary_size(), **SIZE)
    classifier = BertClassifier(backbone, preprocessor, num_classes=1)
    loaded = keras_round_trip(classifier, tmp_path)
    assert loaded.preprocessor.truncate == "head_tail"
    assert loaded.preprocessor.head_length == 3
    np.testing.assert_allclose(
        loaded.predict(texts, verbose=0),
        classifier.predict(texts, verbose=0),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match='truncate must be "round_robin"'):
        BertClassifierPreprocessor(tokenizer(), truncate="middle")
    with pytest.raises(ValueError, match='applies to truncate="head_tail"'):
        BertClassifierPreprocessor(tokenizer(), head_length=3)
