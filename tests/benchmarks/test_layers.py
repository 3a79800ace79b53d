"""benchmarks/layers.py stays runnable: a tiny grid in-process under the
current backend (timings are not checked; the benchmark prints them)."""

import keras
import pytest

from benchmarks import layers


@pytest.mark.one_backend
def test_tiny_grid_reports_every_cell():
    args = layers.parse_args(
        [
            "--layers",
            "encoder,decoder_cached",
            "--lengths",
            "8",
            "--batch-size",
            "2",
            "--hidden-dim",
            "8",
            "--num-heads",
            "2",
            "--intermediate-dim",
            "16",
            "--steps",
            "1",
            "--repeats",
            "1",
            "--dtypes",
            "float32,bfloat16",
        ]
    )
    result = layers.measure(args)
    assert result["backend"] == keras.backend.backend()
    cells = result["cells"]
    # The encoder x (no padding, padding) + the cached decoder, per dtype.
    assert len(cells) == 2 * (2 + 1)
    for cell in cells:
        assert cell["predict"]["peer_over_zoo"] > 0
        if cell["layer"] != "decoder_cached":
            assert cell["train"]["peer_over_zoo"] > 0
        if cell["layer"] == "encoder" and keras.backend.backend() == "torch":
            assert cell["train"]["torch_over_zoo"] > 0
    assert keras.config.dtype_policy().name == "float32"  # restored
    assert layers.row("jax", result).count("\n") == len(cells) - 1


def test_bad_flags_are_refused():
    with pytest.raises(SystemExit):
        layers.parse_args(["--layers", "lstm"])
    with pytest.raises(SystemExit):
        layers.parse_args(["--hidden-dim", "10", "--num-heads", "4"])
    with pytest.raises(SystemExit):
        layers.parse_args(["--dropout", "1"])


def test_dropout_reaches_every_layer_of_the_cell():
    args = layers.parse_args(
        ["--dropout", "0.25", "--num-heads", "2", "--hidden-dim", "8"]
    )
    for name in ("mha", "encoder", "decoder"):
        for layer in layers._layers(name, args):
            assert layer.dropout == 0.25, (name, layer)


@pytest.mark.parametrize("flag", [[], ["--jit-compile"]])
def test_jit_compile_reaches_both_models(flag):
    args = layers.parse_args(
        [
            "--num-heads",
            "2",
            "--hidden-dim",
            "8",
            "--intermediate-dim",
            "16",
            *flag,
        ]
    )
    for layer in layers._layers("encoder", args):
        models = (
            *layers._model(layer, "encoder", 8, args),
            layers._cached_step(layer, 8, args),
        )
        for model in models:
            if flag:
                assert model.jit_compile is True
            elif keras.backend.backend() == "torch":  # eager unless asked
                assert model.jit_compile is False


def test_timed_prediction_returns_row_sums_of_the_layer_output():
    import numpy as np

    args = layers.parse_args(
        [
            "--num-heads",
            "2",
            "--hidden-dim",
            "8",
            "--intermediate-dim",
            "16",
            "--batch-size",
            "3",
        ]
    )
    x = np.random.default_rng(0).normal(size=(3, 8, 8)).astype("float32")
    mask = np.ones((3, 8), bool)
    for name in ("mha", "encoder", "decoder"):
        layer = layers._layers(name, args)[0]
        model, predictor = layers._model(layer, name, 8, args)
        full = model.predict_on_batch([x, mask])
        sums = predictor.predict_on_batch([x, mask])
        assert sums.shape == (3,)
        np.testing.assert_allclose(
            sums, full.reshape(3, -1).sum(-1), rtol=1e-4, atol=1e-4
        )
