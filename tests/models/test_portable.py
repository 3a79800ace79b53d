"""zoo.models.portable: a task saved under one backend records compile
settings that every backend can load (no resolved jit_compile=True, no
backend-only optimizer class, no backbone compile settings)."""

import json
import warnings
import zipfile

import keras
import numpy as np
import pytest

from zoo.data.tokenizers import CharacterTokenizer
from zoo.models import (
    GPT,
    AttentionPoolingBackbone,
    GPTBackbone,
    GPTPreprocessor,
    TextClassifier,
    TextClassifierPreprocessor,
)

TEXTS = ["a wonderful film", "a dull film", "wonderful", "dull and boring"]


def text_classifier(**kwargs):
    preprocessor = TextClassifierPreprocessor(max_tokens=20, sequence_length=6)
    preprocessor.adapt(TEXTS)
    backbone = AttentionPoolingBackbone(
        preprocessor.vocabulary_size, 4, **kwargs
    )
    return (
        TextClassifier(backbone, preprocessor, **kwargs),
        TEXTS,
        np.array([1, 0, 1, 0], "float32"),
    )


def gpt(**kwargs):
    tokenizer = CharacterTokenizer.from_text(" ".join(TEXTS))
    backbone = GPTBackbone(
        tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        sequence_length=12,
        **kwargs,
    )
    return GPT(backbone, GPTPreprocessor(tokenizer, 12)), TEXTS, None


@pytest.mark.parametrize("make", [text_classifier, gpt], ids=["text", "gpt"])
def test_saved_compile_config_is_portable_and_restored(make, tmp_path):
    task, x, y = make()
    task.compile()
    task.backbone.compile(optimizer="adam", jit_compile=True)
    # Training resolves Keras' choices (jit_compile "auto" -> True under
    # JAX; under PyTorch the optimizer becomes a torch-only class).
    task.fit(x, y, epochs=1, batch_size=2, verbose=0)
    path = str(tmp_path / "task.keras")
    task.save(path)

    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
    compile_config = config["compile_config"]
    assert compile_config["jit_compile"] == "auto"
    assert compile_config["optimizer"]["module"] == "keras.optimizers"
    assert "compile_config" not in config["config"]["backbone"]

    loaded = keras.saving.load_model(path)
    assert loaded.compiled
    assert type(loaded.optimizer).__name__ == type(task.optimizer).__name__
    loaded.fit(x, y, epochs=1, batch_size=2, verbose=0)  # trains on as saved


def test_the_preprocessor_does_not_switch_xla_off_for_the_task():
    """TextVectorization (XLA-incompatible, tf.data only) sits in the task's
    layers; the compiled step never runs it, so "auto" resolves as for the
    backbone (JAX: compiled; it trained op by op, 20x slower, before)."""
    task, _, _ = text_classifier()
    task.compile()
    assert task.jit_compile == task.backbone._resolve_auto_jit_compile()
    if keras.backend.backend() == "jax":
        assert task.jit_compile is True
    task.compile(jit_compile=False)
    assert task.jit_compile is False


@pytest.mark.parametrize("make", [text_classifier, gpt], ids=["text", "gpt"])
def test_a_reloaded_task_resumes_with_its_optimizer_state(make, tmp_path):
    """The optimizer's step count and moments come back with the model, so
    a step after reloading is the step the saved model would have taken."""
    keras.utils.set_random_seed(0)
    task, x, y = make(dropout=0.0)  # no draws that differ after loading
    task.compile(optimizer=keras.optimizers.Adam(1e-2))
    task.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0)
    path = str(tmp_path / "task.keras")
    task.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no skipped state
        loaded = keras.saving.load_model(path)
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 1
    for saved, restored in zip(
        task.optimizer.variables, loaded.optimizer.variables
    ):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(saved),
            keras.ops.convert_to_numpy(restored),
        )
    for model in (task, loaded):
        model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0)
    for a, b in zip(task.backbone.weights, loaded.backbone.weights):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(a),
            keras.ops.convert_to_numpy(b),
            atol=1e-6,
        )


def test_a_file_saved_before_training_loads_without_optimizer_warnings(
    tmp_path,
):
    """As the shipped models are: compiled, never trained."""
    task, _, _ = text_classifier()
    task.compile()
    path = str(tmp_path / "task.keras")
    task.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        loaded = keras.saving.load_model(path)
    assert loaded.compiled
