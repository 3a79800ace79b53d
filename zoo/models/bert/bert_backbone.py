"""BERT backbone: a bidirectional Transformer encoder, token ids -> hidden
states and a pooled [CLS] vector.

Reads top to bottom like keras-hub's `BertBackbone`:

    token ids, segment ids -> token + learned position + segment embeddings
        -> LayerNorm -> dropout
        -> N post-LN `TransformerEncoder` blocks (padding mask on the keys)
        -> sequence_output;  tanh(Dense(sequence_output[:, 0])) -> pooled_output

The token table is the `token_embedding` of a `zoo.layers.PositionalEmbedding`
(a reversible table), so the masked-LM head's output projection can share it.
"""

import keras
import keras_hub

from zoo.layers import PositionalEmbedding, TransformerEncoder
from zoo.layers.checks import check_token_ids
from zoo.models.arguments import check_model_kwargs
from zoo.models.bert.bert_presets import PRESETS
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset


def bert_kernel_initializer(stddev=0.02):
    """BERT's truncated N(0, 0.02) for every weight matrix."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="zoo")
def gelu_approximate(x):
    """GELU with the tanh approximation, as BERT and keras-hub's BERT use."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="zoo")
class BertBackbone(FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone):
    """BERT encoder: token ids -> contextual vectors and a pooled vector.

    Args:
        vocabulary_size: number of token ids.
        num_layers: number of `TransformerEncoder` blocks.
        num_heads: attention heads per block.
        hidden_dim: model width; divisible by `num_heads`.
        intermediate_dim: MLP width (BERT: `4 * hidden_dim`).
        dropout: dropout on the embeddings, attention weights and residual
            branches.
        attention_dropout: dropout on the attention weights alone; default
            `dropout`. 0 keeps training on the fused attention kernel
            (flash/cuDNN on a GPU), which has no dropout.
        max_sequence_length: number of learned positions; inputs may be
            shorter.
        num_segments: number of segment ids (2: sentence A and B).
        layer_norm_epsilon: LayerNorm epsilon (BERT: 1e-12).
        norm_first: False (BERT): post-LN blocks. True: pre-LN blocks and a
            final LayerNorm on the sequence output (GPT-2, RoBERTa-style
            "pre-norm" BERTs, Cramming), which trains at higher learning
            rates.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `{"token_ids": (batch, seq) int, "segment_ids": (batch, seq) int,
        "padding_mask": (batch, seq)}`, `seq <= max_sequence_length`;
        `padding_mask` is 1 (True) at real tokens. Padded positions never
        change the outputs at real positions.

    Returns:
        `{"sequence_output": (batch, seq, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`; the pooled vector is `tanh(W h_0 + b)` of the
        first ([CLS]) position.

    Example:

    >>> backbone = BertBackbone(vocabulary_size=1000, num_layers=2,
    ...                         num_heads=2, hidden_dim=32,
    ...                         intermediate_dim=64, max_sequence_length=16)
    >>> ids = np.array([[2, 15, 27, 3, 0, 0]])
    >>> out = backbone({"token_ids": ids, "segment_ids": np.zeros_like(ids),
    ...                 "padding_mask": ids != 0})
    >>> out["sequence_output"].shape, out["pooled_output"].shape
    ((1, 6, 32), (1, 32))
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=4,
        num_heads=4,
        hidden_dim=256,
        intermediate_dim=1024,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        layer_norm_epsilon=1e-12,
        norm_first=False,
        attention_dropout=None,
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )

        # === Layers ===
        self.embeddings = PositionalEmbedding(
            vocabulary_size,
            max_sequence_length,
            hidden_dim,
            positions="learned",
            mask_zero=False,  # the padding mask is an input of its own
            tie_weights=True,
            embeddings_initializer=bert_kernel_initializer(),
            position_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="embeddings",
        )
        self.token_embedding = self.embeddings.token_embedding
        self.segment_embedding = keras.layers.Embedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="embeddings_layer_norm",
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            TransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=gelu_approximate,
                norm_first=norm_first,  # BERT: post-LN
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=bert_kernel_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.final_layer_norm = (
            keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon,
                dtype=dtype,
                name="final_layer_norm",
            )
            if norm_first
            else None
        )
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        x = self.embeddings(token_ids) + self.segment_embedding(segment_ids)
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)
        for block in self.transformer_layers:
            x = block(x, padding_mask=padding_mask)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        sequence_output = x
        pooled_output = self.pooled_dense(x[:, 0, :])
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs={
                "sequence_output": sequence_output,
                "pooled_output": pooled_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = norm_first
        self.attention_dropout = (
            dropout if attention_dropout is None else attention_dropout
        )

    def call(self, inputs, training=None, mask=None):
        # Token ids are checked by their embedding; segment ids here (a
        # gather past the table gives NaN under JAX). Eager calls only:
        # inside a compiled step there is no value to check.
        if isinstance(inputs, dict) and "segment_ids" in inputs:
            check_token_ids(
                inputs["segment_ids"],
                self.num_segments,
                "BertBackbone",
                what="segment id",
                limit="num_segments",
            )
        return super().call(inputs, training=training, mask=mask)

    def attention_scores(self, inputs, layer_index=-1):
        """The self-attention weights of one block, for head views.

        Args:
            inputs: the backbone's input dict (`token_ids`, `segment_ids`,
                `padding_mask`), `(batch, seq)` each.
            layer_index: which `TransformerEncoder` block (negative counts
                from the last).

        Returns:
            `(batch, num_heads, seq, seq)`: row `i` of head `h` is how
            position `i` spreads its attention over the positions (padded
            keys get 0).
        """
        index = range(self.num_layers)[layer_index]  # IndexError if outside
        padding_mask = inputs["padding_mask"]
        x = self.embeddings(inputs["token_ids"]) + self.segment_embedding(
            inputs["segment_ids"]
        )
        x = self.embeddings_layer_norm(x)
        for block in self.transformer_layers[:index]:
            x = block(x, padding_mask=padding_mask)
        _, scores = self.transformer_layers[index](
            x, padding_mask=padding_mask, return_attention_scores=True
        )
        return scores

    # `from_preset(preset, vocabulary_size=..., **overrides)`: the preset's
    # architecture (`zoo.models.bert.PRESETS`), fresh weights.
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
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "norm_first": self.norm_first,
                "attention_dropout": self.attention_dropout,
            }
        )
        return config
