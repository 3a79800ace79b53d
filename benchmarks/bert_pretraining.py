"""Masked-LM pretraining throughput, zoo's BERT against keras-hub's, per
backend, in one run.

    python benchmarks/bert_pretraining.py                  # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/bert_pretraining.py --backends current

For each backend (a fresh process each) the preset's `BertMaskedLM` (zoo)
and `keras_hub.models.BertMaskedLM` of the same size train on the same
batches of random token ids, masked BERT's way by `zoo.data.masked_lm`
(15%): AdamW, `fit` on NumPy arrays, compiled (jit on JAX, XLA on
TensorFlow; PyTorch eager). After a warm-up epoch, `--steps` steps are
timed; the table shows packed tokens per second (batch x sequence length /
step time) and zoo / keras-hub. Timings are only compared within one run on
one machine.
"""

import sys
import time

from zoo.testing.benchmarks import (
    add_precision_flag,
    benchmark_parser,
    configure_precision,
    memory_and_device,
    memory_cell,
    run_benchmark,
)


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset", default="cpu_mini", help="a zoo.models.bert preset"
    )
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--steps", type=int, default=10, help="timed training steps"
    )
    add_precision_flag(parser)
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if (
        min(
            args.vocabulary_size - 5,
            args.sequence_length - 2,
            args.batch_size,
            args.steps,
        )
        < 1
    ):
        parser.error(
            "sizes and --steps must leave at least one token, row and step"
        )
    return args


def batches(args):
    """`steps` masked batches of random ids, the same on every backend."""
    import numpy as np

    from zoo.data.masked_lm import mask_tokens

    rng = np.random.default_rng(0)
    rows = args.batch_size * args.steps
    ids = rng.integers(
        5, args.vocabulary_size, (rows, args.sequence_length)
    ).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    return mask_tokens(
        ids,
        rng,
        vocabulary_size=args.vocabulary_size,
        mask_token_id=4,
        special_token_ids=[0, 1, 2, 3, 4],
        mask_selection_length=max(int(0.2 * args.sequence_length), 1),
    )


def time_training(model, x, y, weights, args):
    import keras

    model.compile(optimizer=keras.optimizers.AdamW(1e-4))
    keras.Model.fit(
        model,
        x,
        y,
        sample_weight=weights,
        batch_size=args.batch_size,
        epochs=1,
        verbose=0,
        shuffle=False,
    )  # compiles
    start = time.perf_counter()
    history = keras.Model.fit(
        model,
        x,
        y,
        sample_weight=weights,
        batch_size=args.batch_size,
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    seconds = (time.perf_counter() - start) / args.steps
    return {
        "seconds_per_step": round(seconds, 4),
        "tokens_per_second": round(
            args.batch_size * args.sequence_length / seconds, 1
        ),
        "loss": round(float(history.history["loss"][-1]), 4),
        "parameters": int(model.count_params()),
    }


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras
    import keras_hub

    from zoo.models.bert import PRESETS, BertBackbone, BertMaskedLM

    dtype = configure_precision(args)
    x, y, weights = batches(args)
    size = PRESETS.part(args.preset, "backbone")
    size["max_sequence_length"] = max(
        size["max_sequence_length"], args.sequence_length
    )
    keras.utils.set_random_seed(0)
    zoo_model = BertMaskedLM(BertBackbone(args.vocabulary_size, **size))
    result = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "dtype": dtype,
        "zoo": time_training(zoo_model, x, y, weights, args),
    }
    memory_and_device(result)  # zoo's alone, before the peer runs
    keras.utils.set_random_seed(0)
    peer = keras_hub.models.BertMaskedLM(
        keras_hub.models.BertBackbone(args.vocabulary_size, **size),
        preprocessor=None,
    )
    result["keras_hub"] = time_training(peer, x, y, weights, args)
    result["zoo_over_keras_hub"] = round(
        result["zoo"]["tokens_per_second"]
        / result["keras_hub"]["tokens_per_second"],
        3,
    )
    return result


def header(args):
    return (
        f"BertMaskedLM {args.preset}, batches of {args.batch_size} x "
        f"{args.sequence_length} tokens, {args.steps} timed AdamW steps, "
        f"{args.mixed_precision or 'float32'}\n"
        f"{'backend':<11} {'zoo tok/s':>10} {'keras-hub tok/s':>16} "
        f"{'zoo / keras-hub':>16} {'zoo peak GiB':>13}"
    )


def row(backend, r):
    return (
        f"{backend:<11} {r['zoo']['tokens_per_second']:>10.0f} "
        f"{r['keras_hub']['tokens_per_second']:>16.0f} "
        f"{r['zoo_over_keras_hub']:>15.2f}x " + memory_cell(r, 13)
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main()
