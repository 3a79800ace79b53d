"""Attention layers written with `keras.ops` only (JAX, TensorFlow, PyTorch),
and `HeadTailPacker`, a text-preprocessing layer (keras-hub's packer).

Importing this package registers every layer for `.keras` serialization.
"""

from zoo.layers.alignment import BahdanauAttention, LuongAttention
from zoo.layers.attention import (
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)
from zoo.layers.conv_stem import ConvStem
from zoo.layers.embedding import (
    PositionalEmbedding,
    TokenAndPositionEmbedding,
    TokenEmbedding,
)
from zoo.layers.head_tail_packer import HeadTailPacker
from zoo.layers.patches import ClassToken, PatchEmbedding, resize_position_grid
from zoo.layers.pooling import AttentionPooling, attention_entropy
from zoo.layers.positions import (
    LearnedPositionEmbedding,
    SinusoidalPositionEncoding,
)
from zoo.layers.recurrent import PackedBidirectional
from zoo.layers.soft_attention import DoublyStochasticPenalty, SoftAttentionLSTM
from zoo.layers.softmax import masked_softmax
from zoo.layers.stochastic_depth import StochasticDepth
from zoo.layers.token_window import RandomTokenWindow
from zoo.layers.transformer import TransformerDecoder, TransformerEncoder
from zoo.layers.word_dropout import WordDropout

__all__ = [
    "AttentionPooling",
    "BahdanauAttention",
    "ClassToken",
    "ConvStem",
    "DoublyStochasticPenalty",
    "HeadTailPacker",
    "LearnedPositionEmbedding",
    "LuongAttention",
    "MultiHeadAttention",
    "PackedBidirectional",
    "PatchEmbedding",
    "PositionalEmbedding",
    "RandomTokenWindow",
    "SinusoidalPositionEncoding",
    "SoftAttentionLSTM",
    "StochasticDepth",
    "TokenAndPositionEmbedding",
    "TokenEmbedding",
    "TransformerDecoder",
    "TransformerEncoder",
    "WordDropout",
    "attention_entropy",
    "causal_mask",
    "masked_softmax",
    "resize_position_grid",
    "scaled_dot_product_attention",
]
