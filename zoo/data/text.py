"""Datasets of raw text for the tasks' `fit`, `evaluate` and `predict`.

A keras-hub task maps its preprocessor over whatever dataset it is given, so
the datasets here hold raw strings: the tokenizer runs inside `tf.data`,
on every backend, and the model file carries it.
"""

import numbers
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
    # A dict of inputs (token ids and their mask, or a translator's
    # texts) holds one array per input: count the examples of one.
    count = len(next(iter(x.values()))) if isinstance(x, dict) else len(x)
    if not count:
        raise ValueError(
            "fit() got no examples (an empty x): pass at least one."
        )
    dataset = tf.data.Dataset.from_tensor_slices(tuple(data))
    dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    dataset = without_autotune(dataset.batch(batch_size or 32))
    return dataset, None, None, None


_EXPECTED = "a string or a list (or 1-D array) of strings"


def _not_text(items, method, hint=""):
    """A TypeError for the first item of `items` that is not a string, or
    None when they all are."""
    for item in items:
        if not isinstance(item, (str, bytes)):
            if item is None:
                got = "None"
            else:
                shown = repr(item)
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                got = f"{type(item).__name__} {shown}"
            return TypeError(
                f"{method}() reads text, but got {got}: pass a string or a "
                f"list of strings{hint}."
            )
    return None


def _flat_texts(x, method, hint=""):
    """`(items, flat)`: the items of a list, tuple or array `x`, one per
    text, and `x` itself when it is already flat (else the flat list of
    its items). A column, `(n, 1)` (an array, or a list of one-item
    lists), counts as its `n` texts; any other nesting is one ValueError
    naming its shape, and an item that is not a string one TypeError."""
    if isinstance(x, np.ndarray):
        items = x.reshape(-1).tolist()
        error = _not_text(items, method, hint)
        if error:  # numbers, say: the type first, whatever the shape
            raise error
        if x.ndim == 1 or (x.ndim == 2 and x.shape[1] == 1):
            return items, x if x.ndim == 1 else x.reshape(-1)
        raise ValueError(
            f"{method}() reads {_EXPECTED}{hint}, but got a {x.ndim}-D "
            f"array of shape {x.shape}: pass one text per row."
        )
    # A list: Keras reads a tuple as (x, y).
    items = list(x)
    flat = items if isinstance(x, tuple) else x
    sizes = [_size(item) for item in items]
    if any(size is not None for size in sizes):
        if all(size == 1 for size in sizes):  # a column
            items = flat = [_only(item) for item in items]
        else:
            first = next(
                (i for i, size in enumerate(sizes) if size not in (None, 1)),
                next(i for i, size in enumerate(sizes) if size is not None),
            )
            raise ValueError(
                f"{method}() reads {_EXPECTED}{hint}, but got a nested "
                f"list (item {first} is a {type(items[first]).__name__} of "
                f"{sizes[first]}): pass one flat list of texts."
            )
    error = _not_text(items, method, hint)
    if error:
        raise error
    return items, flat


def _size(item):
    """How many entries a list, tuple or array item holds; None for
    anything else (a text)."""
    if isinstance(item, np.ndarray):
        return item.size
    return len(item) if isinstance(item, (list, tuple)) else None


def _only(item):
    """The one entry of a one-entry list, tuple or array."""
    return item.reshape(-1)[0] if isinstance(item, np.ndarray) else item[0]


def _text_items(x, method, hint="", segments=False):
    """`(texts, scalar, x)`: the texts of `x` (a flat list, to check), whether
    `x` was a lone string, and `x` as a keras-hub pipeline should read it
    (a lone string, or a 0-d array holding one, becomes a batch of one; a
    column, a flat list). With `segments`, a tuple is a pair (or more) of
    segments, each checked on its own.

    Raises:
        TypeError: `x` is None, a number, or holds something other than
            strings.
        ValueError: `x` is nested beyond a column, or its segments hold
            different numbers of texts.
    """
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x.item()  # a 0-d array holds one text (or something else)
    if isinstance(x, (str, bytes)):
        return [x], True, [x]
    if segments and isinstance(x, tuple):
        texts, parts, counts = [], [], []
        for segment in x:
            items, _, part = _text_items(segment, method, hint)
            texts += items
            parts.append(part)
            counts.append(len(items))
        if len(set(counts)) > 1:
            raise ValueError(
                f"{method}() got segments of {' and '.join(map(str, counts))} "
                "texts: a pair holds one text of each segment per example."
            )
        return texts, False, tuple(parts)
    if isinstance(x, (list, tuple, np.ndarray)):
        items, flat = _flat_texts(x, method, hint)
        return items, False, flat
    if hasattr(x, "__array__") and not isinstance(x, numbers.Number):
        return _text_items(np.asarray(x), method, hint, segments)
    raise _not_text([x], method, hint) or TypeError(
        f"{method}() reads {_EXPECTED}{hint}; got {type(x).__name__}."
    )


def check_texts(x, method, segments=False):
    """`x` as a keras-hub pipeline should read it, checked as `text_batch`
    checks it (no warning): a lone string, or a 0-d array holding one, is
    a batch of one; a column `(n, 1)`, its `n` texts. Datasets, tensors
    and dicts pass through unchanged.

    Example:

    >>> check_texts("a fine film", "predict")
    ['a fine film']
    >>> check_texts(None, "predict")
    Traceback (most recent call last):
      ...
    TypeError: predict() reads text, but got None: pass a string ...
    """
    if _passes_through(x):
        return x
    return _text_items(x, method, segments=segments)[2]


def excerpt(text, limit=60):
    """`text` quoted for a message: its `repr`, cut to its first `limit`
    characters and "..." when longer (a 100,000-character review must not
    fill the screen).

    Example:

    >>> excerpt("a" * 100, 5)
    "'aaaaa'..."
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def text_batch(x, method, segments=False):
    """What a task's `fit`, `evaluate` or `predict` (named `method`, for the
    message) reads: a lone string (or a 0-d array holding one) becomes a
    batch of one, and a column `(n, 1)` its `n` texts; an empty batch is
    an error naming the call, and so is None, a number, a nested list or a
    2-D array (beyond a column), or a list or array holding something
    other than strings, each in one line, before keras-hub's pipeline sees
    them; empty or blank texts are a warning. With `segments` (a pair
    classifier), a tuple is segments, each checked alike. Datasets,
    tensors and dicts pass through unchanged."""
    if _passes_through(x):
        return x
    texts, _, x = _text_items(x, method, segments=segments)
    if not texts:
        raise ValueError(
            f"{method}() got no texts: pass a list of strings, e.g. "
            f'{method}(["an utterly wonderful film"]).'
        )
    _warn_if_empty(texts, method)
    return x


def _passes_through(x):
    """Inputs a keras-hub task reads itself: datasets, `PyDataset`s, dicts
    of preprocessed inputs, tensors (anything with a shape but not a NumPy
    array)."""
    return (
        is_dataset(x)
        or isinstance(x, (dict, keras.utils.PyDataset))
        or (hasattr(x, "shape") and not isinstance(x, np.ndarray))
    )


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


def texts_of(inputs, method, what="text", hint=""):
    """`(texts, scalar)`: `inputs` (a string, or a list or array of
    strings or bytes; a column `(n, 1)` counts as its `n` texts) as a flat
    list of `str`, and whether it was a lone string, for the tasks'
    `generate`-style methods.

    Raises:
        TypeError: None, a number, or an item that is not a string (named,
            with `hint` appended to the message).
        ValueError: a nested list or a 2-D array beyond a column, no
            `what` at all (e.g. an empty list), or bytes that are not
            UTF-8.
    """
    items, scalar, _ = _text_items(inputs, method, hint)
    if not items:
        raise ValueError(f"{method}() needs at least one {what}.")
    texts = []
    for i, text in enumerate(items):
        try:
            texts.append(
                text.decode("utf-8") if isinstance(text, bytes) else str(text)
            )
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{method}(): {what} {i} is bytes that are not UTF-8 (byte "
                f"offset {error.start}): pass str, or UTF-8 bytes."
            ) from None
    return texts, scalar


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
