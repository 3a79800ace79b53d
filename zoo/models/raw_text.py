"""`fit`, `evaluate` and `predict` on raw input (strings, or images) for
keras-hub tasks (`RawInputMixin`, `RawTextMixin`), and the warnings for
text the model cannot read: an input with no token in the vocabulary
(`warn_unknown_texts`), pieces of a prompt or sentence outside it
(`warn_unknown_pieces`)."""

import warnings

import keras
import numpy as np

from zoo.data.text import (
    excerpt,
    fit_dataset,
    split_validation_arrays,
    text_batch,
)


class RawInputMixin:
    """The `fit` and `evaluate` of a keras-hub `Task` on raw input, shared
    by the tasks whose preprocessor reads strings (`RawTextMixin`) or
    images (`zoo.models.vit.vit_image_classifier.RawImagesMixin`).

    A subclass says what its raw input is with `_raw_input(x, y, method)`,
    which returns `(x, y)` as keras-hub's pipeline should read them, or
    raises one line naming what is wrong (the default takes them as they
    are). `fit` checks the training input and that of `validation_data`
    the same way, holds out `validation_split` of arrays before they
    become a dataset (as `keras.Model.fit` does; keras-hub's tasks cannot
    afterwards), and reshuffles arrays every epoch (keras-hub's tasks turn
    them into a dataset in order and then ignore `shuffle=True`).
    """

    def _raw_input(self, x, y, method):
        return x, y

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        sample_weight=None,
        shuffle=True,
        validation_split=None,
        validation_data=None,
        **kwargs,
    ):
        x, y = self._raw_input(x, y, "fit")
        if validation_data is None:  # held out before x becomes a dataset
            (x, y, sample_weight), validation_data = split_validation_arrays(
                x, y, sample_weight, validation_split
            )
        elif isinstance(validation_data, (tuple, list)) and validation_data:
            x_val, y_val = self._raw_input(
                validation_data[0],
                validation_data[1] if len(validation_data) > 1 else None,
                "fit",
            )
            validation_data = (x_val, y_val, *validation_data[2:])
        x, y, sample_weight, batch_size = fit_dataset(
            x, y, sample_weight, batch_size, shuffle
        )
        return super().fit(
            x,
            y,
            batch_size=batch_size,
            sample_weight=sample_weight,
            shuffle=False,
            validation_data=validation_data,
            **kwargs,
        )

    def evaluate(self, x=None, y=None, *args, **kwargs):
        x, y = self._raw_input(x, y, "evaluate")
        return super().evaluate(x, y, *args, **kwargs)


class RawTextMixin(RawInputMixin):
    """Mixin for keras-hub `Task`s whose preprocessor reads strings.

    Put it first: `class TextClassifier(RawTextMixin, PortableCompileConfig,
    keras_hub.models.Task)`. A lone string is a batch of one and an empty
    batch is an error naming the call, before keras-hub's pipeline sees
    either; so is None, a number, a nested list or a list holding
    something other than strings (`zoo.data.text.text_batch`); `fit`
    reshuffles arrays every epoch, as `keras.Model.fit` does, and checks
    `validation_data`'s texts too (`RawInputMixin`). Datasets pass through
    unchanged. `text_segments` (a class attribute): whether a tuple is
    segments of a pair (BERT's tasks), not a batch. A task built with
    `preprocessor=None` reads token ids, which are not checked as text
    (their values are: `zoo.models.token_ids`).

    `predict` warns, once per call, when texts have no token in the
    vocabulary (the model's answer for them reflects none of their
    words), if the preprocessor can tell (`unknown_token_share`).

    A `keras.utils.PyDataset` is taken as model input already preprocessed
    (e.g. `zoo.data.masked_lm.MaskedLMBatches`, `zoo.data.corpus.
    TokenWindows`): `fit` and `evaluate` hand it to `keras.Model`'s, in its
    own order, with no TensorFlow pipeline; `validation_data` must then be
    one too.
    """

    text_segments = False

    def _raw_input(self, x, y, method):
        if self.preprocessor is None:  # token ids
            return x, y
        return text_batch(x, method, self.text_segments), y

    def fit(self, x=None, y=None, *args, **kwargs):
        if isinstance(x, keras.utils.PyDataset):
            # Keras refuses y, batch_size or sample_weight beside it.
            return keras.Model.fit(
                self, x, y, *args, **{**kwargs, "shuffle": False}
            )
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        if isinstance(x, keras.utils.PyDataset):
            return keras.Model.evaluate(self, x, *args, **kwargs)
        return super().evaluate(x, y, *args, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        x, _ = self._raw_input(x, None, "predict")
        # The caller's line: below it KeepsWeightsOnError's and
        # ChecksTokenIds' predict, then this one.
        self._warn_unknown_texts(x, "predict", stacklevel=5)
        if self.preprocessor is None or not isinstance(
            x, (list, tuple, np.ndarray)
        ):
            return super().predict(x, batch_size=batch_size, **kwargs)
        # Texts in memory: the preprocessor reads them eagerly, a chunk at
        # a time, and the model predicts on the arrays. keras-hub's way, a
        # TensorFlow pipeline mapped over the texts, traces the tokenizer
        # on every call: seconds per call, for one text or many.
        features = preprocess_texts(self.preprocessor, x)
        return keras.Model.predict(
            self, features, batch_size=batch_size, **kwargs
        )

    def unknown_token_share(self, texts):
        """For each text, the share of the tokens the model reads that are
        outside its vocabulary (the preprocessor's `unknown_token_share`):
        a float64 NumPy array `(n,)`, 0 when every token is known, 1 when
        none is (a text with no token at all counts as 1).

        Raises:
            ValueError: the task has no preprocessor that can tell.
        """
        share = getattr(self.preprocessor, "unknown_token_share", None)
        if share is None:
            raise ValueError(
                f"{type(self).__name__}'s preprocessor "
                f"({type(self.preprocessor).__name__}) cannot tell known "
                "tokens from unknown ones."
            )
        return share(texts)  # which checks them

    def _warn_unknown_texts(self, x, method, stacklevel=4):
        """Warns (`warn_unknown_texts`) when texts of `x` (as `text_batch`
        returns them) have no known token; nothing for a dataset or when
        the preprocessor cannot tell."""
        share = getattr(self.preprocessor, "unknown_token_share", None)
        if share is None or not isinstance(x, (list, tuple, np.ndarray)):
            return
        warn_unknown_texts(x, share(x), method, stacklevel + 1)


def preprocess_texts(preprocessor, texts, chunk=1024):
    """`preprocessor`'s features for a batch of strings (or a tuple of
    segments: batches of equal length), as NumPy arrays: the preprocessor
    called eagerly on `chunk` texts at a time, the chunks concatenated.
    What a preprocessor returns beside the features (labels, weights)
    is dropped."""
    segments = texts if isinstance(texts, tuple) else None
    count = len(segments[0] if segments else texts)
    parts = []
    for start in range(0, count, chunk):
        if segments:
            piece = tuple(s[start : start + chunk] for s in segments)
        else:
            piece = texts[start : start + chunk]
        # By keyword: a tuple passed positionally would be read as (x, y).
        features, _, _ = keras.utils.unpack_x_y_sample_weight(
            preprocessor(x=piece)
        )
        parts.append(keras.tree.map_structure(np.asarray, features))
    return keras.tree.map_structure(
        lambda *arrays: np.concatenate(arrays), *parts
    )


def unknown_share(counted, unknown):
    """`(n,)` float64: per row of the boolean `(n, length)` arrays, the share
    of `counted` positions (a text's tokens, not its padding or special
    tokens) that are `unknown`; 1 for a row with nothing counted."""
    counted = np.asarray(counted, bool)
    total = counted.sum(-1)
    bad = np.logical_and(counted, unknown).sum(-1)
    return np.where(total > 0, bad / np.maximum(total, 1), 1.0)


def warn_unknown_texts(x, shares, method, stacklevel=3):
    """One UserWarning, when some texts of `x` (a batch of strings, or a
    tuple of segments) have no token in the vocabulary (`shares` 1) and
    are not blank (`zoo.data.text.text_batch` warns about those): names
    how many of how many, and the first. The model's answer for such a
    text (a confident probability, say) reflects none of its words."""
    segments = x if isinstance(x, tuple) else (x,)
    texts = [
        " ".join(_as_str(part) for part in parts)
        for parts in zip(
            *(np.asarray(s, dtype=object).reshape(-1) for s in segments)
        )
    ]
    unread = [
        i
        for i, (text, share) in enumerate(zip(texts, np.asarray(shares)))
        if share >= 1.0 and text.strip()
    ]
    if not unread:
        return
    first = unread[0]
    warnings.warn(
        f"{method}(): {len(unread)} of {len(texts)} texts have no token in "
        f"the model's vocabulary (the first at index {first}: "
        f"{excerpt(texts[first], 40)}); what the model gives for them "
        "reflects none of their words.",
        UserWarning,
        stacklevel=stacklevel,
    )


def warn_unknown_pieces(
    tokenizer, text, what, count, unit="token", after="", stacklevel=3
):
    """One UserWarning for a text (`what`, e.g. "generate(): prompt 1")
    that the tokenizer reads partly as its unknown token, `count` times
    (`unit`s: "token", "piece"), naming the characters that are (up to
    ten, for a text under 10,000 characters); `after` ends the sentence
    (what becomes of them)."""
    shown = ""
    unknown = getattr(tokenizer, "unknown_token_id", None)
    if unknown is not None and len(text) < 10_000:
        chars = sorted({ch for ch in text if not ch.isspace()})
        ids = tokenizer.tokenize(chars) if chars else []
        chars = [
            ch
            for ch, piece in zip(chars, ids)
            if unknown in np.asarray(piece).reshape(-1).tolist()
        ]
        if chars and len(chars) <= 10:
            shown = " (" + ", ".join(repr(ch) for ch in chars) + ")"
    warnings.warn(
        f"{what} has {count} {unit}(s) "
        f"outside the vocabulary{shown}; the model reads them as the "
        f"unknown token{after}.",
        UserWarning,
        stacklevel=stacklevel,
    )


def _as_str(text):
    return (
        text.decode("utf-8", "replace")
        if isinstance(text, bytes)
        else str(text)
    )
