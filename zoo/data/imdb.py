"""IMDB Large Movie Review Dataset (Maas et al., 2011): loading and splitting.

Two sources give the same result, `{split: (texts, labels)}` with texts as a
NumPy array of Python strings and labels as int32 (1 = positive):

* a local copy in the official `aclImdb/` layout (`train/{pos,neg}/*.txt`,
  `test/{pos,neg}/*.txt`), given with `data_dir`;
* tensorflow-datasets' `imdb_reviews` (downloads on first use), the default.

A validation split is held out from train with a fixed seed, stratified by
label, so every source and every backend sees the same split.
"""

import os

import numpy as np

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/"


class DataNotFoundError(RuntimeError):
    """No source of the dataset could be read; the message says what was tried."""


def find_aclimdb_root(data_dir):
    """`data_dir` itself or `data_dir/aclImdb`, whichever has `train/pos`."""
    for candidate in (data_dir, os.path.join(data_dir, "aclImdb")):
        if os.path.isdir(os.path.join(candidate, "train", "pos")):
            return candidate
    raise DataNotFoundError(
        f"No IMDB data in {data_dir!r}: expected the aclImdb layout, "
        "train/pos/*.txt and train/neg/*.txt (optionally test/...), in that "
        f"directory or in {os.path.join(data_dir, 'aclImdb')!r}. "
        f"Download and unpack aclImdb_v1.tar.gz from {IMDB_URL}."
    )


def read_aclimdb_split(root, split):
    """Reads `root/split/{neg,pos}/*.txt` in sorted file order."""
    texts, labels = [], []
    for label, polarity in enumerate(("neg", "pos")):
        folder = os.path.join(root, split, polarity)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".txt"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    texts.append(f.read())
                labels.append(label)
    if not texts:
        raise DataNotFoundError(f"{os.path.join(root, split)} has no reviews.")
    return np.array(texts, dtype=object), np.array(labels, dtype="int32")


def load_aclimdb(data_dir):
    """{"train": ..., "test": ...} from a local aclImdb directory (test only
    when present)."""
    root = find_aclimdb_root(data_dir)
    splits = {"train": read_aclimdb_split(root, "train")}
    if os.path.isdir(os.path.join(root, "test", "pos")):
        splits["test"] = read_aclimdb_split(root, "test")
    return splits


def load_tfds(data_dir=None):
    """{"train": ..., "test": ...} from tensorflow-datasets' imdb_reviews."""
    import tensorflow_datasets as tfds

    splits = {}
    for split in ("train", "test"):
        dataset = tfds.load(
            "imdb_reviews", split=split, as_supervised=True, data_dir=data_dir
        )
        texts, labels = [], []
        for text, label in tfds.as_numpy(dataset):
            texts.append(text.decode("utf-8"))
            labels.append(int(label))
        splits[split] = (
            np.array(texts, dtype=object),
            np.array(labels, dtype="int32"),
        )
    return splits


def split_validation(texts, labels, fraction, seed):
    """Stratified, seeded hold-out: ((train texts, labels), (val texts, labels))."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation fraction must be in (0, 1); got {fraction}.")
    rng = np.random.default_rng(seed)
    val_index = []
    for label in np.unique(labels):
        index = np.flatnonzero(labels == label)
        rng.shuffle(index)
        val_index.append(index[: int(round(len(index) * fraction))])
    is_val = np.zeros(len(labels), bool)
    is_val[np.concatenate(val_index)] = True
    train = np.flatnonzero(~is_val)
    val = np.flatnonzero(is_val)
    rng.shuffle(train)
    rng.shuffle(val)
    return (texts[train], labels[train]), (texts[val], labels[val])


def load_imdb(data_dir=None, validation_fraction=0.2, seed=1337):
    """Loads IMDB as {"train", "validation", ["test"]} -> (texts, labels).

    Args:
        data_dir: a local `aclImdb` directory (or its parent). When None,
            tensorflow-datasets' `imdb_reviews` is used.
        validation_fraction: share of train held out for validation; 0 keeps
            all of train for training (no "validation" split).
        seed: seed of the hold-out.

    Raises:
        DataNotFoundError: naming every source tried and how to fix it.
    """
    if data_dir is not None:
        if not os.path.isdir(data_dir):
            raise DataNotFoundError(
                f"--data-dir {data_dir!r} does not exist. Point it at an "
                "unpacked aclImdb directory (train/pos, train/neg), e.g. "
                f"from {IMDB_URL}."
            )
        splits = load_aclimdb(data_dir)
    else:
        try:
            splits = load_tfds()
        except Exception as error:  # no network, no tfds, a broken download
            reason = str(error).strip().splitlines()
            reason = reason[0] if reason else type(error).__name__
            raise DataNotFoundError(
                "Could not load IMDB: tried tensorflow-datasets "
                f"'imdb_reviews' ({type(error).__name__}: {reason}). Download "
                f"aclImdb_v1.tar.gz from {IMDB_URL}, unpack it, and pass "
                "--data-dir /path/to/aclImdb."
            ) from None
    if validation_fraction:
        splits["train"], splits["validation"] = split_validation(
            *splits["train"], validation_fraction, seed
        )
    return splits


_NEUTRAL = (
    "the a film movie story plot actor actress scene director it was is "
    "this that and of to in with for as on but about character ending music"
).split()
_POSITIVE = "great wonderful excellent superb loved brilliant moving best".split()
_NEGATIVE = "awful boring terrible waste worst dull poorly hated".split()


def make_synthetic_imdb(num_train=480, num_validation=160, num_test=160,
                        seed=0):
    """A small generated IMDB look-alike for smoke runs and tests.

    Reviews mix neutral words with a few sentiment words of their label (and
    an occasional one of the other), plus `<br />` tags, so a model can learn
    it in a few steps and attention has something to find.

    Returns:
        {"train", "validation", "test"} -> (texts, labels), like `load_imdb`.
    """
    rng = np.random.default_rng(seed)

    def review(label):
        words = list(rng.choice(_NEUTRAL, size=rng.integers(12, 40)))
        cues = _POSITIVE if label else _NEGATIVE
        others = _NEGATIVE if label else _POSITIVE
        for _ in range(rng.integers(1, 4)):
            words.insert(rng.integers(len(words)), rng.choice(cues))
        if rng.random() < 0.2:
            words.insert(rng.integers(len(words)), rng.choice(others))
        if rng.random() < 0.5:
            words.insert(rng.integers(len(words)), "<br /><br />")
        return " ".join(words).capitalize() + "."

    def split(n):
        labels = rng.integers(0, 2, size=n).astype("int32")
        texts = np.array([review(label) for label in labels], dtype=object)
        return texts, labels

    return {
        "train": split(num_train),
        "validation": split(num_validation),
        "test": split(num_test),
    }
