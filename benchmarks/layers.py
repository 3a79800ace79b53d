"""Layer speed: zoo's attention layers against Keras' and keras-hub's (and,
under PyTorch, `torch.nn.TransformerEncoderLayer`), per backend, in one
run.

    python benchmarks/layers.py                        # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/layers.py --backends current \\
        --lengths 64,256,1024 --dtypes float32,bfloat16

Cells: layer x sequence length x padding (none, or the second half of every
row padded) x compute dtype x {train, predict}:

* `mha`: `zoo.layers.MultiHeadAttention` vs `keras.layers.MultiHeadAttention`
  (self-attention, key padding mask);
* `encoder`: `zoo.layers.TransformerEncoder` vs
  `keras_hub.layers.TransformerEncoder` (post-LN, ReLU MLP);
* `decoder`: `zoo.layers.TransformerDecoder` vs keras-hub's (causal
  self-attention, no cross-attention);
* `decoder_cached` (predict only): one new token against a key/value cache
  of the cell's length, both with keras-hub's cache convention.

Each side is a small Keras model (inputs -> layer -> output), fed tensors
already on the device, compiled the backend's way (jit on JAX, XLA on
TensorFlow; PyTorch eager unless
`--jit-compile`, which asks every backend for `jit_compile=True`:
`torch.compile` under PyTorch); a training
step is `train_on_batch` with SGD on a mean-squared loss, a prediction
`predict_on_batch` of a model that also sums each row of the output (and
of the cache), so that the copy of a full output to the host, which
`predict_on_batch` makes and which outweighed the layer at 4,096 tokens
on a GPU, is not what gets timed. After a warm-up,
zoo and the peer are timed in `--repeats` interleaved rounds of `--steps`
steps and the fastest round of each is kept. `peer / zoo` above 1 means zoo
is faster. `--dropout` gives every layer that dropout, attention weights
included, so training takes the explicit softmax path on both sides
(prediction stays fused). Under PyTorch the encoder cell also times
`torch.nn.TransformerEncoderLayer` (eager, `batch_first`), as `torch / zoo`.
Timings are only compared within one run on one machine.
"""

import sys

from zoo.testing.benchmarks import (
    accelerator,
    benchmark_parser,
    fastest_rounds,
    run_benchmark,
)

LAYERS = ("mha", "encoder", "decoder", "decoder_cached")


def _csv(kind, allowed=None):
    def parse(text):
        items = [kind(t) for t in str(text).split(",") if t]
        if not items or (allowed and not set(items) <= set(allowed)):
            raise ValueError(text)
        return items

    return parse


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--layers", type=_csv(str, LAYERS), default=list(LAYERS)
    )
    parser.add_argument("--lengths", type=_csv(int), default=[64, 256, 1024])
    parser.add_argument(
        "--dtypes", type=_csv(str, ("float32", "bfloat16")), default=["float32"]
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--intermediate-dim", type=int, default=512)
    parser.add_argument(
        "--dropout",
        type=float,
        default=0.0,
        help="dropout of every layer (attention weights "
        "too: the explicit softmax path in training)",
    )
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="both Keras models compiled with jit_compile="
        "True (under PyTorch: torch.compile; "
        "torch.nn stays eager)",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if (
        min(args.batch_size, args.steps, args.repeats, *args.lengths) < 1
        or args.hidden_dim % args.num_heads
        or not 0 <= args.dropout < 1
    ):
        parser.error(
            "sizes must be positive, --num-heads must divide "
            "--hidden-dim and --dropout lie in [0, 1)"
        )
    return args


def _layers(name, args):
    """(zoo layer, peer layer) for a cell, in the global dtype policy."""
    import keras
    import keras_hub

    import zoo

    heads, width, dropout = args.num_heads, args.hidden_dim, args.dropout
    if name == "mha":
        return (
            zoo.layers.MultiHeadAttention(
                heads, width // heads, dropout=dropout
            ),
            keras.layers.MultiHeadAttention(
                heads, width // heads, dropout=dropout
            ),
        )
    block = dict(
        num_heads=heads, intermediate_dim=args.intermediate_dim, dropout=dropout
    )
    if name == "encoder":
        return (
            zoo.layers.TransformerEncoder(**block),
            keras_hub.layers.TransformerEncoder(**block),
        )
    return (
        zoo.layers.TransformerDecoder(**block),
        keras_hub.layers.TransformerDecoder(**block),
    )


def _row_sums(x):
    """One float32 number per row: what a timed prediction returns to the
    host instead of the whole output."""
    import keras

    x = keras.ops.cast(x, "float32")
    return keras.ops.sum(keras.ops.reshape(x, (x.shape[0], -1)), axis=-1)


def _model(layer, name, length, args):
    """`(training model: inputs -> layer -> output, prediction model: the
    same layer's output summed per row)`, as Keras models."""
    import keras

    x = keras.Input((length, args.hidden_dim), batch_size=args.batch_size)
    mask = keras.Input((length,), dtype="bool", batch_size=args.batch_size)
    if name == "mha":
        mask_2d = keras.ops.logical_and(mask[:, None, :], mask[:, :, None])
        y = layer(x, x, attention_mask=mask_2d)
    elif name == "encoder":
        y = layer(x, padding_mask=mask)
    elif name == "decoder":
        y = layer(x, decoder_padding_mask=mask)
    y = keras.layers.Activation("linear", dtype="float32")(y)
    model = keras.Model([x, mask], y)
    model.compile(
        optimizer="sgd",
        loss="mse",
        jit_compile=True if args.jit_compile else "auto",
    )
    predictor = keras.Model([x, mask], _row_sums(y))
    predictor.compile(jit_compile=True if args.jit_compile else "auto")
    return model, predictor


def _cached_step(layer, length, args):
    """A model running one decoding step of a decoder block: the new token
    at position `length - 1` of a full cache, returning the output and the
    updated cache, as a generation loop does (a step that dropped the cache
    would let XLA skip writing it, which no decoding loop can)."""
    import keras

    class Step(keras.Model):
        def call(self, inputs):
            x, cache = inputs
            y, cache = layer(
                x,
                self_attention_cache=cache,
                self_attention_cache_update_index=length - 1,
            )
            return _row_sums(y), _row_sums(cache)

    model = Step()
    model.compile(jit_compile=True if args.jit_compile else "auto")
    return model


def _sync(value):
    """Waits for the device (the last value to numpy)."""
    import keras

    leaves = keras.tree.flatten(value)
    keras.ops.convert_to_numpy(leaves[0])
    return value


def measure_cell(name, length, padded, dtype, args):
    """`{"train": {...}, "predict": {...}}` seconds per step for zoo and the
    peer(s) of one cell."""
    import keras
    import numpy as np

    keras.config.set_dtype_policy(
        "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    )
    rng = np.random.default_rng(0)
    b, d = args.batch_size, args.hidden_dim
    x = rng.normal(size=(b, length, d)).astype("float32")
    mask = np.ones((b, length), bool)
    if padded:
        mask[:, length // 2 :] = False
    y = np.zeros((b, length, d), "float32")
    # On the device once: the timed steps copy nothing in from the host.
    x_dev, mask_dev, y_dev = (
        keras.ops.convert_to_tensor(v) for v in (x, mask, y)
    )
    keras.utils.set_random_seed(0)
    ours, theirs = _layers(name, args)
    fns = {}
    if name == "decoder_cached":
        cache = keras.ops.convert_to_tensor(
            rng.normal(
                size=(b, 2, length, args.num_heads, d // args.num_heads)
            ).astype("float32")
        )
        step = x_dev[:, :1]
        for side, layer in (("zoo", ours), ("peer", theirs)):
            model = _cached_step(layer, length, args)
            fns[("predict", side)] = lambda m=model: _sync(
                m.predict_on_batch([step, cache])
            )
    else:
        for side, layer in (("zoo", ours), ("peer", theirs)):
            model, predictor = _model(layer, name, length, args)
            fns[("train", side)] = lambda m=model: _sync(
                m.train_on_batch([x_dev, mask_dev], y_dev)
            )
            fns[("predict", side)] = lambda m=predictor: _sync(
                m.predict_on_batch([x_dev, mask_dev])
            )
    if name == "encoder" and keras.backend.backend() == "torch":
        fns.update(_torch_encoder(x, mask, args, dtype))
    best = fastest_rounds(fns, args.repeats, calls=args.steps, warmups=2)
    out = {}
    for (mode, side), seconds in best.items():
        out.setdefault(mode, {})[side] = round(seconds, 6)
    for times in out.values():
        times["peer_over_zoo"] = round(times["peer"] / times["zoo"], 3)
        if "torch" in times:
            times["torch_over_zoo"] = round(times["torch"] / times["zoo"], 3)
    return out


def _torch_encoder(x, mask, args, dtype):
    """`torch.nn.TransformerEncoderLayer` of the same shape (post-LN,
    ReLU), eager, on the device Keras uses."""
    import torch
    from keras.src.backend.torch.core import get_device

    device = get_device()
    layer = torch.nn.TransformerEncoderLayer(
        args.hidden_dim,
        args.num_heads,
        args.intermediate_dim,
        dropout=args.dropout,
        batch_first=True,
    ).to(device)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.01)
    xt = torch.as_tensor(x, device=device)
    pad = torch.as_tensor(~mask, device=device)

    def forward():
        with torch.autocast(
            device.split(":")[0],
            dtype=torch.bfloat16,
            enabled=dtype == "bfloat16",
        ):
            return layer(xt, src_key_padding_mask=pad)

    def train():
        layer.train()
        optimizer.zero_grad()
        loss = forward().float().pow(2).mean()
        loss.backward()
        optimizer.step()
        loss.item()

    def predict():
        layer.eval()
        with torch.no_grad():
            forward().float().sum().item()

    return {("train", "torch"): train, ("predict", "torch"): predict}


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras

    cells = []
    policy = keras.config.dtype_policy()
    try:
        _measure_cells(cells, args)
    finally:
        keras.config.set_dtype_policy(policy)
    device, _ = accelerator()
    return {
        "backend": keras.backend.backend(),
        "device": device,
        "jit_compile": args.jit_compile,
        "cells": cells,
    }


def _measure_cells(cells, args):
    for dtype in args.dtypes:
        for name in args.layers:
            for length in args.lengths:
                for padded in (False, True):
                    if name == "decoder_cached" and padded:
                        continue
                    cells.append(
                        {
                            "layer": name,
                            "length": length,
                            "padded": padded,
                            "dtype": dtype,
                            **measure_cell(name, length, padded, dtype, args),
                        }
                    )


def header(args):
    return (
        f"batch {args.batch_size}, width {args.hidden_dim}, "
        f"{args.num_heads} heads, MLP {args.intermediate_dim}, "
        f"dropout {args.dropout:g}"
        f"{', jit_compile=True' if args.jit_compile else ''}; "
        "peer / zoo time (above 1: zoo faster)\n"
        f"{'backend':<11} {'layer':<15} {'len':>5} {'pad':>4} "
        f"{'dtype':<9} {'train':>7} {'predict':>8} {'torch/zoo':>10}"
    )


def row(backend, result):
    lines = []
    for c in result["cells"]:
        train = c.get("train", {}).get("peer_over_zoo")
        torch_ratio = c.get("train", {}).get("torch_over_zoo")
        lines.append(
            f"{backend:<11} {c['layer']:<15} {c['length']:>5} "
            f"{'yes' if c['padded'] else 'no':>4} {c['dtype']:<9} "
            f"{'-' if train is None else f'{train:.2f}':>7} "
            f"{c['predict']['peer_over_zoo']:>8.2f} "
            f"{'-' if torch_ratio is None else f'{torch_ratio:.2f}':>10}"
        )
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main()
