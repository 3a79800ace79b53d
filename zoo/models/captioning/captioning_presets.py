"""Image-captioning presets: the image encoder, the decoder, the
preprocessor, the tokenizer and the schedule `recipes/caption_images.py`
trains them with.

The backbone section's `kind` names the decoder ("lstm":
`ShowAttendTellBackbone`, "transformer": `TransformerCaptionBackbone`) and
its `image_encoder` the encoder's spec (`zoo.models.captioning.
image_encoder_from_config`): `efficientnet_lite0` (ImageNet-trained,
frozen: its grid is computed once per image and the decoder trains on the
cached features), `conv_stack` (trained from scratch with the decoder) or
a `keras_applications` model.
"""

from zoo.models.presets import Presets


def _lstm(embedding_dim, hidden_dim, attention_units, dropout):
    return {
        "kind": "lstm",
        "embedding_dim": embedding_dim,
        "hidden_dim": hidden_dim,
        "attention_units": attention_units,
        "dropout": dropout,
        "attention_penalty": 1.0,
    }


def _transformer(num_layers, num_heads, hidden_dim, intermediate_dim, dropout):
    return {
        "kind": "transformer",
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": intermediate_dim,
        "num_encoder_layers": 0,
        "dropout": dropout,
    }


def _training(
    epochs,
    batch_size,
    learning_rate,
    label_smoothing=0.0,
    weight_decay=0.0,
    cache_features=False,
    one_caption_per_image=False,
):
    return {
        "epochs": epochs,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "warmup_fraction": 0.05,
        "label_smoothing": label_smoothing,
        "weight_decay": weight_decay,
        "cache_features": cache_features,
        "one_caption_per_image": one_caption_per_image,
    }


def _conv_stack(image_size, num_channels, filters, convs_per_stage):
    return {
        "kind": "conv_stack",
        "image_size": image_size,
        "num_channels": num_channels,
        "filters": filters,
        "convs_per_stage": convs_per_stage,
        "trainable": True,
    }


def _preset(
    description, image_encoder, backbone, preprocessor, vocabulary, training
):
    return {
        "description": description,
        "backbone": {**backbone, "image_encoder": image_encoder},
        "tokenizer": {"vocabulary_size": vocabulary},
        "preprocessor": preprocessor,
        "task": {},
        "training": training,
    }


_LITE0 = {
    "kind": "efficientnet_lite0",
    "output": "top",
    "image_size": (224, 224),
    "pretrained": True,
    "trainable": False,
}
_PHOTOS = {
    "image_size": (224, 224),
    "num_channels": 3,
    "decoder_sequence_length": 24,
}
_DIGITS = {
    "image_size": (64, 128),
    "num_channels": 1,
    "decoder_sequence_length": 6,
}
_SMOKE = {
    "image_size": (32, 32),
    "num_channels": 3,
    "decoder_sequence_length": 12,
}
_SMOKE_ENCODER = _conv_stack((32, 32), 3, (8, 16), 1)
_SMOKE_DIGITS_ENCODER = _conv_stack((64, 128), 1, (8, 16, 16), 1)
_SMOKE_TRAINING = _training(3, 16, 3e-3)

PRESETS = Presets(
    "captioning",
    {
        "flickr8k_lstm": _preset(
            "Show, Attend and Tell on EfficientNet-Lite0's 7x7x320 grid "
            "(ImageNet-trained, frozen): LSTM 512, embeddings 256, soft "
            "attention 256, doubly stochastic penalty 1; for 2 CPU cores",
            dict(_LITE0),
            _lstm(256, 512, 256, 0.5),
            dict(_PHOTOS),
            2600,
            _training(10, 64, 1e-3, cache_features=True),
        ),
        "flickr8k_transformer": _preset(
            "a 2-block pre-LN Transformer decoder (256 wide, 8 heads) over "
            "EfficientNet-Lite0's 7x7x320 grid (frozen); for 2 CPU cores",
            dict(_LITE0),
            _transformer(2, 8, 256, 1024, 0.3),
            dict(_PHOTOS),
            2600,
            _training(
                12,
                64,
                5e-4,
                label_smoothing=0.1,
                weight_decay=0.01,
                cache_features=True,
            ),
        ),
        "flickr8k_lstm_scratch": _preset(
            "the Show, Attend and Tell decoder over a 4-stage convolutional "
            "stack on 128x128 photos (8x8 grid) trained from scratch with it (no "
            "pretraining: the baseline); for 2 CPU cores",
            _conv_stack((128, 128), 3, (32, 64, 128, 256), 1),
            _lstm(256, 512, 256, 0.5),
            {**_PHOTOS, "image_size": (128, 128)},
            2600,
            _training(15, 32, 1e-3, one_caption_per_image=True),
        ),
        "flickr8k_lstm_large": _preset(
            "Show, Attend and Tell on EfficientNet-Lite0's 7x7x1280 head grid: "
            "LSTM 1024, embeddings 512, attention 512; for a GPU",
            {**_LITE0, "output": "head"},
            _lstm(512, 1024, 512, 0.5),
            dict(_PHOTOS),
            2600,
            _training(30, 64, 1e-3, cache_features=True),
        ),
        "digits_lstm": _preset(
            "digit scenes (64x128 grey canvases of 2-4 MNIST digits): a 3-stage "
            "convolutional stack (8x16 grid) trained from scratch and the Show, "
            "Attend and Tell decoder; for 2 CPU cores",
            _conv_stack((64, 128), 1, (16, 32, 64), 2),
            _lstm(64, 256, 128, 0.2),
            dict(_DIGITS),
            14,
            _training(12, 64, 2e-3),
        ),
        "digits_transformer": _preset(
            "digit scenes: the same convolutional stack and a 2-block "
            "Transformer decoder (128 wide); for 2 CPU cores",
            _conv_stack((64, 128), 1, (16, 32, 64), 2),
            _transformer(2, 4, 128, 256, 0.1),
            dict(_DIGITS),
            14,
            _training(12, 64, 1e-3, weight_decay=0.01),
        ),
        "smoke": _preset(
            "a tiny attention LSTM over a 2-stage convolutional stack on 32x32 "
            "images: the same code path in seconds",
            dict(_SMOKE_ENCODER),
            _lstm(16, 32, 16, 0.0),
            dict(_SMOKE),
            60,
            dict(_SMOKE_TRAINING),
        ),
        "transformer_smoke": _preset(
            "a tiny Transformer decoder over a 2-stage convolutional stack on "
            "32x32 images: the same code path in seconds",
            dict(_SMOKE_ENCODER),
            _transformer(1, 2, 16, 32, 0.0),
            dict(_SMOKE),
            60,
            dict(_SMOKE_TRAINING),
        ),
        "digits_smoke": _preset(
            "digit scenes, a tiny attention LSTM over a 3-stage convolutional "
            "stack: the same code path in seconds",
            dict(_SMOKE_DIGITS_ENCODER),
            _lstm(16, 32, 16, 0.0),
            dict(_DIGITS),
            14,
            dict(_SMOKE_TRAINING),
        ),
        "digits_transformer_smoke": _preset(
            "digit scenes, a tiny Transformer decoder over a 3-stage "
            "convolutional stack: the same code path in seconds",
            dict(_SMOKE_DIGITS_ENCODER),
            _transformer(1, 2, 16, 32, 0.0),
            dict(_DIGITS),
            14,
            dict(_SMOKE_TRAINING),
        ),
    },
)
