"""recipes/caption_images.py in-process: --smoke on both datasets
(offline), a local Flickr8k-layout folder, resuming, the saved model on raw
images, the data errors and the flags."""

import json

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from recipes import caption_images
from tests.data.test_flickr8k import write_flickr8k
from tests.helpers import run_interrupted_after_first_epoch
from zoo.saving import load_model


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setattr(
        keras.utils,
        "get_file",
        lambda *a, **k: pytest.fail("the test downloads"),
    )


# Both datasets' whole smoke runs once (the recipe's flags, files and
# pictures); the captioner itself is tested on every backend in
# tests/models/captioning and tests/models/test_families.py, and the
# recipe's model (training steps, prediction, saving, captions) on each
# backend by tests/testing/test_cross_backend.py.
@pytest.mark.one_backend
@pytest.mark.parametrize("dataset", caption_images.DATASETS)
def test_smoke_trains_measures_and_the_saved_model_captions_raw_images(
    dataset, tmp_path
):
    out = tmp_path / "out"
    metrics = caption_images.main(
        [
            "--smoke",
            "--dataset",
            dataset,
            "--beam",
            "2",
            "--verbose",
            "0",
            "--keep-best",
            "--output-dir",
            str(out),
        ]
    )
    assert 1 <= metrics["kept_epoch"] <= metrics["epochs"]
    written = json.loads((out / "metrics.json").read_text())
    assert written["validation_bleu_4"] == metrics["validation_bleu_4"]
    report = metrics["validation"]
    for tag in ("greedy", "beam2"):
        assert 0 <= report[tag]["bleu_4"] <= report[tag]["bleu_1"] <= 100
        assert report[tag]["distinct_captions"] >= 1
    if dataset == "digits":
        assert 0 <= report["localisation"] <= 1
        assert 0 <= report["greedy"]["exact_match"] <= 1
    else:
        assert report["greedy"]["bleu_1"] > 30  # generated shapes: learnable
    for picture in ("training_curves.png", "attention.png"):
        assert (out / picture).read_bytes()[:4] == b"\x89PNG"
    model = load_model(out / f"caption_{dataset}.keras")
    size = model.preprocessor.image_size
    channels = model.preprocessor.num_channels
    images = np.zeros((2, size[0] + 5, size[1] + 3, channels), "uint8")
    captions = model.generate(images if channels > 1 else images[..., 0])
    assert len(captions) == 2 and all(isinstance(c, str) for c in captions)


@pytest.mark.one_backend
def test_a_local_flickr8k_folder_and_an_interrupted_run(tmp_path, monkeypatch):
    folder = write_flickr8k(tmp_path / "flickr8k", with_test=True)
    argv = [
        "--data-dir",
        str(folder),
        "--preset",
        "smoke",
        "--epochs",
        "2",
        "--beam",
        "1",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path / "out"),
    ]
    run_interrupted_after_first_epoch(
        monkeypatch, lambda: caption_images.main(argv)
    )
    assert (tmp_path / "out" / "backup").is_dir()
    with pytest.raises(SystemExit, match="--resume"):
        caption_images.main(argv)
    metrics = caption_images.main(argv + ["--resume"])
    assert metrics["resumed_at_epoch"] == 1
    assert len(metrics["history"]["loss"]) == 2  # the whole run's curves
    assert not (tmp_path / "out" / "backup").exists()
    assert "test" in metrics and "bleu_4" in metrics["test"]["greedy"]


def test_missing_data_is_one_clear_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        caption_images.main(
            [
                "--data-dir",
                str(tmp_path / "none"),
                "--preset",
                "smoke",
                "--output-dir",
                str(tmp_path / "out"),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "none" in error[0]


def test_presets_flags_and_help(capsys):
    args = caption_images.parse_args([])
    assert args.preset == "flickr8k_lstm" and args.model == "lstm"
    args = caption_images.parse_args(
        ["--model", "transformer", "--dataset", "digits"]
    )
    assert args.preset == "digits_transformer"
    assert (
        caption_images.parse_args(["--smoke", "--dataset", "digits"]).preset
        == "digits_smoke"
    )
    args = caption_images.parse_args(
        [
            "--preset",
            "flickr8k_lstm_scratch",
            "--epochs",
            "3",
            "--hidden-dim",
            "64",
        ]
    )
    assert args.epochs == 3 and args.hidden_dim == 64
    with pytest.raises(SystemExit):
        caption_images.parse_args(
            ["--model", "lstm", "--preset", "flickr8k_transformer"]
        )
    assert "disagree" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        caption_images.parse_args(["--epochs", "0"])
    with pytest.raises(SystemExit):
        caption_images.main(["--help"])
    text = capsys.readouterr().out
    for flag in (
        "--dataset",
        "--data-dir",
        "--data",
        "--preset",
        "--beam",
        "--resume",
        "--max-minutes",
        "--mixed-precision",
        "--ship",
        "--smoke",
        "--seed",
        "--batch-size",
    ):
        assert flag in text


def test_bleu_against_every_reference():
    references = [
        ["a dog runs", "the dog runs", "a dog is running"],
        ["two men", "two men talk", "men are talking"],
    ]
    perfect = caption_images.bleu_scores(
        ["a dog runs", "two men talk"], references
    )
    assert perfect["bleu_1"] == perfect["bleu_2"] == 100.0
    scores = caption_images.bleu_scores(["a cat sleeps", "a car"], references)
    assert scores["bleu_1"] < 50


@pytest.mark.one_backend
@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="one backend is enough for the encoder choice",
)
def test_a_keras_applications_encoder_is_frozen_and_its_grid_cached(tmp_path):
    out = tmp_path / "out"
    metrics = caption_images.main(
        [
            "--smoke",
            "--keras-application",
            "MobileNetV2",
            "--encoder-weights",
            "random",
            "--epochs",
            "1",
            "--beam",
            "1",
            "--verbose",
            "0",
            "--output-dir",
            str(out),
        ]
    )
    assert metrics["encoder"] == "KerasApplicationsEncoder"
    assert not metrics["encoder_trainable"]
    cached = list((tmp_path / "cache").glob("features-*MobileNetV2*.npy"))
    assert len(cached) == 2  # train and validation grids, computed once
    model = load_model(out / "caption_flickr8k.keras")
    assert type(model.backbone.image_encoder).__name__ == (
        "KerasApplicationsEncoder"
    )
