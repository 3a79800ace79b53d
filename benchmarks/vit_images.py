"""ViT training and inference throughput, zoo against keras-hub, per
backend, in one run.

    python benchmarks/vit_images.py                   # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/vit_images.py --backends current

For each backend (a fresh process each), three models of the preset's size
(`mnist` by default) train on the same random images and labels and then
predict them:

- `zoo`: `zoo.models.vit.ViTBackbone` + a softmax head on the class token,
  fed float images;
- `keras_hub`: `keras_hub.models.ViTBackbone` of the same size (the same
  weights' shapes) + the same head, fed float images;
- `task`: `ViTImageClassifier.from_preset`, fed raw uint8 images (its
  preprocessor runs inside `fit` / `predict`), what a user runs.

AdamW, `fit` and `predict` compiled (jit on JAX, XLA on TensorFlow; PyTorch
eager). After a warm-up epoch of each, the three models are timed in
`--repeats` interleaved rounds of one epoch of `--steps` batches, and the
fastest round of each is kept (a single timed pass per model depended on
the order: measured last, the task looked twice as slow under JAX). The
table shows images per second and zoo / keras-hub. Timings are only
compared within one run on one machine.
"""

import sys

from zoo.testing.benchmarks import (
    add_precision_flag,
    benchmark_parser,
    configure_precision,
    fastest_rounds,
    memory_and_device,
    memory_cell,
    run_benchmark,
)


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset", default="mnist", help="a zoo.models.vit preset"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--steps",
        type=int,
        default=10,
        help="timed batches, training and inference each",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="interleaved timed rounds; the fastest counts",
    )
    add_precision_flag(parser)
    parser.add_argument(
        "--no-task",
        action="store_true",
        help="leave out the uint8 task (its preprocessing "
        "needs TensorFlow or grain)",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.steps, args.repeats) < 1:
        parser.error("--batch-size, --steps and --repeats must be at least 1")
    return args


def images(args, size):
    """`steps` batches of random uint8 images and labels, the same on every
    backend."""
    import numpy as np

    rng = np.random.default_rng(0)
    count = args.batch_size * args.steps
    height, width = size["image_size"]
    x = rng.integers(
        0, 256, (count, height, width, size["num_channels"]), dtype="uint8"
    )
    return x, rng.integers(0, 10, count).astype("int32")


def _head(backbone_inputs, sequence_output):
    import keras

    pooled = sequence_output[:, 0, :]  # the class token
    outputs = keras.layers.Dense(
        10, activation="softmax", dtype="float32", name="predictions"
    )(pooled)
    return keras.Model(backbone_inputs, outputs)


def timed_calls(model, x, y, args):
    """`{"train": fit one epoch, "predict": predict}` of a compiled model."""
    import keras

    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss="sparse_categorical_crossentropy",
    )
    return {
        "train": lambda: model.fit(
            x, y, batch_size=args.batch_size, epochs=1, verbose=0, shuffle=False
        ),
        "predict": lambda: model.predict(
            x, batch_size=args.batch_size, verbose=0
        ),
    }


def time_models(models, args):
    """`{name: {"train_images_per_second", "predict_images_per_second",
    "parameters"}}` for `{name: (model, x, y)}`, and the accelerator's
    peak memory after the first model's training warm-up (that model's
    alone): a warm-up call of each, then `--repeats` interleaved rounds,
    the fastest round of each kept."""
    calls = {
        (name, kind): fn
        for name, (model, x, y) in models.items()
        for kind, fn in timed_calls(model, x, y, args).items()
    }
    warm_ups = iter(calls.values())
    next(warm_ups)()
    memory = memory_and_device({})
    for fn in warm_ups:
        fn()
    best = fastest_rounds(calls, args.repeats, warmups=0)
    images = args.batch_size * args.steps
    return {
        **memory,
        **{
            name: {
                "train_images_per_second": round(
                    images / best[(name, "train")], 1
                ),
                "predict_images_per_second": round(
                    images / best[(name, "predict")], 1
                ),
                "parameters": int(model.count_params()),
            }
            for name, (model, _, _) in models.items()
        },
    }


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras
    import keras_hub

    from zoo.models.vit import PRESETS, ViTBackbone, ViTImageClassifier

    dtype = configure_precision(args)
    size = PRESETS.part(args.preset, "backbone")
    size.update(dropout=0.0, drop_path_rate=0.0)
    raw, labels = images(args, size)
    floats = raw.astype("float32") / 255.0
    keras.utils.set_random_seed(0)
    ours = ViTBackbone(**size)
    zoo_model = _head(ours.input, ours.output["sequence_output"])
    keras.utils.set_random_seed(0)
    theirs = keras_hub.models.ViTBackbone(
        image_shape=(*size["image_size"], size["num_channels"]),
        patch_size=size["patch_size"],
        num_layers=size["num_layers"],
        num_heads=size["num_heads"],
        hidden_dim=size["hidden_dim"],
        mlp_dim=size["intermediate_dim"],
    )
    peer = _head(theirs.input, theirs.output)
    models = {
        "zoo": (zoo_model, floats, labels),
        "keras_hub": (peer, floats, labels),
    }
    if not args.no_task:
        keras.utils.set_random_seed(0)
        task = ViTImageClassifier.from_preset(
            args.preset,
            num_classes=10,
            backbone_dropout=0.0,
            backbone_drop_path_rate=0.0,
        )
        models["task"] = (task, raw, labels)
    result = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "dtype": dtype,
        **time_models(models, args),
    }
    for kind in ("train", "predict"):
        key = f"{kind}_images_per_second"
        result[f"{kind}_zoo_over_keras_hub"] = round(
            result["zoo"][key] / result["keras_hub"][key], 3
        )
    return result


def header(args):
    columns = "".join(
        f" | {kind + ' zoo':>10} {'keras-hub':>10} {'ratio':>6} {'task':>8}"
        for kind in ("train", "predict")
    )
    return (
        f"ViT {args.preset}, batches of {args.batch_size}, {args.steps} "
        f"timed batches, {args.mixed_precision or 'float32'}; images per "
        f"second (task: uint8 in, preprocessing inside)\n"
        f"{'backend':<11}{columns} | {'zoo peak GiB':>12}"
    )


def row(backend, r):
    line = f"{backend:<11}"
    for kind in ("train", "predict"):
        key = f"{kind}_images_per_second"
        line += (
            f" | {r['zoo'][key]:>10.0f} {r['keras_hub'][key]:>10.0f} "
            f"{r[f'{kind}_zoo_over_keras_hub']:>5.2f}x "
            + (f"{r['task'][key]:>8.0f}" if "task" in r else f"{'-':>8}")
        )
    return line + " | " + memory_cell(r, 12)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main()
