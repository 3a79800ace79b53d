"""IMDB Large Movie Review Dataset (Maas et al., 2011): loading and splitting.

Two sources give the same result, `{split: (texts, labels)}` with texts as a
NumPy array of Python strings and labels as int32 (1 = positive):

* a local copy in the official `aclImdb/` layout (`train/{pos,neg}/*.txt`,
  `test/{pos,neg}/*.txt`), given with `data_dir`;
* tensorflow-datasets' `imdb_reviews` (downloads on first use), the default.

The validation split holds out whole movies. IMDB has up to 30 reviews per
movie and the official test split's movies are disjoint from train's, so a
validation split of random reviews lets a model score by remembering the
names of movies it was trained on, and reads too high (docs/log/imdb.md
measures how much). Movies come from the official
`urls_{pos,neg}.txt` files when they are there; without them, from the
review ids (see `aclimdb_train_movie_positions`).
tensorflow-datasets gives neither, so there the hold-out is random reviews and
reads high; its test split is the honest figure.
"""

import logging
import os
import re
import warnings

import numpy as np

from zoo.data.download import DataNotFoundError, check_reachable
from zoo.data.files import read_utf8

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/"

# aclImdb's train split numbers each polarity's reviews movie by movie, in one
# shared movie order: positive ids 0..12499 and negative ids 0..3999 walk
# through the same movies (negative ids 4000..12499 are movies with no
# positive train review). These anchors say where the two id sequences reach
# the same movie, every 250 positive ids. They were measured on the official
# train split by matching the rare proper names that reviews of one movie
# share (a monotone alignment of 25-review blocks), and checked by reading
# the reviews at the five-fold boundaries: e.g. "Life Stinks" is positive ids
# 10000-10001 and negative id 3104 (anchor 3100); "Creature Comforts" starts
# at positive id 5000 and negative id 1426 (anchor 1425). They are good to
# about 25 ids, a movie or two.
_TRAIN_PER_CLASS = 12500
_TRAIN_POS_ANCHORS = np.arange(0, _TRAIN_PER_CLASS + 1, 250)
_TRAIN_NEG_ANCHORS = np.array(
    [
        0,
        50,
        150,
        200,
        250,
        325,
        425,
        500,
        550,
        700,
        775,
        850,
        900,
        950,
        1025,
        1100,
        1150,
        1250,
        1300,
        1375,
        1425,
        1525,
        1600,
        1700,
        1800,
        1875,
        1925,
        2000,
        2100,
        2175,
        2275,
        2325,
        2425,
        2450,
        2525,
        2675,
        2725,
        2825,
        2900,
        2925,
        3100,
        3225,
        3300,
        3400,
        3500,
        3575,
        3625,
        3725,
        3825,
        3900,
        4000,
    ]
)
_TRAIN_NEG_ALIGNED = int(_TRAIN_NEG_ANCHORS[-1])


class ImdbSplits(dict):
    """`{split: (texts, labels)}` plus `validation_holdout`: how the
    validation split was held out, in words (None without one)."""

    validation_holdout = None


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


_REVIEW_FILE = re.compile(r"^(\d+)_\d+\.txt$")


def read_aclimdb_split(root, split):
    """Reads `root/split/{neg,pos}/<id>_<rating>.txt`, each polarity in id
    order.

    Empty (or blank) review files are skipped with one warning per folder
    naming them; a file that is not UTF-8 is an error naming it and the
    byte offset.

    Returns:
        `(texts, labels, ids, movies)`: review ids as int; `movies` holds each
        review's movie URL from `urls_{neg,pos}.txt` (line `id` is review
        `id`'s movie), or is None when those files are missing.

    Raises:
        DataNotFoundError: a missing folder, a misnamed review file, a
            folder with no review (or only empty ones), a file that is not
            UTF-8.
    """
    texts, labels, ids, movies = [], [], [], []
    for label, polarity in enumerate(("neg", "pos")):
        folder = os.path.join(root, split, polarity)
        if not os.path.isdir(folder):
            raise DataNotFoundError(
                f"{folder} does not exist: the aclImdb layout has "
                f"{split}/neg and {split}/pos side by side."
            )
        files = []
        for name in os.listdir(folder):
            if not name.endswith(".txt"):
                continue
            match = _REVIEW_FILE.match(name)
            if match is None:
                raise DataNotFoundError(
                    f"{os.path.join(folder, name)} is not named like an "
                    "aclImdb review, <id>_<rating>.txt."
                )
            files.append((int(match.group(1)), name))
        if not files:
            raise DataNotFoundError(
                f"{folder} has no reviews (<id>_<rating>.txt files)."
            )
        files.sort()
        kept = []
        for review_id, name in files:
            text = read_utf8(os.path.join(folder, name))
            if not text.strip():
                continue
            kept.append((review_id, name))
            texts.append(text)
            labels.append(label)
            ids.append(review_id)
        _warn_skipped(folder, files, kept)
        if not kept:
            raise DataNotFoundError(
                f"{folder} has no reviews: its {len(files)} review files "
                "are all empty."
            )
        urls_path = os.path.join(root, split, f"urls_{polarity}.txt")
        if movies is not None and os.path.isfile(urls_path):
            urls = read_utf8(urls_path).split()
            if files and files[-1][0] >= len(urls):
                raise ValueError(
                    f"{urls_path} has {len(urls)} lines but {folder} has a "
                    f"review with id {files[-1][0]}."
                )
            movies.extend(urls[review_id] for review_id, _ in kept)
        else:
            movies = None
    return (
        np.array(texts, dtype=object),
        np.array(labels, dtype="int32"),
        np.array(ids, dtype="int64"),
        None if movies is None else np.array(movies, dtype=object),
    )


def aclimdb_train_movie_positions(labels, ids):
    """Where each review of aclImdb's official train split lies in its movie
    order, as a number in [0, 1); for copies without `urls_*.txt`.

    Reviews of one movie get nearly the same position, so holding out an
    interval of positions holds out whole movies (but for a movie or two at
    each end of the interval). Positive ids map linearly; negative ids 0..3999
    through `_TRAIN_NEG_ANCHORS` to the positive ids of the same movies;
    negative ids 4000..12499 (movies without positive train reviews) spread
    linearly over [0, 1) on their own.

    Args:
        labels: `(n,)` 1 = positive, 0 = negative.
        ids: `(n,)` review ids (the number before `_` in the file name).

    Returns:
        `(n,)` float positions, or None when the ids are not the official
        train split's (0..12499 for each polarity).
    """
    labels, ids = np.asarray(labels), np.asarray(ids)
    for label in (0, 1):
        if not np.array_equal(
            np.sort(ids[labels == label]), np.arange(_TRAIN_PER_CLASS)
        ):
            return None
    n = float(_TRAIN_PER_CLASS)
    aligned_neg = np.interp(ids, _TRAIN_NEG_ANCHORS, _TRAIN_POS_ANCHORS) / n
    neg_only = (ids - _TRAIN_NEG_ALIGNED) / (n - _TRAIN_NEG_ALIGNED)
    return np.where(
        labels == 1,
        ids / n,
        np.where(ids < _TRAIN_NEG_ALIGNED, aligned_neg, neg_only),
    )


def movie_positions_from_urls(movies, labels, ids):
    """Positions in [0, 1) that keep each movie (URL) whole: movies in the
    order their reviews first appear (ids relative to each polarity's count),
    each starting where the reviews before it end."""
    movies, labels, ids = map(np.asarray, (movies, labels, ids))
    per_class = {lab: ids[labels == lab].max() + 1 for lab in np.unique(labels)}
    relative = ids / np.array([per_class[lab] for lab in labels])
    first = {}
    for movie, place in zip(movies, relative):
        first[movie] = min(place, first.get(movie, np.inf))
    order = sorted(first, key=first.get)
    counts = {movie: 0 for movie in order}
    for movie in movies:
        counts[movie] += 1
    start, total = {}, 0
    for movie in order:
        start[movie] = total
        total += counts[movie]
    return np.array([start[m] for m in movies], dtype="float64") / total


def random_positions(labels, seed):
    """Positions in [0, 1) for a stratified random hold-out: a seeded
    permutation of each class."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    positions = np.zeros(len(labels))
    for label in np.unique(labels):
        index = np.flatnonzero(labels == label)
        positions[index] = rng.permutation(len(index)) / len(index)
    return positions


def split_validation(texts, labels, fraction, seed, positions=None, fold=0):
    """Holds out the reviews whose position lies in
    `[fold * fraction, (fold + 1) * fraction)`.

    Args:
        texts, labels: the training split.
        fraction: share of reviews held out, in (0, 1).
        seed: shuffles both parts (and draws the positions when none are
            given).
        positions: `(n,)` in [0, 1), e.g. movie positions so that whole
            movies are held out; default: a stratified random hold-out.
        fold: which interval; `0 <= fold < int(1 / fraction)`, so the folds
            together are a cross-validation of the split.

    Returns:
        `((train texts, labels), (validation texts, labels))`.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(
            f"validation fraction must be in (0, 1); got {fraction}."
        )
    num_folds = int(1.0 / fraction + 1e-9)
    if not 0 <= fold < num_folds:
        raise ValueError(
            f"validation fold must be in [0, {num_folds}) for a validation "
            f"fraction of {fraction}; got {fold}."
        )
    if positions is None:
        positions = random_positions(labels, seed)
    # The small epsilon keeps float rounding from moving a boundary review.
    low, high = fold * fraction - 1e-9, (fold + 1) * fraction - 1e-9
    is_val = (positions >= low) & (positions < high)
    rng = np.random.default_rng(seed)
    train = rng.permutation(np.flatnonzero(~is_val))
    val = rng.permutation(np.flatnonzero(is_val))
    return (texts[train], labels[train]), (texts[val], labels[val])


def load_aclimdb(data_dir):
    """{"train": ..., "test": ...} from a local aclImdb directory (test only
    when present)."""
    return _load_aclimdb(data_dir)[0]


def _load_aclimdb(data_dir):
    root = find_aclimdb_root(data_dir)
    texts, labels, ids, movies = read_aclimdb_split(root, "train")
    splits = ImdbSplits(train=(texts, labels))
    if os.path.isdir(os.path.join(root, "test", "pos")):
        splits["test"] = read_aclimdb_split(root, "test")[:2]
    if movies is not None:
        positions = movie_positions_from_urls(movies, labels, ids)
        how = "whole movies (train/urls_*.txt)"
    else:
        positions = aclimdb_train_movie_positions(labels, ids)
        how = "whole movies (from the review ids of the official train split)"
        if positions is None:
            how = (
                "random reviews: no train/urls_*.txt and not the official "
                "train split's ids, so validation shares movies with train "
                "and reads high"
            )
    return splits, positions, how


TFDS_IMDB_URL = IMDB_URL + "aclImdb_v1.tar.gz"


def load_tfds(data_dir=None):
    """{"train": ..., "test": ...} from tensorflow-datasets' imdb_reviews
    (prepared on first use; without a network that fails in seconds, with
    a `DataNotFoundError` naming `--data-dir`)."""
    import tensorflow_datasets as tfds

    # tfds logs (through absl) about half-made folders of earlier failed
    # downloads while it looks; the answer is all that matters here.
    absl_logger = logging.getLogger("absl")
    level = absl_logger.level
    absl_logger.setLevel(logging.ERROR)
    try:
        prepared = tfds.builder("imdb_reviews", data_dir=data_dir).is_prepared()
    finally:
        absl_logger.setLevel(level)
    if not prepared:
        check_reachable(
            TFDS_IMDB_URL,
            "IMDB with tensorflow-datasets",
            "--data-dir /path/to/aclImdb",
        )
    splits = ImdbSplits()
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


def load_imdb(
    data_dir=None,
    validation_fraction=0.2,
    seed=1337,
    validation_fold=0,
    hold_out="movies",
):
    """Loads IMDB as {"train", "validation", ["test"]} -> (texts, labels).

    Args:
        data_dir: a local `aclImdb` directory (or its parent). When None,
            tensorflow-datasets' `imdb_reviews` is used.
        validation_fraction: share of train held out for validation; 0 keeps
            all of train for training (no "validation" split).
        seed: shuffles the splits (and draws a random hold-out).
        validation_fold: which `validation_fraction`-sized part of the movies
            (or reviews) is held out, `0 <= fold < int(1 / fraction)`;
            running every fold cross-validates.
        hold_out: `"movies"` (whole movies, where the source says which
            review belongs to which; see the module docstring) or
            `"reviews"` (random reviews, stratified by label).

    Returns:
        An `ImdbSplits` dict; its `validation_holdout` says how validation
        was held out.

    Raises:
        DataNotFoundError: naming every source tried and how to fix it.
    """
    if hold_out not in ("movies", "reviews"):
        raise ValueError(
            f"hold_out must be 'movies' or 'reviews'; got {hold_out!r}."
        )
    positions = None
    how = (
        "random reviews: tensorflow-datasets has no movie ids, so "
        "validation shares movies with train and reads high; the test "
        "split does not"
    )
    if data_dir is not None:
        if not os.path.isdir(data_dir):
            raise DataNotFoundError(
                f"--data-dir {data_dir!r} does not exist. Point it at an "
                "unpacked aclImdb directory (train/pos, train/neg), e.g. "
                f"from {IMDB_URL}."
            )
        splits, positions, how = _load_aclimdb(data_dir)
    else:
        try:
            splits = load_tfds()
        except DataNotFoundError:
            raise
        except Exception as error:  # no network, no tfds, a broken download
            reason = str(error).strip().splitlines()
            reason = reason[0] if reason else type(error).__name__
            raise DataNotFoundError(
                "Could not load IMDB: tried tensorflow-datasets "
                f"'imdb_reviews' ({type(error).__name__}: {reason}). Download "
                f"aclImdb_v1.tar.gz from {IMDB_URL}, unpack it, and pass "
                "--data-dir /path/to/aclImdb."
            ) from None
    if hold_out == "reviews":
        positions, how = None, "random reviews (asked for)"
    if validation_fraction:
        splits["train"], splits["validation"] = split_validation(
            *splits["train"],
            validation_fraction,
            seed,
            positions=positions,
            fold=validation_fold,
        )
        splits.validation_holdout = how
    return splits


def load_imdb_unsupervised(data_dir=None):
    """The 50,000 unlabelled reviews of IMDB (`train/unsup/` in aclImdb,
    tensorflow-datasets' `unsupervised` split), in id order: text for
    pretraining. None of them is in the test split.

    Args:
        data_dir: a local `aclImdb` directory (or its parent); None: tfds.

    Returns:
        A NumPy object array of strings.

    Empty review files are skipped with a warning naming them.

    Raises:
        DataNotFoundError: no `train/unsup` folder, or tfds cannot load it
            (with how to fix it); a review file that is not UTF-8 (named,
            with the byte offset).
    """
    if data_dir is None:
        try:
            load_tfds()  # checks the network and prepares the dataset
            import tensorflow_datasets as tfds

            dataset = tfds.load(
                "imdb_reviews", split="unsupervised", as_supervised=True
            )
            return np.array(
                [text.decode("utf-8") for text, _ in tfds.as_numpy(dataset)],
                dtype=object,
            )
        except DataNotFoundError:
            raise
        except Exception as error:  # no network, a broken download
            raise DataNotFoundError(
                "Could not load IMDB's unsupervised split with "
                f"tensorflow-datasets ({type(error).__name__}). Pass "
                "--data-dir /path/to/aclImdb (with train/unsup)."
            ) from None
    if not os.path.isdir(data_dir):
        raise DataNotFoundError(f"--data-dir {data_dir!r} does not exist.")
    root = find_aclimdb_root(data_dir)
    folder = os.path.join(root, "train", "unsup")
    if not os.path.isdir(folder):
        raise DataNotFoundError(
            f"{folder} does not exist: the unlabelled reviews come with "
            f"aclImdb_v1.tar.gz from {IMDB_URL}."
        )
    files = sorted(
        (int(match.group(1)), name)
        for name in os.listdir(folder)
        for match in [_REVIEW_FILE.match(name)]
        if match
    )
    if not files:
        raise DataNotFoundError(f"{folder} has no reviews.")
    texts, kept = [], []
    for review in files:
        text = read_utf8(os.path.join(folder, review[1]))
        if text.strip():
            texts.append(text)
            kept.append(review)
    _warn_skipped(folder, files, kept)
    if not texts:
        raise DataNotFoundError(
            f"{folder} has no reviews: its {len(files)} review files are "
            "all empty."
        )
    return np.array(texts, dtype=object)


def _warn_skipped(folder, files, kept):
    """One warning naming the empty review files of `folder` that were
    skipped (the first few, and how many)."""
    if len(kept) == len(files):
        return
    kept = set(kept)
    empty = [name for review, name in files if (review, name) not in kept]
    shown = ", ".join(os.path.join(folder, name) for name in empty[:3])
    more = f" and {len(empty) - 3} more" if len(empty) > 3 else ""
    warnings.warn(
        f"skipped {len(empty)} empty review file(s): {shown}{more}.",
        stacklevel=3,
    )


def imdb_pretraining_text(data_dir=None, held_out=500, seed=0, synthetic=False):
    """Text to pretrain a language model on, and text held out from it: the
    train split's reviews (their text only, never a label) and the
    unlabelled ones (`load_imdb_unsupervised`) but `held_out` of the
    latter, chosen by `seed`. Never the test split.

    Args:
        data_dir: a local `aclImdb` directory (with `train/{pos,neg,unsup}`)
            or its parent; None: tensorflow-datasets' `imdb_reviews`.
        held_out: unlabelled reviews kept out of the pretraining text (for
            a held-out masked-token loss, say).
        seed: chooses them.
        synthetic: generated reviews instead, nothing read (smoke runs and
            tests): 480 "train" reviews of `make_synthetic_imdb(seed=seed)`
            and 480 "unlabelled" ones of `make_synthetic_imdb(seed=seed + 1)`.

    Returns:
        `(texts, held_out_texts)`: lists of strings, the train reviews first,
        then the unlabelled ones not held out, in a `seed`-shuffled order.

    Raises:
        DataNotFoundError: as `load_imdb` and `load_imdb_unsupervised`.

    Example:

    >>> texts, held = imdb_pretraining_text(held_out=40, seed=1, synthetic=True)
    >>> len(texts), len(held)
    (920, 40)
    """
    if synthetic:
        splits = make_synthetic_imdb(
            num_train=480, num_validation=0, num_test=0, seed=seed
        )
        unlabelled = make_synthetic_imdb(
            num_train=480, num_validation=0, num_test=0, seed=seed + 1
        )
        train, unsup = list(splits["train"][0]), list(unlabelled["train"][0])
    else:
        train = list(load_imdb(data_dir, validation_fraction=0)["train"][0])
        unsup = list(load_imdb_unsupervised(data_dir))
    order = np.random.default_rng(seed).permutation(len(unsup))
    validation = [unsup[i] for i in order[:held_out]]
    rest = [unsup[i] for i in order[held_out:]]
    return train + rest, validation


_NEUTRAL = (
    "the a film movie story plot actor actress scene director it was is "
    "this that and of to in with for as on but about character ending music"
).split()
_POSITIVE = (
    "great wonderful excellent superb loved brilliant moving best".split()
)
_NEGATIVE = "awful boring terrible waste worst dull poorly hated".split()


def make_synthetic_imdb(
    num_train=480, num_validation=160, num_test=160, seed=0
):
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

    splits = ImdbSplits(
        train=split(num_train),
        validation=split(num_validation),
        test=split(num_test),
    )
    splits.validation_holdout = "generated separately (smoke data)"
    return splits
