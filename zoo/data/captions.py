"""Batches of (image, caption) pairs for a captioner's `fit` and
`evaluate`, and a tiny captioning dataset for smoke runs and tests.

An image has several captions (Flickr8k: five). `CaptionPairs` serves
either every (image, caption) pair once per epoch, or every image once with
one of its captions drawn anew each epoch (an epoch then costs one encoder
pass per image). It indexes the image array batch by batch (no copy of the
images into the pipeline) and draws each epoch's order from `(seed,
epoch)`, so a run resumed at epoch e (`zoo.callbacks.ReproducibleEpochs`
sets `epoch`) sees the batches the uninterrupted run would have.

Given the captioner's preprocessor, it is also a `keras.utils.PyDataset`
of model-ready batches: every caption is tokenized once, up front, and a
batch is the images (as float32) with their token ids, targets and
weights, with no string processing per step.
"""

import keras
import numpy as np

from zoo._tensorflow import tf
from zoo.data.text import without_autotune


class CaptionPairs(keras.utils.PyDataset):
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
        preprocessor: an `ImageCaptionerPreprocessor`: the batches
            (`pairs[i]`, what `fit` reads from a `PyDataset`) are then its
            outputs, `(x, y, sample_weight)`, with every caption tokenized
            once here; the images must be at the model's size already.

    Attributes:
        epoch: the epoch whose order the next pass serves (it counts up
            after each pass; `ReproducibleEpochs` sets it).

    Raises:
        ValueError: no images, not one caption entry per image, or an image
            without a caption.
        TypeError: a caption that is not a string (a number, None).

    Example (8 images of 5 captions each: 40 pairs):

    >>> from zoo.data.tokenizers import train_subword_tokenizer
    >>> from zoo.models.captioning import ImageCaptionerPreprocessor
    >>> images, captions = make_synthetic_captions(8)
    >>> tokenizer = train_subword_tokenizer(
    ...     [c for five in captions for c in five], 30, model_type="word")
    >>> preprocessor = ImageCaptionerPreprocessor(
    ...     tokenizer, (32, 32), decoder_sequence_length=12)
    >>> pairs = CaptionPairs(images, captions, 16, shuffle=True, seed=1,
    ...                      preprocessor=preprocessor)
    >>> len(pairs)
    3
    >>> x, y, sample_weight = pairs[0]
    >>> x["images"].shape, x["decoder_token_ids"].shape, y.shape
    ((16, 32, 32, 3), (16, 12), (16, 12))
    >>> len(CaptionPairs(images, captions, 16, one_caption_per_image=True))
    1

    A captioner trains on it with `captioner.fit(pairs, epochs=10,
    callbacks=[ReproducibleEpochs(1, [pairs])])`: each epoch's order
    follows `(seed, epoch)`, so a resumed run sees the same batches.
    """

    def __init__(
        self,
        images,
        captions,
        batch_size=32,
        shuffle=False,
        seed=None,
        one_caption_per_image=False,
        preprocessor=None,
    ):
        super().__init__(workers=1, use_multiprocessing=False)
        images = (
            np.asarray(images) if not isinstance(images, np.ndarray) else images
        )
        if images.ndim == 0 or not len(images):
            raise ValueError("CaptionPairs needs at least one image.")
        if isinstance(captions, (str, bytes)) or len(captions) != len(images):
            count = 1 if isinstance(captions, (str, bytes)) else len(captions)
            raise ValueError(
                f"{len(images)} images but {count} caption "
                "entries: give one caption (or one list of "
                "captions) per image."
            )
        self.captions = [
            list(c) if isinstance(c, (list, tuple, np.ndarray)) else [c]
            for c in captions
        ]
        for i, options in enumerate(self.captions):
            if not options:
                raise ValueError(f"image {i} has no caption.")
            for caption in options:
                if not isinstance(caption, (str, bytes)):
                    raise TypeError(
                        f"image {i}: captions must be strings; got "
                        f"{type(caption).__name__} {caption!r:.40}."
                    )
        self.images = images
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}.")
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.one_caption_per_image = bool(one_caption_per_image)
        self.epoch = 0
        self._entropy = np.random.default_rng(seed)
        self.preprocessor = preprocessor
        self._token_ids = None
        if preprocessor is not None:
            self._tokenize_all(preprocessor)

    def _tokenize_all(self, preprocessor):
        """Token ids and masks of every caption, `(pairs, length + 1)`, and
        the row of caption `j` of image `i`."""
        flat = [c for options in self.captions for c in options]
        ids, masks = [], []
        for start in range(0, len(flat), 4096):
            token_ids, mask = preprocessor.tokenize(flat[start : start + 4096])
            ids.append(np.asarray(keras.ops.convert_to_numpy(token_ids)))
            masks.append(np.asarray(keras.ops.convert_to_numpy(mask)))
        self._token_ids = np.concatenate(ids).astype("int32")
        self._masks = np.concatenate(masks).astype("int32")
        self._first_row = np.cumsum(
            [0] + [len(options) for options in self.captions]
        )[:-1]
        expected = (*preprocessor.image_size, preprocessor.num_channels)
        shape = self.images.shape[1:]
        if (shape if len(shape) == 3 else (*shape, 1)) != expected:
            raise ValueError(
                f"images of shape {tuple(shape)}; the preprocessor reads "
                f"{expected}: resize them first (preprocessor.image_batch)."
            )

    def pairs(self, epoch=None):
        """The `(image index, caption index)` rows of an epoch, in order."""
        epoch = self.epoch if epoch is None else int(epoch)
        rng = (
            np.random.default_rng([int(self.seed), epoch])
            if self.seed is not None
            else self._entropy
        )
        if self.one_caption_per_image:
            rows = np.array(
                [
                    (i, rng.integers(len(options)))
                    for i, options in enumerate(self.captions)
                ]
            )
        else:
            rows = np.array(
                [
                    (i, j)
                    for i, options in enumerate(self.captions)
                    for j in range(len(options))
                ]
            )
        if self.shuffle:
            rows = rows[rng.permutation(len(rows))]
        return rows

    def __len__(self):
        """Batches per epoch."""
        count = (
            len(self.captions)
            if self.one_caption_per_image
            else sum(len(options) for options in self.captions)
        )
        return -(-count // self.batch_size)

    def __getitem__(self, index):
        """Batch `index` of the current epoch, preprocessed: `(x, y,
        sample_weight)` NumPy arrays (needs the preprocessor)."""
        if self.preprocessor is None:
            raise ValueError(
                "CaptionPairs serves ready batches only with "
                "the preprocessor; else use dataset()."
            )
        if self._order is None or self._order[0] != self.epoch:
            self._order = (self.epoch, self.pairs())
        chunk = self._order[1][
            index * self.batch_size : (index + 1) * self.batch_size
        ]
        if not len(chunk):
            raise IndexError(index)
        rows = self._first_row[chunk[:, 0]] + chunk[:, 1]
        ids, mask = self._token_ids[rows], self._masks[rows]
        images = self.images[chunk[:, 0]].astype("float32")
        if images.ndim == 3:
            images = images[..., None]
        x = {
            "images": images,
            "decoder_token_ids": ids[:, :-1],
            "decoder_padding_mask": mask[:, :-1],
        }
        return x, ids[:, 1:], mask[:, 1:].astype("float32")

    def on_epoch_end(self):
        self.epoch += 1

    _order = None

    def _batches(self):
        rows = self.pairs()
        self.epoch += 1
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            yield (
                self.images[chunk[:, 0]],
                np.array([self.captions[i][j] for i, j in chunk], dtype=object),
            )

    def dataset(self):
        """A `tf.data.Dataset` of `(images, captions)` batches, one pass per
        iteration (what a task's `fit` maps its preprocessor over)."""
        images = tf.TensorSpec(
            (None, *self.images.shape[1:]), tf.as_dtype(self.images.dtype)
        )
        dataset = tf.data.Dataset.from_generator(
            self._batches,
            output_signature=(images, tf.TensorSpec((None,), tf.string)),
        )
        dataset = dataset.apply(
            tf.data.experimental.assert_cardinality(len(self))
        )
        return without_autotune(dataset)


def caption_dataset(
    images,
    captions,
    batch_size=32,
    shuffle=False,
    seed=None,
    one_caption_per_image=False,
):
    """`CaptionPairs(...).dataset()`: `(images, captions)` batches.

    Example (what `captioner.fit(dataset)` reads):

    >>> images, captions = make_synthetic_captions(8)
    >>> dataset = caption_dataset(images, captions, 16, shuffle=True, seed=0)
    >>> len(dataset)  # 40 (image, caption) pairs
    3
    >>> images, texts = next(iter(dataset))
    >>> tuple(images.shape), tuple(texts.shape)
    ((16, 32, 32, 3), (16,))
    """
    return CaptionPairs(
        images, captions, batch_size, shuffle, seed, one_caption_per_image
    ).dataset()


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
    >>> images.shape, images.dtype, len(captions[0])
    ((64, 32, 32, 3), dtype('uint8'), 5)
    >>> captions[0][0]
    'a blue bar on the left'
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
        images[i, top : top + height, left : left + width, COLOURS[colour]] = (
            230
        )
        captions.append(
            [
                f"a {colour} {shape} on the {side}",
                f"{colour} {shape} on the {side}",
                f"the {shape} is {colour} and on the {side}",
                f"a {shape} in {colour} on the {side}",
                f"a {colour} {shape} at the {side}",
            ]
        )
    return images, captions
