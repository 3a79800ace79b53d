"""zoo.saving: atomic model and JSON files, float16 weight storage."""

import os

import keras
import numpy as np
import pytest

from zoo.saving import save_model_atomic
from zoo.saving import write_json_atomic


def small_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(256),
                              keras.layers.LayerNormalization(),
                              keras.layers.Dense(256),
                              keras.layers.Dense(2)])
    return model


def test_float16_storage_halves_the_file_and_rounds_the_weights(tmp_path):
    model = small_model()
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    full = save_model_atomic(model, str(tmp_path / "full.keras"))
    half = save_model_atomic(model, str(tmp_path / "half.keras"),
                             weights_dtype="float16")
    # The weights take half the bytes (the rest of the file is config).
    assert os.path.getsize(half) < 0.6 * os.path.getsize(full)
    loaded = keras.saving.load_model(half)
    for mine, original in zip(loaded.weights, model.weights):
        assert mine.dtype == "float32"  # computes as before
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine),
            keras.ops.convert_to_numpy(original).astype("float16"))
    np.testing.assert_allclose(loaded.predict(x, verbose=0),
                               model.predict(x, verbose=0), atol=1e-2)
    np.testing.assert_array_equal(
        keras.saving.load_model(full).predict(x, verbose=0),
        model.predict(x, verbose=0))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]


def test_bad_arguments_leave_nothing_behind(tmp_path):
    with pytest.raises(ValueError, match=".keras"):
        save_model_atomic(small_model(), str(tmp_path / "model.h5"))
    with pytest.raises(ValueError, match="weights_dtype"):
        save_model_atomic(small_model(), str(tmp_path / "m.keras"),
                          weights_dtype="int8")
    assert os.listdir(tmp_path) == []


def test_json_is_written_whole(tmp_path):
    path = write_json_atomic({"b": 1, "a": [1.5]}, str(tmp_path / "x.json"))
    assert open(path).read() == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
