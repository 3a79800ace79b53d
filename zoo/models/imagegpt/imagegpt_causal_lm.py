"""ImageGPT: a GPT over quantised pixels (Chen et al. 2020, "Generative
Pretraining from Pixels", at digit size).

An image is read as a sequence: its pixels, row by row, each quantised to
the nearest grey level of a small palette (`ImageGPTPreprocessor`), after
a start token. The GPT backbone (learned 1-D positions, causal attention)
predicts each pixel from those above and to its left, as a character
model predicts the next character. Generation is the GPT's, with its
key/value cache:

* `complete(images, rows)` keeps the top `rows` rows of each image and
  samples the rest;
* `generate_images(n)` samples images from the start token alone;
* `features(images)` averages a block's hidden states over the positions,
  the representation ImageGPT's linear probe classifies
  (`zoo.models.imagegpt.linear_probe`).
"""

import keras
import numpy as np

from zoo.models.gpt.gpt_backbone import GPTBackbone
from zoo.models.gpt.gpt_causal_lm import GPTCausalLM
from zoo.models.imagegpt.imagegpt_preprocessor import ImageGPTPreprocessor
from zoo.models.imagegpt.imagegpt_presets import PRESETS
from zoo.models.raw_text import preprocess_texts
from zoo.models.vit.vit_image_classifier import RawImagesMixin


@keras.saving.register_keras_serializable(package="zoo")
class ImageGPTBackbone(GPTBackbone):
    """`GPTBackbone` with ImageGPT's presets (`from_preset("digits",
    vocabulary_size=...)`): the same decoder, whose tokens are pixel ids.

    Args: as `GPTBackbone`'s; `sequence_length` is the number of pixels
    plus one (the start token).

    Example:

    >>> backbone = ImageGPTBackbone.from_preset("smoke", vocabulary_size=5)
    >>> ids = np.zeros((1, 64), "int32")
    >>> backbone({"token_ids": ids, "padding_mask": ids + 1})[
    ...     "sequence_output"].shape
    (1, 64, 32)
    """

    _presets = PRESETS


@keras.saving.register_keras_serializable(package="zoo")
class ImageGPTCausalLM(RawImagesMixin, GPTCausalLM):
    """Next-pixel logits for raw images; image completion, unconditional
    samples and probe features.

    A `GPTCausalLM` whose preprocessor reads images: `fit(images)` trains
    next-pixel prediction (no labels: the targets are the images' own
    pixels), `evaluate(images)` gives the loss in nats per pixel (divide
    by ln 2 for bits per pixel), `predict(images)` the logits. Raw images
    are checked as the ViT checks them (`RawImagesMixin`).

    Args:
        backbone: an `ImageGPTBackbone` (or `GPTBackbone`) with
            `vocabulary_size >= preprocessor.vocabulary_size` and
            `sequence_length >= pixels + 1`.
        preprocessor: an `ImageGPTPreprocessor` (its palette is saved in
            the `.keras` file).

    Call arguments:
        `{"token_ids": (batch, pixels), "padding_mask": (batch, pixels)}`:
        the start token and every pixel but the last.

    Returns:
        float32 logits `(batch, pixels, vocabulary_size)`: position t
        scores pixel t's level (the start token's id, never a target, is
        the last column).

    Example:

    >>> preprocessor = ImageGPTPreprocessor.from_preset("smoke")
    >>> model = ImageGPTCausalLM.from_preset("smoke", preprocessor=preprocessor)
    >>> images = np.random.default_rng(0).integers(0, 256, (4, 8, 8), "uint8")
    >>> history = model.fit(images, epochs=1, verbose=0)
    >>> model.predict(images, verbose=0).shape
    (4, 64, 5)
    >>> model.complete(images[:2], rows=4).shape  # top 4 rows kept
    (2, 8, 8)
    >>> model.features(images).shape
    (4, 32)
    """

    backbone_cls = ImageGPTBackbone
    preprocessor_cls = ImageGPTPreprocessor
    # `from_preset(preset, preprocessor=None, **overrides)`: without a
    # preprocessor, the preset's (uniform palette).
    _presets = PRESETS
    preset_requires = {}
    # `zoo.export`: `serving_default` is `predict` on uint8 images.
    exports_predict = True
    exports_generate = None

    @classmethod
    def _from_preset(cls, preset, preprocessor=None, **overrides):
        if preprocessor is None:
            preprocessor = ImageGPTPreprocessor.from_preset(preset)
        return super()._from_preset(preset, preprocessor, **overrides)

    @classmethod
    def _backbone_defaults(cls, preset, preprocessor):
        return {"vocabulary_size": preprocessor.vocabulary_size}

    def __init__(self, backbone, preprocessor=None, **kwargs):
        super().__init__(backbone, preprocessor, **kwargs)
        if preprocessor is not None:
            pixels = preprocessor.sequence_length
            if backbone.sequence_length < pixels + 1:
                raise ValueError(
                    f"{type(self).__name__}: {pixels} pixels and the start "
                    f"token need {pixels + 1} positions; the backbone has "
                    f"{backbone.sequence_length}. Build it with "
                    f"sequence_length={pixels + 1}."
                )

    # --- Raw images ---------------------------------------------------------

    def predict(self, x, batch_size=None, **kwargs):
        x = self._checked(x)
        if self.preprocessor is None or not isinstance(
            x, (list, tuple, np.ndarray)
        ):
            return super().predict(x, batch_size=batch_size, **kwargs)
        # Images in memory: quantised eagerly, a chunk at a time, and the
        # model predicts on the ids (no TensorFlow pipeline to trace).
        features = preprocess_texts(self.preprocessor, np.asarray(x))
        return keras.Model.predict(
            self, features, batch_size=batch_size, **kwargs
        )

    def _prompt_ids(self, inputs):
        # `generate` continues pixel ids; images go to `complete`.
        if not isinstance(inputs, dict):
            raise ValueError(
                "ImageGPT's generate() continues pixel ids, {'token_ids': "
                "..., 'padding_mask': ...}; for images call complete(images, "
                "rows=...) or generate_images(n)."
            )
        return super()._prompt_ids(inputs)

    def _require_preprocessor(self, method):
        if self.preprocessor is None:
            raise ValueError(
                f"{method}() reads and returns images, so it needs the "
                "model's ImageGPTPreprocessor; this model has none."
            )
        return self.preprocessor

    # --- Generation -----------------------------------------------------------

    def complete(
        self,
        images,
        rows=None,
        sampler="greedy",
        temperature=1.0,
        seed=None,
        **sampler_options,
    ):
        """Keeps the top `rows` rows of each image and generates the rest,
        pixel by pixel, with the key/value cache.

        Args:
            images: raw grey images, as `predict` reads them.
            rows: rows kept, 0 <= rows < height; default half the height.
            sampler, temperature, seed, **sampler_options: as
                `GPTCausalLM.generate` ("greedy", "top_k" with `k=`,
                "top_p", "random"). Greedy is the same on every backend;
                a seeded sampler repeats on one backend.

        Returns:
            uint8 images `(batch, height, width)` at the model's size: the
            kept rows quantised, the rest generated (palette levels). The
            start token, which training never targets, is read as the
            darkest level if a sampler ever draws it.

        Raises:
            ValueError: bad images (see `ImageGPTPreprocessor`), or `rows`
                outside [0, height).
        """
        preprocessor = self._require_preprocessor("complete")
        self._checked(images)
        height, width = preprocessor.image_converter.image_size
        rows = height // 2 if rows is None else rows
        if (
            isinstance(rows, bool)
            or not isinstance(rows, (int, np.integer))
            or not 0 <= rows < height
        ):
            raise ValueError(
                f"rows={rows!r}: keep a whole number of rows from 0 to "
                f"{height - 1} (the images have {height})."
            )
        pixels = np.asarray(preprocessor.pixel_ids(images))
        return self._sample_pixels(
            pixels[:, : int(rows) * width],
            sampler,
            temperature,
            seed,
            sampler_options,
        )

    def generate_images(
        self, n, sampler="random", temperature=1.0, seed=None, **sampler_options
    ):
        """`n` images sampled from the start token alone (ancestral
        sampling by default: each pixel drawn from the model's
        distribution).

        Returns:
            uint8 images `(n, height, width)`.
        """
        self._require_preprocessor("generate_images")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n={n!r}: ask for at least one image.")
        return self._sample_pixels(
            np.zeros((int(n), 0), "int32"),
            sampler,
            temperature,
            seed,
            sampler_options,
        )

    def _sample_pixels(self, kept, sampler, temperature, seed, options):
        preprocessor = self.preprocessor
        start = np.full((len(kept), 1), preprocessor.start_token_id, "int32")
        prompt = np.concatenate([start, kept], axis=1)
        out = self.generate(
            {"token_ids": prompt, "padding_mask": np.ones_like(prompt, bool)},
            max_length=preprocessor.sequence_length + 1,
            sampler=sampler,
            temperature=temperature,
            seed=seed,
            stop_token_ids=None,
            **options,
        )
        ids = np.asarray(out["token_ids"])[:, 1:]
        ids = np.where(ids >= preprocessor.num_levels, 0, ids)
        return preprocessor.images_from_ids(ids)

    # --- Representations ------------------------------------------------------

    def features(self, images, layer=None, batch_size=256):
        """Hidden states averaged over the positions: one vector per
        image, what ImageGPT's linear probe reads.

        Args:
            images: raw grey images, as `predict` reads them.
            layer: None for the backbone's output (after the final
                LayerNorm), or a block's index (0-based; negative counts
                from the last) for that block's output.
            batch_size: images per forward pass.

        Returns:
            float32 NumPy array `(batch, hidden_dim)`.
        """
        preprocessor = self._require_preprocessor("features")
        backbone = self.backbone
        if layer is None:
            output = backbone.output["sequence_output"]
        else:
            blocks = backbone.transformer_layers
            if isinstance(layer, bool) or not -len(blocks) <= layer < len(
                blocks
            ):
                raise ValueError(
                    f"layer={layer!r}: the backbone has {len(blocks)} blocks "
                    f"(0 to {len(blocks) - 1}, or None for the final output)."
                )
            output = blocks[layer].output
        pooled = keras.layers.GlobalAveragePooling1D(dtype="float32")(output)
        extractor = keras.Model(backbone.input, pooled)
        self._checked(images)
        inputs = preprocess_texts(preprocessor, np.asarray(images))
        return np.asarray(
            extractor.predict(inputs, batch_size=batch_size, verbose=0),
            "float32",
        )
