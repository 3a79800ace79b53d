"""One contract for every family: a task built at smoke size trains one step
on raw input, answers raw input, survives a `.keras` round trip with the
same answers, and refuses empty input with one clear error. A family
listed by `zoo.models.list_presets()` that is missing here fails
`test_every_family_is_covered`.

Export for serving is the same contract's last step; `tests/test_export.py`
checks each family's signatures (in a TensorFlow-only process)."""

import dataclasses

import keras
import numpy as np
import pytest

import zoo
from tests.helpers import keras_round_trip, to_numpy
from tests.models.bert.test_bert import make_masked_lm
from tests.models.bert.test_bert import tokenizer as bert_tokenizer
from tests.models.captioning.test_captioning import CAPTIONS, IMAGES, captioner
from tests.models.gpt.test_gpt import TEXT, make_gpt
from tests.models.seq2seq.test_translator import ENGLISH, GERMAN, translator
from tests.models.vit.test_vit import digits
from zoo.models.bert import (
    BertClassifierPreprocessor,
    BertTextClassifier,
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


def _text_classifier():
    preprocessor = TextClassifierPreprocessor(max_tokens=40, sequence_length=8)
    preprocessor.adapt(REVIEWS)
    return TextClassifier.from_preset(
        "imdb_query", preprocessor=preprocessor, backbone_embedding_dim=8
    )


def _bert_classifier():
    backbone = make_masked_lm().backbone
    preprocessor = BertClassifierPreprocessor(bert_tokenizer(), 24)
    return BertTextClassifier(backbone, preprocessor, num_classes=1)


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
        make_gpt,
        lambda t: t.fit([TEXT[:25], TEXT[25:50]], batch_size=2, verbose=0),
        lambda t: t.generate(["to be", "that is"], max_length=16),
        lambda t: t.generate([]),
    ),
    "seq2seq": Case(
        lambda: translator("transformer"),
        lambda t: t.fit(GERMAN[:4], ENGLISH[:4], batch_size=4, verbose=0),
        lambda t: t.generate(GERMAN[:2], max_length=10),
        lambda t: t.generate([]),
    ),
    "captioning": Case(
        lambda: captioner("lstm"),
        lambda t: t.fit(IMAGES[:4], CAPTIONS[:4], batch_size=4, verbose=0),
        lambda t: t.generate(IMAGES[:2]),
        lambda t: t.generate(IMAGES[:0]),
    ),
    "vit": Case(
        lambda: ViTImageClassifier.from_preset("smoke", num_classes=2),
        lambda t: t.fit(IMAGES_8, LABELS.repeat(2), batch_size=8, verbose=0),
        _predict(IMAGES_8[:3]),
        lambda t: t.predict(IMAGES_8[:0], verbose=0),
    ),
}


def test_every_family_is_covered():
    assert sorted(CASES) == sorted(zoo.models.list_presets())


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
