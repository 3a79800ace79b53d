"""Cached vs uncached GPT generation, per backend, in one run.

    python benchmarks/gpt_generation.py                 # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/gpt_generation.py --backends current

For each backend (a fresh process each) a randomly initialised GPT generates
`--new-tokens` tokens after a `--prompt-length` prompt, greedily, twice:

* cached: `generate()` as users call it; one new position per step, keys and
  values of earlier positions read from the cache;
* uncached: `generate(use_cache=False)`, which runs the model over the whole
  window at every step. Compiled loops need static shapes, so the window is
  the full `prompt + new tokens`, not the growing prefix; causal masking
  keeps the outputs identical (checked here);
* growing prefix (estimated): what a loop that reruns the model on the
  prefix so far would cost. It cannot be compiled as one loop (every step
  has a new shape), so the forward pass is timed at 5 prefix lengths and
  the per-step cost is interpolated and summed over the 256 steps. This is
  the baseline the "at least 10x" target names.

Top-k sampling (k=10, seeded; under PyTorch also with the compiled
decode step) and cached beam search (`--beam`, default 4 beams; 0 skips
it) are timed on the same prompt, each backend's time over the first
backend's (JAX's in the default order) and over its own greedy time.

keras-hub is the other peer: `keras_hub.models.GPT2CausalLM` with a
`GPT2Backbone` of the same depth, width, heads and context (random weights,
so its tokens differ) generates greedily from the same prompt through
keras-hub's own cached, compiled loop; `keras-hub / zoo` is its time over
zoo's cached time (above 1: zoo faster).

Under JAX a fourth figure is a peer: `jax_gpt_reference.py`, the same greedy
decoding with the model's weights written by hand in `jax.numpy` (one
`fori_loop`, no Keras). Its time is what a cached decoder of this shape costs
on the machine, so zoo's cached time is compared with it, and growing prefix /
hand-written is the largest speed-up any cache could show there.

Under PyTorch two more figures: the cached generation with every sublayer
called through Keras' `Layer.__call__` (`through_layer_calls`), which
shows what `zoo.layers.sublayers.call_sublayer`'s direct calls buy; and a
compiled decode step: the model's `call_with_cache` (one forward pass over
the new positions, what each generated token costs) compiled by
`zoo.accelerator.compile_function` (`torch.compile` with static shapes
and no guards on the layers: what `compile(jit_compile=True)` gives the
step), the rest of the loop as it is; `compiled / eager` is zoo's
cached time over the compiled one (above 1: compiling pays), with the
first call's compile time and the number of graphs TorchDynamo made, for
each mode in `--torch-compile-mode` (e.g. `default,reduce-overhead`).

`--dtype bfloat16` (or float16) runs both models under the mixed Keras
policy (float32 variables, 16-bit compute); the hand-written JAX peer
computes in float32 whatever the flag.

Both paths are compiled (jit on JAX, XLA tf.function on TensorFlow; PyTorch
runs eagerly under no_grad) and warmed up; the table shows the median of
`--repeats` timed calls, tokens per second and the speed-up. Timings are
only compared within one run on one machine.
"""

import sys
import time

import numpy as np

from zoo.testing.benchmarks import (
    benchmark_parser,
    print_result,
    run_worker,
    selected_backends,
    write_results,
)

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--num-layers", type=int, default=6)
    parser.add_argument("--num-heads", type=int, default=6)
    parser.add_argument("--hidden-dim", type=int, default=384)
    parser.add_argument("--vocabulary-size", type=int, default=65)
    parser.add_argument("--prompt-length", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--beam",
        type=int,
        default=4,
        help="also time cached beam search with this many beams (0: not)",
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=("float32", "bfloat16", "float16"),
        help="compute dtype of both models (a mixed Keras "
        "policy for the 16-bit ones)",
    )
    parser.add_argument(
        "--torch-compile-backend",
        default="inductor",
        help="torch.compile backend for the compiled decode "
        "step (PyTorch only); 'none' skips it",
    )
    parser.add_argument(
        "--torch-compile-mode",
        default="default",
        help="torch.compile mode, or several separated by "
        "commas, each timed: "
        + ", ".join(COMPILE_MODES)
        + "; reduce-overhead replays CUDA graphs on a GPU "
        "(the usual remedy for per-call cost)",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    args.torch_compile_modes = args.torch_compile_mode.split(",")
    unknown = set(args.torch_compile_modes) - set(COMPILE_MODES)
    if unknown:
        parser.error(
            f"--torch-compile-mode: unknown {sorted(unknown)}; "
            f"choose from {', '.join(COMPILE_MODES)}"
        )
    return args


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras
    import numpy as np

    from zoo.models.gpt import GPT, GPTBackbone

    if args.dtype != "float32":
        keras.config.set_dtype_policy(f"mixed_{args.dtype}")
    keras.utils.set_random_seed(0)
    length = args.prompt_length + args.new_tokens
    backbone = GPTBackbone(
        args.vocabulary_size,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        sequence_length=length,
    )
    gpt = GPT(backbone, preprocessor=None)
    rng = np.random.default_rng(0)
    token_ids = np.zeros((args.batch_size, length), "int32")
    token_ids[:, : args.prompt_length] = rng.integers(
        0, args.vocabulary_size, (args.batch_size, args.prompt_length)
    )
    mask = np.zeros((args.batch_size, length), bool)
    mask[:, : args.prompt_length] = True
    prompt = {"token_ids": token_ids, "padding_mask": mask}

    result = {
        "backend": keras.backend.backend(),
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "parameters": int(backbone.count_params()),
        "bytes_per_token": bytes_per_token(backbone, length, args),
    }
    outputs = {}
    for name, use_cache in (("cached", True), ("uncached", False)):
        result[name], outputs[name] = timed_generate(
            lambda use_cache=use_cache: gpt.generate(
                dict(prompt), stop_token_ids=None, use_cache=use_cache
            ),
            args,
        )
    if args.beam:
        result["beam"], outputs["beam"] = timed_generate(
            lambda: beam_generate(gpt, prompt, args), args
        )
        result["beam"]["num_beams"] = args.beam
    result["top_k"], _ = timed_generate(
        lambda: top_k_generate(gpt, prompt), args
    )
    result["prefix"] = growing_prefix_estimate(gpt, args)
    cached = result["cached"]["seconds"]
    result["speedup"] = round(result["uncached"]["seconds"] / cached, 2)
    result["speedup_vs_prefix"] = round(result["prefix"]["seconds"] / cached, 2)
    result["identical_greedy_output"] = bool(
        np.array_equal(
            np.asarray(outputs["cached"]["token_ids"]),
            np.asarray(outputs["uncached"]["token_ids"]),
        )
    )
    result["keras_hub"] = keras_hub_peer(prompt, length, args)
    result["keras_hub_over_zoo"] = round(
        result["keras_hub"]["seconds"] / cached, 3
    )
    if keras.backend.backend() == "torch":
        result["through_layer_calls"] = through_layer_calls_peer(
            gpt, prompt, outputs["cached"], args
        )
    if (
        keras.backend.backend() == "torch"
        and args.torch_compile_backend != "none"
    ):
        result["torch_compile"] = []
        for mode in args.torch_compile_modes:
            try:  # a failing compile must not cost the other figures
                step = torch_compiled_step(gpt, prompt, outputs, args, mode)
                step["compiled_over_eager"] = round(cached / step["seconds"], 3)
            except Exception as error:
                step = {
                    "mode": mode,
                    "error": f"{type(error).__name__}: {error}"[:500],
                }
            result["torch_compile"].append(step)
    if keras.backend.backend() == "jax":
        result["hand_written"] = hand_written_peer(
            gpt, prompt, outputs["cached"], args
        )
        result["hand_written"]["speedup_vs_prefix"] = round(
            result["prefix"]["seconds"] / result["hand_written"]["seconds"], 2
        )
    return result


def bytes_per_token(backbone, length, args):
    """What one greedy step at batch `args.batch_size` must read from
    memory, at the least: every weight once, as stored (float32 variables
    under the mixed policies too; the position table counts whole although
    a step reads one row of it; the token table is read whole by the tied
    output projection) and the whole static key/value cache of every layer
    (the compiled loop attends over the full `length`-position buffer,
    masked), in the compute dtype."""
    weights = sum(
        int(np.prod(v.shape)) * _itemsize(v.dtype) for v in backbone.weights
    )
    compute = 4 if args.dtype == "float32" else 2
    cache = (
        2
        * args.num_layers
        * args.batch_size
        * length
        * args.hidden_dim
        * compute
    )
    return {"weights": weights, "cache": cache, "total": weights + cache}


def _itemsize(dtype):
    import keras

    return np.dtype(keras.backend.standardize_dtype(dtype)).itemsize


def memory_bandwidth(megabytes=256, repeats=7):
    """The machine's memory bandwidth in bytes/s: the fastest of `repeats`
    NumPy copies of a `megabytes` float32 array (bytes read + written over
    the time), far larger than any cache, as STREAM's copy kernel."""
    source = np.ones(megabytes * 2**20 // 4, "float32")
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


def roofline_lines(results, bandwidth):
    """Each backend's cached tokens/s as a share of the memory bound
    (bandwidth / bytes read per token)."""
    lines = [
        f"roofline: memory bandwidth {bandwidth / 1e9:.1f} GB/s (NumPy "
        f"copy, 256 MB, best of 7)"
    ]
    for r in results:
        need = r["bytes_per_token"]
        bound = bandwidth / need["total"] * r["batch_size"]
        rate = r["cached"]["tokens_per_second"]
        lines.append(
            f"roofline {r['backend']}: {need['total'] / 1e6:.1f} MB read per "
            f"step ({need['weights'] / 1e6:.1f} MB weights + "
            f"{need['cache'] / 1e6:.1f} MB key/value cache), bound "
            f"{bound:.0f} tok/s; cached {rate:.1f} tok/s = "
            f"{100 * rate / bound:.0f}% of the bound"
        )
    return lines


def keras_hub_peer(prompt, length, args):
    """keras-hub's GPT-2 machinery at the same size: greedy `generate` on
    the same prompt ids (its own cache and compiled loop)."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=args.vocabulary_size,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        hidden_dim=args.hidden_dim,
        intermediate_dim=4 * args.hidden_dim,
        dropout=0.0,
        max_sequence_length=length,
    )
    peer = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    peer.compile(sampler="greedy")

    timing, _ = timed_generate(
        lambda: peer.generate(dict(prompt), stop_token_ids=None), args
    )
    return {**timing, "parameters": int(backbone.count_params())}


def compiled_beam_text(step, reference_seconds, reference):
    """The beam line's part for one `torch.compile` mode: its time against
    the `reference` backend's, or why it failed ("" without a beam run)."""
    beam = step.get("beam")
    if not beam:
        return ""
    if "error" in beam:
        return (
            f"; decode step compiled ({step['mode']}) failed: {beam['error']}"
        )
    return (
        f"; decode step compiled ({step['mode']}): {beam['seconds']:.3f} s, "
        f"{beam['seconds'] / reference_seconds:.2f}x {reference}'s time, "
        f"{beam['graphs']} more graphs, identical beams: "
        f"{beam['identical_output']}"
    )


def beam_generate(gpt, prompt, args):
    """The beam search every backend times: `args.beam` beams, no stop."""
    return gpt.generate(
        dict(prompt),
        stop_token_ids=None,
        sampler="beam",
        num_beams=args.beam,
    )


def top_k_generate(gpt, prompt):
    """The sampled generation every backend times: top-k, k=10, seeded."""
    return gpt.generate(
        dict(prompt), stop_token_ids=None, sampler="top_k", k=10, seed=0
    )


def timed_generate(generate, args):
    """`({"first_call_seconds", "seconds" (median of `--repeats` calls),
    "tokens_per_second"}, the first call's output)` of a generate call."""
    import numpy as np

    start = time.perf_counter()
    out = generate()
    first = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        np.asarray(generate()["token_ids"])  # wait for the device
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    return {
        "first_call_seconds": round(first, 3),
        "seconds": round(seconds, 4),
        "tokens_per_second": round(
            args.batch_size * args.new_tokens / seconds, 1
        ),
    }, out


def through_layer_calls_peer(gpt, prompt, cached_output, args):
    """zoo's cached generation with every sublayer called through Keras'
    `Layer.__call__` (`zoo.layers.sublayers.through_layer_calls`), what
    PyTorch decoding cost before `call_sublayer` skipped it."""
    import numpy as np

    from zoo.layers.sublayers import through_layer_calls

    with through_layer_calls():
        timing, out = timed_generate(
            lambda: gpt.generate(dict(prompt), stop_token_ids=None), args
        )
    return {
        **timing,
        "identical_greedy_output": bool(
            np.array_equal(
                np.asarray(out["token_ids"]),
                np.asarray(cached_output["token_ids"]),
            )
        ),
    }


def torch_compiled_step(gpt, prompt, outputs, args, mode):
    """zoo's cached generation with `call_with_cache` under `torch.compile`
    (PyTorch only): does compiling the per-token forward pass pay? Greedy,
    top-k and (with `--beam`) beam search; `outputs`: the eager greedy
    ("cached") and beam ("beam") outputs to compare with."""
    import keras
    import numpy as np
    import torch._dynamo

    from zoo.accelerator import compile_function

    torch._dynamo.reset()
    counter = torch._dynamo.utils.counters
    counter.clear()
    eager = gpt.call_with_cache
    # What `compile(jit_compile=True)` gives `generate` (static shapes, no
    # guards on the layers unless a mode is named), in `mode`.
    compiled = compile_function(
        eager,
        backend=args.torch_compile_backend,
        mode=None if mode == "default" else mode,
    )
    gpt.call_with_cache = compiled
    if mode == "reduce-overhead":

        def compiled_step(*step_args):
            # CUDA graphs replay into the same output buffers: each step
            # is a new iteration, and the cache it returns, read by the
            # next step, is copied out of them.
            torch.compiler.cudagraph_mark_step_begin()
            return keras.tree.map_structure(
                lambda t: t.clone() if isinstance(t, torch.Tensor) else t,
                compiled(*step_args),
            )

        gpt.call_with_cache = compiled_step
    try:
        timing, out = timed_generate(
            lambda: gpt.generate(dict(prompt), stop_token_ids=None), args
        )
        timing["top_k"], _ = timed_generate(
            lambda: top_k_generate(gpt, prompt), args
        )
        graphs = int(counter["stats"]["unique_graphs"])
        if args.beam:  # (batch x beams) rows: the step's second shape
            try:  # a failing beam compile keeps the greedy figures
                timing["beam"], beam_out = timed_generate(
                    lambda: beam_generate(gpt, prompt, args), args
                )
                timing["beam"]["graphs"] = (
                    int(counter["stats"]["unique_graphs"]) - graphs
                )
                timing["beam"]["identical_output"] = bool(
                    np.array_equal(
                        np.asarray(beam_out["token_ids"]),
                        np.asarray(outputs["beam"]["token_ids"]),
                    )
                )
            except Exception as error:
                timing["beam"] = {
                    "error": f"{type(error).__name__}: {error}"[:500]
                }
    finally:
        gpt.call_with_cache = eager
    return {
        **timing,
        "mode": mode,
        "graphs": graphs,
        "graph_breaks": int(sum(counter["graph_break"].values())),
        "identical_greedy_output": bool(
            np.array_equal(
                np.asarray(out["token_ids"]),
                np.asarray(outputs["cached"]["token_ids"]),
            )
        ),
    }


def hand_written_peer(gpt, prompt, cached_output, args):
    """The same greedy decoding in plain JAX with the model's weights
    (`jax_gpt_reference`): what a cached decoder of this shape costs here."""
    import numpy as np

    # The file beside this one: a package import when this module is
    # `benchmarks.gpt_generation` (`python -m`, the tests), else a top-level
    # one (`python benchmarks/gpt_generation.py`, the workers: sys.path[0]
    # is benchmarks/).
    if __package__:
        from benchmarks.jax_gpt_reference import time_greedy_decoder
    else:
        from jax_gpt_reference import time_greedy_decoder

    seconds, token_ids = time_greedy_decoder(
        gpt, prompt["token_ids"], args.prompt_length, repeats=args.repeats
    )
    return {
        "seconds": round(seconds, 4),
        "tokens_per_second": round(
            args.batch_size * args.new_tokens / seconds, 1
        ),
        "identical_greedy_output": bool(
            np.array_equal(token_ids, np.asarray(cached_output["token_ids"]))
        ),
    }


def growing_prefix_estimate(gpt, args, points=5):
    """Seconds to rerun the model on the growing prefix at every step.

    Times one compiled forward pass (`predict_on_batch`, next-token logits
    for every position) at `points` prefix lengths, interpolates linearly
    and sums over the prefix lengths the generation loop would see.
    """
    import numpy as np

    first = args.prompt_length
    last = args.prompt_length + args.new_tokens - 1
    lengths = np.unique(np.linspace(first, last, points).round().astype(int))
    rng = np.random.default_rng(1)
    per_call = []
    for length in lengths:
        batch = {
            "token_ids": rng.integers(
                0, args.vocabulary_size, (args.batch_size, length)
            ).astype("int32"),
            "padding_mask": np.ones((args.batch_size, length), bool),
        }
        np.asarray(gpt.predict_on_batch(batch))  # compile + warm up
        times = []
        for _ in range(max(args.repeats, 3)):
            start = time.perf_counter()
            np.asarray(gpt.predict_on_batch(batch))
            times.append(time.perf_counter() - start)
        per_call.append(float(np.median(times)))
    steps = np.arange(first, last + 1)
    seconds = float(np.interp(steps, lengths, per_call).sum())
    return {
        "seconds": round(seconds, 4),
        "tokens_per_second": round(args.batch_size * len(steps) / seconds, 1),
        "forward_seconds_at_length": {
            int(n): round(t, 5) for n, t in zip(lengths, per_call)
        },
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print_result(measure(args))
        return None
    backends = selected_backends(args.backends)
    print(
        f"GPT {args.num_layers} layers x width {args.hidden_dim}, batch "
        f"{args.batch_size}: {args.prompt_length}-token prompt + "
        f"{args.new_tokens} new tokens (greedy), {args.dtype}, median of "
        f"{args.repeats}"
    )
    print(
        f"{'backend':<11} {'cached s':>9} {'tok/s':>8} | {'prefix s':>9} "
        f"{'tok/s':>8} {'speed-up':>9} | {'window s':>9} {'tok/s':>8} "
        f"{'speed-up':>9} | identical"
    )
    results = []
    for backend in backends:
        # Workers get the same flags; only this process writes --json.
        r = run_worker(__file__, backend, argv)
        results.append(r)
        print(
            f"{backend:<11} {r['cached']['seconds']:>9.3f} "
            f"{r['cached']['tokens_per_second']:>8.1f} | "
            f"{r['prefix']['seconds']:>9.3f} "
            f"{r['prefix']['tokens_per_second']:>8.1f} "
            f"{r['speedup_vs_prefix']:>8.1f}x | "
            f"{r['uncached']['seconds']:>9.3f} "
            f"{r['uncached']['tokens_per_second']:>8.1f} "
            f"{r['speedup']:>8.1f}x | {r['identical_greedy_output']}",
            flush=True,
        )
    for backend, r in zip(backends, results):
        print(
            f"{backend}: keras-hub GPT2CausalLM, same size: "
            f"{r['keras_hub']['seconds']:.3f} s "
            f"({r['keras_hub']['tokens_per_second']:.1f} tok/s); "
            f"keras-hub / zoo cached: {r['keras_hub_over_zoo']:.2f}x"
        )
    for backend, r in zip(backends, results):
        top_k = r["top_k"]
        compiled = [
            step for step in r.get("torch_compile", ()) if "top_k" in step
        ]
        print(
            f"{backend}: top-k sampling (k=10), cached: "
            f"{top_k['seconds']:.3f} s ({top_k['tokens_per_second']:.1f} "
            f"tok/s), {top_k['seconds'] / results[0]['top_k']['seconds']:.2f}"
            f"x {backends[0]}'s time"
            + "".join(
                f"; decode step compiled ({step['mode']}): "
                f"{step['top_k']['seconds']:.3f} s, "
                f"{step['top_k']['seconds'] / results[0]['top_k']['seconds']:.2f}"
                f"x {backends[0]}'s time"
                for step in compiled
            )
        )
    for backend, r in zip(backends, results):
        beam = r.get("beam")
        if beam:
            first = results[0]["beam"]["seconds"]
            print(
                f"{backend}: beam search, {beam['num_beams']} beams, cached: "
                f"{beam['seconds']:.3f} s ({beam['tokens_per_second']:.1f} "
                f"tok/s), {beam['seconds'] / first:.2f}"
                f"x {backends[0]}'s time, "
                f"{beam['seconds'] / r['cached']['seconds']:.2f}x greedy's"
                + "".join(
                    compiled_beam_text(step, first, backends[0])
                    for step in r.get("torch_compile", ())
                )
            )
    print(
        "prefix: rerunning the model on the growing prefix every step "
        "(estimated from timed forward passes); window: generate("
        "use_cache=False), the full fixed window every step"
    )
    for r in results:
        calls = r.get("through_layer_calls")
        if calls:
            print(
                f"torch: every sublayer through Layer.__call__: "
                f"{calls['seconds']:.3f} s ({calls['tokens_per_second']:.1f}"
                f" tok/s); call_sublayer's direct calls are "
                f"{calls['seconds'] / r['cached']['seconds']:.2f}x faster; "
                f"identical output: {calls['identical_greedy_output']}"
            )
        for step in r.get("torch_compile", ()):
            if "error" in step:
                print(
                    f"torch: call_with_cache under torch.compile "
                    f"({step['mode']} mode) failed: {step['error']}"
                )
                continue
            print(
                f"torch: call_with_cache under torch.compile "
                f"({step['mode']} mode): "
                f"{step['seconds']:.3f} s ({step['tokens_per_second']:.1f} "
                f"tok/s), compiled / eager: {step['compiled_over_eager']:.2f}"
                f"x; first call {step['first_call_seconds']:.1f} s, "
                f"{step['graphs']} graphs, {step['graph_breaks']} graph "
                f"breaks; identical output: "
                f"{step['identical_greedy_output']}"
            )
        peer = r.get("hand_written")
        if peer:
            print(
                f"hand-written JAX greedy decoder, same weights "
                f"(benchmarks/jax_gpt_reference.py): {peer['seconds']:.3f} s "
                f"({peer['tokens_per_second']:.1f} tok/s), identical "
                f"output: {peer['identical_greedy_output']}; zoo cached / "
                f"hand-written: {r['cached']['seconds'] / peer['seconds']:.2f}"
                f"x the time; prefix / hand-written: "
                f"{peer['speedup_vs_prefix']:.1f}x (the most any cache "
                f"shows on this machine)"
            )
    bandwidth = memory_bandwidth()
    for line in roofline_lines(results, bandwidth):
        print(line)
    for r in results:
        r["memory_bandwidth"] = bandwidth
    write_results(args, results)
    return results


if __name__ == "__main__":
    main()
