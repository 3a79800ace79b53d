"""What the per-backend benchmarks in `benchmarks/` share: each runs once
per backend, in a fresh Python process (the plumbing is
`zoo.testing.backends`): Keras picks its backend when it is first imported,
so one process measures one.

A benchmark script calls `run_worker(__file__, backend, argv)` for each
backend; that re-runs the script with `--worker` and the same flags, under
`KERAS_BACKEND=backend`, and the worker prints its result with
`print_result`.
"""

import argparse
import json
import os
import time

from zoo.accelerator import (
    accelerator,
    peak_tflops,  # noqa: F401
)
from zoo.cli import HelpFormatter
from zoo.testing.backends import (
    BACKENDS,  # noqa: F401
    python_command,
    run_on_backend,
    selected_backends,
)

RESULT_PREFIX = "RESULT "


def benchmark_parser(description):
    """An `ArgumentParser` with the flags every per-backend benchmark takes:
    `--backends` (read by `selected_backends`) and the hidden `--worker`
    (added by `run_worker`). The script adds its own."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=HelpFormatter
    )
    parser.add_argument(
        "--backends",
        default="all",
        help="'all', 'current' or a comma-separated list",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def add_precision_flag(parser):
    """`--mixed-precision bfloat16|float16` (Keras' mixed policies, as the
    recipes take it); `configure_precision(args)` applies it in a worker."""
    parser.add_argument(
        "--mixed-precision",
        default=None,
        choices=("bfloat16", "float16"),
        help="default: float32 (TF32 allowed on a GPU)",
    )


def configure_precision(args):
    """Applies `--mixed-precision` (and TF32 on) in a worker; returns the
    compute dtype's name, for the results and the FLOPs peak."""
    from zoo import precision

    precision.configure(args.mixed_precision)
    return args.mixed_precision or "float32"


def memory_and_device(result):
    """Adds `device` and the accelerator's `peak_memory_gib` (None without
    one) to a worker's result."""
    device, peak = accelerator()
    result["device"] = device
    result["peak_memory_gib"] = None if peak is None else round(peak / 2**30, 2)
    return result


def jax_compiled_step(model, inputs, targets, loss, hlo_path=None):
    """What XLA compiles for `model`'s loss and gradients on one batch
    (`inputs`, `targets`, `loss(targets, outputs)`; training mode), under
    JAX: `cudnn_attention`, the cuDNN fused-attention kernels in it (0
    where attention runs as XLA's own ops: always on a CPU, and on a GPU
    where Keras fell back from cuDNN), and XLA's own estimates of its
    `gflop` and the `gbytes` its kernels read and write (after fusion:
    memory traffic that one model has and another lacks shows here).
    Writes the optimised HLO to `hlo_path` when given. None on the other
    backends. Compiles only; nothing runs."""
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax

    trainable = [v.value for v in model.trainable_variables]
    other = [v.value for v in model.non_trainable_variables]

    def step(trainable, other, inputs, targets):
        outputs, _ = model.stateless_call(
            trainable, other, inputs, training=True
        )
        return loss(targets, outputs)

    compiled = (
        jax.jit(jax.value_and_grad(step))
        .lower(trainable, other, inputs, targets)
        .compile()
    )
    text = compiled.as_text()
    if hlo_path:
        os.makedirs(os.path.dirname(hlo_path) or ".", exist_ok=True)
        with open(hlo_path, "w") as f:
            f.write(text)
    cost = compiled.cost_analysis()
    cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
    return {
        "cudnn_attention": text.count('custom_call_target="__cudnn$fmha'),
        "gflop": float(f"{float(cost.get('flops', 0.0)) / 1e9:.4g}"),
        "gbytes": float(f"{float(cost.get('bytes accessed', 0.0)) / 1e9:.4g}"),
    }


def memory_cell(result, width):
    """A result's `peak_memory_gib` for a table cell: "1.91", or "-"
    without an accelerator."""
    memory = result.get("peak_memory_gib")
    return f"{'-' if memory is None else f'{memory:.2f}':>{width}}"


def print_result(result):
    """What a worker prints: one line its parent finds and parses."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(script, backend, argv):
    """Runs `script --worker *argv` under `backend`; returns what it printed
    with `print_result`, or raises with the end of its output."""
    run = run_on_backend(
        python_command(os.path.abspath(script), "--worker", *argv), backend
    )
    for line in run.output.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    raise RuntimeError(f"{backend} worker failed:\n{run.output[-3000:]}")


def run_benchmark(script, argv, parse_args, measure, header, row):
    """The `main` of a per-backend benchmark.

    In a worker (`--worker`), prints `measure(args)`. Otherwise prints
    `header(args)`, runs the script once per selected backend, prints
    `row(backend, result)` as each result arrives, writes every result to
    `args.json` when that flag is set, and returns the results.
    """
    args = parse_args(argv)
    if args.worker:
        print_result(measure(args))
        return None
    print(header(args), flush=True)
    results = []
    for backend in selected_backends(args.backends):
        # Workers get the same flags; only this process writes --json.
        result = run_worker(script, backend, argv)
        results.append(result)
        print(row(backend, result), flush=True)
    write_results(args, results)
    return results


def print_compiled_decoding(backend, result, searches, rate, unit):
    """Prints one line per search of `result` timed again with the decode
    step compiled (`result[f"{search}_compiled"]`: the timing under
    `rate`, `compiled_over_eager`, `warm_up_seconds`, `same_output`), as
    the translation and captioning benchmarks measure it under PyTorch;
    nothing for a search without one."""
    for search in searches:
        c = result.get(f"{search}_compiled")
        if c:
            print(
                f"{backend}: {search}, decode step compiled "
                f"(jit_compile=True): {c[rate]:.2f} {unit}, compiled / "
                f"eager {c['compiled_over_eager']:.2f}x (first calls "
                f"{c['warm_up_seconds']:.1f} s), same output: "
                f"{c['same_output']}",
                flush=True,
            )


def write_results(args, results):
    """Writes the flags and every backend's results to `args.json`, when
    the script has that flag and it is set."""
    if getattr(args, "json", None):
        from zoo.saving import write_json_atomic

        write_json_atomic({"args": vars(args), "results": results}, args.json)


def fastest_rounds(fns, repeats, calls=1, warmups=1):
    """`{key: seconds per call}` for `fns` (`{key: callable}`): each one is
    called `warmups` times (compiling, warming caches), then `repeats`
    rounds run every function `calls` times in turn, and the fastest round
    of each is kept. Interleaving spreads the machine's drift over all of
    them alike."""
    for fn in fns.values():
        for _ in range(warmups):
            fn()
    best = {}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            seconds = (time.perf_counter() - start) / calls
            best[key] = min(best.get(key, float("inf")), seconds)
    return best
