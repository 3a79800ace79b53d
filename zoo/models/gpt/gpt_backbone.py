"""GPT backbone: a decoder-only Transformer, token ids -> hidden states.

Reads top to bottom like nanoGPT's `model.py`:

    token ids -> token embedding + learned positions -> dropout
              -> N pre-LN causal `TransformerDecoder` blocks (no cross-attention)
              -> final LayerNorm -> sequence_output

The token table is a `zoo.layers.PositionalEmbedding`, whose reverse
direction is the language model's output projection (tied by default).
"""

import keras
import keras_hub
import numpy as np

from zoo.layers import PositionalEmbedding, TransformerDecoder
from zoo.models.arguments import check_model_kwargs
from zoo.models.gpt.gpt_presets import PRESETS
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset


@keras.saving.register_keras_serializable(package="zoo")
def gelu_approximate(x):
    """GELU's tanh approximation (GPT-2's and keras-hub's GPT-2)."""
    return keras.activations.gelu(x, approximate=True)


# The MLP activations a GPT takes, by the name its config keeps.
ACTIVATIONS = {"gelu": "gelu", "gelu_approximate": gelu_approximate}


def gpt_kernel_initializer():
    """GPT-2's N(0, 0.02) for every weight matrix."""
    return keras.initializers.RandomNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="zoo")
class GPTBackbone(FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone):
    """Decoder-only Transformer: token ids -> hidden states.

    Args:
        vocabulary_size: number of token ids.
        num_layers: number of `TransformerDecoder` blocks.
        num_heads: attention heads per block.
        hidden_dim: model width (embedding size); divisible by `num_heads`.
        intermediate_dim: MLP width; default `4 * hidden_dim`.
        sequence_length: context length (number of learned positions).
        dropout: dropout on the embeddings, attention weights and residual
            branches.
        attention_dropout: dropout on the attention weights alone; default
            `dropout`. 0 keeps training on the fused attention kernel
            (flash/cuDNN on a GPU), which has no dropout.
        tie_weights: share the token embedding with the output projection.
        layer_norm_epsilon: LayerNorm epsilon.
        activation: the MLP's activation, "gelu" (exact, with erf: nanoGPT's
            and PyTorch's default) or "gelu_approximate" (the tanh
            approximation of GPT-2 and keras-hub's `GPT2Backbone`).
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `{"token_ids": (batch, seq) int, "padding_mask": (batch, seq)}`,
        `seq <= sequence_length`.

    Returns:
        `{"sequence_output": (batch, seq, hidden_dim)}`, the hidden states
        after the final LayerNorm.

    Example:

    >>> backbone = GPTBackbone(vocabulary_size=65, num_layers=2, num_heads=2,
    ...                        hidden_dim=32, sequence_length=64)
    >>> ids = np.ones((1, 10), "int32")
    >>> backbone({"token_ids": ids, "padding_mask": ids})["sequence_output"].shape
    (1, 10, 32)
    >>> GPTBackbone.from_preset("cpu_small", vocabulary_size=65).count_params()
    818048
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=4,
        num_heads=4,
        hidden_dim=128,
        intermediate_dim=None,
        sequence_length=256,
        dropout=0.0,
        tie_weights=True,
        layer_norm_epsilon=1e-5,
        attention_dropout=None,
        activation="gelu",
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation={activation!r} is not one of "
                f"{sorted(ACTIVATIONS)}."
            )
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )
        intermediate_dim = intermediate_dim or 4 * hidden_dim

        # === Layers ===
        self.embeddings = PositionalEmbedding(
            vocabulary_size,
            sequence_length,
            hidden_dim,
            positions="learned",
            mask_zero=False,  # the padding mask is an input of its own
            tie_weights=tie_weights,
            embeddings_initializer=gpt_kernel_initializer(),
            position_initializer=gpt_kernel_initializer(),
            dtype=dtype,
            name="embeddings",
        )
        self.token_embedding = self.embeddings.token_embedding
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            TransformerDecoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=ACTIVATIONS[activation],
                norm_first=True,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=gpt_kernel_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm"
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        x = self.embeddings(token_ids)
        x = self.embeddings_dropout(x)
        for block in self.transformer_layers:
            x = block(x, decoder_padding_mask=padding_mask)
        sequence_output = self.layer_norm(x)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs={"sequence_output": sequence_output},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.sequence_length = sequence_length
        self.dropout = dropout
        self.tie_weights = tie_weights
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = activation
        self.attention_dropout = (
            dropout if attention_dropout is None else attention_dropout
        )

    def flops_per_token(self, context=None):
        """Training FLOPs per token, nanoGPT's estimate (PaLM's appendix B):
        `6 N + 12 L d T`, N the parameters without the position table (a
        lookup), L blocks of width d attending over T = `context` tokens
        (default: `sequence_length`). Divide by the step time for model
        FLOPs utilisation (`zoo.callbacks.Throughput(flops_per_item=...)`).

        Example:

        >>> backbone = GPTBackbone.from_preset("nanogpt", vocabulary_size=65)
        >>> backbone.flops_per_token()
        71112960
        """
        context = self.sequence_length if context is None else int(context)
        positions = sum(
            int(np.prod(w.shape))
            for w in self.embeddings.position_embedding.weights
        )
        return (
            6 * (self.count_params() - positions)
            + 12 * self.num_layers * self.hidden_dim * context
        )

    # `from_preset(preset, vocabulary_size=..., **overrides)`: the preset's
    # architecture (`zoo.models.gpt.PRESETS`), fresh weights.
    _presets = PRESETS
    preset_requires = {
        "vocabulary_size": "the preset fixes the architecture, the "
        "vocabulary comes from your tokenizer",
    }

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "backbone"), **overrides})

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "sequence_length": self.sequence_length,
                "dropout": self.dropout,
                "tie_weights": self.tie_weights,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
            }
        )
        return config
