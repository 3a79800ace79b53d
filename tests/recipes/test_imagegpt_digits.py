"""recipes/imagegpt_digits.py in-process: --smoke (offline), a local .npz
copy judged by a classifier, --evaluate, --resume after an interruption,
and the data errors. The recipe's plumbing runs in the JAX run, where
the smoke model trains quickest."""

import json

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from recipes import imagegpt_digits
from tests.data.test_images import write_npz
from tests.helpers import run_interrupted_after_first_epoch
from zoo.models.vit import ViTImageClassifier


@pytest.mark.one_backend("jax")
def test_smoke_trains_measures_draws_and_the_saved_model_completes(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(
        imagegpt_digits,
        "load_images",
        lambda name: pytest.fail("--smoke downloads"),
    )
    metrics = imagegpt_digits.main(
        ["--smoke", "--verbose", "0", "--output-dir", str(tmp_path)]
    )
    written = json.loads((tmp_path / "metrics.json").read_text())
    bits = written["validation_bits_per_pixel"]
    assert bits == metrics["validation_bits_per_pixel"]
    assert 0 < bits < 2  # 4 levels: 2 bits is a uniform guess
    assert len(written["palette"]) == 4
    probe = written["probe"]
    assert set(probe) == {"raw_pixels", "final", "block_1"}
    assert all(0 <= p["accuracy"] <= 1 for p in probe.values())
    assert probe["final"]["dim"] == 32 and probe["raw_pixels"]["dim"] == 64
    assert written["completions"] is None  # --smoke: no classifier
    for picture in ("completions.png", "samples.png", "training_curves.png"):
        assert (tmp_path / picture).read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "backup").exists()  # the run finished
    model = keras.saving.load_model(tmp_path / "imagegpt_digits.keras")
    completed = model.complete(np.zeros((2, 8, 8), "uint8"), rows=4)
    assert completed.shape == (2, 8, 8) and completed.dtype == np.uint8


def tiny_classifier(path):
    keras.utils.set_random_seed(0)
    classifier = ViTImageClassifier.from_preset("smoke", num_classes=4)
    classifier.compile()
    classifier.save(path)
    return str(path)


@pytest.mark.one_backend("jax")
def test_a_local_npz_judged_by_a_classifier_then_evaluate(tmp_path):
    # 16x16 digits: the smoke model reads them at 8x8, and the classifier
    # reads the completions upsampled back to 16x16.
    data = write_npz(
        tmp_path / "digits.npz", count=60, size=16, with_test=False
    )
    classifier = tiny_classifier(tmp_path / "vit.keras")
    common = ["--data", data, "--preset", "smoke", "--verbose", "0"]
    common += ["--classifier", classifier, "--probe-steps", "20"]
    metrics = imagegpt_digits.main(
        [*common, "--epochs", "1", "--output-dir", str(tmp_path / "out")]
    )
    judged = metrics["completions"]
    assert judged["images"] == metrics["validation_images"] == 8
    assert judged["rows_kept"] == 4
    for key in (
        "accuracy_on_originals",
        "accuracy_on_quantised",
        "greedy_completion_agreement",
        "top_k3_completion_agreement",
    ):
        assert 0 <= judged[key] <= 1, key
    saved = tmp_path / "out" / "imagegpt_digits.keras"
    evaluated = imagegpt_digits.main(
        [
            *common,
            "--evaluate",
            str(saved),
            "--output-dir",
            str(tmp_path / "eval"),
        ]
    )
    # The saved model measures as the run did (the probes retrain: the
    # same seed, the same features).
    assert evaluated["validation_bits_per_pixel"] == pytest.approx(
        metrics["validation_bits_per_pixel"], abs=1e-4
    )
    assert evaluated["completions"] == metrics["completions"] | {
        "greedy_completion_seconds": evaluated["completions"][
            "greedy_completion_seconds"
        ]
    }
    assert (tmp_path / "eval" / "evaluation.json").exists()
    with pytest.raises(SystemExit) as error:
        imagegpt_digits.main([*common, "--evaluate", classifier])
    assert error.value.code == 2


@pytest.mark.one_backend("jax")
def test_an_interrupted_run_resumes_only_when_asked(tmp_path, monkeypatch):
    argv = ["--smoke", "--epochs", "2", "--verbose", "0", "--probe-steps", "20"]
    argv += ["--output-dir", str(tmp_path)]
    run_interrupted_after_first_epoch(
        monkeypatch, lambda: imagegpt_digits.main(argv)
    )
    assert (tmp_path / "backup").is_dir()
    with pytest.raises(SystemExit, match="--resume"):
        imagegpt_digits.main(argv)
    metrics = imagegpt_digits.main([*argv, "--resume"])
    assert len(metrics["history"]["loss"]) == 2
    assert not (tmp_path / "backup").exists()


@pytest.mark.one_backend("jax")
def test_colour_data_and_bad_flags_are_one_line(tmp_path):
    data = write_npz(tmp_path / "colour.npz", colour=True)
    with pytest.raises(SystemExit, match="grey images"):
        imagegpt_digits.main(
            ["--data", data, "--preset", "smoke", "--output-dir", str(tmp_path)]
        )
    with pytest.raises(SystemExit):
        imagegpt_digits.parse_args(["--levels", "1"])
