"""The text classifiers' preprocessor: raw reviews -> padded word ids.

`TextClassifierPreprocessor` turns raw strings into padded word ids with a
Keras `TextVectorization` layer. It follows keras-hub's `Preprocessor`
contract, so the `TextClassifier` task runs it inside `tf.data` before the
model: `fit`, `evaluate` and `predict` accept raw strings on every backend,
and the vocabulary is saved in the `.keras` file with the model.

Preprocessors run in `tf.data` pipelines, so this module uses TensorFlow
string ops (as keras-hub's tokenizers do); the models never do.
"""

import re
import string

import keras
import keras_hub
import numpy as np

from zoo._tensorflow import is_dataset, tf
from zoo.data.text import check_texts
from zoo.models.presets import FromPreset
from zoo.models.raw_text import unknown_share
from zoo.models.text_classifier.text_classifier_presets import PRESETS

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
class TextClassifierPreprocessor(FromPreset, keras_hub.models.Preprocessor):
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

    def __init__(
        self,
        max_tokens=20000,
        sequence_length=256,
        vocabulary=None,
        ngrams=1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_tokens = int(max_tokens)
        self.sequence_length = int(sequence_length)
        self.ngrams = int(ngrams)
        if self.ngrams < 1:
            raise ValueError(f"ngrams must be >= 1, got {ngrams}.")
        if self.sequence_length < 1:
            raise ValueError(
                f"sequence_length must be >= 1, got {sequence_length}."
            )
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
            name="vectorizer",
        )
        if vocabulary is not None:
            # Set afterwards, as `adapt` would: a vocabulary given to the
            # constructor lives in TextVectorization's config, which this
            # layer's config does not carry, and would be lost on saving.
            self.vectorizer.set_vocabulary(list(vocabulary))

    # `from_preset(preset, **overrides)`: an un-adapted preprocessor with
    # the preset's vocabulary size, length and n-grams (`adapt` it on
    # training text).
    _presets = PRESETS

    @classmethod
    def _from_preset(cls, preset, **overrides):
        return cls(**{**cls.preset_part(preset, "preprocessor"), **overrides})

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
        if not is_dataset(texts):
            texts = tf.data.Dataset.from_tensor_slices(list(texts))
            texts = texts.batch(batch_size)
        self.vectorizer.adapt(texts.map(self._standardize))

    def get_vocabulary(self):
        """Words by id: index 0 is padding (''), index 1 is '[UNK]'."""
        return self.vectorizer.get_vocabulary()

    @property
    def vocabulary_size(self):
        return self.vectorizer.vocabulary_size()

    def unknown_token_share(self, texts):
        """For each text, the share of the tokens the model reads (its first
        `sequence_length` words, and their n-grams with `ngrams` > 1) that
        are outside the vocabulary (id 1).

        Args:
            texts: a string or a list or 1-D array of strings.

        Returns:
            A float64 NumPy array `(n,)`: 0 when every token is known, 1
            when none is; a text with no token at all (blank, or only
            punctuation) counts as 1.

        Example:

        >>> pre = TextClassifierPreprocessor(max_tokens=100, sequence_length=8)
        >>> pre.adapt(["a good film", "a bad film"])
        >>> pre.unknown_token_share(["a good film", "a zzzz film", "zzzz"])
        array([0.        , 0.33333333, 1.        ])
        """
        texts = check_texts(texts, "unknown_token_share")
        return self.unknown_share_of(self.token_ids(texts))

    def token_ids(self, texts):
        """The `(n, output_length)` int NumPy array of word ids the model
        reads for `texts` (a batch of strings)."""
        return np.asarray(keras.ops.convert_to_numpy(self(texts)))

    @staticmethod
    def unknown_share_of(token_ids):
        """`unknown_token_share` of word ids `(n, length)` already made."""
        token_ids = np.asarray(token_ids)
        return unknown_share(token_ids != 0, token_ids == 1)

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
