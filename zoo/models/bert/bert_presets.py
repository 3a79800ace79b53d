"""BERT presets: architectures, preprocessing and the schedules
`recipes/bert_imdb.py` pretrains and fine-tunes them with.

BERT has two tasks and trains in two phases, so its `preprocessor` and
`task` sections hold one dict per task (`"masked_lm"`: the pretraining
length; `"classifier"`: the fine-tuning length and the head's dropout) and
its `training` section one per phase (`"pretraining"`, `"finetuning"`)."""

from zoo.models.presets import Presets

PRESETS = Presets(
    "bert",
    {
        "cpu_mini": {
            "description": "4 layers, 4 heads, 128 wide, MLP 512, 256 "
            "positions (between BERT-tiny and BERT-mini); its "
            "pretraining schedule (18,000 steps of 128 x 256 "
            "tokens) takes minutes on a GPU, hours on 2 CPU "
            "cores",
            "backbone": dict(
                num_layers=4,
                num_heads=4,
                hidden_dim=128,
                intermediate_dim=512,
                max_sequence_length=256,
                dropout=0.1,
            ),
            "tokenizer": dict(vocabulary_size=8000),
            "preprocessor": {
                "masked_lm": dict(sequence_length=256),
                "classifier": dict(sequence_length=256),
            },
            "task": {"masked_lm": {}, "classifier": dict(dropout=0.1)},
            # Fewer steps stay on the masked-LM plateau (frequent tokens, no
            # context; docs/log/bert.md has the runs).
            "training": {
                "pretraining": dict(
                    epochs=18,
                    steps_per_epoch=1000,
                    batch_size=128,
                    learning_rate=1e-3,
                    warmup_fraction=0.06,
                    weight_decay=0.01,
                ),
                "finetuning": dict(
                    epochs=3,
                    batch_size=32,
                    learning_rate=1e-4,
                    warmup_fraction=0.1,
                    weight_decay=0.01,
                ),
            },
        },
        "small": {
            "description": "BERT-small: 4 layers, 8 heads, 512 wide, MLP 2048, "
            "512 positions; for a GPU",
            "backbone": dict(
                num_layers=4,
                num_heads=8,
                hidden_dim=512,
                intermediate_dim=2048,
                max_sequence_length=512,
                dropout=0.1,
            ),
            "tokenizer": dict(vocabulary_size=16000),
            "preprocessor": {
                "masked_lm": dict(sequence_length=256),
                "classifier": dict(sequence_length=512),
            },
            "task": {"masked_lm": {}, "classifier": dict(dropout=0.1)},
            "training": {
                "pretraining": dict(
                    epochs=20,
                    steps_per_epoch=1000,
                    batch_size=128,
                    learning_rate=5e-4,
                    warmup_fraction=0.06,
                    weight_decay=0.01,
                ),
                "finetuning": dict(
                    epochs=3,
                    batch_size=32,
                    learning_rate=5e-5,
                    warmup_fraction=0.1,
                    weight_decay=0.01,
                ),
            },
        },
        "smoke": {
            "description": "2 layers, 32 wide: the same code path in seconds "
            "(tests, --smoke)",
            "backbone": dict(
                num_layers=2,
                num_heads=2,
                hidden_dim=32,
                intermediate_dim=64,
                max_sequence_length=64,
                dropout=0.0,
            ),
            "tokenizer": dict(vocabulary_size=200),
            "preprocessor": {
                "masked_lm": dict(sequence_length=32),
                "classifier": dict(sequence_length=64),
            },
            "task": {"masked_lm": {}, "classifier": dict(dropout=0.0)},
            "training": {
                "pretraining": dict(
                    epochs=2,
                    steps_per_epoch=None,
                    batch_size=16,
                    learning_rate=2e-3,
                    warmup_fraction=0.1,
                    weight_decay=0.01,
                ),
                "finetuning": dict(
                    epochs=2,
                    batch_size=16,
                    learning_rate=1e-3,
                    warmup_fraction=0.1,
                    weight_decay=0.01,
                ),
            },
        },
    },
)
