"""Flickr8k (Hodosh, Young and Hockenmaier, 2013): 8,000 photographs with
five English captions each, for image captioning (Show, Attend and Tell).

The official download layout, read as it is:

* `Flickr8k_Dataset.zip` holding `Flicker8k_Dataset/<name>.jpg` (the
  official folder name, typo included), or that folder already extracted;
* `Flickr8k_text/` or `Flickr8k_text.zip` (or its files directly in the
  folder, as the official text archive extracts) with `Flickr8k.token.txt`
  (lines `<name>.jpg#<k>` TAB caption, five per image) and the split lists
  `Flickr_8k.{train,dev,test}Images.txt` (one file name per line).

`load_flickr8k(data_dir)` reads a local copy; without `data_dir` it
downloads the public release archives with `keras.utils.get_file`, after a
connection check that fails in seconds without a network. Images are
decoded with TensorFlow and resized (bilinear, antialiased); decoding the
8,000 images takes tens of seconds, so `cache_dir` keeps the decoded arrays
as `.npz` files for the next run.

Example:

>>> splits = load_flickr8k("data/flickr8k", cache_dir="cache")  # doctest: +SKIP
>>> train = splits["train"]  # doctest: +SKIP
>>> train.images.shape, train.captions[0][0]  # doctest: +SKIP
((6000, 224, 224, 3), 'a black dog is running after a white dog in the snow')
"""

import dataclasses
import hashlib
import numbers
import os
import re
import warnings
import zipfile

import numpy as np

from zoo._tensorflow import tf
from zoo.data.download import DataNotFoundError, check_reachable
from zoo.data.files import decode_utf8
from zoo.saving import atomic_path

FLICKR8K_URL = (
    "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/"
)
IMAGE_ARCHIVE = "Flickr8k_Dataset.zip"
TEXT_ARCHIVE = "Flickr8k_text.zip"
IMAGE_FOLDER = "Flicker8k_Dataset"  # sic: the official name
TEXT_FOLDER = "Flickr8k_text"
TOKEN_FILE = "Flickr8k.token.txt"
SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "dev": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


@dataclasses.dataclass
class CaptionSplit:
    """One split of a captioning dataset.

    Attributes:
        names: the image file names, in the split list's order.
        images: uint8 `(N, height, width, 3)`, or a list of N arrays of
            their own sizes when loaded with `image_size=None`.
        captions: N lists of normalised captions (`normalize_caption`).
        raw_captions: the same captions as written in the token file.
    """

    names: list
    images: object
    captions: list
    raw_captions: list

    def __len__(self):
        return len(self.names)


def normalize_caption(text):
    """Lowercase words (letters and digits, apostrophes inside a word)
    joined by single spaces; punctuation is dropped, and a hyphen or slash
    separates words ("t-shirt" -> "t shirt").

    Example:

    >>> normalize_caption("A dog's toy , red-and-white .")
    "a dog's toy red and white"
    """
    text = str(text).replace("\u2019", "'").lower()
    return " ".join(_WORD.findall(text))


# --------------------------------------------------------------------------
# reading the files


def parse_tokens(data, label=TOKEN_FILE):
    """`{name: [caption, ...]}` from the bytes of `Flickr8k.token.txt`
    (captions in file order, as written).

    Raises:
        DataNotFoundError: invalid UTF-8 (with the byte offset) or a line
            not of the form `<name>#<k>` TAB caption.
    """
    captions = {}
    for number, line in enumerate(decode_utf8(data, label).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        key, tab, caption = line.partition("\t")
        name, hash_, _ = key.partition("#")
        if not tab or not hash_ or not name.strip():
            raise DataNotFoundError(
                f"{label}: line {number} is not '<name>.jpg#<k> TAB caption' "
                f"({line[:60]!r})."
            )
        captions.setdefault(name.strip(), []).append(caption)
    return captions


def _parse_list(data, label):
    names = [line.strip() for line in decode_utf8(data, label).split("\n")]
    names = [name for name in names if name]
    if not names:
        raise DataNotFoundError(f"{label} lists no images.")
    return names


class _Files:
    """Named files in a folder or in a zip (under an optional prefix)."""

    def __init__(self, path, prefix=""):
        self.path, self.prefix = path, prefix
        self.zip = None
        if path.endswith(".zip"):
            try:
                self.zip = zipfile.ZipFile(path)
                members = self.zip.namelist()
            except (OSError, zipfile.BadZipFile) as error:
                raise DataNotFoundError(
                    f"{path} is not a readable zip file "
                    f"({type(error).__name__})."
                ) from None
            self.members = {
                m[len(prefix) :]
                for m in members
                if m.startswith(prefix) and not m.endswith("/")
            }

    def label(self, name):
        if self.zip is not None:
            return f"{self.path}: {self.prefix}{name}"
        return os.path.join(self.path, name)

    def has(self, name):
        if self.zip is not None:
            return name in self.members
        return os.path.isfile(os.path.join(self.path, name))

    def read(self, name):
        try:
            if self.zip is not None:
                return self.zip.read(self.prefix + name)
            with open(os.path.join(self.path, name), "rb") as f:
                return f.read()
        except (OSError, zipfile.BadZipFile) as error:
            raise DataNotFoundError(
                f"cannot read {self.label(name)} "
                f"({type(error).__name__}: {error})."
            ) from None

    def close(self):
        if self.zip is not None:
            self.zip.close()

    def fingerprint(self):
        stat = os.stat(self.path)
        return f"{os.path.abspath(self.path)}|{stat.st_size}|{stat.st_mtime_ns}"


def _find_images(folder):
    extracted = os.path.join(folder, IMAGE_FOLDER)
    if os.path.isdir(extracted):
        return _Files(extracted)
    archive = os.path.join(folder, IMAGE_ARCHIVE)
    if os.path.isfile(archive):
        return _Files(archive, IMAGE_FOLDER + "/")
    raise DataNotFoundError(
        f"{folder} has neither {IMAGE_FOLDER}/ nor {IMAGE_ARCHIVE} (the "
        "Flickr8k images)."
    )


def _find_text(folder):
    candidates = [_Files(os.path.join(folder, TEXT_FOLDER))]
    candidates.append(_Files(folder))
    archive = os.path.join(folder, TEXT_ARCHIVE)
    if os.path.isfile(archive):
        for prefix in (TEXT_FOLDER + "/", ""):
            candidates.append(_Files(archive, prefix))
    found = next((f for f in candidates if f.has(TOKEN_FILE)), None)
    for files in candidates:
        if files is not found:
            files.close()
    if found is not None:
        return found
    raise DataNotFoundError(
        f"{folder} has no {TOKEN_FILE} (looked in {TEXT_FOLDER}/, "
        f"{TEXT_ARCHIVE} and the folder itself)."
    )


# --------------------------------------------------------------------------
# images

_resize_function = None


def _resize(image, size):
    """Bilinear, antialiased resize of a uint8 image, rounded and clipped
    back to uint8 (a traced function: one trace for every size)."""
    global _resize_function
    if _resize_function is None:

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, 3], tf.uint8),
                tf.TensorSpec([2], tf.int32),
            ]
        )
        def resize(image, size):
            resized = tf.image.resize(
                image, size, method="bilinear", antialias=True
            )
            return tf.cast(
                tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8
            )

        _resize_function = resize
    return _resize_function(image, tf.constant(size, tf.int32))


def decode_image(data, label, image_size=None):
    """A uint8 `(height, width, 3)` array from JPEG bytes (grey images get
    three channels), resized to `image_size` when given.

    Raises:
        DataNotFoundError: bytes that are not a readable JPEG, naming
            `label`.
    """
    try:
        image = tf.io.decode_jpeg(data, channels=3)
    except tf.errors.OpError as error:
        reason = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\]", "", error.message)
        raise DataNotFoundError(
            f"{label} is not a readable JPEG ({reason.strip()})."
        ) from None
    if image_size is not None and tuple(image.shape[:2]) != image_size:
        image = _resize(image, image_size)
    return image.numpy()


def _decode_all(files, names, image_size):
    if image_size is None:
        return [decode_image(files.read(n), files.label(n)) for n in names]
    images = np.empty((len(names),) + image_size + (3,), np.uint8)
    for i, name in enumerate(names):
        images[i] = decode_image(
            files.read(name), files.label(name), image_size
        )
    return images


def _cache_path(cache_dir, split, image_size, limit, files, names):
    digest = hashlib.sha1(
        "\n".join([files.fingerprint()] + names).encode("utf-8")
    ).hexdigest()[:10]
    first = f"-first{limit}" if limit else ""
    height, width = image_size
    return os.path.join(
        cache_dir, f"flickr8k-{split}-{height}x{width}{first}-{digest}.npz"
    )


def _read_cache(path, names, image_size):
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            cached_names, images = data["names"].tolist(), data["images"]
    except Exception as error:  # truncated, bad CRC, not a zip, ...
        warnings.warn(
            f"ignoring the damaged cache file {path} "
            f"({type(error).__name__}); rebuilding it.",
            stacklevel=4,
        )
        return None
    if (
        cached_names != names
        or images.dtype != np.uint8
        or images.shape != (len(names),) + image_size + (3,)
    ):
        warnings.warn(
            f"ignoring the cache file {path}: it holds other "
            "images; rebuilding it.",
            stacklevel=4,
        )
        return None
    return images


def _write_cache(path, names, images):
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, names=np.array(names), images=images)
    except OSError as error:
        warnings.warn(
            f"could not write the cache file {path} ({error}); "
            "continuing without it.",
            stacklevel=4,
        )
        try:
            os.remove(tmp)
        except OSError:
            pass


def _more(names):
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _check_size(image_size):
    if image_size is None:
        return None
    try:
        height, width = (int(n) for n in image_size)
    except (TypeError, ValueError):
        height = width = 0
    if height < 1 or width < 1:
        raise ValueError(
            f"image_size must be (height, width) with positive "
            f"integers, or None; got {image_size!r}."
        )
    return height, width


# --------------------------------------------------------------------------
# downloads


def _keras_home():
    return os.environ.get("KERAS_HOME") or os.path.join(
        os.path.expanduser("~"), ".keras"
    )


def _holds(archive, folder):
    """Whether `folder` holds what `archive` extracts to."""
    if archive == IMAGE_ARCHIVE:
        return os.path.isdir(os.path.join(folder, IMAGE_FOLDER))
    return any(
        os.path.isfile(os.path.join(folder, sub, TOKEN_FILE))
        for sub in ("", TEXT_FOLDER)
    )


def download_flickr8k(url=FLICKR8K_URL, cache_subdir="flickr8k"):
    """Downloads and extracts the public Flickr8k archives into Keras'
    cache (once; later calls reuse the extracted folders).

    Args:
        url: the folder holding `Flickr8k_Dataset.zip` and
            `Flickr8k_text.zip`.
        cache_subdir: the folder under Keras' cache (`~/.keras`, or
            `$KERAS_HOME`).

    Returns:
        `(image_folder, text_folder)`: the extracted archives, to read with
        `load_flickr8k`'s local layout.

    Raises:
        DataNotFoundError: no network or a failed download; the message
            names `--data-dir`.
    """
    import keras

    home = _keras_home()
    folder = os.path.join(home, cache_subdir)
    done = {}  # archive -> its extracted folder, from an earlier call
    for archive in (IMAGE_ARCHIVE, TEXT_ARCHIVE):
        marker = os.path.join(folder, f"{archive}.extracted")
        try:
            with open(marker, encoding="utf-8") as f:
                extracted = f.read().strip()
        except OSError:
            continue
        if _holds(archive, extracted):
            done[archive] = extracted
    missing = [
        a
        for a in (IMAGE_ARCHIVE, TEXT_ARCHIVE)
        if a not in done and not os.path.isfile(os.path.join(folder, a))
    ]
    if missing:
        check_reachable(url + missing[0], "Flickr8k", "--data-dir DIR")
    paths = []
    for archive in (IMAGE_ARCHIVE, TEXT_ARCHIVE):
        if archive in done:
            paths.append(done[archive])
            continue
        try:
            extracted = keras.utils.get_file(
                archive,
                origin=url + archive,
                cache_subdir=cache_subdir,
                cache_dir=home,
                extract=True,
            )
        except Exception as error:  # network errors come in many types
            raise DataNotFoundError(
                f"could not download Flickr8k's {archive} from {url} "
                f"({type(error).__name__}). Pass --data-dir DIR with a local "
                "copy."
            ) from None
        if not _holds(archive, extracted):
            raise DataNotFoundError(
                f"the downloaded {archive} did not extract to what Flickr8k's "
                f"archive holds ({extracted}); delete {folder} to download "
                "it again, or pass --data-dir DIR with a local copy."
            )
        # get_file extracts again on every call (a gigabyte of images):
        # remember the folder, written last so that an interrupted
        # extraction is done again.
        marker = os.path.join(folder, f"{archive}.extracted")
        try:
            with (
                atomic_path(marker) as tmp,
                open(tmp, "w", encoding="utf-8") as f,
            ):
                f.write(extracted)
        except OSError:
            pass  # an unwritable cache: extract again next time
        paths.append(extracted)
    return tuple(paths)


# --------------------------------------------------------------------------
# the loader


def load_flickr8k(
    data_dir=None,
    image_size=(224, 224),
    splits=None,
    cache_dir=None,
    limit=None,
    url=FLICKR8K_URL,
):
    """Flickr8k as `{"train", "dev"[, "test"]}` -> `CaptionSplit`.

    Args:
        data_dir: a folder in the official layout: `Flickr8k_Dataset.zip`
            or the `Flicker8k_Dataset/` folder, and `Flickr8k_text/` or
            `Flickr8k_text.zip` (or its files in `data_dir` itself). When
            None, the public archives are downloaded from `url` into Keras'
            cache.
        image_size: `(height, width)` every image is resized to (bilinear,
            antialiased, aspect not kept), or None to keep each image's own
            size (then `images` is a list of arrays and nothing is cached).
        splits: the splits to load, from "train", "dev" and "test"; None
            loads those whose list file exists.
        cache_dir: a folder for the decoded images: each split is written
            once as `.npz` (keyed by split, size, `limit` and the source)
            and read back by later calls.
        limit: keep only the first `limit` images of each split (smoke
            runs).
        url: where the archives are downloaded from when `data_dir` is None.

    Returns:
        `{split: CaptionSplit}` in the order train, dev, test.

    Raises:
        DataNotFoundError: a missing folder, token file, split list or
            image; an unreadable JPEG; a listed image without captions; an
            empty list; a file that is not UTF-8. The message names the file.
        ValueError: a bad `image_size`, `splits` or `limit`.

    Example:

    >>> data = load_flickr8k("data/flickr8k", limit=8)  # doctest: +SKIP
    >>> data["dev"].images.shape, len(data["dev"].captions[0])  # doctest: +SKIP
    ((8, 224, 224, 3), 5)
    """
    image_size = _check_size(image_size)
    if limit is not None and (
        isinstance(limit, bool)
        or not isinstance(limit, numbers.Integral)
        or limit < 1
    ):
        raise ValueError(
            f"limit must be a positive integer or None; got {limit!r}."
        )
    if isinstance(splits, str):
        splits = [splits]
    if splits is not None:
        splits = list(splits)
        unknown = [s for s in splits if s not in SPLIT_FILES]
        if unknown:
            raise ValueError(
                f"unknown split {unknown[0]!r}; the splits are "
                f"{', '.join(SPLIT_FILES)}."
            )
        if not splits:
            raise ValueError("splits is empty; name at least one split.")
    if data_dir is None:
        image_folder, text_folder = download_flickr8k(url)
    else:
        if not os.path.isdir(data_dir):
            raise DataNotFoundError(
                f"--data-dir {data_dir!r} does not exist. Point it at a "
                f"folder with {IMAGE_ARCHIVE} (or {IMAGE_FOLDER}/) and "
                f"{TEXT_FOLDER}/."
            )
        image_folder = text_folder = data_dir
    text = _find_text(text_folder)
    images = None
    try:
        images = _find_images(image_folder)
        return _load_splits(text, images, splits, image_size, cache_dir, limit)
    finally:
        text.close()
        if images is not None:
            images.close()


def _load_splits(text, images, splits, image_size, cache_dir, limit):
    if splits is None:
        splits = [s for s, f in SPLIT_FILES.items() if text.has(f)]
        if not splits:
            raise DataNotFoundError(
                f"{text.label('')} has no split list "
                f"({', '.join(SPLIT_FILES.values())})."
            )
    for split in splits:
        if not text.has(SPLIT_FILES[split]):
            raise DataNotFoundError(
                f"{text.label(SPLIT_FILES[split])} does not exist (the "
                f"{split} split's list)."
            )
    token_label = text.label(TOKEN_FILE)
    captions = parse_tokens(text.read(TOKEN_FILE), token_label)
    result = {}
    for split, list_file in SPLIT_FILES.items():
        if split not in splits:
            continue
        list_label = text.label(list_file)
        names = _parse_list(text.read(list_file), list_label)
        no_captions = [n for n in names if not captions.get(n)]
        if no_captions:
            raise DataNotFoundError(
                f"{no_captions[0]}{_more(no_captions)} is listed in "
                f"{list_label} but has no captions in {token_label}."
            )
        absent = [n for n in names if not images.has(n)]
        if absent:
            raise DataNotFoundError(
                f"{absent[0]}{_more(absent)} is listed in {list_label} but "
                f"{images.label(absent[0])} does not exist."
            )
        if limit:
            names = names[: int(limit)]
        decoded = None
        if cache_dir is not None and image_size is not None:
            path = _cache_path(
                cache_dir, split, image_size, limit, images, names
            )
            decoded = _read_cache(path, names, image_size)
        if decoded is None:
            decoded = _decode_all(images, names, image_size)
            if cache_dir is not None and image_size is not None:
                _write_cache(path, names, decoded)
        raw = [list(captions[n]) for n in names]
        result[split] = CaptionSplit(
            names=names,
            images=decoded,
            captions=[[normalize_caption(c) for c in cs] for cs in raw],
            raw_captions=raw,
        )
    return result
