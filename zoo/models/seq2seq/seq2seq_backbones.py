"""Encoder-decoder backbones for translation: the Transformer and the RNN +
attention baseline.

Both map `{"encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
"decoder_padding_mask"}` to `{"encoder_sequence_output",
"decoder_sequence_output"}` (teacher forcing: the decoder reads the target
shifted right), and give the `Translator` task what generation needs:

* `token_logits(decoder_sequence_output)`: vocabulary logits;
* `encode(token_ids, padding_mask)`: the encoder, run once per sentence;
* `decoder_cache(encoder_output, encoder_padding_mask, max_length)`: the
  state carried through generation (batch-major tensors, so beam search
  can copy them per beam): the Transformer's per-layer self-attention
  caches and its cross-attention keys and values (computed here, once per
  sentence); the RNN's decoder state and the attention keys of the source;
* `decode_step(token_ids, cache, index)`: one new target position;
* `cross_attention(...)`: the attention of every target position over the
  source, for the alignment pictures.
"""

import keras
import keras_hub
from keras import ops

from zoo.layers import (
    BahdanauAttention,
    LuongAttention,
    PositionalEmbedding,
    TransformerDecoder,
    TransformerEncoder,
)
from zoo.layers.checks import check_token_ids
from zoo.layers.sublayers import call_sublayer, without_keras_mask
from zoo.models.arguments import check_model_kwargs
from zoo.models.decoding import TransformerDecoding
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset, preset_kind_class
from zoo.models.seq2seq.seq2seq_presets import PRESETS

ATTENTIONS = ("bahdanau", "luong_dot", "luong_general")


def _inputs():
    def ids(name):
        return keras.Input((None,), dtype="int32", name=name)

    return {
        "encoder_token_ids": ids("encoder_token_ids"),
        "encoder_padding_mask": ids("encoder_padding_mask"),
        "decoder_token_ids": ids("decoder_token_ids"),
        "decoder_padding_mask": ids("decoder_padding_mask"),
    }


class Seq2SeqBackbone(
    FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone
):
    """Base of the encoder-decoder backbones: the functional model's
    outputs and `from_preset(preset, vocabulary_size=..., **overrides)`,
    the preset's backbone (`zoo.models.seq2seq.PRESETS`) with fresh
    weights; on this base class, the preset's own kind."""

    _presets = PRESETS
    preset_requires = {
        "vocabulary_size": "the preset fixes the architecture, the "
        "vocabulary comes from your tokenizer",
    }

    def _finish(self, inputs, encoder_output, decoder_output, dtype, **kwargs):
        check_model_kwargs(self, kwargs)
        keras_hub.models.Backbone.__init__(
            self,
            inputs=inputs,
            outputs={
                "encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output,
            },
            dtype=dtype,
            **kwargs,
        )

    @classmethod
    def preset_class(cls, preset):
        return preset_kind_class(
            cls,
            preset,
            Seq2SeqBackbone,
            "kind",
            {
                "transformer": TransformerSeq2SeqBackbone,
                "rnn": RNNSeq2SeqBackbone,
            },
        )

    @classmethod
    def _from_preset(cls, preset, **overrides):
        config = cls.preset_part(preset, "backbone")
        del config["kind"]
        # The positions default to the preprocessor's lengths.
        lengths = cls.preset_part(preset, "preprocessor")
        for key in ("encoder_sequence_length", "decoder_sequence_length"):
            config.setdefault(key, lengths[key])
        return cls.preset_class(preset)(**{**config, **overrides})


@keras.saving.register_keras_serializable(package="zoo")
class TransformerSeq2SeqBackbone(TransformerDecoding, Seq2SeqBackbone):
    """The Transformer of Vaswani et al. (2017): N encoder blocks over the
    source, N decoder blocks with causal self-attention and cross-attention
    to the encoder output (its padding masked).

    Token embeddings are scaled by sqrt(hidden_dim) and added to sinusoidal
    (or learned) positions. One subword vocabulary serves both languages, so
    the encoder and decoder can share their embedding (`share_embeddings`),
    and the decoder's is also its output projection (`tie_weights`).

    Args:
        vocabulary_size: subword vocabulary of both languages.
        num_layers: blocks in the encoder and in the decoder.
        num_heads, hidden_dim, intermediate_dim: the blocks' sizes.
        encoder_sequence_length, decoder_sequence_length: positions.
        positions: "sinusoidal" (the paper) or "learned".
        dropout: on embeddings, attention and residual branches.
        norm_first: pre-LN blocks (with a final LayerNorm) instead of the
            paper's post-LN.
        share_embeddings: one token table for source and target.
        tie_weights: the target table is the output projection.
        layer_norm_epsilon: LayerNorm epsilon.
        attention_dropout: dropout on the attention weights alone; default
            `dropout`. 0 keeps training on the fused attention kernel
            (flash/cuDNN on a GPU), which has no dropout.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `encoder_token_ids`, `encoder_padding_mask` `(batch, src_len)`;
        `decoder_token_ids`, `decoder_padding_mask` `(batch, tgt_len)`.

    Returns:
        `{"encoder_sequence_output": (batch, src_len, hidden_dim),
        "decoder_sequence_output": (batch, tgt_len, hidden_dim)}`.

    Example:

    >>> backbone = TransformerSeq2SeqBackbone(8000, num_layers=3)
    >>> ids = np.ones((1, 7), "int32")
    >>> backbone({"encoder_token_ids": ids, "encoder_padding_mask": ids,
    ...           "decoder_token_ids": ids, "decoder_padding_mask": ids}
    ...          )["decoder_sequence_output"].shape
    (1, 7, 256)
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=3,
        num_heads=8,
        hidden_dim=256,
        intermediate_dim=512,
        encoder_sequence_length=64,
        decoder_sequence_length=64,
        positions="sinusoidal",
        dropout=0.1,
        norm_first=False,
        share_embeddings=True,
        tie_weights=True,
        layer_norm_epsilon=1e-5,
        attention_dropout=None,
        dtype=None,
        **kwargs,
    ):
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )

        def embedding(length, name):
            return PositionalEmbedding(
                vocabulary_size,
                length,
                hidden_dim,
                positions=positions,
                mask_zero=False,
                tie_weights=tie_weights,
                scale_tokens=True,
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=hidden_dim**-0.5
                ),
                dtype=dtype,
                name=name,
            )

        # === Layers ===
        length = max(encoder_sequence_length, decoder_sequence_length)
        if share_embeddings:
            self.encoder_embedding = embedding(length, "embedding")
            self.decoder_embedding = self.encoder_embedding
        else:
            self.encoder_embedding = embedding(
                encoder_sequence_length, "encoder_embedding"
            )
            self.decoder_embedding = embedding(
                decoder_sequence_length, "decoder_embedding"
            )
        self.token_embedding = self.decoder_embedding.token_embedding
        self.encoder_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="encoder_embedding_dropout"
        )
        self.decoder_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="decoder_embedding_dropout"
        )
        block = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
        )
        self.encoder_layers = [
            TransformerEncoder(name=f"encoder_{i}", **block)
            for i in range(num_layers)
        ]
        self.decoder_layers = [
            TransformerDecoder(name=f"decoder_{i}", **block)
            for i in range(num_layers)
        ]
        self.encoder_norm = self.decoder_norm = None
        if norm_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="encoder_norm"
            )
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name="decoder_norm"
            )
        if not tie_weights:
            self.output_projection = keras.layers.Dense(
                vocabulary_size, dtype=dtype, name="output_projection"
            )

        # === Functional model ===
        inputs = _inputs()
        encoder_output = self.encode(
            inputs["encoder_token_ids"], inputs["encoder_padding_mask"]
        )
        x = self.decoder_dropout(
            self.decoder_embedding(inputs["decoder_token_ids"])
        )
        for layer in self.decoder_layers:
            x = layer(
                x,
                encoder_output,
                decoder_padding_mask=inputs["decoder_padding_mask"],
                encoder_padding_mask=inputs["encoder_padding_mask"],
            )
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        self._finish(inputs, encoder_output, x, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.encoder_sequence_length = encoder_sequence_length
        self.decoder_sequence_length = decoder_sequence_length
        self.positions = positions
        self.dropout = dropout
        self.norm_first = norm_first
        self.share_embeddings = share_embeddings
        self.tie_weights = tie_weights
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = (
            dropout if attention_dropout is None else attention_dropout
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "encoder_sequence_length": self.encoder_sequence_length,
                "decoder_sequence_length": self.decoder_sequence_length,
                "positions": self.positions,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "share_embeddings": self.share_embeddings,
                "tie_weights": self.tie_weights,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
            }
        )
        return config

    def encode(self, token_ids, padding_mask, check_ids=True):
        """The encoder: `(batch, src_len, hidden_dim)`."""
        x = self.encoder_dropout(
            self.encoder_embedding(token_ids, check_ids=check_ids)
        )
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=padding_mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x

    def cross_attention(
        self, encoder_token_ids, encoder_padding_mask, decoder_token_ids
    ):
        """Every decoder layer's attention over the source when the decoder
        reads `decoder_token_ids` (teacher forcing, inference mode), in one
        pass: `(batch, layers, heads, tgt_len, src_len)`.

        A shorter target is padded to `decoder_sequence_length` and the
        result cut back (target position i sees targets 0..i only, so the
        padding changes nothing): every sentence then has the same shapes,
        and JAX, which compiles each eager op per shape, compiles once.

        Example:

        >>> backbone = TransformerSeq2SeqBackbone(
        ...     100, num_layers=2, num_heads=2, hidden_dim=16,
        ...     intermediate_dim=32)
        >>> src = np.ones((1, 7), "int32")
        >>> backbone.cross_attention(src, src, src[:, :5]).shape
        (1, 2, 2, 5, 7)
        """
        length = decoder_token_ids.shape[1]
        if length is not None and length < self.decoder_sequence_length:
            decoder_token_ids = ops.pad(
                decoder_token_ids,
                [[0, 0], [0, self.decoder_sequence_length - length]],
            )
        encoder_output = self.encode(encoder_token_ids, encoder_padding_mask)
        cache = self.decoder_cache(
            encoder_output,
            encoder_padding_mask,
            ops.shape(decoder_token_ids)[1],
        )
        weights = self.decode_step(
            decoder_token_ids, cache, 0, return_attention_scores=True
        )[2]
        return weights[:, :, :, :length]


@keras.saving.register_keras_serializable(package="zoo")
class RNNSeq2SeqBackbone(Seq2SeqBackbone):
    """The RNN encoder-decoder with attention: a bidirectional GRU reads the
    source; a GRU decoder, started from the encoder's mean state, reads the
    target and at every step i attends over the encoder states with its
    state s_i: a_ij = softmax_j score(s_i, h_j), c_i = sum_j a_ij h_j, and
    predicts from tanh(W [s_i; c_i]) (Luong et al.'s attentional decoder;
    the score is Bahdanau's additive one by default, Luong's dot or
    general as options).

    Args:
        vocabulary_size: subword vocabulary of both languages.
        embedding_dim: token embedding size (one table for both languages).
        encoder_units: GRU units per direction.
        decoder_units: decoder GRU units.
        attention: "bahdanau", "luong_dot" (needs `decoder_units == 2 *
            encoder_units`) or "luong_general".
        attention_units: hidden size of the additive score.
        dropout: on embeddings and on the attentional vector.
        encoder_sequence_length, decoder_sequence_length: recorded for the
            task (the RNNs take any length).
        dtype: dtype policy.

    Inputs:
        as `TransformerSeq2SeqBackbone`.

    Returns:
        `{"encoder_sequence_output": (batch, src_len, 2 * encoder_units),
        "decoder_sequence_output": (batch, tgt_len, decoder_units)}`.

    Example:

    >>> backbone = RNNSeq2SeqBackbone(
    ...     8000, embedding_dim=32, encoder_units=32, decoder_units=64,
    ...     attention_units=32)
    >>> ids = np.ones((1, 7), "int32")
    >>> backbone({"encoder_token_ids": ids, "encoder_padding_mask": ids,
    ...           "decoder_token_ids": ids, "decoder_padding_mask": ids}
    ...          )["decoder_sequence_output"].shape
    (1, 7, 64)
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim=256,
        encoder_units=256,
        decoder_units=512,
        attention="bahdanau",
        attention_units=256,
        dropout=0.3,
        encoder_sequence_length=64,
        decoder_sequence_length=64,
        dtype=None,
        **kwargs,
    ):
        if attention not in ATTENTIONS:
            raise ValueError(
                f"attention must be one of {ATTENTIONS}; got {attention!r}."
            )
        # === Layers ===
        self.embedding = keras.layers.Embedding(
            vocabulary_size, embedding_dim, dtype=dtype, name="embedding"
        )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        self.encoder_rnn = keras.layers.Bidirectional(
            keras.layers.GRU(encoder_units, return_sequences=True, dtype=dtype),
            dtype=dtype,
            name="encoder_rnn",
        )
        self.initial_state_dense = keras.layers.Dense(
            decoder_units, activation="tanh", dtype=dtype, name="initial_state"
        )
        self.decoder_rnn = keras.layers.GRU(
            decoder_units,
            return_sequences=True,
            dtype=dtype,
            name="decoder_rnn",
        )
        if attention == "bahdanau":
            self.attention_layer = BahdanauAttention(
                attention_units, dtype=dtype, name="attention"
            )
        else:
            self.attention_layer = LuongAttention(
                attention[len("luong_") :], dtype=dtype, name="attention"
            )
        self.attentional_dense = keras.layers.Dense(
            decoder_units, activation="tanh", dtype=dtype, name="attentional"
        )
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="output_dropout"
        )
        self.output_projection = keras.layers.Dense(
            vocabulary_size, dtype=dtype, name="output_projection"
        )
        # The task calls it (token_logits), not the graph below: build it
        # here, so the backbone holds no unbuilt layer.
        self.output_projection.build((None, None, decoder_units))

        # === Functional model ===
        inputs = _inputs()
        encoder_output = self.encode(
            inputs["encoder_token_ids"], inputs["encoder_padding_mask"]
        )
        initial_state = self._initial_state(
            encoder_output, inputs["encoder_padding_mask"]
        )
        y = self.embedding_dropout(self.embedding(inputs["decoder_token_ids"]))
        states = self.decoder_rnn(
            y,
            initial_state=initial_state,
            mask=ops.cast(inputs["decoder_padding_mask"], "bool"),
        )
        x = self._attentional(
            states, encoder_output, inputs["encoder_padding_mask"]
        )
        self._finish(inputs, encoder_output, x, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.encoder_units = encoder_units
        self.decoder_units = decoder_units
        self.attention = attention
        self.attention_units = attention_units
        self.dropout = dropout
        self.encoder_sequence_length = encoder_sequence_length
        self.decoder_sequence_length = decoder_sequence_length

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "encoder_units": self.encoder_units,
                "decoder_units": self.decoder_units,
                "attention": self.attention,
                "attention_units": self.attention_units,
                "dropout": self.dropout,
                "encoder_sequence_length": self.encoder_sequence_length,
                "decoder_sequence_length": self.decoder_sequence_length,
            }
        )
        return config

    def encode(self, token_ids, padding_mask, check_ids=True):
        """The bidirectional GRU's states `(batch, src_len, 2 * units)`."""
        if check_ids:
            check_token_ids(
                token_ids,
                self.embedding.input_dim,
                "RNNSeq2SeqBackbone encoder_token_ids",
            )
        x = self.embedding_dropout(self.embedding(token_ids))
        return self.encoder_rnn(x, mask=ops.cast(padding_mask, "bool"))

    def call(self, inputs, training=None, mask=None):
        # keras.layers.Embedding checks no ids (a gather past the table
        # gives NaN under JAX); eager calls only, as TokenEmbedding does.
        if isinstance(inputs, dict):
            for name in ("encoder_token_ids", "decoder_token_ids"):
                if name in inputs:
                    check_token_ids(
                        inputs[name],
                        self.embedding.input_dim,
                        f"RNNSeq2SeqBackbone {name}",
                    )
        return super().call(inputs, training=training, mask=mask)

    def _initial_state(self, encoder_output, padding_mask):
        mask = ops.cast(padding_mask, encoder_output.dtype)[..., None]
        mean = ops.sum(encoder_output * mask, axis=1) / ops.maximum(
            ops.sum(mask, axis=1), 1.0
        )
        return self.initial_state_dense(mean)

    def _attentional(
        self,
        states,
        encoder_output,
        padding_mask,
        keys=None,
        return_attention_scores=False,
        training=None,
    ):
        # call_sublayer: direct calls in the decoding step (PyTorch), the
        # layers themselves in the functional graph (see GPT.call_with_cache).
        context = call_sublayer(
            None,
            self.attention_layer,
            states,
            encoder_output,
            keys=keys,
            mask=ops.cast(padding_mask, "bool"),
            return_attention_scores=return_attention_scores,
        )
        weights = None
        if return_attention_scores:
            context, weights = context
        x = call_sublayer(
            None, self.attentional_dense, ops.concatenate([states, context], -1)
        )
        x = call_sublayer(None, self.output_dropout, x, training=training)
        return (x, weights) if return_attention_scores else x

    def token_logits(self, hidden):
        return call_sublayer(None, self.output_projection, hidden)

    def decoder_cache(self, encoder_output, encoder_padding_mask, max_length):
        """`(decoder state, encoder states, attention keys, source mask)`."""
        # The source mask travels in the cache: the Keras mask the encoder
        # attached to its states would send each step through __call__.
        encoder_output = without_keras_mask(encoder_output)
        state = self._initial_state(encoder_output, encoder_padding_mask)
        keys = self.attention_layer.compute_keys(encoder_output)
        return state, encoder_output, keys, encoder_padding_mask

    def decode_step(
        self, token_ids, cache, index, return_attention_scores=False
    ):
        """One target position (`token_ids` `(batch, 1)`): `(hidden (batch,
        1, decoder_units), cache[, attention (batch, 1, 1, 1, src_len)])`."""
        state, encoder_output, keys, source_mask = cache
        y = call_sublayer(None, self.embedding, token_ids[:, 0])
        output, new_state = call_sublayer(
            None, self.decoder_rnn.cell, y, [state], training=False
        )
        x = self._attentional(
            output[:, None],
            encoder_output,
            source_mask,
            keys=keys,
            return_attention_scores=return_attention_scores,
            training=False,
        )
        new_state = (
            new_state[0] if isinstance(new_state, (list, tuple)) else new_state
        )
        cache = (new_state, encoder_output, keys, source_mask)
        if return_attention_scores:
            x, weights = x
            return x, cache, weights[:, None, None]
        return x, cache

    def cross_attention(
        self, encoder_token_ids, encoder_padding_mask, decoder_token_ids
    ):
        """The alignment a_ij of every target position i over the source
        tokens j when the decoder reads `decoder_token_ids` (teacher
        forcing, inference mode), in one pass: `(batch, 1, 1, tgt_len,
        src_len)` (one layer, one head).

        Example:

        >>> backbone = RNNSeq2SeqBackbone(
        ...     100, embedding_dim=8, encoder_units=8, decoder_units=16,
        ...     attention_units=8)
        >>> src = np.ones((1, 7), "int32")
        >>> backbone.cross_attention(src, src, src[:, :5]).shape
        (1, 1, 1, 5, 7)
        """
        encoder_output = without_keras_mask(
            self.encode(encoder_token_ids, encoder_padding_mask)
        )
        initial_state = self._initial_state(
            encoder_output, encoder_padding_mask
        )
        states = self.decoder_rnn(
            self.embedding(decoder_token_ids), initial_state=initial_state
        )
        _, weights = self._attentional(
            states,
            encoder_output,
            encoder_padding_mask,
            return_attention_scores=True,
        )
        return weights[:, None, None]
