"""recipes/vit_images.py in-process: --smoke (offline), a local .npz copy
with a test split, the data errors and the flags."""

import json

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from recipes import vit_images
from tests.data.test_images import write_npz
from tests.helpers import run_interrupted_after_first_epoch


@pytest.mark.one_backend
def test_smoke_trains_draws_and_the_saved_model_reads_uint8(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(
        vit_images, "load_images", lambda name: pytest.fail("--smoke downloads")
    )
    metrics = vit_images.main(
        [
            "--smoke",
            "--verbose",
            "0",
            "--average-epochs",
            "2",
            "--output-dir",
            str(tmp_path),
        ]
    )
    epochs = metrics["epochs"]
    assert metrics["averaged_epochs"] == [epochs - 1, epochs]
    assert not (tmp_path / "average").exists()  # removed with the backup
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["validation_accuracy"] == metrics["validation_accuracy"]
    assert metrics["validation_accuracy"] > 0.4  # 4 classes, learnable
    assert written["throughput"]["images_per_second"] > 0
    for picture in ("training_curves.png", "rollout.png", "positions.png"):
        assert (tmp_path / picture).read_bytes()[:4] == b"\x89PNG"
    model = keras.saving.load_model(tmp_path / "vit_mnist.keras")
    probabilities = model.predict(np.zeros((2, 8, 8), "uint8"), verbose=0)
    assert probabilities.shape == (2, 4)


@pytest.mark.one_backend
def test_a_local_npz_with_a_test_split(tmp_path):
    path = write_npz(tmp_path / "digits.npz", count=60)
    metrics = vit_images.main(
        [
            "--data",
            path,
            "--preset",
            "smoke",
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path / "out"),
        ]
    )
    # 10% held out per class: 2 of each of the 4 classes of 15.
    assert "test_accuracy" in metrics and metrics["train_images"] == 52


@pytest.mark.one_backend
def test_an_interrupted_run_resumes_from_its_last_epoch(tmp_path, monkeypatch):
    path = write_npz(tmp_path / "digits.npz", count=40)
    argv = [
        "--data",
        path,
        "--preset",
        "smoke",
        "--epochs",
        "2",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path / "out"),
    ]
    run_interrupted_after_first_epoch(
        monkeypatch, lambda: vit_images.main(argv)
    )
    assert (tmp_path / "out" / "backup").is_dir()
    metrics = vit_images.main(argv)
    assert metrics["resumed_at_epoch"] == 1
    assert len(metrics["history"]["loss"]) == 2  # the whole run's curves
    assert not (tmp_path / "out" / "backup").exists()


def test_missing_data_is_one_clear_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        vit_images.main(
            [
                "--data",
                str(tmp_path / "none.npz"),
                "--output-dir",
                str(tmp_path),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "does not exist" in error[0]


def test_flags(capsys):
    args = vit_images.parse_args(["--dataset", "cifar10"])
    assert args.preset == "cifar" and args.epochs == 200
    args = vit_images.parse_args(["--epochs", "5"])
    assert args.preset == "mnist" and args.epochs == 5
    with pytest.raises(SystemExit):
        vit_images.parse_args(["--dataset", "imagenet"])
    with pytest.raises(SystemExit):
        vit_images.parse_args(["--validation-fraction", "0"])
    assert "--validation-fraction: must be above 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        vit_images.main(["--help"])
    text = capsys.readouterr().out
    for flag in (
        "--dataset",
        "--data",
        "--epochs",
        "--mixed-precision",
        "--translate",
        "--rotate",
        "--zoom",
        "--ship",
        "--smoke",
    ):
        assert flag in text


def test_colour_images_with_the_grey_preset_are_one_clear_error(tmp_path):
    x = np.zeros((40, 28, 28, 3), "uint8")
    path = tmp_path / "colour.npz"
    np.savez(path, x=x, y=np.arange(40) % 4)
    with pytest.raises(
        SystemExit,
        match="3 channel\\(s\\) but the 'mnist' "
        "preset reads 1: pass --preset cifar",
    ):
        vit_images.main(
            [
                "--data",
                str(path),
                "--epochs",
                "1",
                "--output-dir",
                str(tmp_path / "out"),
            ]
        )


def test_augmentation_layers_and_model_names():
    args = vit_images.parse_args(["--preset", "mnist_conv_stem"])
    assert (args.translate, args.rotate, args.zoom) == (0.1, 0.03, 0.1)
    layers = vit_images.augmentation(args)
    assert [type(layer).__name__ for layer in layers] == [
        "RandomTranslation",
        "RandomRotation",
        "RandomZoom",
    ]
    assert vit_images.model_name(args) == "vit_mnist_conv_stem"
    args = vit_images.parse_args(["--preset", "mnist_seqpool", "--zoom", "0"])
    assert [
        type(layer).__name__ for layer in vit_images.augmentation(args)
    ] == [
        "RandomTranslation",
        "RandomRotation",
    ]
    assert vit_images.model_name(args) == "vit_mnist_seqpool"
    assert vit_images.model_name(vit_images.parse_args([])) == "vit_mnist"
    assert vit_images.model_name(vit_images.parse_args(["--smoke"])) == (
        "vit_mnist"
    )
    cifar = vit_images.parse_args(["--dataset", "cifar10"])
    assert vit_images.model_name(cifar) == "vit_cifar10"


def test_the_training_batches_are_rotated_and_zoomed():
    args = vit_images.parse_args(
        ["--preset", "mnist_conv_stem", "--batch-size", "4", "--translate", "0"]
    )
    x = np.zeros((4, 28, 28), "uint8")
    x[:, 4:24, 13:15] = 255  # a vertical bar
    batch, labels = next(iter(vit_images.train_dataset(x, np.arange(4), args)))
    batch = np.asarray(batch)
    assert batch.shape == (4, 28, 28, 1) and sorted(np.asarray(labels)) == [
        0,
        1,
        2,
        3,
    ]
    assert 0 <= batch.min() and batch.max() <= 255
    # Rotated and zoomed: no longer the bar, pixel for pixel.
    assert not np.array_equal(batch[..., 0], x.astype("float32"))
