"""GPT presets: architectures and the schedules `recipes/gpt_text.py` trains
them with (`GPTBackbone.from_preset`, `GPT.from_preset`). The tokenizer is
the recipe's `--tokenizer` (characters by default), the preprocessor packs
to the backbone's `sequence_length`: both sections are empty."""

from zoo.models.presets import Presets

PRESETS = Presets(
    "gpt",
    {
        "cpu_small": {
            "description": "4 layers, 4 heads, 128 wide, context 128 (0.82M "
            "parameters on 65 characters); sized for 2 CPU cores",
            "backbone": dict(
                num_layers=4,
                num_heads=4,
                hidden_dim=128,
                sequence_length=128,
                dropout=0.0,
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                batch_size=32,
                steps=2200,
                eval_interval=200,
                learning_rate=2e-3,
                min_learning_rate=2e-4,
                warmup_steps=100,
                weight_decay=0.1,
            ),
        },
        "nanogpt": {
            "description": "nanoGPT's config/train_shakespeare_char.py: 6 "
            "layers, 6 heads, 384 wide, context 256 (10.65M "
            "parameters); for a GPU",
            "backbone": dict(
                num_layers=6,
                num_heads=6,
                hidden_dim=384,
                sequence_length=256,
                dropout=0.2,
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                batch_size=64,
                steps=5000,
                eval_interval=250,
                learning_rate=1e-3,
                min_learning_rate=1e-4,
                warmup_steps=100,
                weight_decay=0.1,
            ),
        },
        "gpt2": {
            "description": "GPT-2 small's shape (nanoGPT's "
            "config/train_gpt2.py): 12 layers, 12 heads, 768 "
            "wide, context 1024 (124.4M parameters at GPT-2's "
            "50,257 tokens); the size nanoGPT's model FLOPs "
            "utilisation is quoted at; for a GPU",
            "backbone": dict(
                num_layers=12,
                num_heads=12,
                hidden_dim=768,
                sequence_length=1024,
                dropout=0.0,
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                batch_size=16,
                steps=5000,
                eval_interval=250,
                learning_rate=6e-4,
                min_learning_rate=6e-5,
                warmup_steps=200,
                weight_decay=0.1,
            ),
        },
        "smoke": {
            "description": "2 layers, 32 wide, context 32: the same code path "
            "in seconds (tests, --smoke)",
            "backbone": dict(
                num_layers=2,
                num_heads=2,
                hidden_dim=32,
                sequence_length=32,
                dropout=0.0,
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                batch_size=16,
                steps=30,
                eval_interval=15,
                learning_rate=3e-3,
                min_learning_rate=3e-4,
                warmup_steps=5,
                weight_decay=0.1,
            ),
        },
    },
)
