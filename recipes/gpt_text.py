"""Train a GPT language model on a text corpus (Tiny Shakespeare by default).

    KERAS_BACKEND=jax python recipes/gpt_text.py --data ../shared/data/tinyshakespeare.txt
    python recipes/gpt_text.py --preset nanogpt          # the nanoGPT set-up (GPU)
    python recipes/gpt_text.py --smoke                   # 30-second check

Character-level by default (`--tokenizer wordpiece` for a keras-hub subword
vocabulary). The corpus is split 90/10 into train and validation as nanoGPT
does; training draws random windows of the context length; validation loss
is in nats per token (per character for the character tokenizer). Writes
`metrics.json`, `loss_curve.png`, samples and `gpt_<name>.keras` to
`--output-dir`; `--ship` also writes `saved_models/gpt_shakespeare.keras`,
which generates from strings after `import zoo`:

    gpt = keras.saving.load_model("saved_models/gpt_shakespeare.keras")
    gpt.generate(["ROMEO:"], max_length=200, sampler="top_k", seed=1)
"""

import argparse
import os
import sys
import time

import keras
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)

from recipes.flags import at_least  # noqa: E402
from recipes.flags import non_negative_int  # noqa: E402
from recipes.flags import positive_float  # noqa: E402
from recipes.flags import positive_int  # noqa: E402
from recipes.flags import rate  # noqa: E402
from zoo import viz  # noqa: E402
from zoo.data.corpus import RandomWindows  # noqa: E402
from zoo.data.corpus import consecutive_windows  # noqa: E402
from zoo.data.corpus import load_text  # noqa: E402
from zoo.data.corpus import split_ids  # noqa: E402
from zoo.data.corpus import SHAKESPEARE_URL  # noqa: E402
from zoo.data.imdb import DataNotFoundError  # noqa: E402
from zoo.data.tokenizers import TOKENIZER_KINDS  # noqa: E402
from zoo.data.tokenizers import encode_corpus  # noqa: E402
from zoo.data.tokenizers import train_tokenizer  # noqa: E402
from zoo.models.gpt import GPT  # noqa: E402
from zoo.models.gpt import GPTBackbone  # noqa: E402
from zoo.models.gpt import GPTPreprocessor  # noqa: E402
from zoo.saving import save_model_atomic  # noqa: E402
from zoo.saving import write_json_atomic  # noqa: E402

# Model and optimisation settings per preset; flags override them.
PRESETS = {
    # About 25 minutes on 2 CPU cores.
    "cpu-small": dict(num_layers=4, num_heads=4, hidden_dim=128,
                      sequence_length=128, dropout=0.0, batch_size=32,
                      steps=2200, eval_interval=200, learning_rate=2e-3,
                      min_learning_rate=2e-4, warmup_steps=100),
    # nanoGPT's config/train_shakespeare_char.py: 10.65M parameters.
    "nanogpt": dict(num_layers=6, num_heads=6, hidden_dim=384,
                    sequence_length=256, dropout=0.2, batch_size=64,
                    steps=5000, eval_interval=250, learning_rate=1e-3,
                    min_learning_rate=1e-4, warmup_steps=100),
    # The same code path in seconds (used by the tests).
    "smoke": dict(num_layers=2, num_heads=2, hidden_dim=32,
                  sequence_length=32, dropout=0.0, batch_size=16,
                  steps=30, eval_interval=15, learning_rate=3e-3,
                  min_learning_rate=3e-4, warmup_steps=5),
}
SMOKE_CHARACTERS = 20000  # --smoke trains on the corpus' first 20k chars
SAMPLE_PROMPTS = ("ROMEO:", "JULIET:\nO ", "First Citizen:\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="GPT language model on a text corpus (any backend).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data", default=None, metavar="PATH",
                        help="local text file; default: download Tiny "
                        "Shakespeare with keras.utils.get_file")
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        default="cpu-small",
                        help="model size and schedule (flags below override)")
    parser.add_argument("--tokenizer", choices=TOKENIZER_KINDS,
                        default="character",
                        help="one id per character, or keras-hub WordPiece "
                        "subwords for word corpora")
    parser.add_argument("--vocab-size", type=positive_int, default=2000,
                        help="wordpiece vocabulary size")
    for name, kind, help_text in (
        ("num-layers", positive_int, "Transformer blocks"),
        ("num-heads", positive_int, "attention heads"),
        ("hidden-dim", positive_int, "model width"),
        ("sequence-length", at_least(2), "context length (tokens)"),
        ("dropout", rate, "dropout rate"),
        ("batch-size", positive_int, "windows per step"),
        ("steps", positive_int, "training steps"),
        ("eval-interval", positive_int, "steps between validation passes"),
        ("learning-rate", positive_float, "peak learning rate (AdamW)"),
        ("min-learning-rate", positive_float,
         "final learning rate (cosine decay)"),
        ("warmup-steps", non_negative_int, "linear warm-up steps"),
    ):
        parser.add_argument(f"--{name}", type=kind, default=None,
                            help=f"{help_text}; default from --preset")
    parser.add_argument("--weight-decay", type=float, default=0.1,
                        help="AdamW weight decay (not on biases and norms)")
    parser.add_argument("--untied", action="store_true",
                        help="separate output projection (default: tied to "
                        "the token embedding)")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="train under mixed_bfloat16 (for GPUs)")
    parser.add_argument("--max-minutes", type=positive_float, default=None,
                        help="stop training after this many minutes")
    parser.add_argument("--sample-length", type=at_least(2), default=None,
                        help="length of the printed samples (default: the "
                        "context length)")
    parser.add_argument("--seed", type=int, default=1337,
                        help="seed of the weights and the training windows")
    parser.add_argument("--output-dir", default=None,
                        help="default: runs/gpt_text/<preset>/")
    parser.add_argument("--ship", action="store_true",
                        help="also save saved_models/gpt_shakespeare.keras")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model on the first 20k characters")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="Keras progress output")
    args = parser.parse_args(argv)
    if args.smoke:
        args.preset = "smoke"
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
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


def build_model(args, tokenizer):
    """(trainer, gpt): `gpt` is the task that generates and is saved;
    `trainer` is a plain `keras.Model` over the same layers, because
    keras-hub tasks push whatever `fit` gets through tf.data and their
    preprocessor, while training here reads id windows from a PyDataset."""
    backbone = GPTBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        sequence_length=args.sequence_length,
        dropout=args.dropout,
        tie_weights=not args.untied,
    )
    preprocessor = GPTPreprocessor(tokenizer, args.sequence_length)
    gpt = GPT(backbone, preprocessor, name="gpt")
    trainer = keras.Model(gpt.input, gpt.output, name="gpt_trainer")
    trainer.compile(
        optimizer=make_optimizer(args),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return trainer, gpt


class StopAfterMinutes(keras.callbacks.Callback):
    """Ends training when another epoch would overrun a wall-clock budget."""

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60
        self.start = None

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        elapsed = time.perf_counter() - self.start
        if elapsed * (epoch + 2) / (epoch + 1) > self.seconds:
            print(f"\nstopping: the {self.seconds / 60:g}-minute budget is "
                  "spent")
            self.model.stop_training = True


def run(args):
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_bfloat16")
    os.makedirs(args.output_dir, exist_ok=True)
    text = load_text(args.data)
    if args.smoke:
        text = text[:SMOKE_CHARACTERS]
    train_text, _ = split_ids(text, 0.9)
    tokenizer = train_tokenizer(train_text, args.tokenizer, args.vocab_size)
    train_ids, val_ids = split_ids(encode_corpus(tokenizer, text), 0.9)
    unit = "char" if args.tokenizer == "character" else "token"
    print(f"corpus: {len(text):,} characters -> {len(train_ids):,} train / "
          f"{len(val_ids):,} validation tokens, vocabulary "
          f"{tokenizer.vocabulary_size()} | backend {keras.backend.backend()}")

    trainer, gpt = build_model(args, tokenizer)
    parameters = int(gpt.backbone.count_params())
    print(f"GPT: {parameters / 1e6:.2f}M parameters ({args.num_layers} layers,"
          f" {args.num_heads} heads, width {args.hidden_dim}, context "
          f"{args.sequence_length})")

    epochs = max(args.steps // args.eval_interval, 1)
    train = RandomWindows(train_ids, args.sequence_length, args.batch_size,
                          args.eval_interval, seed=args.seed)
    val_x, val_y = consecutive_windows(val_ids, args.sequence_length)
    callbacks = []
    if args.max_minutes:
        callbacks.append(StopAfterMinutes(args.max_minutes))
    start = time.perf_counter()
    history = trainer.fit(train, epochs=epochs, validation_data=(val_x, val_y),
                      validation_batch_size=args.batch_size,
                      callbacks=callbacks, verbose=args.verbose)
    seconds = time.perf_counter() - start
    history = {k: [float(v) for v in vs] for k, vs in history.history.items()}
    steps_done = len(history["loss"]) * args.eval_interval

    val_loss = history["val_loss"][-1]
    samples = {}
    sample_length = min(args.sample_length or args.sequence_length,
                        args.sequence_length)
    for name, options in (("greedy", {}),
                          ("top_k", dict(sampler="top_k", k=10, seed=1))):
        outputs = gpt.generate(list(SAMPLE_PROMPTS), max_length=sample_length,
                               **options)
        samples[name] = outputs
    for name, outputs in samples.items():
        print(f"\n--- samples ({name}) ---")
        for output in outputs:
            print(output.rstrip() + "\n")

    metrics = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "tokenizer": args.tokenizer,
        "vocabulary_size": int(tokenizer.vocabulary_size()),
        "parameters": parameters,
        "config": {k: getattr(args, k) for k in PRESETS["smoke"]},
        "steps": steps_done,
        "train_seconds": round(seconds, 1),
        "train_loss": round(history["loss"][-1], 4),
        "validation_loss": round(val_loss, 4),
        "validation_loss_unit": f"nats/{unit}",
        "best_validation_loss": round(min(history["val_loss"]), 4),
        "history": history,
        "samples": samples,
        "data": args.data or SHAKESPEARE_URL,
        "smoke": args.smoke,
    }
    model_path = save_model_atomic(
        gpt, os.path.join(args.output_dir, f"gpt_{args.preset}.keras"))
    if args.ship:
        save_model_atomic(
            gpt, os.path.join(ROOT, "saved_models", "gpt_shakespeare.keras"))
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    curve = {"loss": history["loss"], "val_loss": history["val_loss"]}
    viz.plot_training_curves(
        curve, os.path.join(args.output_dir, "loss_curve.png"),
        title=f"GPT {args.preset} ({keras.backend.backend()}), nats/{unit}, "
              f"{args.eval_interval} steps per point")
    print(f"RESULT gpt_text preset={args.preset} "
          f"backend={keras.backend.backend()} val_loss={val_loss:.4f} "
          f"nats/{unit} train_loss={history['loss'][-1]:.4f} "
          f"steps={steps_done} train_time={seconds:.0f}s "
          f"params={parameters} -> {model_path}")
    return metrics


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except DataNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
