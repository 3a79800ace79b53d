"""Plain-text corpora for language models (Tiny Shakespeare by default).

A corpus is read once, split 90/10 into train and validation as nanoGPT
does, and served as text: random windows of characters (training) or
consecutive windows (evaluation), which the GPT task's preprocessor
tokenises inside `fit` and `evaluate`.
"""

import os

import keras
import numpy as np

from zoo._tensorflow import tf
from zoo.data.download import DataNotFoundError, check_reachable
from zoo.data.files import read_utf8
from zoo.data.text import without_autotune

SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
    "tinyshakespeare/input.txt"
)


def load_text(path=None, url=SHAKESPEARE_URL, cache_subdir="datasets"):
    """The corpus as one string: from `path`, else downloaded from `url`.

    Args:
        path: a local text file (UTF-8), or a directory holding
            `tinyshakespeare.txt` / `input.txt`.
        url: where `keras.utils.get_file` fetches the corpus when no path
            is given (cached under `~/.keras/datasets`).

    Raises:
        DataNotFoundError: the file is missing, empty or not UTF-8 (the
            message names the byte offset), or the download failed; the
            message says what was tried.
    """
    if path is not None:
        if os.path.isdir(path):
            for name in ("tinyshakespeare.txt", "input.txt"):
                if os.path.isfile(os.path.join(path, name)):
                    path = os.path.join(path, name)
                    break
        if not os.path.isfile(path):
            raise DataNotFoundError(
                f"no text file at {path!r}; pass --data PATH to a UTF-8 "
                "text file (e.g. ../shared/data/tinyshakespeare.txt)."
            )
    else:
        cached = os.path.join(
            os.path.expanduser("~"),
            ".keras",
            cache_subdir,
            "tinyshakespeare.txt",
        )
        if not os.path.isfile(cached):
            check_reachable(url, "the corpus", "--data PATH")
        try:
            path = keras.utils.get_file(
                "tinyshakespeare.txt", origin=url, cache_subdir=cache_subdir
            )
        except Exception as error:  # network errors come in many types
            raise DataNotFoundError(
                f"could not download the corpus from {url} ({error}). "
                "Pass --data PATH to a local copy."
            ) from None
    text = read_utf8(path)
    if not text:
        raise DataNotFoundError(f"{path} is empty: no text to read.")
    return text


def split_text(text, train_fraction=0.9):
    """First `train_fraction` of the text (or any sequence) for training,
    the rest for validation."""
    if not 0 < train_fraction < 1:
        raise ValueError(
            f"train_fraction must be in (0, 1); got {train_fraction}."
        )
    cut = int(len(text) * train_fraction)
    return text[:cut], text[cut:]


def _check_length(length, window, what):
    if length < window:
        raise ValueError(
            f"the {what} split has {length} characters, fewer than one "
            f"window of {window}."
        )


def random_text_windows(text, window, batch_size, steps, seed=0):
    """`steps` batches of `batch_size` random `window`-character slices of
    `text`, fresh ones every epoch: what `GPT.fit` trains on.

    With a character tokenizer a slice of `sequence_length + 1` characters
    is one full training step for every position (the preprocessor packs
    it to `sequence_length + 1` ids: inputs and next-token targets), the
    nanoGPT set-up.

    Args:
        text: the training text.
        window: characters per slice.
        batch_size: slices per batch.
        steps: batches per epoch.
        seed: seeds the offsets (each epoch draws new ones).

    Returns:
        A `tf.data.Dataset` of `(batch_size,)` string batches, `steps` long.
    """
    _check_length(len(text), window, "training")
    rng = np.random.default_rng(seed)
    high = len(text) - window

    def batches():
        offsets = rng.integers(0, high + 1, size=(steps, batch_size))
        for row in offsets:
            yield np.array([text[o : o + window] for o in row], dtype=object)

    dataset = tf.data.Dataset.from_generator(
        batches, output_signature=tf.TensorSpec((batch_size,), tf.string)
    )
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps))
    return without_autotune(dataset.prefetch(2))


def consecutive_text_windows(text, sequence_length):
    """Slices of `sequence_length + 1` characters starting every
    `sequence_length` characters, so that every character after the first
    is predicted once: for `GPT.evaluate`.

    Returns:
        A list of strings.
    """
    _check_length(len(text), sequence_length + 1, "validation")
    count = (len(text) - 1) // sequence_length
    return [
        text[k * sequence_length : (k + 1) * sequence_length + 1]
        for k in range(count)
    ]


class TokenWindows(keras.utils.PyDataset):
    """Windows of a tokenised corpus as model-ready GPT batches, in NumPy
    (no TensorFlow): what `random_text_windows` and
    `consecutive_text_windows` give after the preprocessor, without
    tokenising at every step.

    Each window is `sequence_length + 1` ids: the inputs are its first
    `sequence_length`, the targets its last. Random windows are drawn from
    `(seed, epoch)`, so every backend, and a resumed run, reads the same
    ones; consecutive windows are the ones `consecutive_text_windows` cuts
    (for a character tokenizer, the same batches).

    Args:
        token_ids: the corpus as a 1-D int array (`encode_corpus`).
        sequence_length: the model's context length.
        batch_size: windows per batch.
        steps: batches per epoch (training windows); not used with
            `shuffle=False`.
        seed: seeds the offsets, a new draw every epoch (`.epoch` counts
            the epochs served; `zoo.callbacks.ReproducibleEpochs` sets it,
            e.g. for a resumed run).
        shuffle: True: `steps` batches of random windows (training).
            False: consecutive windows starting every `sequence_length`
            ids, so every id after the first is predicted once, in order,
            the last batch smaller (evaluation).

    Returns (per batch):
        `({"token_ids", "padding_mask"}, targets, sample_weight)`, each
        `(batch, sequence_length)`.

    Example (a recipe trains with `gpt.fit(TokenWindows(ids, 256, 64,
    steps=500), epochs=10)`):

    >>> from zoo.data.tokenizers import CharacterTokenizer, encode_corpus
    >>> text = make_synthetic_corpus(2000)
    >>> ids = encode_corpus(CharacterTokenizer.from_text(text), text)
    >>> train = TokenWindows(ids, 16, 4, steps=10)
    >>> x, targets, sample_weight = train[0]
    >>> len(train), x["token_ids"].shape, targets.shape
    (10, (4, 16), (4, 16))
    >>> bool((targets[:, :-1] == x["token_ids"][:, 1:]).all())  # next ids
    True
    >>> evaluation = TokenWindows(ids, 100, 8, shuffle=False)
    >>> evaluation.windows, len(evaluation), evaluation[2][1].shape
    (19, 3, (3, 100))
    """

    def __init__(
        self,
        token_ids,
        sequence_length,
        batch_size,
        steps=None,
        seed=0,
        shuffle=True,
    ):
        super().__init__(workers=1, use_multiprocessing=False)
        self.token_ids = np.asarray(token_ids)
        if self.token_ids.ndim != 1 or not np.issubdtype(
            self.token_ids.dtype, np.integer
        ):
            raise ValueError(
                "token_ids must be a 1-D integer array; got shape "
                f"{self.token_ids.shape}, dtype {self.token_ids.dtype}."
            )
        self.token_ids = self.token_ids.astype("int32")
        self.sequence_length = int(sequence_length)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        if self.sequence_length < 1 or self.batch_size < 1:
            raise ValueError(
                "sequence_length and batch_size must be >= 1; "
                f"got {sequence_length} and {batch_size}."
            )
        window = self.sequence_length + 1
        if len(self.token_ids) < window:
            raise ValueError(
                f"the corpus has {len(self.token_ids)} tokens, fewer than "
                f"one window of {window}."
            )
        if self.shuffle:
            if steps is None or int(steps) < 1:
                raise ValueError(
                    f"shuffle=True needs steps >= 1 per epoch; got {steps}."
                )
            self.steps = int(steps)
        else:
            self.steps = -(-self.windows // self.batch_size)
        self.epoch = 0
        self._served = set()  # batch indices served since the last epoch end
        self._offsets = (None, None)  # (epoch, its offsets)

    @property
    def windows(self):
        """Consecutive windows in the corpus (`shuffle=False`)."""
        return (len(self.token_ids) - 1) // self.sequence_length

    def __len__(self):
        return self.steps

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        self._served.add(int(index))
        if self.shuffle:
            if self._offsets[0] != self.epoch:
                high = len(self.token_ids) - self.sequence_length - 1
                self._offsets = (
                    self.epoch,
                    np.random.default_rng([self.seed, self.epoch]).integers(
                        0, high + 1, size=(self.steps, self.batch_size)
                    ),
                )
            starts = self._offsets[1][index]
        else:
            first = index * self.batch_size
            starts = (
                np.arange(first, min(first + self.batch_size, self.windows))
                * self.sequence_length
            )
        windows = self.token_ids[
            starts[:, None] + np.arange(self.sequence_length + 1)
        ]
        x = {
            "token_ids": windows[:, :-1],
            "padding_mask": np.ones(windows[:, :-1].shape, bool),
        }
        return x, windows[:, 1:], np.ones(windows[:, 1:].shape, bool)

    def on_epoch_end(self):
        # Keras also ends the pass that reads a first batch to build the
        # model: only an epoch that served every batch moves the windows on.
        if len(self._served) >= len(self):
            self.epoch += 1
        self._served.clear()


_SPEAKERS = ("ROMEO", "JULIET", "NURSE", "FRIAR", "MERCUTIO", "CAPULET")
_WORDS = (
    "the and to of my thou thee love night day sweet good fair death "
    "life heart speak come go now what is not be this that with lord "
    "lady sir man hand name light dream sleep star swear kiss"
).split()


def make_synthetic_corpus(num_characters=20000, seed=0):
    """A generated play-like text (speakers, lines, blank lines) for smoke
    runs and tests: the shape of Tiny Shakespeare, nothing downloaded."""
    rng = np.random.default_rng(seed)
    parts, size = [], 0
    while size < num_characters:
        speech = [rng.choice(_SPEAKERS) + ":"]
        for _ in range(rng.integers(1, 4)):
            words = rng.choice(_WORDS, size=rng.integers(3, 10))
            line = " ".join(words).capitalize()
            speech.append(line + rng.choice([",", ".", "!", "?"]))
        part = "\n".join(speech) + "\n\n"
        parts.append(part)
        size += len(part)
    return "".join(parts)[:num_characters]
