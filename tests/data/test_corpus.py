"""zoo.data.corpus: loading (local and the get_file default), splits and
windows."""

import numpy as np
import pytest

import keras

from zoo.data import corpus
from zoo.data.corpus import RandomWindows
from zoo.data.corpus import consecutive_windows
from zoo.data.corpus import load_text
from zoo.data.corpus import split_ids
from zoo.data.imdb import DataNotFoundError


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


def test_default_downloads_with_keras_get_file(tmp_path, monkeypatch):
    fixture = tmp_path / "download.txt"
    fixture.write_text("First Citizen:\n")
    calls = []

    def fake_get_file(fname, origin, cache_subdir):
        calls.append((fname, origin))
        return str(fixture)

    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    assert load_text() == "First Citizen:\n"
    assert calls == [("tinyshakespeare.txt", corpus.SHAKESPEARE_URL)]


def test_failed_download_is_a_clear_error(monkeypatch):
    def offline(*args, **kwargs):
        raise Exception("URL fetch failure: no network")

    monkeypatch.setattr(keras.utils, "get_file", offline)
    with pytest.raises(DataNotFoundError, match="--data PATH"):
        load_text()


def test_split_is_the_first_ninety_percent():
    train, val = split_ids(np.arange(100), 0.9)
    assert train.tolist() == list(range(90)) and val.tolist() == list(range(90, 100))
    with pytest.raises(ValueError):
        split_ids(np.arange(10), 1.0)


def test_random_windows_are_next_token_pairs():
    ids = np.arange(1000, dtype="int32")
    data = RandomWindows(ids, sequence_length=16, batch_size=4, steps=3, seed=0)
    assert len(data) == 3
    x, y = data[1]
    assert x["token_ids"].shape == (4, 16) and y.shape == (4, 16)
    np.testing.assert_array_equal(y, x["token_ids"] + 1)
    assert x["padding_mask"].all()
    before = data.offsets.copy()
    data.on_epoch_end()
    assert not np.array_equal(before, data.offsets)


def test_consecutive_windows_cover_the_split_once():
    x, y = consecutive_windows(np.arange(50, dtype="int32"), 8)
    assert x["token_ids"].shape == (6, 8)
    np.testing.assert_array_equal(x["token_ids"].ravel(), np.arange(48))
    np.testing.assert_array_equal(y.ravel(), np.arange(1, 49))
    with pytest.raises(ValueError, match="fewer than"):
        consecutive_windows(np.arange(5), 8)
