"""benchmarks/translation.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras
import pytest

from benchmarks import translation


@pytest.mark.one_backend
def test_tiny_measurement_reports_every_figure():
    args = translation.parse_args(
        [
            "--preset",
            "smoke",
            "--sentences",
            "5",
            "--batch-size",
            "4",
            "--beam",
            "2",
            "--no-torch-compile",
        ]
    )
    result = translation.measure(args)
    assert "greedy_compiled" not in result
    assert result["backend"] == keras.backend.backend()
    assert result["sentences"] == 5 and result["model"] == "untrained smoke"
    for name in (
        "greedy_cached",
        "greedy_recomputed",
        "beam2_cached",
        "beam2_recomputed",
    ):
        assert result[name]["seconds"] > 0
        assert result[name]["sentences_per_second"] > 0
    # The cache changes the cost, never the translation.
    assert result["greedy_same_output"]
    assert result["greedy_speedup"] > 0 and result["beam2_speedup"] > 0


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the compiled decode step: PyTorch only",
)
def test_the_compiled_decode_step_translates_the_same(
    torch_compile_without_inductor,
):
    # The script's compiled path; inductor's tokens are
    # tests/models/test_torch_compile.py's.
    args = translation.parse_args(
        [
            "--preset",
            "smoke",
            "--sentences",
            "4",
            "--batch-size",
            "4",
            "--beam",
            "2",
        ]
    )
    result = translation.measure(args)
    for search in ("greedy", "beam2"):
        compiled = result[f"{search}_compiled"]
        assert compiled["same_output"] and compiled["compiled_over_eager"] > 0


def test_a_missing_model_is_one_clear_line(tmp_path):
    args = translation.parse_args(["--model", str(tmp_path / "none.keras")])
    with pytest.raises(SystemExit, match="no model at"):
        translation.measure(args)


def test_bad_flags_are_refused():
    with pytest.raises(SystemExit):
        translation.parse_args(["--beam", "1"])
