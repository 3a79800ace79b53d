"""zoo.models.vit: the backbone against a NumPy reference of its input
stage, patch permutation with and without positions, attention maps and
rollout, saving, mixed precision and errors, under the current backend."""

import re

import keras
import keras_hub
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from tests.helpers import keras_round_trip, to_numpy
from tests.layers.test_patches import np_patches
from zoo.models.vit import (
    ViTBackbone,
    ViTImageClassifier,
    ViTImageClassifierPreprocessor,
    attention_rollout,
)

SIZE = dict(
    image_size=(8, 12),
    num_channels=2,
    patch_size=4,
    num_layers=2,
    num_heads=2,
    hidden_dim=8,
    intermediate_dim=16,
)


def images(batch=2, seed=0, shape=(8, 12, 2)):
    return (
        np.random.default_rng(seed)
        .uniform(size=(batch, *shape))
        .astype("float32")
    )


def randomize(model, seed=0):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))


def test_shapes_of_both_poolings_and_the_presets():
    out = ViTBackbone(**SIZE)(images())
    assert out["sequence_output"].shape == (2, 1 + 2 * 3, 8)
    assert out["pooled_output"].shape == (2, 8)
    out = ViTBackbone(**SIZE, pooling="average")(images())
    assert out["sequence_output"].shape == (2, 6, 8)
    backbone = ViTBackbone.from_preset("mnist")
    assert backbone.grid_size == (7, 7)
    assert backbone.position_embedding.sequence_length == 50


def test_input_stage_is_patches_projected_plus_class_token_plus_positions():
    backbone = ViTBackbone(**SIZE)
    randomize(backbone)
    x = images()
    w = {v.path: to_numpy(v) for v in backbone.weights}
    patches = (
        np_patches(x, 4) @ w["patch_embedding/projection/kernel"].reshape(-1, 8)
        + w["patch_embedding/projection/bias"]
    )
    token = np.broadcast_to(w["class_token/token"], (2, 1, 8))
    expected = (
        np.concatenate([token, patches], axis=1)
        + w["position_embedding/embeddings"]
    )
    np.testing.assert_allclose(to_numpy(backbone.embed(x)), expected, atol=1e-5)
    out = backbone(x)
    np.testing.assert_allclose(
        to_numpy(out["pooled_output"]), to_numpy(out["sequence_output"])[:, 0]
    )


def _keras_hub_path(path, layers):
    """The keras-hub ViTBackbone weight that a zoo weight path maps to."""
    for pattern, replacement in (
        (
            r"^patch_embedding/projection/",
            "vit_patching_and_embedding/patch_embedding/",
        ),
        (r"^class_token/token$", "vit_patching_and_embedding/class_token"),
        (
            r"^position_embedding/",
            "vit_patching_and_embedding/position_embedding/",
        ),
        (r"^layer_norm/", "vit_encoder/ln/"),
        (r"/self_attention_layer/", "/mha/"),
        (r"/self_attention_layer_norm/", "/ln_1/"),
        (r"/feedforward_layer_norm/", "/ln_2/"),
        (r"/feedforward_intermediate_dense/", "/mlp/dense_1/"),
        (r"/feedforward_output_dense/", "/mlp/dense_2/"),
    ):
        path = re.sub(pattern, replacement, path)
    return re.sub(
        r"^transformer_layer_(\d+)/",
        lambda m: f"vit_encoder/transformer_block_{int(m[1]) + 1}/",
        path,
    )


def test_backbone_equals_keras_hub_vit_with_copied_weights():
    """The same pre-LN ViT as `keras_hub.models.ViTBackbone` (conv patches,
    class token, learned positions, exact-GELU MLP, final LayerNorm)."""
    ours = ViTBackbone(**SIZE)
    theirs = keras_hub.models.ViTBackbone(
        image_shape=(8, 12, 2),
        patch_size=4,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        mlp_dim=16,
    )
    randomize(theirs, seed=3)
    source = {w.path: to_numpy(w) for w in theirs.weights}
    assert len(ours.weights) == len(source)
    for weight in ours.weights:
        weight.assign(
            source[_keras_hub_path(weight.path, source)].reshape(weight.shape)
        )
    x = images(seed=4)
    np.testing.assert_allclose(
        to_numpy(ours(x)["sequence_output"]), to_numpy(theirs(x)), atol=2e-5
    )


def test_stochastic_depth_grows_linearly_with_depth(tmp_path):
    backbone = ViTBackbone(**{**SIZE, "num_layers": 3}, drop_path_rate=0.2)
    rates = [b.drop_path_rate for b in backbone.transformer_layers]
    np.testing.assert_allclose(rates, [0.0, 0.1, 0.2])
    x = images(batch=32)  # P(no example drops a branch) = 0.52^32 < 1e-9
    before = to_numpy(backbone(x)["pooled_output"])  # inference: no drop
    restored = keras_round_trip(backbone, tmp_path)
    assert restored.get_config()["drop_path_rate"] == 0.2
    np.testing.assert_allclose(
        to_numpy(restored(x)["pooled_output"]), before, atol=1e-6
    )
    trained = to_numpy(backbone(x, training=True)["pooled_output"])
    assert not np.allclose(trained, before)


def _swap_patches(x, a, b, patch=4):
    """Swaps patch a and patch b (row-major indices) of every image."""
    x = x.copy()
    columns = x.shape[2] // patch
    (ra, ca), (rb, cb) = divmod(a, columns), divmod(b, columns)
    pa = x[
        :, ra * patch : (ra + 1) * patch, ca * patch : (ca + 1) * patch
    ].copy()
    x[:, ra * patch : (ra + 1) * patch, ca * patch : (ca + 1) * patch] = x[
        :, rb * patch : (rb + 1) * patch, cb * patch : (cb + 1) * patch
    ]
    x[:, rb * patch : (rb + 1) * patch, cb * patch : (cb + 1) * patch] = pa
    return x


def test_without_positions_permuting_patches_permutes_the_outputs():
    backbone = ViTBackbone(**SIZE, pooling="average")
    randomize(backbone, seed=1)
    x = images(seed=2)
    swapped = _swap_patches(x, 0, 4)
    order = [4, 1, 2, 3, 0, 5]
    backbone.position_embedding.position_embeddings.assign(
        np.zeros((6, 8), "float32")
    )
    a = to_numpy(backbone(x)["sequence_output"])
    b = to_numpy(backbone(swapped)["sequence_output"])
    np.testing.assert_allclose(b, a[:, order], atol=1e-5)  # equivariant
    np.testing.assert_allclose(
        to_numpy(backbone(swapped)["pooled_output"]),
        to_numpy(backbone(x)["pooled_output"]),
        atol=1e-5,
    )
    randomize(backbone.position_embedding, seed=3)  # positions tell apart
    a = to_numpy(backbone(x)["sequence_output"])
    b = to_numpy(backbone(swapped)["sequence_output"])
    assert np.abs(b - a[:, order]).max() > 1e-2


def test_rollout_equals_its_formula_on_a_hand_made_stack():
    rng = np.random.default_rng(4)
    stack = []
    for _ in range(3):
        weights = rng.uniform(size=(2, 2, 5, 5))
        stack.append(
            (weights / weights.sum(-1, keepdims=True)).astype("float32")
        )
    rollout = np.eye(5)[None].repeat(2, 0)
    for weights in stack:
        a = weights.mean(1) + np.eye(5)
        a /= a.sum(-1, keepdims=True)
        rollout = a @ rollout
    np.testing.assert_allclose(
        to_numpy(attention_rollout(stack)), rollout[:, 0, 1:], atol=1e-6
    )
    with pytest.raises(ValueError, match="at least one"):
        attention_rollout([])


def test_attention_scores_and_rollout_of_a_backbone():
    backbone = ViTBackbone(**SIZE)
    scores = backbone.attention_scores(images())
    assert len(scores) == 2 and scores[0].shape == (2, 2, 7, 7)
    np.testing.assert_allclose(to_numpy(scores[1]).sum(-1), 1.0, atol=1e-5)
    maps = to_numpy(attention_rollout(scores))
    assert maps.shape == (2, 6) and np.all(maps > 0)


def test_save_load_and_mixed_precision(tmp_path):
    backbone = ViTBackbone(**SIZE)
    x = images()
    loaded = keras_round_trip(backbone, tmp_path)
    np.testing.assert_allclose(
        to_numpy(loaded(x)["pooled_output"]),
        to_numpy(backbone(x)["pooled_output"]),
        atol=1e-6,
    )
    assert ViTBackbone.from_config(backbone.get_config()).get_config() == (
        backbone.get_config()
    )
    half = ViTBackbone(**SIZE, dtype="mixed_bfloat16")
    out = half(x)["pooled_output"]
    assert np.all(np.isfinite(to_numpy(keras.ops.cast(out, "float32"))))


def test_bad_configurations_are_clear_errors():
    with pytest.raises(ValueError, match="not divisible by the patch size"):
        ViTBackbone(**{**SIZE, "image_size": (10, 12)})
    with pytest.raises(ValueError, match="pooling"):
        ViTBackbone(**SIZE, pooling="max")
    with pytest.raises(ValueError, match="divisible by num_heads"):
        ViTBackbone(**{**SIZE, "num_heads": 3})
    with pytest.raises(ValueError):
        ViTBackbone(**SIZE)(np.zeros((2, 12, 12, 2), "float32"))


# ---- the image classifier and its preprocessor ------------------------------


def digits(count=64, seed=0):
    """8x8 uint8 images; the label says whether the top half is brighter."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (count, 8, 8)).astype("uint8")
    y = (x[:, :4].mean((1, 2)) > x[:, 4:].mean((1, 2))).astype("int32")
    return x, y


def test_preprocessor_scales_adds_channels_and_resizes():
    grey = np.arange(2 * 8 * 8, dtype="uint8").reshape(2, 8, 8)
    out = to_numpy(ViTImageClassifierPreprocessor((8, 8), 1)(grey))
    np.testing.assert_allclose(out, grey[..., None] / 255.0, atol=1e-6)
    colour = to_numpy(ViTImageClassifierPreprocessor((8, 8), 3)(grey))
    np.testing.assert_allclose(colour, np.repeat(out, 3, -1), atol=1e-6)
    smaller = to_numpy(ViTImageClassifierPreprocessor((4, 4), 1)(grey))
    assert smaller.shape == (2, 4, 4, 1)
    config = ViTImageClassifierPreprocessor((4, 4), 3).get_config()
    assert config["image_size"] == [4, 4] and config["num_channels"] == 3
    again = ViTImageClassifierPreprocessor.from_config(config)
    assert tuple(again.image_size) == (4, 4)


def test_classifier_trains_saves_and_predicts_raw_images(tmp_path):
    x, y = digits()
    keras.utils.set_random_seed(0)
    classifier = ViTImageClassifier.from_preset("smoke", num_classes=2)
    classifier.compile(
        optimizer=keras.optimizers.AdamW(3e-3), label_smoothing=0.1
    )
    history = classifier.fit(x, y, epochs=3, batch_size=16, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    probabilities = classifier.predict(x[:3], verbose=0)
    assert probabilities.shape == (3, 2)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
    loaded = keras_round_trip(classifier, tmp_path)
    np.testing.assert_allclose(
        loaded.predict(x[:3], verbose=0), probabilities, atol=1e-6
    )
    maps = classifier.rollout_maps(x[:2])
    assert maps.shape == (2, 2, 2)
    np.testing.assert_allclose(maps.sum((1, 2)), 1.0, atol=1e-5)


def test_bad_images_are_one_clear_error():
    classifier = ViTImageClassifier.from_preset("smoke", num_classes=2)
    cases = [
        (np.zeros((0, 8, 8), "uint8"), "empty batch"),
        (np.zeros((2, 8, 8, 3), "uint8"), "3 channels; this model reads 1"),
        (np.full((2, 8, 8), 0.5, "float32"), "scaled to \\[0, 1\\]"),
        (np.zeros((8, 8), "uint8"), "batch of images"),
        (np.zeros((8, 8, 1), "uint8"), "without a batch axis"),
        (np.zeros((8, 8, 3), "uint8"), "without a batch axis"),
        (
            np.where(np.eye(8) > 0, np.nan, 9.0)[None].astype("float32"),
            "NaN or infinite pixel values \\(the first in image 0, row 0, "
            "column 0\\)",
        ),
        (np.full((1, 8, 8), np.inf, "float32"), "NaN or infinite"),
        (np.ones((2, 8, 8), bool), r"got bool images.*astype\('uint8'\)"),
        (
            np.zeros((2, 1, 8, 8), "uint8"),
            r"^got shape \(2, 1, 8, 8\): "
            r"channels first\?.*np.moveaxis\(images, 1, -1\)",
        ),
        (np.zeros((2, 3, 8, 8), "uint8"), "channels first"),
        (
            np.zeros((2, 8, 16), "uint8"),
            r"^got 8x16 images; this model reads "
            "8x8, and resizing would stretch them .* crop or pad them to 1:1",
        ),
        (np.full((2, 8, 8), -5, "int16"), r"\[0, 255\]; got values from -5"),
        (np.full((2, 8, 8), 300.0, "float32"), r"\[0, 255\]"),
        (np.full((1, 8, 8), "a"), "dtype"),
    ]
    for images, message in cases:
        with pytest.raises(ValueError, match=message) as error:
            classifier.predict(images, verbose=0)
        assert "\n" not in str(error.value)
    # The model's aspect ratio, another size: resized, as documented.
    assert classifier.predict(np.zeros((2, 16, 16), "uint8"), verbose=0).shape
    # A dataset's spec is checked before tf.data traces the preprocessor.
    import tensorflow as tf

    for images, message in (
        (np.zeros((4, 8, 16), "uint8"), "8x16 images"),
        (np.zeros((4, 8, 8), bool), "bool images"),
    ):
        dataset = tf.data.Dataset.from_tensor_slices((images, [0, 1, 0, 1]))
        with pytest.raises(ValueError, match=message) as error:
            classifier.fit(dataset.batch(2), verbose=0)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="num_classes"):
        ViTImageClassifier.from_preset("smoke", num_classes=1)


def test_fit_refuses_bad_labels_before_training():
    x = np.zeros((4, 8, 8), "uint8")
    classifier = ViTImageClassifier.from_preset("smoke", num_classes=3)
    classifier.compile()
    for labels, error, message in (
        (
            [0, 1, 2, 3],
            ValueError,
            r"^fit\(\): label 3 at index 3 is outside "
            "the classes: labels are class ids 0..2 for this 3-class",
        ),
        ([0, 1.5, 2, 1], ValueError, "label 1.5 at index 1 is not a whole"),
        ([0, 1, np.nan, 1], ValueError, "label nan at index 2 is not a number"),
        (["a", "b", "c", "a"], TypeError, "label 'a' at index 0 is a str"),
        ([0, 1, 2], ValueError, "4 examples but 3 labels"),
        (
            np.eye(3)[[0, 1, 2, 1]],
            ValueError,
            r"loss reads class ids.*"
            r"argmax\(-1\)",
        ),
    ):
        with pytest.raises(error, match=message) as info:
            classifier.fit(x, labels, epochs=1, verbose=0)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="validation_data=...\\): label 9"):
        classifier.fit(x, [0, 1, 2, 1], validation_data=(x, [9, 0, 0, 0]))
    assert int(classifier.optimizer.iterations) == 0


def test_fit_holds_out_a_validation_split_and_checks_validation_images():
    x, y = digits()
    classifier = ViTImageClassifier.from_preset("smoke", num_classes=2)
    classifier.compile(optimizer=keras.optimizers.AdamW(3e-3))
    history = classifier.fit(
        x, y, epochs=1, batch_size=16, verbose=0, validation_split=0.25
    )
    assert np.isfinite(history.history["val_loss"][0])
    bad = x[:8].astype("float32")
    bad[3, 2, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        classifier.fit(x, y, epochs=1, verbose=0, validation_data=(bad, y[:8]))
    with pytest.raises(ValueError, match="scaled to"):
        classifier.fit(
            x, y, epochs=1, verbose=0, validation_data=(x[:8] / 255.0, y[:8])
        )


def test_conv_stem_and_sequence_pooling():
    backbone = ViTBackbone(**SIZE, stem_filters=(4, 6), pooling="sequence")
    assert backbone.patch_embedding.name == "conv_stem"
    randomize(backbone)
    x = images()
    out = backbone(x)
    assert out["sequence_output"].shape == (2, 6, 8)
    # Sequence pooling: the final states weighted by a softmax over one
    # learned score per token (CCT's SeqPool).
    states = to_numpy(out["sequence_output"])
    pool = backbone.sequence_pooling
    scores = states @ to_numpy(pool.query_vector).reshape(-1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(
        to_numpy(out["pooled_output"]),
        np.einsum("bt,btd->bd", weights, states),
        atol=1e-4,
    )
    # The rollout of the pooled vector reads the final tokens along those
    # weights; a class token's is its row (the one-hot weights).
    scores, pooling = backbone.attention_scores(x, return_pooling_weights=True)
    np.testing.assert_allclose(to_numpy(pooling), weights, atol=1e-4)
    np.testing.assert_allclose(
        to_numpy(backbone.rollout(x)),
        np.einsum(
            "bt,bts->bs",
            weights,
            _np_rollout([to_numpy(s) for s in scores]),
        ),
        atol=1e-4,
    )
    with_token = ViTBackbone(**SIZE, stem_filters=(4, 6))
    scores = with_token.attention_scores(x)
    np.testing.assert_allclose(
        to_numpy(with_token.rollout(x)),
        to_numpy(attention_rollout(scores)),
        atol=1e-6,
    )
    average = ViTBackbone(**SIZE, pooling="average")
    maps = to_numpy(average.rollout(x))
    np.testing.assert_allclose(
        maps,
        _np_rollout([to_numpy(s) for s in average.attention_scores(x)]).mean(1),
        atol=1e-5,
    )


def _np_rollout(stack):
    tokens = stack[0].shape[-1]
    rollout = np.eye(tokens)[None].repeat(stack[0].shape[0], 0)
    for weights in stack:
        a = weights.mean(1) + np.eye(tokens)
        a /= a.sum(-1, keepdims=True)
        rollout = a @ rollout
    return rollout


def test_conv_stem_presets_train_save_and_draw_rollouts(tmp_path):
    with pytest.raises(ValueError, match="stride of 8 .* patch_size=4"):
        ViTBackbone(**SIZE, stem_filters=(2, 2, 2))
    with pytest.raises(ValueError, match="only with stem_filters"):
        ViTBackbone(**SIZE, stem_downsample="max_pool")
    with pytest.raises(ValueError, match="stem_downsample must be one of"):
        ViTBackbone(**SIZE, stem_filters=(4, 4), stem_downsample="avg")
    for preset, downsample in (
        ("mnist_conv_stem", "stride"),
        ("mnist_seqpool", "stride"),
        ("mnist_cct", "max_pool"),
    ):
        backbone = ViTBackbone.from_preset(preset)
        assert backbone.grid_size == (7, 7)
        assert backbone.stem_filters == [32, 64]
        assert backbone.stem_downsample == downsample
        assert backbone.patch_embedding.downsample == downsample
    classifier = ViTImageClassifier(
        ViTBackbone(
            **{**SIZE, "image_size": (8, 8), "num_channels": 1},
            stem_filters=(4, 4),
            stem_downsample="max_pool",
            pooling="sequence",
        ),
        ViTImageClassifierPreprocessor((8, 8), 1),
        num_classes=2,
    )
    x = (np.random.default_rng(5).uniform(size=(16, 8, 8)) * 255).astype(
        "uint8"
    )
    y = np.arange(16) % 2
    classifier.compile(optimizer=keras.optimizers.AdamW(3e-3))
    history = classifier.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    probabilities = classifier.predict(x[:3], verbose=0)
    loaded = keras_round_trip(classifier, tmp_path)
    assert loaded.backbone.stem_filters == [4, 4]
    assert loaded.backbone.patch_embedding.downsample == "max_pool"
    np.testing.assert_allclose(
        loaded.predict(x[:3], verbose=0), probabilities, atol=1e-6
    )
    maps = loaded.rollout_maps(x[:2])
    assert maps.shape == (2, 2, 2)
    np.testing.assert_allclose(maps.sum((1, 2)), 1.0, atol=1e-5)
