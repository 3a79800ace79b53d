"""Attention's cost against sequence length: time and memory of one
attention call, the fused path against the explicit softmax, per backend.

    python benchmarks/attention_scaling.py --plot docs/attention_scaling.png
    KERAS_BACKEND=jax python benchmarks/attention_scaling.py --backends current \\
        --lengths 128,256,512,1024,2048,4096

The course's remark: attention costs O(n^2 d) time and, when the weights
are materialised, O(n^2) memory per head. One causal self-attention call,
`zoo.layers.scaled_dot_product_attention` on `(batch, n, heads, head_dim)`
tensors, compiled the backend's way (`jax.jit`, `tf.function(jit_compile)`,
PyTorch eager):

* `fused`: `keras.ops.dot_product_attention` (cuDNN / flash kernels on a
  GPU where the backend has them; on a CPU the backends' own fused or
  composite implementation);
* `explicit`: the softmax(QK^T / sqrt(d)) V path that also returns the
  weights (what `return_attention_scores=True` runs).

Time is the fastest of `--repeats` rounds of `--steps` calls. Memory: under
JAX the compiled program's temporary buffers (XLA's memory analysis: what
one call needs beyond its inputs and outputs, on any device); under PyTorch
on a GPU the peak allocated during the call; elsewhere not measured. Lengths
grow until one does not fit (an out-of-memory error ends the row).
"""

import os
import sys
import time

from zoo.testing.benchmarks import (
    accelerator,
    benchmark_parser,
    run_benchmark,
)

PATHS = ("fused", "explicit")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--lengths",
        default="128,256,512,1024,2048",
        help="comma-separated sequence lengths",
    )
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument(
        "--dtype", default="float32", choices=("float32", "bfloat16", "float16")
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="draw time and memory against length here",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    try:
        args.lengths = [int(n) for n in args.lengths.split(",") if n]
    except ValueError:
        parser.error(f"--lengths {args.lengths!r}: integers like 128,256")
    if (
        not args.lengths
        or min(
            args.lengths
            + [
                args.batch_size,
                args.num_heads,
                args.head_dim,
                args.steps,
                args.repeats,
            ]
        )
        < 1
    ):
        parser.error("lengths, sizes, --steps and --repeats must be >= 1")
    return args


def _compiled(fn):
    """`fn` compiled the current backend's way."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    return fn


def _attention(path):
    from zoo.layers import scaled_dot_product_attention

    def call(q, k, v):
        out = scaled_dot_product_attention(
            q, k, v, is_causal=True, return_weights=path == "explicit"
        )
        return out[0] if path == "explicit" else out

    return call


def _memory_bytes(fn, q, k, v):
    """Temporary memory of one call, or None where it is not measured."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":  # `fn` is the jitted call: its compiled program
        analysis = fn.lower(q, k, v).compile().memory_analysis()
        return None if analysis is None else int(analysis.temp_size_in_bytes)
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn(q, k, v)
            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated() - base)
    return None


def measure_length(path, length, args):
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    shape = (args.batch_size, length, args.num_heads, args.head_dim)
    q, k, v = (
        keras.ops.convert_to_tensor(
            rng.normal(size=shape).astype("float32"), dtype=args.dtype
        )
        for _ in range(3)
    )
    fn = _compiled(_attention(path))

    def run():  # a float32 scalar: TensorFlow gives no 0-d bfloat16 array
        keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.sum(fn(q, k, v)), "float32")
        )

    run()  # compiles
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            run()
        best = min(best, (time.perf_counter() - start) / args.steps)
    return {
        "seconds": round(best, 6),
        "memory_bytes": _memory_bytes(fn, q, k, v),
    }


def _out_of_memory(error):
    text = f"{type(error).__name__} {error}".lower()
    return any(
        word in text
        for word in (
            "out of memory",
            "resource_exhausted",
            "resourceexhausted",
            "outofmemory",
            "can't allocate",
            "failed to allocate",
        )
    )


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras

    rows = {path: [] for path in PATHS}
    for path in PATHS:
        for length in args.lengths:
            try:
                rows[path].append(
                    {"length": length, **measure_length(path, length, args)}
                )
            except Exception as error:  # the first length that does not fit
                if not _out_of_memory(error):
                    raise
                rows[path].append({"length": length, "out_of_memory": True})
                break
    device, _ = accelerator()
    return {
        "backend": keras.backend.backend(),
        "device": device,
        "dtype": args.dtype,
        "rows": rows,
    }


def header(args):
    return (
        f"causal attention, batch {args.batch_size}, {args.num_heads} "
        f"heads of {args.head_dim}, {args.dtype}: ms per call "
        "(temporary MiB)\n"
        f"{'backend':<11} {'path':<9} "
        + " ".join(f"{n:>15}" for n in args.lengths)
    )


def row(backend, result):
    lines = []
    for path, cells in result["rows"].items():
        texts = []
        for cell in cells:
            if cell.get("out_of_memory"):
                texts.append(f"{'OOM':>15}")
                continue
            memory = cell["memory_bytes"]
            text = f"{cell['seconds'] * 1e3:.2f}"
            if memory is not None:
                text += f" ({memory / 2**20:.0f})"
            texts.append(f"{text:>15}")
        lines.append(f"{backend:<11} {path:<9} " + " ".join(texts))
    return "\n".join(lines)


def plot(results, path):
    """Time (and, where measured, memory) against length, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for result in results:
        for name, cells in result["rows"].items():
            cells = [c for c in cells if not c.get("out_of_memory")]
            label = f"{result['backend']} {name}"
            style = "-" if name == "fused" else "--"
            left.plot(
                [c["length"] for c in cells],
                [c["seconds"] * 1e3 for c in cells],
                style,
                marker="o",
                label=label,
            )
            measured = [c for c in cells if c["memory_bytes"] is not None]
            if measured:
                right.plot(
                    [c["length"] for c in measured],
                    [c["memory_bytes"] / 2**20 for c in measured],
                    style,
                    marker="o",
                    label=label,
                )
    for axis, what in ((left, "ms per call"), (right, "temporary MiB")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("sequence length n")
        axis.set_ylabel(what)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    left.set_title("time of one causal attention call")
    right.set_title("memory beyond inputs and outputs")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    results = run_benchmark(__file__, argv, parse_args, measure, header, row)
    args = parse_args(argv)
    if results and args.plot:
        print(f"plot -> {plot(results, args.plot)}")
    return results


if __name__ == "__main__":
    main()
