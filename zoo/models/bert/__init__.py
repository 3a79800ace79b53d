"""BERT: a bidirectional Transformer encoder pretrained by masked language
modelling (`BertMaskedLM`), then fine-tuned with a new head
(`BertTextClassifier`, also importable as `BertClassifier`); their
preprocessors and presets."""

from zoo.models.bert.bert_backbone import BertBackbone
from zoo.models.bert.bert_backbone import gelu_approximate
from zoo.models.bert.bert_classifier import BertClassifier
from zoo.models.bert.bert_classifier import BertTextClassifier
from zoo.models.bert.bert_masked_lm import BertMaskedLM
from zoo.models.bert.bert_masked_lm_head import MaskedLMHead
from zoo.models.bert.bert_preprocessor import BertClassifierPreprocessor
from zoo.models.bert.bert_preprocessor import BertMaskedLMPreprocessor
from zoo.models.bert.bert_preprocessor import strip_markup
from zoo.models.bert.bert_presets import PRESETS
