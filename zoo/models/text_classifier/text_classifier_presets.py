"""Text classifier presets: the IMDB lab's models, each with its backbone,
preprocessor, head and the settings `recipes/imdb_attention.py` trains it
with (`TextClassifier.from_preset`, `TextClassifierPreprocessor.from_preset`,
`TextClassifierBackbone.from_preset`). The backbone section's `"class"`
names the backbone; the preprocessor is its own tokenizer (it adapts a
vocabulary of `max_tokens` words), so the tokenizer section is empty."""

from zoo.models.presets import Presets

_WORDS = dict(max_tokens=20000, sequence_length=512)
_BIGRAMS = dict(max_tokens=100000, sequence_length=512, ngrams=2)
_FIT = dict(epochs=20, patience=2, batch_size=64, learning_rate=1e-3)


def _preset(description, backbone, preprocessor=_WORDS, **fit):
    return {
        "description": description,
        "backbone": backbone,
        "tokenizer": {},
        "preprocessor": dict(preprocessor),
        "task": dict(dropout=0.3),
        "training": {**_FIT, **fit},
    }


_MEAN = dict(**{"class": "MeanPoolingBackbone"}, embedding_dim=64, dropout=0.3)
_ATTENTION = dict(
    **{"class": "AttentionPoolingBackbone"},
    embedding_dim=64,
    dropout=0.3,
    query="learned",
)
_QUERY = dict(_ATTENTION, query="computed", map_scale=0.03)

PRESETS = Presets(
    "text classifier",
    {
        "imdb_mean": _preset(
            "mean of the word embeddings, 512 words: the baseline", _MEAN
        ),
        "imdb_attention": _preset(
            "attention pooling with a learned query, 512 words", _ATTENTION
        ),
        "imdb_query": _preset(
            "attention pooling with a query computed from the text, 512 words",
            _QUERY,
        ),
        "imdb_rnn": _preset(
            "bidirectional GRU + attention; trains on random 128-word windows, "
            "reads 512 words",
            dict(
                **{"class": "RecurrentAttentionBackbone"},
                embedding_dim=64,
                dropout=0.3,
                rnn_units=64,
                rnn_cell="gru",
                train_window=128,
            ),
            epochs=25,
            patience=3,
        ),
        "imdb_transformer": _preset(
            "token + position embeddings, 2 post-LN encoder blocks, attention "
            "pooling; 256 words",
            dict(
                **{"class": "TransformerEncoderBackbone"},
                embedding_dim=64,
                dropout=0.3,
                num_layers=2,
                num_heads=4,
                intermediate_dim=128,
            ),
            dict(max_tokens=20000, sequence_length=256),
            epochs=5,
        ),
        "imdb_attention_bigrams": _preset(
            "attention pooling over words and bigrams (100k tokens)",
            _ATTENTION,
            _BIGRAMS,
        ),
        "imdb_query_bigrams": _preset(
            "computed-query attention over words and bigrams (100k tokens)",
            _QUERY,
            _BIGRAMS,
        ),
    },
)
