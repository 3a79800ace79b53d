"""RandomTokenWindow under the current backend: while training, each row
becomes a contiguous slice of its real tokens, starts spread over every
position that keeps the slice full; the identity at inference; it works
inside a compiled training step and survives config and `.keras` round
trips."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip, keras_round_trip
from zoo.layers import RandomTokenWindow

LENGTHS = (10, 7, 3, 12)  # row 2 is shorter than the window


def _ids():
    """Row i holds ids 100 * (i + 1) + j for its j-th real token: a window's
    ids say where it came from."""
    ids = np.zeros((len(LENGTHS), 12), "int32")
    for i, n in enumerate(LENGTHS):
        ids[i, :n] = 100 * (i + 1) + np.arange(n)
    return ids


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def test_training_windows_are_contiguous_slices_of_the_real_tokens():
    layer = RandomTokenWindow(4, seed=5)
    starts = {i: set() for i in range(len(LENGTHS))}
    for _ in range(40):
        out = _numpy(layer(_ids(), training=True))
        assert out.shape == (len(LENGTHS), 4)
        for i, n in enumerate(LENGTHS):
            row = out[i]
            if n < 4:  # the whole short row, then padding
                np.testing.assert_array_equal(
                    row, list(100 * (i + 1) + np.arange(n)) + [0] * (4 - n)
                )
                continue
            first = row[0] - 100 * (i + 1)
            np.testing.assert_array_equal(row, row[0] + np.arange(4))
            starts[i].add(int(first))
    for i, n in enumerate(LENGTHS):
        if n >= 4:  # every start that keeps the window inside the row
            assert starts[i] == set(range(n - 4 + 1)), i


def test_identity_at_inference_and_for_short_inputs():
    ids = _ids()
    np.testing.assert_array_equal(_numpy(RandomTokenWindow(4)(ids)), ids)
    np.testing.assert_array_equal(
        _numpy(RandomTokenWindow(12)(ids, training=True)), ids
    )


def test_seeded_windows_repeat():
    a = _numpy(RandomTokenWindow(4, seed=3)(_ids(), training=True))
    b = _numpy(RandomTokenWindow(4, seed=3)(_ids(), training=True))
    np.testing.assert_array_equal(a, b)


def test_in_a_model_training_sees_windows_and_prediction_whole_rows(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    x = RandomTokenWindow(4, seed=1, name="window")(ids)
    x = keras.layers.Embedding(2000, 4, mask_zero=True)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(ids, keras.layers.Dense(1)(x))
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(_ids(), np.ones((4, 1)), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    loaded = keras_round_trip(model, tmp_path)
    assert loaded.get_layer("window").window == 4
    np.testing.assert_allclose(
        loaded.predict(_ids(), verbose=0),
        model.predict(_ids(), verbose=0),
        atol=1e-6,
    )


def test_config_round_trip_and_errors():
    layer = RandomTokenWindow(16, padding_id=0, seed=2)
    assert config_round_trip(layer).get_config() == layer.get_config()
    with pytest.raises(ValueError, match="positive"):
        RandomTokenWindow(0)
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        RandomTokenWindow(2)(np.ones((2, 3, 4), "int32"), training=True)
