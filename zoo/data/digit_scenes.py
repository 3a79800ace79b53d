"""Digit scenes: a captioning dataset whose attention can be checked.

Each scene is a black canvas with 2 to 4 real MNIST digits at random,
non-overlapping places, captioned with their names left to right
("seven two nine"). The box of every digit is known, so besides the
captions it measures where a captioner looks: `localisation_accuracy` counts
the generated digit names whose attention peak lies inside the box of the
digit they name.

A digit's box is the tight box of its ink (the nonzero pixels of its 28x28
cell), not the cell: the cells of neighbouring digits may overlap on the
canvas (their pixels combine with max) while their ink boxes stay apart,
so "inside the box" means on the digit.

Example:

>>> x, y = load_mnist_digits("mnist.npz")  # doctest: +SKIP
>>> data = digit_scene_splits(x, y, 20000, 1000)  # doctest: +SKIP
>>> data["train"].images.shape, data["train"].captions[0]  # doctest: +SKIP
((20000, 64, 128), 'seven two nine')
"""

import dataclasses

import numpy as np

from zoo.data.download import DataNotFoundError

DIGIT_NAMES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
)
_NAME_TO_DIGIT = {name: digit for digit, name in enumerate(DIGIT_NAMES)}


@dataclasses.dataclass
class DigitScenes:
    """Generated scenes.

    Attributes:
        images: uint8 `(count, height, width)` grey canvases.
        captions: the digits' names left to right, e.g. "seven two nine".
        boxes: per scene a `(k, 4)` int array of `(top, left, bottom,
            right)` ink boxes (bottom and right exclusive), left to right.
        labels: per scene the `(k,)` digits, in the boxes' order.
        digit_indices: per scene the `(k,)` indices of the digits in the
            pool they were drawn from, in the boxes' order.
    """

    images: np.ndarray
    captions: list
    boxes: list
    labels: list
    digit_indices: list

    def __len__(self):
        return len(self.captions)


def _as_pool(digits, labels):
    digits = np.asarray(digits)
    if digits.ndim == 4 and digits.shape[-1] == 1:
        digits = digits[..., 0]
    if digits.ndim != 3 or not len(digits):
        raise ValueError(
            f"digits must be a non-empty (N, height, width) "
            f"batch of grey images; got shape {digits.shape}."
        )
    if digits.dtype != np.uint8:
        values = digits.astype(np.float64)
        if values.size and values.max() <= 1.0:
            values = values * 255.0
        digits = np.clip(np.round(values), 0, 255).astype(np.uint8)
    labels = np.asarray(labels).reshape(-1)
    if len(labels) != len(digits):
        raise ValueError(f"{len(digits)} digits but {len(labels)} labels.")
    if labels.size and (
        labels.min() < 0
        or labels.max() > 9
        or not np.all(labels == np.round(labels))
    ):
        raise ValueError("labels must be integers from 0 to 9.")
    return digits, labels.astype(np.int64)


def _ink_box(digit):
    rows = np.flatnonzero(digit.any(axis=1))
    cols = np.flatnonzero(digit.any(axis=0))
    if not rows.size:
        return None
    return rows[0], cols[0], rows[-1] + 1, cols[-1] + 1


def make_digit_scenes(
    digits,
    labels,
    count,
    canvas_size=(64, 128),
    num_digits=(2, 4),
    gap=2,
    seed=0,
    max_tries=200,
):
    """Scenes of 2-4 digits from a pool, at random non-overlapping places.

    Each scene draws `k` digits (uniform in `num_digits`, inclusive) from
    the pool without repetition and places each one's ink box at a uniform
    random position on the canvas, rejecting positions whose box comes
    within `gap` pixels of another (rejection sampling; the whole scene is
    redrawn when a digit does not fit). Pixels combine with max.

    Args:
        digits: `(N, h, w)` grey digits (uint8, or floats in [0, 1] or
            [0, 255]), e.g. MNIST's 28x28.
        labels: `(N,)` their digits, 0 to 9.
        count: how many scenes.
        canvas_size: `(height, width)` of a scene.
        num_digits: `(fewest, most)` digits in a scene.
        gap: the least number of empty pixels between two ink boxes.
        seed: the scenes are a function of the pool and the seed.
        max_tries: placements tried per scene before the canvas is
            declared too small.

    Returns:
        A `DigitScenes`.

    Raises:
        ValueError: bad arguments, a digit without ink, or a canvas that
            cannot fit the digits (the message says what to change).

    Example:

    >>> blobs = np.zeros((10, 28, 28), "uint8"); blobs[:, 8:20, 10:18] = 255
    >>> scenes = make_digit_scenes(blobs, np.arange(10), 2, seed=1)
    >>> scenes.images.shape
    (2, 64, 128)
    >>> len(scenes.captions[0].split()) == len(scenes.boxes[0])
    True
    """
    digits, labels = _as_pool(digits, labels)
    height, width = (int(n) for n in canvas_size)
    fewest, most = (int(n) for n in num_digits)
    if not 1 <= fewest <= most:
        raise ValueError(
            f"num_digits must be (fewest, most) with 1 <= fewest "
            f"<= most; got {num_digits!r}."
        )
    if most > len(digits):
        raise ValueError(
            f"scenes of up to {most} digits need a pool of at "
            f"least {most} digits; got {len(digits)}."
        )
    if int(count) < 0:
        raise ValueError(f"count must be >= 0; got {count!r}.")
    crops, sizes = [], np.zeros((len(digits), 2), np.int64)
    for i, digit in enumerate(digits):
        box = _ink_box(digit)
        if box is None:
            raise ValueError(f"digit {i} of the pool has no ink (all zero).")
        top, left, bottom, right = box
        crops.append(digit[top:bottom, left:right])
        sizes[i] = bottom - top, right - left
    too_big = np.flatnonzero((sizes[:, 0] > height) | (sizes[:, 1] > width))
    if too_big.size:
        raise ValueError(
            f"the canvas {height}x{width} is smaller than digit "
            f"{too_big[0]}'s ink ({sizes[too_big[0], 0]}x"
            f"{sizes[too_big[0], 1]}); enlarge canvas_size."
        )

    rng = np.random.default_rng(seed)
    images = np.zeros((int(count), height, width), np.uint8)
    captions, all_boxes, all_labels, all_indices = [], [], [], []
    for n in range(int(count)):
        k = int(rng.integers(fewest, most + 1))
        for _ in range(max_tries):
            chosen = rng.integers(0, len(digits), size=k)
            while len(set(chosen.tolist())) < k:  # no digit twice
                chosen = rng.integers(0, len(digits), size=k)
            boxes = []
            for index in chosen:
                h, w = sizes[index]
                for _ in range(max_tries):
                    top = int(rng.integers(0, height - h + 1))
                    left = int(rng.integers(0, width - w + 1))
                    if all(
                        top >= b + gap
                        or top + h + gap <= t
                        or left >= r + gap
                        or left + w + gap <= box_left
                        for t, box_left, b, r in boxes
                    ):
                        boxes.append((top, left, top + h, left + w))
                        break
                else:
                    break  # this digit does not fit: redraw the scene
            if len(boxes) == k:
                break
        else:
            raise ValueError(
                f"cannot place {k} digits {gap} pixels apart on a "
                f"{height}x{width} canvas in {max_tries} tries; enlarge "
                "canvas_size or lower num_digits or gap."
            )
        boxes = np.array(boxes, np.int64)
        order = np.lexsort(
            ((boxes[:, 0] + boxes[:, 2]), (boxes[:, 1] + boxes[:, 3]))
        )
        boxes, chosen = boxes[order], chosen[order]
        for (top, left, bottom, right), index in zip(boxes, chosen):
            region = images[n, top:bottom, left:right]
            np.maximum(region, crops[index], out=region)
        all_boxes.append(boxes)
        all_labels.append(labels[chosen])
        all_indices.append(chosen.astype(np.int64))
        captions.append(" ".join(DIGIT_NAMES[d] for d in labels[chosen]))
    return DigitScenes(
        images=images,
        captions=captions,
        boxes=all_boxes,
        labels=all_labels,
        digit_indices=all_indices,
    )


def digit_scene_splits(
    x,
    y,
    train_count,
    validation_count,
    validation_fraction=0.1,
    seed=0,
    **scene_options,
):
    """Train and validation scenes from disjoint pools of digits.

    The digit indices are split first (a seeded permutation;
    `validation_fraction` of them for validation), so no digit image is in
    both splits' scenes.

    Args:
        x: `(N, h, w)` grey digits.
        y: `(N,)` their labels.
        train_count: how many training scenes.
        validation_count: how many validation scenes.
        validation_fraction: the share of the digits kept for validation.
        seed: seeds the split and both splits' scenes.
        **scene_options: passed to `make_digit_scenes` (`canvas_size`,
            `num_digits`, `gap`).

    Returns:
        `{"train": DigitScenes, "validation": DigitScenes}`; their
        `digit_indices` index `x`.

    Example:

    >>> blobs = np.zeros((40, 28, 28), "uint8"); blobs[:, 8:20, 10:18] = 255
    >>> data = digit_scene_splits(blobs, np.arange(40) % 10, 8, 4, 0.25)
    >>> len(data["train"]), len(data["validation"])
    (8, 4)
    """
    x, y = _as_pool(x, y)
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(
            f"validation_fraction must be in (0, 1); got {validation_fraction}."
        )
    split_seed, train_seed, validation_seed = (
        int(s.generate_state(1)[0])
        for s in np.random.SeedSequence(seed).spawn(3)
    )
    order = np.random.default_rng(split_seed).permutation(len(x))
    held = round(validation_fraction * len(x))
    pools = {"train": order[held:], "validation": order[:held]}
    counts = {"train": train_count, "validation": validation_count}
    seeds = {"train": train_seed, "validation": validation_seed}
    result = {}
    for split, pool in pools.items():
        scenes = make_digit_scenes(
            x[pool], y[pool], counts[split], seed=seeds[split], **scene_options
        )
        scenes.digit_indices = [pool[i] for i in scenes.digit_indices]
        result[split] = scenes
    return result


def load_mnist_digits(path=None):
    """`(x, y)` MNIST digits: uint8 `(N, 28, 28)` and int32 labels.

    Args:
        path: a local `.npz` with arrays `x` and `y` (and optionally
            `x_test`, `y_test`, appended). When None, Keras' MNIST download
            (train and test digits together, 70,000).

    Raises:
        DataNotFoundError: a missing or unreadable file, no network, or
            images that are not grey.
    """
    from zoo.data.images import load_images, load_npz

    splits = load_npz(path) if path is not None else load_images("mnist")
    x = np.concatenate([splits[s][0] for s in ("train", "test") if s in splits])
    y = np.concatenate([splits[s][1] for s in ("train", "test") if s in splits])
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 3:
        raise DataNotFoundError(
            f"{path or 'mnist'}: images of shape {x.shape[1:]} are not grey "
            "digits (expected (N, height, width))."
        )
    return x, y.astype(np.int32)


# --------------------------------------------------------------------------
# measuring attention


def attention_peaks(maps, image_size):
    """Where each attention map peaks, in image pixels.

    Args:
        maps: `(words, rows, columns)` attention over a grid laid evenly
            over the image.
        image_size: `(height, width)` of the image.

    Returns:
        `(words, 2)` floats: the `(y, x)` centre of each map's largest cell
        (the first one on ties).

    Example:

    >>> maps = np.zeros((1, 2, 4)); maps[0, 1, 2] = 1.0
    >>> attention_peaks(maps, (64, 128)).tolist()
    [[48.0, 80.0]]
    """
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim != 3 or 0 in maps.shape[1:]:
        raise ValueError(
            f"maps must be (words, rows, columns); got shape {maps.shape}."
        )
    if not np.all(np.isfinite(maps)):
        raise ValueError("maps contain NaN or infinite values.")
    words, rows, columns = maps.shape
    height, width = (float(n) for n in image_size)
    cells = maps.reshape(words, -1).argmax(axis=1)
    row, column = np.divmod(cells, columns)
    return np.stack(
        [(row + 0.5) * height / rows, (column + 0.5) * width / columns], axis=1
    )


def localisation_accuracy(
    words_per_scene, maps_per_scene, boxes, labels, image_size
):
    """The share of generated digit names whose attention peak lies on the
    digit they name.

    The j-th generated "seven" of a scene names the j-th seven of the
    scene counted left to right; it is localised when the peak of its map,
    the grid cell of largest weight (`attention_peaks` gives its centre),
    lies on that digit: the cell overlaps the digit's ink box. (A cell is
    what the attention can point at: on an 8-pixel grid a "1" three pixels
    wide may hold no cell centre at all.) A digit name with no
    such digit in the scene (a wrong word, or one "seven" too many) counts
    as not localised; words that are not digit names are not counted.

    Args:
        words_per_scene: per scene the generated words (a list of strings,
            or one string split on spaces).
        maps_per_scene: per scene `(len(words), rows, columns)` attention
            maps, one per generated word.
        boxes: per scene `(k, 4)` `(top, left, bottom, right)` boxes, left
            to right (`DigitScenes.boxes`).
        labels: per scene `(k,)` digits in the same order.
        image_size: `(height, width)` of the scenes.

    Returns:
        `(share, counted)`: the localised share of the `counted` digit
        names (NaN when none was generated).

    Example:

    >>> maps = np.zeros((2, 1, 4)); maps[0, 0, 0] = maps[1, 0, 3] = 1.0
    >>> boxes = [np.array([[0, 0, 64, 32], [0, 96, 64, 128]])]
    >>> localisation_accuracy([["one", "two"]], [maps], boxes, [[1, 2]],
    ...                       (64, 128))
    (1.0, 2)
    """
    scenes = len(words_per_scene)
    if not (len(maps_per_scene) == len(boxes) == len(labels) == scenes):
        raise ValueError(
            f"{scenes} word lists, {len(maps_per_scene)} map arrays, "
            f"{len(boxes)} box arrays and {len(labels)} label arrays: one "
            "each per scene."
        )
    localised = counted = 0
    for n in range(scenes):
        words = words_per_scene[n]
        words = words.split() if isinstance(words, str) else list(words)
        maps = np.asarray(maps_per_scene[n], dtype=np.float64)
        if len(maps) != len(words):
            raise ValueError(
                f"scene {n}: {len(words)} words but {len(maps)} "
                "attention maps; give one map per word."
            )
        scene_boxes = np.asarray(boxes[n]).reshape(-1, 4)
        scene_labels = np.asarray(labels[n]).reshape(-1)
        if not words:
            continue
        peaks = attention_peaks(maps, image_size)
        half = (
            image_size[0] / maps.shape[1] / 2,
            image_size[1] / maps.shape[2] / 2,
        )
        seen = {}
        for word, (y, x) in zip(words, peaks):
            digit = _NAME_TO_DIGIT.get(word)
            if digit is None:
                continue
            counted += 1
            j = seen.get(digit, 0)
            seen[digit] = j + 1
            matches = np.flatnonzero(scene_labels == digit)
            if j >= len(matches):
                continue
            top, left, bottom, right = scene_boxes[matches[j]]
            if (
                y + half[0] > top
                and y - half[0] < bottom
                and x + half[1] > left
                and x - half[1] < right
            ):
                localised += 1
    return (localised / counted if counted else float("nan")), counted


def exact_match_accuracy(generated, references):
    """The share of generated captions equal to their reference (words
    compared after splitting on whitespace).

    Args:
        generated: captions, each a string or a list of words.
        references: the true captions, in the same order.

    Returns:
        A float in [0, 1].

    Example:

    >>> exact_match_accuracy(["seven two", "one"], ["seven  two", "four"])
    0.5
    """
    if len(generated) != len(references):
        raise ValueError(
            f"{len(generated)} generated captions but "
            f"{len(references)} references."
        )
    if not len(generated):
        raise ValueError("no captions to compare.")

    def words(caption):
        return caption.split() if isinstance(caption, str) else list(caption)

    same = sum(words(g) == words(r) for g, r in zip(generated, references))
    return same / len(generated)
