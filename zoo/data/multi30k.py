"""Multi30k (Elliott et al., 2016), task 1: German-English image captions,
one sentence per line, the two languages line-aligned.

Two sources give the same result, `{split: (german, english)}` with lists
of strings:

* a local folder with `train.{de,en}`, `val.{de,en}` and, when present,
  `test_2016_flickr.{de,en}` or `test.{de,en}` (plain or `.gz`), given
  with `data_dir`;
* the dataset's public repository, downloaded with `keras.utils.get_file`
  (the default), after a connection check that fails in seconds without a
  network.

`make_synthetic_pairs` generates German-English pairs for smoke runs and
tests: a small dictionary and word-order rules, learnable in seconds.
"""

import os

import keras
import numpy as np

from zoo.data.download import DataNotFoundError, check_reachable
from zoo.data.files import read_utf8

MULTI30K_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
)
SPLIT_FILES = {
    "train": ("train",),
    "validation": ("val",),
    "test": ("test_2016_flickr", "test"),
}


def _read_lines(path):
    lines = read_utf8(path).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()  # the file's last newline
    return lines


def _find(folder, stem, language):
    for name in (f"{stem}.{language}", f"{stem}.{language}.gz"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def read_pairs(german_path, english_path):
    """Line-aligned `(german, english)` lists; an error when the files do
    not have as many lines, hold an empty sentence, or are not UTF-8 (the
    error names the file and the byte offset)."""
    german, english = _read_lines(german_path), _read_lines(english_path)
    if len(german) != len(english):
        raise DataNotFoundError(
            f"{german_path} has {len(german)} lines but {english_path} has "
            f"{len(english)}: the files must be line-aligned."
        )
    if not german:
        raise DataNotFoundError(f"{german_path} is empty.")
    for path, lines in ((german_path, german), (english_path, english)):
        blank = next(
            (i for i, line in enumerate(lines) if not line.strip()), None
        )
        if blank is not None:
            raise DataNotFoundError(
                f"{path}: line {blank + 1} is empty; every line must hold a "
                "sentence (its translation is on the same line of the other "
                "file)."
            )
    return german, english


def load_multi30k(data_dir=None, url=MULTI30K_URL, cache_subdir="multi30k"):
    """Multi30k de-en as `{"train", "validation"[, "test"]}` -> `(german,
    english)` lists of sentences.

    Args:
        data_dir: a folder with `train.{de,en}` and `val.{de,en}` (and
            optionally `test_2016_flickr.{de,en}` or `test.{de,en}`), plain
            or gzipped. When None, the files are downloaded from `url`.
        url: the folder of the dataset's raw files.
        cache_subdir: where `keras.utils.get_file` keeps them.

    Raises:
        DataNotFoundError: a missing folder or file, misaligned files, or
            no network; the message names `--data-dir`.
    """
    if data_dir is not None:
        if not os.path.isdir(data_dir):
            raise DataNotFoundError(
                f"--data-dir {data_dir!r} does not exist. Point it at a "
                "folder with train.de, train.en, val.de and val.en."
            )
        splits = {}
        for split, stems in SPLIT_FILES.items():
            for stem in stems:
                de, en = (
                    _find(data_dir, stem, "de"),
                    _find(data_dir, stem, "en"),
                )
                if de and en:
                    splits[split] = read_pairs(de, en)
                    break
            if split != "test" and split not in splits:
                raise DataNotFoundError(
                    f"{data_dir} has no {stems[0]}.de and {stems[0]}.en "
                    "(plain or .gz)."
                )
        return splits
    cached = os.path.join(os.path.expanduser("~"), ".keras", cache_subdir)
    if not os.path.isfile(os.path.join(cached, "val.en.gz")):
        check_reachable(url, "Multi30k", "--data-dir DIR")
    splits = {}
    for split, stem in (
        ("train", "train"),
        ("validation", "val"),
        ("test", "test_2016_flickr"),
    ):
        paths = []
        for language in ("de", "en"):
            name = f"{stem}.{language}.gz"
            try:
                paths.append(
                    keras.utils.get_file(
                        name, origin=url + name, cache_subdir=cache_subdir
                    )
                )
            except Exception as error:  # network errors come in many types
                raise DataNotFoundError(
                    f"could not download Multi30k's {name} from {url} "
                    f"({type(error).__name__}). Pass --data-dir DIR with "
                    "local copies."
                ) from None
        splits[split] = read_pairs(*paths)
    return splits


_NOUNS = {
    "Hund": "dog",
    "Katze": "cat",
    "Mann": "man",
    "Frau": "woman",
    "Kind": "child",
    "Ball": "ball",
    "Auto": "car",
    "Pferd": "horse",
}
_VERBS = {
    "spielt": "plays",
    "läuft": "runs",
    "sitzt": "sits",
    "springt": "jumps",
    "schläft": "sleeps",
    "isst": "eats",
}
_PLACES = {
    "im Schnee": "in the snow",
    "am Strand": "on the beach",
    "im Park": "in the park",
    "auf der Straße": "on the street",
    "im Wasser": "in the water",
    "vor dem Haus": "in front of the house",
}
_ADJECTIVES = {
    "kleine": "little",
    "große": "big",
    "weiße": "white",
    "schwarze": "black",
    "junge": "young",
    "müde": "tired",
}


def make_synthetic_pairs(count, seed=0):
    """`count` generated `(german, english)` caption pairs ("Ein kleine
    Hund spielt im Schnee." / "A little dog plays in the snow."), with
    umlauts and ß, for smoke runs and tests.

    Returns:
        `(german, english)` lists of strings.
    """
    rng = np.random.default_rng(seed)
    german, english = [], []
    nouns, verbs = list(_NOUNS), list(_VERBS)
    places, adjectives = list(_PLACES), list(_ADJECTIVES)
    for _ in range(count):
        noun, verb = rng.choice(nouns), rng.choice(verbs)
        place = rng.choice(places)
        if rng.random() < 0.5:
            adjective = rng.choice(adjectives)
            de = f"ein {adjective} {noun} {verb} {place}."
            en = (
                f"a {_ADJECTIVES[adjective]} {_NOUNS[noun]} "
                f"{_VERBS[verb]} {_PLACES[place]}."
            )
        else:
            de = f"der {noun} {verb} {place}."
            en = f"the {_NOUNS[noun]} {_VERBS[verb]} {_PLACES[place]}."
        german.append(de[0].upper() + de[1:])
        english.append(en[0].upper() + en[1:])
    return german, english
