"""PatchEmbedding and ClassToken (the Vision Transformer's inputs), under
the current backend, against a NumPy reference of flatten-and-project."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip, keras_round_trip, to_numpy
from zoo.layers import ClassToken, PatchEmbedding


def np_patches(images, patch):
    """(batch, H, W, C) -> (batch, H/P * W/P, P*P*C), patches row-major,
    each flattened in (row, column, channel) order."""
    batch, height, width, channels = images.shape
    x = images.reshape(
        batch, height // patch, patch, width // patch, patch, channels
    )
    x = x.transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(batch, -1, patch * patch * channels)


@pytest.mark.parametrize(
    "shape,patch",
    [
        ((2, 8, 8, 1), 4),
        ((1, 12, 8, 3), 4),
        ((2, 28, 28, 1), 7),
        ((1, 6, 9, 2), 3),
    ],
)
def test_patch_embedding_is_flatten_then_project(shape, patch):
    images = np.random.default_rng(0).normal(size=shape).astype("float32")
    layer = PatchEmbedding(patch, 5, bias_initializer="random_normal")
    out = to_numpy(layer(images))
    kernel = to_numpy(layer.projection.kernel).reshape(-1, 5)
    bias = to_numpy(layer.projection.bias)
    expected = np_patches(images, patch) @ kernel + bias
    assert out.shape == (shape[0], (shape[1] // patch) * (shape[2] // patch), 5)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_patch_order_is_row_major():
    # One bright pixel in patch (row 1, column 0) of a 2 x 2 grid.
    images = np.zeros((1, 4, 4, 1), "float32")
    images[0, 2, 1, 0] = 1.0
    layer = PatchEmbedding(2, 3, kernel_initializer="ones")
    out = to_numpy(layer(images))[0]
    np.testing.assert_allclose(out[:, 0], [0, 0, 1, 0])


def test_bad_images_are_clear_errors():
    layer = PatchEmbedding(4, 8)
    with pytest.raises(
        ValueError, match="width 30 is not divisible by the patch size 4"
    ):
        layer(np.zeros((1, 28, 30, 1), "float32"))
    with pytest.raises(ValueError, match="height, width, channels"):
        PatchEmbedding(4, 8)(np.zeros((28, 28), "float32"))
    with pytest.raises(ValueError, match="positive"):
        PatchEmbedding(0, 8)


def test_patch_embedding_in_a_functional_model_and_saved(tmp_path):
    inputs = keras.Input((8, 8, 3))
    x = PatchEmbedding(4, 6)(inputs)
    x = ClassToken()(x)
    model = keras.Model(inputs, x)
    assert model.output.shape == (None, 5, 6)
    images = (
        np.random.default_rng(1).normal(size=(2, 8, 8, 3)).astype("float32")
    )
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded(images)), to_numpy(model(images)), atol=1e-6
    )
    config_round_trip(PatchEmbedding(4, 6))
    config_round_trip(ClassToken("random_normal"))
    with pytest.raises(ValueError, match="divisible"):
        keras.Model(
            keras.Input((10, 8, 3)),
            PatchEmbedding(4, 6)(keras.Input((10, 8, 3))),
        )


def test_class_token_is_prepended_and_learned():
    layer = ClassToken(initializer="random_normal")
    x = np.ones((3, 4, 2), "float32")
    out = to_numpy(layer(x))
    assert out.shape == (3, 5, 2)
    token = to_numpy(layer.token)
    np.testing.assert_allclose(out[:, 0], np.broadcast_to(token, (3, 2)))
    np.testing.assert_allclose(out[:, 1:], x)
    assert [w.name for w in layer.trainable_weights] == ["token"]


def test_mixed_bfloat16():
    layer = PatchEmbedding(2, 4, dtype="mixed_bfloat16")
    out = ClassToken(dtype="mixed_bfloat16")(
        layer(np.ones((1, 4, 4, 1), "float32"))
    )
    assert out.shape == (1, 5, 4)
    assert np.all(np.isfinite(to_numpy(keras.ops.cast(out, "float32"))))


def test_position_grid_resizes_like_an_image_and_keeps_the_class_token():
    from zoo.layers import resize_position_grid

    # A 2 x 2 grid whose value is the row index, one class-token row.
    grid = np.array([[0.0], [0.0], [1.0], [1.0]], "float32")
    table = np.concatenate([[[9.0]], grid]).astype("float32")
    out = to_numpy(resize_position_grid(table, (2, 2), (4, 4)))
    assert out.shape == (17, 1) and out[0, 0] == 9.0
    # Half-pixel centres: new row k samples old row 0.5 k - 0.25, clamped.
    rows = out[1:, 0].reshape(4, 4)
    np.testing.assert_allclose(
        rows, np.repeat([[0.0], [0.25], [0.75], [1.0]], 4, axis=1), atol=1e-6
    )
    same = to_numpy(resize_position_grid(table, (2, 2), (2, 2)))
    np.testing.assert_array_equal(same, table)
    with pytest.raises(ValueError, match="not 1 \\+ 3 x 3"):
        resize_position_grid(table, (3, 3), (4, 4))
