"""Translation speed: cached vs recomputed decoding, greedy and beam, per
backend, in one run.

    python benchmarks/translation.py --data-dir ../shared/data/multi30k
    KERAS_BACKEND=jax python benchmarks/translation.py --backends current

For each backend (a fresh process each) a translator (by default the shipped
`saved_models/translate_de_en.keras`; `--preset NAME` builds an untrained one
of that preset instead) translates `--sentences` German sentences of the
validation set (`--data-dir`; generated sentences without it) in batches of
`--batch-size`, four ways:

* greedy and beam search (`--beam` beams, GNMT length penalty 0.6);
* cached: `generate()` as users call it. The encoder runs once, the
  cross-attention keys and values are computed once per sentence, and each
  step runs the decoder on one new position, reading earlier positions'
  keys and values from the self-attention cache;
* recomputed: `generate(use_cache=False)`, which runs the whole decoder over
  the target window at every step (static shapes, so it compiles; causal
  masking keeps the result the same; greedy outputs are compared here).

Every configuration is compiled (jit on JAX, XLA tf.function on TensorFlow;
PyTorch runs eagerly under no_grad) and warmed up on one batch before the
timed pass over all sentences. The table shows sentences per second and
the speed-up of the cache. Under PyTorch the cached runs are timed once
more with `compile(jit_compile=True)`, which compiles the one-token decode
step with `torch.compile` (`--no-torch-compile` skips them). Timings are
only compared within one run on one machine.
"""

import os
import sys
import time

from zoo.testing.benchmarks import (
    benchmark_parser,
    print_compiled_decoding,
    print_result,
    run_worker,
    selected_backends,
    write_results,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_MODEL = os.path.join(ROOT, "saved_models", "translate_de_en.keras")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="a saved Translator (.keras)"
    )
    parser.add_argument(
        "--preset",
        default=None,
        help="instead of --model: an untrained translator "
        "of this zoo.models.seq2seq preset",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Multi30k folder; its val.de is translated "
        "(default: generated German sentences)",
    )
    parser.add_argument(
        "--sentences",
        type=int,
        default=256,
        help="how many validation sentences",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--no-torch-compile",
        dest="torch_compile",
        action="store_false",
        help="PyTorch: skip the cached runs with the decode "
        "step compiled (compile(jit_compile=True))",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if args.sentences < 1 or args.batch_size < 1 or args.beam < 2:
        parser.error("--sentences and --batch-size must be >= 1, --beam >= 2")
    return args


def load_translator(args):
    import keras

    import zoo  # noqa: F401  (registers the zoo classes)
    from zoo.data.multi30k import make_synthetic_pairs
    from zoo.data.tokenizers import train_subword_tokenizer
    from zoo.models.seq2seq import TranslationPreprocessor, Translator

    if args.preset is None:
        if not os.path.exists(args.model):
            raise SystemExit(
                f"error: no model at {args.model}; train one "
                "with recipes/translate.py or pass --preset"
            )
        return keras.saving.load_model(args.model), os.path.basename(args.model)
    keras.utils.set_random_seed(0)
    german, english = make_synthetic_pairs(400, seed=0)
    tokenizer = train_subword_tokenizer(german + english, 120)
    preprocessor = TranslationPreprocessor.from_preset(
        args.preset, tokenizer=tokenizer
    )
    return Translator.from_preset(args.preset, preprocessor=preprocessor), (
        f"untrained {args.preset}"
    )


def sentences(args):
    if args.data_dir is not None:
        from zoo.data.multi30k import load_multi30k

        german = load_multi30k(args.data_dir)["validation"][0]
    else:
        from zoo.data.multi30k import make_synthetic_pairs

        german = make_synthetic_pairs(args.sentences, seed=1)[0]
    return list(german[: args.sentences])


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras

    translator, name = load_translator(args)
    german = sentences(args)
    batches = [
        german[i : i + args.batch_size]
        for i in range(0, len(german), args.batch_size)
    ]
    result = {
        "backend": keras.backend.backend(),
        "model": name,
        "parameters": int(translator.count_params()),
        "sentences": len(german),
        "batch_size": args.batch_size,
    }
    outputs = {}
    searches = (
        ("greedy", {"sampler": "greedy"}),  # whatever sampler the file keeps
        (
            f"beam{args.beam}",
            dict(sampler="beam", num_beams=args.beam, length_penalty=0.6),
        ),
    )
    for search, options in searches:
        for name, use_cache in (("cached", True), ("recomputed", False)):
            result[f"{search}_{name}"], outputs[search, name] = timed(
                translator, batches, len(german), use_cache=use_cache, **options
            )
        result[f"{search}_speedup"] = round(
            result[f"{search}_recomputed"]["seconds"]
            / result[f"{search}_cached"]["seconds"],
            2,
        )
        result[f"{search}_same_output"] = (
            outputs[search, "cached"] == outputs[search, "recomputed"]
        )
    if keras.backend.backend() == "torch" and args.torch_compile:
        # The decode step under torch.compile, as users ask for it.
        translator.compile(jit_compile=True)
        for search, options in searches:
            timing, out = timed(translator, batches, len(german), **options)
            result[f"{search}_compiled"] = {
                **timing,
                "same_output": out == outputs[search, "cached"],
                "compiled_over_eager": round(
                    result[f"{search}_cached"]["seconds"] / timing["seconds"], 2
                ),
            }
    result["example"] = {
        "source": german[0],
        "greedy": outputs["greedy", "cached"][0],
    }
    result["beam"] = args.beam
    return result


def timed(translator, batches, count, **options):
    """(timing, translations) of `generate` over `batches`, after one
    untimed call per batch shape (which compiles for it)."""
    start = time.perf_counter()
    for batch in {len(b): b for b in batches}.values():
        translator.generate(batch, **options)
    first = time.perf_counter() - start
    start = time.perf_counter()
    out = []
    for batch in batches:
        out += translator.generate(batch, **options)
    seconds = time.perf_counter() - start
    return {
        "warm_up_seconds": round(first, 3),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(count / seconds, 2),
    }, out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print_result(measure(args))
        return None
    backends = selected_backends(args.backends)
    beam = f"beam{args.beam}"
    results = []
    header = None
    for backend in backends:
        # Workers get the same flags; only this process writes --json.
        r = run_worker(__file__, backend, argv)
        results.append(r)
        if header is None:
            print(
                f"{r['model']} ({r['parameters'] / 1e6:.1f}M parameters):"
                f" {r['sentences']} sentences, batches of "
                f"{r['batch_size']}; sentences per second"
            )
            print(
                f"{'backend':<11} {'greedy':>8} {'recomp.':>8} "
                f"{'speed-up':>9} | {beam:>8} {'recomp.':>8} "
                f"{'speed-up':>9} | same greedy"
            )
            header = True
        print(
            f"{backend:<11} "
            f"{r['greedy_cached']['sentences_per_second']:>8.2f} "
            f"{r['greedy_recomputed']['sentences_per_second']:>8.2f} "
            f"{r['greedy_speedup']:>8.2f}x | "
            f"{r[beam + '_cached']['sentences_per_second']:>8.2f} "
            f"{r[beam + '_recomputed']['sentences_per_second']:>8.2f} "
            f"{r[beam + '_speedup']:>8.2f}x | {r['greedy_same_output']}",
            flush=True,
        )
        print_compiled_decoding(
            backend, r, ("greedy", beam), "sentences_per_second", "sentences/s"
        )
    print(
        "cached: one new decoder position per step, earlier keys/values "
        "from the cache; recomp.: generate(use_cache=False), the decoder "
        "over the whole target window at every step"
    )
    write_results(args, results)
    return results


if __name__ == "__main__":
    main()
