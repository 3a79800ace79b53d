"""ONNX and LiteRT exports of every family's backbone, checked against
`predict`, per backend, in one run.

    python benchmarks/export_formats.py                # jax, tensorflow, torch
    KERAS_BACKEND=tensorflow python benchmarks/export_formats.py \\
        --backends current --families gpt,vit

For each backend (a fresh process each), each family's backbone at smoke
size, with fresh weights (seed 0), on random numeric inputs: 3 rows of 16
tokens with the last row half padding (token ids and padding masks), or 3
float images. Each export is written by a fresh copy of the backbone and
run outside Keras:

- `onnx`: `zoo.export.export_onnx` at the inputs' shapes, run in
  onnxruntime (`zoo.export.check_onnx`);
- `onnx dynamic`: the same with the model's own input shapes (batch and
  lengths unknown), checked at 3 x 16 and again at 2 x 24; TensorFlow and
  JAX (under PyTorch `export_onnx` asks for fixed shapes);
- `litert` (TensorFlow): Keras' `format="litert"` (the TFLite converter,
  batch and lengths unknown), run in LiteRT's interpreter
  (`ai_edge_litert`) at both shapes; the cell names the TensorFlow ops
  the file needs beyond LiteRT's own (Flex ops), which neither that
  interpreter nor TensorFlow's `tf.lite.Interpreter` runs here.

Each cell is the largest absolute difference from `predict` over every
output (a pass is below 1e-4), or the error, in one line. `--json` keeps
every cell with the export's seconds.
"""

import os
import re
import sys
import tempfile
import time

from zoo.testing.benchmarks import benchmark_parser, run_benchmark

FAMILIES = (
    "gpt",
    "bert",
    "seq2seq_transformer",
    "seq2seq_rnn",
    "vit",
    "text_mean",
    "text_attention",
    "text_query",
    "text_rnn",
    "text_transformer",
    "caption_lstm",
    "caption_transformer",
)
CELLS = ("onnx", "onnx_dynamic", "litert")
TOLERANCE = 1e-4


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help="comma-separated, of: " + ", ".join(FAMILIES),
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    args.families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown or not args.families:
        parser.error(f"unknown families: {unknown}; choose from {FAMILIES}")
    return args


def _ids(rng, batch, length, vocabulary):
    """Token ids in [1, vocabulary) and a padding mask; the last row's
    second half is padding (id 0)."""
    import numpy as np

    ids = rng.integers(1, vocabulary, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    ids[-1, length // 2 :] = 0
    mask[-1, length // 2 :] = 0
    return ids, mask


def family(name):
    """(build the backbone, make inputs(rng, batch, length)) for `name`."""
    from zoo.models.bert import BertBackbone
    from zoo.models.captioning import CaptioningBackbone
    from zoo.models.gpt import GPTBackbone
    from zoo.models.seq2seq import Seq2SeqBackbone
    from zoo.models.text_classifier import TextClassifierBackbone
    from zoo.models.vit import ViTBackbone

    def gpt(rng, batch, length):
        ids, mask = _ids(rng, batch, length, 50)
        return {"token_ids": ids, "padding_mask": mask}

    def bert(rng, batch, length):
        ids, mask = _ids(rng, batch, length, 200)
        return {
            "token_ids": ids,
            "segment_ids": 0 * ids,
            "padding_mask": mask,
        }

    def seq2seq(rng, batch, length):
        source, source_mask = _ids(rng, batch, length, 120)
        target, target_mask = _ids(rng, batch, length - 2, 120)
        return {
            "encoder_token_ids": source,
            "encoder_padding_mask": source_mask,
            "decoder_token_ids": target,
            "decoder_padding_mask": target_mask,
        }

    def images(size, channels):
        def make(rng, batch, length):
            return rng.random((batch, *size, channels)).astype("float32")

        return make

    def text(rng, batch, length):
        return _ids(rng, batch, length, 100)[0]

    def caption(rng, batch, length):
        # The decoder reads at most its sequence length (12) tokens.
        ids, mask = _ids(rng, batch, min(length, 12), 60)
        return {
            "images": rng.random((batch, 32, 32, 3)).astype("float32"),
            "decoder_token_ids": ids,
            "decoder_padding_mask": mask,
        }

    text_presets = {
        "text_mean": ("imdb_mean", {}),
        "text_attention": ("imdb_attention", {}),
        "text_query": ("imdb_query", {}),
        "text_rnn": ("imdb_rnn", {}),
        "text_transformer": (
            "imdb_transformer",
            {"sequence_length": 32, "num_heads": 2, "intermediate_dim": 16},
        ),
    }
    if name in text_presets:
        preset, extra = text_presets[name]
        return (
            lambda: TextClassifierBackbone.from_preset(
                preset, vocabulary_size=100, embedding_dim=8, **extra
            ),
            text,
        )
    return {
        "gpt": (
            lambda: GPTBackbone.from_preset("smoke", vocabulary_size=50),
            gpt,
        ),
        "bert": (
            lambda: BertBackbone.from_preset("smoke", vocabulary_size=200),
            bert,
        ),
        "seq2seq_transformer": (
            lambda: Seq2SeqBackbone.from_preset("smoke", vocabulary_size=120),
            seq2seq,
        ),
        "seq2seq_rnn": (
            lambda: Seq2SeqBackbone.from_preset(
                "rnn_smoke", vocabulary_size=120
            ),
            seq2seq,
        ),
        "vit": (lambda: ViTBackbone.from_preset("smoke"), images((8, 8), 1)),
        "caption_lstm": (
            lambda: CaptioningBackbone.from_preset("smoke", vocabulary_size=60),
            caption,
        ),
        "caption_transformer": (
            lambda: CaptioningBackbone.from_preset(
                "transformer_smoke", vocabulary_size=60
            ),
            caption,
        ),
    }[name]


def _error(error):
    """An exception in one line: its type and its message's first line
    that says something (Keras' own lines name only the layer)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    lines = [
        line
        for line in lines
        if not line.startswith(("Exception encountered", "in user code"))
    ] or [""]
    text = re.sub(r"\x1b\[[0-9;]*m", "", lines[0])
    return f"{type(error).__name__}: {text}"[:300]


def _fresh(build):
    import keras

    keras.utils.set_random_seed(0)
    return build()


def _onnx_cell(build, path, export_inputs, checks):
    """Exports a fresh backbone (`export_inputs`: the shapes, or None for
    dynamic ones) and checks it on each of `checks`."""
    import numpy as np

    from zoo import export

    model = _fresh(build)
    start = time.perf_counter()
    try:
        export.export_onnx(model, path, export_inputs)
    except Exception as error:
        return {"error": "export: " + _error(error)}
    cell = {"seconds": round(time.perf_counter() - start, 2)}
    diffs = []
    for inputs in checks:
        try:
            diffs.append(export.check_onnx(model, path, inputs))
        except Exception as error:
            return {**cell, "error": "onnxruntime: " + _error(error)}
    cell["max_abs_diff"] = float(np.max(diffs))  # NaN stays NaN
    return cell


def flex_ops(path):
    """The TensorFlow ops a `.tflite` file runs through the Flex delegate
    (their names sit in the file as custom op codes `Flex<Op>`)."""
    with open(path, "rb") as f:
        found = re.findall(rb"Flex([A-Z][A-Za-z0-9]+)", f.read())
    return sorted({name.decode() for name in found})


def run_litert(path, inputs):
    """Runs a Keras LiteRT export on `inputs` (a dict by input name, or
    one array) in LiteRT's interpreter (`ai_edge_litert`; TensorFlow's
    `tf.lite.Interpreter` without it): its outputs by name, and the
    interpreter that ran it. Neither has the Flex ops (TensorFlow ops
    LiteRT lacks) in TensorFlow 2.21's wheels."""
    import numpy as np

    try:
        from ai_edge_litert.interpreter import Interpreter

        interpreter = "ai_edge_litert"
    except ImportError:
        from zoo._tensorflow import tf

        Interpreter = tf.lite.Interpreter
        interpreter = "tf.lite"
    runner = Interpreter(model_path=path).get_signature_runner()
    names = list(runner.get_input_details())
    if not isinstance(inputs, dict):
        inputs = {names[0]: inputs}
    details = runner.get_input_details()
    feed = {
        name: np.asarray(inputs[name]).astype(details[name]["dtype"])
        for name in names
    }
    return runner(**feed), interpreter


def _litert_cell(build, path, checks):
    import numpy as np

    model = _fresh(build)
    start = time.perf_counter()
    try:
        model.export(path, format="litert", verbose=False)
    except Exception as error:
        return {"error": "export: " + _error(error)}
    cell = {
        "seconds": round(time.perf_counter() - start, 2),
        "flex_ops": flex_ops(path),
    }
    worst = [0.0]
    for inputs in checks:
        try:
            outputs, cell["interpreter"] = run_litert(path, inputs)
        except Exception as error:
            return {**cell, "error": "interpreter: " + _error(error)}
        expected = model.predict(inputs, verbose=0)
        if not isinstance(expected, dict):
            expected = {next(iter(outputs)): expected}
        for name, want in expected.items():
            got = outputs[name]
            if got.shape != want.shape:
                return {
                    **cell,
                    "error": f"{name}: shape {got.shape}, predict's "
                    f"{want.shape}",
                }
            worst.append(np.max(np.abs(got - want)))
    cell["max_abs_diff"] = float(np.max(worst))  # NaN stays NaN
    return cell


def measure(args):
    import keras
    import numpy as np

    backend = keras.backend.backend()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.families:
            build, make = family(name)
            rng = np.random.default_rng(0)
            first, second = make(rng, 3, 16), make(rng, 2, 24)
            row = {
                "onnx": _onnx_cell(
                    build, os.path.join(tmp, f"{name}.onnx"), first, [first]
                )
            }
            if backend != "torch":
                row["onnx_dynamic"] = _onnx_cell(
                    build,
                    os.path.join(tmp, f"{name}_dynamic.onnx"),
                    None,
                    [first, second],
                )
            if backend == "tensorflow":
                row["litert"] = _litert_cell(
                    build, os.path.join(tmp, f"{name}.tflite"), [first, second]
                )
            rows[name] = row
            print(f"{name}: {row}", file=sys.stderr, flush=True)
    return {"backend": backend, "keras": keras.__version__, "rows": rows}


def cell_text(cell):
    """A cell for the table: the difference ("ok" below 1e-4), or the
    error."""
    if cell is None:
        return "-"
    if "error" in cell:
        text = "FAIL " + cell["error"]
    else:
        text = f"{cell['max_abs_diff']:.1e}"
        # NaN is no pass either.
        text += " ok" if cell["max_abs_diff"] < TOLERANCE else " OVER 1e-4"
    if cell.get("flex_ops"):
        text += f" (Flex: {', '.join(cell['flex_ops'])})"
    return text


def header(args):
    return (
        "backend     family               "
        + " | ".join(f"{c:<14}" for c in CELLS)
        + "\n"
        + "-" * 80
    )


def row(backend, result):
    lines = []
    for name, cells in result["rows"].items():
        texts = " | ".join(cell_text(cells.get(c)) for c in CELLS)
        lines.append(f"{backend:<11} {name:<20} {texts}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main()
