"""The IMDB lab's backbones: word ids -> a sequence representation and one
pooled vector per text.

One small class per architecture, the course's lab in order:

| backbone                     | sequence_output                  | pooled_output                        |
| ---------------------------- | -------------------------------- | ------------------------------------ |
| `MeanPoolingBackbone`        | word embeddings                  | mean over the real words (baseline)  |
| `AttentionPoolingBackbone`   | word embeddings                  | softmax(q . x_i)-weighted values; q learned or computed from the text |
| `RecurrentAttentionBackbone` | bidirectional GRU/LSTM states    | softmax(q . h_i)-weighted states     |
| `TransformerEncoderBackbone` | token + position embeddings, N encoder blocks | softmax(q . h_i)-weighted states |

Each is a keras-hub `Backbone`: a functional model from `token_ids`
`(batch, seq)` (id 0 = padding, masked everywhere) to
`{"sequence_output": (batch, seq, dim), "pooled_output": (batch, dim)}`,
with a complete config and `from_preset`. The classification head lives in
the task, `TextClassifier`. Attention backbones call their pooling layer
(named "attention_pooling") with `return_attention_scores=True`, so
`attention_model(backbone)` reads the weights.
"""

import keras
import keras_hub

from zoo.layers import (
    AttentionPooling,
    PackedBidirectional,
    PositionalEmbedding,
    RandomTokenWindow,
    TokenEmbedding,
    TransformerEncoder,
    WordDropout,
)
from zoo.models.arguments import check_model_kwargs
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.presets import FromPreset, preset_kind_class
from zoo.models.text_classifier.text_classifier_presets import PRESETS

POOLING_LAYER_NAME = "attention_pooling"
# How fast `AttentionPoolingBackbone(query="computed")` trains its query and
# value maps relative to the other weights (`AttentionPooling(map_scale)`).
QUERY_MAP_SCALE = 0.03


class TextClassifierBackbone(
    FromPreset, KeepsWeightsOnError, keras_hub.models.Backbone
):
    """Base of the text classifier backbones: the shared word-id stem and
    `from_preset(preset, vocabulary_size=..., **overrides)`, the preset's
    backbone (`zoo.models.text_classifier.
    PRESETS`) with fresh weights; on this base class, the preset's own
    class.

    The stem, in order: `RandomTokenWindow(train_window)` when
    `train_window` (train on random slices of each review, read all of it
    at inference), `WordDropout(word_dropout)` when `word_dropout`, the
    token table (named "embedding"; id 0 is padding and masked) and dropout.
    Subclasses build the rest in their `__init__`.
    """

    _presets = PRESETS
    preset_requires = {
        "vocabulary_size": "the preset fixes the architecture, the "
        "vocabulary comes from your adapted preprocessor "
        "(preprocessor.vocabulary_size)",
    }

    @classmethod
    def preset_class(cls, preset):
        return preset_kind_class(
            cls, preset, TextClassifierBackbone, "class", BACKBONES
        )

    @classmethod
    def _from_preset(cls, preset, **overrides):
        config = cls.preset_part(preset, "backbone")
        del config["class"]
        return cls.preset_class(preset)(**{**config, **overrides})

    def _stem(
        self,
        token_ids,
        vocabulary_size,
        embedding_dim,
        dropout,
        word_dropout,
        train_window,
        embeddings_initializer,
        embedding_dtype,
        dtype,
        sequence_length=None,
        positions="learned",
    ):
        """The word-id stem; token + position embeddings when
        `sequence_length` is given."""
        x = token_ids
        if train_window:
            self.train_window_layer = RandomTokenWindow(
                train_window, dtype=dtype, name="train_window"
            )
            x = self.train_window_layer(x)
        if word_dropout:
            self.word_dropout_layer = WordDropout(
                word_dropout, dtype=dtype, name="word_dropout"
            )
            x = self.word_dropout_layer(x)
        initializer = keras.initializers.get(embeddings_initializer)
        if sequence_length is None:
            self.embedding = TokenEmbedding(
                vocabulary_size,
                embedding_dim,
                mask_zero=True,
                embeddings_initializer=initializer,
                dtype=embedding_dtype or dtype,
                name="embedding",
            )
        else:
            self.embedding = PositionalEmbedding(
                vocabulary_size,
                sequence_length,
                embedding_dim,
                positions=positions,
                embeddings_initializer=initializer,
                dtype=embedding_dtype or dtype,
                name="embedding",
            )
        self.embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        return self.embedding_dropout(self.embedding(x))

    def _attention_pooling(self, entropy_weight, dtype, **options):
        self.pooling = AttentionPooling(
            entropy_weight=entropy_weight,
            dtype=dtype,
            name=POOLING_LAYER_NAME,
            **options,
        )
        return self.pooling

    def _finish(
        self, token_ids, sequence_output, pooled_output, dtype, **kwargs
    ):
        """The functional model."""
        check_model_kwargs(self, kwargs)
        keras_hub.models.Backbone.__init__(
            self,
            inputs=token_ids,
            outputs={
                "sequence_output": sequence_output,
                "pooled_output": pooled_output,
            },
            dtype=dtype,
            **kwargs,
        )


@keras.saving.register_keras_serializable(package="zoo")
class MeanPoolingBackbone(TextClassifierBackbone):
    """The baseline: the mean of the word embeddings of the real words.

    Args:
        vocabulary_size: number of word ids; id 0 is padding.
        embedding_dim: word embedding size.
        dropout: dropout on the word embeddings.
        word_dropout: while training, drop whole words with this
            probability (`zoo.layers.WordDropout`).
        train_window: while training, read a random slice of this many
            words of each text (`zoo.layers.RandomTokenWindow`); None or 0
            reads all of them.
        embeddings_initializer: initializer of the word embeddings (Keras'
            "uniform", +-0.05, by default).
        embedding_dtype: dtype policy of the token table alone, e.g.
            "float16" to store a large vocabulary in half the space (lookups
            are cast to the compute dtype of the layers after it).
        dtype: dtype policy of the backbone, e.g. "mixed_bfloat16".

    Inputs:
        `(batch, seq)` int word ids, 0 = padding.

    Returns:
        `{"sequence_output": (batch, seq, embedding_dim), "pooled_output":
        (batch, embedding_dim)}`.

    Example:

    >>> backbone = MeanPoolingBackbone(vocabulary_size=20000)
    >>> backbone(np.array([[12, 7, 1, 0]]))["pooled_output"].shape
    (1, 64)
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim=64,
        dropout=0.3,
        word_dropout=0.0,
        train_window=None,
        embeddings_initializer="uniform",
        embedding_dtype=None,
        dtype=None,
        **kwargs,
    ):
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        x = self._stem(
            token_ids,
            vocabulary_size,
            embedding_dim,
            dropout,
            word_dropout,
            train_window,
            embeddings_initializer,
            embedding_dtype,
            dtype,
        )
        self.pooling = keras.layers.GlobalAveragePooling1D(
            dtype=dtype, name="mean_pooling"
        )
        pooled = self.pooling(x)
        self._finish(token_ids, x, pooled, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.train_window = train_window
        self.embeddings_initializer = keras.initializers.serialize(
            keras.initializers.get(embeddings_initializer)
        )
        self.embedding_dtype = embedding_dtype

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "dropout": self.dropout,
                "word_dropout": self.word_dropout,
                "train_window": self.train_window,
                "embeddings_initializer": self.embeddings_initializer,
                "embedding_dtype": self.embedding_dtype,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class AttentionPoolingBackbone(TextClassifierBackbone):
    """Attention pooling over the word embeddings.

    `query="learned"`: one learned query, `log p(a_i | t) = const + q . x_i`
    (the lab's "attention" model). `query="computed"`: the query is computed
    from the text, `q = W mean(x) + b`, and the values pass through a map
    `v(x_i)` (the "query" model); it starts as the learned-query model
    (W = 0, v = identity) and trains W and v `map_scale` times as fast as
    the other weights (`zoo.layers.AttentionPooling`).

    Args:
        vocabulary_size, embedding_dim, dropout, word_dropout, train_window,
        embeddings_initializer, embedding_dtype, dtype: as in
            `MeanPoolingBackbone`.
        query: "learned" or "computed".
        query_initializer: initial learned query, or the bias `b` of the
            computed query; None keeps glorot-uniform, "zeros" starts as
            mean pooling.
        map_scale: `query="computed"` only: the speed of W and v relative
            to the other weights.
        entropy_weight: weight of the attention-entropy penalty added to
            the training loss (>0 sharpens, <0 spreads the attention).

    Inputs:
        `(batch, seq)` int word ids, 0 = padding.

    Returns:
        `{"sequence_output": (batch, seq, embedding_dim), "pooled_output":
        (batch, embedding_dim)}`.

    Example:

    >>> backbone = AttentionPoolingBackbone(vocabulary_size=20000)
    >>> backbone(np.array([[12, 7, 1, 0]]))["pooled_output"].shape
    (1, 64)
    >>> attention_model(backbone)(np.array([[12, 7, 1, 0]])).shape
    (1, 4)
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim=64,
        dropout=0.3,
        word_dropout=0.0,
        train_window=None,
        query="learned",
        query_initializer=None,
        map_scale=QUERY_MAP_SCALE,
        entropy_weight=0.0,
        embeddings_initializer="uniform",
        embedding_dtype=None,
        dtype=None,
        **kwargs,
    ):
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        x = self._stem(
            token_ids,
            vocabulary_size,
            embedding_dim,
            dropout,
            word_dropout,
            train_window,
            embeddings_initializer,
            embedding_dtype,
            dtype,
        )
        if query == "computed":
            # Starts as the learned-query model: q = b, v(x_i) = x_i.
            options = dict(
                query="computed",
                use_value_transform=True,
                query_initializer="zeros",
                query_bias_initializer=query_initializer or "glorot_uniform",
                value_initializer="identity",
                map_scale=map_scale,
            )
        elif query == "learned":
            options = dict(query_initializer=query_initializer)
        else:
            raise ValueError(
                f"query must be 'learned' or 'computed'; got {query!r}."
            )
        pooled, _ = self._attention_pooling(entropy_weight, dtype, **options)(
            x, return_attention_scores=True
        )
        self._finish(token_ids, x, pooled, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.train_window = train_window
        self.embeddings_initializer = keras.initializers.serialize(
            keras.initializers.get(embeddings_initializer)
        )
        self.embedding_dtype = embedding_dtype
        self.query = query
        self.query_initializer = query_initializer
        self.map_scale = map_scale
        self.entropy_weight = entropy_weight

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "dropout": self.dropout,
                "word_dropout": self.word_dropout,
                "train_window": self.train_window,
                "embeddings_initializer": self.embeddings_initializer,
                "embedding_dtype": self.embedding_dtype,
                "query": self.query,
                "query_initializer": self.query_initializer,
                "map_scale": self.map_scale,
                "entropy_weight": self.entropy_weight,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttentionBackbone(TextClassifierBackbone):
    """A bidirectional GRU (or LSTM) over the words, attention over its
    states with a learned query.

    The GRU kernels (glorot) expect inputs of unit scale, so the word
    embeddings start unit-variance (`RandomNormal(stddev=1.0)`); the RNNs
    run in `zoo.layers.PackedBidirectional` (Keras' `Bidirectional`, faster
    on masked batches under PyTorch).

    Args:
        vocabulary_size, embedding_dim, dropout, word_dropout, train_window,
        embeddings_initializer, embedding_dtype, dtype: as in
            `MeanPoolingBackbone`; the embeddings start unit-variance by
            default (None).
        rnn_units: units per direction.
        rnn_cell: "gru" or "lstm".
        rnn_skip: pool the word embeddings concatenated with the states.
        query_initializer, entropy_weight: as in
            `AttentionPoolingBackbone`.

    Inputs:
        `(batch, seq)` int word ids, 0 = padding.

    Returns:
        `{"sequence_output": (batch, seq, 2 * rnn_units [+ embedding_dim]),
        "pooled_output": (batch, 2 * rnn_units [+ embedding_dim])}`.

    Example:

    >>> backbone = RecurrentAttentionBackbone(vocabulary_size=20000)
    >>> backbone(np.array([[12, 7, 1, 0]]))["pooled_output"].shape
    (1, 128)
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim=64,
        dropout=0.3,
        word_dropout=0.0,
        train_window=None,
        rnn_units=64,
        rnn_cell="gru",
        rnn_skip=False,
        query_initializer=None,
        entropy_weight=0.0,
        embeddings_initializer=None,
        embedding_dtype=None,
        dtype=None,
        **kwargs,
    ):
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=1.0)
        cells = {"gru": keras.layers.GRU, "lstm": keras.layers.LSTM}
        if rnn_cell not in cells:
            raise ValueError(
                f"rnn_cell must be 'gru' or 'lstm'; got {rnn_cell!r}."
            )
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        x = self._stem(
            token_ids,
            vocabulary_size,
            embedding_dim,
            dropout,
            word_dropout,
            train_window,
            embeddings_initializer,
            embedding_dtype,
            dtype,
        )
        self.rnn = PackedBidirectional(
            cells[rnn_cell](rnn_units, return_sequences=True, dtype=dtype),
            dtype=dtype,
            name="rnn",
        )
        states = self.rnn(x)
        if rnn_skip:
            states = keras.layers.Concatenate(dtype=dtype, name="rnn_skip")(
                [x, states]
            )
        pooled, _ = self._attention_pooling(
            entropy_weight, dtype, query_initializer=query_initializer
        )(states, return_attention_scores=True)
        self._finish(token_ids, states, pooled, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.train_window = train_window
        self.embeddings_initializer = keras.initializers.serialize(
            keras.initializers.get(embeddings_initializer)
        )
        self.embedding_dtype = embedding_dtype
        self.rnn_units = rnn_units
        self.rnn_cell = rnn_cell
        self.rnn_skip = rnn_skip
        self.query_initializer = query_initializer
        self.entropy_weight = entropy_weight

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "dropout": self.dropout,
                "word_dropout": self.word_dropout,
                "train_window": self.train_window,
                "embeddings_initializer": self.embeddings_initializer,
                "embedding_dtype": self.embedding_dtype,
                "rnn_units": self.rnn_units,
                "rnn_cell": self.rnn_cell,
                "rnn_skip": self.rnn_skip,
                "query_initializer": self.query_initializer,
                "entropy_weight": self.entropy_weight,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoderBackbone(TextClassifierBackbone):
    """Token + position embeddings, N post-LN `TransformerEncoder` blocks,
    attention pooling with a learned query.

    Args:
        vocabulary_size, embedding_dim, dropout, word_dropout, train_window,
        embeddings_initializer, embedding_dtype, dtype: as in
            `MeanPoolingBackbone`.
        sequence_length: number of positions (the longest input).
        num_layers, num_heads, intermediate_dim: the encoder blocks.
        positions: "learned" or "sinusoidal".
        norm_first: pre-LN blocks instead of post-LN.
        query_initializer, entropy_weight: as in
            `AttentionPoolingBackbone`.

    Inputs:
        `(batch, seq)` int word ids, 0 = padding, `seq <= sequence_length`.

    Returns:
        `{"sequence_output": (batch, seq, embedding_dim), "pooled_output":
        (batch, embedding_dim)}`.

    Example:

    >>> backbone = TransformerEncoderBackbone(20000, sequence_length=256)
    >>> backbone(np.array([[12, 7, 1, 0]]))["sequence_output"].shape
    (1, 4, 64)
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim=64,
        num_layers=2,
        num_heads=4,
        intermediate_dim=128,
        positions="learned",
        norm_first=False,
        dropout=0.3,
        word_dropout=0.0,
        train_window=None,
        query_initializer=None,
        entropy_weight=0.0,
        embeddings_initializer="uniform",
        embedding_dtype=None,
        dtype=None,
        **kwargs,
    ):
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        x = self._stem(
            token_ids,
            vocabulary_size,
            embedding_dim,
            dropout,
            word_dropout,
            train_window,
            embeddings_initializer,
            embedding_dtype,
            dtype,
            sequence_length=sequence_length,
            positions=positions,
        )
        self.encoder_layers = [
            TransformerEncoder(
                num_heads,
                intermediate_dim,
                dropout=dropout / 3,
                norm_first=norm_first,
                dtype=dtype,
                name=f"encoder_{i}",
            )
            for i in range(num_layers)
        ]
        for block in self.encoder_layers:
            x = block(x)
        pooled, _ = self._attention_pooling(
            entropy_weight, dtype, query_initializer=query_initializer
        )(x, return_attention_scores=True)
        self._finish(token_ids, x, pooled, dtype, **kwargs)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.train_window = train_window
        self.embeddings_initializer = keras.initializers.serialize(
            keras.initializers.get(embeddings_initializer)
        )
        self.embedding_dtype = embedding_dtype
        self.sequence_length = sequence_length
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.positions = positions
        self.norm_first = norm_first
        self.query_initializer = query_initializer
        self.entropy_weight = entropy_weight

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "dropout": self.dropout,
                "word_dropout": self.word_dropout,
                "train_window": self.train_window,
                "embeddings_initializer": self.embeddings_initializer,
                "embedding_dtype": self.embedding_dtype,
                "sequence_length": self.sequence_length,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "positions": self.positions,
                "norm_first": self.norm_first,
                "query_initializer": self.query_initializer,
                "entropy_weight": self.entropy_weight,
            }
        )
        return config


BACKBONES = {
    cls.__name__: cls
    for cls in (
        MeanPoolingBackbone,
        AttentionPoolingBackbone,
        RecurrentAttentionBackbone,
        TransformerEncoderBackbone,
    )
}


def attention_model(backbone):
    """Word ids -> the attention weights `(batch, seq)` of a backbone's
    pooling, or None for a backbone without attention pooling.

    Args:
        backbone: a text classifier backbone (or a task's `.backbone`).

    Returns:
        A `keras.Model`, or None.
    """
    try:
        pooling = backbone.get_layer(POOLING_LAYER_NAME)
    except ValueError:
        return None
    return keras.Model(backbone.inputs, pooling.output[1])
