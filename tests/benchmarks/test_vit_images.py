"""benchmarks/vit_images.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras
import pytest

from benchmarks import vit_images


@pytest.mark.one_backend
def test_tiny_measurement_reports_every_model():
    args = vit_images.parse_args(
        [
            "--preset",
            "smoke",
            "--batch-size",
            "4",
            "--steps",
            "2",
            "--repeats",
            "1",
        ]
    )
    result = vit_images.measure(args)
    assert result["backend"] == keras.backend.backend()
    assert result["dtype"] == "float32"
    assert result["device"] == "cpu" and result["peak_memory_gib"] is None
    for name in ("zoo", "keras_hub", "task"):
        assert result[name]["train_images_per_second"] > 0
        assert result[name]["predict_images_per_second"] > 0
    # The same architecture: the same number of parameters.
    assert result["zoo"]["parameters"] == result["keras_hub"]["parameters"]
    assert result["train_zoo_over_keras_hub"] > 0
    line = vit_images.row("jax", result)
    assert line.startswith("jax") and line.count("x") >= 2


def test_impossible_sizes_are_refused():
    with pytest.raises(SystemExit):
        vit_images.parse_args(["--steps", "0"])
    with pytest.raises(SystemExit):
        vit_images.parse_args(["--repeats", "0"])


def test_without_the_task(monkeypatch):
    """--no-task times the backbones only (the timing itself is the tiny
    measurement's above; here it is replaced to keep the suite short)."""
    timed = {}

    def fake_time_models(models, args):
        timed.update(models)
        return {
            "device": "cpu",
            "peak_memory_gib": None,
            **{
                name: {
                    "train_images_per_second": 2.0,
                    "predict_images_per_second": 4.0,
                    "parameters": int(model.count_params()),
                }
                for name, (model, _, _) in models.items()
            },
        }

    monkeypatch.setattr(vit_images, "time_models", fake_time_models)
    args = vit_images.parse_args(
        ["--preset", "smoke", "--no-task", "--mixed-precision", "bfloat16"]
    )
    result = vit_images.measure(args)
    assert sorted(timed) == ["keras_hub", "zoo"]
    assert "task" not in result and result["dtype"] == "bfloat16"
    assert result["train_zoo_over_keras_hub"] == 1.0
    line = vit_images.row("torch", result)
    assert line.count(" - ") == 2 and line.endswith(" -")  # tasks, memory
