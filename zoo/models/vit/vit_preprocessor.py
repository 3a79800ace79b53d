"""ViT preprocessor: raw images (uint8, grey or colour) -> the float images
the backbone reads, inside the model file.

Runs in `tf.data` (TensorFlow ops) and on NumPy arrays in eager calls, under
every backend: adds the channel axis of grey `(N, H, W)` images, repeats a
grey channel for a colour model, resizes images of the model's aspect ratio
to its size (keras-hub's `ImageConverter`) and scales [0, 255] to [0, 1].
Input that would be read wrongly is refused rather than converted: bool
images, channels-first arrays, and images of another aspect ratio (a 28x56
array squeezed to 28x28 is a distorted digit).
"""

import math

import keras
import keras_hub
import numpy as np

from zoo._tensorflow import is_tf_tensor, tf
from zoo.models.presets import FromPreset
from zoo.models.vit.vit_presets import PRESETS

# Images whose height:width ratio differs from the model's by more than
# this (relative) are refused rather than stretched.
ASPECT_TOLERANCE = 0.01


def _dtype_name(images):
    dtype = images.dtype
    return getattr(dtype, "name", str(dtype))


def _numeric(dtype):
    """Whether a dtype's name (NumPy's or TensorFlow's) is a number type."""
    return dtype.startswith(("uint", "int", "float", "bfloat"))


@keras.saving.register_keras_serializable(package="zoo")
class ViTImageClassifierPreprocessor(
    FromPreset, keras_hub.models.ImageClassifierPreprocessor
):
    """Raw images (and labels) -> `(batch, height, width, num_channels)`
    float images in [0, 1].

    Pixels: uint8 images, or other integers or floats on the [0, 255]
    scale (floats are not rounded). Bool images (0 and 1 would read as
    black) and floats scaled to [0, 1] are refused.

    Sizes: images of the model's size pass as they are; images of the
    same aspect ratio (within 1%) are resized to it (bilinear, e.g. 56x56
    to 28x28); other aspect ratios are refused (a 28x56 array would be
    stretched): crop or pad them first.

    Layout: channels last, `(batch, H, W, C)`, or grey `(batch, H, W)`;
    channels-first arrays (`(N, 1, 28, 28)`, `(N, 3, H, W)`) are refused
    with the fix (`np.moveaxis(images, 1, -1)`).

    Args:
        image_size: `(height, width)` the model reads; other sizes of the
            same aspect ratio are resized (bilinear).
        num_channels: channels the model reads (1 grey, 3 colour). Grey
            images for a colour model have their channel repeated; colour
            images for a grey model are an error.
        scale: multiplies the pixel values; the default `1 / 255` expects
            images on the [0, 255] scale (uint8, or numbers in [0, 255]).

    Call arguments:
        x: `(batch, H, W)` or `(batch, H, W, C)` images.
        y, sample_weight: passed through.

    Returns:
        The images `(batch, height, width, num_channels)` float32, with `y`
        and `sample_weight` when given.

    Raises (in eager calls; inside `tf.data` only the checks of the dtype
    and of the static shape run):
        ValueError: None, an empty batch, ragged nested lists, bool or
            non-numeric images, a rank that is not an image batch (one
            `(H, W, C)` image without its batch axis included), channels
            first, another aspect ratio than the model's, a channel
            count the model cannot read, NaN or infinite pixel values,
            values outside [0, 255], or float images that look scaled to
            [0, 1] already (at most 1.0, not all zero).

    Example:

    >>> preprocessor = ViTImageClassifierPreprocessor((28, 28), 1)
    >>> preprocessor(np.zeros((2, 28, 28), "uint8")).shape
    (2, 28, 28, 1)
    """

    # The converter's dtype: None follows the global policy (bfloat16
    # images under mixed_bfloat16); a subclass that must read pixel values
    # exactly (ImageGPT's quantiser) sets "float32", and `call` casts the
    # images to it before resizing, so uint8 images, the same pixels as
    # floats (a SavedModel's cast) and `tf.data` give the same values
    # (resizing uint8 images would round each block's mean to a whole
    # value).
    converter_dtype = None

    def __init__(
        self, image_size=(28, 28), num_channels=1, scale=1 / 255, **kwargs
    ):
        kwargs.pop("image_converter", None)  # built from the arguments
        super().__init__(
            image_converter=keras_hub.layers.ImageConverter(
                image_size=tuple(int(n) for n in image_size),
                scale=scale,
                crop_to_aspect_ratio=False,
                dtype=self.converter_dtype,
                name="image_converter",
            ),
            **kwargs,
        )
        # (`image_size` is keras-hub's property: the converter's.)
        self.num_channels = int(num_channels)
        self.scale = scale

    # `from_preset(preset, **overrides)`: for the preset's image size and
    # channels (its backbone's).
    _presets = PRESETS

    @classmethod
    def _from_preset(cls, preset, **overrides):
        backbone = cls.preset_part(preset, "backbone")
        config = {
            "image_size": backbone["image_size"],
            "num_channels": backbone["num_channels"],
            **cls.preset_part(preset, "preprocessor"),
        }
        return cls(**{**config, **overrides})

    def _check_layout(self, dtype, shape):
        """The checks that need only the dtype's name and the (static)
        shape, so they run on arrays, inside `tf.data` and on a dataset's
        `element_spec` alike: bool or non-numeric images, the rank,
        channels first, the aspect ratio and the channel count."""
        if dtype == "bool":
            raise ValueError(
                "got bool images; this model reads pixel values on [0, 255]: "
                "pass images.astype('uint8') * 255."
            )
        if not _numeric(dtype):
            raise ValueError(
                f"got images of dtype {dtype}; this model reads arrays of "
                "pixel values on [0, 255] (uint8, or numbers)."
            )
        shape = tuple(shape)
        rank = len(shape)
        if rank == 4 and self._channels_first(shape):
            raise ValueError(
                f"got shape {shape}: channels first? This model reads "
                "(batch, height, width, channels) images: pass "
                "np.moveaxis(images, 1, -1)."
            )
        if (
            rank == 3
            and shape[-1] in (1, 3, 4)
            and shape[-1] < (shape[-2] or 0)
        ):
            # A grey batch of 1-, 3- or 4-pixel-wide images is no image
            # batch; an (H, W, C) image without its batch axis is.
            raise ValueError(
                f"got shape {shape}: one image (height, width, channels) "
                f"without a batch axis? Pass a batch, (1, {shape[0]}, "
                f"{shape[1]}, {shape[2]}) (e.g. `images[None]`); grey images "
                "batch as (batch, height, width)."
            )
        if rank not in (3, 4):
            raise ValueError(
                f"expected a batch of images, (batch, height, width) or "
                f"(batch, height, width, channels); got shape {shape}."
            )
        self._check_aspect(shape[1], shape[2])
        channels = shape[3] if rank == 4 else 1
        if channels not in (None, 1, self.num_channels):
            raise ValueError(
                f"images have {channels} channels; this model reads "
                f"{self.num_channels}."
            )

    def _channels(self, images):
        """Checks the layout (`_check_layout`), adds a grey channel axis,
        repeats grey for a colour model."""
        graph = is_tf_tensor(images)
        if not graph:
            images = np.asarray(keras.ops.convert_to_numpy(images))
        self._check_layout(_dtype_name(images), images.shape)
        if len(images.shape) == 3:
            images = tf.expand_dims(images, -1) if graph else images[..., None]
        if images.shape[-1] == self.num_channels:
            return images
        return (
            tf.repeat(images, self.num_channels, axis=-1)
            if graph
            else np.repeat(images, self.num_channels, axis=-1)
        )

    def _channels_first(self, shape):
        """Whether a 4-D batch looks channels first, `(N, C, H, W)`: a
        channel count an image has on axis 1, none on the last axis."""
        first, last = shape[1], shape[-1]
        return (
            first in (1, 3, 4)
            and last is not None
            and last not in (1, 3, 4, self.num_channels)
        )

    def _check_aspect(self, height, width):
        """Images of the model's aspect ratio are resized to its size;
        others are refused, since resizing would stretch them."""
        if height is None or width is None:
            return
        model_height, model_width = self.image_converter.image_size
        if (int(height), int(width)) == (model_height, model_width):
            return
        ratio = (height / width) / (model_height / model_width)
        if abs(ratio - 1.0) > ASPECT_TOLERANCE:
            common = math.gcd(model_height, model_width)
            raise ValueError(
                f"got {height}x{width} images; this model reads "
                f"{model_height}x{model_width}, and resizing would stretch "
                "them (another aspect ratio): crop or pad them to "
                f"{model_height // common}:{model_width // common} (height:"
                "width) first; images of that aspect ratio are resized."
            )

    def _check_values(self, images):
        if is_tf_tensor(images):
            return
        if images.shape[0] == 0:
            raise ValueError("got an empty batch of images.")
        floating = np.issubdtype(images.dtype, np.floating)
        if floating and not np.isfinite(images).all():
            where = np.argwhere(~np.isfinite(images))[0]
            raise ValueError(
                "images hold NaN or infinite pixel values (the first in "
                f"image {int(where[0])}, row {int(where[1])}, column "
                f"{int(where[2])})."
            )
        if (
            self.scale is not None
            and abs(self.scale - 1 / 255) < 1e-12
            and images.dtype != np.uint8
        ):
            top = float(images.max())
            if floating and 0.0 < top <= 1.0:
                raise ValueError(
                    "these float images look scaled to [0, 1] already; the "
                    "model expects pixel values in [0, 255] (uint8 images, "
                    "or floats before any scaling)."
                )
            low = float(images.min())
            if low < 0 or top > 255:
                raise ValueError(
                    f"pixel values must lie in [0, 255]; got values from "
                    f"{low:g} to {top:g}."
                )

    def check_images(self, images):
        """The eager checks on an array of raw images (what `fit`, `predict`
        and `evaluate` run before their `tf.data` pipeline), so a bad batch
        is one clear error; a dataset's `element_spec` gets the checks of
        the dtype and the static shape (its pixels are not read)."""
        if is_tf_tensor(images):
            return
        if hasattr(images, "element_spec"):  # a dataset: its spec only
            spec = images.element_spec
            spec = spec[0] if isinstance(spec, tuple) else spec
            if hasattr(spec, "dtype") and spec.shape.rank is not None:
                self._check_layout(spec.dtype.name, spec.shape)
            return
        if images is None:
            raise ValueError(
                "expected a batch of images, (batch, height, width) or "
                "(batch, height, width, channels); got None."
            )
        try:
            images = np.asarray(images)
        except ValueError:  # NumPy's "inhomogeneous shape"
            raise ValueError(
                "expected a batch of images, (batch, height, width) or "
                "(batch, height, width, channels); got nested lists of "
                "different lengths."
            ) from None
        if images.ndim and images.shape[0] == 0:
            raise ValueError("got an empty batch of images.")
        self._check_values(self._channels(images))

    def call(self, x, y=None, sample_weight=None):
        x = self._channels(x)
        self._check_values(x)
        if self.converter_dtype is not None:
            dtype = self.converter_dtype
            x = tf.cast(x, dtype) if is_tf_tensor(x) else x.astype(dtype)
        return super().call(x, y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.pop("image_converter", None)
        config.update(
            {
                "image_size": list(self.image_converter.image_size),
                "num_channels": self.num_channels,
                "scale": self.scale,
            }
        )
        return config
