"""One registry of every family's presets (`zoo.models.list_presets`)."""

import doctest

import pytest

import zoo
from zoo.models import presets


def test_every_family_and_preset_is_listed_with_its_description():
    listed = zoo.models.list_presets()
    assert sorted(listed) == [
        "bert",
        "captioning",
        "gpt",
        "seq2seq",
        "text classifier",
        "vit",
    ]
    for family, names in listed.items():
        assert names, family
        assert all(isinstance(d, str) and d for d in names.values()), family
    assert "flickr8k_lstm" in listed["captioning"]
    assert zoo.models.list_presets("vit") == listed["vit"]


def test_an_unknown_family_names_the_families():
    with pytest.raises(ValueError, match="the families are bert, captioning"):
        zoo.models.list_presets("imagegpt")


def test_docstring_examples():
    failures, tried = doctest.testmod(presets)
    assert tried and not failures
