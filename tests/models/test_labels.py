"""zoo.models.labels: the label checks every classifier task runs before
`fit` and `evaluate` (as scikit-learn's estimator checks do), on arrays,
lists, backend tensors and `tf.data` datasets' specs. The tasks' own use of
them is tested with each family (tests/models/text_classifier, bert,
vit)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.models.labels import (
    check_class_labels,
    check_dataset_labels,
    example_count,
)

# (labels, num_classes, error, message), each for 4 examples.
BAD = [
    (
        [0, 1, 2, 5],
        1,
        ValueError,
        r"^fit\(\): label 2 at index 2 is outside"
        r" the classes: labels are 0 or 1, or a probability between them, for "
        r"this binary classifier \(2 of 4 labels are outside\).$",
    ),
    ([0, -1, 1, 0], 1, ValueError, "label -1 at index 1 is outside"),
    (
        [0, 1, 2, 3],
        3,
        ValueError,
        r"label 3 at index 3 is outside the "
        r"classes: labels are class ids 0..2 for this 3-class classifier",
    ),
    ([0, 1.5, 2, 1], 3, ValueError, "label 1.5 at index 1 is not a whole"),
    ([0, 1, np.nan, 1], 1, ValueError, "label nan at index 2 is not a number"),
    ([0, 1, np.inf, 1], 3, ValueError, r"\(1 of 4 are NaN or infinite\)"),
    (
        ["pos", "neg", "pos", "neg"],
        1,
        TypeError,
        r"^fit\(\): label 'pos' "
        r"at index 0 is a str, not a number: .*\(map names to ids first",
    ),
    (
        [b"1", b"0", b"1", b"0"],
        2,
        TypeError,
        "label b'1' at index 0 is a bytes",
    ),
    ([0, 1, None, 1], 1, TypeError, "label None at index 2 is a NoneType"),
    ("pos", 1, TypeError, "got the string 'pos' as labels"),
    (1, 1, ValueError, "got one 1 as labels: pass one per example"),
    (
        [1, 0, 1],
        1,
        ValueError,
        r"^fit\(\) got 4 examples but 3 labels: one "
        r"label per example.$",
    ),
    ([1, 0, 1, 0, 1], 2, ValueError, "4 examples but 5 labels"),
    (
        np.zeros((4, 2)),
        1,
        ValueError,
        r"labels of shape \(4, 2\); this "
        r"classifier takes \(n,\) or \(n, 1\)",
    ),
    (np.zeros((4, 3, 1)), 3, ValueError, r"labels of shape \(4, 3, 1\)"),
    (np.full((4, 3), 2.0), 3, ValueError, "label 2.0 at index 0 is outside"),
    ([[0], [1, 1], [0], [1]], 1, ValueError, "ragged labels"),
    (None, 1, ValueError, r"^fit\(\) needs labels: fit\(x, labels\)"),
]


@pytest.mark.parametrize(
    "labels, num_classes, error, message",
    BAD,
    ids=[f"{i}" for i in range(len(BAD))],
)
def test_bad_labels_are_one_line(labels, num_classes, error, message):
    with pytest.raises(error, match=message) as info:
        check_class_labels(labels, num_classes, "fit", count=4)
    assert "\n" not in str(info.value)


def test_good_labels_pass_unchanged():
    for labels, num_classes in (
        ([0, 1, 1, 0], 1),
        (np.array([[0.0], [1.0], [0.25], [1.0]]), 1),  # soft labels
        (np.array([True, False, True, True]), 1),
        (np.array([0, 2, 1, 2], "int64"), 3),
        (np.array([0.0, 2.0, 1.0, 2.0], "float32"), 3),
        (np.eye(3)[[0, 2, 1, 2]], 3),  # one-hot rows
        (np.array([0, 1, 1, 0], dtype=object), 2),
        (keras.ops.convert_to_tensor([0, 2, 1, 2]), 3),
    ):
        assert check_class_labels(labels, num_classes, count=4) is labels
    with pytest.raises(ValueError, match=r"argmax\(-1\)"):
        check_class_labels(np.eye(3), 3, count=3, probabilities=False)


def test_validation_labels_are_named_as_such():
    with pytest.raises(
        ValueError, match=r"^fit\(validation_data=...\): label 7 at index 0"
    ):
        check_class_labels([7], 2, "fit(validation_data=...)", count=1)


def test_example_counts():
    assert example_count("one text") == 1
    assert example_count(["a", "b", "c"]) == 3
    assert example_count(np.zeros((5, 8, 8))) == 5
    assert example_count({"token_ids": np.zeros((2, 7))}) == 2
    assert example_count((["a", "b"], ["c", "d"])) == 2  # two segments
    assert example_count(("a", "b")) == 2  # two texts
    assert example_count(tf.data.Dataset.range(3)) is None


def test_datasets_are_checked_by_their_spec_without_reading_them():
    texts = tf.constant(["a", "b", "c", "d"])

    def dataset(*parts):
        return tf.data.Dataset.from_tensor_slices(parts).batch(2)

    # Values are not read: a 5 for a binary model passes the spec check.
    check_dataset_labels(dataset(texts, tf.constant([0, 1, 5, 1])), 1)
    check_dataset_labels(dataset(texts, tf.constant(np.eye(4)[:, :3])), 3)
    for data, num_classes, error, message in (
        (
            dataset(texts, tf.constant(["p", "n", "p", "n"])),
            1,
            TypeError,
            r"^fit\(\) got a dataset of string labels",
        ),
        (
            tf.data.Dataset.from_tensor_slices(texts),
            1,
            ValueError,
            r"^fit\(\) got a dataset without labels",
        ),
        (
            dataset(texts, tf.zeros((4, 2))),
            1,
            ValueError,
            r"label batches have shape \(None, 2\)",
        ),
        (
            dataset(texts, tf.zeros((4, 2, 1))),
            3,
            ValueError,
            r"label batches have shape \(None, 2, 1\)",
        ),
    ):
        with pytest.raises(error, match=message) as info:
            check_dataset_labels(data, num_classes)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="probabilities"):
        check_dataset_labels(
            dataset(texts, tf.constant(np.eye(4)[:, :3])), 3, "fit", False
        )
