"""The translation task: source strings in, target strings out.

`Translator` is a keras-hub `Seq2SeqLM`: `fit(sources, targets)` and
`evaluate` run its `TranslationPreprocessor` inside `tf.data` (raw strings
on every backend; the `.keras` file carries the tokenizer), and
`generate(sources)` translates, greedily or with beam search
(`zoo.models.generation`; the sampler given to `compile`, with its
settings, is saved with the model and used by default): the encoder runs once per sentence, the
Transformer's cross-attention keys and values are computed once, and each
new target token costs one position (the self-attention cache, or the RNN's
state). `alignments` gives the attention of every generated word over the
source words, the course's a_ij picture.
"""

import warnings

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo._tensorflow import is_dataset
from zoo.data.text import text_batch, texts_of
from zoo.export import ServingExportMixin
from zoo.models.arguments import check_model_kwargs, check_vocabulary_fits
from zoo.models.decoding import EncoderDecoderGeneration
from zoo.models.generation import (
    GenerationMixin,
    check_max_length,
    finish_rows,
    resolve_sampler,
)
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.losses import SparseCategoricalCrossentropyWithSmoothing
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset
from zoo.models.raw_text import RawInputMixin, warn_unknown_pieces
from zoo.models.seq2seq.seq2seq_backbones import Seq2SeqBackbone
from zoo.models.seq2seq.seq2seq_preprocessor import TranslationPreprocessor
from zoo.models.seq2seq.seq2seq_presets import PRESETS


@keras.saving.register_keras_serializable(package="zoo")
class Translator(
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawInputMixin,
    GenerationMixin,
    EncoderDecoderGeneration,
    PortableCompileConfig,
    keras_hub.models.Seq2SeqLM,
):
    """Sequence-to-sequence translation: a backbone, a preprocessor, and
    generation from raw strings.

    Args:
        backbone: a `TransformerSeq2SeqBackbone` or `RNNSeq2SeqBackbone`.
        preprocessor: a `TranslationPreprocessor`, or None for token ids.

    Call arguments:
        the backbone's dict of encoder and decoder ids and masks.

    Returns:
        float32 logits `(batch, tgt_len, vocabulary_size)`; decoder
        position t predicts target token t + 1.

    Example:

    >>> from zoo.data.tokenizers import train_subword_tokenizer
    >>> german = ["Zwei Hunde spielen.", "Ein Mann liest.", "Eine Frau singt."]
    >>> english = ["Two dogs play.", "A man reads.", "A woman sings."]
    >>> tokenizer = train_subword_tokenizer(german + english, 60)
    >>> translator = Translator.from_preset(
    ...     "smoke", preprocessor=TranslationPreprocessor(tokenizer))
    >>> history = translator.fit(german, english, epochs=1, verbose=0)
    >>> len(translator.generate(["Zwei Hunde spielen."]))  # words: untrained
    1

    Trained on a real corpus (the "transformer_cpu_small" preset, a
    vocabulary of 8000 and some epochs), the same call reads:

    >>> translator.generate(["Zwei Hunde spielen im Schnee."])  # doctest: +SKIP
    ['Two dogs play in the snow.']
    """

    # `zoo.export`: `generate` is the export's signature (and its default).
    exports_predict = False
    exports_generate = "translator"

    backbone_cls = Seq2SeqBackbone
    preprocessor_cls = TranslationPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: a fresh
    # translator of the preset's architecture for the preprocessor's
    # vocabulary and sequence lengths; `backbone_` overrides go to
    # `Seq2SeqBackbone.from_preset`.
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
        hidden = backbone(inputs)["decoder_sequence_output"]
        logits = self.logits_dtype(backbone.token_logits(hidden))
        check_model_kwargs(self, kwargs)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    @classmethod
    def _backbone_defaults(cls, preset, preprocessor):
        return {
            **super()._backbone_defaults(preset, preprocessor),
            "encoder_sequence_length": preprocessor.encoder_sequence_length,
            "decoder_sequence_length": preprocessor.decoder_sequence_length,
        }

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="greedy",
        label_smoothing=0.1,
        **kwargs,
    ):
        """keras-hub's `Seq2SeqLM.compile`; `loss="auto"` is the
        cross-entropy with `label_smoothing`, averaged over the real target
        tokens (keras-hub's divides by every position, padding included, so
        its figure shrinks with the padding of a batch), `optimizer="auto"`
        Adam (5e-4)."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(5e-4)
        if loss == "auto":  # per real target token, padding left out
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

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        sample_weight=None,
        shuffle=True,
        **kwargs,
    ):
        """keras-hub's `fit` on `(sources, targets)` strings (or a dataset
        of them), arrays reshuffled every epoch and `validation_split` held
        out (`RawInputMixin`). Every real target token weighs the same
        (`sample_weight` is refused: the preprocessor's padding weights
        would replace it). No targets, not as many targets as sources, or
        something other than strings is one error line."""
        _refuse_sample_weight(sample_weight, "fit")
        return super().fit(
            x, y, batch_size=batch_size, shuffle=shuffle, **kwargs
        )

    def evaluate(
        self,
        x=None,
        y=None,
        batch_size=None,
        verbose="auto",
        sample_weight=None,
        **kwargs,
    ):
        """keras-hub's `evaluate` on `(sources, targets)`, checked as in
        `fit`; every real target token weighs the same (`sample_weight` is
        refused, as in `fit`)."""
        _refuse_sample_weight(sample_weight, "evaluate")
        return super().evaluate(
            x, y, batch_size=batch_size, verbose=verbose, **kwargs
        )

    def _raw_input(self, x, y, method):
        """`(x, y)` for keras-hub: source and target sentences (as
        `(sources, targets)` or `{"encoder_text": ..., "decoder_text":
        ...}`) checked as text (`zoo.data.text.text_batch`), as many
        targets as sources; datasets, and token ids for a translator
        without a preprocessor, as they are."""
        if self.preprocessor is None or is_dataset(x):
            return x, y
        if isinstance(x, keras.utils.PyDataset):
            return x, y
        if isinstance(x, dict):
            if "encoder_text" not in x:
                return x, y
            sources, targets = _sentence_pairs(
                x["encoder_text"], x.get("decoder_text"), method
            )
            return {**x, "encoder_text": sources, "decoder_text": targets}, y
        return _sentence_pairs(x, y, method)

    def predict(self, x, *args, **kwargs):
        """Keras' `predict`: next-token logits of target sentences given
        with their sources (`{"encoder_text": ..., "decoder_text": ...}`,
        teacher forcing). Source sentences alone are an error pointing to
        `generate`, which translates them."""
        if isinstance(x, (str, bytes, list, tuple, np.ndarray)):
            raise ValueError(
                "Translator.predict() reads sources with their target "
                'sentences (teacher forcing): pass {"encoder_text": ..., '
                '"decoder_text": ...}. To translate sentences, call '
                "generate(sentences)."
            )
        return super().predict(x, *args, **kwargs)

    # --- Compiled generation ------------------------------------------------

    def generate_step(self, inputs, stop_token_ids=None):
        """Fills the unmasked decoder positions of one batch; the encoder
        runs once. `generation_mode` "cache": one position per step;
        "full": the whole decoder prefix per step (the reference)."""
        backbone = self.backbone
        # Tensors from here on (PyTorch's eager generation is handed NumPy
        # arrays), so a compiled decoding step converts nothing.
        source_ids = ops.convert_to_tensor(inputs["encoder_token_ids"])
        source_mask = ops.convert_to_tensor(inputs["encoder_padding_mask"])
        target_ids, target_mask = (
            inputs["decoder_token_ids"],
            inputs["decoder_padding_mask"],
        )
        if self.generation_mode == "cache":
            encoder_output = backbone.encode(
                source_ids, source_mask, check_ids=False
            )
            return {
                "decoder_token_ids": self.decode_with_cache(
                    encoder_output,
                    source_mask,
                    target_ids,
                    target_mask,
                    stop_token_ids,
                )
            }

        def next(prompt, cache, index):
            ids, mask = cache
            features = backbone(
                {
                    "encoder_token_ids": ids,
                    "encoder_padding_mask": mask,
                    "decoder_token_ids": prompt,
                    "decoder_padding_mask": ops.ones_like(prompt),
                }
            )
            hidden = ops.take(
                features["decoder_sequence_output"], index - 1, axis=1
            )
            logits = backbone.token_logits(hidden)
            return ops.cast(logits, "float32"), hidden, cache

        token_ids = self.sampler(
            next=next,
            prompt=target_ids,
            cache=(source_ids, source_mask),
            index=1,
            mask=target_mask,
            stop_token_ids=stop_token_ids,
            model=self,
        )
        return {"decoder_token_ids": token_ids}

    def generate(
        self,
        inputs,
        max_length=None,
        sampler=None,
        temperature=1.0,
        seed=None,
        use_cache=True,
        **sampler_options,
    ):
        """Translates each source sentence.

        Args:
            inputs: a string or a list of strings.
            max_length: target tokens at most, `<s>` and `</s>` included;
                default and maximum: the decoder's sequence length.
            sampler: "greedy", "beam" (options `num_beams`,
                `length_penalty`), "top_k", "top_p" or "random" (see
                `zoo.models.generation.get_sampler`); default: the one
                given to `compile` (greedy unless compiled with another),
                which a saved model keeps.
            temperature, seed: for the random samplers.
            use_cache: False recomputes the decoder prefix at every step (a
                slow reference; the same result).

        Returns:
            A string, or a list of strings: detokenised, cased as trained.

        Raises:
            ValueError: no sentence, an empty sentence, or `max_length` or
                a sampler argument out of range (see
                `zoo.models.generation.get_sampler`), before any work.

        Warns:
            UserWarning: a sentence with pieces outside the vocabulary
                (characters never seen in training, e.g. emoji; the
                encoder reads the unknown piece), or longer than the
                encoder's sequence length (truncated).
        """
        if self.preprocessor is None:
            raise ValueError(
                "This Translator has no preprocessor, so it "
                "cannot read strings."
            )
        limit = self.preprocessor.decoder_sequence_length
        max_length = check_max_length(
            limit if max_length is None else max_length,
            limit,
            "the decoder's sequence length",
        )
        self.select_sampler(sampler, temperature, seed, **sampler_options)
        texts, scalar = texts_of(inputs, "generate", "sentence")
        source = self._source_ids(texts)
        tokenizer = self.preprocessor.tokenizer
        target_ids = np.zeros((len(texts), max_length), "int32")
        target_ids[:, 0] = tokenizer.start_token_id
        target_mask = np.zeros_like(target_ids, dtype=bool)
        target_mask[:, 0] = True
        stops = (int(tokenizer.end_token_id),)
        outputs = self.run_generate_step(
            {
                **source,
                "decoder_token_ids": target_ids,
                "decoder_padding_mask": target_mask,
            },
            stops,
            "cache" if use_cache else "full",
        )
        rows, _ = finish_rows(
            outputs["decoder_token_ids"], [1] * len(texts), stops, max_length
        )
        translations = [
            tokenizer.detokenize(
                [
                    int(i)
                    for i in row[1:]
                    if i not in (stops[0], tokenizer.pad_token_id)
                ]
            )
            for row in rows
        ]
        translations = [
            t.decode("utf-8") if isinstance(t, bytes) else str(t)
            for t in translations
        ]
        return translations[0] if scalar else translations

    def _source_ids(self, texts, method="generate"):
        """Encoder ids and mask of the sources, with the errors and the
        warnings of `generate`: pieces outside the vocabulary (characters
        never seen in training: the encoder reads `<unk>`), truncation."""
        tokenizer = self.preprocessor.tokenizer
        length = self.preprocessor.encoder_sequence_length
        unknown = getattr(tokenizer, "unknown_token_id", None)
        for i, text in enumerate(texts):
            ids = np.asarray(tokenizer.tokenize(text)).reshape(-1)
            count = len(ids)
            unknowns = 0 if unknown is None else int(np.sum(ids == unknown))
            if unknowns:
                warn_unknown_pieces(
                    tokenizer,
                    text,
                    f"{method}(): sentence {i}",
                    unknowns,
                    unit="piece",
                    stacklevel=4,
                )
            if count == 0:
                raise ValueError(
                    f"Source sentence {i} is empty"
                    + (" (blank)." if text else ".")
                )
            if count + 2 > length:
                warnings.warn(
                    f"{method}(): sentence {i} has {count} tokens; the encoder "
                    f"reads {length - 2} (with <s> and </s>), so it is "
                    "truncated.",
                    stacklevel=3,
                )
        packed = self.preprocessor.generate_preprocess(
            {"encoder_text": texts, "decoder_text": [""] * len(texts)}
        )
        return {
            "encoder_token_ids": np.asarray(
                ops.convert_to_numpy(packed["encoder_token_ids"]), "int32"
            ),
            "encoder_padding_mask": np.asarray(
                ops.convert_to_numpy(packed["encoder_padding_mask"])
            ).astype(bool),
        }

    # --- Attention pictures -------------------------------------------------

    def alignments(self, source, target=None):
        """The cross-attention of each target token over the source tokens.

        Args:
            source: one source sentence.
            target: its translation; default: `generate(source)`.

        Returns:
            A dict: `source_tokens` and `target_tokens` (subword strings;
            row `t` of the weights is the decoder step that reads target
            token `t - 1`, `<s>` first, and predicts `target_tokens[t]`,
            so the rows run from the first word to `</s>`),
            `weights` `(layers, heads, target_len, source_len)` (the RNN:
            one layer, one head) and `mean` `(target_len, source_len)`,
            averaged over layers and heads.

        Raises:
            TypeError, ValueError: `source` or `target` is not one string.
        """
        source = _one_sentence(source, "source")
        target = (
            self.generate(source)
            if target is None
            else _one_sentence(target, "target")
        )
        tokenizer = self.preprocessor.tokenizer
        source_ids = self._source_ids([source], "alignments")
        real = int(source_ids["encoder_padding_mask"][0].sum())
        length = self.preprocessor.decoder_sequence_length
        pieces_of_target = [
            int(i) for i in np.asarray(tokenizer.tokenize(target)).reshape(-1)
        ]
        # Row t is the decoder step that reads token t (from <s>) and
        # predicts token t + 1, so it is labelled with what it predicts.
        end = getattr(tokenizer, "end_token_id", None)
        predicted = (pieces_of_target + ([] if end is None else [end]))[:length]
        target_ids = np.asarray(
            [tokenizer.start_token_id] + pieces_of_target, "int32"
        )[: len(predicted)]
        weights = self.backbone.cross_attention(
            source_ids["encoder_token_ids"],
            source_ids["encoder_padding_mask"],
            target_ids[None],
        )
        weights = np.asarray(
            ops.convert_to_numpy(ops.cast(weights, "float32"))
        )[0, :, :, :, :real]
        ids = source_ids["encoder_token_ids"][0, :real]

        def pieces(ids):
            return [tokenizer.id_to_token(int(i)) for i in ids]

        return {
            "source_tokens": pieces(ids),
            "target_tokens": pieces(predicted),
            "weights": weights,
            "mean": weights.mean(axis=(0, 1)),
        }


def _one_sentence(text, name):
    """`text`, a single sentence, as `str` (`alignments` reads one pair)."""
    texts, _ = texts_of(text, "alignments", f"{name} sentence")
    if len(texts) != 1:
        raise ValueError(
            f"alignments() reads one {name} sentence; got {len(texts)}."
        )
    return texts[0]


def _sentence_pairs(sources, targets, method):
    """`(sources, targets)` checked as text, one target per source, or one
    error line naming what is wrong."""
    sources = text_batch(sources, method)
    if targets is None:
        raise ValueError(
            f"Translator.{method}() needs target sentences: {method}(sources, "
            "targets), one target per source."
        )
    targets = text_batch(targets, method)
    if len(sources) != len(targets):
        raise ValueError(
            f"Translator.{method}() got {len(sources)} source sentences but "
            f"{len(targets)} targets: one target per source."
        )
    return sources, targets


def _refuse_sample_weight(sample_weight, method):
    if sample_weight is not None:
        raise ValueError(
            f"Translator.{method}() weighs every real target token the same "
            "and cannot take sample_weight (the preprocessor's padding "
            "weights would replace it silently): leave it out, or repeat "
            "or drop sentence pairs instead."
        )
