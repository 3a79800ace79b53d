"""Prints the README's IMDB results table (model x backend) from the
`metrics.json` files that `recipes/imdb_attention.py` writes.

    python recipes/imdb_results_table.py runs/imdb_attention
"""

import argparse
import glob
import json
import os

MODELS = ("mean", "attention", "query", "rnn", "transformer")
BACKENDS = ("jax", "tensorflow", "torch")
# zoo.models.text_classifier.QUERY_MAP_SCALE, the `query` model's default
# (a test checks they agree): importing zoo would load Keras and its
# backends, seconds of start-up for a script that reads JSON files.
QUERY_MAP_SCALE = 0.03


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "runs",
        nargs="?",
        default="runs/imdb_attention",
        help="folder of the runs' output folders",
    )
    args = parser.parse_args(argv)
    if not os.path.isdir(args.runs):
        parser.error(
            f"{args.runs} does not exist: pass the folder whose "
            "subfolders hold imdb_attention.py's metrics.json (its "
            "--output-dir default is runs/imdb_attention/"
            "<model>-<backend>)."
        )
    results = {}
    for path in glob.glob(os.path.join(args.runs, "*", "metrics.json")):
        with open(path) as f:
            m = json.load(f)
        if m.get("smoke") or "validation_accuracy" not in m:
            continue
        if any(
            m.get(k)
            for k in (
                "entropy_weight",
                "glove",
                "word_dropout",
                "query_initializer",
            )
        ):
            continue  # variants are reported separately
        # `query` runs from before its maps were slowed down (no scale
        # recorded) are a different model.
        if (
            m["model"] == "query"
            and m.get("query_map_scale") != QUERY_MAP_SCALE
        ):
            continue
        # So are bigrams and validation splits of random reviews (the
        # recipe records how the split was held out, however it was asked).
        holdout = m.get("validation_holdout") or ""
        if m.get("ngrams", 1) > 1 or holdout.startswith("random reviews"):
            continue
        results[(m["model"], m["backend"])] = m
    if not results:
        parser.error(
            f"no finished imdb_attention.py runs under {args.runs} "
            "(metrics.json files of the base models, not --smoke)."
        )
    header = "| model | " + " | ".join(BACKENDS) + " |"
    print(header)
    print("|" + " --- |" * (len(BACKENDS) + 1))
    for model in MODELS:
        cells = []
        for backend in BACKENDS:
            m = results.get((model, backend))
            cells.append(
                "—"
                if m is None
                else f"{100 * m['validation_accuracy']:.2f}% ({m['train_seconds']:.0f} s, "
                f"{m['epochs']} ep)"
            )
        print(f"| `{model}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
