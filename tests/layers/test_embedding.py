"""TokenEmbedding under the current backend: a table lookup that refuses
out-of-range ids (JAX would give NaN rows), masks padding, reverses to
logits with the tied matrix, and survives config and `.keras` round trips."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip, keras_round_trip, to_numpy
from zoo.layers import PositionalEmbedding, TokenEmbedding


def test_lookup_and_tied_reverse_match_numpy():
    layer = TokenEmbedding(10, 4)
    ids = np.array([[1, 2, 9], [0, 3, 3]], "int32")
    vectors = to_numpy(layer(ids))
    table = to_numpy(layer.embeddings)
    np.testing.assert_allclose(vectors, table[ids], rtol=1e-6)
    logits = to_numpy(layer(vectors, reverse=True))
    np.testing.assert_allclose(logits, vectors @ table.T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tie_weights", [True, False])
@pytest.mark.parametrize("soft_cap", [None, 2.0])
def test_reverse_runs_in_the_compute_dtype_under_mixed_precision(
    tie_weights, soft_cap
):
    # Keras' own layer left reverse_dtype=None to type promotion: a float32
    # product with the float32 table. In bfloat16 here, as keras-hub's.
    layer = TokenEmbedding(
        10,
        4,
        tie_weights=tie_weights,
        logit_soft_cap=soft_cap,
        dtype="mixed_bfloat16",
    )
    hidden = np.random.default_rng(0).normal(size=(2, 3, 4))
    layer.build((2, 3))
    logits = layer(keras.ops.cast(hidden, "bfloat16"), reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "bfloat16"
    kernel = (
        to_numpy(layer.embeddings).T
        if tie_weights
        else to_numpy(layer.reverse_embeddings)
    )
    expected = hidden @ kernel
    if soft_cap:
        expected = np.tanh(expected / soft_cap) * soft_cap
    np.testing.assert_allclose(
        to_numpy(keras.ops.cast(logits, "float32")),
        expected,
        rtol=0.05,
        atol=0.05,
    )
    # An explicit reverse_dtype still rules.
    layer.reverse_dtype = "float32"
    logits = layer(keras.ops.cast(hidden, "bfloat16"), reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"


def test_positional_reverse_runs_in_the_compute_dtype_inside_a_model():
    # The path a GPT takes: PositionalEmbedding's reverse calls its token
    # table from its own call, inside a functional model. With Keras' own
    # default that product came out (and its gradients ran) in float32.
    embed = PositionalEmbedding(
        12, 8, 4, mask_zero=False, dtype="mixed_bfloat16"
    )
    embed(np.array([[1, 2]], "int32"))  # builds the table
    hidden = keras.Input((None, 4), dtype="bfloat16")
    logits = embed(hidden, reverse=True)
    assert keras.backend.standardize_dtype(logits.dtype) == "bfloat16"
    out = embed(keras.ops.ones((1, 2, 4), "bfloat16"), reverse=True)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


@pytest.mark.parametrize("bad", [10, 57, -1])
def test_out_of_range_ids_are_an_error_naming_the_id(bad):
    layer = TokenEmbedding(10, 4, name="words")
    ids = np.array([[1, bad, 2]], "int32")
    with pytest.raises(ValueError, match=rf"words: token id {bad} is outside"):
        layer(ids)
    # A generation loop that made the ids itself may skip the check.
    layer(np.array([[1, 2]], "int32"), check_ids=False)


def test_mask_zero_hides_padding_from_the_layers_after_it():
    ids = keras.Input((None,), dtype="int32")
    pooled = keras.layers.GlobalAveragePooling1D()(
        TokenEmbedding(10, 4, mask_zero=True)(ids)
    )
    model = keras.Model(ids, pooled)
    short = np.array([[4, 5, 6]], "int32")
    padded = np.array([[4, 5, 6, 0, 0]], "int32")
    np.testing.assert_allclose(
        to_numpy(model(padded)), to_numpy(model(short)), rtol=1e-6
    )


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_a_quantised_table_keeps_the_padding_mask(mode, tmp_path):
    # Keras' ReversibleEmbedding attaches the id mask in `call` but not in
    # its quantised calls: the mean below would then count the padding.
    ids = np.array([[1, 2, 0, 0], [3, 0, 0, 0]], "int32")
    inputs = keras.Input((None,), dtype="int32")
    embedding = TokenEmbedding(10, 8, mask_zero=True)
    outputs = keras.layers.GlobalAveragePooling1D()(embedding(inputs))
    model = keras.Model(inputs, outputs)
    model(ids)
    embedding.quantize(mode, type_check=False)
    vectors = to_numpy(embedding(ids))
    assert to_numpy(embedding.compute_mask(ids)).tolist() == (ids > 0).tolist()
    expected = np.stack([vectors[0, :2].mean(0), vectors[1, :1].mean(0)])
    np.testing.assert_allclose(to_numpy(model(ids)), expected, atol=1e-6)
    assert embedding.compute_mask(to_numpy(vectors)) is None  # reverse inputs
    reloaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(to_numpy(reloaded(ids)), expected, atol=1e-6)


def test_config_and_keras_round_trips(tmp_path):
    layer = TokenEmbedding(10, 4, tie_weights=False, mask_zero=True)
    clone = config_round_trip(layer)
    assert isinstance(clone, TokenEmbedding)
    assert clone.get_config() == layer.get_config()

    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, TokenEmbedding(10, 4, mask_zero=True)(ids))
    x = np.array([[1, 2, 0]], "int32")
    loaded = keras_round_trip(model, tmp_path)
    assert isinstance(loaded.layers[-1], TokenEmbedding)
    np.testing.assert_allclose(to_numpy(loaded(x)), to_numpy(model(x)))
    with pytest.raises(ValueError, match="outside"):
        loaded(np.array([[12]], "int32"))


def test_mixed_bfloat16():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = TokenEmbedding(10, 4)
    out = layer(np.array([[1, 2]], "int32"))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert np.isfinite(to_numpy(out)).all()


# ---- PositionalEmbedding's reverse direction (a language model's output) ----


@pytest.mark.parametrize("tie_weights", [True, False])
def test_positional_embedding_reverse_is_the_output_projection(tie_weights):
    layer = PositionalEmbedding(
        12, 8, 4, tie_weights=tie_weights, mask_zero=False
    )
    ids = np.array([[1, 2, 3]], "int32")
    hidden = to_numpy(layer(ids))
    logits = to_numpy(layer(hidden, reverse=True))
    table = to_numpy(layer.token_embedding.embeddings)
    if tie_weights:
        expected = hidden @ table.T
        assert len(layer.weights) == 2  # tokens and positions
    else:
        expected = hidden @ to_numpy(layer.token_embedding.reverse_embeddings)
        assert len(layer.weights) == 3
    assert logits.shape == (1, 3, 12)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)


def test_a_tied_language_model_trains_one_matrix_both_ways(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(12, 8, 4, mask_zero=False, name="embed")
    hidden = keras.layers.Dense(4)(embed(ids))
    model = keras.Model(ids, embed(hidden, reverse=True))
    assert tuple(model.output.shape) == (None, None, 12)
    model.compile(
        optimizer=keras.optimizers.SGD(0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = np.array([[1, 2, 3, 4]], "int32")
    before = to_numpy(embed.token_embedding.embeddings).copy()
    losses = [
        model.train_on_batch(x, np.array([[2, 3, 4, 5]])) for _ in range(5)
    ]
    assert losses[-1] < losses[0]
    assert np.abs(to_numpy(embed.token_embedding.embeddings) - before).max() > 0
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded(x)), to_numpy(model(x)), atol=1e-6
    )


def test_positional_embedding_reverse_carries_no_id_mask():
    layer = PositionalEmbedding(12, 8, 4, mask_zero=True)
    hidden = np.ones((1, 3, 4), "float32")
    assert layer.compute_mask(hidden) is None


def test_scale_tokens_multiplies_the_token_vectors_by_sqrt_dim():
    plain = PositionalEmbedding(
        12, 8, 4, positions="sinusoidal", mask_zero=False
    )
    scaled = PositionalEmbedding(
        12, 8, 4, positions="sinusoidal", mask_zero=False, scale_tokens=True
    )
    ids = np.array([[1, 2, 3]], "int32")
    plain(ids), scaled(ids)  # build both
    scaled.set_weights(plain.get_weights())
    table = to_numpy(plain.token_embedding.embeddings)[ids]
    np.testing.assert_allclose(
        to_numpy(scaled(ids)) - to_numpy(plain(ids)),
        table * (2.0 - 1.0),
        rtol=1e-5,
        atol=1e-6,
    )
    assert scaled.get_config()["scale_tokens"] is True


def test_check_ids_is_an_argument_of_symbolic_calls_too():
    layer = TokenEmbedding(10, 8)
    ids = keras.Input((4,), dtype="int32")
    assert layer(ids, check_ids=False).shape == (None, 4, 8)
    hidden = keras.Input((4, 8))
    assert layer(hidden, reverse=True, check_ids=False).shape == (None, 4, 10)
