"""ViT preprocessor: raw images (uint8, grey or colour) -> the float images
the backbone reads, inside the model file.

Runs in `tf.data` (TensorFlow ops) and on NumPy arrays in eager calls, under
every backend: adds the channel axis of grey `(N, H, W)` images, repeats a
grey channel for a colour model, resizes to the model's size (keras-hub's
`ImageConverter`) and scales [0, 255] to [0, 1].
"""

import keras
import keras_hub
import numpy as np

from zoo._tensorflow import is_tf_tensor, tf
from zoo.models.presets import FromPreset
from zoo.models.vit.vit_presets import PRESETS


@keras.saving.register_keras_serializable(package="zoo")
class ViTImageClassifierPreprocessor(
    FromPreset, keras_hub.models.ImageClassifierPreprocessor
):
    """Raw images (and labels) -> `(batch, height, width, num_channels)`
    float images in [0, 1].

    Args:
        image_size: `(height, width)` the model reads; other sizes are
            resized (bilinear).
        num_channels: channels the model reads (1 grey, 3 colour). Grey
            images for a colour model have their channel repeated; colour
            images for a grey model are an error.
        scale: multiplies the pixel values; the default `1 / 255` expects
            images on the [0, 255] scale (uint8, or floats in [0, 255]).

    Call arguments:
        x: `(batch, H, W)` or `(batch, H, W, C)` images.
        y, sample_weight: passed through.

    Returns:
        The images `(batch, height, width, num_channels)` float32, with `y`
        and `sample_weight` when given.

    Raises (in eager calls; inside `tf.data` only the shape checks run):
        ValueError: an empty batch, a rank that is not an image batch (one
            `(H, W, C)` image without its batch axis included), a channel
            count the model cannot read, NaN or infinite pixel
            values, or float images that look scaled to [0, 1] already (at
            most 1.0, not all zero).

    Example:

    >>> preprocessor = ViTImageClassifierPreprocessor((28, 28), 1)
    >>> preprocessor(np.zeros((2, 28, 28), "uint8")).shape
    (2, 28, 28, 1)
    """

    def __init__(
        self, image_size=(28, 28), num_channels=1, scale=1 / 255, **kwargs
    ):
        kwargs.pop("image_converter", None)  # built from the arguments
        super().__init__(
            image_converter=keras_hub.layers.ImageConverter(
                image_size=tuple(int(n) for n in image_size),
                scale=scale,
                crop_to_aspect_ratio=False,
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

    def _channels(self, images):
        """Checks the rank, adds a grey channel axis, repeats grey for a
        colour model."""
        graph = is_tf_tensor(images)
        if not graph:
            images = np.asarray(keras.ops.convert_to_numpy(images))
        rank = len(images.shape)
        if (
            rank == 3
            and images.shape[-1] in (1, 3, 4)
            and images.shape[-1] < (images.shape[-2] or 0)
        ):
            # A grey batch of 1-, 3- or 4-pixel-wide images is no image
            # batch; an (H, W, C) image without its batch axis is.
            raise ValueError(
                f"got shape {tuple(images.shape)}: one image (height, "
                f"width, channels) without a batch axis? Pass a batch, "
                f"(1, {images.shape[0]}, {images.shape[1]}, "
                f"{images.shape[2]}) (e.g. `images[None]`); grey images "
                f"batch as (batch, height, width)."
            )
        if rank == 3:
            images = tf.expand_dims(images, -1) if graph else images[..., None]
        elif rank != 4:
            raise ValueError(
                f"expected a batch of images, (batch, height, width) or "
                f"(batch, height, width, channels); got shape "
                f"{tuple(images.shape)}."
            )
        channels = images.shape[-1]
        if channels == self.num_channels:
            return images
        if channels == 1:
            return (
                tf.repeat(images, self.num_channels, axis=-1)
                if graph
                else np.repeat(images, self.num_channels, axis=-1)
            )
        raise ValueError(
            f"images have {channels} channels; this model reads "
            f"{self.num_channels}."
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
            floating
            and self.scale is not None
            and abs(self.scale - 1 / 255) < 1e-12
        ):
            top = float(images.max())
            if 0.0 < top <= 1.0:
                raise ValueError(
                    "these float images look scaled to [0, 1] already; the "
                    "model expects pixel values in [0, 255] (uint8 images, "
                    "or floats before any scaling)."
                )

    def check_images(self, images):
        """The eager checks on an array of raw images (what `fit`, `predict`
        and `evaluate` run before their `tf.data` pipeline), so a bad batch
        is one clear error."""
        if is_tf_tensor(images) or hasattr(images, "element_spec"):
            return
        images = np.asarray(images)
        if images.ndim and images.shape[0] == 0:
            raise ValueError("got an empty batch of images.")
        self._check_values(self._channels(images))

    def call(self, x, y=None, sample_weight=None):
        x = self._channels(x)
        self._check_values(x)
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
