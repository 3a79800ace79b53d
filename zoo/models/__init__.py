"""Attention models composed from `zoo.layers`."""

from zoo.models.gpt import GPT
from zoo.models.gpt import GPTBackbone
from zoo.models.gpt import GPTPreprocessor
from zoo.models.gpt import get_sampler
from zoo.models.text_classifier import ORDER_FREE_KINDS
from zoo.models.text_classifier import QUERY_MAP_SCALE
from zoo.models.text_classifier import TEXT_CLASSIFIER_KINDS
from zoo.models.text_classifier import TextClassifier
from zoo.models.text_classifier import TextClassifierPreprocessor
from zoo.models.text_classifier import attention_model
from zoo.models.text_classifier import build_text_backbone
