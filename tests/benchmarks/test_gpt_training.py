"""benchmarks/gpt_training.py stays runnable: one tiny measurement
in-process under the current backend (timings are not checked; the
benchmark prints them), and the FLOPs and peak arithmetic."""

import keras
import pytest

from benchmarks import gpt_training
from benchmarks import workers


def test_tiny_measurement_reports_zoo_and_keras_hub():
    args = gpt_training.parse_args(
        ["--preset", "smoke", "--batch-size", "2", "--steps", "2"])
    result = gpt_training.measure(args)
    assert result["backend"] == keras.backend.backend()
    for name in ("zoo", "keras_hub"):
        assert result[name]["tokens_per_second"] > 0
    assert result["zoo_over_keras_hub"] > 0
    assert result["zoo"]["model_tflops"] >= 0
    # cuDNN attention kernels: counted under JAX only, none on a CPU.
    kernels = None if keras.backend.backend() != "jax" else 0
    for name in ("zoo", "keras_hub"):
        assert result[name]["cudnn_attention"] == kernels
    line = gpt_training.row("jax", result)
    assert line.startswith("jax")
    assert line.endswith("0/0" if kernels == 0 else "-")


def test_peaks_by_device_and_dtype():
    assert workers.peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.4
    assert workers.peak_tflops("NVIDIA H100 80GB HBM3", "float32") == 494.7
    assert workers.peak_tflops("cpu", "float32") is None
    assert workers.accelerator()[0] in ("cpu", "unknown") or \
        workers.accelerator()[1] is not None


def test_impossible_sizes_are_refused():
    with pytest.raises(SystemExit):
        gpt_training.parse_args(["--steps", "0"])
