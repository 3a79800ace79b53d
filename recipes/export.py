"""Export a saved task for serving, then check the export.

    python recipes/export.py saved_models/imdb_attention.keras exports/imdb
    python recipes/export.py saved_models/vit_mnist.keras exports/vit_mnist
    python recipes/export.py saved_models/gpt_shakespeare.keras exports/gpt
    python recipes/export.py saved_models/imdb_bert.keras exports/imdb_bert \\
        --text "a wonderful film" --text "two hours I will not get back"

Writes a TensorFlow SavedModel whose `serving_default` signature takes raw
input (a `(batch,)` string tensor for text tasks, `(batch, height, width,
channels)` uint8 images for image tasks), with the preprocessor inside the
graph, and returns what the task's `predict` returns; a GPT also gets a
`generate` signature (prompts in, greedy texts out, as `generate`). Then it runs the
export in a fresh process that imports only TensorFlow and prints the
largest difference from `predict` on sample inputs. Works under every
backend (the SavedModel is traced by a TensorFlow process).
"""

import argparse
import sys

import numpy as np

import zoo
from zoo import export

SAMPLE_TEXTS = (
    "A wonderful film: the acting, the music, everything.",
    "Two hours I will not get back. Dull and far too long.",
    "It was fine.",
)


MASKED_TEXTS = (
    "this movie was [MASK] good.",
    "the [MASK] was great but the ending was [MASK].",
    "[MASK]",
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="a task's .keras file")
    parser.add_argument("output", help="the SavedModel folder to write")
    parser.add_argument(
        "--text",
        action="append",
        help="a sample text for the check (repeat; text tasks)",
    )
    parser.add_argument(
        "--images",
        help="a .npy array of sample uint8 images for the check (image "
        "tasks; default: random images of the model's size)",
    )
    parser.add_argument("--no-check", action="store_true", help="export only")
    return parser.parse_args(argv)


def sample_inputs(task, args):
    """The raw inputs the check feeds both `predict` and the export."""
    if getattr(task, "exports_generate", None) == "masked_lm":
        return np.array(args.text or MASKED_TEXTS)
    if export.raw_input_kind(task) == "text":
        return np.array(args.text or SAMPLE_TEXTS)
    if args.images:
        return np.load(args.images).astype("uint8")
    spec = export.serving_input_shape(task)
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (3, *spec), dtype="uint8")


def main(argv=None):
    args = parse_args(argv)
    try:
        task = zoo.saving.load_model(args.model)
        export.export_for_serving(task, args.output, keras_file=args.model)
    except (ValueError, NotImplementedError, RuntimeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"wrote {args.output} (serving_default: raw input -> predict)")
    if args.no_check:
        return None
    inputs = sample_inputs(task, args)
    generated = expected = None
    kind = getattr(task, "exports_generate", None)
    if kind == "masked_lm":
        generated = task.fill_mask(list(inputs))
    elif kind:  # the export is greedy, whatever sampler the task keeps
        generated = task.generate(list(inputs), sampler="greedy")
    if getattr(task, "exports_predict", False):
        expected = task.predict(inputs, verbose=0)
    result = export.check_export(
        args.output,
        inputs,
        expected,
        tensorflow_text=export.needs_tensorflow_text(task),
        generated=generated,
    )
    same = ""
    if kind == "masked_lm":
        same = (
            f" fill_mask_identical={result['fill_mask_identical']}"
            f" max_probability_diff={result['max_probability_diff']:.2e}"
        )
    elif generated is not None:
        same = (
            f" generate_identical={result['generate_identical']}"
            f"/{len(generated)}"
        )
    diff = ""
    if expected is not None:
        diff = f" max_abs_diff={result['max_abs_diff']:.2e}"
    print(
        f"RESULT export model={args.model} inputs={len(inputs)}{diff} "
        f"output_shape={tuple(result['shape'])}{same} "
        f"zoo_imported={result['zoo_imported']}"
    )
    return result


if __name__ == "__main__":
    main()
