"""zoo.models.portable: a task saved under one backend records compile
settings that every backend can load (no resolved jit_compile=True, no
backend-only optimizer class, no backbone compile settings)."""

import json
import zipfile

import keras
import numpy as np
import pytest

from zoo.data.tokenizers import CharacterTokenizer
from zoo.models import GPT
from zoo.models import AttentionPoolingBackbone
from zoo.models import GPTBackbone
from zoo.models import GPTPreprocessor
from zoo.models import TextClassifier
from zoo.models import TextClassifierPreprocessor

TEXTS = ["a wonderful film", "a dull film", "wonderful", "dull and boring"]


def text_classifier():
    preprocessor = TextClassifierPreprocessor(max_tokens=20, sequence_length=6)
    preprocessor.adapt(TEXTS)
    backbone = AttentionPoolingBackbone(preprocessor.vocabulary_size, 4)
    return TextClassifier(backbone, preprocessor), TEXTS, np.array(
        [1, 0, 1, 0], "float32"
    )


def gpt():
    tokenizer = CharacterTokenizer.from_text(" ".join(TEXTS))
    backbone = GPTBackbone(
        tokenizer.vocabulary_size(), num_layers=1, num_heads=2,
        hidden_dim=8, intermediate_dim=16, sequence_length=12,
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
