"""zoo.data.flickr8k: the official layout (zips and extracted folders),
resizing, the .npz cache, every one-line error, and the get_file default
with the network mocked."""

import doctest
import os
import time
import zipfile

import keras
import numpy as np
import pytest

from zoo._tensorflow import tf
from zoo.data import flickr8k
from zoo.data.download import DataNotFoundError
from zoo.data.flickr8k import load_flickr8k, normalize_caption


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Override conftest's per-test Keras reset: nothing here builds a
    model."""
    yield


# name -> (height, width, channels, colour): one grey JPEG, varying sizes.
IMAGES = {
    "1000_aa.jpg": (30, 40, 3, (200, 40, 40)),
    "1001_bb.jpg": (50, 20, 3, (40, 200, 40)),
    "1002_cc.jpg": (24, 24, 1, (128,)),
    "1003_dd.jpg": (17, 33, 3, (40, 40, 200)),
    "1004_ee.jpg": (40, 40, 3, (220, 220, 60)),
    "1005_ff.jpg": (21, 29, 3, (90, 30, 160)),
}
TRAIN, DEV, TEST = list(IMAGES)[:3], list(IMAGES)[3:5], list(IMAGES)[5:]


def caption_lines(name):
    return [
        f"{name}#{k}\tA dog's toy number {k} , red-and-white ."
        for k in range(5)
    ]


def jpeg(height, width, channels, colour):
    pixels = np.broadcast_to(
        np.array(colour, np.uint8), (height, width, channels)
    )
    return tf.io.encode_jpeg(np.ascontiguousarray(pixels), quality=95).numpy()


def write_flickr8k(
    folder,
    zip_images=True,
    zip_text=False,
    with_test=False,
    text_in_root=False,
    token_lines=None,
    lists=None,
    files=None,
):
    """A tiny copy of the official layout in `folder`. `files` replaces
    or (with None values) drops image files; `lists` replaces split lists
    (a None value drops that list)."""
    folder.mkdir(parents=True, exist_ok=True)
    images = {
        f"{flickr8k.IMAGE_FOLDER}/{name}": jpeg(*shape)
        for name, shape in IMAGES.items()
    }
    for name, data in (files or {}).items():
        key = f"{flickr8k.IMAGE_FOLDER}/{name}"
        if data is None:
            images.pop(key)
        else:
            images[key] = data
    if zip_images:
        with zipfile.ZipFile(folder / flickr8k.IMAGE_ARCHIVE, "w") as z:
            for member, data in images.items():
                z.writestr(member, data)
            z.writestr("__MACOSX/Flicker8k_Dataset/._1000_aa.jpg", b"junk")
    else:
        for member, data in images.items():
            (folder / member).parent.mkdir(exist_ok=True)
            (folder / member).write_bytes(data)
    if token_lines is None:
        token_lines = [line for name in IMAGES for line in caption_lines(name)]
    text = {
        flickr8k.TOKEN_FILE: ("\n".join(token_lines) + "\n").encode()
        if isinstance(token_lines, list)
        else token_lines
    }
    split_lists = {"train": TRAIN, "dev": DEV}
    if with_test:
        split_lists["test"] = TEST
    split_lists.update(lists or {})
    for split, names in split_lists.items():
        if names is not None:
            data = ("\n".join(names) + "\n").encode()
            text[flickr8k.SPLIT_FILES[split]] = data
    prefix = "" if text_in_root else flickr8k.TEXT_FOLDER + "/"
    if zip_text:
        with zipfile.ZipFile(folder / flickr8k.TEXT_ARCHIVE, "w") as z:
            for name, data in text.items():
                z.writestr(prefix + name, data)
    else:
        (folder / prefix).mkdir(exist_ok=True)
        for name, data in text.items():
            (folder / prefix / name).write_bytes(data)
    return folder


def test_normalize_caption():
    assert normalize_caption(
        "A child in a pink dress is climbing up a set of stairs in an entry "
        "way ."
    ) == (
        "a child in a pink dress is climbing up a set of stairs in an entry way"
    )
    assert normalize_caption(
        "  Two  dogs' toys , T-shirt ; 3 men\u2019s hats!"
    ) == ("two dogs toys t shirt 3 men's hats")
    assert normalize_caption("...") == ""


def test_loads_the_official_zips_and_resizes_every_size(tmp_path):
    splits = load_flickr8k(str(write_flickr8k(tmp_path)), image_size=(16, 24))
    assert list(splits) == ["train", "dev"]
    train = splits["train"]
    assert train.names == TRAIN and len(train) == 3
    assert train.images.shape == (3, 16, 24, 3)
    assert train.images.dtype == np.uint8
    for name, image in zip(train.names, train.images):
        colour = np.array(IMAGES[name][3], float)
        # a flat colour stays flat through JPEG and the resize
        assert np.abs(image.astype(float) - colour).max() <= 8
    grey = train.images[TRAIN.index("1002_cc.jpg")]
    assert np.array_equal(grey[..., 0], grey[..., 1])
    assert np.array_equal(grey[..., 0], grey[..., 2])
    assert all(len(c) == 5 for c in train.captions)
    assert train.captions[0][2] == "a dog's toy number 2 red and white"
    assert train.raw_captions[0][2] == "A dog's toy number 2 , red-and-white ."
    assert splits["dev"].images.shape == (2, 16, 24, 3)


def test_extracted_folder_text_zip_and_the_test_split(tmp_path):
    folder = write_flickr8k(
        tmp_path, zip_images=False, zip_text=True, with_test=True
    )
    splits = load_flickr8k(str(folder), image_size=(8, 8))
    assert list(splits) == ["train", "dev", "test"]
    assert splits["test"].names == TEST
    only = load_flickr8k(str(folder), image_size=(8, 8), splits=["dev"])
    assert list(only) == ["dev"]
    np.testing.assert_array_equal(only["dev"].images, splits["dev"].images)


def test_text_files_in_the_folder_itself(tmp_path):
    folder = write_flickr8k(tmp_path, text_in_root=True)
    assert list(load_flickr8k(str(folder), image_size=(8, 8), limit=1)) == [
        "train",
        "dev",
    ]


def test_original_sizes_and_limit(tmp_path):
    folder = str(write_flickr8k(tmp_path))
    splits = load_flickr8k(folder, image_size=None)
    shapes = [image.shape for image in splits["train"].images]
    assert shapes == [IMAGES[n][:2] + (3,) for n in TRAIN]
    assert all(image.dtype == np.uint8 for image in splits["train"].images)
    small = load_flickr8k(folder, image_size=(30, 40), limit=2)
    assert small["train"].names == TRAIN[:2]
    assert small["train"].images.shape == (2, 30, 40, 3)
    assert len(small["dev"].captions) == 2
    # an image already at the size is not resampled
    np.testing.assert_array_equal(
        small["train"].images[0], splits["train"].images[0]
    )


def test_cache_is_written_once_reused_and_rebuilt_when_damaged(
    tmp_path, monkeypatch
):
    folder = str(write_flickr8k(tmp_path / "data"))
    cache = tmp_path / "cache"
    first = load_flickr8k(folder, image_size=(16, 16), cache_dir=str(cache))
    files = sorted(os.listdir(cache))
    assert len(files) == 2 and all(f.endswith(".npz") for f in files)
    decode = flickr8k.decode_image
    monkeypatch.setattr(
        flickr8k, "decode_image", lambda *a, **k: pytest.fail("decoded again")
    )
    second = load_flickr8k(folder, image_size=(16, 16), cache_dir=str(cache))
    np.testing.assert_array_equal(first["train"].images, second["train"].images)
    assert second["train"].captions == first["train"].captions
    monkeypatch.setattr(flickr8k, "decode_image", decode)
    train_file = next(cache / f for f in files if "-train-" in f)
    train_file.write_bytes(train_file.read_bytes()[:100])
    with pytest.warns(UserWarning, match="damaged cache file"):
        third = load_flickr8k(folder, image_size=(16, 16), cache_dir=str(cache))
    np.testing.assert_array_equal(first["train"].images, third["train"].images)
    assert sorted(os.listdir(cache)) == files  # rebuilt, no temporary left
    with np.load(train_file) as data:
        assert data["images"].shape == (3, 16, 16, 3)
    # another size or limit is another file
    load_flickr8k(folder, image_size=(8, 8), cache_dir=str(cache), limit=1)
    assert len(os.listdir(cache)) == 4


def test_missing_folder_files_and_splits_are_one_line_errors(tmp_path):
    with pytest.raises(DataNotFoundError, match="--data-dir .* does not exist"):
        load_flickr8k(str(tmp_path / "nowhere"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataNotFoundError, match="has no Flickr8k.token.txt"):
        load_flickr8k(str(empty))
    folder = write_flickr8k(tmp_path / "a")
    with pytest.raises(
        DataNotFoundError, match=r"Flickr_8k.testImages.txt does not exist"
    ):
        load_flickr8k(str(folder), splits=["test"])
    folder = write_flickr8k(tmp_path / "b", lists={"train": None, "dev": None})
    with pytest.raises(DataNotFoundError, match="has no split list"):
        load_flickr8k(str(folder))
    os.remove(tmp_path / "b" / flickr8k.IMAGE_ARCHIVE)
    with pytest.raises(DataNotFoundError, match="neither Flicker8k_Dataset/"):
        load_flickr8k(str(tmp_path / "b"))
    with pytest.raises(ValueError, match="unknown split 'val'"):
        load_flickr8k(str(folder), splits=["val"])
    with pytest.raises(ValueError, match="image_size"):
        load_flickr8k(str(folder), image_size=(0, 8))
    with pytest.raises(ValueError, match="limit"):
        load_flickr8k(str(folder), limit=0)


@pytest.mark.parametrize("zip_images", [True, False], ids=["zip", "folder"])
def test_a_missing_image_is_named(tmp_path, zip_images):
    folder = write_flickr8k(
        tmp_path, zip_images=zip_images, files={"1001_bb.jpg": None}
    )
    with pytest.raises(
        DataNotFoundError,
        match=r"1001_bb.jpg is listed in .*trainImages.txt but "
        r".*Flicker8k_Dataset/1001_bb.jpg does not exist",
    ):
        load_flickr8k(str(folder))


@pytest.mark.parametrize("zip_images", [True, False], ids=["zip", "folder"])
def test_a_corrupt_jpeg_is_named(tmp_path, zip_images):
    truncated = jpeg(*IMAGES["1004_ee.jpg"])[:120]
    folder = write_flickr8k(
        tmp_path, zip_images=zip_images, files={"1004_ee.jpg": truncated}
    )
    with pytest.raises(
        DataNotFoundError,
        match=r"Flicker8k_Dataset/1004_ee.jpg is not a "
        r"readable JPEG \(.+\)\.$",
    ) as error:
        load_flickr8k(str(folder))
    assert "\n" not in str(error.value) and "{{" not in str(error.value)


def test_captions_and_lists_errors(tmp_path):
    lines = [
        line
        for name in IMAGES
        if name != "1003_dd.jpg"
        for line in caption_lines(name)
    ]
    folder = write_flickr8k(tmp_path / "a", token_lines=lines)
    with pytest.raises(
        DataNotFoundError,
        match=r"1003_dd.jpg is listed in .*devImages.txt but "
        r"has no captions in .*Flickr8k.token.txt",
    ):
        load_flickr8k(str(folder))
    folder = write_flickr8k(tmp_path / "b", lists={"dev": ["", " "]})
    with pytest.raises(
        DataNotFoundError, match="devImages.txt lists no images"
    ):
        load_flickr8k(str(folder))
    good = "\n".join(caption_lines("1000_aa.jpg")).encode()
    folder = write_flickr8k(
        tmp_path / "c", token_lines=good + b"\n1001_bb.jpg#0\tA caf\xe9\n"
    )
    offset = len(good) + len("\n1001_bb.jpg#0\tA caf")
    with pytest.raises(
        DataNotFoundError,
        match=rf"Flickr8k.token.txt is not valid UTF-8: byte "
        rf"offset {offset}\b",
    ):
        load_flickr8k(str(folder))
    folder = write_flickr8k(tmp_path / "d", token_lines=["1000_aa.jpg no tab"])
    with pytest.raises(DataNotFoundError, match="line 1 is not"):
        load_flickr8k(str(folder))


def _keras_like_get_file(archives, calls):
    """Serves the fixture archives as keras.utils.get_file(extract=True)
    does: extracted to <cache_dir>/<cache_subdir>/<stem>_extracted."""

    def get_file(fname, origin, cache_subdir, cache_dir, extract):
        calls.append(origin)
        assert extract and origin == flickr8k.FLICKR8K_URL + fname
        target = os.path.join(
            cache_dir, cache_subdir, fname[: fname.find(".")] + "_extracted"
        )
        with zipfile.ZipFile(archives / fname) as z:
            z.extractall(target)
        return target

    return get_file


def test_default_downloads_and_extracts_once(tmp_path, monkeypatch):
    archives = write_flickr8k(
        tmp_path / "archives", zip_text=True, text_in_root=True
    )
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    checks, calls = [], []
    monkeypatch.setattr(
        flickr8k, "check_reachable", lambda *a: checks.append(a)
    )
    monkeypatch.setattr(
        keras.utils, "get_file", _keras_like_get_file(archives, calls)
    )
    splits = load_flickr8k(image_size=(8, 8))
    assert splits["dev"].names == DEV and splits["train"].images.shape[0] == 3
    assert len(checks) == 1 and checks[0][1:] == ("Flickr8k", "--data-dir DIR")
    assert len(calls) == 2
    again = load_flickr8k(image_size=(8, 8), limit=1)  # cached: no network
    assert again["train"].names == TRAIN[:1]
    assert len(checks) == 1 and len(calls) == 2
    # archives downloaded but not extracted: get_file extracts, no check
    cache = tmp_path / "keras" / "flickr8k"
    for archive in (flickr8k.IMAGE_ARCHIVE, flickr8k.TEXT_ARCHIVE):
        os.remove(cache / f"{archive}.extracted")
        (cache / archive).write_bytes((archives / archive).read_bytes())
    assert load_flickr8k(image_size=(8, 8))["dev"].names == DEV
    assert len(checks) == 1 and len(calls) == 4


def test_no_network_is_one_clear_error_within_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(
        keras.utils, "get_file", lambda *a, **k: pytest.fail("no download")
    )
    start = time.perf_counter()
    with pytest.raises(
        DataNotFoundError, match="cannot download Flickr8k.*--data-dir"
    ):
        load_flickr8k(url="https://unreachable.invalid/flickr8k/")
    assert time.perf_counter() - start < 30


def test_a_failed_download_names_the_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(flickr8k, "check_reachable", lambda *a: None)

    def broken(*args, **kwargs):
        raise OSError("connection reset")

    monkeypatch.setattr(keras.utils, "get_file", broken)
    with pytest.raises(
        DataNotFoundError,
        match="could not download Flickr8k's Flickr8k_Dataset.zip .*--data-dir",
    ):
        load_flickr8k()


def test_docstring_examples():
    result = doctest.testmod(flickr8k, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_a_broken_extraction_is_an_error_and_not_remembered(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(flickr8k, "check_reachable", lambda *a: None)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(keras.utils, "get_file", lambda *a, **k: str(empty))
    with pytest.raises(
        DataNotFoundError, match="did not extract .* delete .*--data-dir"
    ):
        load_flickr8k()
    assert not list((tmp_path / "keras").rglob("*.extracted"))
