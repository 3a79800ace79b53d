"""Plain-text corpora for language models (Tiny Shakespeare by default).

A corpus is read once, encoded to one long array of token ids, split 90/10
into train and validation as nanoGPT does, and served as random windows
(training) or consecutive windows (evaluation) of `sequence_length + 1` ids.
"""

import os

import keras
import numpy as np

from zoo.data.imdb import DataNotFoundError

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


def split_ids(ids, train_fraction=0.9):
    """First `train_fraction` of the ids for training, the rest validation."""
    if not 0 < train_fraction < 1:
        raise ValueError(
            f"train_fraction must be in (0, 1); got {train_fraction}."
        )
    cut = int(len(ids) * train_fraction)
    return ids[:cut], ids[cut:]


def _check_length(ids, sequence_length, what):
    if len(ids) < sequence_length + 1:
        raise ValueError(
            f"the {what} split has {len(ids)} tokens, fewer than "
            f"sequence_length + 1 = {sequence_length + 1}."
        )


def _as_batch(windows):
    x = windows[:, :-1]
    return {"token_ids": x, "padding_mask": np.ones_like(x)}, windows[:, 1:]


class RandomWindows(keras.utils.PyDataset):
    """`steps` batches of windows at random offsets, fresh every epoch.

    Each item is `({"token_ids", "padding_mask"}, next_token_ids)` with
    shapes `(batch_size, sequence_length)`: position t's target is the id
    at t + 1, the GPT training set-up.

    Args:
        ids: 1-D int array, the training token stream.
        sequence_length: window length (the model's context).
        batch_size: windows per batch.
        steps: batches per epoch.
        seed: seeds the offsets (each epoch draws new ones).
    """

    def __init__(self, ids, sequence_length, batch_size, steps, seed=0,
                 **kwargs):
        super().__init__(**kwargs)
        _check_length(ids, sequence_length, "training")
        self.ids = np.asarray(ids, dtype="int32")
        self.sequence_length = sequence_length
        self.batch_size = batch_size
        self.steps = steps
        self.rng = np.random.default_rng(seed)
        self._draw()

    def _draw(self):
        high = len(self.ids) - self.sequence_length
        self.offsets = self.rng.integers(
            0, high, size=(self.steps, self.batch_size)
        )

    def __len__(self):
        return self.steps

    def __getitem__(self, index):
        starts = self.offsets[index][:, None]
        windows = self.ids[starts + np.arange(self.sequence_length + 1)]
        return _as_batch(windows)

    def on_epoch_end(self):
        self._draw()


def consecutive_windows(ids, sequence_length):
    """Non-overlapping windows covering `ids`: `(x, y)` NumPy arrays for
    `evaluate` (every validation token is scored once)."""
    _check_length(ids, sequence_length, "validation")
    ids = np.asarray(ids, dtype="int32")
    count = (len(ids) - 1) // sequence_length
    starts = np.arange(count)[:, None] * sequence_length
    return _as_batch(ids[starts + np.arange(sequence_length + 1)])
