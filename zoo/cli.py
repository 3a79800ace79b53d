"""Command-line helpers that the recipes (`recipes/`) and the benchmarks
(`benchmarks/`) share: argparse types that reject impossible flag values up
front, so a typo gives one `error: argument --epochs: ...` line instead of a
traceback from deep inside Keras or tf.data; a `HelpFormatter` that states
each default once; the accelerator flags (`add_accelerator_flags`,
`setup_accelerators`, `accelerator_metrics`); and `fill_from_preset`, which
completes a recipe's flags from its preset."""

import argparse
import os


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults in `--help`, except where a flag's help already
    says what its default is, or the default is None (the help says what
    happens without the flag): no "(default: attention) (default: None)"."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is None:
            return text
        return super()._get_help_string(action)


def _number(kind, text):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}; "
            f"got {text!r}"
        ) from None


def at_least(minimum):
    """An int type accepting values >= `minimum`."""

    def parse(text):
        value = _number(int, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be at least {minimum}; got {value}"
            )
        return value

    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)


def rate(text):
    """A float in [0, 1): dropout rates and held-out fractions."""
    value = _number(float, text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1); got {value}")
    return value


def open_rate(text):
    """A float in (0, 1): a share that must choose something."""
    value = _number(float, text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1); got {value}")
    return value


def positive_float(text):
    value = _number(float, text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {value}")
    return value


def add_accelerator_flags(parser, mixed_default=None):
    """`--mixed-precision`, `--tf32/--no-tf32`, `--distribute` and
    `--model-parallel`: the flags every recipe shares for GPUs and several
    devices (`setup_accelerators` applies them)."""
    group = parser.add_argument_group("precision and devices")
    group.add_argument(
        "--mixed-precision",
        choices=("bfloat16", "float16"),
        nargs="?",
        const="bfloat16",
        default=mixed_default,
        help="a Keras mixed dtype policy, bfloat16 when the "
        "flag stands alone (float16 adds dynamic loss "
        "scaling)",
    )
    group.add_argument(
        "--tf32",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="allow TensorFloat-32 in float32 matmuls on GPUs that have it",
    )
    group.add_argument(
        "--distribute",
        choices=("data", "model"),
        default=None,
        help="data-parallel over every device "
        "(JAX, TensorFlow) or a model-parallel Transformer "
        "layout (JAX); see zoo.distribute",
    )
    group.add_argument(
        "--model-parallel",
        type=positive_int,
        default=2,
        help="devices on the model axis with --distribute model",
    )
    return group


def setup_accelerators(args, batch_size=None):
    """Applies the accelerator flags: the dtype policy and TF32 setting,
    then the distribution. Returns the strategy whose `scope()` the model
    is built and compiled in. A global batch that the data-parallel
    replicas cannot split evenly, or a mode the backend lacks, exits with
    one `error:` line."""
    from zoo import distribute, precision

    precision.configure(args.mixed_precision, tf32=args.tf32)
    try:
        strategy = distribute.configure(args.distribute, args.model_parallel)
        if batch_size is not None:
            distribute.check_global_batch(batch_size, strategy)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    return strategy


def accelerator_metrics(args, strategy, speed=None):
    """The accelerator settings of a run, and the training speed that a
    `zoo.callbacks.Throughput` (`speed`) measured, for its metrics.json."""
    metrics = {
        "mixed_precision": args.mixed_precision,
        "distribute": args.distribute,
        "replicas": strategy.num_replicas_in_sync,
    }
    if speed is not None:
        metrics["throughput"] = speed.summary()
    return metrics


def add_average_epochs_flag(parser):
    """Adds `--average-epochs N` (default 1): a recipe that ends with the
    mean of its last N epochs' weights (`zoo.callbacks.AverageLastEpochs`).
    """
    parser.add_argument(
        "--average-epochs",
        type=positive_int,
        default=1,
        help="end with the mean of the weights of the last N epochs "
        "(checkpoint averaging; 1: the last epoch's)",
    )


def add_preset_flags(parser, flags):
    """Adds a recipe's flags whose default comes from its preset: `flags`
    is `(name, type, help)` triples, each becoming `--name` with the
    default None (which `fill_from_preset`, or the recipe, replaces by the
    preset's value) and the help text followed by "; default from the
    preset".

    Example:

    >>> parser = argparse.ArgumentParser()
    >>> add_preset_flags(parser, (
    ...     ("epochs", positive_int, "training epochs"),
    ...     ("dropout", rate, "dropout rate"),
    ... ))
    >>> args = parser.parse_args(["--epochs", "3"])
    >>> args.epochs, args.dropout
    (3, None)
    """
    for name, kind, text in flags:
        parser.add_argument(
            f"--{name}",
            type=kind,
            default=None,
            help=f"{text}; default from the preset",
        )


def fill_from_preset(parser, args, presets, runs_folder):
    """Completes a recipe's flags from its preset: `--model` must name the
    preset's kind of backbone (one `error:` line otherwise) and becomes it;
    flags left at None take the preset's training, backbone and tokenizer
    (`vocab_size`) settings; `--output-dir` defaults to
    `<runs_folder>/<preset>`.

    Example (a flag given on the command line wins over the preset):

    >>> from zoo.models.seq2seq.seq2seq_presets import PRESETS
    >>> parser = argparse.ArgumentParser()
    >>> for flag in ("--preset", "--model", "--output-dir"):
    ...     _ = parser.add_argument(flag)
    >>> for flag in ("--epochs", "--num-layers", "--vocab-size"):
    ...     _ = parser.add_argument(flag, type=int)
    >>> argv = ["--preset", "smoke", "--epochs", "1"]
    >>> args = fill_from_preset(parser, parser.parse_args(argv), PRESETS,
    ...                         os.path.join("runs", "translate"))
    >>> args.model, args.epochs, args.num_layers, args.vocab_size
    ('transformer', 1, 1, 120)
    >>> args.output_dir
    'runs/translate/smoke'
    """
    kind = presets.part(args.preset, "backbone")["kind"]
    if args.model is not None and args.model != kind:
        parser.error(
            f"--model {args.model} and --preset {args.preset} "
            f"disagree: the preset is a {kind} model"
        )
    args.model = kind
    defaults = {
        **presets.part(args.preset, "training"),
        **presets.part(args.preset, "backbone"),
        "vocab_size": presets.part(args.preset, "tokenizer")["vocabulary_size"],
    }
    for key, value in defaults.items():
        if hasattr(args, key) and getattr(args, key) is None:
            setattr(args, key, value)
    if args.output_dir is None:
        args.output_dir = os.path.join(runs_folder, args.preset)
    return args
