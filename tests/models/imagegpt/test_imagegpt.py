"""zoo.models.imagegpt: the quantiser against NumPy references, raster
order, causal masking over pixels, cached completion against an uncached
greedy loop, features and the linear probe, saving, mixed precision and
bad input, under the current backend."""

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from tests.helpers import keras_round_trip, to_numpy
from zoo._tensorflow import tf
from zoo.models.imagegpt import (
    ImageGPTBackbone,
    ImageGPTCausalLM,
    ImageGPTPreprocessor,
    kmeans_palette,
    linear_probe,
    raster,
    uniform_palette,
    unraster,
)

# No midpoint between two levels is a multiple of 0.25 (a mean of four
# uint8 pixels), so no pixel sits on a tie between two levels.
PALETTE = [0.0, 60.1, 150.3, 249.9]
GREYS = np.round(PALETTE).astype("uint8")  # the levels as images show them


def digits(count=6, size=8, seed=0):
    """uint8 `(count, size, size)` blobs: a bright bar on black, with a
    little noise, so that the pixels take several grey values."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 30, (count, size, size))
    for i in range(count):
        column = rng.integers(1, size - 2)
        images[i, 1:-1, column : column + 2] = rng.integers(180, 256)
    return images.astype("uint8")


def preprocessor(size=8):
    return ImageGPTPreprocessor((size, size), num_levels=4, palette=PALETTE)


def model(seed=0, size=8):
    keras.utils.set_random_seed(seed)
    task = ImageGPTCausalLM.from_preset(
        "smoke",
        preprocessor=preprocessor(size),
        backbone_sequence_length=size * size + 1,
    )
    rng = np.random.default_rng(seed)
    for variable in task.backbone.weights:  # far from uniform outputs
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return task


# --- The quantiser ------------------------------------------------------------


def np_nearest_level(pixels, palette):
    return np.argmin(
        np.abs(pixels[..., None].astype("float64") - np.asarray(palette)), -1
    )


def test_pixels_map_to_the_nearest_level_in_raster_order():
    images = digits()
    ids = np.asarray(preprocessor().pixel_ids(images))
    expected = np_nearest_level(images, PALETTE).reshape(len(images), -1)
    np.testing.assert_array_equal(ids, expected)


def test_levels_round_trip_exactly_and_other_pixels_to_their_level():
    palette_pixels = GREYS[np.random.default_rng(1).integers(0, 4, (3, 8, 8))]
    pre = preprocessor()
    back = pre.images_from_ids(pre.pixel_ids(palette_pixels))
    np.testing.assert_array_equal(back, palette_pixels)
    images = digits()
    back = pre.images_from_ids(pre.pixel_ids(images))
    expected = GREYS[np_nearest_level(images, PALETTE)]
    np.testing.assert_array_equal(back, expected)


def test_raster_order_and_its_inverse():
    image = np.zeros((1, 3, 5), "uint8")
    image[0, 2, 1] = 255  # row 2, column 1
    sequence = raster(image)
    assert sequence.shape == (1, 15)
    assert np.flatnonzero(sequence[0]).tolist() == [2 * 5 + 1]
    np.testing.assert_array_equal(unraster(sequence, (3, 5)), image)
    with pytest.raises(ValueError, match="expected"):
        unraster(sequence, (4, 4))


def np_kmeans(values, k, iterations=200):
    centres = np.linspace(values.min(), values.max(), k)
    for _ in range(iterations):
        nearest = np.argmin(np.abs(values[:, None] - centres), 1)
        centres = np.array(
            [
                values[nearest == j].mean() if np.any(nearest == j) else c
                for j, c in enumerate(centres)
            ]
        )
    return np.sort(centres)


def test_kmeans_palette_against_a_numpy_lloyd_loop():
    values = np.random.default_rng(0).integers(0, 256, 5000).astype("float64")
    values[:3000] = 0  # mostly black, as digits are
    palette = kmeans_palette(values, 5, iterations=200)
    np.testing.assert_allclose(palette, np_kmeans(values, 5), atol=1e-6)
    assert palette == sorted(palette)
    assert uniform_palette(3) == [0.0, 127.5, 255.0]


def test_a_digit_palette_comes_from_the_images_as_the_model_reads_them():
    images = np.full((4, 16, 16), 255, "uint8")
    images[:, :, :8:2] = 0  # alternate columns: grey once resized to 8x8
    pre = ImageGPTPreprocessor.from_images(images, (8, 8), 2)
    # Read at 16x16 the pixels are 0 and 255; the model reads them at 8x8,
    # where each 2x2 block averages, the left half to 127.5.
    assert pre.palette == [127.5, 255.0]
    with pytest.raises(ValueError, match="distinct"):
        ImageGPTPreprocessor.from_images(images[:, 8:, 8:], (4, 4), 2)


def test_token_ids_are_the_start_token_and_the_pixels_shifted_by_one():
    pre = preprocessor()
    x, y, weights = pre(digits())
    y, ids = to_numpy(y), to_numpy(x["token_ids"])
    assert ids.shape == y.shape == (6, 64)
    assert pre.start_token_id == 4 and (ids[:, 0] == 4).all()
    np.testing.assert_array_equal(ids[:, 1:], y[:, :-1])
    assert to_numpy(x["padding_mask"]).all() and to_numpy(weights).min() == 1


def test_the_tf_data_pipeline_quantises_as_the_eager_call_does():
    pre = preprocessor()
    images = digits(size=16)  # resized to 8x8 on the way
    dataset = tf.data.Dataset.from_tensor_slices(images).batch(3).map(pre)
    ids = np.concatenate([x["token_ids"].numpy() for x, _, _ in dataset])
    pixels = np.concatenate([y.numpy() for _, y, _ in dataset])
    eager, targets, _ = pre(images)
    np.testing.assert_array_equal(ids, to_numpy(eager["token_ids"]))
    np.testing.assert_array_equal(pixels, to_numpy(targets))
    # 2x2 block means, then the nearest level.
    blocks = images.reshape(6, 8, 2, 8, 2).astype("float64").mean((2, 4))
    expected = np_nearest_level(blocks, PALETTE).reshape(6, -1)
    np.testing.assert_array_equal(pixels, expected)


# --- The model ----------------------------------------------------------------


def test_a_pixel_changes_no_prediction_at_or_before_its_position():
    task = model()
    pre = task.preprocessor
    images = digits(2)
    changed = images.copy()
    changed[:, 3, 5] = 255 - changed[:, 3, 5]  # pixel 3 * 8 + 5 = 29
    logits = to_numpy(task.predict(images, verbose=0))
    after = to_numpy(task.predict(changed, verbose=0))
    assert logits.shape == (2, 64, pre.vocabulary_size)
    # Position t predicts pixel t from the pixels before it: pixel 29 is
    # read at position 30.
    np.testing.assert_allclose(after[:, :30], logits[:, :30], atol=1e-5)
    assert np.abs(after[:, 30:] - logits[:, 30:]).max() > 1e-3


def test_cached_completion_equals_an_uncached_greedy_loop():
    task = model()
    pre = task.preprocessor
    images = digits(3)
    completed = task.complete(images, rows=4)
    # The reference: the whole sequence through the model for every pixel.
    ids = np.asarray(pre.pixel_ids(images)).copy()
    start = np.full((3, 1), pre.start_token_id, "int32")
    for t in range(32, 64):
        inputs = np.concatenate([start, ids[:, :-1]], 1)
        logits = to_numpy(
            task({"token_ids": inputs, "padding_mask": np.ones_like(inputs)})
        )
        ids[:, t] = np.argmax(logits[:, t], -1)
    assert (ids < pre.num_levels).all()
    np.testing.assert_array_equal(completed, pre.images_from_ids(ids))
    # The kept rows are the quantised originals.
    quantised = pre.images_from_ids(pre.pixel_ids(images))
    np.testing.assert_array_equal(completed[:, :4], quantised[:, :4])


def test_samplers_and_unconditional_images():
    task = model()
    images = digits(2)
    first = task.complete(images, rows=2, sampler="top_k", k=2, seed=3)
    again = task.complete(images, rows=2, sampler="top_k", k=2, seed=3)
    np.testing.assert_array_equal(first, again)
    samples = task.generate_images(3, seed=0)
    assert samples.shape == (3, 8, 8) and samples.dtype == np.uint8
    assert set(np.unique(samples)) <= set(GREYS.tolist())


def test_features_average_the_hidden_states_over_the_positions():
    task = model()
    images = digits(4)
    features = task.features(images)
    x = task.preprocessor(images)[0]
    hidden = to_numpy(task.backbone(x)["sequence_output"])
    np.testing.assert_allclose(features, hidden.mean(1), atol=1e-5)
    assert task.features(images, layer=0).shape == (4, 32)
    assert not np.allclose(task.features(images, layer=0), features)
    with pytest.raises(ValueError, match="blocks"):
        task.features(images, layer=2)


def test_linear_probe_shapes_and_errors():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32") + 2 * (x[:, 2] > 0)
    result = linear_probe(x[:200], y[:200], x[200:], y[200:])
    assert result["dim"] == 6 and 0.8 < result["accuracy"] <= 1.0
    with pytest.raises(ValueError, match="dimensions"):
        linear_probe(x, y, x[:, :3], y)
    with pytest.raises(ValueError, match="one class id per example"):
        linear_probe(x, y[:10], x, y)


def test_saved_model_keeps_its_palette_and_completes_identically(tmp_path):
    task = model()
    task.compile()
    images = digits(2)
    loaded = keras_round_trip(task, tmp_path)
    assert type(loaded) is ImageGPTCausalLM
    assert type(loaded.backbone) is ImageGPTBackbone
    assert loaded.preprocessor.palette == PALETTE
    np.testing.assert_allclose(
        to_numpy(loaded.predict(images, verbose=0)),
        to_numpy(task.predict(images, verbose=0)),
        atol=1e-6,
    )
    np.testing.assert_array_equal(
        loaded.complete(images, rows=3), task.complete(images, rows=3)
    )


def test_one_training_step_lowers_nothing_to_nan_under_mixed_bfloat16():
    images = np.random.default_rng(0).integers(0, 256, (4, 16, 16), "uint8")
    exact = np.asarray(ImageGPTPreprocessor((8, 8), 4).pixel_ids(images))
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        task = ImageGPTCausalLM.from_preset("smoke")
        # The quantiser reads float32 pixels under any policy.
        ids = np.asarray(task.preprocessor.pixel_ids(images))
        np.testing.assert_array_equal(ids, exact)
        task.compile(optimizer=keras.optimizers.Adam(1e-3))
        history = task.fit(digits(8), batch_size=4, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
        logits = task.predict(digits(2), verbose=0)
        assert logits.dtype == np.float32 and np.isfinite(logits).all()
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


# --- Bad input ----------------------------------------------------------------


def test_images_of_the_aspect_ratio_are_resized_others_refused():
    task = model()
    big = np.kron(digits(2), np.ones((2, 2), "uint8"))  # 16x16
    assert task.complete(big, rows=4).shape == (2, 8, 8)
    colour = np.zeros((2, 8, 8, 3), "uint8")
    for bad, message in (
        (colour, "3 channels"),
        (np.zeros((2, 8, 16), "uint8"), "stretch"),
        (np.zeros((0, 8, 8), "uint8"), "empty"),
    ):
        for call in (
            lambda x: task.predict(x, verbose=0),
            lambda x: task.complete(x),
            lambda x: task.features(x),
        ):
            with pytest.raises(ValueError, match=message) as error:
                call(bad)
            assert "\n" not in str(error.value).strip()


def test_bad_arguments_are_one_line_each():
    task = model()
    for rows in (8, -1, 2.5, True):
        with pytest.raises(ValueError, match="rows="):
            task.complete(digits(1), rows=rows)
    with pytest.raises(ValueError, match="at least one image"):
        task.generate_images(0)
    with pytest.raises(ValueError, match="complete"):
        task.generate(digits(1))
    ids_only = ImageGPTCausalLM(task.backbone)  # no preprocessor: ids in
    inputs = {"token_ids": np.zeros((1, 64), "int32")}
    inputs["padding_mask"] = np.ones((1, 64), bool)
    assert ids_only.predict(inputs, verbose=0).shape == (1, 64, 5)
    with pytest.raises(ValueError, match="ImageGPTPreprocessor"):
        ids_only.complete(digits(1))
    with pytest.raises(ValueError, match="strictly increasing"):
        ImageGPTPreprocessor((8, 8), 3, palette=[0, 200, 100])
    with pytest.raises(ValueError, match="num_levels"):
        ImageGPTPreprocessor((8, 8), 3, palette=[0, 255])
    with pytest.raises(ValueError, match="palette"):
        task.preprocessor.images_from_ids(np.full((1, 64), 4))
    with pytest.raises(ValueError, match="positions"):
        ImageGPTCausalLM(
            ImageGPTBackbone.from_preset(
                "smoke", vocabulary_size=5, sequence_length=64
            ),
            preprocessor(),
        )
