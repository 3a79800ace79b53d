"""Train a Vision Transformer on images and show what it attends to.

    KERAS_BACKEND=jax python recipes/vit_images.py --data ../shared/data/mnist_10k.npz
    python recipes/vit_images.py --dataset cifar10                 # downloads; for a GPU
    python recipes/vit_images.py --smoke                           # 30-second check, offline

`--dataset` (mnist, fashion_mnist, cifar10, cifar100) is downloaded with
`keras.datasets`; `--data PATH.npz` reads a local copy with arrays `x`
(uint8 images) and `y` (labels), and `x_test`, `y_test` when it has them.
A seeded, class-stratified `--validation-fraction` of the training images
is held out. The preset is `mnist` for the grey datasets and `cifar` for
the colour ones; flags override it.

Training: random translations (and horizontal flips for CIFAR) with Keras
preprocessing layers in `tf.data`, AdamW with warm-up and cosine decay,
label smoothing; `--mixed-precision bfloat16|float16` for accelerators.
Writes to `--output-dir`: `metrics.json`, `training_curves.png`,
`rollout.png` (validation images with the attention rollout of the class
token over their patches) and `positions.png` (the cosine similarity of the
learned position embeddings, the ViT paper's figure 7), and
`vit_<dataset>.keras`; `--ship` also writes it to `saved_models/` (float16
weights). A saved model takes raw uint8 images under any backend:

    import zoo
    model = zoo.saving.load_model("saved_models/vit_mnist.keras")
    model.predict(uint8_images)          # (N, 28, 28) -> (N, 10) probabilities
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
    AverageLastEpochs,
    Throughput,
    finish_run,
    resume_callbacks,
    resumed_history,
)
from zoo.cli import (
    HelpFormatter,
    add_accelerator_flags,
    add_average_epochs_flag,
    add_preset_flags,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.download import DataNotFoundError
from zoo.data.images import (
    DATASETS,
    load_images,
    load_npz,
    make_synthetic_images,
    split_validation,
)
from zoo.data.text import without_autotune
from zoo.distribute import trim_to_replicas
from zoo.models.vit import (
    PRESETS,
    ViTImageClassifier,
)
from zoo.saving import (
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)
from zoo.schedules import warmup_cosine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PICTURE_IMAGES = 16


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Vision Transformer on MNIST / CIFAR (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--dataset", choices=DATASETS, default="mnist")
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH.npz",
        help="a local copy: arrays x, y [, x_test, y_test]",
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS.names(),
        default=None,
        help="default: mnist for grey datasets, cifar for "
        "colour ones, smoke with --smoke",
    )
    parser.add_argument("--validation-fraction", type=rate, default=0.1)
    add_preset_flags(
        parser,
        (
            ("epochs", positive_int, "training epochs"),
            ("batch-size", positive_int, "images per step"),
            ("learning-rate", positive_float, "peak of warm-up + cosine"),
            ("weight-decay", float, "AdamW weight decay"),
            ("warmup-fraction", rate, "share of the steps warming up"),
            ("label-smoothing", rate, "label smoothing"),
            (
                "translate",
                rate,
                "random translation, share of the size "
                "(0: none; CIFAR images are also flipped)",
            ),
            ("rotate", rate, "random rotation, share of a full turn (0: none)"),
            (
                "zoom",
                rate,
                "random zoom in or out, share of the size (0: none)",
            ),
            ("dropout", rate, "dropout in the backbone"),
            (
                "drop-path-rate",
                rate,
                "stochastic depth of the last block (linear from 0 in the first)",
            ),
        ),
    )
    add_average_epochs_flag(parser)
    add_accelerator_flags(parser)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/vit/<dataset>/"
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also write saved_models/vit_<dataset>.keras",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="generated images and the smoke preset: the "
        "same code path in seconds, offline",
    )
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    args = parser.parse_args(argv)
    if args.preset is None:
        args.preset = (
            "smoke"
            if args.smoke
            else ("cifar" if args.dataset.startswith("cifar") else "mnist")
        )
    for key, value in PRESETS.part(args.preset, "training").items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("dropout", "drop_path_rate"):
        if getattr(args, key) is None:
            setattr(
                args, key, PRESETS.part(args.preset, "backbone").get(key, 0.0)
            )
    if args.output_dir is None:
        args.output_dir = os.path.join(ROOT, "runs", "vit", args.dataset)
    if args.validation_fraction == 0:
        parser.error(
            "argument --validation-fraction: must be above 0 (the "
            "recipe measures accuracy on held-out images)"
        )
    return args


def check_channels(images, args):
    """A clear error when the images' channels are not the preset's (a
    colour --data file with the grey default preset, say)."""
    channels = 1 if images.ndim == 3 else images.shape[-1]
    wanted = PRESETS.part(args.preset, "backbone")["num_channels"]
    if channels != wanted:
        raise SystemExit(
            f"error: the images have {channels} channel(s) but the "
            f"{args.preset!r} preset reads {wanted}: pass --preset "
            f"{'cifar' if channels == 3 else 'mnist'} (or --dataset naming "
            "the data)."
        )


def load_data(args):
    if args.smoke and args.data is None:
        x, y = make_synthetic_images(320, size=8, seed=args.seed)
        splits = {"train": (x, y)}
    elif args.data is not None:
        splits = load_npz(args.data)
    else:
        splits = load_images(args.dataset)
    splits["train"], splits["validation"] = split_validation(
        *splits["train"], args.validation_fraction, args.seed
    )
    return splits


def augmentation(args):
    """Keras preprocessing layers for the training images (in tf.data)."""
    layers = []
    if args.translate > 0:
        layers.append(
            keras.layers.RandomTranslation(
                args.translate,
                args.translate,
                fill_mode="constant",
                seed=args.seed,
            )
        )
    if args.rotate > 0:
        layers.append(
            keras.layers.RandomRotation(
                args.rotate, fill_mode="constant", seed=args.seed
            )
        )
    if args.zoom > 0:
        layers.append(
            keras.layers.RandomZoom(
                args.zoom, fill_mode="constant", seed=args.seed
            )
        )
    if args.dataset.startswith("cifar") and not args.smoke:
        layers.append(keras.layers.RandomFlip("horizontal", seed=args.seed))
    return layers


def train_dataset(x, y, args):
    import tensorflow as tf

    layers = augmentation(args)
    images = x if x.ndim == 4 else x[..., None]

    def augment(batch, labels):
        batch = tf.cast(batch, "float32")  # [0, 255]: the model scales
        for layer in layers:
            batch = layer(batch, training=True)
        return batch, labels

    dataset = tf.data.Dataset.from_tensor_slices((images, y))
    dataset = dataset.shuffle(
        len(y), seed=args.seed, reshuffle_each_iteration=True
    )
    dataset = dataset.batch(args.batch_size).map(augment)
    return without_autotune(dataset)


def build(args, num_classes, steps):
    classifier = ViTImageClassifier.from_preset(
        args.preset,
        num_classes=num_classes,
        backbone_dropout=args.dropout,
        backbone_drop_path_rate=args.drop_path_rate,
        name="vit_classifier",
    )
    classifier.compile(
        optimizer=keras.optimizers.AdamW(
            warmup_cosine(
                args.learning_rate, steps, args.warmup_fraction, alpha=0.01
            ),
            weight_decay=args.weight_decay,
            global_clipnorm=1.0,
        ),
        label_smoothing=args.label_smoothing,
    )
    return classifier


def run(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    splits = load_data(args)
    for name in list(splits):
        splits[name], dropped = trim_to_replicas(splits[name], strategy)
        if dropped:
            print(
                f"{name}: {dropped} images left out so that every batch "
                f"splits evenly over {strategy.num_replicas_in_sync} "
                f"devices"
            )
    x_train, y_train = splits["train"]
    x_val, y_val = splits["validation"]
    check_channels(x_train, args)
    num_classes = int(max(y_train.max(), y_val.max())) + 1
    print(
        f"{args.dataset if not args.smoke else 'generated'}: train "
        f"{len(y_train)}, validation {len(y_val)}"
        + (f", test {len(splits['test'][1])}" if "test" in splits else "")
        + f" | {num_classes} classes | backend {keras.backend.backend()}"
    )
    steps = args.epochs * -(-len(y_train) // args.batch_size)
    with strategy.scope():
        classifier = build(args, num_classes, steps)
    print(
        f"ViT ({args.preset}): {classifier.count_params() / 1e6:.2f}M "
        f"parameters, {classifier.backbone.grid_size[0]} x "
        f"{classifier.backbone.grid_size[1]} patches"
    )
    speed = Throughput(args.batch_size, unit="images")
    average = AverageLastEpochs(args.output_dir, args.average_epochs)
    start = time.perf_counter()
    # An interrupted run, even a killed one, resumes from its last finished
    # epoch when started again (weights, optimizer, schedule; its curves
    # kept); the backup stays until the run's files are written.
    this_run = classifier.fit(
        train_dataset(x_train, y_train, args),
        validation_data=(x_val, y_val),
        epochs=args.epochs,
        callbacks=[speed, average, *resume_callbacks(args.output_dir)],
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    if len(average.averaged) > 1:
        print(f"averaged the weights of epochs {average.averaged}")
    history, resumed_at_epoch = resumed_history(args.output_dir, this_run)
    _, accuracy = classifier.evaluate(x_val, y_val, verbose=0)
    metrics = {
        "dataset": args.dataset,
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "parameters": int(classifier.count_params()),
        "train_images": int(len(y_train)),
        "validation_images": int(len(y_val)),
        "epochs": args.epochs,
        "train_seconds": round(seconds, 1),
        "resumed_at_epoch": resumed_at_epoch,
        "throughput": speed.summary(),
        "validation_accuracy": round(float(accuracy), 4),
        "averaged_epochs": average.averaged,
        "history": history,
        "smoke": args.smoke,
        "replicas": strategy.num_replicas_in_sync,
        "data": "generated"
        if args.smoke and args.data is None
        else (args.data or f"keras.datasets.{args.dataset}"),
        "config": {
            k: getattr(args, k)
            for k in (
                "batch_size",
                "learning_rate",
                "weight_decay",
                "warmup_fraction",
                "label_smoothing",
                "translate",
                "rotate",
                "zoom",
                "average_epochs",
                "dropout",
                "drop_path_rate",
                "mixed_precision",
                "distribute",
                "validation_fraction",
            )
        },
    }
    if "test" in splits:
        _, test_accuracy = classifier.evaluate(*splits["test"], verbose=0)
        metrics["test_accuracy"] = round(float(test_accuracy), 4)

    with strategy.scope():
        classifier.compile(label_smoothing=args.label_smoothing)  # fresh AdamW
    name = model_name(args)
    path = save_model_atomic(
        classifier, os.path.join(args.output_dir, f"{name}.keras")
    )
    if args.ship:
        shipped = save_model_atomic(
            classifier,
            os.path.join(ROOT, "saved_models", f"{name}.keras"),
            weights_dtype="float16",
        )
        _, shipped_accuracy = load_model(shipped).evaluate(
            x_val, y_val, verbose=0
        )
        metrics["shipped"] = {
            "path": os.path.relpath(shipped, ROOT),
            "megabytes": round(os.path.getsize(shipped) / 1e6, 2),
            "validation_accuracy": round(float(shipped_accuracy), 4),
        }
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    make_pictures(args, classifier, history, x_val, y_val)
    test = (
        f" test {metrics['test_accuracy']:.4f}"
        if "test_accuracy" in metrics
        else ""
    )
    print(
        f"RESULT vit_images dataset={args.dataset} preset={args.preset} "
        f"backend={keras.backend.backend()} validation accuracy "
        f"{accuracy:.4f}{test} train_time={seconds:.0f}s "
        f"params={classifier.count_params()} -> {path}"
    )
    finish_run(args.output_dir)  # everything written: the backup can go
    return metrics


def model_name(args):
    """`vit_<dataset>` for the dataset's default preset (and the smoke one),
    `vit_<dataset>_<variant>` for another (`mnist_conv_stem` on mnist:
    `vit_mnist_conv_stem`)."""
    if args.preset in ("mnist", "cifar", "smoke"):
        return f"vit_{args.dataset}"
    variant = args.preset.removeprefix(args.dataset.split("_")[0] + "_")
    return f"vit_{args.dataset}_{variant}"


def make_pictures(args, classifier, history, x_val, y_val):
    viz.plot_training_curves(
        {k: v for k, v in history.items() if "loss" in k or "accuracy" in k},
        os.path.join(args.output_dir, "training_curves.png"),
        title=f"ViT {args.preset}, {args.dataset} ({keras.backend.backend()})",
    )
    images = x_val[:PICTURE_IMAGES]
    predictions = np.argmax(classifier.predict(images, verbose=0), axis=-1)
    viz.plot_rollout_grid(
        images,
        classifier.rollout_maps(images),
        os.path.join(args.output_dir, "rollout.png"),
        titles=[
            f"{t} -> {p}" for t, p in zip(y_val[:PICTURE_IMAGES], predictions)
        ],
        title="attention rollout of the class token (label -> prediction)",
    )
    backbone = classifier.backbone
    viz.plot_position_similarity(
        keras.ops.convert_to_numpy(
            backbone.position_embedding.position_embeddings
        ),
        backbone.grid_size,
        os.path.join(args.output_dir, "positions.png"),
        num_prefix_tokens=int(backbone.class_token is not None),
        title="position embeddings: cosine similarity",
    )


def check_setup(
    smoke=True, seed=1337, num_steps=20, batch_size=16, data_dir=None
):
    """What `recipes/check_backends.py` compares across backends: the smoke
    (or, with `smoke` False, the mnist) ViT classifier with dropout off,
    float images in [0, 255] (never cast to int) and `num_steps` batches in
    a NumPy-seeded order."""
    from zoo.testing.cross_backend import CheckSetup

    argv = ["--seed", str(seed), "--dropout", "0"]
    argv += ["--data", data_dir] if data_dir else []
    args = parse_args(argv + (["--smoke"] if smoke else []))
    keras.utils.set_random_seed(seed)
    splits = load_data(args)
    x, y = splits["train"]
    x = x.astype("float32")
    classifier = ViTImageClassifier.from_preset(
        args.preset, num_classes=int(y.max()) + 1, backbone_dropout=0.0
    )
    classifier.compile(optimizer="sgd")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    steps = [
        order[(i * batch_size) % len(order) :][:batch_size]
        for i in range(num_steps)
    ]
    return CheckSetup(
        model=classifier,
        inputs=splits["validation"][0][:batch_size].astype("float32"),
        train_batches=[(x[rows], y[rows]) for rows in steps],
        loss=None,
    )


CHECK_DATA_FLAG = "--data"


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except DataNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
