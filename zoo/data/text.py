"""Text preprocessing that travels inside saved models.

`TextClassifierPreprocessor` turns raw strings into padded word ids with a
Keras `TextVectorization` layer. It follows keras-hub's `Preprocessor`
contract, so a keras-hub `Task` runs it inside `tf.data` before the model:
`fit`, `evaluate` and `predict` accept raw strings on every backend, and the
vocabulary is saved in the `.keras` file with the model.
"""

import re
import string

import keras
import numpy as np
import keras_hub
import tensorflow as tf

_PUNCTUATION = "[" + re.escape(string.punctuation) + "]"


# Characters Python's str.splitlines() breaks lines at (IMDB uses \x85 for
# "..."): a token holding one would not survive the vocabulary file that
# TextVectorization saves one token per line.
_LINE_BREAKS = r"[\n\r\x0b\x0c\x1c-\x1e\x{85}\x{2028}\x{2029}]"


def standardize_review(text):
    """Lower-case, drop `<br />` tags, replace punctuation and line-break
    characters with spaces."""
    text = tf.strings.lower(text)
    text = tf.strings.regex_replace(text, r"<br\s*/?>", " ")
    text = tf.strings.regex_replace(text, _LINE_BREAKS, " ")
    return tf.strings.regex_replace(text, _PUNCTUATION, " ")


@keras.saving.register_keras_serializable(package="zoo")
class TextClassifierPreprocessor(keras_hub.models.Preprocessor):
    """Raw strings -> `(batch, sequence_length)` word ids, 0 = padding.

    Id 0 is padding and id 1 is out-of-vocabulary, as in `TextVectorization`.
    Build the vocabulary from the training split only with `adapt`.

    With `ngrams=2` a review's first `sequence_length` words are followed by
    their bigrams ("not good", "waste of") as tokens of their own, so the
    ids have `output_length = 2 * sequence_length - 1` positions: unigrams
    first, then bigrams. That suits the order-free pooling models (mean,
    attention), not models that read the sequence in order.

    Args:
        max_tokens: vocabulary size, padding and OOV included (n-grams share
            it with words: give bigrams a larger one).
        sequence_length: reviews are truncated or padded to this many words.
        vocabulary: optional list of tokens (without padding and OOV).
        ngrams: 1 (words) or n > 1 (all 1..n-grams of the kept words).

    Call arguments:
        x: strings `(batch,)`; y, sample_weight: passed through.

    Returns:
        `(token_ids, y, sample_weight)` packed as Keras expects.

    Example:

    >>> pre = TextClassifierPreprocessor(max_tokens=100, sequence_length=8)
    >>> pre.adapt(["a good film", "a bad film"])
    >>> pre(["a good film"]).shape
    (1, 8)
    """

    def __init__(self, max_tokens=20000, sequence_length=256, vocabulary=None,
                 ngrams=1, **kwargs):
        super().__init__(**kwargs)
        self.max_tokens = int(max_tokens)
        self.sequence_length = int(sequence_length)
        self.ngrams = int(ngrams)
        if self.ngrams < 1:
            raise ValueError(f"ngrams must be >= 1, got {ngrams}.")
        if self.sequence_length < 1:
            raise ValueError(
                f"sequence_length must be >= 1, got {sequence_length}.")
        # Every n in 1..ngrams adds (sequence_length - n + 1) positions.
        self.output_length = sum(
            max(self.sequence_length - n + 1, 0)
            for n in range(1, self.ngrams + 1)
        )
        self.vectorizer = keras.layers.TextVectorization(
            max_tokens=self.max_tokens,
            # Standardised here, in `call`: Keras hands a callable
            # `standardize` NumPy arrays on JAX/PyTorch, which fails in tf.data.
            standardize=None,
            ngrams=self.ngrams if self.ngrams > 1 else None,
            output_sequence_length=self.output_length,
            vocabulary=vocabulary,
            name="vectorizer",
        )

    def _standardize(self, texts):
        texts = standardize_review(texts)
        if self.ngrams > 1:
            # Keep the first sequence_length words before forming n-grams,
            # so truncation never drops the n-grams of the words kept.
            words = tf.strings.split(texts)[..., : self.sequence_length]
            texts = tf.strings.reduce_join(words, axis=-1, separator=" ")
        return texts

    def build(self, input_shape=None):
        self.built = True  # the vectorizer builds itself; nothing else to do

    def adapt(self, texts, batch_size=512):
        """Builds the vocabulary from `texts` (an array or a tf.data dataset)."""
        if not isinstance(texts, tf.data.Dataset):
            texts = tf.data.Dataset.from_tensor_slices(list(texts))
            texts = texts.batch(batch_size)
        self.vectorizer.adapt(texts.map(self._standardize))

    def get_vocabulary(self):
        """Words by id: index 0 is padding (''), index 1 is '[UNK]'."""
        return self.vectorizer.get_vocabulary()

    @property
    def vocabulary_size(self):
        return self.vectorizer.vocabulary_size()

    def call(self, x, y=None, sample_weight=None):
        x = tf.convert_to_tensor(x)
        if x.shape.rank == 0:
            x = x[None]
        # `.call` rather than `__call__`: under JAX/PyTorch, Layer.__call__
        # would try to turn the symbolic tf.data strings into backend arrays.
        token_ids = self.vectorizer.call(self._standardize(x))
        return keras.utils.pack_x_y_sample_weight(token_ids, y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_tokens": self.max_tokens,
                "sequence_length": self.sequence_length,
                "ngrams": self.ngrams,
            }
        )
        return config


def token_dataset(texts, labels, preprocessor, batch_size, shuffle=False,
                  seed=None, window=None):
    """`tf.data` pipeline of `(token_ids, label)` batches.

    Strings are tokenised once and cached; shuffling (seeded) happens after
    the cache, so every epoch sees a new order without re-tokenising.

    Args:
        texts, labels: reviews (strings) and their 0/1 labels.
        preprocessor: a `TextClassifierPreprocessor` (adapted).
        batch_size: examples per batch.
        shuffle: reshuffle every epoch (seeded by `seed`).
        seed: seed of the shuffling and of the windows.
        window: optional int: train on a random `window`-word slice of each
            review's (truncated) ids, a new slice every epoch, instead of
            all of them (`random_window`). Batches are then
            `(batch, window)`. Only for word ids (`ngrams=1`).

    Returns:
        A `tf.data.Dataset` of `(token_ids, labels)` batches.
    """
    if window is not None and getattr(preprocessor, "ngrams", 1) != 1:
        raise ValueError(
            "window slices the words in order; it cannot be used with "
            f"n-gram tokens (ngrams={preprocessor.ngrams}).")
    dataset = tf.data.Dataset.from_tensor_slices(
        (list(texts), np.asarray(labels, dtype="float32"))
    )
    dataset = dataset.batch(1024).map(
        lambda x, y: (preprocessor(x), y), num_parallel_calls=tf.data.AUTOTUNE
    )
    dataset = dataset.unbatch().apply(
        tf.data.experimental.assert_cardinality(len(texts))
    ).cache()
    if shuffle:
        dataset = dataset.shuffle(
            len(texts), seed=seed, reshuffle_each_iteration=True
        )
    if window is not None:
        # One random int64 per review, new ones every epoch.
        draws = tf.data.Dataset.random(seed=seed,
                                       rerandomize_each_iteration=True)
        dataset = tf.data.Dataset.zip(dataset, draws).map(
            lambda pair, draw: (random_window(pair[0], window, draw), pair[1]),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    # tf.data's autotuner runs a background thread per iterator, and Keras
    # drops its iterators at every epoch end and after every validation
    # pass: while a PyTorch model trained on both cores, each drop waited
    # 5 to 34 s for that thread (100 s epochs instead of 65 s for the IMDB
    # `rnn`). Turned off, the pipeline keeps its fixed parallelism and
    # reads as fast on this data (one epoch in about a second).
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def random_window(token_ids, window, draw):
    """A `window`-long slice of one review's ids, starting at a random word.

    The start is uniform over the positions that keep the slice inside the
    review's real (non-padding) words, so every slice is full unless the
    review is shorter than `window`; then it is the whole review, padded.
    A data augmentation: a model trained on slices sees different words of
    a review each epoch (and each step costs `window`, not the full length),
    and still reads the whole truncated review at prediction time.

    Args:
        token_ids: `(seq,)` int ids, padding (0) at the end.
        window: positive int, the slice length.
        draw: an int64 scalar that picks the start (`draw` modulo the
            number of possible starts).

    Returns:
        `(window,)` ids.
    """
    if int(window) < 1:
        raise ValueError(f"window must be a positive int; got {window}.")
    length = tf.math.count_nonzero(token_ids, dtype=tf.int32)
    starts = tf.maximum(length - window, 0) + 1
    # floormod is never negative for a positive divisor, whatever the draw.
    start = tf.cast(
        tf.math.floormod(tf.cast(draw, tf.int64), tf.cast(starts, tf.int64)),
        tf.int32)
    piece = token_ids[start:start + window]
    piece = tf.pad(piece, [[0, window - tf.shape(piece)[0]]])
    return tf.ensure_shape(piece, [window])
