"""BERT: a bidirectional Transformer encoder pretrained by masked language
modelling (`BertMaskedLM`), then fine-tuned with a new head
(`BertTextClassifier`, also importable as `BertClassifier`); their
preprocessors and presets."""

from zoo.models.bert.bert_backbone import BertBackbone, gelu_approximate
from zoo.models.bert.bert_classifier import BertClassifier, BertTextClassifier
from zoo.models.bert.bert_masked_lm import BertMaskedLM
from zoo.models.bert.bert_masked_lm_head import MaskedLMHead
from zoo.models.bert.bert_preprocessor import (
    BertClassifierPreprocessor,
    BertMaskedLMPreprocessor,
    strip_markup,
)
from zoo.models.bert.bert_presets import PRESETS
