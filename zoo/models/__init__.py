"""Attention models composed from `zoo.layers`, one folder per family
(`text_classifier/`, `gpt/`, `seq2seq/`, `bert/`, `vit/`, `captioning/`):
backbone, tasks, preprocessor and presets,
in keras-hub's shape, and the generation shared by generating tasks."""

from zoo.models.bert import BertBackbone
from zoo.models.bert import BertClassifier
from zoo.models.bert import BertClassifierPreprocessor
from zoo.models.bert import BertTextClassifier
from zoo.models.bert import BertMaskedLM
from zoo.models.bert import BertMaskedLMPreprocessor
from zoo.models.captioning import ImageCaptioner
from zoo.models.captioning import ImageCaptionerPreprocessor
from zoo.models.captioning import ShowAttendTellBackbone
from zoo.models.captioning import TransformerCaptionBackbone
from zoo.models.generation import SAMPLERS
from zoo.models.generation import get_sampler
from zoo.models.gpt import GPT
from zoo.models.gpt import GPTCausalLM
from zoo.models.gpt import GPTBackbone
from zoo.models.gpt import GPTPreprocessor
from zoo.models.losses import SparseCategoricalCrossentropyWithSmoothing
from zoo.models.presets import list_presets
from zoo.models.seq2seq import RNNSeq2SeqBackbone
from zoo.models.seq2seq import TransformerSeq2SeqBackbone
from zoo.models.seq2seq import TranslationPreprocessor
from zoo.models.seq2seq import Translator
from zoo.models.text_classifier import AttentionPoolingBackbone
from zoo.models.text_classifier import MeanPoolingBackbone
from zoo.models.text_classifier import RecurrentAttentionBackbone
from zoo.models.text_classifier import TextClassifier
from zoo.models.text_classifier import TextClassifierBackbone
from zoo.models.text_classifier import TextClassifierPreprocessor
from zoo.models.text_classifier import TransformerEncoderBackbone
from zoo.models.text_classifier import attention_model
from zoo.models.vit import ViTBackbone
from zoo.models.vit import ViTImageClassifier
from zoo.models.vit import ViTImageClassifierPreprocessor
