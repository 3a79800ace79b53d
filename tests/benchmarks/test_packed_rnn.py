"""benchmarks/packed_rnn.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras
import pytest

from benchmarks import packed_rnn


@pytest.mark.one_backend
def test_tiny_measurement_reports_every_figure():
    args = packed_rnn.parse_args(
        [
            "--batch-size",
            "4",
            "--train-length",
            "8",
            "--predict-length",
            "12",
            "--embedding-dim",
            "4",
            "--units",
            "3",
            "--repeats",
            "1",
        ]
    )
    result = packed_rnn.measure(args)
    assert result["backend"] == keras.backend.backend()
    # The three models share weights, so they predict the same.
    assert result["max_abs_difference"] < 1e-5
    for name in ("keras", "packed", "auto"):
        assert result[name]["train_step_s"] > 0
        assert result[name]["predict_s"] > 0
