"""The image-captioning task: raw images in, captions out.

`ImageCaptioner` is a keras-hub `Seq2SeqLM` whose "source" is an image:
`fit(images, captions)` and `evaluate` run its preprocessor inside
`tf.data` (raw images and strings on every backend; the `.keras` file
carries the tokenizer), `generate(images)` writes captions greedily or with
beam search (the encoder and the image's part of the attention run once
per image, each word costs one decoder step), and `attention_maps(images)`
gives, for every generated word, the attention alpha_t over the image's
grid of regions: the figures of Show, Attend and Tell.
"""

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo._tensorflow import is_dataset
from zoo.data.captions import caption_dataset
from zoo.export import ServingExportMixin
from zoo.models.arguments import (
    check_integer,
    check_model_kwargs,
    check_vocabulary_fits,
)
from zoo.models.captioning.captioning_backbone import CaptioningBackbone
from zoo.models.captioning.captioning_presets import PRESETS
from zoo.models.captioning.image_captioner_preprocessor import (
    ImageCaptionerPreprocessor,
)
from zoo.models.decoding import EncoderDecoderGeneration, suppressed_tokens_bias
from zoo.models.generation import (
    GenerationMixin,
    check_max_length,
    finish_rows,
    resolve_sampler,
)
from zoo.models.jax_state import KeepsWeightsOnError, _ReattachOnError
from zoo.models.losses import SparseCategoricalCrossentropyWithSmoothing
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset
from zoo.models.quantization import quantize_matrices


@keras.saving.register_keras_serializable(package="zoo")
class ImageCaptioner(
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    GenerationMixin,
    EncoderDecoderGeneration,
    PortableCompileConfig,
    keras_hub.models.Seq2SeqLM,
):
    """Image captioning: an image encoder and an attending decoder
    (`ShowAttendTellBackbone` or `TransformerCaptionBackbone`), a
    preprocessor, and generation from raw images.

    Args:
        backbone: a captioning backbone.
        preprocessor: an `ImageCaptionerPreprocessor`, or None for
            preprocessed inputs.

    Call arguments:
        the backbone's dict of `images`, `decoder_token_ids` and
        `decoder_padding_mask`.

    Returns:
        float32 logits `(batch, steps, vocabulary_size)`; position t
        predicts caption token t + 1.

    Example:

    >>> from zoo.data.tokenizers import train_subword_tokenizer
    >>> captions = ["a dog runs through the grass", "two children play"]
    >>> tokenizer = train_subword_tokenizer(captions, 100, model_type="word")
    >>> preprocessor = ImageCaptionerPreprocessor.from_preset(
    ...     "smoke", tokenizer=tokenizer)
    >>> captioner = ImageCaptioner.from_preset(
    ...     "smoke", preprocessor=preprocessor)
    >>> uint8_images = np.zeros((2, 32, 32, 3), "uint8")
    >>> history = captioner.fit(uint8_images, captions, epochs=1, verbose=0)
    >>> len(captioner.generate(uint8_images))  # words: untrained, random
    2

    Trained on Flickr8k (the "flickr8k_lstm" preset, a vocabulary of 2600
    words), the captions read:

    >>> captioner.generate(uint8_images[:2])  # doctest: +SKIP
    ['a dog runs through the grass', 'two children play on the beach']
    """

    # `zoo.export`: `generate` is the export's signature (and its default).
    exports_predict = False
    exports_generate = "captioner"

    backbone_cls = CaptioningBackbone
    preprocessor_cls = ImageCaptionerPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: a fresh
    # captioner of the preset's architecture for the preprocessor's
    # vocabulary and caption length; `backbone_` overrides go to
    # `CaptioningBackbone.from_preset` (`backbone_image_encoder` replaces
    # the preset's encoder, e.g. a `FeatureGridInput` to train on cached
    # features).
    _presets = PRESETS

    def __init__(self, backbone, preprocessor=None, **kwargs):
        self.backbone = backbone
        self.preprocessor = preprocessor
        check_vocabulary_fits(self, backbone.vocabulary_size)
        self._init_generation()
        self.logits_dtype = keras.layers.Activation(
            "linear", dtype="float32", name="logits"
        )
        inputs = backbone.input
        hidden = backbone(inputs)["sequence_output"]
        logits = self.logits_dtype(backbone.token_logits(hidden))
        check_model_kwargs(self, kwargs)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self._token_bias = (None, None)  # (special ids, bias)

    @property
    def token_bias(self):
        """-1e9 on the tokens never generated (padding, the unknown word,
        the start token), 0 elsewhere: a `(vocabulary,)` float32 vector, or
        None without a tokenizer. Read from the tokenizer when generating,
        not when the task is built: a loaded tokenizer gets its vocabulary
        (and so its special ids) after the task is constructed."""
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        if tokenizer is None:
            return None
        ids = tuple(
            getattr(tokenizer, name, None)
            for name in ("pad_token_id", "unknown_token_id", "start_token_id")
        )
        if self._token_bias[0] != ids:
            bias = suppressed_tokens_bias(self.backbone.vocabulary_size, ids)
            self._token_bias = (ids, bias)
        return self._token_bias[1]

    @classmethod
    def _backbone_defaults(cls, preset, preprocessor):
        return {
            **super()._backbone_defaults(preset, preprocessor),
            "decoder_sequence_length": preprocessor.decoder_sequence_length,
        }

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="greedy",
        label_smoothing=0.0,
        **kwargs,
    ):
        """keras-hub's `Seq2SeqLM.compile`; `loss="auto"` is the
        cross-entropy (with `label_smoothing`) per real caption token,
        `optimizer="auto"` Adam (1e-3). The doubly stochastic penalty of a
        `ShowAttendTellBackbone` is added to it while training."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-3, global_clipnorm=5.0)
        if loss == "auto":
            loss = SparseCategoricalCrossentropyWithSmoothing(
                label_smoothing,
                from_logits=True,
                reduction="mean_with_sample_weight",
            )
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            sampler=resolve_sampler(sampler),
            **kwargs,
        )
        self._compiled_sampler_changed(kwargs.get("jit_compile", "auto"))

    # --- Training on raw images ---------------------------------------------

    def _pairs(self, x, y, batch_size, shuffle, method):
        """`x` as `fit`/`evaluate` hand it to keras-hub: datasets as they
        are, arrays of images with their captions as a `caption_dataset`."""
        if is_dataset(x) and self.preprocessor is not None:
            self.preprocessor.check_images(x)  # its element_spec
        if x is None or is_dataset(x) or isinstance(x, keras.utils.PyDataset):
            return x, y, batch_size
        if isinstance(x, dict):
            x, y = x.get("images"), x.get("captions", y)
        if y is None:
            raise ValueError(
                f"ImageCaptioner.{method}() needs captions: {method}(images, "
                "captions), one caption or one list of captions per image."
            )
        if self.preprocessor is not None:
            self.preprocessor.check_images(x)
            x = self._model_sized(x)
        dataset = caption_dataset(x, y, batch_size or 32, shuffle=shuffle)
        return dataset, None, None

    def _model_sized(self, images):
        """A batch array of images at the model's size: as it is when it
        already is one (not copied), else checked, resized and stacked."""
        preprocessor = self.preprocessor
        if (
            isinstance(images, np.ndarray)
            and images.ndim >= 3
            and (tuple(images.shape[1:3]) == preprocessor.image_size)
        ):
            return images
        return preprocessor.image_batch(images)[0]

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        sample_weight=None,
        shuffle=True,
        **kwargs,
    ):
        """keras-hub's `fit` on `(images, captions)` (several captions per
        image allowed: every pair is one example) or on a dataset of
        them; pairs reshuffled every epoch. Every real caption token weighs
        the same (`sample_weight` is refused). A `keras.utils.PyDataset`
        of preprocessed batches (`zoo.data.captions.CaptionPairs` given the
        preprocessor) trains as it is, with no string processing per step;
        `validation_data` must then be one too."""
        _refuse_sample_weight(sample_weight, "fit")
        if isinstance(x, keras.utils.PyDataset):
            # Keras' fit still calls the mixin's _maybe_symbolic_build.
            with _ReattachOnError(self):
                return keras.Model.fit(self, x, shuffle=False, **kwargs)
        if kwargs.get("validation_data") is not None and not is_dataset(
            kwargs["validation_data"]
        ):
            images, captions = kwargs["validation_data"]
            kwargs["validation_data"], _, _ = self._pairs(
                images, captions, batch_size, False, "fit"
            )
        x, y, batch_size = self._pairs(x, y, batch_size, shuffle, "fit")
        return super().fit(x, y, batch_size=batch_size, shuffle=False, **kwargs)

    def evaluate(
        self,
        x=None,
        y=None,
        batch_size=None,
        verbose="auto",
        sample_weight=None,
        **kwargs,
    ):
        """keras-hub's `evaluate` on `(images, captions)` (or a
        `PyDataset` of preprocessed batches): the cross-entropy per real
        caption token."""
        _refuse_sample_weight(sample_weight, "evaluate")
        if isinstance(x, keras.utils.PyDataset):
            with _ReattachOnError(self):
                return keras.Model.evaluate(self, x, verbose=verbose, **kwargs)
        x, y, batch_size = self._pairs(x, y, batch_size, False, "evaluate")
        return super().evaluate(
            x, y, batch_size=batch_size, verbose=verbose, **kwargs
        )

    def predict(self, x, *args, **kwargs):
        """Keras' `predict`: next-word logits of captions given with their
        images (`{"images": ..., "captions": ...}`, teacher forcing). Images
        alone are an error pointing to `generate`, which captions them."""
        if not isinstance(x, dict) and not is_dataset(x):
            raise ValueError(
                "ImageCaptioner.predict() reads images with their captions "
                '(teacher forcing): pass {"images": ..., "captions": '
                "...}. To caption images, call generate(images)."
            )
        if isinstance(x, dict) and self.preprocessor is not None:
            self.preprocessor.check_images(x.get("images"))
            x = {**x, "images": self._model_sized(x.get("images"))}
        return super().predict(x, *args, **kwargs)

    def encode_images(self, images, batch_size=32):
        """The backbone's encoding of raw images: `(n, rows, columns, D)`
        NumPy features from the image encoder (float32), computed in
        batches. What `FeatureGridInput` reads, to train a decoder on
        features computed once."""
        preprocessor, encoder = self.preprocessor, self.backbone.image_encoder
        images, _ = (
            preprocessor.image_batch(images)
            if preprocessor
            else (np.asarray(images), False)
        )
        return encoder.predict(images, batch_size=batch_size, verbose=0)

    def quantize_decoder(self, mode="int8", config=None):
        """Quantises the decoder's `Dense` and `Embedding` layers with
        Keras' `quantize` and leaves the image encoder as it is (the
        EfficientNet encoder has its own weight-only `quantize`). The
        backbone's config records the quantised layers (keras-hub's
        `DTypePolicyMap`), so a saved `.keras` file loads quantised. Called
        on the task, so that its compiled functions are traced afresh.

        Args:
            mode: "int8" (default; Dense layers also quantise their inputs
                per token as they run), or another `keras.Model.quantize`
                mode.
            config: a `keras.quantizers.QuantizationConfig`, or None for
                the mode's default.

        Returns:
            The number of layers quantised.

        Example:

        >>> from zoo.data.tokenizers import train_subword_tokenizer
        >>> from zoo.models.captioning.image_captioner_preprocessor import (
        ...     ImageCaptionerPreprocessor)
        >>> tokenizer = train_subword_tokenizer(["a dog runs"], 100, "word")
        >>> captioner = ImageCaptioner.from_preset(
        ...     "smoke", preprocessor=ImageCaptionerPreprocessor.from_preset(
        ...         "smoke", tokenizer=tokenizer))
        >>> count = captioner.quantize_decoder()
        >>> captioner.backbone.output_projection.quantization_mode
        'int8'
        """
        return quantize_matrices(
            self, mode, config, exclude=self.backbone.image_encoder
        )

    def with_image_encoder(self, image_encoder, preprocessor=None):
        """A new captioner whose backbone reads `image_encoder`'s grid with
        this one's decoder weights (copied): e.g. the frozen encoder put
        back in front of a decoder trained on its cached features.

        Args:
            image_encoder: a model whose grid has the same shape as the
                current encoder's.
            preprocessor: the new captioner's preprocessor; default this
                one's, set to read `image_encoder`'s images.
        """
        old = self.backbone
        if tuple(image_encoder.output.shape[1:]) != tuple(
            old.image_encoder.output.shape[1:]
        ):
            raise ValueError(
                "the new image encoder's grid is "
                f"{tuple(image_encoder.output.shape[1:])}; the decoder was "
                f"trained on {tuple(old.image_encoder.output.shape[1:])}."
            )
        config = old.get_config()
        config.pop("image_encoder")
        backbone = type(old).from_config(
            {**config, "image_encoder": image_encoder}
        )
        if preprocessor is None and self.preprocessor is not None:
            image_shape = tuple(image_encoder.input.shape[1:])
            preprocessor = ImageCaptionerPreprocessor.from_config(
                {
                    **self.preprocessor.get_config(),
                    "image_size": image_shape[:2],
                    "num_channels": image_shape[2],
                    "raw_pixels": True,
                }
            )
        captioner = type(self)(backbone, preprocessor, name=self.name)
        for new, trained in zip(
            captioner._decoder_variables(),
            self._decoder_variables(),
            strict=True,
        ):
            new.assign(trained)
        return captioner

    def _decoder_variables(self):
        """Every variable but the image encoder's, in a fixed order (two
        captioners of one config list theirs alike; the task's list, since
        a layer the backbone builds but only the task's graph calls, its
        output projection, is not among the backbone's own under every
        backend)."""
        encoder = {id(v) for v in self.backbone.image_encoder.weights}
        return [v for v in self.weights if id(v) not in encoder]

    # --- Compiled generation ------------------------------------------------

    def generate_step(self, inputs, stop_token_ids=None):
        """Fills the unmasked caption positions of one batch; the encoder
        runs once. `generation_mode` "cache": one position per step;
        "full": the whole caption prefix per step (the reference)."""
        backbone = self.backbone
        images = ops.convert_to_tensor(inputs["images"])
        target_ids, target_mask = (
            inputs["decoder_token_ids"],
            inputs["decoder_padding_mask"],
        )
        if self.generation_mode == "cache":
            encoded = backbone.encode(images)
            return {
                "decoder_token_ids": self.decode_with_cache(
                    encoded,
                    backbone.encoder_mask(encoded),
                    target_ids,
                    target_mask,
                    stop_token_ids,
                )
            }
        bias = (
            None
            if self.token_bias is None
            else ops.convert_to_tensor(self.token_bias)
        )

        def next(prompt, cache, index):
            features = backbone(
                {
                    "images": cache,
                    "decoder_token_ids": prompt,
                    "decoder_padding_mask": ops.ones_like(prompt),
                }
            )
            hidden = ops.take(features["sequence_output"], index - 1, axis=1)
            logits = ops.cast(backbone.token_logits(hidden), "float32")
            return (logits if bias is None else logits + bias), hidden, cache

        token_ids = self.sampler(
            next=next,
            prompt=target_ids,
            cache=images,
            index=1,
            mask=target_mask,
            stop_token_ids=stop_token_ids,
            model=self,
        )
        return {"decoder_token_ids": token_ids}

    def generate(
        self,
        images,
        max_length=None,
        sampler=None,
        temperature=1.0,
        seed=None,
        use_cache=True,
        batch_size=64,
        **sampler_options,
    ):
        """Captions each image.

        Args:
            images: a batch array `(n, H, W, C)` (uint8, or floats on
                [0, 255]), a list of images of any sizes, or one image
                `(H, W, C)`; resized to the model's size without keeping
                the aspect ratio, as the training images were (see
                `ImageCaptionerPreprocessor`). Bool and channels-first
                images are refused.
            max_length: caption tokens at most, `<s>` and `</s>` included;
                default and maximum: the decoder's sequence length.
            sampler: "greedy", "beam" (options `num_beams`,
                `length_penalty`), "top_k", "top_p" or "random" (see
                `zoo.models.generation.get_sampler`); default: the one
                given to `compile` (greedy unless compiled with another),
                which a saved model keeps.
            temperature, seed: for the random samplers.
            use_cache: False recomputes the caption prefix at every step (a
                slow reference; the same result).
            batch_size: images captioned at once.

        Returns:
            A list of strings (one string for one image).

        Raises:
            ValueError: no image, a bad image (see
                `ImageCaptionerPreprocessor`), or `max_length`,
                `batch_size` or a sampler argument out of range (see
                `zoo.models.generation.get_sampler`), before any work.
        """
        max_length = self._max_length(max_length)
        batch_size = check_integer("batch_size", batch_size, 1)
        self.select_sampler(sampler, temperature, seed, **sampler_options)
        pixels, single = self._images(images)
        captions = []
        for start in range(0, len(pixels), int(batch_size)):
            rows = self._generate_ids(
                pixels[start : start + batch_size], max_length, use_cache
            )
            captions += [self._detokenize(row) for row in rows]
        return captions[0] if single else captions

    def _images(self, images):
        self._check_preprocessor()
        return self.preprocessor.image_batch(images)

    def _check_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                "This ImageCaptioner has no preprocessor, so it "
                "cannot read raw images."
            )

    def _max_length(self, max_length):
        self._check_preprocessor()
        limit = self.preprocessor.decoder_sequence_length
        return check_max_length(
            limit if max_length is None else max_length,
            limit,
            "the decoder's sequence length",
        )

    def _generate_ids(self, pixels, max_length, use_cache):
        """Token rows (start token first, cut after the end token)."""
        tokenizer = self.preprocessor.tokenizer
        target_ids = np.full(
            (len(pixels), max_length), tokenizer.pad_token_id, "int32"
        )
        target_ids[:, 0] = tokenizer.start_token_id
        target_mask = np.zeros_like(target_ids, dtype=bool)
        target_mask[:, 0] = True
        stops = (int(tokenizer.end_token_id),)
        outputs = self.run_generate_step(
            {
                "images": pixels,
                "decoder_token_ids": target_ids,
                "decoder_padding_mask": target_mask,
            },
            stops,
            "cache" if use_cache else "full",
        )
        rows, _ = finish_rows(
            outputs["decoder_token_ids"], [1] * len(pixels), stops, max_length
        )
        return rows

    def _words(self, row):
        """The generated token ids of a row (no start, end or padding)."""
        tokenizer = self.preprocessor.tokenizer
        skip = (
            tokenizer.start_token_id,
            tokenizer.end_token_id,
            tokenizer.pad_token_id,
        )
        return [int(i) for i in row[1:] if int(i) not in skip]

    def _detokenize(self, row):
        text = self.preprocessor.tokenizer.detokenize(self._words(row))
        return text.decode("utf-8") if isinstance(text, bytes) else str(text)

    # --- Attention pictures -------------------------------------------------

    def attention_maps(self, images, captions=None, batch_size=64):
        """For each image, its caption's words and, per word, the attention
        over the image's grid of regions that the decoder used to write
        it (alpha_t: the step that predicts word t).

        Args:
            images: as `generate` takes them.
            captions: the captions to explain (one per image); default the
                greedy `generate(images)`.
            batch_size: images at once.

        Returns:
            A list with one dict per image (one dict for one image):
            `caption` (str), `words` (its tokens, as strings) and `maps`
            `(len(words), rows, columns)` float32, each map summing to 1
            over the grid (`ShowAttendTellBackbone`: alpha_t; the
            Transformer: the last block's cross-attention, mean over heads).
        """
        pixels, single = self._images(images)
        if captions is None:
            rows = []
            for start in range(0, len(pixels), int(batch_size)):
                self.select_sampler()
                rows += self._generate_ids(
                    pixels[start : start + batch_size],
                    self.preprocessor.decoder_sequence_length,
                    True,
                )
            word_ids = [self._words(row) for row in rows]
        else:
            texts = [captions] if isinstance(captions, str) else list(captions)
            if len(texts) != len(pixels):
                raise ValueError(
                    f"{len(pixels)} images but {len(texts)} captions."
                )
            token_ids, _ = self.preprocessor.tokenize(texts)
            word_ids = [
                self._words(row)
                for row in np.asarray(ops.convert_to_numpy(token_ids))
            ]
        tokenizer = self.preprocessor.tokenizer
        length = self.preprocessor.decoder_sequence_length
        start = tokenizer.start_token_id
        results = []
        for first in range(0, len(pixels), int(batch_size)):
            chunk = word_ids[first : first + batch_size]
            ids = np.full((len(chunk), length), tokenizer.pad_token_id, "int32")
            for i, words in enumerate(chunk):
                row = ([start] + words)[:length]
                ids[i, : len(row)] = row
            maps = np.asarray(
                ops.convert_to_numpy(
                    self.backbone.attention_maps(
                        pixels[first : first + batch_size], ids
                    )
                )
            )
            for i, words in enumerate(chunk):
                words = words[: length - 1]
                grid = maps[i, : len(words)].reshape(
                    (len(words), *self.backbone.grid_size)
                )
                results.append(
                    {
                        "caption": self._detokenize([start] + words),
                        "words": [
                            tokenizer.id_to_token(w).lstrip("\u2581")
                            for w in words
                        ],
                        "maps": grid.astype("float32"),
                    }
                )
        return results[0] if single else results


def _refuse_sample_weight(sample_weight, method):
    if sample_weight is not None:
        raise ValueError(
            f"ImageCaptioner.{method}() weighs every real caption token the "
            "same and cannot take sample_weight (the preprocessor's padding "
            "weights would replace it silently): repeat or drop pairs "
            "instead."
        )
