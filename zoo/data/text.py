"""Datasets of raw text for the tasks' `fit`, `evaluate` and `predict`.

A keras-hub task maps its preprocessor over whatever dataset it is given, so
the datasets here hold raw strings: the tokenizer runs inside `tf.data`,
on every backend, and the model file carries it.
"""

import warnings

import keras
import numpy as np

from zoo._tensorflow import is_dataset, tf


def text_dataset(texts, labels=None, batch_size=64, shuffle=False, seed=None):
    """`tf.data` pipeline of `(strings, labels)` batches (strings alone when
    `labels` is None), for `task.fit(dataset)` and friends.

    Args:
        texts: a sequence of strings.
        labels: optional labels, one per text.
        batch_size: examples per batch.
        shuffle: reshuffle every epoch (seeded by `seed`).
        seed: seed of the shuffling.

    Returns:
        A `tf.data.Dataset` of batches, with tf.data's autotuner off.

    Raises:
        ValueError: no texts, or not as many labels as texts.
    """
    texts = [str(t) for t in texts]
    if not texts:
        raise ValueError("text_dataset needs at least one text.")
    if labels is None:
        dataset = tf.data.Dataset.from_tensor_slices(texts)
    else:
        labels = np.asarray(labels)
        if len(labels) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels.")
        dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
    if shuffle:
        dataset = dataset.shuffle(
            len(texts), seed=seed, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(batch_size)
    return without_autotune(dataset)


def pair_dataset(
    sources,
    targets,
    batch_size=64,
    shuffle=False,
    seed=None,
    bucket_boundaries=None,
):
    """`tf.data` pipeline of `(sources, targets)` string batches for a
    translation task's `fit` and `evaluate`.

    With `bucket_boundaries` (lengths in characters of the source), batches
    hold sentences of similar length, so a preprocessor that pads each
    batch to its longest sentence pads little; the order of the batches is
    still shuffled.

    Args:
        sources, targets: line-aligned lists of strings.
        batch_size: pairs per batch.
        shuffle: reshuffle every epoch (seeded by `seed`).
        seed: seed of the shuffling.
        bucket_boundaries: optional increasing source lengths, in
            characters, that separate the buckets.

    Raises:
        ValueError: no pairs, or not as many targets as sources.
    """
    sources, targets = [str(s) for s in sources], [str(t) for t in targets]
    if not sources:
        raise ValueError("pair_dataset needs at least one pair.")
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")
    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    if shuffle:
        dataset = dataset.shuffle(
            len(sources), seed=seed, reshuffle_each_iteration=True
        )
    if bucket_boundaries:
        dataset = dataset.bucket_by_sequence_length(
            lambda source, target: tf.strings.length(source),
            bucket_boundaries=list(bucket_boundaries),
            bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1),
        )
        if shuffle:
            batches = (len(sources) + batch_size - 1) // batch_size
            dataset = dataset.shuffle(
                batches + len(bucket_boundaries) + 1,
                seed=seed,
                reshuffle_each_iteration=True,
            )
    else:
        dataset = dataset.batch(batch_size)
    return without_autotune(dataset)


def split_validation_arrays(
    x, y=None, sample_weight=None, validation_split=None
):
    """`((x, y, sample_weight), validation_data)`: the last
    `validation_split` of arrays (or lists) held out, before any
    shuffling, as `keras.Model.fit(validation_split=...)` does (keras-hub's
    tasks cannot, once `x` has become a dataset). Without a split, or for a
    dataset, `validation_data` is None and the rest comes back as it was.

    Example:

    >>> x, y = np.arange(10), np.arange(10) % 2
    >>> (x, y, _), validation = split_validation_arrays(x, y, None, 0.2)
    >>> x
    array([0, 1, 2, 3, 4, 5, 6, 7])
    >>> validation
    (array([8, 9]), array([0, 1]))
    """
    if (
        not validation_split
        or x is None
        or is_dataset(x)
        or isinstance(x, keras.utils.PyDataset)
    ):
        return (x, y, sample_weight), None
    if isinstance(x, (str, bytes)):
        x = [x]
    count = len(x)
    split_at = int(count * (1.0 - float(validation_split)))
    if not 0 < split_at < count:
        raise ValueError(
            f"validation_split={validation_split} of {count} examples leaves "
            "no training or no validation example."
        )

    def part(value, rows):
        if value is None:
            return None
        return (
            value[rows]
            if isinstance(value, np.ndarray)
            else (
                list(value)[rows]
                if isinstance(value, (list, tuple))
                else np.asarray(value)[rows]
            )
        )

    train = slice(0, split_at)
    held = slice(split_at, None)
    validation = tuple(
        part(v, held) for v in (x, y, sample_weight) if v is not None
    )
    return (part(x, train), part(y, train), part(sample_weight, train)), (
        validation
    )


def fit_dataset(x, y=None, sample_weight=None, batch_size=None, shuffle=True):
    """What a task's `fit` trains on: `x` itself when it is already a
    dataset (or there is nothing to shuffle), else a shuffled `tf.data`
    pipeline of `(x, y[, sample_weight])` batches.

    keras-hub's tasks turn arrays into a dataset in order and then ignore
    Keras' `shuffle=True` (with a warning); this shuffles every epoch, as
    `keras.Model.fit` does for arrays.

    Returns:
        `(x, y, sample_weight, batch_size)` to pass on to `fit`.
    """
    if x is None or is_dataset(x) or not shuffle:
        return x, y, sample_weight, batch_size
    if isinstance(x, (str, bytes)):
        x = [x]
    data = [list(x) if isinstance(x, (list, tuple)) else x]
    for extra in (y, sample_weight):
        if extra is not None:
            data.append(np.asarray(extra))
    count = len(data[0])
    if not count:
        raise ValueError(
            "fit() got no examples (an empty x): pass at least one."
        )
    dataset = tf.data.Dataset.from_tensor_slices(tuple(data))
    dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    dataset = without_autotune(dataset.batch(batch_size or 32))
    return dataset, None, None, None


def _not_text(items, method, hint=""):
    """A TypeError for the first item of `items` that is not a string, or
    None when they all are."""
    for item in items:
        if not isinstance(item, (str, bytes)):
            shown = repr(item)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            return TypeError(
                f"{method}() reads text, but got {type(item).__name__} "
                f"{shown}: pass a string or a list of strings{hint}."
            )
    return None


def text_batch(x, method):
    """What a task's `fit`, `evaluate` or `predict` (named `method`, for the
    message) reads: a lone string becomes a batch of one; an empty batch is
    an error naming the call, and so is a list or array holding something
    other than strings (a number, None), before keras-hub's pipeline sees
    either; empty or blank texts are a warning. Datasets and tensors pass
    through unchanged."""
    if isinstance(x, (str, bytes)):
        x = [x]
    if isinstance(x, (list, tuple, np.ndarray)):
        if len(x) == 0:
            raise ValueError(
                f"{method}() got no texts: pass a list of strings, e.g. "
                f'{method}(["an utterly wonderful film"]).'
            )
        items = list(_items(x))
        error = _not_text(items, method)
        if error:
            raise error
        _warn_if_empty(items, method)
    return x


def _warn_if_empty(texts, method):
    """A warning when some of `texts` hold no text at all: a model's output
    for them reflects no input (e.g. a classifier's bias)."""
    empty = [i for i, text in enumerate(texts) if not text.strip()]
    if empty:
        warnings.warn(
            f"{method}(): {len(empty)} of {len(texts)} texts are empty or "
            f"blank (the first at index {empty[0]}); what the model gives "
            "for them reflects no text.",
            stacklevel=4,
        )


def _items(x):
    """The leaves of `x`: lists, tuples and arrays of texts (a tuple is a
    pair of segments for a pair classifier)."""
    for leaf in keras.tree.flatten(x):
        if isinstance(leaf, np.ndarray):
            yield from leaf.reshape(-1)
        else:
            yield leaf


def texts_of(inputs, method, what="text", hint=""):
    """`(texts, scalar)`: `inputs` (a string, or a list or array of
    strings or bytes) as a flat list of `str`, and whether it was a lone
    string, for the tasks' `generate`-style methods.

    Raises:
        TypeError: an item that is not a string (named, with `hint`
            appended to the message).
        ValueError: no `what` at all (e.g. an empty list).
    """
    scalar = isinstance(inputs, (str, bytes))
    items = (
        [inputs]
        if scalar
        else np.asarray(inputs, dtype=object).reshape(-1).tolist()
    )
    error = _not_text(items, method, hint)
    if error:
        raise error
    if not items:
        raise ValueError(f"{method}() needs at least one {what}.")
    return [
        t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in items
    ], scalar


def without_autotune(dataset):
    """`dataset` with tf.data's autotuner off (for it and what is built on
    it).

    The autotuner runs a background thread per iterator, and Keras drops its
    iterators at every epoch end and after every validation pass: while a
    PyTorch model trained on both cores of a small CPU, each drop waited
    seconds for that thread. Turned off, a pipeline keeps fixed
    parallelism, which is enough for tokenising text.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
