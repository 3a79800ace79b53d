"""Image-captioning presets: the image encoder, the decoder, the
preprocessor, the tokenizer and the schedule `recipes/caption_images.py`
trains them with.

`image_encoder` names the encoder (`zoo.models.captioning.image_encoders.
image_encoder_from_config`): `efficientnet_lite0` (ImageNet-trained,
frozen: its grid is computed once per image and the decoder trains on the
cached features), `conv_stack` (trained from scratch with the decoder) or
a `keras_applications` model.
"""

from zoo.models.presets import Presets

_FLICKR_TEXT = {"decoder_sequence_length": 24}
_FLICKR_TOKENIZER = {"vocabulary_size": 2600}
_LITE0 = {"kind": "efficientnet_lite0", "output": "top",
          "image_size": (224, 224), "pretrained": True, "trainable": False}
_DIGITS_ENCODER = {"kind": "conv_stack", "image_size": (64, 128),
                   "num_channels": 1, "filters": (32, 64, 128),
                   "convs_per_stage": 2, "trainable": True}
_DIGITS_PRE = {"image_size": (64, 128), "num_channels": 1,
               "decoder_sequence_length": 6}

PRESETS = Presets("captioning", {
    "flickr8k_lstm": {
        "description": "Show, Attend and Tell on EfficientNet-Lite0's 7x7x320 "
                       "grid (ImageNet-trained, frozen): LSTM 512, "
                       "embeddings 256, soft attention 256, doubly "
                       "stochastic penalty 1; for 2 CPU cores",
        "image_encoder": dict(_LITE0),
        "backbone": {"kind": "lstm", "embedding_dim": 256, "hidden_dim": 512,
                     "attention_units": 256, "dropout": 0.5,
                     "attention_penalty": 1.0},
        "preprocessor": {"image_size": (224, 224), "num_channels": 3,
                         **_FLICKR_TEXT},
        "tokenizer": dict(_FLICKR_TOKENIZER),
        "training": {"epochs": 10, "batch_size": 64, "learning_rate": 1e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": True, "one_caption_per_image": False},
    },
    "flickr8k_transformer": {
        "description": "a 2-block pre-LN Transformer decoder (256 wide, 8 "
                       "heads) over EfficientNet-Lite0's 7x7x320 grid "
                       "(frozen); for 2 CPU cores",
        "image_encoder": dict(_LITE0),
        "backbone": {"kind": "transformer", "num_layers": 2, "num_heads": 8,
                     "hidden_dim": 256, "intermediate_dim": 1024,
                     "num_encoder_layers": 0, "dropout": 0.3},
        "preprocessor": {"image_size": (224, 224), "num_channels": 3,
                         **_FLICKR_TEXT},
        "tokenizer": dict(_FLICKR_TOKENIZER),
        "training": {"epochs": 20, "batch_size": 64, "learning_rate": 5e-4,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.1, "weight_decay": 0.01,
                     "cache_features": True, "one_caption_per_image": False},
    },
    "flickr8k_lstm_scratch": {
        "description": "the Show, Attend and Tell decoder over a small "
                       "convolutional stack trained from scratch with it "
                       "(no pretraining: the baseline); for 2 CPU cores",
        "image_encoder": {"kind": "conv_stack", "image_size": (224, 224),
                          "num_channels": 3,
                          "filters": (32, 64, 128, 256, 256),
                          "convs_per_stage": 1, "trainable": True},
        "backbone": {"kind": "lstm", "embedding_dim": 256, "hidden_dim": 512,
                     "attention_units": 256, "dropout": 0.5,
                     "attention_penalty": 1.0},
        "preprocessor": {"image_size": (224, 224), "num_channels": 3,
                         **_FLICKR_TEXT},
        "tokenizer": dict(_FLICKR_TOKENIZER),
        "training": {"epochs": 15, "batch_size": 32, "learning_rate": 1e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": False, "one_caption_per_image": True},
    },
    "flickr8k_lstm_large": {
        "description": "Show, Attend and Tell on EfficientNet-Lite0's "
                       "7x7x1280 head grid: LSTM 1024, embeddings 512, "
                       "attention 512; for a GPU",
        "image_encoder": {**_LITE0, "output": "head"},
        "backbone": {"kind": "lstm", "embedding_dim": 512,
                     "hidden_dim": 1024, "attention_units": 512,
                     "dropout": 0.5, "attention_penalty": 1.0},
        "preprocessor": {"image_size": (224, 224), "num_channels": 3,
                         **_FLICKR_TEXT},
        "tokenizer": dict(_FLICKR_TOKENIZER),
        "training": {"epochs": 30, "batch_size": 64, "learning_rate": 1e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": True, "one_caption_per_image": False},
    },
    "digits_lstm": {
        "description": "digit scenes (64x128 grey canvases of 2-4 MNIST "
                       "digits): a 3-stage convolutional stack (8x16 grid) "
                       "trained from scratch and the Show, Attend and Tell "
                       "decoder; for 2 CPU cores",
        "image_encoder": dict(_DIGITS_ENCODER),
        "backbone": {"kind": "lstm", "embedding_dim": 64, "hidden_dim": 256,
                     "attention_units": 128, "dropout": 0.2,
                     "attention_penalty": 1.0},
        "preprocessor": dict(_DIGITS_PRE),
        "tokenizer": {"vocabulary_size": 14},
        "training": {"epochs": 12, "batch_size": 64, "learning_rate": 2e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": False, "one_caption_per_image": False},
    },
    "digits_transformer": {
        "description": "digit scenes: the same convolutional stack and a "
                       "2-block Transformer decoder (128 wide); for 2 CPU "
                       "cores",
        "image_encoder": dict(_DIGITS_ENCODER),
        "backbone": {"kind": "transformer", "num_layers": 2, "num_heads": 4,
                     "hidden_dim": 128, "intermediate_dim": 256,
                     "num_encoder_layers": 0, "dropout": 0.1},
        "preprocessor": dict(_DIGITS_PRE),
        "tokenizer": {"vocabulary_size": 14},
        "training": {"epochs": 12, "batch_size": 64, "learning_rate": 1e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.01,
                     "cache_features": False, "one_caption_per_image": False},
    },
    "smoke": {
        "description": "a tiny attention LSTM over a 2-stage convolutional "
                       "stack on 32x32 images: the same code path in seconds",
        "image_encoder": {"kind": "conv_stack", "image_size": (32, 32),
                          "num_channels": 3, "filters": (8, 16),
                          "convs_per_stage": 1, "trainable": True},
        "backbone": {"kind": "lstm", "embedding_dim": 16, "hidden_dim": 32,
                     "attention_units": 16, "dropout": 0.0,
                     "attention_penalty": 1.0},
        "preprocessor": {"image_size": (32, 32), "num_channels": 3,
                         "decoder_sequence_length": 12},
        "tokenizer": {"vocabulary_size": 60},
        "training": {"epochs": 3, "batch_size": 16, "learning_rate": 3e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": False, "one_caption_per_image": False},
    },
    "transformer_smoke": {
        "description": "a tiny Transformer decoder over a 2-stage "
                       "convolutional stack on 32x32 images: the same code "
                       "path in seconds",
        "image_encoder": {"kind": "conv_stack", "image_size": (32, 32),
                          "num_channels": 3, "filters": (8, 16),
                          "convs_per_stage": 1, "trainable": True},
        "backbone": {"kind": "transformer", "num_layers": 1, "num_heads": 2,
                     "hidden_dim": 16, "intermediate_dim": 32,
                     "num_encoder_layers": 0, "dropout": 0.0},
        "preprocessor": {"image_size": (32, 32), "num_channels": 3,
                         "decoder_sequence_length": 12},
        "tokenizer": {"vocabulary_size": 60},
        "training": {"epochs": 3, "batch_size": 16, "learning_rate": 3e-3,
                     "warmup_fraction": 0.05,
                     "label_smoothing": 0.0, "weight_decay": 0.0,
                     "cache_features": False, "one_caption_per_image": False},
    },
    "digits_smoke": {
        "description": "digit scenes, a tiny attention LSTM over a 3-stage "
                       "convolutional stack: the same code path in seconds",
        "image_encoder": {**_DIGITS_ENCODER, "filters": (8, 16, 16),
                          "convs_per_stage": 1},
        "backbone": {"kind": "lstm", "embedding_dim": 16, "hidden_dim": 32,
                     "attention_units": 16, "dropout": 0.0,
                     "attention_penalty": 1.0},
        "preprocessor": dict(_DIGITS_PRE),
        "tokenizer": {"vocabulary_size": 14},
        "training": {"epochs": 3, "batch_size": 16, "learning_rate": 3e-3,
                     "warmup_fraction": 0.05, "label_smoothing": 0.0,
                     "weight_decay": 0.0, "cache_features": False,
                     "one_caption_per_image": False},
    },
    "digits_transformer_smoke": {
        "description": "digit scenes, a tiny Transformer decoder over a "
                       "3-stage convolutional stack: the same code path in "
                       "seconds",
        "image_encoder": {**_DIGITS_ENCODER, "filters": (8, 16, 16),
                          "convs_per_stage": 1},
        "backbone": {"kind": "transformer", "num_layers": 1, "num_heads": 2,
                     "hidden_dim": 16, "intermediate_dim": 32,
                     "num_encoder_layers": 0, "dropout": 0.0},
        "preprocessor": dict(_DIGITS_PRE),
        "tokenizer": {"vocabulary_size": 14},
        "training": {"epochs": 3, "batch_size": 16, "learning_rate": 3e-3,
                     "warmup_fraction": 0.05, "label_smoothing": 0.0,
                     "weight_decay": 0.0, "cache_features": False,
                     "one_caption_per_image": False},
    },
})
