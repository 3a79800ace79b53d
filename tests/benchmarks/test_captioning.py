"""benchmarks/captioning.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras
import pytest

from benchmarks import captioning


@pytest.mark.one_backend
def test_tiny_measurement_reports_every_figure():
    args = captioning.parse_args(
        [
            "--preset",
            "smoke",
            "--images",
            "5",
            "--batch-size",
            "4",
            "--beam",
            "2",
            "--no-torch-compile",
        ]
    )
    result = captioning.measure(args)
    assert "greedy_compiled" not in result
    assert result["backend"] == keras.backend.backend()
    assert result["images"] == 5 and result["model"] == "untrained smoke"
    for name in ("greedy", "greedy_recomputed", "beam2", "encoder"):
        assert result[name]["seconds"] > 0
        assert result[name]["images_per_second"] > 0
    # The cache changes the cost, never the caption.
    assert result["same_greedy_output"]


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the compiled decode step: PyTorch only",
)
def test_the_compiled_decode_step_captions_the_same(
    torch_compile_without_inductor,
):
    # The script's compiled path; inductor's tokens are
    # tests/models/test_torch_compile.py's.
    args = captioning.parse_args(
        ["--preset", "smoke", "--images", "4", "--batch-size", "4"]
    )
    result = captioning.measure(args)
    for search in ("greedy", "beam3"):
        compiled = result[f"{search}_compiled"]
        assert compiled["same_output"] and compiled["compiled_over_eager"] > 0


def test_a_missing_model_is_one_clear_line(tmp_path):
    args = captioning.parse_args(["--model", str(tmp_path / "none.keras")])
    with pytest.raises(SystemExit, match="no model at"):
        captioning.measure(args)
