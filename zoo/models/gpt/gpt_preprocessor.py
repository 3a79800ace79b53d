"""GPT preprocessor: strings -> token ids, padding mask and next-token
targets (keras-hub's `CausalLMPreprocessor` with the zoo's tokenizers)."""

import keras
import keras_hub

from zoo.models.gpt.gpt_presets import PRESETS
from zoo.models.presets import FromPreset


@keras.saving.register_keras_serializable(package="zoo")
class GPTPreprocessor(FromPreset, keras_hub.models.CausalLMPreprocessor):
    """Strings -> `{"token_ids", "padding_mask"}` and next-token targets.

    keras-hub's `CausalLMPreprocessor` with a zoo or keras-hub tokenizer.
    Character corpora have no start or end tokens, so none are added by
    default. A string is packed to `sequence_length + 1` tokens; the inputs
    are its first `sequence_length` and the targets its last, so a training
    window of `sequence_length + 1` characters gives a full step.

    Args:
        tokenizer: a `zoo.data.tokenizers.CharacterTokenizer` or a keras-hub
            tokenizer.
        sequence_length: packed length for training calls.
        add_start_token, add_end_token: pack the tokenizer's start / end
            tokens around each string (when it has them).

    Call arguments:
        x: a string or a batch of strings.
        sequence_length: optional override of the packed length.

    Returns:
        `(x, y, sample_weight)`: `x = {"token_ids", "padding_mask"}`, each
        `(batch, sequence_length)`; `y` the next token at each position,
        `(batch, sequence_length)`; `sample_weight` 1 where `y` is a real
        token, `(batch, sequence_length)`.

    Example:

    >>> from zoo.data.tokenizers import CharacterTokenizer
    >>> tokenizer = CharacterTokenizer.from_text("to be or not to be")
    >>> preprocessor = GPTPreprocessor(tokenizer, sequence_length=8)
    >>> x, y, weights = preprocessor(["to be"])
    >>> tuple(x["token_ids"].shape), tuple(y.shape)
    ((1, 8), (1, 8))
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=256,
        add_start_token=False,
        add_end_token=False,
        **kwargs,
    ):
        super().__init__(
            tokenizer,
            sequence_length=sequence_length,
            add_start_token=add_start_token,
            add_end_token=add_end_token,
            **kwargs,
        )

    # `from_preset(preset, tokenizer=..., **overrides)`: packs to the
    # preset's context length.
    _presets = PRESETS
    preset_requires = {
        "tokenizer": "the preset sets the lengths, the vocabulary is your "
        "tokenizer's (e.g. CharacterTokenizer.from_text(text))",
    }

    @classmethod
    def _from_preset(cls, preset, **overrides):
        length = cls.preset_part(preset, "backbone")["sequence_length"]
        config = {"sequence_length": length}
        config.update(cls.preset_part(preset, "preprocessor"))
        return cls(**{**config, **overrides})

    def build(self, input_shape):
        # keras-hub's build reads start/end/pad ids that only its model
        # tokenizers define; a bare WordPieceTokenizer has none of them.
        tokenizer = self.tokenizer
        pad = getattr(tokenizer, "pad_token_id", None)
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=getattr(tokenizer, "start_token_id", None),
            end_value=getattr(tokenizer, "end_token_id", None),
            pad_value=0 if pad is None else pad,
            sequence_length=self.sequence_length,
            return_padding_mask=True,
        )
        self.built = True
