"""Attention models composed from `zoo.layers`, one folder per family
(`text_classifier/`, `gpt/`, `seq2seq/`, `bert/`, `vit/`, `captioning/`,
`imagegpt/`):
backbone, tasks, preprocessor and presets,
in keras-hub's shape, and the generation shared by generating tasks."""

from zoo.models.bert import (
    BertBackbone,
    BertClassifier,
    BertClassifierPreprocessor,
    BertMaskedLM,
    BertMaskedLMPreprocessor,
    BertTextClassifier,
)
from zoo.models.captioning import (
    ImageCaptioner,
    ImageCaptionerPreprocessor,
    ShowAttendTellBackbone,
    TransformerCaptionBackbone,
)
from zoo.models.generation import SAMPLERS, get_sampler
from zoo.models.gpt import GPT, GPTBackbone, GPTCausalLM, GPTPreprocessor
from zoo.models.imagegpt import (
    ImageGPTBackbone,
    ImageGPTCausalLM,
    ImageGPTPreprocessor,
)
from zoo.models.losses import SparseCategoricalCrossentropyWithSmoothing
from zoo.models.presets import list_presets
from zoo.models.seq2seq import (
    RNNSeq2SeqBackbone,
    TransformerSeq2SeqBackbone,
    TranslationPreprocessor,
    Translator,
)
from zoo.models.text_classifier import (
    AttentionPoolingBackbone,
    MeanPoolingBackbone,
    RecurrentAttentionBackbone,
    TextClassifier,
    TextClassifierBackbone,
    TextClassifierPreprocessor,
    TransformerEncoderBackbone,
    attention_model,
)
from zoo.models.vit import (
    ViTBackbone,
    ViTImageClassifier,
    ViTImageClassifierPreprocessor,
)
