"""Package-wide rules: registration, docstrings, and keras.ops-only code."""

import ast
import inspect
import os
import pathlib
import subprocess
import sys

import keras
import pytest

import zoo
from tests.test_readme import shipped_files_loaded_by_the_readme
from zoo import layers, models
from zoo.models import captioning

ZOO_DIR = pathlib.Path(zoo.__file__).parent
PUBLIC_LAYERS = [
    getattr(layers, name)
    for name in layers.__all__
    if isinstance(getattr(layers, name), type)
] + [
    models.TextClassifier,
    models.TextClassifierPreprocessor,
    models.MeanPoolingBackbone,
    models.AttentionPoolingBackbone,
    models.RecurrentAttentionBackbone,
    models.TransformerEncoderBackbone,
    models.GPT,
    models.GPTBackbone,
    models.GPTPreprocessor,
    models.Translator,
    models.TranslationPreprocessor,
    models.TransformerSeq2SeqBackbone,
    models.RNNSeq2SeqBackbone,
    models.SparseCategoricalCrossentropyWithSmoothing,
    models.ImageCaptioner,
    models.ImageCaptionerPreprocessor,
    models.ShowAttendTellBackbone,
    models.TransformerCaptionBackbone,
    captioning.EfficientNetLiteEncoder,
    captioning.ConvStackEncoder,
    captioning.KerasApplicationsEncoder,
    captioning.FeatureGridInput,
]


@pytest.mark.parametrize("cls", PUBLIC_LAYERS, ids=lambda c: c.__name__)
def test_layer_is_registered_under_zoo(cls):
    name = keras.saving.get_registered_name(cls)
    assert name == f"zoo>{cls.__name__}"
    assert keras.saving.get_registered_object(name) is cls


@pytest.mark.parametrize(
    "obj",
    PUBLIC_LAYERS
    + [
        layers.scaled_dot_product_attention,
        layers.masked_softmax,
        layers.attention_entropy,
        models.get_sampler,
        models.attention_model,
    ],
    ids=lambda o: o.__name__,
)
def test_public_docstrings_give_arguments_and_example(obj):
    doc = inspect.getdoc(obj) or ""
    assert "Args:" in doc, f"{obj.__name__} documents no arguments"
    if isinstance(obj, type) or obj in (
        layers.scaled_dot_product_attention,
        layers.masked_softmax,
        models.get_sampler,
    ):
        assert "Example" in doc and ">>>" in doc, (
            f"{obj.__name__} has no example"
        )
        if obj is not models.get_sampler:
            assert "(batch" in doc, f"{obj.__name__} gives no tensor shapes"


def _may_use_frameworks(relative):
    """Data pipelines may use tf.data (zoo/data/, and the preprocessors,
    which run inside tf.data); zoo/_startup.py configures the frameworks'
    logging and zoo/testing/ their matmul precision for the cross-backend
    check; zoo/distribute.py hands training to tf.distribute under
    TensorFlow and trims tf.data batches, zoo/precision.py sets each
    framework's TF32 switch, zoo/accelerator.py reads their allocators'
    peak memory. Layers, models and tasks compute with keras.ops only."""
    return relative.parts[0] in (
        "data",
        "testing",
        "_startup.py",
        "_tensorflow.py",
        "distribute.py",
        "precision.py",
        "accelerator.py",
    ) or relative.name.endswith("_preprocessor.py")


def test_zoo_uses_no_backend_framework_directly():
    """Layers and models use keras.ops only (see `_may_use_frameworks`)."""
    offenders = []
    for path in ZOO_DIR.rglob("*.py"):
        if _may_use_frameworks(path.relative_to(ZOO_DIR)):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in {"tensorflow", "jax", "torch"}:
                    offenders.append(f"{path.relative_to(ZOO_DIR)}: {name}")
    assert offenders == []


def registered_class_names():
    """Names of the classes in zoo/ decorated with
    `register_keras_serializable(package="zoo")`, read from the source."""
    names = []
    for path in sorted(ZOO_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                "register_keras_serializable" in ast.unparse(decorator)
                for decorator in node.decorator_list
            ):
                names.append(node.name)
    return names


def test_import_zoo_alone_registers_everything_and_loads_shipped_models():
    """What the README promises: after `import zoo` (and nothing else from
    zoo), every registered class resolves and every shipped `.keras` file
    loads. Run in a fresh interpreter: this one has imported all of zoo."""
    names = registered_class_names()
    assert {"GPTCausalLM", "CharacterTokenizer", "TextClassifier"} <= set(names)
    # keras-hub's names, with the zoo's earlier ones still resolving (the
    # files saved under them).
    names += ["GPT", "BertClassifier"]
    # The README's loading example runs the same way (tests/test_readme.py)
    # and covers the files it names; the others are loaded here.
    in_readme = set(shipped_files_loaded_by_the_readme())
    shipped = sorted(
        str(path.relative_to(ZOO_DIR.parent))
        for path in (ZOO_DIR.parent / "saved_models").glob("*.keras")
    )
    shipped = [path for path in shipped if path not in in_readme]
    script = (
        "import sys, keras, zoo\n"
        "missing = [n for n in sys.argv[1].split(',')\n"
        "           if keras.saving.get_registered_object('zoo>' + n) is None]\n"
        "assert not missing, f'not registered by import zoo: {missing}'\n"
        "for path in sys.argv[2:]:\n"
        "    zoo.saving.load_model(path)  # checked, then Keras' loader\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, ",".join(names), *shipped],
        capture_output=True,
        text=True,
        env=dict(os.environ, KERAS_BACKEND=keras.backend.backend()),
        cwd=ZOO_DIR.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_zoo_imports_and_trains_without_tensorflow(tmp_path):
    """A JAX- or PyTorch-only install: `import zoo`, a model fits arrays,
    saves and loads; a tf.data pipeline says it needs TensorFlow."""
    import subprocess
    import sys

    import keras

    if keras.backend.backend() == "tensorflow":
        pytest.skip("needs a backend other than TensorFlow")
    script = f"""
import sys
sys.modules["tensorflow"] = None
sys.modules["tensorflow_text"] = None
import numpy as np, keras, zoo
from zoo.models.gpt import GPT, GPTBackbone
gpt = GPT(GPTBackbone(20, num_layers=1, num_heads=2, hidden_dim=8,
                      sequence_length=8))
gpt.compile(optimizer="adam",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
ids = np.arange(16).reshape(2, 8) % 20
keras.Model.fit(gpt, {{"token_ids": ids, "padding_mask": ids >= 0}}, ids,
                epochs=1, verbose=0)
gpt.save(r"{tmp_path / "gpt.keras"}")
keras.saving.load_model(r"{tmp_path / "gpt.keras"}")
from zoo.data.text import text_dataset
try:
    text_dataset(["a"], batch_size=1)
except ImportError as error:
    print("NEEDS", error)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ZOO_DIR.parent),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "NEEDS" in done.stdout and "pip install tensorflow" in done.stdout
