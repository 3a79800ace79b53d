"""Vision Transformer presets: architectures and the schedules
`recipes/vit_images.py` trains them with (`translate`: the random
translation of the training images, a share of their size; `rotate`: their
random rotation, a share of a full turn; `zoom`: their random zoom in or
out, a share of their size). The preprocessor reads the backbone's image
size and channels; the task's `num_classes` is the data's."""

from zoo.models.presets import Presets


def _with_sequence_pooling(preset, description, **backbone):
    """`preset` with CCT's sequence pooling instead of the class token (and
    any other `backbone` arguments changed)."""
    return {
        **preset,
        "description": description,
        "backbone": {**preset["backbone"], "pooling": "sequence", **backbone},
    }


MNIST_CONV_STEM = {
    "description": "the mnist preset's transformer on a convolutional "
    "stem (3x3 stride-2 convolutions 32, 64, then 1x1 to 128: "
    "7x7 tokens + class token), trained with rotations and zoom",
    "backbone": dict(
        image_size=(28, 28),
        num_channels=1,
        patch_size=4,
        stem_filters=(32, 64),
        num_layers=6,
        num_heads=4,
        hidden_dim=128,
        intermediate_dim=256,
        dropout=0.0,
        drop_path_rate=0.1,
        pooling="class_token",
    ),
    "tokenizer": {},
    "preprocessor": {},
    "task": {},
    "training": dict(
        epochs=40,
        batch_size=128,
        learning_rate=1e-3,
        weight_decay=0.05,
        warmup_fraction=0.05,
        label_smoothing=0.1,
        translate=0.1,
        rotate=0.03,
        zoom=0.1,
    ),
}

PRESETS = Presets(
    "vit",
    {
        "mnist": {
            "description": "28x28 grey images in 4x4 patches (49 + 1 tokens), "
            "6 pre-LN layers, 4 heads, 128 wide, MLP 256; sized "
            "for 2 CPU cores",
            "backbone": dict(
                image_size=(28, 28),
                num_channels=1,
                patch_size=4,
                num_layers=6,
                num_heads=4,
                hidden_dim=128,
                intermediate_dim=256,
                dropout=0.1,
                pooling="class_token",
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                epochs=30,
                batch_size=128,
                learning_rate=1e-3,
                weight_decay=0.05,
                warmup_fraction=0.1,
                label_smoothing=0.1,
                translate=0.1,
                rotate=0.0,
                zoom=0.0,
            ),
        },
        "mnist_conv_stem": MNIST_CONV_STEM,
        "mnist_seqpool": _with_sequence_pooling(
            MNIST_CONV_STEM,
            "mnist_conv_stem with sequence pooling instead of a class token "
            "(Compact Convolutional Transformers' SeqPool: a learned softmax "
            "over the 7x7 tokens)",
        ),
        "mnist_cct": _with_sequence_pooling(
            MNIST_CONV_STEM,
            "mnist_seqpool on a stem after Compact Convolutional "
            "Transformers' tokenizer: 3x3 stride-1 convolutions 32, 64 "
            "(BatchNorm, ReLU), each followed by a 3x3 stride-2 max pool, "
            "then 1x1 to 128 (the same 7x7 tokens)",
            stem_downsample="max_pool",
        ),
        "cifar": {
            "description": "32x32 colour images in 4x4 patches (64 + 1 tokens), "
            "7 pre-LN layers, 12 heads, 384 wide, MLP 384 "
            "(omihub777/ViT-CIFAR's size); for a GPU",
            "backbone": dict(
                image_size=(32, 32),
                num_channels=3,
                patch_size=4,
                num_layers=7,
                num_heads=12,
                hidden_dim=384,
                intermediate_dim=384,
                dropout=0.0,
                drop_path_rate=0.1,
                pooling="class_token",
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                epochs=200,
                batch_size=128,
                learning_rate=1e-3,
                weight_decay=0.05,
                warmup_fraction=0.025,
                label_smoothing=0.1,
                translate=0.125,
                rotate=0.0,
                zoom=0.0,
            ),
        },
        "smoke": {
            "description": "2 layers, 32 wide, 8x8 images: the same code path "
            "in seconds",
            "backbone": dict(
                image_size=(8, 8),
                num_channels=1,
                patch_size=4,
                num_layers=2,
                num_heads=2,
                hidden_dim=32,
                intermediate_dim=64,
                dropout=0.0,
                pooling="class_token",
            ),
            "tokenizer": {},
            "preprocessor": {},
            "task": {},
            "training": dict(
                epochs=3,
                batch_size=32,
                learning_rate=3e-3,
                weight_decay=0.0,
                warmup_fraction=0.1,
                label_smoothing=0.0,
                translate=0.0,
                rotate=0.0,
                zoom=0.0,
            ),
        },
    },
)
