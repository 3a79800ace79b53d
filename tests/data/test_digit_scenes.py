"""zoo.data.digit_scenes: honest ink boxes, captions, disjoint digit pools,
seeding, the canvas-too-small error, and the attention measures against
hand-made maps. The "digits" are random blobs: nothing here reads MNIST."""

import doctest

import numpy as np
import pytest

from zoo.data import digit_scenes
from zoo.data.digit_scenes import (
    DIGIT_NAMES,
    attention_peaks,
    digit_scene_splits,
    exact_match_accuracy,
    localisation_accuracy,
    make_digit_scenes,
)


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Override conftest's per-test Keras reset: no Keras here."""
    yield


def blobs(count=60, seed=0):
    """28x28 "digits": a random blob of ink of random size and place, no two
    alike, and labels 0-9."""
    rng = np.random.default_rng(seed)
    x = np.zeros((count, 28, 28), np.uint8)
    for i in range(count):
        h, w = rng.integers(6, 21, size=2)
        top, left = rng.integers(0, 28 - h + 1), rng.integers(0, 28 - w + 1)
        ink = rng.integers(1, 256, size=(h, w))
        ink[rng.random((h, w)) < 0.3] = 0
        ink[0, :] = ink[-1, :] = ink[:, 0] = ink[:, -1] = 0
        ink[0, 0] = ink[-1, -1] = 255  # the blob spans its whole box
        x[i, top : top + h, left : left + w] = ink
    return x, np.arange(count) % 10


def test_boxes_hold_all_the_ink_and_the_captions_name_the_labels():
    x, y = blobs()
    scenes = make_digit_scenes(x, y, 50, seed=3)
    assert scenes.images.shape == (50, 64, 128)
    assert scenes.images.dtype == np.uint8 and len(scenes) == 50
    for n in range(50):
        image, boxes = scenes.images[n], scenes.boxes[n]
        labels, indices = scenes.labels[n], scenes.digit_indices[n]
        assert 2 <= len(boxes) <= 4 and boxes.shape[1] == 4
        assert boxes.dtype.kind == "i"
        assert scenes.captions[n] == " ".join(DIGIT_NAMES[d] for d in labels)
        np.testing.assert_array_equal(labels, y[indices])
        covered = np.zeros(image.shape, bool)
        for (top, left, bottom, right), index in zip(boxes, indices):
            crop = image[top:bottom, left:right]
            # the box is the tight box of the digit's ink, copied exactly
            rows = np.flatnonzero(x[index].any(1))
            cols = np.flatnonzero(x[index].any(0))
            np.testing.assert_array_equal(
                crop, x[index][rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
            )
            assert crop[0].any() and crop[-1].any()
            assert crop[:, 0].any() and crop[:, -1].any()
            covered[top:bottom, left:right] = True
        assert not image[~covered].any()  # no ink outside the boxes
        centres = (boxes[:, 1] + boxes[:, 3]) / 2
        assert np.all(np.diff(centres) >= 0)  # left to right
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                a, b = boxes[i], boxes[j]
                assert (
                    a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
                ), "boxes intersect"


def test_the_same_seed_gives_the_same_scenes():
    x, y = blobs()
    a = make_digit_scenes(x, y, 20, seed=5)
    b = make_digit_scenes(x, y, 20, seed=5)
    c = make_digit_scenes(x, y, 20, seed=6)
    np.testing.assert_array_equal(a.images, b.images)
    assert a.captions == b.captions
    assert all(np.array_equal(p, q) for p, q in zip(a.boxes, b.boxes))
    assert not np.array_equal(a.images, c.images)


def test_options_and_a_canvas_too_small():
    x, y = blobs()
    scenes = make_digit_scenes(
        x, y, 10, canvas_size=(40, 200), num_digits=(3, 3), seed=1
    )
    assert scenes.images.shape == (10, 40, 200)
    assert all(len(b) == 3 for b in scenes.boxes)
    square = np.zeros((5, 28, 28), np.uint8)
    square[:, 8:20, 10:18] = 200  # 12 x 8 ink
    with pytest.raises(
        ValueError,
        match=r"cannot place 3 digits .* 14x20 "
        r"canvas .*enlarge canvas_size",
    ):
        make_digit_scenes(
            square,
            np.arange(5),
            1,
            canvas_size=(14, 20),
            num_digits=(3, 3),
            max_tries=20,
        )
    with pytest.raises(ValueError, match="smaller than digit 0's ink"):
        make_digit_scenes(square, np.arange(5), 1, canvas_size=(10, 40))
    with pytest.raises(ValueError, match="no ink"):
        make_digit_scenes(np.zeros((5, 28, 28), np.uint8), np.arange(5), 1)
    with pytest.raises(ValueError, match="5 digits but 4 labels"):
        make_digit_scenes(square, np.arange(4), 1)
    with pytest.raises(ValueError, match="num_digits"):
        make_digit_scenes(square, np.arange(5), 1, num_digits=(3, 2))


def test_splits_draw_from_disjoint_digit_pools():
    x, y = blobs(80)
    data = digit_scene_splits(x, y, 60, 30, validation_fraction=0.25, seed=2)
    assert len(data["train"]) == 60 and len(data["validation"]) == 30

    def digits_in(scenes):
        found = set()
        for image, boxes in zip(scenes.images, scenes.boxes):
            for top, left, bottom, right in boxes:
                found.add(image[top:bottom, left:right].tobytes())
        return found

    train, validation = digits_in(data["train"]), digits_in(data["validation"])
    assert len(validation) > 10 and not train & validation
    used = {
        i
        for s in ("train", "validation")
        for scene in data[s].digit_indices
        for i in scene.tolist()
    }
    train_used = {i for scene in data["train"].digit_indices for i in scene}
    validation_used = {
        i for scene in data["validation"].digit_indices for i in scene
    }
    assert not train_used & validation_used and max(used) < 80
    for scene, labels in zip(
        data["validation"].digit_indices, data["validation"].labels
    ):
        np.testing.assert_array_equal(y[scene], labels)
    again = digit_scene_splits(x, y, 60, 30, validation_fraction=0.25, seed=2)
    np.testing.assert_array_equal(
        again["validation"].images, data["validation"].images
    )


def test_mnist_digits_from_a_local_npz(tmp_path):
    x, y = blobs(12)
    np.savez(
        tmp_path / "digits.npz", x=x[:8], y=y[:8], x_test=x[8:], y_test=y[8:]
    )
    loaded_x, loaded_y = digit_scenes.load_mnist_digits(
        str(tmp_path / "digits.npz")
    )
    np.testing.assert_array_equal(loaded_x, x)
    assert loaded_y.tolist() == y.tolist()


def test_attention_peaks_are_cell_centres_in_pixels():
    maps = np.zeros((3, 4, 8))
    maps[0, 0, 0] = 1.0
    maps[1, 3, 7] = 0.9
    maps[2, 2, 5] = 0.5
    peaks = attention_peaks(maps, (64, 128))
    np.testing.assert_allclose(peaks, [[8, 8], [56, 120], [40, 88]])


def _peak_at(rows, cols, cell):
    m = np.full((rows, cols), 0.01)
    m[cell] = 1.0
    return m


def test_localisation_follows_repeated_names_left_to_right():
    # Scene 64x128 on a 4x8 grid of 16-pixel cells: seven | two | seven.
    boxes = [np.array([[10, 0, 40, 20], [20, 50, 50, 70], [30, 100, 60, 124]])]
    labels = [np.array([7, 2, 7])]
    left_seven, two, right_seven = (1, 0), (2, 3), (3, 6)
    words = ["seven", "two", "seven", "<end>"]
    maps = np.stack(
        [_peak_at(4, 8, c) for c in (left_seven, two, right_seven, (0, 0))]
    )
    assert localisation_accuracy([words], [maps], boxes, labels, (64, 128)) == (
        1.0,
        3,
    )
    # the two sevens' looks swapped: each names the other seven
    swapped = maps[[2, 1, 0, 3]]
    assert localisation_accuracy(
        [words], [swapped], boxes, labels, (64, 128)
    ) == (pytest.approx(1 / 3), 3)
    # a wrong word (no four in the scene) and one seven too many
    wrong = ["four", "seven", "two", "seven", "seven"]
    maps = np.stack(
        [
            _peak_at(4, 8, c)
            for c in ((2, 3), left_seven, two, right_seven, right_seven)
        ]
    )
    share, counted = localisation_accuracy(
        [" ".join(wrong)], [maps], boxes, labels, (64, 128)
    )
    assert counted == 5 and share == pytest.approx(3 / 5)
    # two scenes together; a scene with no digit names counts nothing
    share, counted = localisation_accuracy(
        [["two"], ["a"]],
        [_peak_at(4, 8, two)[None], np.ones((1, 4, 8))],
        boxes * 2,
        labels * 2,
        (64, 128),
    )
    assert (share, counted) == (1.0, 1)
    share, counted = localisation_accuracy(
        [[]], [np.zeros((0, 4, 8))], boxes, labels, (64, 128)
    )
    assert counted == 0 and np.isnan(share)
    # a thin "one" (3 pixels wide) holds no cell centre: the peak counts
    # when its 16-pixel cell overlaps the ink box, not a cell beside it
    thin = [np.array([[10, 20, 40, 23]])]
    assert localisation_accuracy(
        [["one"]], [_peak_at(4, 8, (1, 1))[None]], thin, [[1]], (64, 128)
    ) == (1.0, 1)
    assert localisation_accuracy(
        [["one"]], [_peak_at(4, 8, (1, 2))[None]], thin, [[1]], (64, 128)
    ) == (0.0, 1)
    with pytest.raises(ValueError, match="2 words but 1 attention maps"):
        localisation_accuracy(
            [["two", "seven"]], [np.ones((1, 4, 8))], boxes, labels, (64, 128)
        )


def test_exact_match():
    generated = ["seven two", ["one", "four"], "nine", "three  three"]
    references = ["seven two", "one four", "eight", "three three"]
    assert exact_match_accuracy(generated, references) == 0.75
    with pytest.raises(ValueError, match="2 generated captions but 1"):
        exact_match_accuracy(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no captions"):
        exact_match_accuracy([], [])


def test_docstring_examples():
    result = doctest.testmod(digit_scenes)
    assert result.failed == 0 and result.attempted > 0
