"""benchmarks/attention_scaling.py stays runnable: two tiny lengths
in-process under the current backend, and the plot."""

import keras
import pytest

from benchmarks import attention_scaling


@pytest.mark.one_backend("jax")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tiny_lengths_are_timed_on_both_paths(tmp_path, dtype):
    args = attention_scaling.parse_args(
        [
            "--lengths",
            "8,16",
            "--batch-size",
            "1",
            "--num-heads",
            "2",
            "--head-dim",
            "4",
            "--steps",
            "1",
            "--repeats",
            "1",
            "--dtype",
            dtype,
        ]
    )
    result = attention_scaling.measure(args)
    assert result["backend"] == keras.backend.backend()
    for path in ("fused", "explicit"):
        cells = result["rows"][path]
        assert [c["length"] for c in cells] == [8, 16]
        assert all(c["seconds"] > 0 for c in cells)
        if keras.backend.backend() == "jax":  # XLA's memory analysis
            assert all(c["memory_bytes"] is not None for c in cells)
    picture = attention_scaling.plot([result], str(tmp_path / "a.png"))
    assert open(picture, "rb").read(4) == b"\x89PNG"
    assert "explicit" in attention_scaling.row("jax", result)


def test_out_of_memory_is_recognised():
    assert attention_scaling._out_of_memory(
        RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    )
    assert attention_scaling._out_of_memory(
        Exception("RESOURCE_EXHAUSTED: Out of memory while trying")
    )
    assert not attention_scaling._out_of_memory(ValueError("bad shape"))


def test_bad_lengths_are_refused():
    with pytest.raises(SystemExit):
        attention_scaling.parse_args(["--lengths", "a,b"])
    with pytest.raises(SystemExit):
        attention_scaling.parse_args(["--lengths", "0"])
