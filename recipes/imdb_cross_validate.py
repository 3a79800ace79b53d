"""Cross-validate the IMDB classifiers on movie-disjoint folds and compare
each with the mean-of-embeddings baseline, fold by fold.

    KERAS_BACKEND=jax python recipes/imdb_cross_validate.py \\
        --data-dir ../shared/data/aclImdb --models mean attention query
    python recipes/imdb_cross_validate.py --smoke --models mean attention --folds 2

Every (model, fold) is one run of `recipes/imdb_attention.py` with
`--validation-fold k` (whole movies held out, see `zoo.data.imdb`), in this
process and on the current backend; flags after `--` go to every run (e.g.
`-- --max-length 512`). A run whose `metrics.json` already matches is not
repeated, so an interrupted comparison resumes where it stopped.

One validation fold of 5,000 reviews has a standard error of about 0.5
points, so a single split cannot tell two models apart that differ by less;
comparing the models on the same folds (a paired comparison) can: it prints,
for every model, the accuracy per fold, the mean and standard deviation over
folds, and the mean paired difference to the baseline with its standard
error and the number of folds where the model won. `summary.json` in
`--output-dir` holds the same.
"""

import argparse
import json
import os
import sys

import numpy as np

from zoo.cli import (
    HelpFormatter,
    at_least,
)
from zoo.saving import remove_temporaries, write_json_atomic

# The recipe beside this one: a package import when this module is
# `recipes.imdb_cross_validate` (`python -m`, the tests), else a top-level
# one (`python recipes/imdb_cross_validate.py`: sys.path[0] is recipes/).
if __package__:
    from recipes import imdb_attention
else:
    import imdb_attention

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BASELINE = "mean"
MODELS = imdb_attention.MODELS


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    recipe_flags = []
    if "--" in argv:
        cut = argv.index("--")
        argv, recipe_flags = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=MODELS,
        default=list(MODELS),
        help="models to compare (the baseline 'mean' is always added)",
    )
    parser.add_argument(
        "--folds",
        type=at_least(2),
        default=5,
        help="number of folds; each holds out 1/folds of the movies",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="local aclImdb directory (default: "
        "tensorflow-datasets, whose validation is random "
        "reviews, not movies)",
    )
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/imdb_cross_validate/"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the generated smoke data (one fixed split, so "
        "every fold is the same; checks the code path)",
    )
    args = parser.parse_args(argv)
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    if BASELINE not in args.models:
        args.models = [BASELINE] + args.models
    if args.output_dir is None:
        args.output_dir = os.path.join(ROOT, "runs", "imdb_cross_validate")
    args.recipe_flags = recipe_flags
    return args


def run_flags(args, model, fold):
    flags = [
        "--model",
        model,
        "--validation-fraction",
        str(1.0 / args.folds),
        "--validation-fold",
        str(fold),
        "--verbose",
        "0",
        "--output-dir",
        os.path.join(args.output_dir, model, f"fold{fold}"),
    ]
    if args.data_dir:
        flags += ["--data-dir", args.data_dir]
    if args.smoke:
        flags.append("--smoke")
    return flags + args.recipe_flags


def previous_result(flags):
    """The metrics of an earlier run with exactly these flags, if any."""
    out = flags[flags.index("--output-dir") + 1]
    path = os.path.join(out, "metrics.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        metrics = json.load(f)
    return metrics if metrics.get("argv") == flags else None


def paired_summary(accuracies, baseline):
    """Mean, standard deviation over folds, and the paired difference to
    `baseline` (mean, standard error, folds won) in accuracy points."""
    acc = 100 * np.asarray(accuracies)
    summary = {"mean": float(acc.mean()), "std": float(acc.std(ddof=1))}
    if baseline is not None:
        diff = acc - 100 * np.asarray(baseline)
        summary.update(
            diff_mean=float(diff.mean()),
            diff_se=float(diff.std(ddof=1) / np.sqrt(len(diff))),
            folds_won=int((diff > 0).sum()),
        )
    return summary


def format_table(results, folds):
    lines = [
        "| model | "
        + " | ".join(f"fold {k}" for k in range(folds))
        + " | mean ± sd | vs `mean`: paired diff ± se | folds won |",
        "|" + " --- |" * (folds + 4),
    ]
    for model, r in results.items():
        cells = [f"{100 * a:.2f}" for a in r["validation_accuracy"]]
        s = r["summary"]
        diff = (
            "baseline"
            if "diff_mean" not in s
            else f"{s['diff_mean']:+.2f} ± {s['diff_se']:.2f}"
        )
        won = "" if "folds_won" not in s else f"{s['folds_won']}/{folds}"
        lines.append(
            f"| `{model}` | "
            + " | ".join(cells)
            + f" | {s['mean']:.2f} ± {s['std']:.2f} | {diff} | {won} |"
        )
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    runs = {}
    for model in args.models:
        runs[model] = []
        for fold in range(args.folds):
            flags = run_flags(args, model, fold)
            metrics = previous_result(flags)
            if metrics is None:
                print(f"== {model}, fold {fold}/{args.folds}", flush=True)
                metrics = imdb_attention.main(flags)
            runs[model].append(metrics)
    baseline = [m["validation_accuracy"] for m in runs[BASELINE]]
    results = {}
    for model, metrics in runs.items():
        accuracies = [m["validation_accuracy"] for m in metrics]
        results[model] = {
            "validation_accuracy": accuracies,
            "train_seconds": [m["train_seconds"] for m in metrics],
            "best_epoch": [m["best_epoch"] for m in metrics],
            "summary": paired_summary(
                accuracies, None if model == BASELINE else baseline
            ),
        }
    summary = {
        "backend": runs[BASELINE][0]["backend"],
        "folds": args.folds,
        "validation_holdout": runs[BASELINE][0].get("validation_holdout"),
        "recipe_flags": args.recipe_flags,
        "results": results,
    }
    write_json_atomic(summary, os.path.join(args.output_dir, "summary.json"))
    print(
        f"validation: {summary['validation_holdout']}; backend "
        f"{summary['backend']}; accuracy in %"
    )
    print(format_table(results, args.folds))
    return summary


if __name__ == "__main__":
    main()
