"""IMDB loaders and GloVe, on fixtures the tests write."""

import os

import numpy as np
import pytest

from zoo.data import imdb
from zoo.data.glove import glove_embedding_matrix, load_glove
from zoo.data.imdb import DataNotFoundError, load_imdb, split_validation


def write_aclimdb(root, per_class=6, with_test=True, reviews_per_movie=None):
    """A tiny aclImdb tree: <root>/aclImdb/{train,test}/{pos,neg}/<id>_<r>.txt.

    With `reviews_per_movie`, also the official `urls_{pos,neg}.txt`: review
    id i of either polarity is about movie i // reviews_per_movie, and its
    text names that movie ("movie<k>").
    """
    splits = ("train", "test") if with_test else ("train",)
    for split in splits:
        for polarity, word in (("pos", "wonderful"), ("neg", "awful")):
            folder = os.path.join(root, "aclImdb", split, polarity)
            os.makedirs(folder)
            for i in range(per_class):
                rating = 9 if polarity == "pos" else 2
                movie = (
                    f" about movie{i // reviews_per_movie}"
                    if reviews_per_movie
                    else ""
                )
                with open(os.path.join(folder, f"{i}_{rating}.txt"), "w") as f:
                    f.write(
                        f"A {word} {split} film{movie} number {i}.<br /><br />The End"
                    )
            if reviews_per_movie:
                urls = [
                    f"http://www.imdb.com/title/tt{i // reviews_per_movie:07d}/usercomments"
                    for i in range(per_class)
                ]
                with open(
                    os.path.join(
                        root, "aclImdb", split, f"urls_{polarity}.txt"
                    ),
                    "w",
                ) as f:
                    f.write("\n".join(urls) + "\n")
    return os.path.join(root, "aclImdb")


def test_aclimdb_layout_is_read_with_labels(tmp_path):
    write_aclimdb(tmp_path)
    splits = load_imdb(str(tmp_path), validation_fraction=0.5, seed=3)
    assert set(splits) == {"train", "validation", "test"}
    texts, labels = splits["test"]
    assert len(texts) == 12 and labels.sum() == 6
    for text, label in zip(texts, labels):
        assert ("wonderful" in text) == bool(label)
    assert len(splits["train"][0]) == len(splits["validation"][0]) == 6
    # Stratified: each half keeps the class balance.
    assert splits["validation"][1].sum() == 3


def test_data_dir_may_be_the_aclimdb_folder_itself(tmp_path):
    root = write_aclimdb(tmp_path, with_test=False)
    splits = load_imdb(root, validation_fraction=0.25)
    assert set(splits) == {"train", "validation"}
    assert len(splits["train"][0]) + len(splits["validation"][0]) == 12


def test_validation_split_is_seeded_and_disjoint():
    texts = np.array([f"review {i}" for i in range(100)], dtype=object)
    labels = np.array([i % 2 for i in range(100)], dtype="int32")
    (a_train, _), (a_val, a_val_labels) = split_validation(
        texts, labels, 0.2, seed=7
    )
    (b_train, _), (b_val, _) = split_validation(texts, labels, 0.2, seed=7)
    (_, _), (c_val, _) = split_validation(texts, labels, 0.2, seed=8)
    assert list(a_val) == list(b_val) and list(a_train) == list(b_train)
    assert set(a_val) != set(c_val)
    assert not set(a_val) & set(a_train) and len(a_val) == 20
    assert a_val_labels.sum() == 10


def test_reviews_are_read_in_numeric_id_order(tmp_path):
    folder = tmp_path / "aclImdb" / "train"
    for polarity in ("pos", "neg"):
        (folder / polarity).mkdir(parents=True)
        for i in (10, 2, 1):
            (folder / polarity / f"{i}_7.txt").write_text(f"{polarity} {i}")
    texts, labels, ids, movies = imdb.read_aclimdb_split(
        str(tmp_path / "aclImdb"), "train"
    )
    assert list(ids) == [1, 2, 10, 1, 2, 10] and list(labels) == [
        0,
        0,
        0,
        1,
        1,
        1,
    ]
    assert texts[2] == "neg 10" and movies is None


def test_a_file_not_named_like_a_review_is_a_clear_error(tmp_path):
    root = write_aclimdb(tmp_path, with_test=False)
    (tmp_path / "aclImdb" / "train" / "pos" / "notes.txt").write_text("x")
    with pytest.raises(
        DataNotFoundError, match=r"notes.txt is not named like .*<id>_<rating>"
    ):
        load_imdb(root)


def test_validation_holds_out_whole_movies_from_the_urls_files(tmp_path):
    root = write_aclimdb(
        tmp_path, per_class=40, reviews_per_movie=4, with_test=False
    )
    folds = []
    for fold in range(5):
        splits = load_imdb(
            root, validation_fraction=0.2, seed=0, validation_fold=fold
        )
        assert splits.validation_holdout == "whole movies (train/urls_*.txt)"
        movie = lambda t: t.split("movie")[1].split()[0]
        train_movies = {movie(t) for t in splits["train"][0]}
        val_movies = {movie(t) for t in splits["validation"][0]}
        assert not train_movies & val_movies  # no movie on both sides
        assert (
            len(splits["validation"][0]) == 16
            and splits["validation"][1].sum() == 8
        )
        folds.append(val_movies)
    # The five folds cross-validate: every movie is held out exactly once.
    assert sorted(m for f in folds for m in f) == sorted(
        str(i) for i in range(10)
    )


def test_urls_file_shorter_than_the_ids_is_a_clear_error(tmp_path):
    root = write_aclimdb(
        tmp_path, per_class=8, reviews_per_movie=2, with_test=False
    )
    (tmp_path / "aclImdb" / "train" / "urls_neg.txt").write_text("http://a\n")
    with pytest.raises(
        ValueError, match="urls_neg.txt has 1 lines but .* id 7"
    ):
        load_imdb(root)


def test_official_train_ids_give_movie_positions():
    ids = np.concatenate([np.arange(12500), np.arange(12500)])
    labels = np.repeat([0, 1], 12500)
    positions = imdb.aclimdb_train_movie_positions(labels, ids)
    assert positions.shape == (25000,)
    assert positions.min() >= 0 and positions.max() < 1
    pos, neg = positions[labels == 1], positions[labels == 0]
    np.testing.assert_allclose(pos, np.arange(12500) / 12500)
    # Negative ids 0..3999 follow the positive ids through the same movies,
    # in order (the anchors), and 4000.. spread over [0, 1) on their own.
    assert np.all(np.diff(neg[:4000]) >= 0)
    np.testing.assert_allclose(neg[[0, 775, 3100]], [0.0, 0.2, 0.8])
    np.testing.assert_allclose(neg[[4000, 8250]], [0.0, 0.5])
    # Each fifth of the positions holds out about a fifth of each class.
    for fold in range(5):
        inside = (positions >= fold / 5) & (positions < (fold + 1) / 5)
        assert abs(inside[labels == 1].mean() - 0.2) < 1e-9
        assert abs(inside[labels == 0].mean() - 0.2) < 0.02


def test_other_ids_are_not_taken_for_the_official_split():
    labels = np.repeat([0, 1], 10)
    ids = np.concatenate([np.arange(10), np.arange(10)])
    assert imdb.aclimdb_train_movie_positions(labels, ids) is None


def test_without_movie_ids_validation_is_random_reviews_and_says_so(tmp_path):
    root = write_aclimdb(tmp_path, per_class=10, with_test=False)
    splits = load_imdb(root, validation_fraction=0.2)
    assert splits.validation_holdout.startswith(
        "random reviews: no train/urls_*.txt"
    )
    assert (
        splits["validation"][1].sum() == 2 and len(splits["validation"][0]) == 4
    )
    asked = load_imdb(root, validation_fraction=0.2, hold_out="reviews")
    assert asked.validation_holdout == "random reviews (asked for)"


def test_validation_folds_partition_the_random_hold_out_too():
    texts = np.array([f"review {i}" for i in range(100)], dtype=object)
    labels = np.array([i % 2 for i in range(100)], dtype="int32")
    held_out = [
        split_validation(texts, labels, 0.25, seed=3, fold=k)[1][0]
        for k in range(4)
    ]
    assert sorted(t for part in held_out for t in part) == sorted(texts)


def test_bad_hold_out_arguments_are_clear_errors(tmp_path):
    texts, labels = np.array(["a", "b"], dtype=object), np.array([0, 1])
    with pytest.raises(ValueError, match=r"fold must be in \[0, 5\).*got 5"):
        split_validation(texts, labels, 0.2, seed=0, fold=5)
    with pytest.raises(ValueError, match="fraction must be in"):
        split_validation(texts, labels, 1.5, seed=0)
    with pytest.raises(
        ValueError, match="hold_out must be 'movies' or 'reviews'"
    ):
        load_imdb(str(tmp_path), hold_out="films")


def test_missing_data_dir_gives_a_clear_error(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_imdb(str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError, match="train/pos"):
        load_imdb(str(tmp_path))  # exists, but holds no aclImdb


def test_a_half_copied_aclimdb_names_what_is_missing(tmp_path):
    os.makedirs(tmp_path / "train" / "pos")
    (tmp_path / "train" / "pos" / "0_9.txt").write_text("fine")
    with pytest.raises(DataNotFoundError, match=r"train/neg does not exist"):
        load_imdb(str(tmp_path))
    os.makedirs(tmp_path / "train" / "neg")
    with pytest.raises(DataNotFoundError, match=r"train/neg has no reviews"):
        load_imdb(str(tmp_path))


def _fake_tfds_load(name, split, as_supervised, data_dir=None):
    import tensorflow as tf

    assert name == "imdb_reviews" and as_supervised
    texts = [f"a wonderful {split} film", f"an awful {split} film"] * 5
    labels = [1, 0] * 5
    return tf.data.Dataset.from_tensor_slices((texts, labels))


class _Prepared:
    """A tfds builder whose data is already on disk (no network needed)."""

    def is_prepared(self):
        return True


def test_default_source_is_tfds(monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.setattr(tfds, "builder", lambda *a, **k: _Prepared())
    monkeypatch.setattr(tfds, "load", _fake_tfds_load)
    splits = load_imdb(validation_fraction=0.2, seed=0)
    assert set(splits) == {"train", "validation", "test"}
    # tfds has no movie ids: the hold-out is random reviews, and says so.
    assert splits.validation_holdout.startswith(
        "random reviews: tensorflow-datasets"
    )
    assert len(splits["train"][0]) == 8 and len(splits["test"][0]) == 10
    assert isinstance(splits["test"][0][0], str)
    assert all(
        ("wonderful" in t) == bool(lab) for t, lab in zip(*splits["test"])
    )


def test_tfds_failure_names_what_was_tried(monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Failed to establish a connection\nlong trace")

    monkeypatch.setattr(tfds, "builder", lambda *a, **k: _Prepared())
    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(DataNotFoundError) as error:
        load_imdb()
    message = str(error.value)
    assert "imdb_reviews" in message and "--data-dir" in message
    assert "ConnectionError" in message and "long trace" not in message


def test_tfds_without_a_network_fails_fast_naming_data_dir(monkeypatch):
    """Without a prepared copy, tensorflow-datasets would retry for minutes;
    an unreachable host is one clear error within seconds."""
    import time

    import tensorflow_datasets as tfds

    class Unprepared:
        def is_prepared(self):
            return False

    monkeypatch.setattr(tfds, "builder", lambda *a, **k: Unprepared())
    monkeypatch.setattr(imdb, "TFDS_IMDB_URL", "https://unreachable.invalid/x")
    monkeypatch.setattr(tfds, "load", lambda *a, **k: pytest.fail("no load"))
    start = time.perf_counter()
    with pytest.raises(DataNotFoundError, match="--data-dir") as error:
        load_imdb()
    assert time.perf_counter() - start < 30
    assert "unreachable" in str(error.value)


def test_glove_matrix_uses_vectors_and_zero_padding(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("the 0.1 0.2 0.3\nfilm 1.0 -1.0 0.5\ngreat 0.0 0.0 2.0\n")
    vectors, dim = load_glove(str(path))
    assert dim == 3 and set(vectors) == {"the", "film", "great"}
    matrix, found = glove_embedding_matrix(
        ["", "[UNK]", "film", "zzz", "the"], str(path)
    )
    assert matrix.shape == (5, 3) and found == 2
    np.testing.assert_allclose(matrix[2], [1.0, -1.0, 0.5])
    np.testing.assert_allclose(matrix[4], [0.1, 0.2, 0.3])
    assert np.all(matrix[0] == 0) and np.abs(matrix[3]).sum() > 0


def test_glove_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="GloVe file"):
        load_glove(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("the 0.1 0.2 0.3\nfilm 1.0 -1.0\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected 3 numbers"):
        load_glove(str(bad))


def test_synthetic_imdb_is_deterministic_and_balanced():
    a, b = imdb.make_synthetic_imdb(seed=4), imdb.make_synthetic_imdb(seed=4)
    assert list(a["train"][0][:5]) == list(b["train"][0][:5])
    assert 0.35 < a["train"][1].mean() < 0.65


def test_unsupervised_reviews_from_a_local_copy(tmp_path):
    root = write_aclimdb(tmp_path, with_test=False)
    folder = os.path.join(root, "train", "unsup")
    os.makedirs(folder)
    for i in (10, 2, 1):
        with open(os.path.join(folder, f"{i}_0.txt"), "w") as f:
            f.write(f"unlabelled review {i}")
    texts = imdb.load_imdb_unsupervised(str(tmp_path))
    assert list(texts) == [
        "unlabelled review 1",
        "unlabelled review 2",
        "unlabelled review 10",
    ]


@pytest.mark.one_backend
def test_a_review_that_is_not_utf8_is_named_with_the_byte_offset(tmp_path):
    root = write_aclimdb(tmp_path, per_class=2, with_test=False)
    bad = os.path.join(root, "train", "pos", "1_9.txt")
    with open(bad, "wb") as f:
        f.write(b"A caf\xe9 film")
    with pytest.raises(
        DataNotFoundError,
        match=rf"^{bad} is not valid UTF-8: byte offset 5 ",
    ):
        load_imdb(str(tmp_path), validation_fraction=0.5)


@pytest.mark.one_backend
def test_empty_review_files_are_skipped_with_a_warning_naming_them(tmp_path):
    root = write_aclimdb(tmp_path, per_class=3, with_test=False)
    empty = os.path.join(root, "train", "neg", "1_2.txt")
    open(empty, "w").close()
    with pytest.warns(
        UserWarning,
        match=rf"skipped 1 empty review file\(s\): "
        rf"{empty}\.$",
    ):
        texts, labels, ids, _ = imdb.read_aclimdb_split(root, "train")
    assert len(texts) == 5 and list(ids) == [0, 2, 0, 1, 2]
    assert list(labels) == [0, 0, 1, 1, 1]
    for name in ("0_2.txt", "2_2.txt"):
        open(os.path.join(root, "train", "neg", name), "w").close()
    with pytest.raises(
        DataNotFoundError, match="neg has no reviews: its 3 review files are"
    ):
        with pytest.warns(UserWarning, match="skipped 3 empty"):
            imdb.read_aclimdb_split(root, "train")
    folder = os.path.join(root, "train", "unsup")
    os.makedirs(folder)
    for i, text in ((0, "unlabelled"), (1, " \n")):
        with open(os.path.join(folder, f"{i}_0.txt"), "w") as f:
            f.write(text)
    with pytest.warns(UserWarning, match="1_0.txt"):
        assert list(imdb.load_imdb_unsupervised(root)) == ["unlabelled"]


def test_unsupervised_errors_name_the_fix(tmp_path):
    root = write_aclimdb(tmp_path, with_test=False)
    with pytest.raises(DataNotFoundError, match="train/unsup"):
        imdb.load_imdb_unsupervised(root)
    with pytest.raises(DataNotFoundError, match="does not exist"):
        imdb.load_imdb_unsupervised(str(tmp_path / "nowhere"))


def test_unsupervised_reviews_from_tfds(monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.setattr(tfds, "builder", lambda *a, **k: _Prepared())
    monkeypatch.setattr(tfds, "load", _fake_tfds_load)
    texts = imdb.load_imdb_unsupervised()
    assert len(texts) == 10 and texts[0] == "a wonderful unsupervised film"


def test_pretraining_text_is_train_and_unlabelled_but_the_held_out(tmp_path):
    root = write_aclimdb(tmp_path, per_class=4)
    folder = os.path.join(root, "train", "unsup")
    os.makedirs(folder)
    for i in range(12):
        with open(os.path.join(folder, f"{i}_0.txt"), "w") as f:
            f.write(f"unlabelled review {i}")
    texts, held_out = imdb.imdb_pretraining_text(root, held_out=5, seed=3)
    train = list(load_imdb(root, validation_fraction=0)["train"][0])
    unlabelled = [f"unlabelled review {i}" for i in range(12)]
    assert texts[: len(train)] == train  # labelled text first, in order
    assert len(held_out) == 5 and not set(held_out) & set(texts)
    assert sorted(texts[len(train) :] + held_out) == sorted(unlabelled)
    assert not any(" test film" in t for t in texts + held_out)
    order = np.random.default_rng(3).permutation(12)
    assert held_out == [unlabelled[i] for i in order[:5]]
    again = imdb.imdb_pretraining_text(root, held_out=5, seed=3)
    assert again == (texts, held_out)
    other = imdb.imdb_pretraining_text(root, held_out=5, seed=4)[1]
    assert other != held_out


def test_generated_pretraining_text_reads_nothing(monkeypatch):
    def no_reading(*args, **kwargs):
        raise AssertionError("read IMDB")

    monkeypatch.setattr(imdb, "load_imdb", no_reading)
    monkeypatch.setattr(imdb, "load_imdb_unsupervised", no_reading)
    texts, held_out = imdb.imdb_pretraining_text(
        held_out=40, seed=2, synthetic=True
    )
    train = list(imdb.make_synthetic_imdb(480, 0, 0, seed=2)["train"][0])
    unlabelled = list(imdb.make_synthetic_imdb(480, 0, 0, seed=3)["train"][0])
    assert len(texts) == 920 and len(held_out) == 40
    assert texts[:480] == train
    assert sorted(texts[480:] + held_out) == sorted(unlabelled)
