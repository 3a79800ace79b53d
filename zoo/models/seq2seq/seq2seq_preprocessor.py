"""The translation preprocessor: source and target strings -> encoder and
decoder ids, masks, next-token targets (keras-hub's
`Seq2SeqLMPreprocessor`), with one subword vocabulary for both languages."""

import keras
import keras_hub

from zoo._tensorflow import tf
from zoo.models.presets import FromPreset
from zoo.models.seq2seq.seq2seq_presets import PRESETS


@keras.saving.register_keras_serializable(package="zoo")
class TranslationPreprocessor(
    FromPreset, keras_hub.models.Seq2SeqLMPreprocessor
):
    """Source and target sentences -> token ids for a seq2seq model.

    The encoder reads `<s> source </s>`, the decoder `<s> target` and learns
    to predict `target </s>`; sentences longer than the sequence lengths are
    truncated (generation warns when a source is). Runs inside `tf.data`
    under every backend and is saved in the model file with its tokenizer.

    Args:
        tokenizer: a `zoo.data.tokenizers.SubwordTokenizer` (or any keras-hub
            tokenizer with start, end and padding tokens).
        encoder_sequence_length: source tokens kept, `<s>` and `</s>`
            included.
        decoder_sequence_length: target tokens the decoder reads.
        pad_to_multiple_of: pad each batch only to its longest source and
            target, rounded up to a multiple of this (a few distinct shapes
            to compile, and far less padding on short sentences); None pads
            every batch to the full sequence lengths.

    Call arguments:
        x: source strings `(batch,)`, or keras-hub's dict
            `{"encoder_text": ..., "decoder_text": ...}`.
        y: target strings `(batch,)` when `x` holds only the sources.
        sample_weight: ignored (the padding mask weights the targets).

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `encoder_token_ids`,
        `encoder_padding_mask` `(batch, encoder_sequence_length)` and
        `decoder_token_ids`, `decoder_padding_mask` `(batch,
        decoder_sequence_length)`; `y` the next target token at each decoder
        position; `sample_weight` 1 where `y` is a real token.

    Example:

    >>> from zoo.data.tokenizers import train_subword_tokenizer
    >>> german = ["Zwei Hunde spielen.", "Ein Mann liest.", "Eine Frau singt."]
    >>> english = ["Two dogs play.", "A man reads.", "A woman sings."]
    >>> tokenizer = train_subword_tokenizer(german + english, 60)
    >>> preprocessor = TranslationPreprocessor(tokenizer, 64, 64)
    >>> x, y, w = preprocessor(["Zwei Hunde spielen."], ["Two dogs play."])
    >>> tuple(x["encoder_token_ids"].shape), tuple(y.shape)
    ((1, 64), (1, 64))
    """

    def __init__(
        self,
        tokenizer,
        encoder_sequence_length=64,
        decoder_sequence_length=64,
        pad_to_multiple_of=None,
        **kwargs,
    ):
        super().__init__(
            tokenizer,
            encoder_sequence_length=encoder_sequence_length,
            decoder_sequence_length=decoder_sequence_length,
            **kwargs,
        )
        if pad_to_multiple_of is not None and int(pad_to_multiple_of) < 1:
            raise ValueError(
                "pad_to_multiple_of must be a positive int or "
                f"None; got {pad_to_multiple_of}."
            )
        self.pad_to_multiple_of = pad_to_multiple_of

    # `from_preset(preset, tokenizer=..., **overrides)`: the preset's
    # sequence lengths.
    _presets = PRESETS
    preset_requires = {
        "tokenizer": "the preset sets the lengths, the vocabulary is your "
        "subword tokenizer's (zoo.data.tokenizers.train_subword_tokenizer)",
    }

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "preprocessor"), **overrides})

    def call(self, x, y=None, sample_weight=None, **kwargs):
        if not isinstance(x, dict):
            if y is None:
                raise ValueError(
                    "TranslationPreprocessor needs targets to train on: "
                    "call it with (sources, targets) or "
                    '{"encoder_text": ..., "decoder_text": ...}.'
                )
            x = {"encoder_text": x, "decoder_text": y}
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(
            super().call(x, **kwargs)
        )
        if self.pad_to_multiple_of:
            x, y, sample_weight = self._trim(x, y, sample_weight)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def _trim(self, x, y, sample_weight):
        """Drops the padding columns past the batch's longest sentence
        (rounded up to `pad_to_multiple_of`)."""
        multiple = int(self.pad_to_multiple_of)

        def length(mask, limit):
            longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, "int32"), -1))
            rounded = (longest + multiple - 1) // multiple * multiple
            return tf.minimum(tf.maximum(rounded, 1), limit)

        source = length(
            x["encoder_padding_mask"], tf.shape(x["encoder_padding_mask"])[-1]
        )
        target = length(
            x["decoder_padding_mask"], tf.shape(x["decoder_padding_mask"])[-1]
        )
        x = {
            key: value[..., :source]
            if key.startswith("encoder")
            else value[..., :target]
            for key, value in x.items()
        }
        return x, y[..., :target], sample_weight[..., :target]

    def get_config(self):
        # keras-hub's Seq2SeqLMPreprocessor leaves its sequence lengths out
        # of its config; a loaded model must keep them.
        return {
            **super().get_config(),
            "encoder_sequence_length": self.encoder_sequence_length,
            "decoder_sequence_length": self.decoder_sequence_length,
            "pad_to_multiple_of": self.pad_to_multiple_of,
        }
