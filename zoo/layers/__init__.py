"""Attention layers written with `keras.ops` only (JAX, TensorFlow, PyTorch).

Importing this package registers every layer for `.keras` serialization.
"""

from zoo.layers.alignment import BahdanauAttention
from zoo.layers.alignment import LuongAttention
from zoo.layers.attention import MultiHeadAttention
from zoo.layers.attention import causal_mask
from zoo.layers.attention import scaled_dot_product_attention
from zoo.layers.embedding import PositionalEmbedding
from zoo.layers.embedding import TokenAndPositionEmbedding
from zoo.layers.embedding import TokenEmbedding
from zoo.layers.patches import ClassToken
from zoo.layers.patches import PatchEmbedding
from zoo.layers.patches import resize_position_grid
from zoo.layers.pooling import AttentionPooling
from zoo.layers.pooling import attention_entropy
from zoo.layers.positions import LearnedPositionEmbedding
from zoo.layers.positions import SinusoidalPositionEncoding
from zoo.layers.recurrent import PackedBidirectional
from zoo.layers.soft_attention import DoublyStochasticPenalty
from zoo.layers.soft_attention import SoftAttentionLSTM
from zoo.layers.stochastic_depth import StochasticDepth
from zoo.layers.token_window import RandomTokenWindow
from zoo.layers.transformer import TransformerDecoder
from zoo.layers.transformer import TransformerEncoder
from zoo.layers.word_dropout import WordDropout

__all__ = [
    "AttentionPooling",
    "BahdanauAttention",
    "ClassToken",
    "DoublyStochasticPenalty",
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
    "resize_position_grid",
    "scaled_dot_product_attention",
]
