"""Batches of (image, caption) pairs for a captioner's `fit` and
`evaluate`, and a tiny captioning dataset for smoke runs and tests.

An image has several captions (Flickr8k: five). `CaptionPairs` serves
either every (image, caption) pair once per epoch, or every image once with
one of its captions drawn anew each epoch (an epoch then costs one encoder
pass per image). It indexes the image array batch by batch (no copy of the
images into the pipeline) and draws each epoch's order from `(seed,
epoch)`, so a run resumed at epoch e (`zoo.callbacks.ReproducibleEpochs`
sets `epoch`) sees the batches the uninterrupted run would have.
"""

import numpy as np

from zoo._tensorflow import tf
from zoo.data.text import without_autotune


class CaptionPairs:
    """(image, caption) batches over an image array and its captions.

    Args:
        images: a `(n, H, W[, C])` array: uint8 images, or feature grids.
        captions: `n` strings, or `n` lists of strings (several captions of
            one image).
        batch_size: pairs per batch.
        shuffle: a new order every epoch (from `seed` and `epoch`).
        seed: seed of the order and of the caption drawn per image; None
            draws from fresh entropy.
        one_caption_per_image: each image once per epoch, with one of its
            captions (drawn per epoch); else every pair.

    Attributes:
        epoch: the epoch whose order the next pass serves (it counts up
            after each pass; `ReproducibleEpochs` sets it).

    Raises:
        ValueError: no images, not one caption entry per image, or an image
            without a caption.

    Example:

    >>> pairs = CaptionPairs(images, captions, 64, shuffle=True, seed=1)
    >>> captioner.fit(pairs.dataset(), epochs=10,
    ...               callbacks=[ReproducibleEpochs(1, [pairs])])
    """

    def __init__(self, images, captions, batch_size=32, shuffle=False,
                 seed=None, one_caption_per_image=False):
        images = np.asarray(images) if not isinstance(images, np.ndarray) \
            else images
        if images.ndim == 0 or not len(images):
            raise ValueError("CaptionPairs needs at least one image.")
        if isinstance(captions, (str, bytes)) or len(captions) != len(
                images):
            count = 1 if isinstance(captions, (str, bytes)) else len(captions)
            raise ValueError(f"{len(images)} images but {count} caption "
                             "entries: give one caption (or one list of "
                             "captions) per image.")
        self.captions = [[c] if isinstance(c, (str, bytes)) else list(c)
                         for c in captions]
        for i, options in enumerate(self.captions):
            if not options:
                raise ValueError(f"image {i} has no caption.")
            for caption in options:
                if not isinstance(caption, (str, bytes)):
                    raise ValueError(
                        f"image {i}: captions must be strings; got "
                        f"{type(caption).__name__}.")
        self.images = images
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}.")
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.one_caption_per_image = bool(one_caption_per_image)
        self.epoch = 0
        self._entropy = np.random.default_rng(seed)

    def pairs(self, epoch=None):
        """The `(image index, caption index)` rows of an epoch, in order."""
        epoch = self.epoch if epoch is None else int(epoch)
        rng = (np.random.default_rng([int(self.seed), epoch])
               if self.seed is not None else self._entropy)
        if self.one_caption_per_image:
            rows = np.array([(i, rng.integers(len(options)))
                             for i, options in enumerate(self.captions)])
        else:
            rows = np.array([(i, j) for i, options in enumerate(self.captions)
                             for j in range(len(options))])
        if self.shuffle:
            rows = rows[rng.permutation(len(rows))]
        return rows

    def __len__(self):
        """Batches per epoch."""
        count = (len(self.captions) if self.one_caption_per_image
                 else sum(len(options) for options in self.captions))
        return -(-count // self.batch_size)

    def _batches(self):
        rows = self.pairs()
        self.epoch += 1
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start:start + self.batch_size]
            yield (self.images[chunk[:, 0]],
                   np.array([self.captions[i][j] for i, j in chunk],
                            dtype=object))

    def dataset(self):
        """A `tf.data.Dataset` of `(images, captions)` batches, one pass per
        iteration (what a task's `fit` maps its preprocessor over)."""
        images = tf.TensorSpec((None, *self.images.shape[1:]),
                               tf.as_dtype(self.images.dtype))
        dataset = tf.data.Dataset.from_generator(
            self._batches,
            output_signature=(images, tf.TensorSpec((None,), tf.string)))
        dataset = dataset.apply(
            tf.data.experimental.assert_cardinality(len(self)))
        return without_autotune(dataset)


def caption_dataset(images, captions, batch_size=32, shuffle=False,
                    seed=None, one_caption_per_image=False):
    """`CaptionPairs(...).dataset()`: `(images, captions)` batches.

    Example:

    >>> captioner.fit(caption_dataset(images, captions, 64, shuffle=True))
    """
    return CaptionPairs(images, captions, batch_size, shuffle, seed,
                        one_caption_per_image).dataset()


COLOURS = {"red": 0, "green": 1, "blue": 2}
SHAPES = ("square", "bar")


def make_synthetic_captions(count=256, size=32, seed=0):
    """Colour images of one bright shape on dark noise, captioned with its
    colour, kind and side ("a red square on the left"), with five
    phrasings each: learnable in seconds, for `--smoke` and tests.

    Returns:
        `(images, captions)`: uint8 `(count, size, size, 3)` and `count`
        lists of 5 strings.

    Example:

    >>> images, captions = make_synthetic_captions(64)
    >>> captions[0][0]
    'a red square on the left'
    """
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 50, (count, size, size, 3)).astype("uint8")
    captions = []
    half, quarter = size // 2, size // 4
    for i in range(count):
        colour = list(COLOURS)[rng.integers(len(COLOURS))]
        shape = SHAPES[rng.integers(len(SHAPES))]
        side = ("left", "right")[rng.integers(2)]
        left = 0 if side == "left" else half
        top, height = (quarter, half) if shape == "square" else (2, size - 4)
        width = half if shape == "square" else quarter
        images[i, top:top + height, left:left + width,
               COLOURS[colour]] = 230
        captions.append([f"a {colour} {shape} on the {side}",
                         f"{colour} {shape} on the {side}",
                         f"the {shape} is {colour} and on the {side}",
                         f"a {shape} in {colour} on the {side}",
                         f"a {colour} {shape} at the {side}"])
    return images, captions
