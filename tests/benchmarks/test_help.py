"""Every benchmark's --help states each default once, and never as
"(default: None)" (the recipes' HelpFormatter)."""

import importlib

import pytest

BENCHMARKS = (
    "attention_scaling",
    "bert_pretraining",
    "captioning",
    "export_formats",
    "gpt_generation",
    "gpt_training",
    "layers",
    "packed_rnn",
    "translation",
    "vit_images",
)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_help_states_defaults_once(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit):
        module.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--backends" in text
    assert "(default: None)" not in text
    assert text.count("(default: all)") == 1
