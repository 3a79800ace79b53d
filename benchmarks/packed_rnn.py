"""Masked bidirectional GRU: `keras.layers.Bidirectional` vs zoo's
`PackedBidirectional`, per backend, in one run.

    python benchmarks/packed_rnn.py                 # jax, tensorflow, torch
    KERAS_BACKEND=torch python benchmarks/packed_rnn.py --backends current

For each backend (a fresh process each) two models with the same weights,
`Embedding(mask_zero=True) -> bidirectional GRU -> masked mean -> Dense`,
differ only in the bidirectional wrapper:

* keras: `keras.layers.Bidirectional(GRU)`, the mask passed to every step;
* packed: `zoo.layers.PackedBidirectional(GRU, strategy="packed")`, real
  tokens gathered to the front and the GRUs run with no mask;
* auto: `zoo.layers.PackedBidirectional(GRU)` as the recipe builds it, which
  packs under PyTorch and runs masked GRUs under JAX and TensorFlow.

Rows have random lengths (a quarter to all of the sequence), padded at the
end. Timed: one training step (`train_on_batch`, the recipe's 128-word
training windows) and one prediction (`predict_on_batch`, its 512-word
evaluation length); the median of `--repeats` calls after a warm-up, and the
ratio keras / zoo (above 1: zoo's is faster). The models' predictions are
compared too (largest difference from keras'). Timings are only compared within one run.
"""

import statistics
import sys
import time

from zoo.testing.benchmarks import (
    benchmark_parser,
    print_result,
    run_worker,
    selected_backends,
)


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-length", type=int, default=128)
    parser.add_argument("--predict-length", type=int, default=512)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    return parser.parse_args(argv)


def build(wrapper, args):
    import keras

    token_ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(1000, args.embedding_dim, mask_zero=True)(
        token_ids
    )
    x = wrapper(keras.layers.GRU(args.units, return_sequences=True))(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(token_ids, keras.layers.Dense(1, "sigmoid")(x))
    model.compile("adam", "binary_crossentropy")
    return model


def padded_batch(rng, batch_size, length):
    import numpy as np

    ids = rng.integers(1, 1000, (batch_size, length)).astype("int32")
    lengths = rng.integers(length // 4, length + 1, batch_size)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids


def median_seconds(fn, repeats):
    fn()  # warm-up: compilation, first-call allocations
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(args):
    import keras
    import numpy as np

    from zoo.layers import PackedBidirectional

    keras.utils.set_random_seed(0)
    models = {
        "keras": build(keras.layers.Bidirectional, args),
        "packed": build(
            lambda rnn: PackedBidirectional(rnn, strategy="packed"), args
        ),
        "auto": build(PackedBidirectional, args),
    }
    for name in ("packed", "auto"):
        models[name].set_weights(models["keras"].get_weights())
    rng = np.random.default_rng(0)
    train_ids = padded_batch(rng, args.batch_size, args.train_length)
    labels = rng.integers(0, 2, (args.batch_size, 1)).astype("float32")
    predict_ids = padded_batch(rng, args.batch_size, args.predict_length)
    reference = models["keras"].predict_on_batch(predict_ids)
    difference = max(
        float(
            np.max(
                np.abs(reference - models[name].predict_on_batch(predict_ids))
            )
        )
        for name in ("packed", "auto")
    )
    result = {
        "backend": keras.backend.backend(),
        "max_abs_difference": difference,
    }
    for name, model in models.items():
        result[name] = {
            "train_step_s": median_seconds(
                lambda m=model: m.train_on_batch(train_ids, labels),
                args.repeats,
            ),
            "predict_s": median_seconds(
                lambda m=model: m.predict_on_batch(predict_ids), args.repeats
            ),
        }
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print_result(measure(args))
        return None
    backends = selected_backends(args.backends)
    print(
        f"bidirectional GRU({args.units}) over {args.embedding_dim}-d "
        f"embeddings, batch {args.batch_size}; train step at "
        f"{args.train_length} words, predict at {args.predict_length}; "
        f"median of {args.repeats}, milliseconds"
    )
    header = f"{'backend':<11}"
    for task in ("train", "predict"):
        header += (
            f" | {task + ' keras':>13} {'packed':>8} {'ratio':>6} "
            f"{'auto':>8} {'ratio':>6}"
        )
    print(header + " | max |diff|")
    results = []
    for backend in backends:
        r = run_worker(__file__, backend, argv)
        results.append(r)
        line = f"{backend:<11}"
        for key in ("train_step_s", "predict_s"):
            keras_s = r["keras"][key]
            line += f" | {keras_s * 1e3:>13.1f}"
            for name in ("packed", "auto"):
                line += (
                    f" {r[name][key] * 1e3:>8.1f} "
                    f"{keras_s / r[name][key]:>5.2f}x"
                )
        print(line + f" | {r['max_abs_difference']:.1e}", flush=True)
    return results


if __name__ == "__main__":
    main()
