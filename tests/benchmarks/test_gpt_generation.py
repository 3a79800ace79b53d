"""benchmarks/gpt_generation.py stays runnable: one tiny measurement in-process
under the current backend (timings are not checked; the benchmark prints
them)."""

import keras
import numpy as np
import pytest

from benchmarks import gpt_generation


def test_tiny_measurement_reports_every_figure():
    args = gpt_generation.parse_args(
        [
            "--num-layers",
            "1",
            "--num-heads",
            "2",
            "--hidden-dim",
            "16",
            "--prompt-length",
            "4",
            "--new-tokens",
            "6",
            "--repeats",
            "1",
            "--beam",
            "2",
            # TorchDynamo's tracing without inductor's code generation.
            "--torch-compile-backend",
            "eager",
        ]
    )
    result = gpt_generation.measure(args)
    assert result["backend"] == keras.backend.backend()
    assert result["identical_greedy_output"]
    for name in ("cached", "uncached", "prefix"):
        assert result[name]["seconds"] > 0
        assert result[name]["tokens_per_second"] > 0
    assert sorted(result["prefix"]["forward_seconds_at_length"]) == [
        4,
        5,
        6,
        8,
        9,
    ]
    assert result["speedup"] > 0 and result["speedup_vs_prefix"] > 0
    assert result["beam"]["num_beams"] == 2 and result["beam"]["seconds"] > 0
    assert result["top_k"]["seconds"] > 0
    assert result["keras_hub"]["seconds"] > 0
    assert result["keras_hub_over_zoo"] > 0
    # Every float32 weight once, and 2 (keys, values) x 1 layer x 10
    # positions x 16 float32 numbers of cache.
    need = result["bytes_per_token"]
    assert need["weights"] == 4 * result["parameters"]
    assert need["cache"] == 2 * 1 * 10 * 16 * 4
    assert need["total"] == need["weights"] + need["cache"]
    if keras.backend.backend() == "torch":
        calls = result["through_layer_calls"]
        assert calls["identical_greedy_output"] and calls["seconds"] > 0
        [step] = result["torch_compile"]
        assert step["mode"] == "default" and step["identical_greedy_output"]
        assert step["top_k"]["seconds"] > 0
        # Beam search: (batch x beams) rows, one more shape, the same beams.
        assert step["beam"]["identical_output"] and step["beam"]["seconds"] > 0
        assert step["beam"]["graphs"] >= 1
        # The position moves every step; the step stays one graph.
        assert (step["graphs"], step["graph_breaks"]) == (2, 0)
        assert step["compiled_over_eager"] > 0
    else:
        assert "torch_compile" not in result
        assert "through_layer_calls" not in result


def test_compile_modes_are_a_list_and_unknown_ones_are_refused():
    args = gpt_generation.parse_args(
        ["--torch-compile-mode", "default,reduce-overhead"]
    )
    assert args.torch_compile_modes == ["default", "reduce-overhead"]
    with pytest.raises(SystemExit):
        gpt_generation.parse_args(["--torch-compile-mode", "default,fast"])


@pytest.mark.one_backend
def test_bfloat16_measurement_runs_both_models_in_bfloat16():
    args = gpt_generation.parse_args(
        [
            "--num-layers",
            "1",
            "--num-heads",
            "2",
            "--hidden-dim",
            "16",
            "--prompt-length",
            "4",
            "--new-tokens",
            "3",
            "--repeats",
            "1",
            "--dtype",
            "bfloat16",
            "--torch-compile-backend",
            "none",
        ]
    )
    result = gpt_generation.measure(args)
    assert result["dtype"] == "bfloat16"
    assert keras.config.dtype_policy().name == "mixed_bfloat16"
    assert result["cached"]["seconds"] > 0
    assert result["keras_hub"]["seconds"] > 0
    if keras.backend.backend() == "torch":
        assert result["through_layer_calls"]["identical_greedy_output"]


def test_hand_written_jax_peer_generates_the_same_tokens():
    if keras.backend.backend() != "jax":
        pytest.skip("the hand-written peer is JAX code")
    from benchmarks.jax_gpt_reference import time_greedy_decoder, window_logits
    from zoo.models.gpt import GPT, GPTBackbone

    keras.utils.set_random_seed(3)
    backbone = GPTBackbone(
        23, num_layers=2, num_heads=2, hidden_dim=16, sequence_length=12
    )
    # Biases, gammas and betas start at 0 or 1; random values make every
    # weight matter to the comparison.
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    gpt = GPT(backbone, preprocessor=None)
    token_ids = np.zeros((2, 12), "int32")
    token_ids[:, :3] = rng.integers(0, 23, (2, 3))
    mask = np.zeros((2, 12), bool)
    mask[:, :3] = True
    expected = gpt.generate(
        {"token_ids": token_ids, "padding_mask": mask}, stop_token_ids=None
    )
    seconds, generated = time_greedy_decoder(gpt, token_ids, 3, repeats=1)
    assert seconds > 0
    np.testing.assert_array_equal(generated, expected["token_ids"])
    assert len(np.unique(generated[:, 3:])) > 1  # not a constant stream

    # Its forward pass gives the model's logits at every position.
    window = rng.integers(0, 23, (2, 12)).astype("int32")
    features = backbone(
        {"token_ids": window, "padding_mask": np.ones_like(window)}
    )
    hidden = features["sequence_output"]
    logits = backbone.token_embedding(hidden, reverse=True)
    np.testing.assert_allclose(
        window_logits(gpt, window), logits, rtol=1e-4, atol=1e-4
    )


def test_measure_reports_the_hand_written_peer_under_jax():
    if keras.backend.backend() != "jax":
        pytest.skip("the hand-written peer is JAX code")
    args = gpt_generation.parse_args(
        [
            "--num-layers",
            "1",
            "--num-heads",
            "2",
            "--hidden-dim",
            "16",
            "--prompt-length",
            "4",
            "--new-tokens",
            "6",
            "--repeats",
            "1",
        ]
    )
    peer = gpt_generation.measure(args)["hand_written"]
    assert peer["identical_greedy_output"]
    assert peer["seconds"] > 0 and peer["speedup_vs_prefix"] > 0


def test_roofline_is_the_rate_over_bandwidth_per_bytes_read():
    result = {
        "backend": "jax",
        "batch_size": 2,
        "bytes_per_token": {"weights": 40e6, "cache": 10e6, "total": 50e6},
        "cached": {"tokens_per_second": 300.0},
    }
    header, line = gpt_generation.roofline_lines([result], 20e9)
    assert "20.0 GB/s" in header
    # 20 GB/s / 50 MB per step x 2 rows a step = 800 tok/s; 300 is 38%.
    assert "bound 800 tok/s" in line and "= 38% of the bound" in line
    assert "50.0 MB read per step" in line


def test_memory_bandwidth_is_a_positive_rate():
    assert gpt_generation.memory_bandwidth(megabytes=8, repeats=2) > 1e8
