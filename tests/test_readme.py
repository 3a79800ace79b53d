"""The README's Python examples run as written (from the repository root,
under the current backend)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCKS = re.findall(
    r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S
)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples load saved_models/... relatively
    code = compile(BLOCKS[index], f"README.md python example {index}", "exec")
    exec(code, {"__name__": f"readme_example_{index}"})
