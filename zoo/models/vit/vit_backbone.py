"""Vision Transformer backbone: images -> patch states and a pooled vector.

Reads top to bottom like timm's `vision_transformer.py`:

    images (batch, H, W, C) -> PatchEmbedding (P x P patches -> hidden_dim)
                               or ConvStem (halving 3 x 3 convolutions)
        -> [class] token first -> + learned positions -> dropout
        -> N pre-LN `TransformerEncoder` blocks (GELU MLP)
        -> final LayerNorm -> sequence_output
    pooled_output: the class token's state, the mean of the patches', or
        their attention-weighted mean (sequence pooling, as in CCT).
"""

import keras
import keras_hub
from keras import ops

from zoo.layers import (
    AttentionPooling,
    ClassToken,
    ConvStem,
    LearnedPositionEmbedding,
    PatchEmbedding,
    TransformerEncoder,
)
from zoo.layers.conv_stem import DOWNSAMPLES
from zoo.models.arguments import check_model_kwargs
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset
from zoo.models.vit.vit_presets import PRESETS

POOLINGS = ("class_token", "average", "sequence")


@keras.saving.register_keras_serializable(package="zoo")
class ViTBackbone(FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone):
    """Vision Transformer: images -> token states and a pooled vector.

    Args:
        image_size: `(height, width)` of the input images; both divisible by
            `patch_size`.
        num_channels: channels of the input images (1 grey, 3 colour).
        patch_size: side of the square patches.
        num_layers: number of `TransformerEncoder` blocks (pre-LN).
        num_heads: attention heads per block.
        hidden_dim: model width; divisible by `num_heads`.
        intermediate_dim: MLP width.
        dropout: dropout on the embeddings, attention weights and residual
            branches.
        drop_path_rate: stochastic depth of the last block; block `i` of
            `N` drops its residual branches per example with probability
            `drop_path_rate * i / (N - 1)` while training (0 for the first,
            as in DeiT and timm).
        pooling: "class_token" (a learned [class] token first; its final
            state is the pooled vector), "average" (no class token; the
            mean of the patch states) or "sequence" (no class token; the
            patch states weighted by a softmax over one learned score each,
            `AttentionPooling`: the sequence pooling of Compact
            Convolutional Transformers, Hassani et al. 2021).
        stem_filters: None (default) embeds `patch_size` patches with one
            linear projection (`PatchEmbedding`); a list of channel counts
            builds a `ConvStem` of that many halving 3 x 3 convolutions
            (see `stem_downsample`) instead ("early convolutions", Xiao et
            al. 2021), whose total stride `2 ** len(stem_filters)` must
            equal `patch_size`.
        stem_downsample: how the `ConvStem` halves: "stride" (default,
            stride-2 convolutions) or "max_pool" (stride-1 convolutions,
            each followed by a stride-2 max pool: after Compact
            Convolutional Transformers' tokenizer). Only with
            `stem_filters`.
        layer_norm_epsilon: LayerNorm epsilon.
        attention_dropout: dropout on the attention weights alone; default
            `dropout`. 0 keeps training on the fused attention kernel
            (flash/cuDNN on a GPU), which has no dropout.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `(batch, height, width, num_channels)` float images, scaled as the
        preprocessor scales them (to [0, 1]).

    Returns:
        `{"sequence_output": (batch, tokens, hidden_dim), "pooled_output":
        (batch, hidden_dim)}`, `tokens = [1 +] (height / P) * (width / P)`.

    Example:

    >>> backbone = ViTBackbone.from_preset("mnist")
    >>> out = backbone(np.zeros((2, 28, 28, 1), "float32"))
    >>> out["sequence_output"].shape, out["pooled_output"].shape
    ((2, 50, 128), (2, 128))
    """

    def __init__(
        self,
        image_size=(28, 28),
        num_channels=1,
        patch_size=4,
        num_layers=6,
        num_heads=4,
        hidden_dim=128,
        intermediate_dim=256,
        dropout=0.0,
        drop_path_rate=0.0,
        pooling="class_token",
        layer_norm_epsilon=1e-6,
        attention_dropout=None,
        stem_filters=None,
        stem_downsample="stride",
        dtype=None,
        **kwargs,
    ):
        check_model_kwargs(self, kwargs)
        height, width = (int(n) for n in image_size)
        if height % patch_size or width % patch_size:
            raise ValueError(
                f"image_size {height}x{width} is not divisible by the patch "
                f"size {patch_size}."
            )
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(
                f"drop_path_rate must be in [0, 1); got {drop_path_rate}."
            )
        if pooling not in POOLINGS:
            raise ValueError(
                f"pooling must be one of {POOLINGS}; got {pooling!r}."
            )
        if stem_downsample not in DOWNSAMPLES or (
            stem_filters is None and stem_downsample != "stride"
        ):
            raise ValueError(
                f"stem_downsample must be one of {DOWNSAMPLES}, and other "
                "than 'stride' only with stem_filters; got "
                f"stem_downsample={stem_downsample!r}, "
                f"stem_filters={stem_filters}."
            )
        if stem_filters is not None:
            stem_filters = [int(f) for f in stem_filters]
            if 2 ** len(stem_filters) != patch_size:
                raise ValueError(
                    f"stem_filters={stem_filters} gives a stride of "
                    f"{2 ** len(stem_filters)} (one halving per entry); "
                    f"patch_size={patch_size} needs "
                    f"log2({patch_size}) entries."
                )
        grid = (height // patch_size, width // patch_size)
        num_tokens = grid[0] * grid[1] + (pooling == "class_token")

        # === Layers ===
        if stem_filters is None:
            self.patch_embedding = PatchEmbedding(
                patch_size, hidden_dim, dtype=dtype, name="patch_embedding"
            )
        else:
            self.patch_embedding = ConvStem(
                stem_filters,
                hidden_dim,
                downsample=stem_downsample,
                dtype=dtype,
                name="conv_stem",
            )
        self.class_token = (
            ClassToken(dtype=dtype, name="class_token")
            if (pooling == "class_token")
            else None
        )
        self.position_embedding = LearnedPositionEmbedding(
            num_tokens,
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=dtype,
            name="position_embedding",
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
                activation="gelu",
                norm_first=True,
                layer_norm_epsilon=layer_norm_epsilon,
                drop_path_rate=drop_path_rate * i / max(num_layers - 1, 1),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm"
        )
        self.sequence_pooling = (
            AttentionPooling(dtype=dtype, name="sequence_pooling")
            if pooling == "sequence"
            else None
        )

        # === Functional model ===
        images = keras.Input((height, width, num_channels), name="images")
        x = self.embed(images)
        for block in self.transformer_layers:
            x = block(x)
        sequence_output = self.layer_norm(x)
        if pooling == "class_token":
            pooled_output = sequence_output[:, 0, :]
        elif pooling == "sequence":
            pooled_output = self.sequence_pooling(sequence_output)
        else:
            pooled_output = ops.mean(sequence_output, axis=1)
        super().__init__(
            inputs=images,
            outputs={
                "sequence_output": sequence_output,
                "pooled_output": pooled_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.image_size = (height, width)
        self.num_channels = num_channels
        self.patch_size = patch_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.drop_path_rate = drop_path_rate
        self.pooling = pooling
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = (
            dropout if attention_dropout is None else attention_dropout
        )
        self.stem_filters = stem_filters
        self.stem_downsample = stem_downsample
        self.grid_size = grid

    def embed(self, images):
        """Patches, [class] token and positions: the first block's input."""
        x = self.patch_embedding(images)
        if self.class_token is not None:
            x = self.class_token(x)
        x = x + self.position_embedding(x)
        return self.embeddings_dropout(x)

    def attention_scores(self, images, return_pooling_weights=False):
        """Every block's self-attention weights, for attention maps.

        Args:
            images: `(batch, height, width, num_channels)`, preprocessed.
            return_pooling_weights: also return how the pooled vector
                weighs the final tokens, `(batch, tokens)`: one-hot on the
                class token, uniform for "average", the learned softmax
                for "sequence".

        Returns:
            A list with one `(batch, num_heads, tokens, tokens)` array per
            block, first block first (and the pooling weights).
        """
        x = self.embed(ops.convert_to_tensor(images, self.compute_dtype))
        scores = []
        for block in self.transformer_layers:
            x, weights = block(x, return_attention_scores=True)
            scores.append(weights)
        if not return_pooling_weights:
            return scores
        batch, tokens = ops.shape(x)[0], ops.shape(x)[1]
        if self.pooling == "sequence":
            _, pooling = self.sequence_pooling(
                self.layer_norm(x), return_attention_scores=True
            )
        elif self.pooling == "class_token":
            pooling = ops.one_hot(ops.zeros((batch,), "int32"), tokens)
        else:
            pooling = ops.ones((batch, tokens)) / tokens
        return scores, ops.cast(pooling, "float32")

    def rollout(self, images):
        """How much each patch feeds the pooled vector through all the
        blocks: `attention_rollout` read along the pooling weights.

        Args:
            images: `(batch, height, width, num_channels)`, preprocessed.

        Returns:
            `(batch, patches)`, row-major patch order.
        """
        scores, pooling = self.attention_scores(
            images, return_pooling_weights=True
        )
        return attention_rollout(
            scores,
            num_prefix_tokens=int(self.class_token is not None),
            pooling_weights=pooling,
        )

    # `from_preset(preset, **overrides)`: the preset's architecture
    # (`zoo.models.vit.PRESETS`), fresh weights.
    _presets = PRESETS

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "backbone"), **overrides})

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": list(self.image_size),
                "num_channels": self.num_channels,
                "patch_size": self.patch_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "drop_path_rate": self.drop_path_rate,
                "pooling": self.pooling,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
                "stem_filters": self.stem_filters,
                "stem_downsample": self.stem_downsample,
            }
        )
        return config


def attention_rollout(scores, num_prefix_tokens=1, pooling_weights=None):
    """Attention rollout (Abnar & Zuidema, 2020): how much each patch feeds
    the class token (or the pooled vector) through all the blocks.

    For each block, average the heads, add the identity (the residual) and
    renormalise the rows: `A_l = (mean_h W_l + I) / 2`; then multiply
    through the blocks, `R = A_L ... A_2 A_1`, and read the class token's
    row over the patches, or `p R` for a pooled vector that weighs the
    final tokens by `p`.

    Args:
        scores: a list of `(batch, heads, tokens, tokens)` attention weights,
            first block first (`ViTBackbone.attention_scores`).
        num_prefix_tokens: tokens before the patches (the class token).
        pooling_weights: optional `(batch, tokens)`, the pooled vector's
            weights over the final tokens; None reads row 0 (the class
            token).

    Returns:
        `(batch, patches)`: the rolled-out attention over the patches, in
        row-major patch order.
    """
    rollout = None
    for weights in scores:
        weights = ops.mean(ops.cast(weights, "float32"), axis=1)
        tokens = ops.shape(weights)[-1]
        weights = weights + ops.eye(tokens, dtype="float32")[None]
        weights = weights / ops.sum(weights, axis=-1, keepdims=True)
        rollout = weights if rollout is None else ops.matmul(weights, rollout)
    if rollout is None:
        raise ValueError("attention_rollout needs at least one block.")
    if pooling_weights is None:
        return rollout[:, 0, num_prefix_tokens:]
    pooled = ops.einsum(
        "bt,bts->bs", ops.cast(pooling_weights, "float32"), rollout
    )
    return pooled[:, num_prefix_tokens:]
