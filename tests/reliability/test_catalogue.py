"""Every bad input and fault of the catalogue (`tests/reliability/
catalogue.py`, docs/reliability.md) gets its answer: an exception of the
type a user expects, or a warning, whose message is one short line naming
the problem; never a NaN, a silent answer or a page of traceback."""

import os

import pytest

from tests.reliability.catalogue import CASES, LONGEST, Models, message_of


@pytest.fixture(scope="module")
def models():
    """Each family's task, built once per module (and only when a case
    reaches it)."""
    return Models()


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.one_backend] if case.one_backend else [],
        )
        for case in CASES
    ],
)
def test_bad_input_gets_one_clear_line(case, models, tmp_path):
    kind, message = message_of(case, models, tmp_path)
    assert kind is not None, f"{case.id}: no error and no warning"
    assert issubclass(kind, case.raises), f"{kind.__name__}: {message}"
    assert "\n" not in message and "\x1b[" not in message, message
    assert len(message) <= LONGEST, message
    for fragment in case.says:
        assert fragment in message, message


def test_the_catalogue_covers_every_family():
    families = {case.family for case in CASES}
    assert families == {
        "text classifier",
        "GPT",
        "seq2seq",
        "BERT",
        "ViT",
        "ImageGPT",
        "captioning",
        "model files",
    }
    assert len(CASES) >= 60
    assert len({case.id for case in CASES}) == len(CASES)  # unique ids


@pytest.mark.one_backend
def test_the_guide_lists_every_case():
    """docs/reliability.md's table has a row per case (`python -m
    tests.reliability.catalogue` prints it)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    with open(os.path.join(path, "reliability.md"), encoding="utf-8") as f:
        guide = f.read()
    missing = [
        case.id
        for case in CASES
        if f"| {case.family} | {case.input} |" not in guide
    ]
    assert not missing, missing
