"""The course's text classifiers (zoo.models.text_classifier) under the
current backend: each pooling against a NumPy reference of its formula,
padding never changing a prediction, the attention weights, the backbones'
features, presets, raw strings through a `.keras` round trip, training on
raw strings, mixed precision and the errors."""

import warnings

import keras
import numpy as np
import pytest

from tests.helpers import keras_round_trip, np_softmax, to_numpy
from zoo.models import (
    AttentionPoolingBackbone,
    MeanPoolingBackbone,
    RecurrentAttentionBackbone,
    TextClassifier,
    TextClassifierBackbone,
    TextClassifierPreprocessor,
    TransformerEncoderBackbone,
    attention_model,
)
from zoo.models.text_classifier import QUERY_MAP_SCALE

VOCAB, SEQ, DIM = 40, 12, 8
KINDS = ("mean", "attention", "query", "rnn", "transformer")
TEXTS = [
    "a wonderful film with a wonderful cast",
    "a dull and boring film",
    "wonderful",
    "boring boring plot and a dull cast",
]
LABELS = np.array([1, 0, 1, 0], "float32")


def _token_ids():
    ids = np.random.default_rng(0).integers(2, VOCAB, (4, SEQ)).astype("int32")
    ids[1, 7:] = 0
    ids[2, 2:] = 0
    ids[3, 1:] = 0  # a one-word review
    return ids


def _backbone(
    kind, vocabulary_size=VOCAB, sequence_length=SEQ, dim=DIM, **kwargs
):
    if kind == "mean":
        return MeanPoolingBackbone(vocabulary_size, dim, **kwargs)
    if kind in ("attention", "query"):
        query = "computed" if kind == "query" else "learned"
        return AttentionPoolingBackbone(
            vocabulary_size, dim, query=query, **kwargs
        )
    if kind == "rnn":
        return RecurrentAttentionBackbone(
            vocabulary_size, dim, rnn_units=4, **kwargs
        )
    return TransformerEncoderBackbone(
        vocabulary_size,
        sequence_length,
        dim,
        num_layers=1,
        num_heads=2,
        intermediate_dim=8,
        **kwargs,
    )


def _model(kind, dropout=0.3, **kwargs):
    """The task on word ids (no preprocessor)."""
    return TextClassifier(
        _backbone(kind, dropout=dropout, **kwargs), dropout=dropout
    )


def _weights(layer):
    return [to_numpy(w) for w in layer.weights]


def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("kind", ["mean", "attention", "query"])
def test_prediction_matches_the_numpy_formula(kind):
    model = _model(kind)  # dropout is off at inference
    backbone = model.backbone
    if kind == "query":
        # It starts as `attention` (W = 0, W_v = I): randomise everything
        # so that every term of the formula shows.
        rng = np.random.default_rng(1)
        backbone.set_weights(
            [
                rng.normal(size=w.shape).astype("float32")
                for w in backbone.get_weights()
            ]
        )
    ids = _token_ids()
    (table,) = _weights(backbone.get_layer("embedding"))
    x = table[ids]
    real = (ids != 0)[..., None]
    mean = (x * real).sum(1) / real.sum(1)
    if kind == "mean":
        pooled = mean
    else:
        pooling = backbone.get_layer("attention_pooling")
        if kind == "attention":
            # log p(a_i | t) = const + q . x_i
            logits = x @ to_numpy(pooling.query_vector)
            values = x
        else:
            # q = W mean(x) + b, values v(x_i) = W_v x_i + b_v, the
            # kernels stored divided by map_scale.
            scale = pooling.map_scale
            assert scale == QUERY_MAP_SCALE
            w_q, b_q = _weights(pooling.query_dense)
            w_v, b_v = _weights(pooling.value_dense)
            logits = np.einsum("bsd,bd->bs", x, mean @ (scale * w_q) + b_q)
            values = x @ (scale * w_v) + b_v
        weights = np_softmax(np.where(real[..., 0], logits, -np.inf))
        pooled = np.einsum("bs,bsd->bd", weights, values)
    np.testing.assert_allclose(
        to_numpy(backbone(ids)["pooled_output"]), pooled, rtol=1e-4, atol=1e-6
    )
    kernel, bias = _weights(model.get_layer("classifier"))
    expected = _np_sigmoid(pooled @ kernel + bias)
    np.testing.assert_allclose(
        to_numpy(model(ids)), expected, rtol=1e-4, atol=1e-6
    )


@pytest.mark.parametrize("kind", KINDS)
def test_backbones_return_sequence_and_pooled_features(kind):
    backbone = _backbone(kind)
    features = backbone(_token_ids())
    assert set(features) == {"sequence_output", "pooled_output"}
    width = 8 if kind == "rnn" else DIM
    assert tuple(features["sequence_output"].shape) == (4, SEQ, width)
    assert tuple(features["pooled_output"].shape) == (4, width)
    clone = type(backbone).from_config(backbone.get_config())
    assert clone.get_config() == backbone.get_config()


@pytest.mark.parametrize("kind", KINDS)
def test_padding_never_changes_a_prediction(kind):
    model = _model(kind, sequence_length=2 * SEQ)
    ids = _token_ids()
    padded = np.concatenate([ids, np.zeros_like(ids)], axis=1)
    np.testing.assert_allclose(
        to_numpy(model(padded)),
        to_numpy(model(ids)),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("kind", ["attention", "query", "rnn", "transformer"])
def test_attention_weights_are_a_distribution_over_the_real_words(kind):
    backbone = _backbone(kind)
    ids = _token_ids()
    weights = to_numpy(attention_model(backbone)(ids))
    assert weights.shape == ids.shape
    np.testing.assert_array_equal(weights[ids == 0], 0.0)
    np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(weights[3, 0], 1.0, rtol=1e-6)


def test_mean_baseline_has_no_attention_weights():
    assert attention_model(_backbone("mean")) is None


def test_a_zero_query_starts_as_the_mean_baseline():
    attention = _model("attention", query_initializer="zeros")
    mean = _model("mean")
    mean.backbone.get_layer("embedding").set_weights(
        attention.backbone.get_layer("embedding").get_weights()
    )
    mean.get_layer("classifier").set_weights(
        attention.get_layer("classifier").get_weights()
    )
    ids = _token_ids()
    np.testing.assert_allclose(
        to_numpy(attention(ids)), to_numpy(mean(ids)), rtol=1e-5, atol=1e-6
    )


def test_query_starts_as_the_attention_model():
    query = _model("query")
    attention = _model("attention")
    attention.backbone.get_layer("embedding").set_weights(
        query.backbone.get_layer("embedding").get_weights()
    )
    attention.get_layer("classifier").set_weights(
        query.get_layer("classifier").get_weights()
    )
    pooling = query.backbone.get_layer("attention_pooling")
    (w_q, b_q), (w_v, b_v) = (
        _weights(pooling.query_dense),
        _weights(pooling.value_dense),
    )
    assert not w_q.any() and not b_v.any()
    np.testing.assert_allclose(pooling.map_scale * w_v, np.eye(DIM), atol=1e-6)
    assert np.abs(b_q).max() > 0.01  # random, as attention's learned query
    attention.backbone.get_layer("attention_pooling").query_vector.assign(b_q)
    ids = _token_ids()
    np.testing.assert_allclose(
        to_numpy(query(ids)), to_numpy(attention(ids)), rtol=1e-5, atol=1e-6
    )


def test_query_map_scale_reaches_the_pooling():
    assert (
        _backbone("query").get_layer("attention_pooling").map_scale
        == QUERY_MAP_SCALE
    )
    pooling = _backbone("query", map_scale=0.5).get_layer("attention_pooling")
    assert pooling.map_scale == 0.5
    zeros = _backbone("query", query_initializer="zeros")
    # "zeros" zeroes b as well: the query model then starts as mean pooling.
    assert not _weights(zeros.get_layer("attention_pooling").query_dense)[
        1
    ].any()


def _embedding_table(backbone):
    layer = backbone.get_layer("embedding")
    return to_numpy(getattr(layer, "token_embedding", layer).embeddings)


@pytest.mark.parametrize("kind", KINDS)
def test_word_embeddings_start_at_each_kinds_scale(kind):
    table = _embedding_table(_backbone(kind, 500, dim=64))
    if kind == "rnn":  # unit variance: what the GRU's kernels expect
        assert abs(table.std() - 1.0) < 0.03, table.std()
    else:  # Keras' uniform(-0.05, 0.05)
        assert np.abs(table).max() <= 0.05 and table.std() > 0.02
    zeros = _backbone(kind, 500, dim=64, embeddings_initializer="zeros")
    assert not _embedding_table(zeros).any()  # an explicit initializer wins


def _classifier(kind="attention"):
    preprocessor = TextClassifierPreprocessor(
        max_tokens=VOCAB, sequence_length=SEQ
    )
    preprocessor.adapt(TEXTS)
    backbone = _backbone(kind, preprocessor.vocabulary_size)
    classifier = TextClassifier(backbone, preprocessor)
    classifier.compile(optimizer=keras.optimizers.Adam(0.05))
    return classifier


@pytest.mark.parametrize("kind", ["mean", "attention", "rnn"])
def test_raw_strings_in_probabilities_out_through_a_keras_round_trip(
    kind, tmp_path
):
    classifier = _classifier(kind)
    expected = np.asarray(classifier.predict(TEXTS, verbose=0))
    assert expected.shape == (4, 1)
    assert ((expected > 0) & (expected < 1)).all()
    loaded = keras_round_trip(classifier, tmp_path)
    assert isinstance(loaded, TextClassifier)
    assert loaded.preprocessor.get_vocabulary() == (
        classifier.preprocessor.get_vocabulary()
    )
    np.testing.assert_allclose(
        np.asarray(loaded.predict(TEXTS, verbose=0)),
        expected,
        rtol=1e-5,
        atol=1e-6,
    )
    weights, ids = loaded.attention_weights(TEXTS)
    assert ids.shape == (4, SEQ)
    if kind == "mean":
        assert weights is None
    else:
        np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-5)


# rnn and transformer train end to end in tests/recipes (every --model under
# --smoke); compiling them again here would double the suite's slowest tests.
@pytest.mark.parametrize("kind", ["mean", "attention", "query"])
def test_training_on_raw_strings_lowers_the_loss(kind):
    classifier = _classifier(kind)
    history = classifier.fit(
        TEXTS, LABELS, batch_size=4, epochs=8, shuffle=False, verbose=0
    )
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[-1] < losses[0]


def test_entropy_penalty_is_added_to_the_training_loss():
    ids, labels = _token_ids(), LABELS[:, None]
    plain = _model("attention", dropout=0.0)
    penalised = _model("attention", dropout=0.0, entropy_weight=1.0)
    penalised.set_weights(plain.get_weights())
    for model in (plain, penalised):
        model.compile(optimizer="sgd", metrics=None)
    weights = to_numpy(attention_model(plain.backbone)(ids))
    safe = np.where(weights > 0, weights, 1.0)
    entropy = -(weights * np.log(safe)).sum(1).mean()
    gap = (
        penalised.train_on_batch(ids, labels, return_dict=True)["loss"]
        - plain.train_on_batch(ids, labels, return_dict=True)["loss"]
    )
    np.testing.assert_allclose(gap, entropy, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_bfloat16_keeps_a_float32_probability(kind):
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = _model(kind)
    out = model(_token_ids())
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    out = to_numpy(out)
    assert np.isfinite(out).all() and ((out >= 0) & (out <= 1)).all()


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="query must be"):
        AttentionPoolingBackbone(VOCAB, query="both")
    with pytest.raises(ValueError, match="rnn_cell"):
        RecurrentAttentionBackbone(VOCAB, rnn_cell="tanh")
    with pytest.raises(ValueError, match="num_classes"):
        TextClassifier(_backbone("mean"), num_classes=0)
    backbone = _backbone("attention")
    with pytest.raises(ValueError, match=f"token id {VOCAB + 3} is outside"):
        backbone(np.array([[1, VOCAB + 3, 2]], "int32"))
    with pytest.raises(ValueError, match="longer than sequence_length"):
        _backbone("transformer")(np.ones((1, SEQ + 1), "int32"))
    classifier = _classifier("mean")
    for empty in ([], np.array([], dtype=object)):
        with pytest.raises(ValueError, match="no texts"):
            classifier.predict(empty)
    for bad in ([3], [None], ["a dull film", 3.5], np.array([1, 2])):
        with pytest.raises(
            TypeError, match="predict\\(\\) reads text, but got"
        ):
            classifier.predict(bad)
    with pytest.raises(TypeError, match="fit\\(\\) reads text"):
        classifier.fit([1, 2], np.array([0, 1]))
    # None, a nested list, a 2-D array: one line naming what is expected.
    for call in (classifier.predict, classifier.attention_weights):
        name = call.__name__
        with pytest.raises(
            TypeError, match=f"{name}\\(\\) reads text, but got None: pass"
        ) as error:
            call(None)
        assert "\n" not in str(error.value)
        for nested in ([["a dull film", "dull"]], np.array([["a", "b"]])):
            with pytest.raises(
                ValueError,
                match=f"{name}\\(\\) reads a string or a list \\(or 1-D "
                "array\\) of strings, but got a (nested list|2-D array)",
            ) as error:
                call(nested)
            assert "\n" not in str(error.value)
    # A lone string, or a 0-d array holding one, is a batch of one.
    for lone in ("a dull film", np.array("a dull film")):
        assert np.asarray(classifier.predict(lone, verbose=0)).shape == (1, 1)


def test_texts_with_no_known_word_are_a_warning_and_a_share():
    """ "zzzz qqqq" got a confident probability without a word; now each
    predict call warns once (whatever the batches), naming how many texts
    have no known word, and unknown_token_share gives each text's share."""
    classifier = _classifier("mean")
    texts = [
        "zzzz qqqq",
        "a dull film",
        "schrecklich",
        "\U0001f600",
        "film zzzz",
    ]
    np.testing.assert_allclose(
        classifier.unknown_token_share(texts), [1, 0, 1, 1, 0.5]
    )
    np.testing.assert_allclose(
        classifier.preprocessor.unknown_token_share("dull"), [0.0]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.predict(texts, batch_size=1, verbose=0)
        classifier.attention_weights(texts[:2])
        classifier.predict(TEXTS, verbose=0)  # every word known: silent
    ours = [w for w in caught if "vocabulary" in str(w.message)]
    assert [str(w.message) for w in ours] == [
        "predict(): 3 of 5 texts have no token in the model's vocabulary "
        "(the first at index 0: 'zzzz qqqq'); what the model gives for them "
        "reflects none of their words.",
        "attention_weights(): 1 of 2 texts have no token in the model's "
        "vocabulary (the first at index 0: 'zzzz qqqq'); what the model "
        "gives for them reflects none of their words.",
    ]
    assert all(w.category is UserWarning for w in ours)
    assert all(w.filename == __file__ for w in ours)  # the caller's line


def test_fit_and_evaluate_refuse_bad_labels_before_training():
    """As scikit-learn's estimator checks: labels outside the classes, NaN,
    strings or a wrong count are one line before the first step."""
    import tensorflow as tf

    classifier = _classifier("mean")
    for labels, error, message in (
        (
            [0, 1, 2, 5],
            ValueError,
            r"^fit\(\): label 2 at index 2 is outside "
            "the classes: labels are 0 or 1",
        ),
        ([0, 1, np.nan, 1], ValueError, "label nan at index 2 is not a number"),
        (
            ["pos", "neg", "pos", "neg"],
            TypeError,
            "label 'pos' at index 0 is a str, not a number",
        ),
        ([1, 0, 1], ValueError, r"^fit\(\) got 4 examples but 3 labels"),
        (None, ValueError, r"^fit\(\) needs labels"),
    ):
        with pytest.raises(error, match=message) as info:
            classifier.fit(TEXTS, labels, epochs=1, verbose=0)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"^fit\(validation_data=...\): "):
        classifier.fit(
            TEXTS, LABELS, verbose=0, validation_data=(TEXTS[:2], [1, 3])
        )
    with pytest.raises(ValueError, match="4 examples but 2 sample weights"):
        classifier.fit(TEXTS, LABELS, sample_weight=[1.0, 2.0], verbose=0)
    with pytest.raises(TypeError, match="dataset of string labels"):
        classifier.fit(
            tf.data.Dataset.from_tensor_slices((TEXTS, ["p"] * 4)).batch(2),
            verbose=0,
        )
    with pytest.raises(ValueError, match=r"^evaluate\(\): label 7"):
        classifier.evaluate(TEXTS, [0, 1, 0, 7], verbose=0)
    assert int(classifier.optimizer.iterations) == 0  # nothing trained
    three = TextClassifier(_backbone("mean"), classifier.preprocessor, 3)
    with pytest.raises(ValueError, match="class ids 0..2 for this 3-class"):
        three.fit(TEXTS, [0, 1, 2, 3], verbose=0)


def test_presets_build_their_backbones_for_the_preprocessor():
    preprocessor = TextClassifierPreprocessor.from_preset(
        "imdb_transformer", max_tokens=VOCAB, sequence_length=SEQ
    )
    preprocessor.adapt(TEXTS)
    expected = {
        "imdb_mean": MeanPoolingBackbone,
        "imdb_query": AttentionPoolingBackbone,
        "imdb_rnn": RecurrentAttentionBackbone,
        "imdb_transformer": TransformerEncoderBackbone,
    }
    for preset, cls in expected.items():
        model = TextClassifier.from_preset(
            preset, preprocessor=preprocessor, backbone_embedding_dim=DIM
        )
        assert type(model.backbone) is cls, preset
        assert model.backbone.vocabulary_size == preprocessor.vocabulary_size
        assert model.dropout == 0.3
    rnn = TextClassifier.from_preset(
        "imdb_rnn", preprocessor=preprocessor
    ).backbone
    assert rnn.train_window == 128 and rnn.get_layer("train_window")
    transformer = TextClassifier.from_preset(
        "imdb_transformer", preprocessor=preprocessor
    )
    assert transformer.backbone.sequence_length == SEQ
    assert (
        TextClassifierBackbone.from_preset(
            "imdb_query", vocabulary_size=VOCAB
        ).query
        == "computed"
    )
    with pytest.raises(
        ValueError,
        match=r"backbone is AttentionPoolingBackbone, not MeanPoolingBackbone",
    ):
        MeanPoolingBackbone.from_preset("imdb_query", vocabulary_size=VOCAB)


def test_more_classes_give_a_softmax_and_its_loss():
    model = TextClassifier(_backbone("attention"), num_classes=3)
    probabilities = to_numpy(model(_token_ids()))
    assert probabilities.shape == (4, 3)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, rtol=1e-5)
    model.compile(optimizer="sgd")
    loss = model.train_on_batch(
        _token_ids(), np.array([0, 1, 2, 1]), return_dict=True
    )["loss"]
    assert np.isfinite(loss)


def test_a_training_window_reads_whole_texts_at_inference():
    model = _model("rnn", dropout=0.0, train_window=4)
    ids = _token_ids()
    assert model.backbone.get_layer("train_window").window == 4
    full = _model("rnn", dropout=0.0)
    full.set_weights(model.get_weights())
    np.testing.assert_allclose(
        to_numpy(model(ids)), to_numpy(full(ids)), rtol=1e-5, atol=1e-6
    )
    model.compile(optimizer="sgd", metrics=None)
    assert np.isfinite(
        model.train_on_batch(ids, LABELS[:, None], return_dict=True)["loss"]
    )
