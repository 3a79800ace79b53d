"""The IMDB lab's text classifiers: backbones (mean, attention, computed
query, RNN + attention, Transformer), the `TextClassifier` task, its
preprocessor and presets."""

from zoo.models.text_classifier.text_classifier import TextClassifier
from zoo.models.text_classifier.text_classifier_backbones import (
    BACKBONES,
    QUERY_MAP_SCALE,
    AttentionPoolingBackbone,
    MeanPoolingBackbone,
    RecurrentAttentionBackbone,
    TextClassifierBackbone,
    TransformerEncoderBackbone,
    attention_model,
)
from zoo.models.text_classifier.text_classifier_preprocessor import (
    TextClassifierPreprocessor,
)
from zoo.models.text_classifier.text_classifier_presets import PRESETS
