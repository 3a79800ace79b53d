"""zoo.data.masked_lm's pretraining corpus: texts cut into pieces, the run's
vocabulary kept on disk, and the pieces packed into ids and cached in an
`.npz` (hit, invalidated, written atomically), on generated text."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from zoo.data import masked_lm
from zoo.data.masked_lm import (
    compact_ids,
    corpus_key,
    load_or_train_bert_tokenizer,
    load_packed_corpus,
    pack_texts,
    packed_corpus,
    split_into_pieces,
    words_per_piece,
)
from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer

WORDS = "the a film plot actor scene music great awful story".split()
UNKNOWN = ["zebra", "quokka"]  # not in the vocabulary: [UNK]


def vocabulary():
    return BERT_SPECIAL_TOKENS + WORDS


def texts(count=40, seed=0, longest=30):
    """Lower-case texts of whole words, some unknown, lengths 0..longest."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(0, longest + 1))
        out.append(" ".join(rng.choice(WORDS + UNKNOWN, size=n)))
    return out


def reference_pack(texts, sequence_length):
    """The packed layout in NumPy, from the vocabulary alone: [CLS], the
    words' ids (unknown ones [UNK]) cut to `sequence_length - 2`, [SEP],
    then [PAD]."""
    index = {token: i for i, token in enumerate(vocabulary())}
    pad, unk, cls, sep = (
        index[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
    )
    out = np.full((len(texts), sequence_length), pad, "int32")
    for row, text in enumerate(texts):
        ids = [index.get(word, unk) for word in text.split()]
        ids = [cls] + ids[: sequence_length - 2] + [sep]
        out[row, : len(ids)] = ids
    return out


@pytest.fixture
def tokenizer():
    return bert_tokenizer(vocabulary())


def test_pieces_cover_each_text_and_drop_only_short_tails():
    review = " ".join(f"w{i}" for i in range(23))
    pieces = split_into_pieces([review, "short<br />one", "", 7], 10)
    # 23 words: 10 + 10 + a tail of 3 (kept: at least 10 // 5 = 2 words).
    assert pieces == [
        " ".join(f"w{i}" for i in range(10)),
        " ".join(f"w{i}" for i in range(10, 20)),
        "w20 w21 w22",
        "short one",  # a short text is kept whole, its markup a space
        "7",
    ]
    # A tail of 1 word (< 2) is dropped; a 1-word text is kept.
    review = " ".join(f"w{i}" for i in range(21))
    assert [len(p.split()) for p in split_into_pieces([review], 10)] == [
        10,
        10,
    ]
    assert words_per_piece(32) == 23 and words_per_piece(3) == 1
    assert words_per_piece(256) == int(254 / 1.3)


def test_compact_ids_halve_the_file_only_where_the_ids_fit():
    ids = np.array([[2, 65535, 3]], "int32")
    assert compact_ids(ids, 2**16 - 1).dtype == np.uint16
    np.testing.assert_array_equal(compact_ids(ids, 2**16 - 1), ids)
    assert compact_ids(ids, 2**16).dtype == np.int32


@pytest.mark.parametrize("sequence_length", [3, 8, 40])
def test_packing_matches_a_numpy_reference(
    tokenizer, tmp_path, sequence_length
):
    train, held_out = texts(50, seed=1), texts(7, seed=2)
    expected = reference_pack(train, sequence_length)
    packed = pack_texts(tokenizer, train, sequence_length, batch_size=16)
    assert packed.dtype == np.int32 and packed.shape == (50, sequence_length)
    np.testing.assert_array_equal(packed, expected)

    path = tmp_path / "packed.npz"
    ids, validation = packed_corpus(
        path, tokenizer, train, held_out, sequence_length, reviews=9
    )
    assert ids.dtype == validation.dtype == np.int32
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(
        validation, reference_pack(held_out, sequence_length)
    )
    corpus = load_packed_corpus(path)
    assert corpus.vocabulary == vocabulary() and corpus.reviews == 9
    np.testing.assert_array_equal(corpus.train, expected)
    np.testing.assert_array_equal(corpus.validation, validation)
    with np.load(path) as stored:
        assert stored["train"].dtype == np.uint16  # compact_ids


def test_too_short_rows_are_refused(tokenizer):
    with pytest.raises(ValueError, match="no room"):
        pack_texts(tokenizer, ["a film"], 2)


def count_packing(monkeypatch):
    calls = []
    pack = masked_lm.pack_texts

    def counted(*args, **kwargs):
        calls.append(args[1])
        return pack(*args, **kwargs)

    monkeypatch.setattr(masked_lm, "pack_texts", counted)
    return calls


def test_a_second_call_with_the_same_inputs_reads_the_cache(
    tokenizer, tmp_path, monkeypatch
):
    path = tmp_path / "packed_16.npz"
    train, held_out = texts(30), texts(5, seed=3)
    first = packed_corpus(path, tokenizer, train, held_out, 16, reviews=4)
    written = os.path.getmtime(path), path.read_bytes()
    calls = count_packing(monkeypatch)
    again = packed_corpus(
        path, bert_tokenizer(vocabulary()), list(train), held_out, 16, 4
    )
    assert calls == []  # nothing tokenised
    assert (os.path.getmtime(path), path.read_bytes()) == written
    for a, b in zip(first, again):
        assert b.dtype == np.int32
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "change",
    [
        "sequence_length",
        "a_middle_text",
        "a_held_out_text",
        "one_text_more",
        "vocabulary",
        "tokenizer_setting",
        "reviews",
    ],
)
def test_a_changed_input_or_setting_packs_anew(
    tokenizer, tmp_path, monkeypatch, change
):
    path = tmp_path / "packed.npz"
    train, held_out = texts(30), texts(5, seed=3)
    inputs = dict(
        tokenizer=tokenizer,
        texts=train,
        validation_texts=held_out,
        sequence_length=16,
        reviews=4,
    )
    packed_corpus(path, **inputs)
    before = load_packed_corpus(path)
    changed = dict(inputs)
    if change == "sequence_length":
        changed["sequence_length"] = 12
    elif change == "a_middle_text":
        changed["texts"] = train[:15] + ["the great zebra"] + train[16:]
    elif change == "a_held_out_text":
        changed["validation_texts"] = held_out[:-1] + ["awful"]
    elif change == "one_text_more":
        changed["texts"] = train + ["music"]
    elif change == "vocabulary":
        changed["tokenizer"] = bert_tokenizer(vocabulary() + ["zebra"])
    elif change == "tokenizer_setting":
        changed["tokenizer"] = bert_tokenizer(vocabulary(), lowercase=False)
    else:
        changed["reviews"] = 5
    assert corpus_key(**inputs) != corpus_key(**changed)
    calls = count_packing(monkeypatch)
    train_ids, held_out_ids = packed_corpus(path, **changed)
    assert len(calls) == 2  # both parts tokenised again
    np.testing.assert_array_equal(
        train_ids,
        pack_texts(
            changed["tokenizer"],
            changed["texts"],
            changed["sequence_length"],
        ),
    )
    after = load_packed_corpus(path)  # the file holds the new corpus
    np.testing.assert_array_equal(after.train, train_ids)
    np.testing.assert_array_equal(after.validation, held_out_ids)
    assert after.reviews == changed["reviews"]
    assert after.vocabulary == changed["tokenizer"].get_vocabulary()
    if change in ("a_middle_text", "vocabulary", "sequence_length"):
        assert not np.array_equal(before.train, after.train)
    # ... and the cache then hits for the changed inputs.
    packed_corpus(path, **changed)
    assert len(calls) == 2


def test_an_unreadable_cache_is_packed_anew(tokenizer, tmp_path):
    path = tmp_path / "packed.npz"
    path.write_bytes(b"PK\x03\x04 not a whole archive")
    ids, _ = packed_corpus(path, tokenizer, texts(6), texts(2), 8)
    np.testing.assert_array_equal(ids, reference_pack(texts(6), 8))
    np.testing.assert_array_equal(load_packed_corpus(path).train, ids)


def test_an_interrupted_write_keeps_the_earlier_file_whole(
    tokenizer, tmp_path, monkeypatch
):
    path = tmp_path / "packed.npz"
    old = packed_corpus(path, tokenizer, texts(10), texts(2), 8)
    save = np.savez_compressed

    def interrupted(file, **arrays):
        save(file, **arrays)
        with open(file, "r+b") as f:  # half written ...
            f.truncate(os.path.getsize(file) // 2)
        raise KeyboardInterrupt  # ... when Ctrl-C comes

    monkeypatch.setattr(np, "savez_compressed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        packed_corpus(path, tokenizer, texts(10, seed=5), texts(2), 8)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["packed.npz"]  # no temporary file left
    np.testing.assert_array_equal(load_packed_corpus(path).train, old[0])


KILLED_MID_WRITE = """
import os, sys, time
import numpy as np
from zoo.data.masked_lm import packed_corpus
from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer

path, ready = sys.argv[1], sys.argv[2]
save = np.savez_compressed

def stalled(file, **arrays):
    save(file, **arrays)
    with open(file, "r+b") as f:
        f.truncate(os.path.getsize(file) // 2)
    open(ready, "w").close()
    time.sleep(600)  # killed here, half of the new file written

np.savez_compressed = stalled
tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "film", "plot"])
packed_corpus(path, tokenizer, ["a plot"] * 50, ["film"], 8)
"""


@pytest.mark.one_backend
def test_a_killed_write_leaves_no_half_file(tokenizer, tmp_path):
    """SIGKILL mid-write (no Python clean-up runs): the corpus file is the
    earlier one, whole; only a temporary file is left beside it, which the
    next write does not read."""
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "packed.npz"
    old = packed_corpus(path, tokenizer, texts(10), texts(2), 8)
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_WRITE, str(path), str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert child.poll() is None, child.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the child never wrote"
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    corpus = load_packed_corpus(path)  # the earlier file, whole
    np.testing.assert_array_equal(corpus.train, old[0])
    np.testing.assert_array_equal(corpus.validation, old[1])
    others = sorted(set(os.listdir(folder)) - {"packed.npz"})
    assert all(name.startswith(".tmp-") for name in others), others
    # The next run packs and replaces the file as usual.
    new = packed_corpus(path, tokenizer, texts(12, seed=4), texts(2), 8)
    np.testing.assert_array_equal(load_packed_corpus(path).train, new[0])


def test_loading_a_missing_or_foreign_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_packed_corpus(tmp_path / "none.npz")
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(KeyError, match="train"):
        load_packed_corpus(tmp_path / "other.npz")
    (tmp_path / "text.npz").write_text("not numpy")
    with pytest.raises(ValueError):
        load_packed_corpus(tmp_path / "text.npz")


def test_the_vocabulary_is_learned_once_and_read_back_when_reused(tmp_path):
    path = tmp_path / "run" / "vocabulary.txt"
    first = load_or_train_bert_tokenizer(path, texts(60), 30)
    vocabulary = first.get_vocabulary()
    assert vocabulary[:5] == BERT_SPECIAL_TOKENS and len(vocabulary) <= 30
    assert path.read_text(encoding="utf-8") == "\n".join(vocabulary) + "\n"
    assert os.listdir(path.parent) == ["vocabulary.txt"]
    # Reused: the file's ids, whatever the text.
    again = load_or_train_bert_tokenizer(path, ["other words"], 30, reuse=True)
    assert again.get_vocabulary() == vocabulary
    assert (
        np.asarray(again("the film")).tolist()
        == np.asarray(first("the film")).tolist()
    )
    # Not reused: learned anew from this text (and written).
    other = load_or_train_bert_tokenizer(path, ["zebra quokka"] * 20, 30)
    assert "zebra" in other.get_vocabulary() and "film" not in (
        other.get_vocabulary()
    )
    assert path.read_text(encoding="utf-8").split("\n")[:-1] == (
        other.get_vocabulary()
    )
