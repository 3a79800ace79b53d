"""benchmarks/text_predict.py stays runnable: a tiny measurement gives a
time for both paths and the same probabilities."""

import pytest

from benchmarks import text_predict


@pytest.mark.one_backend
def test_tiny_measurement_reports_both_paths_and_agrees():
    result = text_predict.measure(
        text_predict.parse_args(["--texts", "2", "--repeats", "1"])
    )
    assert sorted(result["tasks"]) == sorted(text_predict.TASKS)
    for cell in result["tasks"].values():
        assert cell["zoo"] > 0 and cell["keras_hub"] > 0
        assert cell["max_abs_diff"] < 1e-6
    assert "keras-hub" in text_predict.header(text_predict.parse_args([]))
