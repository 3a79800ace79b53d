"""The catalogue of bad inputs and faults (issue 48, docs/reliability.md):
one row per thing a user can get wrong, with what the zoo must answer.

Each `Case` names the family, the bad input in words, the call that gets
it, and the answer: an exception of the type a user expects (ValueError,
TypeError, FileNotFoundError, or `DataNotFoundError` for the data sets'
files) or a warning, whose message is one line that holds every fragment
of `says`. `tests/reliability/test_catalogue.py` runs every case;

    python -m tests.reliability.catalogue

prints the table of docs/reliability.md with the messages as they are.

The models are the families' smoke presets with tiny tokenizers (the text
classifier's smallest preset, "imdb_query"), built once per module and
only for the families a run reaches (`Models`). No case trains: every
error comes before the first step, and the warnings are turned into
errors while a case runs, so a call stops at its warning (that the call
then answers is the families' own tests' business).
"""

import dataclasses
import functools
import gzip
import os
import re
import warnings
import zipfile

import keras
import numpy as np

from tests.models.bert.test_bert import tokenizer as bert_tokenizer
from tests.models.captioning.test_captioning import CAPTIONS, IMAGES
from tests.models.seq2seq.test_translator import ENGLISH, GERMAN
from tests.models.seq2seq.test_translator import (
    tokenizer as translation_tokenizer,
)
from tests.models.test_families import (
    LABELS,
    REVIEWS,
    _bert_classifier,
    _captioner,
    _gpt,
    _text_classifier,
    _translator,
)
from zoo.callbacks import BackupUntilDone
from zoo.data.corpus import load_text
from zoo.data.download import DataNotFoundError
from zoo.data.flickr8k import parse_tokens
from zoo.data.images import load_npz
from zoo.data.imdb import load_imdb_unsupervised, read_aclimdb_split
from zoo.data.masked_lm import load_or_train_bert_tokenizer
from zoo.data.multi30k import read_pairs
from zoo.models.bert import (
    BertMaskedLM,
    BertMaskedLMPreprocessor,
)
from zoo.models.gpt import GPTCausalLM
from zoo.models.imagegpt import ImageGPTCausalLM, ImageGPTPreprocessor
from zoo.models.seq2seq import TranslationPreprocessor, Translator
from zoo.models.text_classifier import (
    AttentionPoolingBackbone,
    TextClassifier,
)
from zoo.models.vit import ViTImageClassifier
from zoo.saving import load_model

# One line, and short: a message longer than this is no quick read (the
# longest here quote a file's path, or the fix).
LONGEST = 320


@dataclasses.dataclass(frozen=True)
class Case:
    """A bad input or fault, and the answer it must get."""

    family: str
    input: str  # the bad input, in words
    call: object  # (models, tmp_path) -> the call that meets it
    raises: type  # an exception type, or a Warning category
    says: tuple  # fragments the one-line message holds
    one_backend: bool = False  # plain Python, the same on every backend

    @property
    def id(self):
        return f"{self.family}: {self.input}"

    @property
    def warns(self):
        return issubclass(self.raises, Warning)


class Models:
    """The families' tasks, each built on first use."""

    @functools.cached_property
    def text_classifier(self):
        return _text_classifier()

    @functools.cached_property
    def text_classifier_ids(self):
        """The same classifier without a preprocessor: word ids in."""
        return TextClassifier(self.text_classifier.backbone)

    @functools.cached_property
    def gpt(self):
        return _gpt()

    @functools.cached_property
    def gpt_ids(self):
        return GPTCausalLM(self.gpt.backbone)

    @functools.cached_property
    def translator(self):
        return _translator()

    @functools.cached_property
    def rnn_translator(self):
        preprocessor = TranslationPreprocessor.from_preset(
            "rnn_smoke", tokenizer=translation_tokenizer()
        )
        return Translator.from_preset("rnn_smoke", preprocessor=preprocessor)

    @functools.cached_property
    def bert_classifier(self):
        return _bert_classifier()

    @functools.cached_property
    def masked_lm(self):
        preprocessor = BertMaskedLMPreprocessor.from_preset(
            "smoke", tokenizer=bert_tokenizer()
        )
        return BertMaskedLM.from_preset("smoke", preprocessor=preprocessor)

    @functools.cached_property
    def masked_lm_ids(self):
        return BertMaskedLM(self.masked_lm.backbone)

    @functools.cached_property
    def vit(self):
        return ViTImageClassifier.from_preset("smoke", num_classes=2)

    @functools.cached_property
    def captioner(self):
        return _captioner()

    @functools.cached_property
    def imagegpt(self):
        return ImageGPTCausalLM.from_preset("smoke")


# ---- Inputs ------------------------------------------------------------------


def ids(*row):
    """One row of token ids, `(1, n)` int32."""
    return np.array([row], "int32")


def ones(n):
    return np.ones((1, n), bool)


def gpt_ids(*row):
    return {"token_ids": ids(*row), "padding_mask": ones(len(row))}


def bert_ids(*row, segments=None):
    return {
        "token_ids": ids(*row),
        "segment_ids": ids(*(segments or [0] * len(row))),
        "padding_mask": ones(len(row)),
    }


def seq2seq_ids(source, target):
    return {
        "encoder_token_ids": ids(*source),
        "encoder_padding_mask": ones(len(source)),
        "decoder_token_ids": ids(*target),
        "decoder_padding_mask": ones(len(target)),
    }


DIGITS = np.random.default_rng(0).integers(0, 256, (4, 8, 8)).astype("uint8")
PHOTOS = IMAGES[:2]  # the captioner's (n, 16, 16, 3) uint8 images
REVIEW_LIST = list(REVIEWS)


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _aclimdb(tmp, reviews):
    """An aclImdb folder whose `train/pos` and `train/neg` hold `reviews`
    (`{name: bytes}`), each polarity the same."""
    for polarity in ("pos", "neg"):
        for name, data in reviews.items():
            _write(tmp / "train" / polarity / name, data)
    return tmp


def _unsupervised(tmp, data):
    _aclimdb(tmp, {"0_7.txt": b"a fine film"})
    _write(tmp / "train" / "unsup" / "0_0.txt", data)
    return load_imdb_unsupervised(str(tmp))


def _pairs(tmp, german, english):
    return read_pairs(
        _write(tmp / "train.de", german), _write(tmp / "train.en", english)
    )


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _truncated_keras(tmp):
    path = _zip(tmp / "model.keras", {"config.json": "{}", "x": "y" * 4000})
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    return load_model(path)


def _damaged_keras(tmp):
    """A `.keras` archive whose member fails its checksum (a flipped byte
    in stored data)."""
    path = tmp / "model.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("config.json", "{}")
        archive.writestr("model.weights.h5", "w" * 100)
    data = bytearray(path.read_bytes())
    data[data.index(b"w" * 100) + 50] ^= 0xFF
    path.write_bytes(bytes(data))
    return load_model(path)


def _damaged_backup(tmp):
    """A run whose latest backup was cut to nothing (a kill mid-write in
    Keras' own callback): the next `fit` warns and resumes from the one
    before."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 2)), np.ones((4, 1))
    backup = BackupUntilDone(str(tmp / "backup"))
    model.fit(x, y, epochs=2, verbose=0, callbacks=[backup])
    open(backup._weights_path, "w").close()  # a zero-byte latest backup
    model.fit(x, y, epochs=3, verbose=0, callbacks=[backup])


def _npz(tmp, **arrays):
    path = tmp / "digits.npz"
    np.savez(path, **arrays)
    return path


# ---- The catalogue -----------------------------------------------------------

TEXT = "text classifier"
GPT = "GPT"
SEQ2SEQ = "seq2seq"
BERT = "BERT"
VIT = "ViT"
IMAGEGPT = "ImageGPT"
CAPTION = "captioning"
FILES = "model files"

NO_TEXT = "reads text, but got"
OUTSIDE_VOCABULARY = "is outside [0, vocabulary_size="

CASES = [
    # --- The text classifier (IMDB) ---------------------------------------
    Case(
        TEXT,
        "predict(None)",
        lambda m, tmp: m.text_classifier.predict(None),
        TypeError,
        ("predict()", NO_TEXT, "None"),
    ),
    Case(
        TEXT,
        "predict([]): no texts",
        lambda m, tmp: m.text_classifier.predict([]),
        ValueError,
        ("predict() got no texts",),
    ),
    Case(
        TEXT,
        "a nested list of strings",
        lambda m, tmp: m.text_classifier.predict([["a", "b"], ["c"]]),
        ValueError,
        ("nested list", "pass one flat list of texts"),
    ),
    Case(
        TEXT,
        "a 2-D array of strings",
        lambda m, tmp: m.text_classifier.predict(np.full((2, 2), "film")),
        ValueError,
        ("2-D array of shape (2, 2)", "one text per row"),
    ),
    Case(
        TEXT,
        "numbers instead of texts",
        lambda m, tmp: m.text_classifier.predict([3, 4]),
        TypeError,
        (NO_TEXT, "int 3"),
    ),
    Case(
        TEXT,
        "a text with no known word",
        lambda m, tmp: m.text_classifier.predict(["zzzz qqqq"]),
        UserWarning,
        ("1 of 1 texts have no token in the model's vocabulary", "zzzz"),
    ),
    Case(
        TEXT,
        "a text of emoji only",
        lambda m, tmp: m.text_classifier.predict(["a film", "😀😀"]),
        UserWarning,
        ("1 of 2 texts have no token", "index 1"),
    ),
    Case(
        TEXT,
        "attention_weights(None)",
        lambda m, tmp: m.text_classifier.attention_weights(None),
        TypeError,
        ("attention_weights()", NO_TEXT),
    ),
    Case(
        TEXT,
        "labels outside the classes (2, 5 for a binary model)",
        lambda m, tmp: m.text_classifier.fit(REVIEWS, [0, 1, 5, 2]),
        ValueError,
        ("label 5 at index 2 is outside the classes", "2 of 4"),
    ),
    Case(
        TEXT,
        "NaN labels",
        lambda m, tmp: m.text_classifier.fit(REVIEWS, [0, 1, np.nan, 1]),
        ValueError,
        ("label nan at index 2 is not a number",),
    ),
    Case(
        TEXT,
        "string labels",
        lambda m, tmp: m.text_classifier.fit(REVIEWS, ["pos", "neg"] * 2),
        TypeError,
        ("label 'pos' at index 0 is a str, not a number", "map names"),
    ),
    Case(
        TEXT,
        "fewer labels than texts",
        lambda m, tmp: m.text_classifier.fit(REVIEWS, [0, 1, 1]),
        ValueError,
        ("got 4 examples but 3 labels",),
    ),
    Case(
        TEXT,
        "fit(texts) without labels",
        lambda m, tmp: m.text_classifier.fit(REVIEWS),
        ValueError,
        ("fit() needs labels",),
    ),
    Case(
        TEXT,
        "sample weights of another count",
        lambda m, tmp: m.text_classifier.fit(
            REVIEWS, LABELS, sample_weight=[1.0, 1.0]
        ),
        ValueError,
        ("got 4 examples but 2 sample weights",),
    ),
    Case(
        TEXT,
        "evaluate with a label outside the classes",
        lambda m, tmp: m.text_classifier.evaluate(REVIEWS, [0, 1, 7, 1]),
        ValueError,
        ("evaluate(): label 7 at index 2 is outside the classes",),
    ),
    Case(
        TEXT,
        "validation_data with NaN labels",
        lambda m, tmp: m.text_classifier.fit(
            REVIEWS, LABELS, validation_data=(REVIEWS, [0, np.nan, 1, 0])
        ),
        ValueError,
        ("fit(validation_data=...): label nan at index 1",),
    ),
    Case(
        TEXT,
        "validation_data that is not text",
        lambda m, tmp: m.text_classifier.fit(
            REVIEWS, LABELS, validation_data=([1, 2], [0, 1])
        ),
        TypeError,
        ("fit()", NO_TEXT, "int 1"),
    ),
    Case(
        TEXT,
        "token ids to a classifier with a preprocessor",
        lambda m, tmp: m.text_classifier.predict({"token_ids": ids(1, 2)}),
        TypeError,
        ("got token ids (token_ids)", "has a preprocessor"),
    ),
    Case(
        TEXT,
        "a word id past the vocabulary (no preprocessor)",
        lambda m, tmp: m.text_classifier_ids.predict(ids(1, 2, 99999)),
        ValueError,
        ("TextClassifier.predict(): token id 99999", OUTSIDE_VOCABULARY),
    ),
    Case(
        TEXT,
        "a negative word id in fit (no preprocessor)",
        lambda m, tmp: m.text_classifier_ids.fit(ids(1, -1), [1]),
        ValueError,
        ("TextClassifier.fit(): token id -1", OUTSIDE_VOCABULARY),
    ),
    Case(
        TEXT,
        "backbone.predict with an id past the vocabulary",
        lambda m, tmp: m.text_classifier.backbone.predict(ids(1, 99999)),
        ValueError,
        ("Backbone.predict(): token id 99999", OUTSIDE_VOCABULARY),
    ),
    Case(
        TEXT,
        "backbone(ids) with an id past the vocabulary",
        lambda m, tmp: m.text_classifier.backbone(ids(1, 99999)),
        ValueError,
        ("Backbone(...): token id 99999", OUTSIDE_VOCABULARY),
    ),
    Case(
        TEXT,
        "float word ids holding NaN (no preprocessor)",
        lambda m, tmp: m.text_classifier_ids.predict(np.array([[1.0, np.nan]])),
        ValueError,
        ("token_ids holds NaN or infinite values",),
    ),
    Case(
        TEXT,
        "a backbone smaller than the preprocessor's vocabulary",
        lambda m, tmp: TextClassifier(
            AttentionPoolingBackbone(vocabulary_size=5),
            m.text_classifier.preprocessor,
        ),
        ValueError,
        ("the preprocessor has", "but the backbone embeds 5"),
    ),
    Case(
        TEXT,
        'save("model.h5")',
        lambda m, tmp: m.text_classifier.save(tmp / "model.h5"),
        ValueError,
        ("model.h5: a zoo model is saved as a .keras file", "model.keras"),
    ),
    # --- GPT ------------------------------------------------------------------
    Case(
        GPT,
        "generate(None)",
        lambda m, tmp: m.gpt.generate(None),
        TypeError,
        ("generate()", NO_TEXT, "None"),
    ),
    Case(
        GPT,
        "generate([]): no prompt",
        lambda m, tmp: m.gpt.generate([]),
        ValueError,
        ("generate() needs at least one prompt",),
    ),
    Case(
        GPT,
        'generate(""): an empty prompt',
        lambda m, tmp: m.gpt.generate(""),
        ValueError,
        ("A prompt is empty",),
    ),
    Case(
        GPT,
        "a nested list of prompts",
        lambda m, tmp: m.gpt.generate([["to"], ["be", "or"]]),
        ValueError,
        ("nested list (item 1 is a list of 2)",),
    ),
    Case(
        GPT,
        "a prompt as long as max_length",
        lambda m, tmp: m.gpt.generate("to be or", max_length=8),
        ValueError,
        ("A prompt has 8 tokens", "max_length=8"),
    ),
    Case(
        GPT,
        "top_k with k=0",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="top_k", k=0),
        ValueError,
        ("k must be an integer >= 1", "got 0"),
    ),
    Case(
        GPT,
        "top_k with k=2.5",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="top_k", k=2.5),
        ValueError,
        ("k must be an integer >= 1", "got 2.5"),
    ),
    Case(
        GPT,
        "top_p with p=0",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="top_p", p=0),
        ValueError,
        ("p must be a number in (0, 1]", "got 0"),
    ),
    Case(
        GPT,
        "top_p with p=1.5",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="top_p", p=1.5),
        ValueError,
        ("p must be a number in (0, 1]", "got 1.5"),
    ),
    Case(
        GPT,
        "top_p with p=NaN",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="top_p", p=np.nan),
        ValueError,
        ("p must be a number in (0, 1]", "got nan"),
    ),
    Case(
        GPT,
        "max_length=NaN",
        lambda m, tmp: m.gpt.generate("to", max_length=float("nan")),
        ValueError,
        ("max_length must be an integer in [2, 1000000]", "got nan"),
    ),
    Case(
        GPT,
        "max_length=1e12 (terabytes of buffers)",
        lambda m, tmp: m.gpt.generate("to", max_length=10**12),
        ValueError,
        ("max_length must be an integer in [2, 1000000]", "MAX_GENERATION"),
    ),
    Case(
        GPT,
        "max_length=2.5",
        lambda m, tmp: m.gpt.generate("to", max_length=2.5),
        ValueError,
        ("max_length must be an integer", "got 2.5"),
    ),
    Case(
        GPT,
        'max_length="64", a string',
        lambda m, tmp: m.gpt.generate("to", max_length="64"),
        ValueError,
        ("max_length must be an integer", "got '64'"),
    ),
    Case(
        GPT,
        "temperature=0",
        lambda m, tmp: m.gpt.generate("to", 8, temperature=0),
        ValueError,
        ("temperature must be a finite number > 0", 'sampler="greedy"'),
    ),
    Case(
        GPT,
        "beam search with num_beams=0",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="beam", num_beams=0),
        ValueError,
        ("num_beams must be an integer >= 1",),
    ),
    Case(
        GPT,
        "an unknown sampler name",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="nucleus"),
        ValueError,
        ("sampler must be one of", "'nucleus'"),
    ),
    Case(
        GPT,
        "a sampler option without its sampler",
        lambda m, tmp: m.gpt.generate("to", 8, k=5),
        ValueError,
        ("k needs the sampler it belongs to",),
    ),
    Case(
        GPT,
        "an option the sampler does not take",
        lambda m, tmp: m.gpt.generate("to", 8, sampler="greedy", p=0.9),
        TypeError,
        ("sampler='greedy' takes no options", "p=0.9"),
    ),
    Case(
        GPT,
        "a prompt of bytes that are not UTF-8",
        lambda m, tmp: m.gpt.generate([b"to be", b"\xff\xfe"], 12),
        ValueError,
        ("generate(): prompt 1 is bytes that are not UTF-8 (byte offset 0)",),
    ),
    Case(
        GPT,
        "a stop token id outside the vocabulary",
        lambda m, tmp: m.gpt.generate("to", 8, stop_token_ids=[999]),
        ValueError,
        ("stop_token_ids must be an integer in [0, ", "got 999"),
    ),
    Case(
        GPT,
        "a prompt with characters outside the vocabulary",
        lambda m, tmp: m.gpt.generate("to Z😀", 12),
        UserWarning,
        ("prompt 0 has 2 token(s) outside the vocabulary", "'Z'"),
    ),
    Case(
        GPT,
        "generate on token ids past the vocabulary",
        lambda m, tmp: m.gpt.generate(gpt_ids(1, 2, 999), 6),
        ValueError,
        ("token id 999", OUTSIDE_VOCABULARY),
    ),
    Case(
        GPT,
        "generate on a negative token id",
        lambda m, tmp: m.gpt.generate(gpt_ids(1, -2, 3), 6),
        ValueError,
        ("token id -2", OUTSIDE_VOCABULARY),
    ),
    Case(
        GPT,
        "token ids to a GPT with a preprocessor (predict)",
        lambda m, tmp: m.gpt.predict(gpt_ids(1, 2)),
        TypeError,
        ("GPTCausalLM.predict() got token ids", "preprocessor = None"),
    ),
    Case(
        GPT,
        "a token id past the vocabulary (no preprocessor)",
        lambda m, tmp: m.gpt_ids.predict(gpt_ids(1, 2, 999)),
        ValueError,
        ("GPTCausalLM.predict(): token id 999", OUTSIDE_VOCABULARY),
    ),
    Case(
        GPT,
        "backbone.predict with a token id past the vocabulary",
        lambda m, tmp: m.gpt.backbone.predict(gpt_ids(1, 999)),
        ValueError,
        ("GPTBackbone.predict(): token id 999", OUTSIDE_VOCABULARY),
    ),
    Case(
        GPT,
        "fit(None)",
        lambda m, tmp: m.gpt.fit(None),
        TypeError,
        ("fit()", NO_TEXT, "None"),
    ),
    Case(
        GPT,
        'save("model.weights.h5")',
        lambda m, tmp: m.gpt.save(tmp / "model.weights.h5"),
        ValueError,
        ("names a weights file", "model.save_weights("),
    ),
    # --- seq2seq: the Transformer and the RNN translators ------------------
    Case(
        SEQ2SEQ,
        "generate(None)",
        lambda m, tmp: m.translator.generate(None),
        TypeError,
        ("generate()", NO_TEXT, "None"),
    ),
    Case(
        SEQ2SEQ,
        "an empty source sentence (RNN)",
        lambda m, tmp: m.rnn_translator.generate(["ein hund", ""]),
        ValueError,
        ("Source sentence 1 is empty",),
    ),
    Case(
        SEQ2SEQ,
        "top_k with k=0 (RNN)",
        lambda m, tmp: m.rnn_translator.generate("ein", sampler="top_k", k=0),
        ValueError,
        ("k must be an integer >= 1",),
    ),
    Case(
        SEQ2SEQ,
        "max_length past the decoder's length",
        lambda m, tmp: m.translator.generate("ein", max_length=10**6),
        ValueError,
        ("max_length must be an integer in [2, ", "decoder's sequence"),
    ),
    Case(
        SEQ2SEQ,
        "a source with characters outside the vocabulary",
        lambda m, tmp: m.translator.generate("ein 😀 hund"),
        UserWarning,
        ("sentence 0 has 1 piece(s) outside the vocabulary", "'😀'"),
    ),
    Case(
        SEQ2SEQ,
        "a source longer than the encoder reads",
        lambda m, tmp: m.translator.generate(" ".join(GERMAN[:20])),
        UserWarning,
        ("generate(): sentence 0 has", "so it is truncated"),
    ),
    Case(
        SEQ2SEQ,
        "predict(sources) instead of generate",
        lambda m, tmp: m.translator.predict(GERMAN[:2]),
        ValueError,
        ("Translator.predict() reads sources with their target", "generate"),
    ),
    Case(
        SEQ2SEQ,
        "fewer targets than sources",
        lambda m, tmp: m.translator.fit(GERMAN[:4], ENGLISH[:3]),
        ValueError,
        ("Translator.fit() got 4 source sentences but 3 targets",),
    ),
    Case(
        SEQ2SEQ,
        "fit(sources) without targets (RNN)",
        lambda m, tmp: m.rnn_translator.fit(GERMAN[:4]),
        ValueError,
        ("Translator.fit() needs target sentences",),
    ),
    Case(
        SEQ2SEQ,
        "fit(None)",
        lambda m, tmp: m.translator.fit(None, ENGLISH[:2]),
        TypeError,
        ("fit()", NO_TEXT, "None"),
    ),
    Case(
        SEQ2SEQ,
        "numbers as target sentences",
        lambda m, tmp: m.translator.evaluate(GERMAN[:2], [1, 2]),
        TypeError,
        ("evaluate()", NO_TEXT, "int 1"),
    ),
    Case(
        SEQ2SEQ,
        "sample_weight (every target token weighs the same)",
        lambda m, tmp: m.translator.fit(
            GERMAN[:2], ENGLISH[:2], sample_weight=[1.0, 2.0]
        ),
        ValueError,
        ("cannot take sample_weight",),
    ),
    Case(
        SEQ2SEQ,
        "alignments of two sentences",
        lambda m, tmp: m.translator.alignments(GERMAN[:2]),
        ValueError,
        ("alignments() reads one source sentence; got 2",),
    ),
    Case(
        SEQ2SEQ,
        "token ids to a translator with a preprocessor",
        lambda m, tmp: m.translator.predict(seq2seq_ids([1, 2], [1])),
        TypeError,
        ("Translator.predict() got token ids", "has a preprocessor"),
    ),
    Case(
        SEQ2SEQ,
        "backbone.predict with a source id past the vocabulary",
        lambda m, tmp: m.translator.backbone.predict(
            seq2seq_ids([1, 9999], [1])
        ),
        ValueError,
        ("encoder token id 9999", OUTSIDE_VOCABULARY),
    ),
    Case(
        SEQ2SEQ,
        "backbone(ids) with a target id past the vocabulary (RNN)",
        lambda m, tmp: m.rnn_translator.backbone(seq2seq_ids([1, 2], [9999])),
        ValueError,
        ("RNNSeq2SeqBackbone(...): decoder token id 9999", OUTSIDE_VOCABULARY),
    ),
    # --- BERT: the masked LM and the classifier ----------------------------
    Case(
        BERT,
        "predict(None)",
        lambda m, tmp: m.bert_classifier.predict(None),
        TypeError,
        ("predict()", NO_TEXT, "None"),
    ),
    Case(
        BERT,
        "a text with no known word",
        lambda m, tmp: m.bert_classifier.predict(["zzzz qqqq"]),
        UserWarning,
        ("1 of 1 texts have no token in the model's vocabulary",),
    ),
    Case(
        BERT,
        "a pair whose second segment holds a number",
        lambda m, tmp: m.bert_classifier.predict((REVIEW_LIST, [3] * 4)),
        TypeError,
        (NO_TEXT, "int 3"),
    ),
    Case(
        BERT,
        "a pair of segments of different lengths",
        lambda m, tmp: m.bert_classifier.predict((REVIEW_LIST, ["a film"])),
        ValueError,
        ("predict() got segments of 4 and 1 texts",),
    ),
    Case(
        BERT,
        "fit on segments of different lengths",
        lambda m, tmp: m.bert_classifier.fit((REVIEW_LIST, ["a"]), LABELS),
        ValueError,
        ("fit() got segments of 4 and 1 texts",),
    ),
    Case(
        BERT,
        "labels outside the classes",
        lambda m, tmp: m.bert_classifier.fit(REVIEWS, [0, 1, 3, 1]),
        ValueError,
        ("label 3 at index 2 is outside the classes",),
    ),
    Case(
        BERT,
        "more labels than texts",
        lambda m, tmp: m.bert_classifier.fit(REVIEWS, [0, 1, 0, 1, 1]),
        ValueError,
        ("got 4 examples but 5 labels",),
    ),
    Case(
        BERT,
        "fill_mask on a 100,000-character text without [MASK]",
        lambda m, tmp: m.masked_lm.fill_mask("a" * 100_000),
        ValueError,
        ("has no [MASK] token within its first", "'..."),
    ),
    Case(
        BERT,
        "fill_mask(None)",
        lambda m, tmp: m.masked_lm.fill_mask(None),
        TypeError,
        ("fill_mask()", NO_TEXT),
    ),
    Case(
        BERT,
        "fill_mask with top_k=0",
        lambda m, tmp: m.masked_lm.fill_mask("a [MASK] film", top_k=0),
        ValueError,
        ("top_k must be an integer in [1, ",),
    ),
    Case(
        BERT,
        "fill_mask on a text of emoji and [MASK]",
        lambda m, tmp: m.masked_lm.fill_mask("😀 [MASK] 😀"),
        UserWarning,
        ("fill_mask(): 1 of 1 texts have no token",),
    ),
    Case(
        BERT,
        "token ids to a masked LM with a preprocessor",
        lambda m, tmp: m.masked_lm.predict(bert_ids(1, 2)),
        TypeError,
        ("BertMaskedLM.predict() got token ids", "has a preprocessor"),
    ),
    Case(
        BERT,
        "a token id past the vocabulary (no preprocessor)",
        lambda m, tmp: m.masked_lm_ids.predict(
            {**bert_ids(2, 999), "mask_positions": ids(1)}
        ),
        ValueError,
        ("BertMaskedLM.predict(): token id 999", OUTSIDE_VOCABULARY),
    ),
    Case(
        BERT,
        "a segment id past num_segments",
        lambda m, tmp: m.bert_classifier.backbone.predict(
            bert_ids(2, 3, segments=[0, 2])
        ),
        ValueError,
        ("BertBackbone.predict(): segment id 2", "[0, num_segments=2)"),
    ),
    # --- ViT ------------------------------------------------------------------
    Case(
        VIT,
        "predict(None)",
        lambda m, tmp: m.vit.predict(None),
        ValueError,
        ("expected a batch of images", "got None"),
    ),
    Case(
        VIT,
        "bool images",
        lambda m, tmp: m.vit.predict(DIGITS > 100),
        ValueError,
        ("got bool images", "astype('uint8') * 255"),
    ),
    Case(
        VIT,
        "float images already scaled to [0, 1]",
        lambda m, tmp: m.vit.predict(DIGITS / 255.0),
        ValueError,
        ("look scaled to [0, 1] already",),
    ),
    Case(
        VIT,
        "pixel values above 255",
        lambda m, tmp: m.vit.predict(np.full((2, 8, 8), 300.0)),
        ValueError,
        ("pixel values must lie in [0, 255]", "300"),
    ),
    Case(
        VIT,
        "NaN pixels",
        lambda m, tmp: m.vit.predict(np.full((2, 8, 8), np.nan)),
        ValueError,
        ("NaN or infinite pixel values", "image 0"),
    ),
    Case(
        VIT,
        "file names (strings) instead of images",
        lambda m, tmp: m.vit.predict(["digit.png"]),
        ValueError,
        ("got images of dtype str",),
    ),
    Case(
        VIT,
        "channels-first images (N, 1, 8, 8)",
        lambda m, tmp: m.vit.predict(DIGITS[:, None]),
        ValueError,
        ("channels first?", "np.moveaxis(images, 1, -1)"),
    ),
    Case(
        VIT,
        "non-square images (8 x 16) for a square model",
        lambda m, tmp: m.vit.predict(np.zeros((2, 8, 16), "uint8")),
        ValueError,
        ("got 8x16 images", "resizing would stretch them"),
    ),
    Case(
        VIT,
        "colour images for a grey model",
        lambda m, tmp: m.vit.predict(np.zeros((2, 8, 8, 3), "uint8")),
        ValueError,
        ("images have 3 channels; this model reads 1",),
    ),
    Case(
        VIT,
        "one image without its batch axis",
        lambda m, tmp: m.vit.predict(DIGITS[0]),
        ValueError,
        ("expected a batch of images", "got shape (8, 8)"),
    ),
    Case(
        VIT,
        "a 5-D array",
        lambda m, tmp: m.vit.predict(DIGITS[None, ..., None]),
        ValueError,
        ("expected a batch of images", "(1, 4, 8, 8, 1)"),
    ),
    Case(
        VIT,
        "an empty batch",
        lambda m, tmp: m.vit.predict(DIGITS[:0]),
        ValueError,
        ("got an empty batch of images",),
    ),
    Case(
        VIT,
        "nested lists of different lengths",
        lambda m, tmp: m.vit.predict([[1, 2], [3]]),
        ValueError,
        ("nested lists of different lengths",),
    ),
    Case(
        VIT,
        "a class id past num_classes",
        lambda m, tmp: m.vit.fit(DIGITS, [0, 1, 2, 1]),
        ValueError,
        ("label 2 at index 2 is outside the classes", "0..1"),
    ),
    Case(
        VIT,
        "fractional class ids",
        lambda m, tmp: m.vit.fit(DIGITS, [0, 0.5, 1, 1]),
        ValueError,
        ("label 0.5 at index 1 is not a whole number",),
    ),
    Case(
        VIT,
        "bool validation images",
        lambda m, tmp: m.vit.fit(
            DIGITS, [0, 1, 1, 0], validation_data=(DIGITS > 9, [0, 1, 1, 0])
        ),
        ValueError,
        ("got bool images",),
    ),
    Case(
        VIT,
        "rollout_maps of bool images",
        lambda m, tmp: m.vit.rollout_maps(DIGITS > 100),
        ValueError,
        ("got bool images",),
    ),
    Case(
        VIT,
        'save("model.hdf5")',
        lambda m, tmp: m.vit.save(tmp / "model.hdf5"),
        ValueError,
        ("a zoo model is saved as a .keras file", "HDF5"),
    ),
    # --- ImageGPT -------------------------------------------------------------
    Case(
        IMAGEGPT,
        "colour images for a grey model",
        lambda m, tmp: m.imagegpt.complete(np.zeros((2, 8, 8, 3), "uint8")),
        ValueError,
        ("images have 3 channels; this model reads 1",),
    ),
    Case(
        IMAGEGPT,
        "non-square images (8 x 16) for a square model",
        lambda m, tmp: m.imagegpt.predict(np.zeros((2, 8, 16), "uint8")),
        ValueError,
        ("got 8x16 images", "resizing would stretch them"),
    ),
    Case(
        IMAGEGPT,
        "complete() on an empty batch",
        lambda m, tmp: m.imagegpt.complete(DIGITS[:0]),
        ValueError,
        ("got an empty batch of images",),
    ),
    Case(
        IMAGEGPT,
        "complete(rows=8) on 8-row images: nothing to complete",
        lambda m, tmp: m.imagegpt.complete(DIGITS, rows=8),
        ValueError,
        ("rows=8", "from 0 to 7"),
    ),
    Case(
        IMAGEGPT,
        "generate_images(0)",
        lambda m, tmp: m.imagegpt.generate_images(0),
        ValueError,
        ("n=0", "at least one image"),
    ),
    Case(
        IMAGEGPT,
        "features(layer=5) of a 2-block model",
        lambda m, tmp: m.imagegpt.features(DIGITS, layer=5),
        ValueError,
        ("layer=5", "2 blocks"),
    ),
    Case(
        IMAGEGPT,
        "a palette that is not increasing",
        lambda m, tmp: ImageGPTPreprocessor((8, 8), 3, palette=[0, 200, 100]),
        ValueError,
        ("strictly increasing",),
        one_backend=True,
    ),
    Case(
        IMAGEGPT,
        "pixel ids outside the palette",
        lambda m, tmp: m.imagegpt.preprocessor.images_from_ids(
            np.full((1, 64), 9)
        ),
        ValueError,
        ("pixel ids must lie in [0, 3]",),
    ),
    # --- Captioning -----------------------------------------------------------
    Case(
        CAPTION,
        "generate(None)",
        lambda m, tmp: m.captioner.generate(None),
        ValueError,
        ("expected images", "got None"),
    ),
    Case(
        CAPTION,
        "generate([]): no image",
        lambda m, tmp: m.captioner.generate([]),
        ValueError,
        ("got an empty list of images",),
    ),
    Case(
        CAPTION,
        "bool images",
        lambda m, tmp: m.captioner.generate(PHOTOS > 100),
        ValueError,
        ("got bool images",),
    ),
    Case(
        CAPTION,
        "a file name instead of images",
        lambda m, tmp: m.captioner.generate("photo.jpg"),
        ValueError,
        ("expected images", "got str"),
    ),
    Case(
        CAPTION,
        "channels-first images",
        lambda m, tmp: m.captioner.generate(np.moveaxis(PHOTOS, -1, 1)),
        ValueError,
        ("channels first?", "np.moveaxis(images, 1, -1)"),
    ),
    Case(
        CAPTION,
        "grey images for a colour model",
        lambda m, tmp: m.captioner.generate(PHOTOS[..., 0]),
        ValueError,
        ("a batch of grey images?", "3-channel"),
    ),
    Case(
        CAPTION,
        "float images already scaled to [0, 1]",
        lambda m, tmp: m.captioner.generate(PHOTOS / 255.0),
        ValueError,
        ("image 0: this float image looks scaled to [0, 1]",),
    ),
    Case(
        CAPTION,
        "NaN pixels",
        lambda m, tmp: m.captioner.generate(np.full(PHOTOS.shape, np.nan)),
        ValueError,
        ("image 0: the image holds NaN",),
    ),
    Case(
        CAPTION,
        "a 5-D array",
        lambda m, tmp: m.captioner.generate(PHOTOS[None]),
        ValueError,
        ("expected a batch of images", "1x2x16x16x3"),
    ),
    Case(
        CAPTION,
        "max_length past the decoder's length",
        lambda m, tmp: m.captioner.generate(PHOTOS, max_length=10**9),
        ValueError,
        ("max_length must be an integer in [2, ", "decoder's sequence"),
    ),
    Case(
        CAPTION,
        "top_p with p=2",
        lambda m, tmp: m.captioner.generate(PHOTOS, sampler="top_p", p=2),
        ValueError,
        ("p must be a number in (0, 1]",),
    ),
    Case(
        CAPTION,
        "fewer captions than images",
        lambda m, tmp: m.captioner.fit(IMAGES[:4], CAPTIONS[:3]),
        ValueError,
        ("4 images but 3 caption entries",),
    ),
    Case(
        CAPTION,
        "fit(images) without captions",
        lambda m, tmp: m.captioner.fit(IMAGES[:4]),
        ValueError,
        ("ImageCaptioner.fit() needs captions",),
    ),
    Case(
        CAPTION,
        "numbers as captions",
        lambda m, tmp: m.captioner.fit(IMAGES[:2], [7, 8]),
        TypeError,
        ("image 0: captions must be strings; got int 7",),
    ),
    Case(
        CAPTION,
        "predict(images) instead of generate",
        lambda m, tmp: m.captioner.predict(PHOTOS),
        ValueError,
        ("reads images with their captions", "generate(images)"),
    ),
    Case(
        CAPTION,
        "attention_maps(None)",
        lambda m, tmp: m.captioner.attention_maps(None),
        ValueError,
        ("expected images", "got None"),
    ),
    Case(
        CAPTION,
        "backbone.predict with a caption id past the vocabulary",
        lambda m, tmp: m.captioner.backbone.predict(
            {
                "images": PHOTOS.astype("float32"),
                "decoder_token_ids": np.full((2, 3), 999, "int32"),
                "decoder_padding_mask": np.ones((2, 3), bool),
            }
        ),
        ValueError,
        ("decoder token id 999", OUTSIDE_VOCABULARY),
    ),
    # --- The data sets' files (each recipe's loader) ------------------------
    Case(
        TEXT,
        "a review file that is not UTF-8",
        lambda m, tmp: read_aclimdb_split(
            _aclimdb(tmp, {"0_3.txt": "café".encode("latin-1")}), "train"
        ),
        DataNotFoundError,
        ("0_3.txt is not valid UTF-8: byte offset 3", "save it as UTF-8"),
        one_backend=True,
    ),
    Case(
        TEXT,
        "an empty review file",
        lambda m, tmp: read_aclimdb_split(
            _aclimdb(tmp, {"0_3.txt": b"bad", "1_8.txt": b""}), "train"
        ),
        UserWarning,
        ("skipped 1 empty review file(s)", "1_8.txt"),
        one_backend=True,
    ),
    Case(
        TEXT,
        "a review folder whose files are all empty",
        lambda m, tmp: read_aclimdb_split(
            _aclimdb(tmp, {"0_3.txt": b" \n"}), "train"
        ),
        DataNotFoundError,
        ("has no reviews: its 1 review files are all empty",),
        one_backend=True,
    ),
    Case(
        GPT,
        "a corpus that is not UTF-8",
        lambda m, tmp: load_text(_write(tmp / "corpus.txt", b"ROMEO:\n\xff")),
        DataNotFoundError,
        ("corpus.txt is not valid UTF-8: byte offset 7",),
        one_backend=True,
    ),
    Case(
        GPT,
        "an empty corpus",
        lambda m, tmp: load_text(_write(tmp / "corpus.txt", b"")),
        DataNotFoundError,
        ("corpus.txt is empty",),
        one_backend=True,
    ),
    Case(
        SEQ2SEQ,
        "a sentence file that is not UTF-8 (gzipped)",
        lambda m, tmp: read_pairs(
            _write(tmp / "train.de.gz", gzip.compress(b"ein\nzwei \xe4\n")),
            _write(tmp / "train.en", b"one\ntwo\n"),
        ),
        DataNotFoundError,
        ("train.de.gz (decompressed) is not valid UTF-8: byte offset 9",),
        one_backend=True,
    ),
    Case(
        SEQ2SEQ,
        "sentence files of different lengths",
        lambda m, tmp: _pairs(tmp, b"ein\nzwei\n", b"one\n"),
        DataNotFoundError,
        ("has 2 lines but", "has 1: the files must be line-aligned"),
        one_backend=True,
    ),
    Case(
        SEQ2SEQ,
        "a blank line in a sentence file",
        lambda m, tmp: _pairs(tmp, b"ein\n \ndrei\n", b"one\ntwo\nthree\n"),
        DataNotFoundError,
        ("train.de: line 2 is empty",),
        one_backend=True,
    ),
    Case(
        BERT,
        "an unlabelled review that is not UTF-8",
        lambda m, tmp: _unsupervised(tmp, b"good \x80"),
        DataNotFoundError,
        ("0_0.txt is not valid UTF-8: byte offset 5",),
        one_backend=True,
    ),
    Case(
        BERT,
        "a vocabulary file that is not UTF-8",
        lambda m, tmp: load_or_train_bert_tokenizer(
            _write(tmp / "vocabulary.txt", b"[PAD]\n\xc3("), [], 40, reuse=True
        ),
        DataNotFoundError,
        ("vocabulary.txt is not valid UTF-8: byte offset 6",),
        one_backend=True,
    ),
    Case(
        CAPTION,
        "a Flickr8k caption file that is not UTF-8",
        lambda m, tmp: parse_tokens(
            b"a.jpg#0\ta d\xf6g\n", "Flickr8k.token.txt"
        ),
        DataNotFoundError,
        ("Flickr8k.token.txt is not valid UTF-8: byte offset 11",),
        one_backend=True,
    ),
    Case(
        CAPTION,
        "a caption line without its tab",
        lambda m, tmp: parse_tokens(b"a.jpg#0 a dog\n", "Flickr8k.token.txt"),
        DataNotFoundError,
        ("line 1 is not '<name>.jpg#<k> TAB caption'",),
        one_backend=True,
    ),
    Case(
        VIT,
        "a truncated .npz of digits",
        lambda m, tmp: load_npz(
            _write(tmp / "digits.npz", _npz(tmp, x=DIGITS).read_bytes()[:99])
        ),
        DataNotFoundError,
        ("digits.npz is not a readable .npz file",),
        one_backend=True,
    ),
    Case(
        VIT,
        "an .npz of digits without labels",
        lambda m, tmp: load_npz(_npz(tmp, x=DIGITS)),
        DataNotFoundError,
        ("has arrays ['x']; expected x (images) and y (labels)",),
        one_backend=True,
    ),
    # --- Model files and interrupted runs -----------------------------------
    Case(
        FILES,
        "load_model of a missing file",
        lambda m, tmp: load_model(tmp / "gone.keras"),
        FileNotFoundError,
        ("gone.keras: no such model file",),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of an empty file",
        lambda m, tmp: load_model(_write(tmp / "m.keras", b"")),
        ValueError,
        ("m.keras is empty (0 bytes)", "interrupted save"),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a truncated .keras",
        lambda m, tmp: _truncated_keras(tmp),
        ValueError,
        ("model.keras is truncated", "a zip archive without its end"),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a file that is no zip",
        lambda m, tmp: load_model(_write(tmp / "m.keras", b"hello " * 20)),
        ValueError,
        ("m.keras is not a .keras archive (not a zip file)",),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of an HDF5 file named .keras",
        lambda m, tmp: load_model(
            _write(tmp / "m.keras", b"\x89HDF\r\n\x1a\n" + bytes(64))
        ),
        ValueError,
        ("m.keras is an HDF5 file", "model.load_weights"),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a .h5 name",
        lambda m, tmp: load_model(_write(tmp / "m.h5", b"\x89HDF\r\n\x1a\n")),
        ValueError,
        ("m.h5: model files end in .keras",),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a folder",
        lambda m, tmp: load_model(tmp),
        ValueError,
        ("no such model file (it is a folder)",),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a zip without config.json",
        lambda m, tmp: load_model(_zip(tmp / "m.keras", {"a.txt": "a"})),
        ValueError,
        ("m.keras has no config.json: not a Keras model file",),
        one_backend=True,
    ),
    Case(
        FILES,
        "load_model of a .keras whose member fails its checksum",
        lambda m, tmp: _damaged_keras(tmp),
        ValueError,
        ("model.keras is damaged: model.weights.h5 fails its checksum",),
        one_backend=True,
    ),
    Case(
        FILES,
        "a run resumed from a backup cut to zero bytes",
        lambda m, tmp: _damaged_backup(tmp),
        UserWarning,
        ("latest.weights.h5: damaged backup", "resuming from the previous"),
        one_backend=True,
    ),
]


def message_of(case, models, tmp_path):
    """`(type, message)` of what `case.call` raised (a warning of
    `case.raises` counts, and stops the call); `(None, None)` when it
    returned."""
    with warnings.catch_warnings():
        if case.warns:
            # Only this warning stops the call: others (a backend's own)
            # pass as usual.
            warnings.filterwarnings(
                "error", message=".*" + _first(case), category=case.raises
            )
        try:
            case.call(models, tmp_path)
        except Exception as error:
            return type(error), str(error)
    return None, None


def _first(case):
    return re.escape(case.says[0])


def markdown_table(cases=CASES):
    """The catalogue as docs/reliability.md shows it, messages measured
    under the current backend (the files' cases in a temporary folder)."""
    import pathlib
    import tempfile

    models = Models()
    rows = [
        "| family | input | what happens | the message |",
        "| --- | --- | --- | --- |",
    ]
    order = [TEXT, GPT, SEQ2SEQ, BERT, VIT, IMAGEGPT, CAPTION, FILES]
    for case in sorted(cases, key=lambda case: order.index(case.family)):
        tmp = pathlib.Path(tempfile.mkdtemp())
        kind, message = message_of(case, models, tmp)
        what = "warns" if case.warns else "raises"
        shown = (message or "(nothing)").replace(str(tmp), "...")
        shown = shown.replace("|", "\\|").replace("<", "&lt;")
        rows.append(
            f"| {case.family} | {case.input} | {what} "
            f"`{kind.__name__ if kind else '-'}` | {shown} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    print(markdown_table())
