"""GPT training throughput and model FLOPs utilisation, zoo's GPT against
keras-hub's GPT-2 machinery of the same size, per backend, in one run.

    python benchmarks/gpt_training.py --preset nanogpt    # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/gpt_training.py --backends current \\
        --preset nanogpt --mixed-precision bfloat16

For each backend (a fresh process each) the preset's `GPT` (zoo) and
`keras_hub.models.GPT2CausalLM` with a `GPT2Backbone` of the same width,
depth, heads and context train on the same random character ids: AdamW,
`fit` on NumPy arrays, compiled (jit on JAX, XLA on TensorFlow; PyTorch
eager, or `torch.compile` with `--jit-compile`). After a warm-up epoch
(which compiles; its time is the last column, with TorchDynamo's graphs
and graph breaks under PyTorch with `--jit-compile`), `--steps` steps are
timed. The table shows tokens per second, zoo /
keras-hub, the peak accelerator memory of the process, and zoo's model
FLOPs utilisation as nanoGPT computes it: (6 N + 12 L H Q T) FLOPs per
token (N parameters without the position table, L
layers, H heads, Q head width, T context) against the device's dense peak
for the compute dtype (TF32 for float32). Under JAX the last column counts
the cuDNN fused-attention kernels XLA compiled into each model's training
step (forward and backward; 0 on a CPU, and on a GPU where Keras fell back
to XLA's own attention ops); the JSON adds XLA's FLOP and memory-traffic
estimates of each step, and `--hlo-dir` keeps the optimised HLO, to tell
where one model's step spends what the other's does not.
`--approximate-gelu` also times zoo's GPT with keras-hub GPT-2's tanh GELU
(zoo's default is the exact one), the one place where the two models'
blocks compute different functions. Timings are only compared within
one run on one machine.
"""

import os
import sys
import time

from zoo.testing.benchmarks import (
    accelerator,
    add_precision_flag,
    benchmark_parser,
    configure_precision,
    jax_compiled_step,
    peak_tflops,
    run_benchmark,
)


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--preset", default="nanogpt", help="a zoo.models.gpt preset"
    )
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        default=65,
        help="Tiny Shakespeare's characters",
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="default: the preset's"
    )
    parser.add_argument(
        "--steps", type=int, default=20, help="timed training steps"
    )
    add_precision_flag(parser)
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile the training step where Keras' "
        "default does not (PyTorch: torch.compile)",
    )
    parser.add_argument(
        "--approximate-gelu",
        action="store_true",
        help="also time zoo's GPT with GELU's tanh "
        "approximation (keras-hub GPT-2's activation)",
    )
    parser.add_argument(
        "--no-peer", action="store_true", help="time zoo's GPT only"
    )
    parser.add_argument(
        "--hlo-dir",
        default=None,
        help="JAX: write each model's optimised training HLO here",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if min(args.vocabulary_size, args.steps, args.batch_size or 1) < 1:
        parser.error("sizes and --steps must be at least 1")
    return args


def time_training(model, x, y, batch_size, steps, jit_compile="auto"):
    import keras

    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    counters = _dynamo_counters(jit_compile)
    start = time.perf_counter()
    keras.Model.fit(
        model, x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False
    )  # compiles
    warm_up = time.perf_counter() - start
    start = time.perf_counter()
    history = keras.Model.fit(
        model, x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False
    )
    seconds = (time.perf_counter() - start) / steps
    result = {
        "seconds_per_step": round(seconds, 5),
        "tokens_per_second": round(x["token_ids"].size / steps / seconds, 1),
        "loss": round(float(history.history["loss"][-1]), 4),
        "parameters": int(model.count_params()),
        "warm_up_seconds": round(warm_up, 2),
    }
    if counters is not None:  # what torch.compile made of the step
        result["graphs"] = int(counters["stats"]["unique_graphs"])
        result["graph_breaks"] = int(sum(counters["graph_break"].values()))
    return result


def _dynamo_counters(jit_compile):
    """TorchDynamo's counters, cleared, when this step is torch.compile'd
    (else None)."""
    import keras

    if keras.backend.backend() != "torch" or jit_compile is not True:
        return None
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    return torch._dynamo.utils.counters


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras
    import keras_hub
    import numpy as np

    from zoo.models.gpt import GPT, PRESETS, GPTBackbone

    dtype = configure_precision(args)
    jit_compile = True if args.jit_compile else "auto"
    size = PRESETS.part(args.preset, "backbone")
    size["dropout"] = 0.0  # the same work as the peer's
    context = size["sequence_length"]
    batch = (
        args.batch_size or PRESETS.part(args.preset, "training")["batch_size"]
    )
    rng = np.random.default_rng(0)
    ids = rng.integers(
        0, args.vocabulary_size, (batch * args.steps, context + 1)
    ).astype("int32")
    x = {
        "token_ids": ids[:, :-1],
        "padding_mask": np.ones((len(ids), context), bool),
    }
    y = ids[:, 1:]
    batch_x = {name: value[:batch] for name, value in x.items()}
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def compiled_step(model, name):  # JAX: what XLA made of it
        return jax_compiled_step(
            model,
            batch_x,
            y[:batch],
            loss,
            args.hlo_dir
            and os.path.join(
                args.hlo_dir, f"{name}_{keras.backend.backend()}.hlo.txt"
            ),
        )

    keras.utils.set_random_seed(0)
    zoo_model = GPT(GPTBackbone(args.vocabulary_size, **size))
    result = {
        "backend": keras.backend.backend(),
        "preset": args.preset,
        "batch_size": batch,
        "context": context,
        "dtype": dtype,
        "jit_compile": args.jit_compile,
        "zoo": time_training(zoo_model, x, y, batch, args.steps, jit_compile),
    }
    device, peak_bytes = accelerator()
    result["device"] = device
    result["zoo"]["compiled"] = compiled_step(zoo_model, "zoo")
    result["zoo"]["peak_memory_gib"] = (
        None if peak_bytes is None else round(peak_bytes / 2**30, 2)
    )
    per_token = zoo_model.backbone.flops_per_token()
    peak = peak_tflops(device, dtype)
    result["zoo"]["model_tflops"] = round(
        per_token * result["zoo"]["tokens_per_second"] / 1e12, 2
    )
    result["zoo"]["mfu"] = (
        None if peak is None else round(result["zoo"]["model_tflops"] / peak, 4)
    )
    if args.approximate_gelu:  # the one function keras-hub's step differs in
        del zoo_model
        keras.utils.set_random_seed(0)
        approximate = GPT(
            GPTBackbone(
                args.vocabulary_size, **size, activation="gelu_approximate"
            )
        )
        result["zoo_gelu_approximate"] = time_training(
            approximate, x, y, batch, args.steps, jit_compile
        )
        result["zoo_gelu_approximate"]["compiled"] = compiled_step(
            approximate, "zoo_gelu_approximate"
        )
        del approximate
    if not args.no_peer:
        keras.utils.set_random_seed(0)
        peer_backbone = keras_hub.models.GPT2Backbone(
            vocabulary_size=args.vocabulary_size,
            num_layers=size["num_layers"],
            num_heads=size["num_heads"],
            hidden_dim=size["hidden_dim"],
            intermediate_dim=4 * size["hidden_dim"],
            dropout=0.0,
            max_sequence_length=context,
        )
        peer = keras_hub.models.GPT2CausalLM(peer_backbone, preprocessor=None)
        result["keras_hub"] = time_training(
            peer, x, y, batch, args.steps, jit_compile
        )
        result["keras_hub"]["compiled"] = compiled_step(peer, "keras_hub")
        for name in ("zoo", "zoo_gelu_approximate"):
            if name in result:
                result[f"{name}_over_keras_hub"] = round(
                    result[name]["tokens_per_second"]
                    / result["keras_hub"]["tokens_per_second"],
                    3,
                )
    return result


def header(args):
    return (
        f"GPT {args.preset} training, random ids, {args.steps} timed "
        f"AdamW steps, {args.mixed_precision or 'float32'}"
        f"{', jit_compile=True' if args.jit_compile else ''}\n"
        f"{'backend':<11} {'zoo tok/s':>10} {'keras-hub tok/s':>16} "
        f"{'zoo / keras-hub':>16} {'peak GiB':>9} {'MFU':>7} "
        f"{'cuDNN attention (zoo/hub)':>26} "
        f"{'first epoch s (zoo/hub)':>24}"
        + (
            f" {'tanh-GELU zoo / keras-hub':>26}"
            if args.approximate_gelu
            else ""
        )
    )


def row(backend, r):
    peer = r.get("keras_hub", {}).get("tokens_per_second")
    ratio = r.get("zoo_over_keras_hub")
    memory, mfu = r["zoo"]["peak_memory_gib"], r["zoo"]["mfu"]
    return (
        f"{backend:<11} {r['zoo']['tokens_per_second']:>10.0f} "
        f"{peer if peer is not None else float('nan'):>16.0f} "
        f"{ratio if ratio is not None else float('nan'):>15.2f}x "
        f"{memory if memory is not None else float('nan'):>9.2f} "
        f"{'-' if mfu is None else f'{mfu:.1%}':>7} "
        f"{_kernels(r):>26} {_warm_up(r):>24}" + _approximate(r)
    )


def _approximate(r):
    """The tanh-GELU zoo model's tokens/s over keras-hub's, where timed."""
    if "zoo_gelu_approximate" not in r:
        return ""
    ratio = r.get("zoo_gelu_approximate_over_keras_hub")
    return f" {'-' if ratio is None else f'{ratio:.2f}x':>26}"


def _warm_up(r):
    """ "31/95": each model's first, compiling epoch in seconds, with
    TorchDynamo's graphs and breaks where torch.compile made them."""
    parts = []
    for name in ("zoo", "keras_hub"):
        model = r.get(name)
        if model is None or "warm_up_seconds" not in model:
            parts.append("-")
            continue
        text = f"{model['warm_up_seconds']:.0f}"
        if "graphs" in model:
            text += f" ({model['graphs']}g {model['graph_breaks']}b)"
        parts.append(text)
    return "/".join(parts)


def _kernels(r):
    """ "24/24": fused cuDNN attention kernels compiled into each model's
    training step (JAX; "-" elsewhere)."""
    zoo, peer = (
        r.get(name, {}).get("compiled") for name in ("zoo", "keras_hub")
    )
    if zoo is None:
        return "-"
    return f"{zoo['cudnn_attention']}/" + (
        "-" if peer is None else str(peer["cudnn_attention"])
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main()
