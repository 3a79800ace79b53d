"""The IMDB lab's text classifiers: backbones (mean, attention, computed
query, RNN + attention, Transformer), the `TextClassifier` task, its
preprocessor and presets."""

from zoo.models.text_classifier.text_classifier import TextClassifier
from zoo.models.text_classifier.text_classifier_backbones import BACKBONES
from zoo.models.text_classifier.text_classifier_backbones import (
    AttentionPoolingBackbone,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    MeanPoolingBackbone,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    QUERY_MAP_SCALE,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    RecurrentAttentionBackbone,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    TextClassifierBackbone,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    TransformerEncoderBackbone,
)
from zoo.models.text_classifier.text_classifier_backbones import (
    attention_model,
)
from zoo.models.text_classifier.text_classifier_preprocessor import (
    TextClassifierPreprocessor,
)
from zoo.models.text_classifier.text_classifier_presets import PRESETS
