"""Translation presets: the architectures and the schedules
`recipes/translate.py` trains them with."""

from zoo.models.presets import Presets

_TEXT = dict(
    encoder_sequence_length=64,
    decoder_sequence_length=64,
    pad_to_multiple_of=16,
)

PRESETS = Presets(
    "seq2seq",
    {
        "transformer_cpu_small": {
            "description": "Transformer, 3 + 3 post-LN layers, 256 wide, 8 "
            "heads, MLP 512, sinusoidal positions, shared and "
            "tied embeddings; sized for 2 CPU cores",
            "backbone": dict(
                kind="transformer",
                num_layers=3,
                num_heads=8,
                hidden_dim=256,
                intermediate_dim=512,
                dropout=0.1,
            ),
            "preprocessor": dict(_TEXT),
            "tokenizer": dict(vocabulary_size=8000),
            "task": {},
            "training": dict(
                epochs=10,
                batch_size=128,
                learning_rate=5e-4,
                warmup_steps=400,
                schedule="inverse_sqrt",
                label_smoothing=0.1,
                weight_decay=0.0,
            ),
        },
        "transformer_base": {
            "description": "Transformer base: 6 + 6 layers, 512 wide, 8 heads, "
            "MLP 2048 (Vaswani et al.); for a GPU",
            "backbone": dict(
                kind="transformer",
                num_layers=6,
                num_heads=8,
                hidden_dim=512,
                intermediate_dim=2048,
                dropout=0.1,
            ),
            "preprocessor": dict(_TEXT),
            "tokenizer": dict(vocabulary_size=10000),
            "task": {},
            "training": dict(
                epochs=20,
                batch_size=128,
                learning_rate=7e-4,
                warmup_steps=4000,
                schedule="inverse_sqrt",
                label_smoothing=0.1,
                weight_decay=0.0,
            ),
        },
        "rnn_cpu_small": {
            "description": "bidirectional GRU encoder (256 per direction), GRU "
            "decoder (512) with Bahdanau attention; for 2 CPU "
            "cores",
            "backbone": dict(
                kind="rnn",
                embedding_dim=256,
                encoder_units=256,
                decoder_units=512,
                attention="bahdanau",
                attention_units=256,
                dropout=0.3,
            ),
            "preprocessor": dict(_TEXT),
            "tokenizer": dict(vocabulary_size=8000),
            "task": {},
            "training": dict(
                epochs=10,
                batch_size=128,
                learning_rate=1e-3,
                warmup_steps=0,
                schedule="constant",
                label_smoothing=0.1,
                weight_decay=0.0,
            ),
        },
        "rnn_base": {
            "description": "the RNN baseline at Bahdanau's size: 512-unit "
            "GRUs, 256-d embeddings; for a GPU",
            "backbone": dict(
                kind="rnn",
                embedding_dim=256,
                encoder_units=512,
                decoder_units=1024,
                attention="bahdanau",
                attention_units=512,
                dropout=0.3,
            ),
            "preprocessor": dict(_TEXT),
            "tokenizer": dict(vocabulary_size=10000),
            "task": {},
            "training": dict(
                epochs=15,
                batch_size=128,
                learning_rate=1e-3,
                warmup_steps=0,
                schedule="constant",
                label_smoothing=0.1,
                weight_decay=0.0,
            ),
        },
        "smoke": {
            "description": "a tiny Transformer: the same code path in seconds",
            "backbone": dict(
                kind="transformer",
                num_layers=1,
                num_heads=2,
                hidden_dim=32,
                intermediate_dim=64,
                dropout=0.0,
            ),
            "preprocessor": dict(
                encoder_sequence_length=24,
                decoder_sequence_length=24,
                pad_to_multiple_of=8,
            ),
            "tokenizer": dict(vocabulary_size=120),
            "task": {},
            "training": dict(
                epochs=3,
                batch_size=32,
                learning_rate=3e-3,
                warmup_steps=10,
                schedule="inverse_sqrt",
                label_smoothing=0.0,
                weight_decay=0.0,
            ),
        },
        "rnn_smoke": {
            "description": "a tiny RNN + attention: the same code path in seconds",
            "backbone": dict(
                kind="rnn",
                embedding_dim=16,
                encoder_units=16,
                decoder_units=32,
                attention="bahdanau",
                attention_units=16,
                dropout=0.0,
            ),
            "preprocessor": dict(
                encoder_sequence_length=24,
                decoder_sequence_length=24,
                pad_to_multiple_of=8,
            ),
            "tokenizer": dict(vocabulary_size=120),
            "task": {},
            "training": dict(
                epochs=3,
                batch_size=32,
                learning_rate=3e-3,
                warmup_steps=0,
                schedule="constant",
                label_smoothing=0.0,
                weight_decay=0.0,
            ),
        },
    },
)
