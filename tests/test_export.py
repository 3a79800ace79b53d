"""`zoo.export`: a SavedModel on raw input that answers as `predict` and
`generate` do, checked in a process that imports TensorFlow only. The
export is always traced by TensorFlow (under JAX and PyTorch, by a
TensorFlow process the task is handed to): the text classifier and the GPT
run under every backend for that hand-off, the other families'
signatures (the same TensorFlow graph whatever the backend) in the
TensorFlow run, which traces them in-process."""

import types

import keras
import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tests.models.bert.test_bert import make_masked_lm
from tests.models.captioning.test_captioning import captioner
from tests.models.gpt.test_gpt import make_gpt
from tests.models.seq2seq.test_translator import GERMAN, translator
from tests.models.vit.test_vit import digits
from zoo import export
from zoo.models.gpt import GPTBackbone
from zoo.models.text_classifier import (
    TextClassifier,
    TextClassifierBackbone,
    TextClassifierPreprocessor,
)
from zoo.models.vit import ViTImageClassifier

TEXTS = np.array(
    [
        "a wonderful film with a wonderful cast",
        "a dull and boring film",
        "zzzz qqqq",
        "",
    ]
)


def test_text_classifier_exports_raw_strings(tmp_path):
    preprocessor = TextClassifierPreprocessor(max_tokens=40, sequence_length=8)
    preprocessor.adapt(TEXTS[:2])
    keras.utils.set_random_seed(0)
    task = TextClassifier.from_preset(
        "imdb_query", preprocessor=preprocessor, backbone_embedding_dim=8
    )
    path = tmp_path / "served"
    assert task.export(path) == str(path)
    result = export.check_export(path, TEXTS, task.predict(TEXTS, verbose=0))
    assert result["shape"] == [4, 1]
    assert result["max_abs_diff"] < 1e-5
    assert not result["zoo_imported"]


@pytest.mark.one_backend("tensorflow")
def test_image_classifier_exports_uint8_images(tmp_path):
    images = digits(6)[0][..., None]
    keras.utils.set_random_seed(0)
    task = ViTImageClassifier.from_preset("smoke", num_classes=2)
    assert export.serving_input_shape(task) == images.shape[1:]
    path = tmp_path / "served"
    export.export_for_serving(task, path)
    # A second export replaces the first as a whole.
    export.export_for_serving(task, path)
    result = export.check_export(path, images, task.predict(images, verbose=0))
    assert result["shape"] == [6, 2]
    assert result["max_abs_diff"] < 1e-5


@pytest.mark.one_backend("tensorflow")
def test_imagegpt_exports_next_pixel_logits_on_uint8_images(tmp_path):
    from zoo.models.imagegpt import ImageGPTCausalLM

    images = digits(4)[0][..., None]
    keras.utils.set_random_seed(0)
    task = ImageGPTCausalLM.from_preset("smoke")
    assert export.serving_input_shape(task) == images.shape[1:]
    export.export_for_serving(task, tmp_path / "served")
    result = export.check_export(
        tmp_path / "served", images, task.predict(images, verbose=0)
    )
    assert result["shape"] == [4, 64, 5]
    assert result["max_abs_diff"] < 1e-5


def test_gpt_exports_greedy_generate_on_raw_prompts(tmp_path):
    """`generate`: prompts in, `gpt.generate(prompts)`'s texts out."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    gpt = make_gpt()
    prompts = ["to be", "whether 'tis", "t"]
    path = gpt.export(tmp_path / "served")
    served = tf.saved_model.load(path)  # in this process: TensorFlow only
    texts = served.signatures["generate"](tf.constant(prompts))["texts"]
    assert [t.decode() for t in texts.numpy()] == gpt.generate(prompts)
    logits = served.signatures["serving_default"](tf.constant(prompts))
    np.testing.assert_allclose(
        next(iter(logits.values())).numpy(),
        gpt.predict(prompts, verbose=0),
        atol=1e-5,
    )


@pytest.mark.one_backend("tensorflow")
@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_translator_exports_greedy_generate(kind, tmp_path):
    """`generate`, also the default signature: sources in, the texts of
    `translator.generate(sources)` out, checked in a TensorFlow-only
    process (with TensorFlow Text, for SentencePiece)."""
    keras.utils.set_random_seed(0)
    model = translator(kind)
    sources = np.array(GERMAN[:3])
    export.export_for_serving(model, tmp_path / "served")
    assert export.needs_tensorflow_text(model)
    result = export.check_export(
        tmp_path / "served",
        sources,
        None,
        tensorflow_text=True,
        generated=model.generate(list(sources)),
    )
    assert result["generate_identical"] == 3
    assert result["shape"] == [3]


@pytest.mark.one_backend("tensorflow")
def test_captioner_exports_greedy_generate_on_uint8_images(tmp_path):
    keras.utils.set_random_seed(0)
    model = captioner("lstm")
    images = np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3))
    images = images.astype("uint8")
    export.export_for_serving(model, tmp_path / "served")
    result = export.check_export(
        tmp_path / "served",
        images,
        None,
        tensorflow_text=True,
        generated=model.generate(images),
    )
    assert result["generate_identical"] == 3


@pytest.mark.one_backend("tensorflow")
def test_masked_lm_exports_fill_mask(tmp_path):
    keras.utils.set_random_seed(0)
    mlm = make_masked_lm()
    texts = np.array(["the film was [MASK]", "a [MASK] [MASK] plot"])
    export.export_for_serving(mlm, tmp_path / "served")
    result = export.check_export(
        tmp_path / "served",
        texts,
        None,
        tensorflow_text=True,
        generated=mlm.fill_mask(list(texts)),
    )
    assert result["fill_mask_identical"] == "3/3"
    assert result["max_probability_diff"] < 1e-5


# The converter Keras' ONNX export uses on each backend.
ONNX_CONVERTERS = {
    "tensorflow": "tf2onnx",
    "jax": "jax2onnx",
    "torch": "onnxscript",
}


def test_onnx_export_of_a_backbone_matches_predict(tmp_path):
    """`export_onnx` on token ids and a padding mask (the last row half
    padding), run in onnxruntime: within 1e-4 of `predict` under the
    current backend. A model with other weights is far from it, so the
    check can fail."""
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip(ONNX_CONVERTERS[keras.backend.backend()])
    keras.utils.set_random_seed(0)
    backbone = GPTBackbone.from_preset("smoke", vocabulary_size=50)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, (3, 16)).astype("int32")
    mask = np.ones_like(ids)
    ids[-1, 8:], mask[-1, 8:] = 0, 0
    inputs = {"token_ids": ids, "padding_mask": mask}
    path = tmp_path / "gpt.onnx"
    assert export.export_onnx(backbone, path, inputs) == str(path)
    # The graph's inputs carry the model's input names (`run_onnx` feeds
    # a dict by them).
    session = onnxruntime.InferenceSession(str(path))
    names = [spec.name.split(":")[0] for spec in session.get_inputs()]
    assert sorted(names) == ["padding_mask", "token_ids"]
    [hidden] = export.run_onnx(path, inputs)
    assert hidden.shape == (3, 16, 32)  # the sequence output
    assert export.check_onnx(backbone, path, inputs) < 1e-4
    keras.utils.set_random_seed(1)
    other = GPTBackbone.from_preset("smoke", vocabulary_size=50)
    assert export.check_onnx(other, path, inputs) > 1e-3


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the shortcut an export must not take is PyTorch's",
)
def test_onnx_export_keeps_rows_that_see_no_key_finite(tmp_path):
    """Padded queries of a bidirectional encoder see no key. PyTorch's CPU
    attention gives them zeros, which zoo relies on once a probe (the first
    eager call) has asked; onnxruntime's softmax gives NaN, so an export
    made after that call keeps zoo's own check of such rows."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip(ONNX_CONVERTERS["torch"])
    keras.utils.set_random_seed(0)
    backbone = TextClassifierBackbone.from_preset(
        "imdb_transformer",
        vocabulary_size=50,
        embedding_dim=8,
        sequence_length=16,
        num_heads=2,
        intermediate_dim=16,
    )
    ids = np.random.default_rng(0).integers(1, 50, (2, 16)).astype("int32")
    ids[-1, 8:] = 0
    backbone.predict(ids, verbose=0)  # eager: the probe has answered
    path = export.export_onnx(backbone, tmp_path / "encoder.onnx", ids)
    assert export.check_onnx(backbone, path, ids) < 1e-4


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="the packed RNNs run under PyTorch only",
)
def test_onnx_export_of_a_packed_bidirectional_rnn(tmp_path):
    """Under PyTorch the RNN packs each row's real tokens with a stable
    argsort, which torch.onnx cannot convert: the export runs the masked
    RNNs, which give the same outputs."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip(ONNX_CONVERTERS["torch"])
    keras.utils.set_random_seed(0)
    backbone = TextClassifierBackbone.from_preset(
        "imdb_rnn", vocabulary_size=50, embedding_dim=8, rnn_units=8
    )
    ids = np.random.default_rng(0).integers(1, 50, (2, 12)).astype("int32")
    ids[-1, 6:] = 0
    path = export.export_onnx(backbone, tmp_path / "rnn.onnx", ids)
    assert export.check_onnx(backbone, path, ids) < 1e-4


def test_onnx_input_signature_names_each_input():
    keras.utils.set_random_seed(0)
    backbone = GPTBackbone.from_preset("smoke", vocabulary_size=50)
    [dynamic] = export.onnx_input_signature(backbone)
    assert sorted(dynamic) == ["padding_mask", "token_ids"]
    assert tuple(dynamic["token_ids"].shape) == (None, None)
    assert dynamic["token_ids"].name == "token_ids"
    ids = np.zeros((2, 5), "int32")
    [fixed] = export.onnx_input_signature(
        backbone, {"token_ids": ids, "padding_mask": ids}
    )
    assert tuple(fixed["padding_mask"].shape) == (2, 5)
    assert fixed["padding_mask"].dtype == "int32"
    task = ViTImageClassifier.from_preset("smoke", num_classes=2)
    [images] = export.onnx_input_signature(
        task.backbone, np.zeros((4, 8, 8, 1), "float32")
    )
    assert tuple(images.shape) == (4, 8, 8, 1) and images.name == "images"


def test_what_cannot_be_exported_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no preprocessor"):
        export.export_for_serving(
            types.SimpleNamespace(preprocessor=None), tmp_path / "a"
        )
    with pytest.raises(NotImplementedError, match="cannot be exported"):
        export.export_for_serving(
            types.SimpleNamespace(preprocessor=object()), tmp_path / "b"
        )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
