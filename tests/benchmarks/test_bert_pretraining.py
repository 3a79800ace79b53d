"""benchmarks/bert_pretraining.py stays runnable: one tiny measurement
in-process under the current backend (timings are not checked)."""

import keras
import pytest

from benchmarks import bert_pretraining


@pytest.mark.one_backend
def test_tiny_measurement_reports_both_models():
    args = bert_pretraining.parse_args(
        [
            "--preset",
            "smoke",
            "--vocabulary-size",
            "50",
            "--sequence-length",
            "16",
            "--batch-size",
            "4",
            "--steps",
            "2",
            "--mixed-precision",
            "bfloat16",
        ]
    )
    result = bert_pretraining.measure(args)
    assert result["backend"] == keras.backend.backend()
    assert result["dtype"] == "bfloat16"
    assert result["device"] == "cpu" and result["peak_memory_gib"] is None
    for name in ("zoo", "keras_hub"):
        assert result[name]["tokens_per_second"] > 0
    # The same architecture: the same number of parameters.
    assert result["zoo"]["parameters"] == result["keras_hub"]["parameters"]
    assert result["zoo_over_keras_hub"] > 0
    assert bert_pretraining.row("jax", result).rstrip().endswith("-")


def test_impossible_sizes_are_refused():
    with pytest.raises(SystemExit):
        bert_pretraining.parse_args(["--sequence-length", "2"])
