"""Train a GPT language model on a text corpus (Tiny Shakespeare by default).

    KERAS_BACKEND=jax python recipes/gpt_text.py --data ../shared/data/tinyshakespeare.txt
    python recipes/gpt_text.py --preset nanogpt          # the nanoGPT set-up (GPU)
    python recipes/gpt_text.py --smoke                   # 30-second check, offline
    python recipes/gpt_text.py --evaluate saved_models/gpt_shakespeare.keras --data ...

Character-level by default (`--tokenizer wordpiece` for a keras-hub subword
vocabulary). The corpus is split 90/10 into train and validation as nanoGPT
does. The `GPT` task trains on raw text through `fit`: random windows of
`sequence_length + 1` characters, tokenised by its preprocessor inside
`tf.data`, or with `--pipeline ids` windows of the corpus tokenised once,
cut in NumPy (`zoo.data.corpus.TokenWindows`; with the character
tokenizer no TensorFlow, e.g. on an accelerator machine without it);
validation loss is in nats per token (per character for the character
tokenizer). Sizes and schedules come from the presets in
`zoo.models.gpt.PRESETS` (`cpu_small`, `nanogpt`, `gpt2`, `smoke`);
flags override them. Writes `metrics.json`, `loss_curve.png`, samples and
`gpt_<preset>.keras` to `--output-dir`; `--ship` also writes
`saved_models/gpt_shakespeare.keras`, which generates from strings after
`import zoo`. Run the same command again to resume an interrupted (even a
killed) run from its last finished epoch (exactly with `--pipeline ids`);
its backup stays until the run's files are written. The shipped model:

    gpt = zoo.saving.load_model("saved_models/gpt_shakespeare.keras")
    gpt.generate(["ROMEO:"], max_length=1000, sampler="top_k", seed=1)
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
    KeepBest,
    ReproducibleEpochs,
    StopAfterMinutes,
    Throughput,
    finish_run,
    resume_callbacks,
    resumed_history,
)
from zoo.cli import (
    HelpFormatter,
    accelerator_metrics,
    add_accelerator_flags,
    add_preset_flags,
    at_least,
    non_negative_int,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.corpus import (
    SHAKESPEARE_URL,
    TokenWindows,
    consecutive_text_windows,
    load_text,
    make_synthetic_corpus,
    random_text_windows,
    split_text,
)
from zoo.data.download import DataNotFoundError
from zoo.data.text import text_dataset
from zoo.data.tokenizers import (
    TOKENIZER_KINDS,
    encode_corpus,
    train_tokenizer,
)
from zoo.distribute import trim_to_replicas
from zoo.models.gpt import (
    GPT,
    PRESETS,
    GPTPreprocessor,
)
from zoo.saving import (
    ModelFileError,
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SMOKE_CHARACTERS = 20000  # --smoke trains on at most 20k characters
SAMPLE_PROMPTS = ("ROMEO:", "JULIET:\nO ", "First Citizen:\n")
MODEL_FLAGS = (
    "num_layers",
    "num_heads",
    "hidden_dim",
    "sequence_length",
    "dropout",
)
TRAINING_FLAGS = (
    "batch_size",
    "steps",
    "eval_interval",
    "learning_rate",
    "min_learning_rate",
    "warmup_steps",
    "weight_decay",
)

# For recipes/check_backends.py.
CHECK_FULL_METRICS = {"validation_loss": 0.05}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="GPT language model on a text corpus (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="local text file; default: download Tiny "
        "Shakespeare with keras.utils.get_file (--smoke: a "
        "generated play)",
    )
    parser.add_argument(
        "--preset",
        default="cpu_small",
        choices=PRESETS.names() + ["cpu-small"],
        help="model size and schedule (flags below "
        "override); cpu-small is cpu_small",
    )
    parser.add_argument(
        "--tokenizer",
        choices=TOKENIZER_KINDS,
        default="character",
        help="one id per character, or keras-hub WordPiece "
        "subwords for word corpora",
    )
    parser.add_argument(
        "--vocab-size",
        type=positive_int,
        default=2000,
        help="wordpiece vocabulary size",
    )
    parser.add_argument(
        "--pipeline",
        choices=("text", "ids"),
        default="text",
        help="text: windows of raw text, tokenised by the "
        "model's preprocessor in tf.data; ids: the corpus "
        "tokenised once and windows cut from the ids in "
        "NumPy (faster input; no TensorFlow with the "
        "character tokenizer)",
    )
    add_preset_flags(
        parser,
        (
            ("num-layers", positive_int, "Transformer blocks"),
            ("num-heads", positive_int, "attention heads"),
            ("hidden-dim", positive_int, "model width"),
            ("sequence-length", at_least(2), "context length (tokens)"),
            ("dropout", rate, "dropout rate"),
            ("batch-size", positive_int, "windows per step"),
            ("steps", positive_int, "training steps"),
            ("eval-interval", positive_int, "steps between validation passes"),
            ("learning-rate", positive_float, "peak learning rate (AdamW)"),
            (
                "min-learning-rate",
                positive_float,
                "final learning rate (cosine decay)",
            ),
            ("warmup-steps", non_negative_int, "linear warm-up steps"),
            (
                "weight-decay",
                float,
                "AdamW weight decay (not on biases and norms)",
            ),
        ),
    )
    parser.add_argument(
        "--attention-dropout",
        type=rate,
        default=None,
        help="dropout on the attention weights alone "
        "(default: --dropout); 0 trains on the fused "
        "attention kernel (flash/cuDNN on a GPU), which has "
        "no dropout",
    )
    parser.add_argument(
        "--untied",
        action="store_true",
        help="separate output projection (default: tied to "
        "the token embedding)",
    )
    parser.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        help="stop training after this many minutes",
    )
    parser.add_argument(
        "--keep-best",
        default=True,
        action=argparse.BooleanOptionalAction,
        help="save the weights of the epoch with the lowest "
        "validation loss, not the last (nanoGPT keeps its "
        "best checkpoint too: the model overfits the small "
        "corpus); kept in the output folder, so a resumed "
        "run keeps the best of all its epochs",
    )
    add_accelerator_flags(parser)
    parser.add_argument(
        "--sample-length",
        type=at_least(2),
        default=None,
        help="length of the printed samples (default: the context length)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1337,
        help="seed of the weights and the training windows",
    )
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/gpt_text/<preset>/"
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also save saved_models/gpt_shakespeare.keras",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smoke preset on at most 20k characters "
        "(a generated play unless --data is given)",
    )
    parser.add_argument(
        "--evaluate",
        default=None,
        metavar="MODEL",
        help="only evaluate a saved .keras model on the "
        "validation split of --data (no training)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        default=1,
        choices=(0, 1, 2),
        help="Keras progress output",
    )
    args = parser.parse_args(argv)
    args.preset = args.preset.replace("-", "_")
    if args.smoke:
        args.preset = "smoke"
    config = {
        **PRESETS.part(args.preset, "backbone"),
        **PRESETS.part(args.preset, "training"),
    }
    for key in MODEL_FLAGS + TRAINING_FLAGS:
        if getattr(args, key) is None:
            setattr(args, key, config[key])
    if args.output_dir is None:
        args.output_dir = os.path.join(ROOT, "runs", "gpt_text", args.preset)
    return args


def learning_rate_schedule(args):
    """Linear warm-up to the peak, then cosine decay to the minimum."""
    decay_steps = max(args.steps - args.warmup_steps, 1)
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        warmup_target=args.learning_rate,
        warmup_steps=args.warmup_steps,
        decay_steps=decay_steps,
        alpha=args.min_learning_rate / args.learning_rate,
    )


def make_optimizer(args):
    optimizer = keras.optimizers.AdamW(
        learning_rate_schedule(args),
        weight_decay=args.weight_decay,
        beta_2=0.99,  # nanoGPT's Shakespeare setting: few tokens per step
        global_clipnorm=1.0,
    )
    # Decay matrices only, as nanoGPT does (not biases or LayerNorm).
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    return optimizer


def load_corpus(args):
    """The corpus text (the generated play for --smoke without --data)."""
    if args.smoke and args.data is None:
        return make_synthetic_corpus(SMOKE_CHARACTERS, seed=args.seed)
    text = load_text(args.data)
    return text[:SMOKE_CHARACTERS] if args.smoke else text


def window_characters(args, tokenizer, train_text):
    """Characters per training window: `sequence_length + 1` for characters;
    for subwords, enough characters for about that many tokens (the
    preprocessor truncates or pads to it)."""
    if args.tokenizer == "character":
        return args.sequence_length + 1
    sample = train_text[:100_000]
    tokens = len(np.asarray(tokenizer.tokenize(sample)).reshape(-1))
    per_token = len(sample) / max(tokens, 1)
    return int(np.ceil((args.sequence_length + 1) * per_token * 1.1))


def make_datasets(args, tokenizer, train_text, val_text, strategy):
    """(training, validation) data through --pipeline: random training
    windows, new every epoch, and consecutive validation windows (every
    token after the first predicted once), trimmed to the replicas."""
    length = args.sequence_length
    if args.pipeline == "ids":
        val_ids = encode_corpus(tokenizer, val_text)
        (starts,), _ = trim_to_replicas(
            (np.arange((len(val_ids) - 1) // length),), strategy
        )
        train = TokenWindows(
            encode_corpus(tokenizer, train_text),
            length,
            args.batch_size,
            steps=args.eval_interval,
            seed=args.seed,
        )
        val = TokenWindows(
            val_ids[: len(starts) * length + 1],
            length,
            args.batch_size,
            shuffle=False,
        )
        return train, val
    window = window_characters(args, tokenizer, train_text)
    train = random_text_windows(
        train_text, window, args.batch_size, args.eval_interval, seed=args.seed
    )
    (val_windows,), _ = trim_to_replicas(
        (consecutive_text_windows(val_text, window - 1),), strategy
    )
    return train, text_dataset(val_windows, batch_size=args.batch_size)


def build_model(args, tokenizer):
    """The preset's `GPT`, with the flags' overrides, compiled with AdamW on
    a warm-up + cosine schedule."""
    preprocessor = GPTPreprocessor(tokenizer, args.sequence_length)
    gpt = GPT.from_preset(
        args.preset,
        preprocessor=preprocessor,
        name="gpt",
        **{f"backbone_{k}": getattr(args, k) for k in MODEL_FLAGS},
        backbone_tie_weights=not args.untied,
        backbone_attention_dropout=args.attention_dropout,
    )
    gpt.compile(optimizer=make_optimizer(args))
    return gpt


def evaluate_saved(args):
    """Validation loss of a saved GPT on --data's validation split."""
    gpt = load_model(args.evaluate, expected=GPT)
    text = load_corpus(args)
    _, val_text = split_text(text, 0.9)
    length = gpt.backbone.sequence_length
    if args.pipeline == "ids":
        windows = TokenWindows(
            encode_corpus(gpt.preprocessor.tokenizer, val_text),
            length,
            args.batch_size,
            shuffle=False,
        )
        count, unit = windows.windows, "tokens"
    else:
        windows = consecutive_text_windows(val_text, length)
        count, unit = len(windows), "characters"
        windows = text_dataset(windows, batch_size=args.batch_size)
    scores = gpt.evaluate(windows, verbose=args.verbose, return_dict=True)
    loss = float(scores["loss"])
    print(
        f"RESULT gpt_text evaluate={args.evaluate} "
        f"backend={keras.backend.backend()} val_loss={loss:.4f} "
        f"({count} windows of {length + 1} {unit})"
    )
    return {
        "validation_loss": round(loss, 4),
        "model": args.evaluate,
        "backend": keras.backend.backend(),
    }


def run(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    text = load_corpus(args)
    train_text, val_text = split_text(text, 0.9)
    tokenizer = train_tokenizer(train_text, args.tokenizer, args.vocab_size)
    unit = "char" if args.tokenizer == "character" else "token"
    print(
        f"corpus: {len(text):,} characters -> {len(train_text):,} train / "
        f"{len(val_text):,} validation, vocabulary "
        f"{tokenizer.vocabulary_size()} | backend {keras.backend.backend()}"
    )

    with strategy.scope():
        gpt = build_model(args, tokenizer)
    parameters = int(gpt.backbone.count_params())
    print(
        f"GPT: {parameters / 1e6:.2f}M parameters ({args.num_layers} layers,"
        f" {args.num_heads} heads, width {args.hidden_dim}, context "
        f"{args.sequence_length})"
    )

    epochs = max(args.steps // args.eval_interval, 1)
    train, val = make_datasets(args, tokenizer, train_text, val_text, strategy)
    speed = Throughput(
        args.batch_size * args.sequence_length,
        unit="tokens",
        flops_per_item=gpt.backbone.flops_per_token(),
    )
    # An interrupted run, even a killed one, resumes from its last finished
    # epoch (weights, optimizer, schedule step; the backup stays until the
    # run's files are written), its curves kept across the interruption.
    # With --pipeline ids it continues exactly: windows and dropout follow
    # (seed, epoch).
    # The best epoch's weights (nanoGPT keeps its best checkpoint: the model
    # overfits the small corpus), on disk before each epoch's backup.
    keep = KeepBest(args.output_dir)
    callbacks = [
        speed,
        *([keep] if args.keep_best else []),
        *resume_callbacks(args.output_dir),
    ]
    if args.pipeline == "ids":
        callbacks.append(ReproducibleEpochs(args.seed, [train]))
    if args.max_minutes:
        callbacks.append(StopAfterMinutes(args.max_minutes))
    start = time.perf_counter()
    this_run = gpt.fit(
        train,
        epochs=epochs,
        validation_data=val,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    history, resumed_at_epoch = resumed_history(args.output_dir, this_run)
    steps_done = int(keras.ops.convert_to_numpy(gpt.optimizer.iterations))

    val_loss, kept_epoch = history["val_loss"][-1], len(history["val_loss"])
    if args.keep_best and keep.best_epoch is not None:
        val_loss, kept_epoch = keep.best, keep.best_epoch
        print(
            f"kept the weights of epoch {kept_epoch} of "
            f"{len(history['val_loss'])} (validation loss {val_loss:.4f})"
        )
    samples = {}
    sample_length = args.sample_length or args.sequence_length
    for name, options in (
        ("greedy", {}),
        ("top_k", dict(sampler="top_k", k=10, seed=1)),
    ):
        samples[name] = gpt.generate(
            list(SAMPLE_PROMPTS), max_length=sample_length, **options
        )
    for name, outputs in samples.items():
        print(f"\n--- samples ({name}) ---")
        for output in outputs:
            print(output.rstrip() + "\n")

    metrics = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "tokenizer": args.tokenizer,
        "pipeline": args.pipeline,
        "vocabulary_size": int(tokenizer.vocabulary_size()),
        "parameters": parameters,
        "config": {
            **{k: getattr(args, k) for k in MODEL_FLAGS + TRAINING_FLAGS},
            "attention_dropout": gpt.backbone.attention_dropout,
        },
        "steps": steps_done,
        "resumed_at_epoch": resumed_at_epoch,
        "train_seconds": round(seconds, 1),
        "train_loss": round(history["loss"][-1], 4),
        "validation_loss": round(val_loss, 4),
        "validation_loss_unit": f"nats/{unit}",
        "kept_epoch": kept_epoch,
        "best_validation_loss": round(min(history["val_loss"]), 4),
        "history": history,
        "samples": samples,
        "data": (
            "generated"
            if args.smoke and args.data is None
            else args.data or SHAKESPEARE_URL
        ),
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy, speed),
    }
    # A fresh optimizer: AdamW's moments are of no use to generate.
    with strategy.scope():
        gpt.compile(optimizer=make_optimizer(args))
    model_path = save_model_atomic(
        gpt, os.path.join(args.output_dir, f"gpt_{args.preset}.keras")
    )
    if args.ship:
        save_model_atomic(
            gpt, os.path.join(ROOT, "saved_models", "gpt_shakespeare.keras")
        )
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    curve = {"loss": history["loss"], "val_loss": history["val_loss"]}
    viz.plot_training_curves(
        curve,
        os.path.join(args.output_dir, "loss_curve.png"),
        title=f"GPT {args.preset} ({keras.backend.backend()}), nats/{unit}, "
        f"{args.eval_interval} steps per point",
    )
    print(
        f"RESULT gpt_text preset={args.preset} "
        f"backend={keras.backend.backend()} val_loss={val_loss:.4f} "
        f"nats/{unit} train_loss={history['loss'][-1]:.4f} "
        f"steps={steps_done} train_time={seconds:.0f}s "
        f"params={parameters} -> {model_path}"
    )
    if len(history["loss"]) >= epochs:
        # Everything written: the backup can go. A run that --max-minutes
        # stopped keeps it, so the same command continues.
        finish_run(args.output_dir)
    return metrics


def check_setup(
    variant="default",
    smoke=True,
    seed=1337,
    num_steps=20,
    batch_size=8,
    data_dir=None,
):
    """What `recipes/check_backends.py` compares across backends (see
    `zoo.testing.cross_backend.CheckSetup`): the smoke preset's GPT (dropout
    off) on the generated play (or `data_dir`'s text file), raw text windows
    as inputs and training batches, and greedy generations, within the
    context and past it."""
    from zoo.testing.cross_backend import CheckSetup

    argv = ["--smoke", "--seed", str(seed), "--dropout", "0"]
    if not smoke:
        argv = ["--seed", str(seed), "--dropout", "0"]
    if data_dir is not None:
        argv += ["--data", data_dir]
    args = parse_args(argv)
    keras.utils.set_random_seed(seed)
    text = load_corpus(args)
    train_text, _ = split_text(text, 0.9)
    tokenizer = train_tokenizer(train_text, args.tokenizer, args.vocab_size)
    model = build_model(args, tokenizer)
    window = args.sequence_length + 1
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, len(train_text) - window, (num_steps, batch_size))
    batches = [
        ([train_text[o : o + window] for o in row], None) for row in offsets
    ]
    return CheckSetup(
        model=model,
        inputs=[train_text[o : o + window] for o in offsets[0]],
        train_batches=batches,
        loss=None,
        generate=dict(
            inputs=["ROMEO:", "JULIET:\nO"],
            max_length=args.sequence_length + 16,
        ),
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        return evaluate_saved(args) if args.evaluate else run(args)
    except (DataNotFoundError, ModelFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
