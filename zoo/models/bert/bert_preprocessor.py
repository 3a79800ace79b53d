"""BERT preprocessors: raw text -> [CLS] text [SEP] token ids, with masked
tokens for pretraining (keras-hub's `MaskedLMPreprocessor` and
`TextClassifierPreprocessor` with a WordPiece `BertTokenizer`).

Both drop HTML line breaks (`<br />`, which IMDB reviews are full of) before
tokenising, in `tf.data` and in eager calls alike.
"""

import re

import keras
import keras_hub
import numpy as np

from zoo._tensorflow import is_tf_tensor, tf
from zoo.data.masked_lm import unselectable_token_ids
from zoo.data.text import check_texts
from zoo.layers.head_tail_packer import HeadTailPacker
from zoo.models.bert.bert_presets import PRESETS
from zoo.models.presets import FromPreset
from zoo.models.raw_text import unknown_share

_MARKUP = r"<br\s*/?>"
_TOKENIZER_HINT = (
    "the preset sets the length, the vocabulary is your WordPiece "
    "tokenizer's (zoo.data.tokenizers.train_bert_tokenizer)"
)


def strip_markup(x):
    """`<br />` tags -> spaces, for a string, a list or array of strings, a
    tf string tensor, or a tuple of segments of those."""
    if isinstance(x, tuple):
        return tuple(strip_markup(segment) for segment in x)
    if is_tf_tensor(x):
        return tf.strings.regex_replace(x, _MARKUP, " ")
    if isinstance(x, (str, bytes)):
        text = x.decode("utf-8") if isinstance(x, bytes) else x
        return re.sub(_MARKUP, " ", text)
    if isinstance(x, (list, np.ndarray)):
        return [strip_markup(t) for t in np.asarray(x, dtype=object).ravel()]
    return x


class UnknownTokenShare:
    """`unknown_token_share` for a BERT preprocessor (a keras-hub one with
    a WordPiece `tokenizer` and a `packer`)."""

    def unknown_token_share(self, x):
        """For each text (or pair of segments), the share of the WordPiece
        tokens the model reads (up to the packed length; `[CLS]`, `[SEP]`,
        `[MASK]` and padding left out) that are `[UNK]`: characters the
        vocabulary does not have, such as emoji.

        Args:
            x: a string, a list or 1-D array of strings, or a tuple of
                such batches (segments).

        Returns:
            A float64 NumPy array `(n,)`: 0 when every token is known, 1
            when none is; a text with no token at all counts as 1.
        """
        x = check_texts(x, "unknown_token_share", segments=True)
        if self.packer is None:
            self.build(None)
        segments = x if isinstance(x, tuple) else (x,)
        segments = tuple(
            self.tokenizer(strip_markup(segment)) for segment in segments
        )
        token_ids, _ = self.packer(segments)
        ids = np.asarray(keras.ops.convert_to_numpy(token_ids))
        tokenizer = self.tokenizer
        special = [
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            tokenizer.pad_token_id,
            tokenizer.mask_token_id,
        ]
        unknown = tokenizer.token_to_id(tokenizer.oov_token)
        return unknown_share(~np.isin(ids, special), ids == unknown)


@keras.saving.register_keras_serializable(package="zoo")
class BertMaskedLMPreprocessor(
    UnknownTokenShare, FromPreset, keras_hub.models.MaskedLMPreprocessor
):
    """Strings -> masked token ids for masked-LM pretraining.

    Each text is tokenised (WordPiece), packed as `[CLS] text [SEP]` and
    padded to `sequence_length`; then `mask_selection_rate` of its ordinary
    tokens are chosen (never [CLS], [SEP], [PAD], [MASK] or [UNK]; at most
    `mask_selection_length` per text). A chosen token is replaced by [MASK]
    with probability `mask_token_rate`, by a random token with
    `random_token_rate`, and kept otherwise (BERT's 80/10/10). Masks are
    drawn anew each time a text passes through, so each epoch masks
    differently (RoBERTa's dynamic masking).

    Args:
        tokenizer: a `keras_hub.models.BertTokenizer`.
        sequence_length: packed length.
        mask_selection_rate: share of tokens chosen for prediction.
        mask_selection_length: most tokens chosen per text (default:
            `ceil(1.25 * rate * sequence_length)`, room for the variance).
        mask_token_rate, random_token_rate: what a chosen token becomes.

    Call arguments:
        x: a string or a batch of strings.

    Returns:
        `(x, y, sample_weight)`: `x = {"token_ids", "segment_ids",
        "padding_mask"}` each `(batch, sequence_length)` plus
        `"mask_positions"` `(batch, mask_selection_length)`; `y` the
        original ids at those positions; `sample_weight` 1 for a real
        choice, 0 for padding of the position list.

    Example:

    >>> from zoo.data.tokenizers import train_bert_tokenizer
    >>> texts = ["this movie was really good", "a waste of two hours"]
    >>> tokenizer = train_bert_tokenizer(texts, vocabulary_size=100)
    >>> preprocessor = BertMaskedLMPreprocessor(tokenizer, sequence_length=128)
    >>> x, y, weights = preprocessor(["this movie was really good"])
    >>> tuple(x["token_ids"].shape), tuple(x["mask_positions"].shape)
    ((1, 128), (1, 24))
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=256,
        mask_selection_rate=0.15,
        mask_selection_length=None,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        **kwargs,
    ):
        if mask_selection_length is None:
            mask_selection_length = int(
                np.ceil(1.25 * mask_selection_rate * sequence_length)
            )
        super().__init__(
            tokenizer,
            sequence_length=sequence_length,
            mask_selection_rate=mask_selection_rate,
            mask_selection_length=mask_selection_length,
            mask_token_rate=mask_token_rate,
            random_token_rate=random_token_rate,
            **kwargs,
        )

    # `from_preset(preset, tokenizer=..., **overrides)`: packs to the
    # preset's pretraining length (its preprocessor section's "masked_lm").
    _presets = PRESETS
    preset_requires = {"tokenizer": _TOKENIZER_HINT}
    preset_subsection = "masked_lm"

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "preprocessor"), **overrides})

    def build(self, input_shape):
        super().build(input_shape)
        self.masker.unselectable_token_ids = unselectable_token_ids(
            self.tokenizer
        )

    def call(self, x, y=None, sample_weight=None):
        return super().call(strip_markup(x), y, sample_weight)


@keras.saving.register_keras_serializable(package="zoo")
class BertClassifierPreprocessor(
    UnknownTokenShare, FromPreset, keras_hub.models.TextClassifierPreprocessor
):
    """Strings (and labels) -> `{"token_ids", "segment_ids",
    "padding_mask"}`, `[CLS] text [SEP]` padded or cut to `sequence_length`.

    Args:
        tokenizer: a `keras_hub.models.BertTokenizer`.
        sequence_length: packed length.
        truncate: how a long text is cut: "round_robin" (default) or
            "waterfall", keras-hub's ways, keep a text's opening (and share
            the length between a pair of segments); "head_tail" keeps a
            single text's opening and ending (`zoo.layers.HeadTailPacker`).
        head_length: with "head_tail", how many opening tokens a long text
            keeps (default: a quarter of the room); the ending gets the
            rest.

    Call arguments:
        x: a string, a batch of strings, or a tuple of two batches
            (segment A and B).
        y, sample_weight: passed through.

    Returns:
        The inputs dict (each `(batch, sequence_length)`), with `y` and
        `sample_weight` when given.

    Example:

    >>> from zoo.data.tokenizers import train_bert_tokenizer
    >>> texts = ["this movie was really good", "a waste of two hours"]
    >>> tokenizer = train_bert_tokenizer(texts, vocabulary_size=100)
    >>> preprocessor = BertClassifierPreprocessor(tokenizer, sequence_length=256)
    >>> tuple(preprocessor(["a waste of two hours"])["token_ids"].shape)
    (1, 256)
    >>> head_tail = BertClassifierPreprocessor(
    ...     tokenizer, sequence_length=16, truncate="head_tail", head_length=4)
    >>> review = "this movie was really good " * 9 + "a waste of two hours"
    >>> tokens = np.asarray(tokenizer(review))
    >>> ids = np.asarray(head_tail([review])["token_ids"][0])
    >>> bool((ids[1:5] == tokens[:4]).all() and (ids[5:-1] == tokens[-10:]).all())
    True
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=512,
        truncate="round_robin",
        head_length=None,
        **kwargs,
    ):
        if truncate not in ("round_robin", "waterfall", "head_tail"):
            raise ValueError(
                'truncate must be "round_robin", "waterfall" or '
                f'"head_tail"; got {truncate!r}.'
            )
        if head_length is not None and truncate != "head_tail":
            raise ValueError(
                f'head_length applies to truncate="head_tail"; got '
                f"truncate={truncate!r}."
            )
        super().__init__(
            tokenizer,
            sequence_length=sequence_length,
            truncate=truncate,
            **kwargs,
        )
        self.head_length = head_length
        if truncate == "head_tail":  # checks head_length against the room
            HeadTailPacker(sequence_length, 0, 0, head_length=head_length)

    def build(self, input_shape):
        if self.truncate != "head_tail":
            return super().build(input_shape)
        keras.layers.Layer.build(self, input_shape)
        self.packer = HeadTailPacker(
            start_value=self.tokenizer.start_token_id,
            end_value=self.tokenizer.end_token_id,
            pad_value=self.tokenizer.pad_token_id,
            head_length=self.head_length,
            sequence_length=self.sequence_length,
        )

    def get_config(self):
        config = super().get_config()
        config["head_length"] = self.head_length
        return config

    # `from_preset(preset, tokenizer=..., **overrides)`: packs to the
    # preset's fine-tuning length (its preprocessor section's "classifier").
    _presets = PRESETS
    preset_requires = {"tokenizer": _TOKENIZER_HINT}
    preset_subsection = "classifier"

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "preprocessor"), **overrides})

    def call(self, x, y=None, sample_weight=None):
        return super().call(strip_markup(x), y, sample_weight)
