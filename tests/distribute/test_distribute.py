"""zoo.distribute under the current backend, on simulated CPU devices (each
configuration in its own process: devices are fixed when a framework
starts): data-parallel training gives the losses of one device on the same
global batches, a model-parallel layout splits the Transformer kernels,
trains, and saves a `.keras` file that loads on one device; unsupported
combinations are one clear error."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo import distribute
from zoo.testing.backends import backend_env

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
BACKEND = keras.backend.backend()


def simulated_devices(count):
    """This backend's environment with `count` simulated CPU devices for
    XLA, keeping the suite's other XLA flags (tests/conftest.py)."""
    env = backend_env(BACKEND)
    env["XLA_FLAGS"] = (
        f"{os.environ.get('XLA_FLAGS', '')} "
        f"--xla_force_host_platform_device_count={count}"
    ).strip()
    return env


def train(mode, devices, save_path=None):
    """Runs tests/distribute/worker.py with `devices` simulated devices."""
    env = simulated_devices(4)
    command = [
        sys.executable,
        "-m",
        "tests.distribute.worker",
        mode,
        str(devices),
    ] + ([str(save_path)] if save_path else [])
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(
        f"{mode} x{devices} failed:\n{(done.stdout + done.stderr)[-3000:]}"
    )


needs_engine = pytest.mark.skipif(
    BACKEND == "torch", reason="Keras has no distribution API under torch"
)


@pytest.fixture(scope="module")
def one_device():
    if BACKEND == "torch":
        pytest.skip("Keras has no distribution API under torch")
    return train("none", 1)


@needs_engine
@pytest.mark.parametrize("devices", [2, 4] if BACKEND == "jax" else [2])
def test_data_parallel_gives_the_losses_of_one_device(one_device, devices):
    result = train("data", devices)
    assert result["replicas"] == devices
    assert len(result["losses"]) == len(one_device["losses"]) == 8
    np.testing.assert_allclose(
        result["losses"], one_device["losses"], rtol=1e-5
    )
    np.testing.assert_allclose(
        result["prediction"], one_device["prediction"], rtol=1e-5
    )


@pytest.mark.skipif(BACKEND != "jax", reason="ModelParallel is JAX-only")
def test_model_parallel_splits_kernels_trains_and_saves(one_device, tmp_path):
    path = tmp_path / "model_parallel.keras"
    result = train("model", 4, save_path=path)
    assert result["replicas"] == 2  # a (batch 2, model 2) mesh
    assert "'model'" in result["sharded"]  # the query kernel is split
    np.testing.assert_allclose(
        result["losses"], one_device["losses"], rtol=1e-5
    )
    # The file loads here, on one device, and predicts the same.
    import zoo  # noqa: F401  (registers the layers)

    restored = keras.saving.load_model(path)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, (64, 12)).astype("int32")
    ids[::3, 8:] = 0
    np.testing.assert_allclose(
        restored.predict(ids[:4], verbose=0).ravel(),
        result["prediction"],
        rtol=1e-5,
    )


def test_unsupported_combinations_are_one_clear_error():
    with pytest.raises(ValueError, match="must be one of"):
        distribute.configure("pipeline")
    if BACKEND == "torch":
        with pytest.raises(ValueError, match="not supported under the torch"):
            distribute.configure("data")
    elif BACKEND == "tensorflow":
        with pytest.raises(ValueError, match="needs the JAX backend"):
            distribute.configure("model")
    else:
        with pytest.raises(ValueError, match="must divide"):
            distribute._configure_jax("model", 3, ["cpu:0", "cpu:1"])


def test_no_distribution_changes_nothing():
    strategy = distribute.configure(None)
    assert strategy.num_replicas_in_sync == 1
    with strategy.scope():
        layer = keras.layers.Dense(2)
        layer.build((1, 3))
    distribute.check_global_batch(5, strategy)


def test_a_batch_that_does_not_split_is_refused():
    class FourReplicas:
        num_replicas_in_sync = 4

    with pytest.raises(ValueError, match="multiple of the 4"):
        distribute.check_global_batch(6, FourReplicas())


def test_transformer_layout_covers_every_large_kernel_of_the_families():
    """Each pattern matches a weight of the zoo's Transformer blocks and
    embeddings, and nothing else of them."""
    from zoo.layers import PositionalEmbedding, TransformerEncoder

    inputs = keras.Input((6,), dtype="int32")
    x = PositionalEmbedding(20, 6, 8, name="embeddings")(inputs)
    x = TransformerEncoder(2, 16, name="transformer_layer_0")(x)
    paths = [w.path for w in keras.Model(inputs, x).weights]
    import re

    for pattern in distribute.TRANSFORMER_LAYOUT:
        assert any(re.fullmatch(pattern, p) for p in paths), pattern
    split = [
        p
        for p in paths
        if any(re.fullmatch(q, p) for q in distribute.TRANSFORMER_LAYOUT)
    ]
    assert not any("norm" in p or "position" in p for p in split)


def test_even_batches_trims_each_batch_to_a_multiple_of_the_replicas():
    import tensorflow as tf

    class Even:
        num_replicas_in_sync = 4
        splits_batches_evenly = True

    x = {"ids": np.arange(23)[:, None], "mask": np.ones((23, 1))}
    dataset = tf.data.Dataset.from_tensor_slices((x, np.arange(23))).batch(10)
    sizes = [len(y) for _, y in distribute.even_batches(dataset, Even())]
    assert sizes == [8, 8]  # 10 -> 8, 10 -> 8, 3 -> dropped
    single = tf.data.Dataset.from_tensor_slices(np.arange(7)).batch(5)
    assert [len(b) for b in distribute.even_batches(single, Even())] == [4]
    # One device, or TensorFlow's strategies: unchanged.
    assert (
        distribute.even_batches(dataset, distribute.configure(None)) is dataset
    )


@pytest.mark.skipif(BACKEND != "jax", reason="simulated devices: JAX")
def test_a_recipe_trains_data_parallel_on_two_devices(tmp_path):
    """The translation recipe's --smoke run under --distribute data on 2
    simulated devices: length buckets, so batches of every size (every
    recipe takes --distribute through the same `setup_accelerators`)."""
    env = simulated_devices(2)
    done = subprocess.run(
        [
            sys.executable,
            "recipes/translate.py",
            "--smoke",
            "--distribute",
            "data",
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "RESULT" in done.stdout
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["replicas"] == 2


@pytest.mark.skipif(BACKEND != "jax", reason="multi-host: JAX")
def test_multi_host_settings_in_the_environment_initialize_jax(monkeypatch):
    calls = []
    monkeypatch.setattr(
        keras.distribution, "initialize", lambda *a, **k: calls.append((a, k))
    )
    monkeypatch.setattr(
        keras.distribution, "set_distribution", lambda distribution: None
    )
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    distribute.configure("data")
    assert calls == [((), {})]
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")
    distribute.configure("data")
    assert len(calls) == 1  # one process: nothing to join
