"""ConvStem (early convolutions for the Vision Transformer), under the
current backend: against a NumPy reference of its convolutions, against the
same stack of Keras layers, saving, training and mixed precision."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip, keras_round_trip, to_numpy
from zoo.layers import ConvStem


def np_windows_same(x, k, stride, pad_value):
    """The `k x k` windows of (batch, H, W, C) at `stride` with "same"
    padding as TensorFlow pads it (the odd pixel of padding after):
    yields (i, j, window)."""
    _, height, width, _ = x.shape
    out_h, out_w = -(-height // stride), -(-width // stride)
    pad_h = max((out_h - 1) * stride + k - height, 0)
    pad_w = max((out_w - 1) * stride + k - width, 0)
    x = np.pad(
        x,
        (
            (0, 0),
            (pad_h // 2, pad_h - pad_h // 2),
            (pad_w // 2, pad_w - pad_w // 2),
            (0, 0),
        ),
        constant_values=pad_value,
    )
    for i in range(out_h):
        for j in range(out_w):
            yield (
                i,
                j,
                x[:, i * stride : i * stride + k, j * stride : j * stride + k],
            )


def np_conv_same(x, kernel, stride):
    """(batch, H, W, C) * (k, k, C, F), "same" padding, no bias."""
    batch, height, width, _ = x.shape
    out = np.zeros(
        (batch, -(-height // stride), -(-width // stride), kernel.shape[-1]),
        "float64",
    )
    for i, j, window in np_windows_same(x, kernel.shape[0], stride, 0.0):
        out[:, i, j] = np.einsum("bhwc,hwcf->bf", window, kernel)
    return out


def np_max_pool_same(x, k=3, stride=2):
    """3 x 3 stride-2 max pooling with "same" padding (padding never wins)."""
    batch, height, width, channels = x.shape
    out = np.zeros(
        (batch, -(-height // stride), -(-width // stride), channels), "float64"
    )
    for i, j, window in np_windows_same(x, k, stride, -np.inf):
        out[:, i, j] = window.max(axis=(1, 2))
    return out


def np_conv_stem(images, layer, downsample="stride"):
    """The stem's formula with its weights, BatchNorm in inference mode,
    halving as `downsample` says."""
    x = images.astype("float64")
    pooled = downsample == "max_pool"
    for conv, norm, _ in layer.blocks:
        x = np_conv_same(x, to_numpy(conv.kernel), 1 if pooled else 2)
        gamma, beta, mean, var = (
            to_numpy(w)
            for w in (
                norm.gamma,
                norm.beta,
                norm.moving_mean,
                norm.moving_variance,
            )
        )
        x = gamma * (x - mean) / np.sqrt(var + norm.epsilon) + beta
        x = np.maximum(x, 0.0)
        if pooled:
            x = np_max_pool_same(x)
    kernel = to_numpy(layer.projection.kernel)[0, 0]
    x = x @ kernel + to_numpy(layer.projection.bias)
    return x.reshape(x.shape[0], -1, x.shape[-1])


def randomise_norms(layer, seed=0):
    """Moving statistics and affine weights away from their initial values,
    so that the reference checks how BatchNorm uses them."""
    rng = np.random.default_rng(seed)
    for _, norm, _ in layer.blocks:
        size = norm.gamma.shape
        norm.gamma.assign(rng.uniform(0.5, 1.5, size).astype("float32"))
        norm.beta.assign(rng.normal(size=size).astype("float32"))
        norm.moving_mean.assign(rng.normal(size=size).astype("float32"))
        norm.moving_variance.assign(
            rng.uniform(0.5, 2.0, size).astype("float32")
        )


@pytest.mark.parametrize(
    "shape, filters, downsample",
    [
        ((2, 8, 8, 1), (4, 6), "stride"),
        ((1, 12, 8, 3), (5,), "stride"),
        ((2, 16, 16, 2), (3, 4, 5), "stride"),
        ((2, 8, 8, 1), (4, 6), "max_pool"),
        ((1, 12, 8, 3), (5,), "max_pool"),
    ],
)
def test_conv_stem_matches_its_formula(shape, filters, downsample):
    images = np.random.default_rng(1).normal(size=shape).astype("float32")
    layer = ConvStem(filters, 7, downsample=downsample)
    layer.build(shape)
    randomise_norms(layer)
    out = to_numpy(layer(images))
    stride = 2 ** len(filters)
    assert out.shape == (
        shape[0],
        (shape[1] // stride) * (shape[2] // stride),
        7,
    )
    np.testing.assert_allclose(
        out, np_conv_stem(images, layer, downsample), atol=1e-4
    )


@pytest.mark.parametrize("downsample", ["stride", "max_pool"])
def test_conv_stem_equals_the_same_keras_layers(downsample):
    images = (
        np.random.default_rng(2).normal(size=(2, 8, 8, 3)).astype("float32")
    )
    layer = ConvStem((4, 6), 5, downsample=downsample)
    layer.build(images.shape)
    randomise_norms(layer, seed=3)
    pooled = downsample == "max_pool"
    peer = [keras.Input((8, 8, 3))]
    for channels in (4, 6):
        peer += [
            keras.layers.Conv2D(
                channels,
                3,
                strides=1 if pooled else 2,
                padding="same",
                use_bias=False,
            ),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
        ]
        if pooled:
            peer.append(keras.layers.MaxPooling2D(3, 2, padding="same"))
    peer = keras.Sequential(
        peer + [keras.layers.Conv2D(5, 1), keras.layers.Reshape((4, 5))]
    )
    peer.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        to_numpy(layer(images)), to_numpy(peer(images)), atol=1e-5
    )
    # Training mode: BatchNorm normalises with the batch's statistics.
    np.testing.assert_allclose(
        to_numpy(layer(images, training=True)),
        to_numpy(peer(images, training=True)),
        atol=1e-4,
    )


def test_bad_arguments_and_images_are_clear_errors():
    with pytest.raises(ValueError, match="at least one positive filter"):
        ConvStem((), 8)
    with pytest.raises(ValueError, match="at least one positive filter"):
        ConvStem((4, 0), 8)
    with pytest.raises(ValueError, match=r"stride 4 \(2 stride-1 conv"):
        ConvStem((4, 4), 8, downsample="max_pool")(
            np.zeros((1, 28, 30, 1), "float32")
        )
    with pytest.raises(ValueError, match="downsample must be one of"):
        ConvStem((4,), 8, downsample="avg_pool")
    layer = ConvStem((4, 4), 8)
    with pytest.raises(
        ValueError, match="width 30 is not divisible by the stem's stride 4"
    ):
        layer(np.zeros((1, 28, 30, 1), "float32"))
    with pytest.raises(ValueError, match="height, width, channels"):
        ConvStem((4,), 8)(np.zeros((28, 28), "float32"))


def test_saved_trained_and_mixed_precision(tmp_path):
    inputs = keras.Input((8, 8, 1))
    tokens = ConvStem((4, 8), 6)(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(
        keras.layers.GlobalAveragePooling1D()(tokens)
    )
    model = keras.Model(inputs, outputs)
    assert tokens.shape == (None, 4, 6)
    images = (
        np.random.default_rng(4).normal(size=(4, 8, 8, 1)).astype("float32")
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    moving = to_numpy(model.layers[1].blocks[0][1].moving_mean).copy()
    loss = model.train_on_batch(images, np.array([0, 1, 2, 0]))
    assert np.isfinite(loss)
    after = [to_numpy(w) for w in model.trainable_weights]
    assert all(not np.allclose(a, b) for a, b in zip(before, after))
    assert not np.allclose(
        moving, to_numpy(model.layers[1].blocks[0][1].moving_mean)
    )
    loaded = keras_round_trip(model, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded(images)), to_numpy(model(images)), atol=1e-6
    )
    config_round_trip(ConvStem((4, 8), 6, kernel_initializer="glorot_uniform"))
    config_round_trip(ConvStem((4, 8), 6, downsample="max_pool"))
    for downsample in ("stride", "max_pool"):
        out = ConvStem((4,), 6, downsample=downsample, dtype="mixed_bfloat16")(
            images
        )
        assert out.shape == (4, 16, 6)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
        assert np.all(np.isfinite(to_numpy(keras.ops.cast(out, "float32"))))
