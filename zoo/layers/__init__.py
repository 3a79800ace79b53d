"""Attention layers written with `keras.ops` only (JAX, TensorFlow, PyTorch)."""

from zoo.layers.attention import MultiHeadAttention
from zoo.layers.attention import causal_mask
from zoo.layers.attention import scaled_dot_product_attention
