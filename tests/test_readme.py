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


MARKDOWN = [
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
]


def shipped_files_loaded_by_the_readme():
    """`saved_models/*.keras` paths that a README example loads."""
    return sorted(
        set(re.findall(r"saved_models/[\w.-]+\.keras", "".join(BLOCKS)))
    )


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 3
    assert len(shipped_files_loaded_by_the_readme()) >= 5


def _example(index):
    """An example that loads shipped files runs in one backend's run: every
    shipped file is loaded and predicts under every backend in
    tests/test_package.py, `export` runs under every backend in
    tests/test_export.py, and each call the tour of the shipped models makes
    is its family's test under every backend. The export example runs under
    TensorFlow, where exporting is quickest."""
    loads = set(re.findall(r"saved_models/[\w.-]+\.keras", BLOCKS[index]))
    if not loads:
        return pytest.param(index, id=str(index))
    backend = ["tensorflow"] if ".export(" in BLOCKS[index] else []
    mark = pytest.mark.one_backend(*backend)
    return pytest.param(index, marks=[mark], id=str(index))


@pytest.mark.parametrize("index", [_example(i) for i in range(len(BLOCKS))])
def test_readme_example_runs(index, monkeypatch):
    if "saved_models/" in BLOCKS[index]:
        done = subprocess.run(
            [sys.executable, "-c", BLOCKS[index]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env=dict(os.environ, KERAS_BACKEND=keras.backend.backend()),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return
    monkeypatch.chdir(ROOT)
    code = compile(BLOCKS[index], f"README.md python example {index}", "exec")
    exec(code, {"__name__": f"readme_example_{index}"})


def broken_tables(text):
    """Line numbers of table rows that follow a blank line which follows a
    table row: Markdown ends a table at a blank line, so such rows render
    as a paragraph of pipes."""
    lines = text.splitlines()
    return [
        n + 1
        for n in range(2, len(lines))
        if lines[n].startswith("|")
        and not lines[n - 1].strip()
        and lines[n - 2].startswith("|")
    ]


def test_broken_tables_finds_a_blank_line_inside_a_table():
    assert broken_tables("| a |\n| --- |\n| 1 |\n\n| 2 |\n") == [5]
    assert broken_tables("| a |\n| --- |\n| 1 |\n\ntext\n\n| b |\n") == []


@pytest.mark.parametrize("path", MARKDOWN)
def test_markdown_tables_have_no_blank_line_inside(path):
    assert broken_tables((ROOT / path).read_text()) == []


def missing_references(text, folder=ROOT):
    """Relative links (from `folder`), and repository paths in backticks, of
    a Markdown text that name no file of the repository."""
    links = [
        m.group(1)
        for m in re.finditer(r"\]\(([^)#\s]+)[^)]*\)", text)
        if not re.match(r"[a-z]+:", m.group(1))
    ]
    paths = re.findall(
        r"`((?:recipes|benchmarks|zoo|saved_models|docs|tests)"
        r"/[\w./-]+\.(?:py|keras|md|png|sh))`",
        text,
    )
    return [item for item in links if not (folder / item).exists()] + [
        p for p in paths if not (ROOT / p).exists()
    ]


def test_missing_references_finds_files_that_are_not_there():
    text = (
        "[ok](docs/gpt.md), [gone](docs/nothing.md), "
        "[web](https://keras.io), `saved_models/imdb_rnn.keras` and "
        "`saved_models/imdb_attention_bigrams.keras`"
    )
    assert missing_references(text) == [
        "docs/nothing.md",
        "saved_models/imdb_attention_bigrams.keras",
    ]


@pytest.mark.parametrize("path", MARKDOWN)
def test_links_and_paths_in_the_documents_exist(path):
    file = ROOT / path
    assert missing_references(file.read_text(), file.parent) == []
