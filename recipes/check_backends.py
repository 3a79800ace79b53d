"""Do JAX, TensorFlow and PyTorch agree on a recipe's model?

    python recipes/check_backends.py imdb_attention --smoke
    python recipes/check_backends.py gpt_text --smoke
    python recipes/check_backends.py imdb_attention --smoke --variants imdb_attention --no-train
    python recipes/check_backends.py imdb_attention --data-dir ../shared/data/aclImdb
    python recipes/check_backends.py imdb_attention --smoke --full   # + whole recipe runs

A thin command line over `zoo.testing.cross_backend`: the recipe's file,
`recipes/<recipe>.py`, is the hook the check's workers import (its
`check_setup` returns a `CheckSetup`; the contract is in
`zoo.testing.cross_backend.hook`). What is compared, how, the tolerances
and the known sources of divergence: docs/backends.md. Exits 1 when a
check fails; a recipe name it cannot check (misspelt, or a recipe without
a `check_setup` hook) is one error line listing those it can, exit status 2.
"""

import argparse
import difflib
import os
import sys

from zoo.cli import (
    HelpFormatter,
    non_negative_int,
    positive_float,
)
from zoo.testing import cross_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A family's name -> the recipe that trains it.
FAMILIES = {
    "captioning": "caption_images",
    "translation": "translate",
    "gpt": "gpt_text",
    "vit": "vit_images",
    "bert": "bert_imdb",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Check that JAX, TensorFlow and PyTorch agree on a "
        "recipe's model: forward pass, training steps, saved models, "
        "generated text.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "recipe",
        help="module in recipes/ with a check_setup hook, "
        "e.g. imdb_attention or gpt_text, or a family's "
        f"name ({', '.join(sorted(FAMILIES))})",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="default: the recipe's CHECK_VARIANTS",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the recipe's small generated data"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="passed to the recipe (a local copy of its data "
        "instead of the default download)",
    )
    parser.add_argument(
        "--steps",
        type=non_negative_int,
        default=20,
        help="training steps compared",
    )
    parser.add_argument(
        "--optimizer",
        choices=cross_backend.OPTIMIZERS,
        default="sgd",
        help="sgd: plain SGD, the check; adam: shows "
        "optimizer-specific divergence (see "
        "docs/backends.md)",
    )
    parser.add_argument(
        "--learning-rate",
        type=positive_float,
        default=None,
        help=f"default: {cross_backend.LEARNING_RATES}",
    )
    parser.add_argument(
        "--no-train",
        action="store_true",
        help="skip training (forward + saved models only)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="also run the whole recipe under every backend "
        "and compare its metrics",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(cross_backend.BACKENDS),
        choices=cross_backend.BACKENDS,
        help="the first one is the reference and makes the "
        "shared initial model",
    )
    parser.add_argument(
        "--json",
        default=None,
        metavar="PATH",
        help="write the report as JSON (atomically)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="per-pair numbers and per-step losses",
    )
    parser.add_argument(
        "--workdir",
        default=None,
        help="keep the models and arrays here (default: a "
        "temporary directory, removed afterwards)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=cross_backend.WAIT_TIMEOUT,
        help="seconds before the workers are stopped",
    )
    args = parser.parse_args(argv)
    if len(set(args.backends)) != len(args.backends):
        parser.error("--backends repeats a backend")
    if args.no_train:
        args.steps = 0
    # "gpt_text", "recipes/gpt_text.py" and "recipes.gpt_text" name one.
    name = os.path.basename(args.recipe).removesuffix(".py")
    name = name.removeprefix("recipes.")
    args.recipe = FAMILIES.get(name, name)
    args.hook = os.path.join(ROOT, "recipes", f"{args.recipe}.py")
    recipes = checkable_recipes()
    if args.recipe not in recipes:
        valid = recipes + sorted(FAMILIES)
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.7)
        what = (
            "has no check_setup hook"
            if os.path.isfile(args.hook)
            else "is not a recipe"
        )
        listed = (
            f"ecipes it checks are {', '.join(recipes)}, and the families "
            f"{', '.join(sorted(FAMILIES))}"
        )
        listed = (
            f"did you mean {close[0]!r}? The r{listed}"
            if close
            else f"the r{listed}"
        )
        # One line, without argparse's usage block: the fix is the name.
        parser.exit(
            2, f"{parser.prog}: error: {args.recipe!r} {what}; {listed}\n"
        )
    return args


def checkable_recipes():
    """The recipes in `recipes/` with a `check_setup` hook (what the check
    runs), by name; read from the files, none imported."""
    folder = os.path.join(ROOT, "recipes")
    names = []
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".py"):
            continue
        with open(os.path.join(folder, file), encoding="utf-8") as f:
            if "\ndef check_setup(" in f.read():
                names.append(file.removesuffix(".py"))
    return names


def main(argv=None):
    args = parse_args(argv)
    report = cross_backend.run_check(
        args.hook,
        name=args.recipe,
        variants=args.variants,
        smoke=args.smoke,
        data_dir=args.data_dir,
        steps=args.steps,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        full=args.full,
        backends=args.backends,
        json_path=args.json,
        verbose=args.verbose,
        workdir=args.workdir,
        timeout=args.timeout,
        cwd=ROOT,
    )
    return cross_backend.exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
