"""benchmarks/gpt_training.py stays runnable: one tiny measurement
in-process under the current backend (timings are not checked; the
benchmark prints them), and the FLOPs and peak arithmetic."""

import keras
import pytest

from benchmarks import gpt_training
from zoo.testing.benchmarks import accelerator, peak_tflops


@pytest.mark.one_backend("jax")
def test_tiny_measurement_reports_zoo_and_keras_hub(tmp_path):
    args = gpt_training.parse_args(
        [
            "--preset",
            "smoke",
            "--batch-size",
            "2",
            "--steps",
            "2",
            "--hlo-dir",
            str(tmp_path),
        ]
    )
    result = gpt_training.measure(args)
    assert result["backend"] == keras.backend.backend()
    for name in ("zoo", "keras_hub"):
        assert result[name]["tokens_per_second"] > 0
    assert result["zoo_over_keras_hub"] > 0
    assert result["zoo"]["model_tflops"] >= 0
    for name in ("zoo", "keras_hub"):  # the compiling epoch, timed
        assert result[name]["warm_up_seconds"] > 0
        assert "graphs" not in result[name]  # not torch.compile'd
    line = gpt_training.row("jax", result)
    assert line.startswith("jax")
    kernels = line.split()[-2]
    if keras.backend.backend() != "jax":  # what XLA compiled: JAX only
        assert result["zoo"]["compiled"] is None
        assert kernels == "-"
        return
    for name in ("zoo", "keras_hub"):
        compiled = result[name]["compiled"]
        assert compiled["cudnn_attention"] == 0  # none on a CPU
        assert compiled["gflop"] > 0 and compiled["gbytes"] > 0
        assert "ENTRY" in (tmp_path / f"{name}_jax.hlo.txt").read_text()
    assert kernels == "0/0"


@pytest.mark.one_backend
def test_approximate_gelu_variant_is_timed_beside_zoo():
    args = gpt_training.parse_args(
        [
            "--preset",
            "smoke",
            "--batch-size",
            "2",
            "--steps",
            "2",
            "--approximate-gelu",
        ]
    )
    result = gpt_training.measure(args)
    assert result["zoo_gelu_approximate"]["tokens_per_second"] > 0
    assert result["zoo_gelu_approximate_over_keras_hub"] > 0
    assert gpt_training.row("jax", result).split()[-1].endswith("x")
    assert "tanh-GELU" in gpt_training.header(args)


def test_peaks_by_device_and_dtype():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.4
    assert peak_tflops("NVIDIA H100 80GB HBM3", "float32") == 494.7
    assert peak_tflops("cpu", "float32") is None
    assert (
        accelerator()[0] in ("cpu", "unknown") or accelerator()[1] is not None
    )


def test_impossible_sizes_are_refused():
    with pytest.raises(SystemExit):
        gpt_training.parse_args(["--steps", "0"])
