"""Recipes killed by a real SIGTERM or SIGKILL at chosen points (during a
backup's write, after `fit` before the model file, during the model file's
write; `tests/recipes/kill_points.py`), then run again: the rerun resumes
from the last whole backup, cleans what the killed save left, writes the
model file and only then removes the backup. The GPT's token-window run is
reproducible: resumed, it ends with the uninterrupted run's weights.

The plumbing is the same under every backend: these run in one backend's
suite (docs/testing.md); the exact resumption of each backend's random
state is checked in-process by each recipe's tests."""

import os
import signal
import warnings

import keras
import numpy as np
import pytest

from recipes import caption_images, gpt_text, translate
from tests.data.test_flickr8k import write_flickr8k
from tests.recipes.kill_points import run_killed
from tests.recipes.test_gpt_text import write_corpus
from tests.recipes.test_translate import local_multi30k
from zoo.saving import load_model

pytestmark = pytest.mark.one_backend

EPOCHS = 2


def gpt_argv(tmp_path, out):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        write_corpus(corpus)
    return [
        "--smoke",
        "--data",
        str(corpus),
        "--pipeline",
        "ids",
        "--steps",
        "10",
        "--eval-interval",
        "5",  # two epochs
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path / out),
    ]


def translate_argv(tmp_path, out):
    folder = tmp_path / "multi30k"
    if not folder.exists():
        local_multi30k(folder, size=100)
    return [
        "--smoke",
        "--data-dir",
        str(folder),
        "--epochs",
        str(EPOCHS),
        "--beam",
        "1",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path / out),
    ]


def caption_argv(tmp_path, out):
    folder = tmp_path / "flickr8k"
    if not folder.exists():
        write_flickr8k(folder)
    return [
        "--data-dir",
        str(folder),
        "--preset",
        "smoke",
        "--epochs",
        str(EPOCHS),
        "--beam",
        "1",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path / out),
    ]


RECIPES = {
    "gpt_text": (gpt_text, gpt_argv, "gpt_smoke.keras"),
    "translate": (translate, translate_argv, "translate_de_en.keras"),
    "caption_images": (
        caption_images,
        caption_argv,
        "caption_flickr8k.keras",
    ),
}


def temporaries(folder):
    return [
        os.path.join(root, name)
        for root, dirs, files in os.walk(folder)
        for name in dirs + files
        if name.startswith((".tmp-", ".old-"))
    ]


def kill_and_resume(tmp_path, name, point, signum):
    """Kills the recipe's run at `point`, checks what it left, runs the
    same command again (with `--resume` where the recipe asks for it) and
    checks the finished run. Returns the rerun's metrics."""
    module, make_argv, model_file = RECIPES[name]
    argv = make_argv(tmp_path, "out")
    out = tmp_path / "out"
    run_killed(
        f"recipes.{name}", argv, point, signum, log=tmp_path / "killed.log"
    )
    # What the kill left: the last whole backup, a temporary file of the
    # write it interrupted, no model file.
    assert (out / "backup" / "latest.weights.h5").exists()
    assert bool(temporaries(out)) == (point != "before_save")
    assert not (out / model_file).exists()
    if name == "caption_images":
        with pytest.raises(SystemExit, match="--resume"):
            module.main(argv)
        argv = argv + ["--resume"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = module.main(argv)
    assert not [w for w in caught if "damaged backup" in str(w.message)]
    resumed_at = 1 if point == "backup" else EPOCHS
    assert metrics["resumed_at_epoch"] == resumed_at
    assert len(metrics["history"]["loss"]) == EPOCHS  # the whole run's
    load_model(out / model_file)
    assert not (out / "backup").exists()  # removed last
    assert temporaries(out) == []
    return metrics


@pytest.mark.parametrize(
    "name, point, signum",
    [
        ("gpt_text", "before_save", signal.SIGTERM),
        ("translate", "backup", signal.SIGTERM),
        ("translate", "mid_save", signal.SIGKILL),
        ("caption_images", "backup", signal.SIGKILL),
        ("caption_images", "mid_save", signal.SIGTERM),
    ],
)
def test_a_killed_run_resumes_and_cleans_up(tmp_path, name, point, signum):
    kill_and_resume(tmp_path, name, point, signum)


def test_a_run_killed_mid_backup_ends_with_the_uninterrupted_weights(
    tmp_path,
):
    whole = gpt_text.main(gpt_argv(tmp_path, "whole"))
    resumed = kill_and_resume(tmp_path, "gpt_text", "backup", signal.SIGKILL)
    assert resumed["history"] == whole["history"]
    assert resumed["steps"] == whole["steps"] == 10
    a = keras.saving.load_model(tmp_path / "whole" / "gpt_smoke.keras")
    b = keras.saving.load_model(tmp_path / "out" / "gpt_smoke.keras")
    for x, y in zip(a.weights, b.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(y)
        )
