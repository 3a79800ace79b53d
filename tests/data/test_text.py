"""zoo.data.text: raw-text datasets for the tasks' fit, and fit's shuffling
of arrays."""

import warnings

import numpy as np
import pytest

from zoo.data.text import (
    check_texts,
    excerpt,
    fit_dataset,
    text_batch,
    text_dataset,
    texts_of,
)


def batches(dataset):
    return [[np.asarray(part) for part in batch] for batch in dataset]


def test_text_dataset_batches_strings_and_labels_in_order():
    texts = [f"review {i}" for i in range(10)]
    labels = np.arange(10) % 2
    got = batches(text_dataset(texts, labels, batch_size=4))
    assert [len(b[0]) for b in got] == [4, 4, 2]
    assert [t.decode() for b in got for t in b[0]] == texts
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), labels)
    strings = [np.asarray(b) for b in text_dataset(texts, batch_size=5)]
    assert [len(b) for b in strings] == [5, 5]


def test_text_dataset_shuffles_by_seed_every_epoch_without_autotune():
    texts = [f"review {i}" for i in range(20)]
    dataset = text_dataset(
        texts, np.arange(20), batch_size=20, shuffle=True, seed=1
    )
    first, second = (batches(dataset)[0][1] for _ in range(2))
    assert sorted(first) == list(range(20)) and list(first) != list(second)
    again = text_dataset(
        texts, np.arange(20), batch_size=20, shuffle=True, seed=1
    )
    np.testing.assert_array_equal(batches(again)[0][1], first)
    # No autotuner thread: dropping its iterators (Keras does at every
    # epoch end) stalled PyTorch training for seconds each time.
    assert dataset.options().autotune.enabled is False


def test_text_dataset_errors():
    with pytest.raises(ValueError, match="at least one text"):
        text_dataset([])
    with pytest.raises(ValueError, match="3 texts but 2 labels"):
        text_dataset(["a", "b", "c"], [0, 1])


def test_fit_dataset_shuffles_arrays_and_leaves_datasets_alone():
    texts = [f"review {i}" for i in range(12)]
    x, y, weights, batch_size = fit_dataset(texts, np.arange(12), None, 5)
    assert y is None and weights is None and batch_size is None
    got = batches(x)
    assert [len(b[0]) for b in got] == [5, 5, 2]
    assert sorted(np.concatenate([b[1] for b in got])) == list(range(12))
    dataset = text_dataset(texts, batch_size=3)
    assert fit_dataset(dataset, None, None, None)[0] is dataset
    assert fit_dataset(texts, [1] * 12, None, 4, shuffle=False) == (
        texts,
        [1] * 12,
        None,
        4,
    )


def test_fit_dataset_shuffles_a_dict_of_inputs_over_all_its_examples():
    # Not over its two entries: the shuffle buffer was once len(dict).
    rows = np.arange(20)
    x = {
        "token_ids": np.stack([rows, rows], -1),
        "padding_mask": np.ones((20, 2)),
    }
    dataset, *_ = fit_dataset(x, None, None, 20)
    order = np.asarray(next(iter(dataset))[0]["token_ids"])[:, 0]
    assert sorted(order) == list(rows)
    # A buffer of 2 moves no row more than one place ahead.
    assert (rows[order] - np.arange(20)).max() > 1


def test_a_tuple_of_texts_is_a_batch_and_segments_hold_as_many_texts():
    # A list, which keras-hub cannot take for (x, y) as it would a tuple.
    assert text_batch(("a film", "a play"), "predict") == ["a film", "a play"]
    with pytest.raises(
        ValueError, match=r"^predict\(\) got segments of 2 and 1 texts: "
    ):
        text_batch((["a", "b"], ["c"]), "predict", segments=True)
    with pytest.raises(
        ValueError,
        match=r"^generate\(\): prompt 1 is bytes that are not UTF-8 \(byte "
        r"offset 1\)",
    ):
        texts_of([b"ok", b"a\xff"], "generate", "prompt")


def test_text_batch_and_texts_of_take_strings_and_name_anything_else():
    assert text_batch("one", "predict") == ["one"]
    words = np.array(["a", "b"])
    assert text_batch(words, "predict") is words
    assert text_batch((["a", "b"], ["c", "d"]), "fit", segments=True) == (
        ["a", "b"],
        ["c", "d"],
    )
    for bad, shown in (
        (["a", 1], "int 1"),
        ([None], "None"),
        (None, "None"),
        (3, "int 3"),
        (np.array([0.5]), "float 0.5"),
        (np.array([[1, 2]]), "int 1"),  # the type, whatever the shape
    ):
        with pytest.raises(
            TypeError,
            match=f"evaluate\\(\\) reads text, but got {shown}: pass a string",
        ):
            text_batch(bad, "evaluate")
    with pytest.raises(ValueError, match="no texts"):
        text_batch([], "predict")
    assert texts_of(b"caf\xc3\xa9", "generate") == (["café"], True)
    assert texts_of(np.array([["a"], ["b"]]), "generate") == (["a", "b"], False)
    with pytest.raises(
        TypeError,
        match="got None: pass a string or a list of strings, or ids",
    ):
        texts_of(None, "generate", hint=", or ids")
    with pytest.raises(ValueError, match="needs at least one prompt"):
        texts_of([], "generate", "prompt")


def test_a_text_is_a_string_in_a_flat_batch_or_one_line_says_what_is_not():
    # A 0-d array holds one text (as a lone string does); a column (n, 1),
    # from a data frame say, is its n texts.
    assert text_batch(np.array("one"), "predict") == ["one"]
    assert texts_of(np.array("one"), "generate") == (["one"], True)
    assert check_texts([["a"], ["b"]], "predict") == ["a", "b"]
    assert list(check_texts(np.array([["a"], ["b"]]), "predict")) == ["a", "b"]
    # Anything nested beyond a column names its shape, in one line.
    for bad, shown in (
        ([["a film", "dull"]], "a nested list \\(item 0 is a list of 2\\)"),
        (["a", ["b", "c"]], "a nested list \\(item 1 is a list of 2\\)"),
        ([["a"], ["b", "c"]], "a nested list \\(item 1 is a list of 2\\)"),
        (np.array([["a", "b"]]), "a 2-D array of shape \\(1, 2\\)"),
    ):
        for check in (text_batch, texts_of):
            with pytest.raises(
                ValueError, match=f"reads a string .* got {shown}"
            ) as e:
                check(bad, "predict")
            assert "\n" not in str(e.value)
    # Without segments a tuple is a batch; with them, each is checked.
    assert check_texts(("a", "b"), "predict") == ["a", "b"]
    with pytest.raises(ValueError, match="nested list"):
        check_texts((["a"], ["b", "c"]), "predict")
    with pytest.raises(TypeError, match="reads text, but got None"):
        check_texts((["a"], None), "predict", segments=True)
    # Datasets, tensors and dicts are the pipeline's to read.
    feed = {"token_ids": np.zeros((1, 2))}
    assert check_texts(feed, "predict") is feed


def test_an_excerpt_quotes_the_start_of_a_long_text():
    assert excerpt("short") == "'short'"
    long = excerpt("x" * 100_000)
    assert long == repr("x" * 60) + "..." and len(long) < 70
    assert excerpt(b"caf\xc3\xa9") == "'café'"


def test_empty_or_blank_texts_are_a_warning_naming_how_many():
    with pytest.warns(
        UserWarning,
        match=r"predict\(\): 2 of 3 texts are "
        r"empty or blank \(the first at "
        r"index 1\)",
    ):
        assert text_batch(["fine", "", " \n"], "predict") == ["fine", "", " \n"]
    with pytest.warns(UserWarning, match="1 of 1 texts"):
        assert text_batch("", "predict") == [""]
    with pytest.warns(UserWarning, match="1 of 2 texts .* index 0"):
        text_batch(np.array(["", "fine"]), "evaluate")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text_batch(["fine", "dull"], "predict")
        text_batch(np.array(["fine"]), "fit")


def test_split_validation_arrays_holds_out_the_last_part_as_keras_does():
    from zoo.data.text import split_validation_arrays

    x = np.arange(10).reshape(10, 1)
    y = np.arange(10) * 2
    (train_x, train_y, weights), validation = split_validation_arrays(
        x, y, None, 0.3
    )
    np.testing.assert_array_equal(train_x[:, 0], np.arange(7))
    assert weights is None
    np.testing.assert_array_equal(validation[0][:, 0], [7, 8, 9])
    np.testing.assert_array_equal(validation[1], [14, 16, 18])
    (texts, _, _), validation = split_validation_arrays(
        ["a", "b", "c", "d"], [0, 1, 0, 1], [1.0, 1.0, 2.0, 2.0], 0.5
    )
    assert texts == ["a", "b"] and validation[0] == ["c", "d"]
    assert validation[2] == [2.0, 2.0]
    same, none = split_validation_arrays(x, y, None, None)
    assert same[0] is x and none is None
    with pytest.raises(ValueError, match="no training or no validation"):
        split_validation_arrays(x[:2], y[:2], None, 0.6)


def test_fit_on_no_examples_is_a_clear_error():
    with pytest.raises(ValueError, match="no examples"):
        fit_dataset([], [])
    with pytest.raises(ValueError, match="no examples"):
        fit_dataset(np.zeros((0, 4)), np.zeros((0,)))
