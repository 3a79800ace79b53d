"""zoo.cli (the recipes' flag helpers) and the recipes' use of it: an
impossible flag value is one argparse error line (exit status 2), never a
traceback from Keras or tf.data."""

import argparse

import pytest

from recipes import (
    caption_images,
    check_backends,
    gpt_text,
    imdb_attention,
    imdb_cross_validate,
)
from zoo import cli


def test_types_accept_the_valid_range_and_reject_the_rest():
    assert cli.positive_int("3") == 3
    assert cli.non_negative_int("0") == 0
    assert cli.at_least(2)("2") == 2
    assert cli.rate("0") == 0.0 and cli.rate("0.5") == 0.5
    assert cli.positive_float("1e-4") == 1e-4
    for parse, text, message in (
        (cli.positive_int, "0", "at least 1"),
        (cli.positive_int, "2.5", "an integer"),
        (cli.non_negative_int, "-1", "at least 0"),
        (cli.at_least(2), "1", "at least 2"),
        (cli.rate, "1", r"\[0, 1\)"),
        (cli.rate, "-0.1", r"\[0, 1\)"),
        (cli.rate, "x", "a number"),
        (cli.positive_float, "0", "> 0"),
        (cli.positive_float, "nan", "> 0"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse(text)


@pytest.mark.parametrize(
    "module, argv, flag",
    [
        (imdb_attention, ["--epochs", "0"], "--epochs"),
        (imdb_attention, ["--batch-size", "0"], "--batch-size"),
        (imdb_attention, ["--max-length", "0"], "--max-length"),
        (imdb_attention, ["--vocab-size", "2"], "--vocab-size"),
        (imdb_attention, ["--dropout", "1.5"], "--dropout"),
        (imdb_attention, ["--ngrams", "0"], "--ngrams"),
        (
            imdb_attention,
            ["--validation-fraction", "1"],
            "--validation-fraction",
        ),
        (gpt_text, ["--batch-size", "0"], "--batch-size"),
        (gpt_text, ["--sequence-length", "1"], "--sequence-length"),
        (gpt_text, ["--learning-rate", "0"], "--learning-rate"),
        (gpt_text, ["--dropout", "1"], "--dropout"),
        (imdb_cross_validate, ["--folds", "1"], "--folds"),
        (check_backends, ["gpt_text", "--steps", "-1"], "--steps"),
        (check_backends, ["gpt_text", "--timeout", "-5"], "--timeout"),
    ],
)
def test_impossible_values_are_one_argparse_error(module, argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}:" in error


@pytest.mark.one_backend
def test_check_backends_lists_the_recipes_for_a_misspelt_one(capsys):
    for name, first in (
        ("gpt_txt", "'gpt_txt' is not a recipe; did you mean 'gpt_text'? "),
        ("export", "'export' has no check_setup hook; the recipes it checks "),
    ):
        with pytest.raises(SystemExit) as exit_info:
            check_backends.parse_args([name])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1  # one line, no usage block
        assert error.split(": error: ")[1].startswith(first)
        assert (
            "are bert_imdb, caption_images, gpt_text, imagegpt_digits, "
            "imdb_attention, translate, vit_images, and the families bert, "
            "captioning, gpt, imagegpt, translation, vit" in error
        )


class _Captured(Exception):
    pass


@pytest.mark.parametrize(
    "module",
    [
        imdb_attention,
        gpt_text,
        imdb_cross_validate,
        check_backends,
        caption_images,
    ],
    ids=lambda m: m.__name__.split(".")[-1],
)
def test_help_explains_every_flag(module, monkeypatch):
    """`--help` says what each flag does (not just its name and default)."""
    parsers = []

    def capture(self, args=None, namespace=None):
        parsers.append(self)
        raise _Captured

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(_Captured):
        module.parse_args([])
    unexplained = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in parsers[0]._actions
        if action.help != argparse.SUPPRESS and not (action.help or "").strip()
    ]
    assert unexplained == []


@pytest.mark.parametrize(
    "recipe",
    [
        "imdb_attention",
        "gpt_text",
        "translate",
        "bert_imdb",
        "vit_images",
        "caption_images",
    ],
)
def test_every_recipe_takes_the_accelerator_flags(recipe):
    import importlib

    module = importlib.import_module(f"recipes.{recipe}")
    prefix = ["finetune"] if recipe == "bert_imdb" else []
    args = module.parse_args(
        prefix + ["--mixed-precision", "--no-tf32", "--distribute", "data"]
    )
    assert args.mixed_precision == "bfloat16"  # the flag alone
    assert args.tf32 is False and args.distribute == "data"
    assert args.model_parallel == 2
    args = module.parse_args(prefix + ["--mixed-precision", "float16"])
    assert args.mixed_precision == "float16" and args.distribute is None


def test_setup_accelerators_sets_the_policy_and_refuses_bad_batches(capsys):
    import keras

    args = argparse.Namespace(
        mixed_precision="float16", tf32=True, distribute=None, model_parallel=2
    )
    try:
        cli.setup_accelerators(args, batch_size=3)
        assert keras.config.dtype_policy().name == "mixed_float16"
        # Keras wraps the optimizer for dynamic loss scaling.
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    finally:
        keras.config.set_dtype_policy("float32")
    if keras.backend.backend() == "torch":
        args.mixed_precision, args.distribute = None, "data"
        with pytest.raises(SystemExit, match="^error: .*not supported"):
            cli.setup_accelerators(args, batch_size=4)


@pytest.mark.parametrize(
    "recipe",
    [
        "imdb_attention",
        "gpt_text",
        "translate",
        "bert_imdb",
        "vit_images",
        "imdb_cross_validate",
        "check_backends",
    ],
)
def test_help_states_each_default_once(recipe, capsys):
    """A flag whose help explains its default got argparse's own after it:
    "(default: attention) (default: None)"."""
    import importlib
    import re

    module = importlib.import_module(f"recipes.{recipe}")
    argv = (["finetune"] if recipe == "bert_imdb" else []) + ["--help"]
    with pytest.raises(SystemExit):
        (module.parse_args if hasattr(module, "parse_args") else module.main)(
            argv
        )
    text = capsys.readouterr().out
    entries = re.split(r"\n  (?=-)", text)
    doubled = [
        e.split()[0] for e in entries if len(re.findall(r"\(default:", e)) > 1
    ]
    assert doubled == []
