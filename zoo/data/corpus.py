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

from zoo.data.download import DataNotFoundError
from zoo.data.download import check_reachable
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
        DataNotFoundError: the file is missing or empty, or the download
            failed; the message says what was tried.
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
            os.path.expanduser("~"), ".keras", cache_subdir,
            "tinyshakespeare.txt")
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
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not text:
        raise DataNotFoundError(f"{path!r} is empty.")
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
            yield np.array([text[o:o + window] for o in row], dtype=object)

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
    return [text[k * sequence_length:(k + 1) * sequence_length + 1]
            for k in range(count)]


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
