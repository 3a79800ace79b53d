"""ImageGPT presets: a GPT over quantised pixels, and the schedule
`recipes/imagegpt_digits.py` trains it with.

The preprocessor section sets the image size the model reads and the
number of grey levels of its palette; the backbone's `sequence_length` is
one more than the number of pixels (the start token, then every pixel in
raster order). The palette itself is the data's (k-means on the training
pixels, `kmeans_palette`), or uniform levels when none is given."""

from zoo.models.presets import Presets

PRESETS = Presets(
    "imagegpt",
    {
        "digits": {
            "description": "MNIST digits at 14x14 in 8 grey levels (196 "
            "pixels + a start token), 4 pre-LN layers, 4 heads, 128 wide; "
            "sized for 2 CPU cores",
            "backbone": dict(
                num_layers=4,
                num_heads=4,
                hidden_dim=128,
                sequence_length=14 * 14 + 1,
                dropout=0.0,
            ),
            "tokenizer": {},
            "preprocessor": dict(image_size=(14, 14), num_levels=8),
            "task": {},
            "training": dict(
                epochs=12,
                batch_size=32,
                learning_rate=2e-3,
                min_learning_rate=1e-4,
                warmup_fraction=0.05,
                weight_decay=0.1,
                probe_steps=2000,
            ),
        },
        "smoke": {
            "description": "8x8 images in 4 grey levels, 2 layers, 32 wide: "
            "the same code path in seconds (tests, --smoke)",
            "backbone": dict(
                num_layers=2,
                num_heads=2,
                hidden_dim=32,
                sequence_length=8 * 8 + 1,
                dropout=0.0,
            ),
            "tokenizer": {},
            "preprocessor": dict(image_size=(8, 8), num_levels=4),
            "task": {},
            "training": dict(
                epochs=1,
                batch_size=16,
                learning_rate=3e-3,
                min_learning_rate=3e-4,
                warmup_fraction=0.1,
                weight_decay=0.1,
                probe_steps=200,
            ),
        },
    },
)
