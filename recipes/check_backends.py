"""Do JAX, TensorFlow and PyTorch agree on a recipe's model?

    python recipes/check_backends.py imdb_attention --smoke
    python recipes/check_backends.py gpt_text --smoke
    python recipes/check_backends.py imdb_attention --smoke --variants imdb_attention --no-train
    python recipes/check_backends.py imdb_attention --data-dir ../shared/data/aclImdb
    python recipes/check_backends.py imdb_attention --smoke --full   # + whole recipe runs
    python recipes/check_backends.py imdb_attention gpt_text translate --smoke
    python recipes/check_backends.py all --smoke                     # every recipe
    python recipes/check_backends.py imdb_attention:imdb_mean,imdb_rnn captioning:lstm --smoke

A thin command line over `zoo.testing.cross_backend`: the recipe's file,
`recipes/<recipe>.py`, is the hook the check's workers import (its
`check_setup` returns a `CheckSetup`; the contract is in
`zoo.testing.cross_backend.hook`). Several recipes (or `all`, every recipe
with a hook) are checked by one worker process per backend, one recipe
after the other, each framework imported once: each recipe's table, then
one line for the run. `recipe:variant,variant` checks those variants of
that recipe; `--variants` and `--data-dir` take one recipe. With `--json`,
one recipe writes its report, several `{recipe: report}` (keys sorted).
What is compared, how, the tolerances and the known sources of
divergence: docs/backends.md. Exits 1 when a check fails; a recipe name it
cannot check (misspelt, or a recipe without a `check_setup` hook) is one
error line listing those it can, exit status 2.
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
    "imagegpt": "imagegpt_digits",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Check that JAX, TensorFlow and PyTorch agree on a "
        "recipe's model: forward pass, training steps, saved models, "
        "generated text.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "recipes",
        nargs="+",
        metavar="recipe",
        help="module in recipes/ with a check_setup hook, "
        "e.g. imdb_attention or gpt_text, a family's "
        f"name ({', '.join(sorted(FAMILIES))}), or all; "
        "recipe:variant,variant checks only those variants; several are "
        "checked by one worker process per backend",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="default: the recipe's CHECK_VARIANTS (one recipe only)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the recipe's small generated data"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="passed to the recipe (a local copy of its data "
        "instead of the default download; one recipe only)",
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
        help="write the report as JSON (atomically); several "
        "recipes: {recipe: report}",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="per-pair numbers and per-step losses",
    )
    parser.add_argument(
        "--workdir",
        default=None,
        help="keep the models and arrays here, one folder per "
        "recipe (default: a temporary directory, removed afterwards)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=cross_backend.WAIT_TIMEOUT,
        help="seconds before the workers are stopped (for all "
        "the recipes together)",
    )
    args = parser.parse_args(argv)
    if len(set(args.backends)) != len(args.backends):
        parser.error("--backends repeats a backend")
    if args.no_train:
        args.steps = 0
    recipes = checkable_recipes()
    # Each argument: a recipe (or all of them), optionally ":variant,...".
    chosen = {}  # recipe -> its variants (None: all)
    for given in args.recipes:
        name, colon, listed = given.partition(":")
        variants = [v for v in listed.split(",") if v] or None
        if colon and not variants:
            parser.error(f"{given!r} names no variant after the colon")
        if name == "all" and colon:
            parser.error(f"{given!r}: all takes no variants")
        names = (
            recipes if name == "all" else [recipe_name(parser, name, recipes)]
        )
        for recipe in names:
            if recipe in chosen:
                parser.error(f"{given!r} names the recipe {recipe} again")
            chosen[recipe] = variants
    if args.variants is not None:
        if len(chosen) > 1:
            parser.error(
                "--variants takes one recipe; name several recipes' "
                "variants as recipe:variant,variant"
            )
        (recipe,) = chosen
        if chosen[recipe] is not None:
            parser.error(
                f"give {recipe}'s variants as recipe:variant,variant or "
                "with --variants, not both"
            )
        chosen[recipe] = args.variants
    args.recipes = list(chosen)
    args.variants = list(chosen.values())  # per recipe
    args.hooks = [os.path.join(ROOT, "recipes", f"{r}.py") for r in chosen]
    if args.data_dir and len(args.recipes) > 1:
        parser.error("--data-dir takes one recipe (each has its own data)")
    return args


def recipe_name(parser, given, recipes):
    """The recipe that `given` names ("gpt_text", "recipes/gpt_text.py",
    "recipes.gpt_text" or a family's name); a name it cannot check ends the
    command with one error line listing those it can (exit status 2)."""
    name = os.path.basename(given).removesuffix(".py")
    name = name.removeprefix("recipes.")
    recipe = FAMILIES.get(name, name)
    if recipe in recipes:
        return recipe
    valid = recipes + sorted(FAMILIES)
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.7)
    what = (
        "has no check_setup hook"
        if os.path.isfile(os.path.join(ROOT, "recipes", f"{recipe}.py"))
        else "is not a recipe"
    )
    listed = (
        f"ecipes it checks are {', '.join(recipes)}, and the families "
        f"{', '.join(sorted(FAMILIES))}, or all"
    )
    listed = (
        f"did you mean {close[0]!r}? The r{listed}"
        if close
        else f"the r{listed}"
    )
    # One line, without argparse's usage block: the fix is the name.
    parser.exit(2, f"{parser.prog}: error: {recipe!r} {what}; {listed}\n")


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
    options = dict(
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
    if len(args.hooks) == 1:  # its report alone, as JSON too
        reports = cross_backend.run_check(
            args.hooks[0],
            name=args.recipes[0],
            variants=args.variants[0],
            **options,
        )
    else:
        reports = cross_backend.run_checks(
            args.hooks, names=args.recipes, variants=args.variants, **options
        )
    return cross_backend.exit_status(reports)


if __name__ == "__main__":
    sys.exit(main())
