"""recipes/gpt_text.py in-process: --smoke on a generated corpus (character
and wordpiece), the get_file default, the missing-data error, and the shipped
model generating from strings under the current backend."""

import json
import os

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the layers for loading)
from recipes import gpt_text
from tests.helpers import run_interrupted_after_first_epoch

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
SHIPPED = os.path.join(ROOT, "saved_models", "gpt_shakespeare.keras")


def write_corpus(path, lines=400):
    """A play-shaped text with a learnable pattern, written by the test."""
    rng = np.random.default_rng(0)
    names = ["ROMEO", "JULIET", "NURSE"]
    words = ["love", "night", "fair", "sweet", "death", "light", "thou", "art"]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f"{names[i % 3]}:\n")
            f.write(" ".join(rng.choice(words, 6)) + ".\n\n")
    return str(path)


def smoke(tmp_path, *extra):
    data = write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "out"
    metrics = gpt_text.main(
        [
            "--smoke",
            "--data",
            data,
            "--verbose",
            "0",
            "--output-dir",
            str(out),
            *extra,
        ]
    )
    return metrics, out


@pytest.mark.one_backend
def test_smoke_trains_writes_and_the_saved_model_generates(tmp_path):
    metrics, out = smoke(tmp_path)
    written = json.loads((out / "metrics.json").read_text())
    assert written["backend"] == keras.backend.backend()
    assert written["validation_loss_unit"] == "nats/char"
    for key in (
        "parameters",
        "steps",
        "train_seconds",
        "train_loss",
        "validation_loss",
        "history",
        "samples",
    ):
        assert key in written, key
    assert written["validation_loss"] == metrics["validation_loss"]
    assert written["throughput"]["tokens_per_second"] > 0
    # Training moved the loss well below uniform guessing over the vocabulary.
    assert written["history"]["val_loss"][-1] < 0.8 * np.log(
        written["vocabulary_size"]
    )
    assert (out / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert set(written["samples"]) == {"greedy", "top_k"}

    loaded = keras.saving.load_model(str(out / "gpt_smoke.keras"))
    outputs = loaded.generate(["ROMEO:\n"], max_length=24)
    assert outputs[0].startswith("ROMEO:\n") and len(outputs[0]) > len(
        "ROMEO:\n"
    )
    # The file carries the tokenizer: generation needs nothing else.
    assert (
        loaded.preprocessor.tokenizer.vocabulary_size()
        == written["vocabulary_size"]
    )


@pytest.mark.one_backend
def test_smoke_with_the_wordpiece_tokenizer(tmp_path):
    metrics, out = smoke(
        tmp_path, "--tokenizer", "wordpiece", "--vocab-size", "120"
    )
    assert metrics["tokenizer"] == "wordpiece"
    assert metrics["validation_loss_unit"] == "nats/token"
    loaded = keras.saving.load_model(str(out / "gpt_smoke.keras"))
    (text,) = loaded.generate(["ROMEO :"], max_length=12)
    assert isinstance(text, str) and text.startswith("ROMEO")


@pytest.mark.one_backend
def test_default_corpus_comes_from_keras_get_file(tmp_path, monkeypatch):
    from zoo.data import corpus

    fixture = write_corpus(tmp_path / "download.txt")
    calls = []

    def fake_get_file(fname, origin, cache_subdir):
        calls.append(origin)
        return fixture

    monkeypatch.setenv("HOME", str(tmp_path))  # nothing cached there
    monkeypatch.setattr(corpus, "check_reachable", lambda *a, **k: None)
    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    metrics = gpt_text.main(
        [
            "--preset",
            "smoke",
            "--steps",
            "4",
            "--eval-interval",
            "2",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path / "out"),
        ]
    )
    assert calls == [gpt_text.SHAKESPEARE_URL]
    assert metrics["data"] == gpt_text.SHAKESPEARE_URL


@pytest.mark.one_backend
def test_smoke_runs_offline_on_a_generated_play(tmp_path, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("--smoke must not download")

    monkeypatch.setattr(keras.utils, "get_file", no_download)
    metrics = gpt_text.main(
        ["--smoke", "--verbose", "0", "--output-dir", str(tmp_path)]
    )
    assert metrics["data"] == "generated" and metrics["smoke"]
    assert np.isfinite(metrics["validation_loss"])


@pytest.mark.one_backend
def test_evaluate_reports_a_saved_models_validation_loss(tmp_path):
    metrics, out = smoke(tmp_path)
    data = str(tmp_path / "corpus.txt")
    # The same windows the run validated on: the same loss, from text
    # windows and from the ids.
    for pipeline in ("text", "ids"):
        evaluated = gpt_text.main(
            [
                "--smoke",
                "--data",
                data,
                "--verbose",
                "0",
                "--evaluate",
                str(out / "gpt_smoke.keras"),
                "--pipeline",
                pipeline,
            ]
        )
        assert evaluated["validation_loss"] == pytest.approx(
            metrics["validation_loss"], abs=2e-4
        ), pipeline


def test_smoke_on_token_windows(tmp_path):
    metrics, out = smoke(
        tmp_path,
        "--pipeline",
        "ids",
        "--steps",
        "10",
        "--eval-interval",
        "5",
        "--dropout",
        "0.1",
        "--attention-dropout",
        "0",
    )
    assert metrics["pipeline"] == "ids" and metrics["steps"] == 10
    assert metrics["history"]["loss"][-1] < metrics["history"]["loss"][0]
    assert metrics["throughput"]["tokens_per_second"] > 0
    backbone = keras.saving.load_model(str(out / "gpt_smoke.keras")).backbone
    assert (backbone.dropout, backbone.attention_dropout) == (0.1, 0.0)
    assert (
        metrics["config"]["dropout"],
        metrics["config"]["attention_dropout"],
    ) == (0.1, 0.0)


def test_an_interrupted_run_on_token_windows_resumes_exactly(
    tmp_path, monkeypatch
):
    data = write_corpus(tmp_path / "corpus.txt")

    def run(out):
        return gpt_text.main(
            [
                "--smoke",
                "--data",
                data,
                "--pipeline",
                "ids",
                "--steps",
                "10",
                "--eval-interval",
                "5",
                "--verbose",
                "0",
                "--output-dir",
                str(tmp_path / out),
            ]
        )

    whole = run("whole")
    run_interrupted_after_first_epoch(monkeypatch, lambda: run("cut"))
    assert (tmp_path / "cut" / "backup").is_dir()
    resumed = run("cut")
    assert whole["resumed_at_epoch"] == 0 and resumed["resumed_at_epoch"] == 1
    assert resumed["steps"] == whole["steps"] == 10
    # The same windows, dropout and weights after the interruption: the
    # same curves, the first epoch read back from the interrupted run's log.
    assert resumed["history"] == whole["history"]
    assert not (tmp_path / "cut" / "backup").exists()


@pytest.mark.one_backend
def test_a_run_stopped_by_its_budget_keeps_its_backup_to_continue(tmp_path):
    argv = ["--steps", "10", "--eval-interval", "5"]  # two epochs
    stopped, out = smoke(tmp_path, *argv, "--max-minutes", "0.0001")
    assert len(stopped["history"]["loss"]) == 1
    assert (out / "gpt_smoke.keras").exists()  # what it trained, saved
    assert (out / "backup").is_dir()  # kept: the same command continues
    resumed, _ = smoke(tmp_path, *argv)
    assert resumed["resumed_at_epoch"] == 1 and resumed["steps"] == 10
    assert not (out / "backup").exists()


@pytest.mark.one_backend
def test_token_windows_train_without_tensorflow(tmp_path):
    """The accelerator path: a machine with JAX or PyTorch and no
    TensorFlow trains, samples and saves from the character ids."""
    import subprocess
    import sys

    if keras.backend.backend() == "tensorflow":
        pytest.skip("needs a backend other than TensorFlow")
    data = write_corpus(tmp_path / "corpus.txt")
    script = (
        "import sys, runpy\n"
        "sys.modules['tensorflow'] = None  # an install without TensorFlow\n"
        "sys.modules['tensorflow_text'] = None\n"
        "sys.argv = ['gpt_text.py'] + sys.argv[1:]\n"
        "runpy.run_path('recipes/gpt_text.py', run_name='__main__')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "--smoke",
            "--pipeline",
            "ids",
            "--data",
            data,
            "--verbose",
            "0",
            "--steps",
            "10",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT gpt_text preset=smoke" in done.stdout
    assert (tmp_path / "out" / "gpt_smoke.keras").exists()


def test_missing_data_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpt_text.main(["--smoke", "--data", str(tmp_path / "nope.txt")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "no text file" in error and "--data" in error
    assert "Traceback" not in error


def test_a_bad_model_file_is_one_clear_error(tmp_path, capsys):
    data = tmp_path / "play.txt"
    data.write_text("ROMEO: hello there\n" * 50)
    (tmp_path / "garbage.keras").write_text("not a model")
    for path, message in (
        (tmp_path / "none.keras", "no such model file"),
        (tmp_path / "garbage.keras", "not a .keras archive"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            gpt_text.main(["--evaluate", str(path), "--data", str(data)])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert message in error and "Traceback" not in error


def test_shipped_model_generates_from_strings():
    gpt = keras.saving.load_model(SHIPPED)
    greedy = gpt.generate(["ROMEO:\n", "JULIET:\n"], max_length=40)
    assert [g[: len(p)] for g, p in zip(greedy, ["ROMEO:\n", "JULIET:\n"])] == [
        "ROMEO:\n",
        "JULIET:\n",
    ]
    assert greedy == gpt.generate(
        ["ROMEO:\n", "JULIET:\n"], max_length=40, use_cache=False
    )
    sampled = gpt.generate(["ROMEO:\n"], max_length=40, sampler="top_k", seed=3)
    assert sampled == gpt.generate(
        ["ROMEO:\n"], max_length=40, sampler="top_k", seed=3
    )


def test_shipped_model_writes_a_page_the_same_on_every_backend():
    """Greedy text from a model with a 128-character context, three
    contexts long: past the context each token is predicted from the last
    128. The expected page (1,000 characters, of which the test reads the
    first 400: greedy text does not depend on how far it goes on) was
    generated under JAX; TensorFlow and PyTorch must write the same."""
    expected = open(
        os.path.join(
            ROOT,
            "tests",
            "recipes",
            "data",
            "gpt_shakespeare_romeo_greedy_1000.txt",
        ),
        encoding="utf-8",
    ).read()
    gpt = keras.saving.load_model(SHIPPED)
    assert gpt.backbone.sequence_length == 128
    page = gpt.generate("ROMEO:", max_length=400)
    assert len(page) == 400
    assert page == expected[:400]


@pytest.mark.one_backend
def test_the_saved_model_is_the_best_epochs_not_the_last(tmp_path, monkeypatch):
    # A learning rate far too high: the loss jumps after the first epochs.
    flags = (
        "--pipeline",
        "ids",
        "--steps",
        "12",
        "--eval-interval",
        "2",
        "--learning-rate",
        "0.3",
    )
    metrics, out = smoke(tmp_path, *flags)
    curve = metrics["history"]["val_loss"]
    assert metrics["kept_epoch"] == int(np.argmin(curve)) + 1
    assert metrics["validation_loss"] == pytest.approx(min(curve), abs=1e-4)
    evaluated = gpt_text.main(
        [
            "--smoke",
            "--data",
            str(tmp_path / "corpus.txt"),
            "--verbose",
            "0",
            "--pipeline",
            "ids",
            "--evaluate",
            str(out / "gpt_smoke.keras"),
        ]
    )
    assert evaluated["validation_loss"] == pytest.approx(
        metrics["validation_loss"], abs=2e-4
    )

    # Interrupted after the first epoch and resumed: the best of all the
    # epochs, the first included, from the files in the output folder.
    for name in ("cut", "last"):
        (tmp_path / name).mkdir()
    run_interrupted_after_first_epoch(
        monkeypatch, lambda: smoke(tmp_path / "cut", *flags)
    )
    resumed, _ = smoke(tmp_path / "cut", *flags)
    assert resumed["resumed_at_epoch"] == 1
    assert resumed["kept_epoch"] == metrics["kept_epoch"]
    assert resumed["validation_loss"] == pytest.approx(
        metrics["validation_loss"], abs=1e-4
    )

    last, _ = smoke(tmp_path / "last", *flags, "--no-keep-best")
    assert last["history"]["val_loss"] == curve  # the same run
    assert last["kept_epoch"] == len(curve)
    assert last["validation_loss"] == pytest.approx(curve[-1], abs=1e-4)
