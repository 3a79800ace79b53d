"""Train ImageGPT on digits: a GPT over quantised pixels that completes
images, and a linear probe on its features.

    KERAS_BACKEND=jax python recipes/imagegpt_digits.py --data ../shared/data/mnist_10k.npz
    python recipes/imagegpt_digits.py --smoke                     # seconds, offline
    python recipes/imagegpt_digits.py --evaluate saved_models/imagegpt_digits.keras \\
        --data ../shared/data/mnist_10k.npz

`--dataset mnist` (the default) downloads with `keras.datasets`; `--data
PATH.npz` reads a local copy with arrays `x` (uint8 images) and `y`
(labels). The validation digits are the ViT recipe's (the same seeded,
class-stratified `--validation-fraction`), so the shipped ViT
(`saved_models/vit_mnist.keras`) never saw them and can judge the
completions.

The images are reduced to the preset's size (14 x 14 for `digits`) and
quantised to a palette of grey levels that k-means finds on the training
pixels; the palette is saved in the model file. Training is next-pixel
prediction (AdamW, warm-up and cosine decay). A killed or `--max-minutes`
run continues with `--resume`.

Writes to `--output-dir`: `metrics.json` (validation bits per pixel, the
linear probe's accuracy on the final features and on the middle block's
against the same probe on raw pixels, and the share of greedy completions
of the top half that the ViT gives the original label), `completions.png`
(top halves of validation digits and several completions each),
`samples.png` (unconditional samples), `training_curves.png` and
`imagegpt_<dataset>.keras`; `--ship` also writes it to `saved_models/`
(float16 weights). A saved model takes raw uint8 images under any backend:

    import zoo
    model = zoo.saving.load_model("saved_models/imagegpt_digits.keras")
    model.complete(uint8_digits, rows=7)     # (N, 28, 28) -> (N, 14, 14)
    model.generate_images(4, seed=0)          # (4, 14, 14) uint8
"""

import argparse
import math
import os
import sys
import time

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo import viz
from zoo.callbacks import (
    BackupUntilDone,
    StopAfterMinutes,
    Throughput,
    finish_run,
    read_history,
)
from zoo.cli import (
    HelpFormatter,
    add_preset_flags,
    positive_float,
    positive_int,
    rate,
)
from zoo.data.download import DataNotFoundError
from zoo.data.images import (
    load_images,
    load_npz,
    make_synthetic_images,
    split_validation,
)
from zoo.models.imagegpt import (
    PRESETS,
    ImageGPTCausalLM,
    ImageGPTPreprocessor,
    linear_probe,
)
from zoo.saving import (
    ModelFileError,
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)
from zoo.schedules import warmup_cosine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIT = os.path.join(ROOT, "saved_models", "vit_mnist.keras")

PICTURE_DIGITS = 8  # validation digits in completions.png
SAMPLES_PER_DIGIT = 4  # top-k completions of each, beside the greedy one
UNCONDITIONAL = 16  # images in samples.png


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="ImageGPT on digits: next-pixel prediction, image "
        "completion and a linear probe (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--dataset", choices=("mnist", "fashion_mnist"), default="mnist"
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH.npz",
        help="a local copy: arrays x (uint8 images), y (labels)",
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS.names(),
        default=None,
        help="default: digits (smoke with --smoke)",
    )
    parser.add_argument("--validation-fraction", type=rate, default=0.1)
    add_preset_flags(
        parser,
        (
            ("epochs", positive_int, "training epochs"),
            ("batch-size", positive_int, "images per step"),
            ("learning-rate", positive_float, "peak of warm-up + cosine"),
            ("min-learning-rate", positive_float, "end of the cosine"),
            ("weight-decay", float, "AdamW weight decay"),
            ("warmup-fraction", rate, "share of the steps warming up"),
            ("probe-steps", positive_int, "batches each probe trains on"),
        ),
    )
    parser.add_argument(
        "--levels",
        type=positive_int,
        default=None,
        help="grey levels of the palette; default from the preset",
    )
    parser.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        help="stop after the epoch that would overrun this budget; "
        "--resume continues later",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished run in --output-dir",
    )
    parser.add_argument(
        "--evaluate",
        default=None,
        metavar="MODEL.keras",
        help="no training: measure this saved model on the validation digits",
    )
    parser.add_argument(
        "--classifier",
        default=None,
        metavar="MODEL.keras",
        help="the classifier that judges completions; default for mnist: "
        "saved_models/vit_mnist.keras (skipped if the file is missing)",
    )
    parser.add_argument(
        "--probe-limit",
        type=positive_int,
        default=None,
        help="train the probes on at most this many training images "
        "(default: all)",
    )
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument(
        "--output-dir",
        default=None,
        help="default: runs/imagegpt/<dataset>/ (with --evaluate: "
        "runs/imagegpt/<dataset>_evaluate/)",
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also write saved_models/imagegpt_digits.keras (float16)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="generated 8x8 images and the smoke preset: the same code "
        "path in seconds, offline",
    )
    parser.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2))
    args = parser.parse_args(argv)
    if args.preset is None:
        args.preset = "smoke" if args.smoke else "digits"
    for key, value in PRESETS.part(args.preset, "training").items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.levels is None:
        args.levels = PRESETS.part(args.preset, "preprocessor")["num_levels"]
    if args.levels < 2:
        parser.error("argument --levels: a palette needs at least 2 levels")
    if args.classifier is None and args.dataset == "mnist":
        args.classifier = VIT
    if args.output_dir is None:
        args.output_dir = os.path.join(
            ROOT,
            "runs",
            "imagegpt",
            args.dataset + ("_evaluate" if args.evaluate else ""),
        )
    if args.validation_fraction == 0:
        parser.error(
            "argument --validation-fraction: must be above 0 (the recipe "
            "measures on held-out digits)"
        )
    return args


def load_data(args):
    """`{"train": (x, y), "validation": (x, y)}`, the ViT recipe's split."""
    if args.smoke and args.data is None:
        x, y = make_synthetic_images(320, size=8, seed=args.seed)
        splits = {"train": (x, y)}
    elif args.data is not None:
        splits = load_npz(args.data)
    else:
        splits = load_images(args.dataset)
    x, y = splits["train"]
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 3:
        raise SystemExit(
            f"error: ImageGPT reads grey images (N, H, W); the data has shape "
            f"{x.shape}."
        )
    train, validation = split_validation(
        x, y, args.validation_fraction, args.seed
    )
    return {"train": train, "validation": validation}


def build(args, train_images, steps):
    size = tuple(PRESETS.part(args.preset, "preprocessor")["image_size"])
    preprocessor = ImageGPTPreprocessor.from_images(
        train_images, size, args.levels
    )
    model = ImageGPTCausalLM.from_preset(
        args.preset, preprocessor=preprocessor, name="imagegpt"
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(
            warmup_cosine(
                args.learning_rate,
                steps,
                args.warmup_fraction,
                alpha=args.min_learning_rate / args.learning_rate,
            ),
            weight_decay=args.weight_decay,
            global_clipnorm=1.0,
        )
    )
    return model


def check_resume(args):
    backup = os.path.join(args.output_dir, "backup")
    if os.path.isdir(backup) and not args.resume:
        raise SystemExit(
            f"error: {args.output_dir} holds an unfinished run (backup/). "
            "Pass --resume to continue it, or another --output-dir."
        )
    return backup


# --- Measurements -------------------------------------------------------------


def bits_per_pixel(model, images, batch_size=256):
    """Mean negative log-likelihood of the pixel ids, in bits."""
    loss = model.evaluate(images, batch_size=batch_size, verbose=0)
    loss = loss[0] if isinstance(loss, list) else loss
    return float(loss) / math.log(2)


def upsample(images, size):
    """uint8 `(N, h, w)` -> uint8 `(N, *size)`, bilinear."""
    if tuple(images.shape[1:3]) == tuple(size):
        return images
    resized = keras.ops.image.resize(
        images[..., None].astype("float32"), size, interpolation="bilinear"
    )
    return np.clip(
        np.round(keras.ops.convert_to_numpy(resized)[..., 0]), 0, 255
    ).astype("uint8")


def label_agreement(model, classifier_path, images, labels, seed):
    """What the classifier says of greedy (and top-k) completions of the
    top half of each image, against the true labels; with its accuracy on
    the originals and on the quantised images (the ceiling)."""
    if not classifier_path or not os.path.isfile(classifier_path):
        print(f"(no classifier at {classifier_path}: completions not judged)")
        return None
    classifier = load_model(classifier_path)
    size = tuple(images.shape[1:3])
    preprocessor = model.preprocessor

    def accuracy(batch):
        scores = classifier.predict(upsample(batch, size), verbose=0)
        return float(np.mean(np.argmax(scores, -1) == labels))

    height = preprocessor.image_converter.image_size[0]
    quantised = preprocessor.images_from_ids(preprocessor.pixel_ids(images))
    start = time.perf_counter()
    greedy = model.complete(images, rows=height // 2)
    seconds = time.perf_counter() - start
    sampled = model.complete(
        images, rows=height // 2, sampler="top_k", k=3, seed=seed
    )
    return {
        "classifier": os.path.relpath(classifier_path, ROOT),
        "images": int(len(labels)),
        "rows_kept": int(height // 2),
        "accuracy_on_originals": round(accuracy(images), 4),
        "accuracy_on_quantised": round(accuracy(quantised), 4),
        "greedy_completion_agreement": round(accuracy(greedy), 4),
        "top_k3_completion_agreement": round(accuracy(sampled), 4),
        "greedy_completion_seconds": round(seconds, 1),
    }


def probes(model, splits, limit=None, steps=None):
    """The linear probe on the final features and on the middle block's,
    and on raw pixels, trained on the training images (`steps` batches;
    None: `linear_probe`'s default), measured on the validation ones."""
    (x, y), (x_val, y_val) = splits["train"], splits["validation"]
    options = {} if steps is None else {"steps": steps}
    if limit:
        x, y = x[:limit], y[:limit]
    results = {
        "raw_pixels": linear_probe(
            x.reshape(len(x), -1),
            y,
            x_val.reshape(len(x_val), -1),
            y_val,
            **options,
        )
    }
    middle = model.backbone.num_layers // 2
    for name, layer in (("final", None), (f"block_{middle}", middle - 1)):
        results[name] = linear_probe(
            model.features(x, layer=layer),
            y,
            model.features(x_val, layer=layer),
            y_val,
            **options,
        )
    return {
        k: {m: round(v, 4) if isinstance(v, float) else v for m, v in r.items()}
        for k, r in results.items()
    }


def measure(model, splits, args):
    x_val, y_val = splits["validation"]
    start = time.perf_counter()
    metrics = {
        "validation_bits_per_pixel": round(bits_per_pixel(model, x_val), 4),
        "train_bits_per_pixel": round(
            bits_per_pixel(model, splits["train"][0]), 4
        ),
        "palette": [round(v, 1) for v in model.preprocessor.palette],
        "probe": probes(model, splits, args.probe_limit, args.probe_steps),
        "completions": label_agreement(
            model,
            None if args.smoke else args.classifier,
            x_val,
            y_val,
            args.seed,
        ),
    }
    metrics["measure_seconds"] = round(time.perf_counter() - start, 1)
    return metrics


def make_pictures(args, model, x_val, history=None):
    preprocessor = model.preprocessor
    height = preprocessor.image_converter.image_size[0]
    digits = x_val[:PICTURE_DIGITS]
    quantised = preprocessor.images_from_ids(preprocessor.pixel_ids(digits))
    top = quantised.copy()
    top[:, height // 2 :] = 0
    greedy = model.complete(digits, rows=height // 2)
    samples = [
        model.complete(
            digits, rows=height // 2, sampler="top_k", k=3, seed=args.seed + i
        )
        for i in range(SAMPLES_PER_DIGIT)
    ]
    rows = [
        [quantised[i], top[i], greedy[i], *(s[i] for s in samples)]
        for i in range(len(digits))
    ]
    viz.plot_image_grid(
        rows,
        os.path.join(args.output_dir, "completions.png"),
        column_titles=["original", "top half", "greedy"]
        + [f"top-3 #{i + 1}" for i in range(SAMPLES_PER_DIGIT)],
        title=f"ImageGPT completions of validation digits ({keras.backend.backend()})",
    )
    images = model.generate_images(UNCONDITIONAL, seed=args.seed)
    viz.plot_image_grid(
        [images[i : i + 8] for i in range(0, len(images), 8)],
        os.path.join(args.output_dir, "samples.png"),
        title="ImageGPT: unconditional samples",
    )
    if history:
        viz.plot_training_curves(
            {k: v for k, v in history.items() if "loss" in k},
            os.path.join(args.output_dir, "training_curves.png"),
            title=f"ImageGPT {args.preset} ({keras.backend.backend()})",
        )


# --- Runs ---------------------------------------------------------------------


def run(args):
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    backup = check_resume(args)
    splits = load_data(args)
    (x_train, _), (x_val, _) = splits["train"], splits["validation"]
    print(
        f"{'generated' if args.smoke and args.data is None else args.dataset}: "
        f"train {len(x_train)}, validation {len(x_val)} | backend "
        f"{keras.backend.backend()}"
    )
    steps = args.epochs * -(-len(x_train) // args.batch_size)
    model = build(args, x_train, steps)
    palette = ", ".join(f"{v:.0f}" for v in model.preprocessor.palette)
    print(
        f"ImageGPT ({args.preset}): {model.count_params() / 1e6:.2f}M "
        f"parameters, {model.preprocessor.sequence_length} pixels per image, "
        f"palette (k-means) [{palette}]"
    )
    speed = Throughput(args.batch_size, unit="images")
    stopper = StopAfterMinutes(
        args.max_minutes or float("inf"), note="; --resume continues"
    )
    history_path = os.path.join(args.output_dir, "history.csv")
    start = time.perf_counter()
    model.fit(
        x_train,
        batch_size=args.batch_size,
        validation_data=(x_val,),
        epochs=args.epochs,
        callbacks=[
            speed,
            keras.callbacks.CSVLogger(history_path, append=args.resume),
            # Kept when --max-minutes stops the run or it is killed:
            # --resume continues; removed once the run's files are written.
            BackupUntilDone(backup),
            stopper,
        ],
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    history = read_history(history_path)
    if stopper.stopped:
        print(
            f"RESULT imagegpt stopped after {len(history['loss'])} of "
            f"{args.epochs} epochs; resume with --resume"
        )
        return {"stopped": True, "history": history}

    model.compile(optimizer="auto")  # a fresh optimizer in the saved file
    name = f"imagegpt_{'digits' if args.dataset == 'mnist' else args.dataset}"
    path = save_model_atomic(
        model, os.path.join(args.output_dir, f"{name}.keras")
    )
    metrics = {
        "dataset": args.dataset,
        "data": "generated"
        if args.smoke and args.data is None
        else (args.data or f"keras.datasets.{args.dataset}"),
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "parameters": int(model.count_params()),
        "train_images": int(len(x_train)),
        "validation_images": int(len(x_val)),
        "epochs": len(history["loss"]),
        "train_seconds": round(seconds, 1),
        "throughput": speed.summary(),
        "history": history,
        "smoke": args.smoke,
        "config": {
            k: getattr(args, k)
            for k in (
                "batch_size",
                "learning_rate",
                "min_learning_rate",
                "weight_decay",
                "warmup_fraction",
                "levels",
                "validation_fraction",
                "probe_steps",
            )
        },
        **measure(model, splits, args),
    }
    if args.ship:
        shipped = save_model_atomic(
            model,
            os.path.join(ROOT, "saved_models", f"{name}.keras"),
            weights_dtype="float16",
        )
        metrics["shipped"] = {
            "path": os.path.relpath(shipped, ROOT),
            "megabytes": round(os.path.getsize(shipped) / 1e6, 2),
            "validation_bits_per_pixel": round(
                bits_per_pixel(load_model(shipped), x_val), 4
            ),
        }
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    make_pictures(args, model, x_val, history)
    report(metrics, path)
    finish_run(args.output_dir)  # everything written: the backup can go
    return metrics


def report(metrics, path):
    probe = metrics["probe"]
    judged = metrics["completions"]
    agreement = (
        f" completions keep their label {judged['greedy_completion_agreement']:.1%} "
        f"(ViT on originals {judged['accuracy_on_originals']:.1%})"
        if judged
        else ""
    )
    middle = next(k for k in probe if k.startswith("block_"))
    print(
        f"RESULT imagegpt preset={metrics['preset']} backend="
        f"{metrics['backend']} validation {metrics['validation_bits_per_pixel']:.4f} "
        f"bits/pixel | linear probe final {probe['final']['accuracy']:.4f} "
        f"{middle} {probe[middle]['accuracy']:.4f} raw pixels "
        f"{probe['raw_pixels']['accuracy']:.4f} |{agreement} -> {path}"
    )


def evaluate_saved(args):
    """`--evaluate MODEL.keras`: the run's measurements of a saved model."""
    keras.utils.set_random_seed(args.seed)
    model = load_model(args.evaluate)
    if not isinstance(model, ImageGPTCausalLM):
        raise ModelFileError(
            f"{args.evaluate} holds a {type(model).__name__}, not an "
            "ImageGPTCausalLM."
        )
    splits = load_data(args)
    os.makedirs(args.output_dir, exist_ok=True)
    metrics = {
        "model": args.evaluate,
        "backend": keras.backend.backend(),
        **measure(model, splits, args),
    }
    write_json_atomic(metrics, os.path.join(args.output_dir, "evaluation.json"))
    make_pictures(args, model, splits["validation"][0])
    report({**metrics, "preset": "saved"}, args.evaluate)
    return metrics


def check_setup(
    smoke=True, seed=1337, num_steps=20, batch_size=8, data_dir=None
):
    """What `recipes/check_backends.py` compares across backends: the
    smoke (or, with `smoke` False, the digits) ImageGPT with its k-means
    palette, float images on [0, 255] as inputs, `num_steps` batches of
    training images in a NumPy-seeded order, and greedy completions of
    the top half of four validation images."""
    from zoo.testing.cross_backend import CheckSetup

    argv = ["--seed", str(seed)] + (["--smoke"] if smoke else [])
    args = parse_args(argv + (["--data", data_dir] if data_dir else []))
    keras.utils.set_random_seed(seed)
    splits = load_data(args)
    x = splits["train"][0].astype("float32")
    size = tuple(PRESETS.part(args.preset, "preprocessor")["image_size"])
    model = ImageGPTCausalLM.from_preset(
        args.preset,
        preprocessor=ImageGPTPreprocessor.from_images(x, size, args.levels),
    )
    model.compile(optimizer="sgd")
    order = np.random.default_rng(seed).permutation(len(x))
    steps = [
        order[(i * batch_size) % len(order) :][:batch_size]
        for i in range(num_steps)
    ]
    inputs = splits["validation"][0][:batch_size].astype("float32")
    return CheckSetup(
        model=model,
        inputs=inputs,
        train_batches=[(x[rows], None) for rows in steps],
        loss=None,
        generate=dict(method="complete", images=inputs[:4], rows=size[0] // 2),
    )


CHECK_DATA_FLAG = "--data"
CHECK_FULL_METRICS = {"validation_bits_per_pixel": 0.02}


def main(argv=None):
    args = parse_args(argv)
    try:
        return evaluate_saved(args) if args.evaluate else run(args)
    except (DataNotFoundError, ModelFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
