"""SinusoidalPositionEncoding, LearnedPositionEmbedding and PositionalEmbedding,
under the current backend, checked against NumPy references."""

import keras
import numpy as np
import pytest

from tests.helpers import (
    config_round_trip,
    keras_round_trip,
    np_sinusoidal,
    random_array,
    to_numpy,
)
from zoo.layers import (
    LearnedPositionEmbedding,
    PositionalEmbedding,
    SinusoidalPositionEncoding,
)

ATOL = 1e-5
VOCAB, SEQ_LEN, DIM = 20, 12, 8


def _ids(shape, seed=0, pad_from=None):
    """Token ids in [1, VOCAB); positions >= pad_from[row] are padding (0)."""
    ids = (
        np.random.default_rng(seed)
        .integers(1, VOCAB, size=shape)
        .astype("int32")
    )
    for row, start in enumerate(pad_from or []):
        ids[row, start:] = 0
    return ids


def _np_positional_embedding(layer, ids, start_index=0):
    """E[ids] + P[start .. start+seq-1] from the layer's own weights."""
    tokens = to_numpy(layer.token_embedding.embeddings)[ids]
    length = ids.shape[1]
    if layer.positions == "learned":
        table = to_numpy(layer.position_embedding.position_embeddings)
        positions = table[start_index : start_index + length]
    else:
        positions = np_sinusoidal(start_index + length, DIM)[start_index:]
    return tokens + positions[None]


def _id_model(**kwargs):
    inputs = keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, **kwargs)
    return keras.Model(inputs, embed(inputs)), embed


# ---- SinusoidalPositionEncoding ----------------------------------------------


@pytest.mark.parametrize(
    "dim, max_wavelength",
    [(8, 10000), (7, 10000), (6, 100)],
    ids=["even_dim", "odd_dim", "wavelength_100"],
)
def test_sinusoidal_matches_course_formula(dim, max_wavelength):
    x = random_array((2, 10, dim))
    out = to_numpy(SinusoidalPositionEncoding(max_wavelength=max_wavelength)(x))
    expected = np_sinusoidal(10, dim, float(max_wavelength))
    np.testing.assert_allclose(out[0], expected, atol=ATOL)
    np.testing.assert_allclose(out[1], expected, atol=ATOL)


def test_sinusoidal_start_index_gives_later_rows():
    out = SinusoidalPositionEncoding()(random_array((2, 6, DIM)), start_index=5)
    np.testing.assert_allclose(
        to_numpy(out)[1], np_sinusoidal(11, DIM)[5:], atol=ATOL
    )


def test_sinusoidal_output_shape_equals_input_shape():
    layer = SinusoidalPositionEncoding()
    table = np_sinusoidal(6, DIM)
    batched = to_numpy(layer(random_array((3, 6, DIM))))
    assert batched.shape == (3, 6, DIM)
    np.testing.assert_allclose(
        batched, np.broadcast_to(table, (3, 6, DIM)), atol=ATOL
    )
    unbatched = to_numpy(layer(random_array((6, DIM))))
    assert unbatched.shape == (6, DIM)
    np.testing.assert_allclose(unbatched, table, atol=ATOL)


# ---- LearnedPositionEmbedding ------------------------------------------------


def test_learned_positions_return_weight_rows():
    layer = LearnedPositionEmbedding(sequence_length=SEQ_LEN)
    out = to_numpy(layer(random_array((2, 6, DIM))))
    table = to_numpy(layer.position_embeddings)
    assert table.shape == (SEQ_LEN, DIM)
    assert out.shape == (2, 6, DIM)
    np.testing.assert_allclose(out[0], table[:6], atol=ATOL)
    np.testing.assert_allclose(out[1], table[:6], atol=ATOL)


def test_learned_positions_start_index_slices_table():
    layer = LearnedPositionEmbedding(sequence_length=SEQ_LEN)
    out = to_numpy(
        layer(random_array((2, 6, DIM)), start_index=6)
    )  # the last 6 rows
    np.testing.assert_allclose(
        out[1], to_numpy(layer.position_embeddings)[6:], atol=ATOL
    )


def test_learned_positions_take_a_tensor_start_index():
    # A decoding step may carry its position as a 0-d tensor (under
    # PyTorch a gather, not a slice: what torch.compile keeps in one graph).
    layer = LearnedPositionEmbedding(sequence_length=SEQ_LEN)
    inputs = random_array((2, 3, DIM))
    expected = to_numpy(layer(inputs, start_index=5))
    out = to_numpy(layer(inputs, start_index=keras.ops.convert_to_tensor(5)))
    np.testing.assert_allclose(out, expected, atol=0)
    np.testing.assert_allclose(
        out[0], to_numpy(layer.position_embeddings)[5:8], atol=ATOL
    )


@pytest.mark.parametrize(
    "length, start_index", [(SEQ_LEN + 1, 0), (4, SEQ_LEN - 3)]
)
def test_learned_positions_past_sequence_length_raise(length, start_index):
    layer = LearnedPositionEmbedding(sequence_length=SEQ_LEN)
    with pytest.raises(ValueError, match="sequence_length"):
        layer(random_array((1, length, DIM)), start_index=start_index)


def test_learned_positions_tensor_start_index():
    # Cached decoding passes the start as a tensor; its value is visible when
    # eager, so running past the table must raise, not read clamped rows.
    layer = LearnedPositionEmbedding(sequence_length=SEQ_LEN)
    x = random_array((2, 6, DIM))
    out = to_numpy(
        layer(x, start_index=keras.ops.convert_to_tensor(4, "int32"))
    )
    np.testing.assert_allclose(
        out[1], to_numpy(layer.position_embeddings)[4:10], atol=ATOL
    )
    with pytest.raises(ValueError, match="sequence_length"):
        layer(x, start_index=keras.ops.convert_to_tensor(SEQ_LEN - 2, "int32"))


def test_learned_positions_reject_non_positive_sequence_length():
    with pytest.raises(ValueError, match="sequence_length"):
        LearnedPositionEmbedding(sequence_length=0)


# ---- PositionalEmbedding: values and mask ------------------------------------


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_positional_embedding_is_token_row_plus_position_row(positions):
    layer = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, positions=positions)
    ids = _ids((3, 6), pad_from=[4])
    out = layer(ids)
    assert tuple(out.shape) == (3, 6, DIM)
    np.testing.assert_allclose(
        to_numpy(out), _np_positional_embedding(layer, ids), atol=ATOL
    )
    # With start_index=4 the position rows are 4, 5, ... (cached decoding).
    np.testing.assert_allclose(
        to_numpy(layer(ids[:, :3], start_index=4)),
        _np_positional_embedding(layer, ids[:, :3], start_index=4),
        atol=ATOL,
    )


def test_positional_embedding_mask_is_nonzero_ids_only_with_mask_zero():
    ids = _ids((3, 6), pad_from=[5, 2])
    masked = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, mask_zero=True)
    np.testing.assert_array_equal(
        to_numpy(masked.compute_mask(ids)).astype(bool), ids != 0
    )
    unmasked = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, mask_zero=False)
    assert unmasked.compute_mask(ids) is None


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_positional_embedding_model_accepts_varying_lengths(positions):
    model, embed = _id_model(positions=positions)
    for length in (5, 9):
        ids = _ids((2, length), seed=length, pad_from=[length - 2])
        out = model.predict(ids, verbose=0)
        assert out.shape == (2, length, DIM)
        np.testing.assert_allclose(
            to_numpy(out), _np_positional_embedding(embed, ids), atol=ATOL
        )


def test_positional_embedding_mask_reaches_global_average_pooling():
    inputs = keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, mask_zero=True)
    pooled = keras.layers.GlobalAveragePooling1D()(embed(inputs))
    model = keras.Model(inputs, pooled)
    ids = _ids((3, 6), pad_from=[4, 1, 6])
    out = model.predict(ids, verbose=0)
    full = _np_positional_embedding(embed, ids)
    real = (ids != 0)[..., None]
    expected = (full * real).sum(1) / real.sum(1)
    np.testing.assert_allclose(to_numpy(out), expected, atol=ATOL)


# ---- PositionalEmbedding: errors ---------------------------------------------


def test_positional_embedding_too_long_raises_eagerly():
    layer = PositionalEmbedding(VOCAB, SEQ_LEN, DIM)
    assert tuple(layer(_ids((2, SEQ_LEN))).shape) == (
        2,
        SEQ_LEN,
        DIM,
    )  # longest allowed
    with pytest.raises(ValueError, match="sequence_length"):
        layer(_ids((2, SEQ_LEN + 1)))


def test_positional_embedding_too_long_raises_in_predict():
    # A fresh model, so that the first trace sees the static length on every
    # backend (after a retrace TensorFlow may relax it to None; then only the
    # slice fails). Not reused afterwards: JAX's predict leaves the variables
    # purged when a step raises.
    model, _ = _id_model()
    with pytest.raises(ValueError, match="sequence_length"):
        model.predict(_ids((2, SEQ_LEN + 1)), verbose=0)


def test_positional_embedding_too_long_static_input_raises_when_built():
    """A fixed input length longer than the positions fails as the
    functional model is built, before any data is seen."""
    inputs = keras.Input((SEQ_LEN + 1,), dtype="int32")
    with pytest.raises(ValueError, match="sequence_length"):
        PositionalEmbedding(VOCAB, SEQ_LEN, DIM)(inputs)


@pytest.mark.parametrize("bad_id", [VOCAB, -3], ids=["too_large", "negative"])
def test_positional_embedding_out_of_vocabulary_id_raises(bad_id):
    layer = PositionalEmbedding(VOCAB, SEQ_LEN, DIM)
    ids = _ids((3, 6))
    ids[1, 3] = bad_id
    with pytest.raises(ValueError, match="vocabulary_size") as error:
        layer(ids)
    assert str(bad_id) in str(error.value)


def test_positional_embedding_rejects_3d_ids():
    layer = PositionalEmbedding(VOCAB, SEQ_LEN, DIM)
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        layer(_ids((2, 5, 3)))


def test_positional_embedding_rejects_unknown_positions():
    with pytest.raises(ValueError, match="rotary"):
        PositionalEmbedding(VOCAB, SEQ_LEN, DIM, positions="rotary")


# ---- Serialization -----------------------------------------------------------

LAYER_FACTORIES = {
    "sinusoidal": lambda: SinusoidalPositionEncoding(max_wavelength=500),
    "learned": lambda: LearnedPositionEmbedding(
        sequence_length=SEQ_LEN, initializer="he_normal"
    ),
    "embedding_learned": lambda: PositionalEmbedding(
        VOCAB,
        SEQ_LEN,
        DIM,
        positions="learned",
        embeddings_initializer="glorot_uniform",
    ),
    "embedding_sinusoidal": lambda: PositionalEmbedding(
        VOCAB,
        SEQ_LEN,
        DIM,
        positions="sinusoidal",
        mask_zero=False,
        max_wavelength=300,
    ),
}


def test_config_round_trip_of_every_layer():
    for name, factory in LAYER_FACTORIES.items():
        layer = factory()
        restored = config_round_trip(layer)
        assert type(restored) is type(layer), name
        assert restored.get_config() == layer.get_config(), name


def test_keras_file_round_trip_of_position_layers(tmp_path):
    inputs = keras.Input((6, DIM))
    hidden = inputs + LAYER_FACTORIES["sinusoidal"]()(inputs)
    model = keras.Model(inputs, hidden + LAYER_FACTORIES["learned"]()(hidden))
    x = random_array((3, 6, DIM))
    before = model.predict(x, verbose=0)
    restored = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        restored.predict(x, verbose=0), before, atol=1e-6
    )


@pytest.mark.parametrize("name", ["embedding_learned", "embedding_sinusoidal"])
def test_keras_file_round_trip_of_positional_embedding(name, tmp_path):
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, LAYER_FACTORIES[name]()(inputs))
    ids = _ids((3, 6), pad_from=[4])
    before = model.predict(ids, verbose=0)
    restored = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        restored.predict(ids, verbose=0), before, atol=1e-6
    )


# ---- Training ----------------------------------------------------------------


def _weights(layer):
    return [to_numpy(w).copy() for w in layer.weights]


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_one_training_step_updates_positional_embedding(positions):
    inputs = keras.Input((None,), dtype="int32")
    embed = PositionalEmbedding(VOCAB, SEQ_LEN, DIM, positions=positions)
    pooled = keras.layers.GlobalAveragePooling1D()(embed(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(pooled))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    before = _weights(embed)
    history = model.fit(
        _ids((4, 6), pad_from=[3]),
        np.ones((4, 1), "float32"),
        batch_size=4,
        epochs=1,
        verbose=0,
    )
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.allclose(b, a) for b, a in zip(before, _weights(embed)))


def test_one_training_step_updates_learned_positions():
    inputs = keras.Input((6, DIM))
    positions = LearnedPositionEmbedding(SEQ_LEN)
    hidden = keras.layers.Flatten()(inputs + positions(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    before = _weights(positions)
    history = model.fit(
        random_array((4, 6, DIM)),
        np.ones((4, 1), "float32"),
        batch_size=4,
        epochs=1,
        verbose=0,
    )
    assert np.isfinite(history.history["loss"][0])
    assert not np.allclose(before[0], _weights(positions)[0])


# ---- Mixed precision ---------------------------------------------------------


@pytest.mark.parametrize(
    "policy, compute_dtype",
    [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")],
)
def test_mixed_precision_output_uses_compute_dtype(policy, compute_dtype):
    keras.config.set_dtype_policy(policy)
    for name, factory in LAYER_FACTORIES.items():
        is_embedding = name.startswith("embedding")
        x = (
            _ids((2, 6), pad_from=[4])
            if is_embedding
            else random_array((2, 6, DIM))
        )
        out = factory()(x)
        assert keras.backend.standardize_dtype(out.dtype) == compute_dtype, name
        assert not np.isnan(to_numpy(out)).any(), name
