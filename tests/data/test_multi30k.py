"""zoo.data.multi30k: local folders (plain and gzipped), the get_file
default with the network mocked, fast offline errors, and the generated
pairs."""

import gzip
import time

import keras
import pytest

from zoo.data import multi30k
from zoo.data.download import DataNotFoundError
from zoo.data.multi30k import load_multi30k, make_synthetic_pairs

GERMAN = ["Zwei Hunde spielen im Schnee.", "Ein Mädchen läuft über die Straße."]
ENGLISH = ["Two dogs play in the snow.", "A girl runs across the street."]


def write_split(folder, stem, german=GERMAN, english=ENGLISH, gz=False):
    for language, lines in (("de", german), ("en", english)):
        text = "\n".join(lines) + "\n"
        path = folder / f"{stem}.{language}"
        if gz:
            with gzip.open(f"{path}.gz", "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")


def test_local_folder_with_train_val_and_test(tmp_path):
    write_split(tmp_path, "train")
    write_split(tmp_path, "val", gz=True)
    write_split(tmp_path, "test_2016_flickr")
    splits = load_multi30k(str(tmp_path))
    assert set(splits) == {"train", "validation", "test"}
    assert splits["train"] == (GERMAN, ENGLISH)
    assert splits["validation"][0][1] == "Ein Mädchen läuft über die Straße."


def test_missing_or_misaligned_files_are_clear_errors(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_multi30k(str(tmp_path / "nowhere"))
    write_split(tmp_path, "train")
    with pytest.raises(DataNotFoundError, match="no val.de and val.en"):
        load_multi30k(str(tmp_path))
    write_split(tmp_path, "val", english=ENGLISH[:1])
    with pytest.raises(DataNotFoundError, match="line-aligned"):
        load_multi30k(str(tmp_path))
    write_split(
        tmp_path,
        "val",
        german=[GERMAN[0], " ", GERMAN[1]],
        english=[ENGLISH[0], "A cat.", ENGLISH[1]],
    )
    with pytest.raises(DataNotFoundError, match="val.de: line 2 is empty"):
        load_multi30k(str(tmp_path))


@pytest.mark.one_backend
def test_a_sentence_file_that_is_not_utf8_is_named_with_the_offset(
    tmp_path,
):
    write_split(tmp_path, "train")
    write_split(tmp_path, "val", gz=True)
    (tmp_path / "train.en").write_bytes("Two dogs.\nA café.\n".encode("cp1252"))
    with pytest.raises(
        DataNotFoundError, match=r"train.en is not valid UTF-8: byte offset 15 "
    ):
        load_multi30k(str(tmp_path))
    write_split(tmp_path, "train")
    with gzip.open(tmp_path / "val.de.gz", "wb") as f:
        f.write(b"\xff\n\xff\n")
    with pytest.raises(
        DataNotFoundError,
        match=r"val.de.gz \(decompressed\) is not valid "
        "UTF-8: byte offset 0",
    ):
        load_multi30k(str(tmp_path))


def test_default_downloads_every_split_with_get_file(tmp_path, monkeypatch):
    write_split(tmp_path, "train", gz=True)
    write_split(tmp_path, "val", gz=True)
    write_split(tmp_path, "test_2016_flickr", gz=True)
    calls = []

    def fake_get_file(fname, origin, cache_subdir):
        calls.append(origin)
        return str(tmp_path / fname)

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(multi30k, "check_reachable", lambda *a, **k: None)
    monkeypatch.setattr(keras.utils, "get_file", fake_get_file)
    splits = load_multi30k()
    assert splits["test"] == (GERMAN, ENGLISH)
    assert len(calls) == 6 and all(
        c.startswith(multi30k.MULTI30K_URL) for c in calls
    )


def test_no_network_is_one_clear_error_within_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(
        keras.utils, "get_file", lambda *a, **k: pytest.fail("no download")
    )
    start = time.perf_counter()
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        load_multi30k(url="https://unreachable.invalid/multi30k/")
    assert time.perf_counter() - start < 30


def test_generated_pairs_are_seeded_and_have_umlauts():
    german, english = make_synthetic_pairs(200, seed=3)
    assert len(german) == len(english) == 200
    assert (german, english) == make_synthetic_pairs(200, seed=3)
    assert any("ß" in g or "ä" in g or "ü" in g for g in german)
    assert all(e[0].isupper() and e.endswith(".") for e in english)
