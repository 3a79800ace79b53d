"""ImageGPT preprocessor: raw images -> quantised pixels in raster order,
the start token, and next-pixel targets; and back (`images_from_ids`).

Images are read as the ViT's preprocessor reads them (the same checks,
grey only), resized to the model's size (bilinear: 28 x 28 to 14 x 14
averages each 2 x 2 block) and each pixel is replaced by the index of the
nearest level of the palette. The palette (grey levels on [0, 255]) is
part of the config, so a `.keras` file carries its quantiser.
"""

import keras
import numpy as np

from zoo._tensorflow import is_tf_tensor, tf
from zoo.models.imagegpt.imagegpt_presets import PRESETS
from zoo.models.vit.vit_preprocessor import ViTImageClassifierPreprocessor


def uniform_palette(num_levels):
    """`num_levels` grey levels evenly spaced on [0, 255], black and white
    included.

    >>> uniform_palette(4)
    [0.0, 85.0, 170.0, 255.0]
    """
    return [float(v) for v in np.linspace(0.0, 255.0, int(num_levels))]


def kmeans_palette(pixels, num_levels, iterations=50, max_pixels=2_000_000):
    """The palette of `num_levels` grey levels that k-means (Lloyd's
    algorithm, in one dimension) finds for `pixels`, sorted: ImageGPT's
    quantiser, on grey values instead of RGB.

    Starts from evenly spaced levels over the pixels' range (deterministic;
    a level left with no pixel keeps its place), runs `iterations` rounds
    on at most `max_pixels` values (an even subsample).

    Args:
        pixels: any array of grey values on [0, 255].
        num_levels: number of levels (>= 2).

    Returns:
        A sorted list of `num_levels` floats.

    >>> pixels = np.array([0, 0, 1, 2, 250, 255, 255, 128])
    >>> [round(v) for v in kmeans_palette(pixels, 3)]
    [1, 128, 253]
    """
    values = np.asarray(pixels, "float64").reshape(-1)
    if values.size == 0:
        raise ValueError("kmeans_palette needs at least one pixel.")
    if not np.isfinite(values).all():
        raise ValueError("kmeans_palette got NaN or infinite pixel values.")
    if int(num_levels) < 2:
        raise ValueError(f"num_levels must be >= 2; got {num_levels}.")
    if values.size > max_pixels:
        values = values[:: int(np.ceil(values.size / max_pixels))]
    distinct = len(np.unique(values))
    if distinct < int(num_levels):
        raise ValueError(
            f"the pixels take {distinct} distinct grey value(s), fewer than "
            f"num_levels={num_levels}: ask for {distinct} or fewer levels."
        )
    centres = np.linspace(values.min(), values.max(), int(num_levels))
    for _ in range(iterations):
        edges = (centres[1:] + centres[:-1]) / 2  # centres stay sorted
        nearest = np.searchsorted(edges, values)
        sums = np.bincount(nearest, values, minlength=len(centres))
        counts = np.bincount(nearest, minlength=len(centres))
        moved = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
        if np.allclose(moved, centres):
            break
        centres = moved
    return [float(v) for v in np.sort(centres)]


def raster(grid):
    """`(batch, height, width)` -> `(batch, height * width)`, row by row
    (raster order), the order the model reads pixels in.

    >>> raster(np.arange(8).reshape(1, 2, 4)).tolist()
    [[0, 1, 2, 3, 4, 5, 6, 7]]
    """
    grid = np.asarray(grid)
    return grid.reshape(grid.shape[0], -1)


def unraster(sequence, image_size):
    """The inverse of `raster`: `(batch, height * width)` ->
    `(batch, height, width)`.

    >>> unraster([[0, 1, 2, 3, 4, 5]], (2, 3)).tolist()
    [[[0, 1, 2], [3, 4, 5]]]
    """
    sequence = np.asarray(sequence)
    height, width = (int(n) for n in image_size)
    if sequence.ndim != 2 or sequence.shape[1] != height * width:
        raise ValueError(
            f"expected (batch, {height * width}) pixels for {height}x{width} "
            f"images; got shape {sequence.shape}."
        )
    return sequence.reshape(sequence.shape[0], height, width)


@keras.saving.register_keras_serializable(package="zoo")
class ImageGPTPreprocessor(ViTImageClassifierPreprocessor):
    """Raw grey images -> the token ids an ImageGPT reads, and the next
    pixel to predict at each position.

    Each image becomes `height * width` pixel ids in raster order (row by
    row), each the index of the nearest palette level. The model reads the
    start token (`start_token_id`, after the levels) and every pixel but
    the last; position t predicts pixel t.

    Pixels, sizes and layout are read and checked as
    `ViTImageClassifierPreprocessor` reads them: uint8 (or numbers on
    [0, 255]), `(batch, H, W)` or `(batch, H, W, 1)`, images of the model's
    aspect ratio resized to its size; colour images, bool images, other
    aspect ratios and empty batches are refused with one line.

    Args:
        image_size: `(height, width)` the model reads.
        num_levels: number of grey levels: the uniform palette's size when
            `palette` is None (default 8); with a palette, its length
            (checked when given).
        palette: the grey levels (floats on [0, 255], strictly increasing),
            e.g. `kmeans_palette(train_pixels, 8)`; None for
            `uniform_palette(num_levels)`.

    Call arguments:
        x: `(batch, H, W)` or `(batch, H, W, 1)` images.
        y, sample_weight: ignored (the targets are the images' own pixels).

    Returns:
        `(x, y, sample_weight)`: `x = {"token_ids", "padding_mask"}`, each
        `(batch, height * width)`; `y` the pixel ids `(batch, height *
        width)`; `sample_weight` ones of that shape.

    Example:

    >>> preprocessor = ImageGPTPreprocessor((2, 2), num_levels=4)
    >>> images = np.array([[[0, 90], [170, 255]]], "uint8")
    >>> x, y, _ = preprocessor(images)
    >>> np.asarray(y).tolist(), np.asarray(x["token_ids"]).tolist()
    ([[0, 1, 2, 3]], [[4, 0, 1, 2]])
    >>> preprocessor.images_from_ids(y).tolist()
    [[[0, 85], [170, 255]]]
    """

    # Pixels are compared with the palette in float32 whatever the
    # global dtype policy (bfloat16 would move pixels across levels).
    converter_dtype = "float32"

    def __init__(
        self, image_size=(14, 14), num_levels=None, palette=None, **kwargs
    ):
        kwargs.pop("num_channels", None)  # grey only
        kwargs.pop("scale", None)
        if palette is None:
            palette = uniform_palette(8 if num_levels is None else num_levels)
        palette = [float(v) for v in np.asarray(palette, "float64").reshape(-1)]
        if num_levels is not None and len(palette) != int(num_levels):
            raise ValueError(
                f"the palette has {len(palette)} levels but num_levels="
                f"{num_levels}; give one or make them agree."
            )
        if len(palette) < 2:
            raise ValueError(f"a palette needs >= 2 levels; got {palette}.")
        levels = np.asarray(palette)
        if (
            not np.isfinite(levels).all()
            or levels.min() < 0
            or levels.max() > 255
        ):
            raise ValueError(
                f"palette levels must be finite grey values on [0, 255]; got "
                f"{palette}."
            )
        if np.any(np.diff(levels) <= 0):
            raise ValueError(
                f"palette levels must be strictly increasing; got {palette}."
            )
        super().__init__(image_size=image_size, num_channels=1, **kwargs)
        self.palette = palette
        self.num_levels = len(palette)

    # `from_preset(preset, **overrides)`: the preset's image size and
    # number of levels (uniform levels unless `palette=` is given).
    _presets = PRESETS

    @classmethod
    def _from_preset(cls, preset, **overrides):
        config = cls.preset_part(preset, "preprocessor")
        if overrides.get("palette") is not None:
            config.pop("num_levels")  # the palette's own length
        return cls(**{**config, **overrides})

    @classmethod
    def from_images(cls, images, image_size=(14, 14), num_levels=8, **kwargs):
        """A preprocessor whose palette is k-means' on `images` as the model
        reads them (resized to `image_size`): what a recipe builds from its
        training images.

        >>> images = np.zeros((3, 8, 8), "uint8"); images[:, 2:6, 2:6] = 255
        >>> ImageGPTPreprocessor.from_images(images, (4, 4), 2).palette
        [0.0, 255.0]
        """
        uniform = cls(image_size, num_levels, **kwargs)
        pixels = uniform.resize(images)
        return cls(
            image_size, num_levels, kmeans_palette(pixels, num_levels), **kwargs
        )

    # --- Properties the GPT task reads --------------------------------------

    @property
    def start_token_id(self):
        """The id before the first pixel (after the palette's ids)."""
        return self.num_levels

    @property
    def vocabulary_size(self):
        """The palette's ids and the start token."""
        return self.num_levels + 1

    @property
    def sequence_length(self):
        """Pixels per image: the positions a training call packs."""
        height, width = self.image_converter.image_size
        return int(height) * int(width)

    # --- Images <-> pixel ids ----------------------------------------------

    def resize(self, images):
        """Checked images at the model's size, as floats on [0, 255]:
        `(batch, height, width)` (NumPy; a `tf.Tensor` inside `tf.data`),
        resized in float32 (`converter_dtype`) whatever the input's dtype."""
        x = ViTImageClassifierPreprocessor.call(self, images)
        if is_tf_tensor(x):
            return x[..., 0] * 255.0
        return (
            np.asarray(keras.ops.convert_to_numpy(x), "float32")[..., 0] * 255.0
        )

    def pixel_ids(self, images):
        """Images -> pixel ids in raster order, `(batch, height * width)`
        int32: each pixel's nearest palette level."""
        pixels = self.resize(images)
        if is_tf_tensor(pixels):
            distance = tf.abs(pixels[..., None] - tf.constant(self.palette))
            ids = tf.argmin(distance, axis=-1, output_type=tf.int32)
            return tf.reshape(ids, [tf.shape(ids)[0], -1])
        distance = np.abs(
            pixels[..., None] - np.asarray(self.palette, "float32")
        )
        return raster(np.argmin(distance, axis=-1).astype("int32"))

    def images_from_ids(self, pixel_ids):
        """Pixel ids `(batch, height * width)` (raster order) -> uint8
        images `(batch, height, width)`, each id its level's grey value.

        Raises:
            ValueError: ids outside the palette (the start token included).
        """
        ids = np.asarray(keras.ops.convert_to_numpy(pixel_ids))
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_levels):
            raise ValueError(
                f"pixel ids must lie in [0, {self.num_levels - 1}] (the "
                f"palette's levels); got values from {ids.min()} to "
                f"{ids.max()}."
            )
        levels = np.round(np.asarray(self.palette)).astype("uint8")
        return unraster(levels[ids], self.image_converter.image_size)

    def call(self, x, y=None, sample_weight=None):
        pixels = self.pixel_ids(x)
        graph = is_tf_tensor(pixels)
        batch = tf.shape(pixels)[0] if graph else pixels.shape[0]
        if graph:
            start = tf.fill([batch, 1], self.start_token_id)
            token_ids = tf.concat([start, pixels[:, :-1]], axis=1)
            mask = tf.ones_like(token_ids, tf.bool)
            weights = tf.ones_like(pixels, tf.float32)
        else:
            start = np.full((batch, 1), self.start_token_id, "int32")
            token_ids = np.concatenate([start, pixels[:, :-1]], axis=1)
            mask = np.ones_like(token_ids, bool)
            weights = np.ones_like(pixels, "float32")
        return keras.utils.pack_x_y_sample_weight(
            {"token_ids": token_ids, "padding_mask": mask}, pixels, weights
        )

    def get_config(self):
        config = super().get_config()
        config.pop("num_channels", None)
        config.pop("scale", None)
        config.update({"num_levels": self.num_levels, "palette": self.palette})
        return config
