"""Sequence-to-sequence translation: the Transformer and the RNN +
attention baseline (backbones), the `Translator` task, its preprocessor and
presets."""

from zoo.models.seq2seq.seq2seq_backbones import (
    RNNSeq2SeqBackbone,
    Seq2SeqBackbone,
    TransformerSeq2SeqBackbone,
)
from zoo.models.seq2seq.seq2seq_preprocessor import TranslationPreprocessor
from zoo.models.seq2seq.seq2seq_presets import PRESETS
from zoo.models.seq2seq.translator import Translator
