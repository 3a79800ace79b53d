"""The image-captioning preprocessor: raw images and caption strings ->
the float images the encoder reads, decoder ids, masks and next-word
targets, with the tokenizer inside the model file.

Images are checked (in eager calls) and resized to the model's size
(bilinear, antialiased, aspect ratio not kept: the Flickr8k loader squeezes
the training photographs the same way, so a photograph of any shape is read
as the model learned to read one); they stay on the [0, 255] pixel scale,
which every image encoder normalises itself. Captions are lower-cased and
stripped of punctuation before the word tokenizer reads them, so training
captions and references can be given as written. Runs inside `tf.data`
under every backend and in eager calls (`generate`, `attention_maps`).
"""

import keras
import keras_hub
import numpy as np
from keras_hub.src.utils.tensor_utils import preprocessing_function

from zoo._tensorflow import is_tf_tensor, tf
from zoo.models.captioning.captioning_presets import PRESETS
from zoo.models.presets import FromPreset

# Anything but letters, digits and apostrophes separates words
# (zoo.data.flickr8k.normalize_caption is the same rule in Python).
_NOT_A_WORD = r"[^\p{L}\p{N}']+"


def _describe(shape):
    return "x".join(str(n) for n in shape)


@keras.saving.register_keras_serializable(package="zoo")
class ImageCaptionerPreprocessor(FromPreset, keras_hub.models.Preprocessor):
    """Raw images and captions -> the inputs and targets of an
    `ImageCaptioner`.

    The decoder reads `<s> caption` and learns to predict `caption </s>`;
    captions longer than `decoder_sequence_length - 1` words are cut.

    Pixels: uint8 images, or other integers or floats on the [0, 255]
    scale. Bool images, floats scaled to [0, 1], NaN and values outside
    [0, 255] are refused.

    Sizes: any size, any aspect ratio: images are resized to `image_size`
    without keeping the aspect ratio (a 28x56 image is squeezed to the
    model's square), which is how `zoo.data.flickr8k` resizes the training
    photographs, so what the model reads at inference matches what it was
    trained on. Pad or crop images first to keep their proportions.

    Layout: channels last, `(H, W, C)` per image; channels-first images
    and batches (`(N, 3, H, W)`, `(N, 1, 28, 28)`) are refused with the fix
    (`np.moveaxis(images, 1, -1)`), and so are grey or RGBA images for a
    colour model.

    Args:
        tokenizer: a word or subword tokenizer with start, end and padding
            tokens (`zoo.data.tokenizers.train_subword_tokenizer(captions,
            n, model_type="word")`).
        image_size: `(height, width)` the encoder reads; other sizes are
            resized.
        num_channels: channels the encoder reads: 3 for colour photographs
            (grey or RGBA images are refused with the fix in the message),
            1 for grey images.
        decoder_sequence_length: caption positions, `<s>` included.
        raw_pixels: True for images on the [0, 255] scale (checked and
            resized); False when the "images" are grids of features
            computed by a frozen encoder (`FeatureGridInput`), passed on
            as they are.
        normalize_captions: lower-case captions and drop punctuation
            before tokenizing.

    Call arguments:
        x: images `(batch, H, W[, C])` (uint8, or floats on [0, 255]), a
            list of images of any sizes, or `{"images": ..., "captions":
            ...}`.
        y: caption strings `(batch,)` when `x` holds only the images.
        sample_weight: ignored (the padding mask weights the targets).

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `images` `(batch, height,
        width, num_channels)` float32, `decoder_token_ids` and
        `decoder_padding_mask` `(batch, decoder_sequence_length)`; `y` the
        next word at each position; `sample_weight` 1 where `y` is a real
        token. Without captions, `{"images": ...}` alone.

    Raises (eager calls; a dataset's `element_spec` is checked for bool
    and channels-first images; inside `tf.data` nothing is checked):
        ValueError: an empty batch, no image, a wrong rank, a zero-size,
            bool, grey or RGBA image for a colour model, channels first,
            floats scaled to [0, 1], NaN or pixel values outside [0, 255].

    Example:

    >>> from zoo.data.tokenizers import train_subword_tokenizer
    >>> captions = ["A dog runs on the grass.", "Two children play."]
    >>> tokenizer = train_subword_tokenizer(captions, 500, model_type="word")
    >>> preprocessor = ImageCaptionerPreprocessor(tokenizer, (224, 224))
    >>> x, y, w = preprocessor(np.zeros((1, 300, 400, 3), "uint8"),
    ...                        ["A dog runs on the grass."])
    >>> tuple(x["images"].shape), tuple(x["decoder_token_ids"].shape)
    ((1, 224, 224, 3), (1, 24))
    """

    def __init__(
        self,
        tokenizer,
        image_size=(224, 224),
        num_channels=3,
        decoder_sequence_length=24,
        raw_pixels=True,
        normalize_captions=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.image_size = image_size
        self.num_channels = int(num_channels)
        self.decoder_sequence_length = int(decoder_sequence_length)
        if self.decoder_sequence_length < 2:
            raise ValueError(
                "decoder_sequence_length must be >= 2; got "
                f"{decoder_sequence_length}."
            )
        self.raw_pixels = bool(raw_pixels)
        self.normalize_captions = bool(normalize_captions)
        self.packer = None

    def build(self, input_shape):
        # One longer than the decoder reads: inputs and next-word targets
        # are the two shifted views of it.
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=self.tokenizer.start_token_id,
            end_value=self.tokenizer.end_token_id,
            pad_value=self.tokenizer.pad_token_id,
            sequence_length=self.decoder_sequence_length + 1,
            return_padding_mask=True,
            name="packer",
        )
        self.built = True

    @property
    def image_size(self):
        """`(height, width)` the encoder reads."""
        return self._target_size

    @image_size.setter
    def image_size(self, value):
        self._target_size = tuple(int(n) for n in value)

    # `from_preset(preset, tokenizer=..., **overrides)`: the preset's image
    # size and caption length.
    _presets = PRESETS
    preset_requires = {
        "tokenizer": "the preset sets the sizes, the vocabulary is your "
        "tokenizer's (zoo.data.tokenizers.train_subword_tokenizer(captions, "
        'n, model_type="word"))',
    }

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "preprocessor"), **overrides})

    # --- Images -------------------------------------------------------------

    def _image_error(self, index, problem):
        where = "" if index is None else f"image {index}: "
        return ValueError(where + problem)

    def _check_one(self, image, index=None):
        """One raw image `(H, W[, C])` as a float32 NumPy array `(H, W, C)`
        on [0, 255], or a clear error."""
        image = np.asarray(image)
        if image.dtype == object or not (
            np.issubdtype(image.dtype, np.number) or image.dtype == bool
        ):
            raise self._image_error(
                index,
                f"expected an array of pixel values; got dtype {image.dtype}.",
            )
        if image.dtype == bool:
            raise self._image_error(index, self._bool_problem("image"))
        if not self.raw_pixels:
            expected = (*self.image_size, self.num_channels)
            if image.shape != expected:
                raise self._image_error(
                    index,
                    f"expected a feature grid of shape "
                    f"{_describe(expected)}; got {_describe(image.shape)}.",
                )
            if not np.isfinite(image).all():
                raise self._image_error(
                    index, "the feature grid holds NaN or infinite values."
                )
            return image.astype("float32")
        if image.ndim == 2:
            image = image[..., None]
        if image.ndim != 3:
            raise self._image_error(
                index,
                f"expected an image (height, width[, channels]); got "
                f"shape {_describe(image.shape)}.",
            )
        height, width, channels = image.shape
        if height == 0 or width == 0:
            raise self._image_error(
                index, f"got an empty image of shape {_describe(image.shape)}."
            )
        if channels != self.num_channels:
            raise self._image_error(index, self._channel_problem(image.shape))
        if np.issubdtype(image.dtype, np.floating):
            if not np.isfinite(image).all():
                raise self._image_error(
                    index, "the image holds NaN or infinite pixel values."
                )
            top = float(image.max())
            if 0.0 < top <= 1.0:
                raise self._image_error(
                    index,
                    "this float image looks scaled to [0, 1]; the "
                    "model reads pixel values on [0, 255] (uint8 images, or "
                    "floats before scaling: image * 255).",
                )
        low, high = float(image.min()), float(image.max())
        if low < 0 or high > 255:
            raise self._image_error(
                index,
                f"pixel values must lie in [0, 255]; got values from "
                f"{low:g} to {high:g}.",
            )
        return image.astype("float32")

    def _channel_problem(self, shape):
        channels = shape[-1]
        if shape[0] in (1, 3, 4) and channels not in (1, 3, 4):
            return (
                f"got shape {_describe(shape)}, channels first? Pass "
                "(height, width, channels): np.moveaxis(image, 0, -1)."
            )
        if self.num_channels == 3 and channels == 1:
            return (
                "got a grey image; this model reads colour (RGB) "
                "images: repeat its channel, np.repeat(image[..., None]"
                ", 3, axis=-1) for an (H, W) image."
            )
        if self.num_channels == 3 and channels == 4:
            return (
                "got an RGBA image; this model reads RGB images: drop "
                "the alpha channel, image[..., :3]."
            )
        return (
            f"got {channels} channels; this model reads "
            f"{self.num_channels} (shape {_describe(shape)})."
        )

    def _bool_problem(self, name):
        got = "bool images" if name == "images" else "a bool image"
        return (
            f"got {got}; this model reads pixel values on [0, 255]: pass "
            f"{name}.astype('uint8') * 255."
        )

    def _channels_first(self, shape):
        """Whether a batch shape `(N, C, H, W)` looks channels first: an
        image's channel count on axis 1, none on the last axis."""
        if not self.raw_pixels:
            return False
        first, last = shape[1], shape[-1]
        return (
            first in (1, 3, 4)
            and last is not None
            and last not in (1, 3, 4, self.num_channels)
        )

    def _channels_first_problem(self, shape):
        return (
            f"got a batch of shape {_describe(shape)}, channels first? Pass "
            "(batch, height, width, channels): np.moveaxis(images, 1, -1)."
        )

    def _check_spec(self, spec):
        """The checks a dataset's `element_spec` allows (its images are
        not read): bool images and channels first."""
        if isinstance(spec, tuple) and spec:
            spec = spec[0]
        if isinstance(spec, dict):
            spec = spec.get("images")
        if not hasattr(spec, "dtype") or spec.shape.rank is None:
            return
        if spec.dtype.name == "bool":
            raise ValueError(self._bool_problem("images"))
        shape = tuple(spec.shape)
        if len(shape) == 4 and self._channels_first(shape):
            raise ValueError(
                self._channels_first_problem(
                    ["n" if n is None else n for n in shape]
                )
            )

    def _resize(self, image):
        if not self.raw_pixels or tuple(image.shape[:2]) == self.image_size:
            return image
        resized = tf.image.resize(image, self.image_size, antialias=True)
        return np.clip(resized.numpy(), 0.0, 255.0).astype("float32")

    def _as_images(self, images):
        """`(images, single)`: a list of arrays or a batch array (not
        copied), and whether one image was given rather than a batch."""
        if images is None:
            raise ValueError(
                "expected images: a batch array (n, height, width, "
                "channels), a list of images, or one image; got None."
            )
        if isinstance(images, (str, bytes, dict)):
            raise ValueError(
                "expected images: a batch array (n, height, width, "
                f"channels) or a list of images; got {type(images).__name__}."
            )
        if isinstance(images, (list, tuple)):
            if not images:
                raise ValueError("got an empty list of images.")
            return list(images), False
        images = np.asarray(
            keras.ops.convert_to_numpy(images)
            if keras.ops.is_tensor(images)
            else images
        )
        single = self._is_one_image(images)
        if images.dtype == bool:
            raise ValueError(
                self._bool_problem("image" if single else "images")
            )
        if images.ndim == 4 and self._channels_first(images.shape):
            raise ValueError(self._channels_first_problem(images.shape))
        if single:
            images = images[None]
        expected = (
            (3, 4) if self.raw_pixels and self.num_channels == 1 else (4,)
        )
        if images.ndim not in expected:
            raise ValueError(self._rank_problem(images.shape))
        if len(images) == 0:
            raise ValueError("got an empty batch of images.")
        return images, single

    def _ready(self, images):
        """Whether a batch array needs no per-image check or resize: uint8
        (no NaN, nothing outside [0, 255]) at the model's size."""
        return (
            isinstance(images, np.ndarray)
            and self.raw_pixels
            and images.dtype == np.uint8
            and images.ndim == 4
            and images.shape[1:] == (*self.image_size, self.num_channels)
        )

    def image_batch(self, images):
        """Raw images -> `(batch, height, width, num_channels)` float32
        NumPy array on [0, 255] (checked and resized), and whether a single
        image was given (not a batch).

        Takes a batch array `(n, H, W[, C])`, a list of images of any sizes,
        or one image (`(H, W, C)` for a colour model, `(H, W)`).
        """
        images, single = self._as_images(images)
        if self._ready(images):
            return images.astype("float32"), single
        return np.stack(
            [
                self._resize(self._check_one(image, i))
                for i, image in enumerate(images)
            ]
        ), single

    def check_images(self, images):
        """The eager checks of `image_batch` without building the batch
        (what `fit` and `evaluate` run before their pipeline), so a bad
        batch is one clear error; a dataset's `element_spec` is checked
        for bool and channels-first images (its pixels are not read), and
        tensors inside `tf.data` pass unchecked."""
        if is_tf_tensor(images):
            return
        if hasattr(images, "element_spec"):
            self._check_spec(images.element_spec)
            return
        images, _ = self._as_images(images)
        if not self._ready(images):
            for i, image in enumerate(images):
                self._check_one(image, i)

    def _is_one_image(self, images):
        """Whether an array is one image (or grid), not a batch: `(H, W)`
        or `(H, W, C)` for a colour model (a grey model's 3-D arrays are
        batches of `(H, W)` images)."""
        if not self.raw_pixels:
            return images.ndim == 3
        if images.ndim == 2:
            return True
        if images.ndim != 3 or self.num_channels == 1:
            return False
        # (H, W, C) with a channel count an image may have, or channels
        # first: _check_one names the problem.
        return images.shape[-1] in (1, 3, 4) or images.shape[0] in (1, 3, 4)

    def _rank_problem(self, shape):
        if self.num_channels > 1 and len(shape) == 3:
            return (
                f"got shape {_describe(shape)}: a batch of grey images? "
                f"This model reads {self.num_channels}-channel images "
                "(batch, height, width, channels)."
            )
        return (
            "expected a batch of images (batch, height, width, channels)"
            f", a list of images or one image; got shape "
            f"{_describe(shape)}."
        )

    def _graph_images(self, images):
        """Images inside `tf.data`: float32, resized when their size is not
        the model's."""
        images = tf.cast(images, "float32")
        if len(images.shape) == 3 and self.raw_pixels:
            images = images[..., None]
        if self.raw_pixels and tuple(images.shape[1:3]) != self.image_size:
            images = tf.image.resize(images, self.image_size, antialias=True)
        return images

    # --- Captions -----------------------------------------------------------

    def _captions(self, captions):
        captions = tf.convert_to_tensor(captions)
        if self.normalize_captions:
            captions = tf.strings.lower(captions, encoding="utf-8")
            captions = tf.strings.regex_replace(captions, _NOT_A_WORD, " ")
            captions = tf.strings.strip(captions)
        return captions

    def tokenize(self, captions):
        """`(token_ids, padding_mask)` `(batch, decoder_sequence_length + 1)`
        of `<s> caption </s>` (cut and padded)."""
        if self.packer is None:
            self.build(None)
        return self.packer(self.tokenizer(self._captions(captions)))

    @preprocessing_function
    def call(self, x, y=None, sample_weight=None):
        if isinstance(x, dict):
            x, y = x["images"], x.get("captions", y)
        images = self._graph_images(x)
        if y is None:
            return {"images": images}
        token_ids, mask = self.tokenize(y)
        x = {
            "images": images,
            "decoder_token_ids": token_ids[..., :-1],
            "decoder_padding_mask": mask[..., :-1],
        }
        return keras.utils.pack_x_y_sample_weight(
            x, token_ids[..., 1:], mask[..., 1:]
        )

    def get_config(self):
        return {
            **super().get_config(),
            "image_size": list(self.image_size),
            "num_channels": self.num_channels,
            "decoder_sequence_length": self.decoder_sequence_length,
            "raw_pixels": self.raw_pixels,
            "normalize_captions": self.normalize_captions,
        }
