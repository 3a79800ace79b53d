"""The README's Python examples run as written (from the repository root,
under the current backend). The example that loads the shipped models runs
in a fresh interpreter, as a user's script would: `import zoo` alone must
register everything those files need."""

import os
import pathlib
import re
import subprocess
import sys

import keras
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCKS = re.findall(
    r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S
)


def shipped_files_loaded_by_the_readme():
    """`saved_models/*.keras` paths that a README example loads."""
    return sorted(set(re.findall(r"saved_models/[\w.-]+\.keras",
                                 "".join(BLOCKS))))


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 3
    assert len(shipped_files_loaded_by_the_readme()) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, monkeypatch):
    if "saved_models/" in BLOCKS[index]:
        done = subprocess.run(
            [sys.executable, "-c", BLOCKS[index]], cwd=ROOT,
            capture_output=True, text=True, timeout=900,
            env=dict(os.environ, KERAS_BACKEND=keras.backend.backend()))
        assert done.returncode == 0, done.stderr[-3000:]
        return
    monkeypatch.chdir(ROOT)
    code = compile(BLOCKS[index], f"README.md python example {index}", "exec")
    exec(code, {"__name__": f"readme_example_{index}"})
