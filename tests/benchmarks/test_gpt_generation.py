"""benchmarks/gpt_generation.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras

from benchmarks import gpt_generation


def test_tiny_measurement_reports_every_figure():
    args = gpt_generation.parse_args(
        ["--num-layers", "1", "--num-heads", "2", "--hidden-dim", "16",
         "--prompt-length", "4", "--new-tokens", "6", "--repeats", "1"])
    result = gpt_generation.measure(args)
    assert result["backend"] == keras.backend.backend()
    assert result["identical_greedy_output"]
    for name in ("cached", "uncached", "prefix"):
        assert result[name]["seconds"] > 0
        assert result[name]["tokens_per_second"] > 0
    assert sorted(result["prefix"]["forward_seconds_at_length"]) == [
        4, 5, 6, 8, 9]
    assert result["speedup"] > 0 and result["speedup_vs_prefix"] > 0
