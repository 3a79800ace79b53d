"""zoo.data.corpus: loading (local, the get_file default, offline), splits,
text windows and the generated smoke corpus."""

import keras
import numpy as np
import pytest

from zoo.data import corpus
from zoo.data.corpus import (
    TokenWindows,
    consecutive_text_windows,
    load_text,
    make_synthetic_corpus,
    random_text_windows,
    split_text,
)
from zoo.data.download import DataNotFoundError


def test_load_text_from_a_file_and_a_directory(tmp_path):
    (tmp_path / "tinyshakespeare.txt").write_text("ROMEO:\nhello\n")
    assert load_text(str(tmp_path / "tinyshakespeare.txt")) == "ROMEO:\nhello\n"
    assert load_text(str(tmp_path)) == "ROMEO:\nhello\n"


def test_missing_or_empty_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataNotFoundError, match="no text file"):
        load_text(str(tmp_path / "missing.txt"))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataNotFoundError, match="empty"):
        load_text(str(tmp_path / "empty.txt"))
    (tmp_path / "latin1.txt").write_bytes(
        "ROMEO:\nAdieu, ma chère".encode("latin-1")
    )
    with pytest.raises(
        DataNotFoundError,
        match=r"latin1.txt is not valid UTF-8: byte offset 19 \(b'\\xe8re'\)",
    ):
        load_text(str(tmp_path / "latin1.txt"))


def reachable(monkeypatch):
    monkeypatch.setattr(corpus, "check_reachable", lambda *a, **k: None)


def test_default_downloads_with_keras_get_file(tmp_path, monkeypatch):
    reachable(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))  # nothing cached there
    fixture = tmp_path / "download.txt"
    fixture.write_text("First Citizen:\n")
    calls = []

    def fake_get_file(fname, origin, cache_subdir):
        calls.append((fname, origin))
        return str(fixture)

    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    assert load_text() == "First Citizen:\n"
    assert calls == [("tinyshakespeare.txt", corpus.SHAKESPEARE_URL)]


def test_failed_download_is_a_clear_error(tmp_path, monkeypatch):
    reachable(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure: no network")

    monkeypatch.setattr(keras.utils, "get_file", offline)
    with pytest.raises(DataNotFoundError, match="--data PATH"):
        load_text()


def test_an_unreachable_host_fails_fast_with_the_local_flag(
    tmp_path, monkeypatch
):
    """No network: one clear error within seconds, before get_file would
    retry."""
    import time

    monkeypatch.setenv("HOME", str(tmp_path))
    called = []
    monkeypatch.setattr(
        keras.utils, "get_file", lambda *a, **k: called.append(1)
    )
    start = time.perf_counter()
    with pytest.raises(DataNotFoundError, match="--data PATH"):
        load_text(url="https://unreachable.invalid/corpus.txt")
    assert time.perf_counter() - start < 30 and not called


def test_split_is_the_first_ninety_percent():
    train, val = split_text(np.arange(100), 0.9)
    assert train.tolist() == list(range(90)) and val.tolist() == list(
        range(90, 100)
    )
    assert split_text("abcdefghij", 0.9) == ("abcdefghi", "j")
    with pytest.raises(ValueError):
        split_text(np.arange(10), 1.0)


def test_random_text_windows_are_slices_of_the_text():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    data = random_text_windows(text, window=17, batch_size=4, steps=3, seed=0)
    epochs = [
        [[w.decode() for w in batch.numpy()] for batch in data]
        for _ in range(2)
    ]
    assert len(epochs[0]) == 3 and all(len(b) == 4 for b in epochs[0])
    for window in epochs[0][0]:
        assert len(window) == 17 and window in text
    assert epochs[0] != epochs[1]  # fresh windows every epoch
    again = random_text_windows(text, 17, 4, 3, seed=0)
    assert [[w.decode() for w in b.numpy()] for b in again] == epochs[0]
    with pytest.raises(ValueError, match="fewer than"):
        random_text_windows("short", 17, 4, 3)


def test_consecutive_text_windows_cover_the_split_once():
    text = "".join(chr(ord("a") + i % 26) for i in range(50))
    windows = consecutive_text_windows(text, 8)
    assert len(windows) == 6 and all(len(w) == 9 for w in windows)
    # Every character after the first is a target exactly once.
    assert "".join(w[1:] for w in windows) == text[1:49]
    with pytest.raises(ValueError, match="fewer than"):
        consecutive_text_windows("abc", 8)


def _tokenised(text):
    from zoo.data.tokenizers import CharacterTokenizer, encode_corpus
    from zoo.models.gpt import GPTPreprocessor

    tokenizer = CharacterTokenizer.from_text(text)
    return encode_corpus(tokenizer, text), GPTPreprocessor(tokenizer, 16)


def test_token_windows_are_what_the_preprocessor_makes_of_the_text():
    text = make_synthetic_corpus(3000, seed=3)
    ids, preprocessor = _tokenised(text)
    windows = TokenWindows(ids, 16, batch_size=4, steps=3, seed=7)
    assert len(windows) == 3
    epochs = []
    for epoch in range(2):
        windows.epoch = epoch
        batches = [windows[i] for i in range(len(windows))]
        epochs.append(np.stack([b[0]["token_ids"] for b in batches]))
        for x, y, weight in batches:
            assert x["token_ids"].shape == y.shape == weight.shape == (4, 16)
            # Each row is a window of 17 characters of the text, as the
            # preprocessor packs it: inputs, next-character targets.
            starts = [
                text.find(
                    preprocessor.tokenizer.detokenize(list(row) + [int(t[-1])])
                )
                for row, t in zip(x["token_ids"], y)
            ]
            assert min(starts) >= 0
            px, py, pw = preprocessor([text[s : s + 17] for s in starts])
            np.testing.assert_array_equal(x["token_ids"], px["token_ids"])
            np.testing.assert_array_equal(x["padding_mask"], px["padding_mask"])
            np.testing.assert_array_equal(y, py)
            np.testing.assert_array_equal(weight, pw)
    assert not np.array_equal(epochs[0], epochs[1])  # new every epoch
    again = TokenWindows(ids, 16, 4, steps=3, seed=7)
    again.epoch = 1  # a resumed run reads the same epoch
    np.testing.assert_array_equal(again[2][0]["token_ids"], epochs[1][2])


def test_token_windows_for_evaluation_are_the_consecutive_text_windows():
    text = make_synthetic_corpus(1000, seed=4)
    ids, preprocessor = _tokenised(text)
    windows = TokenWindows(ids, 16, batch_size=8, shuffle=False)
    texts = consecutive_text_windows(text, 16)
    assert windows.windows == len(texts) and len(windows) == -(-len(texts) // 8)
    got = np.concatenate([windows[i][1] for i in range(len(windows))])
    _, expected, _ = preprocessor(texts)
    np.testing.assert_array_equal(got, expected)
    assert len(windows[len(windows) - 1][1]) == (len(texts) % 8 or 8)


def test_token_windows_move_on_only_after_a_whole_epoch():
    ids, _ = _tokenised(make_synthetic_corpus(2000, seed=5))
    windows = TokenWindows(ids, 16, 4, steps=3)
    windows[0]
    windows.on_epoch_end()  # Keras' first-batch pass before training
    assert windows.epoch == 0
    for i in range(3):
        windows[i]
    windows.on_epoch_end()
    assert windows.epoch == 1


def test_token_windows_refuse_bad_input():
    with pytest.raises(ValueError, match="fewer than one window"):
        TokenWindows(np.arange(10), 16, 4, steps=2)
    with pytest.raises(ValueError, match="1-D integer"):
        TokenWindows(np.zeros((4, 40), "int32"), 16, 4, steps=2)
    with pytest.raises(ValueError, match="1-D integer"):
        TokenWindows(np.zeros(40, "float32"), 16, 4, steps=2)
    with pytest.raises(ValueError, match="steps"):
        TokenWindows(np.arange(40), 16, 4)
    with pytest.raises(IndexError):
        TokenWindows(np.arange(40), 16, 4, steps=2)[2]


def test_synthetic_corpus_is_play_shaped_and_seeded():
    text = make_synthetic_corpus(3000, seed=1)
    assert len(text) == 3000 and ":\n" in text and "\n\n" in text
    assert text == make_synthetic_corpus(3000, seed=1)
    assert text != make_synthetic_corpus(3000, seed=2)
