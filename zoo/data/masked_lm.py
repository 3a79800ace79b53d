"""Masked-LM batches that are a pure function of (seed, epoch, batch).

`BertMaskedLMPreprocessor` masks inside `tf.data` with keras-hub's
`MaskedLMMaskGenerator`: right for `fit` on raw strings, but its random
state lives in the pipeline, so an interrupted run cannot replay the batches
it would have seen. Long pretraining runs tokenize the corpus once
(`pack_texts`) and mask here instead, with NumPy: the `k`-th batch of the
run (batch `i` of epoch `e` is `k = e * batches_per_epoch + i`) is masked
from `numpy.random.default_rng([seed, k])`, the same on every backend
and after a resume, so a resumed run ends with the weights an
uninterrupted one would have.

The masking is BERT's: each ordinary token (never [CLS], [SEP], [PAD],
[MASK] or [UNK]) is chosen with probability `mask_rate`, at most
`mask_selection_length` per row; a chosen token becomes [MASK] with
probability `mask_token_rate`, a random ordinary token with
`random_token_rate`, and stays itself otherwise.

A pretraining corpus is built once and kept on disk: texts cut into pieces
of about a row's length (`split_into_pieces`), a WordPiece vocabulary
learned on them and kept beside the run (`load_or_train_bert_tokenizer`),
and the pieces packed into ids (`packed_corpus`), cached in an `.npz` that
is written atomically and reused while everything it depends on is the same.
`load_packed_corpus` reads such a file where there is no text and no
TensorFlow (an accelerator machine).
"""

import collections
import hashlib
import json
import os
import zipfile

import keras
import numpy as np

from zoo.data.files import read_utf8
from zoo.data.tokenizers import bert_tokenizer, train_bert_tokenizer
from zoo.saving import atomic_path


def unselectable_token_ids(tokenizer):
    """Ids masking never picks: the tokenizer's special tokens ([CLS],
    [SEP], [PAD], [MASK]) and its unknown token ([UNK], whose target would
    teach nothing), sorted."""
    ids = {int(i) for i in tokenizer.special_token_ids}
    unknown = getattr(tokenizer, "oov_token", None)
    if unknown is not None:
        ids.add(int(tokenizer.token_to_id(unknown)))
    return sorted(ids)


def words_per_piece(sequence_length, tokens_per_word=1.3):
    """Words per pretraining piece for rows of `sequence_length` tokens:
    [CLS] and [SEP] take two, and WordPiece spends about `tokens_per_word`
    tokens per word (1.3 on IMDB reviews). At least 1.

    Example:

    >>> words_per_piece(128)
    96
    """
    return max(int((sequence_length - 2) / tokens_per_word), 1)


def split_into_pieces(texts, max_words):
    """Texts cut into consecutive pieces of at most `max_words` words, so
    that a model with short rows reads most of each text, not only its
    start. `<br />` tags become spaces first (`zoo.models.bert.
    strip_markup`). A text's last piece is dropped when it is shorter than a
    fifth of `max_words` (a tail), unless it is the text's only piece; a
    text without words gives none.

    Args:
        texts: strings (anything else is read as `str(text)`).
        max_words: the most words per piece (`words_per_piece`).

    Returns:
        A list of strings (words joined by single spaces), text by text.

    Example:

    >>> review = " ".join(f"w{i}" for i in range(21))
    >>> pieces = split_into_pieces([review, "a short<br />review"], 10)
    >>> [len(piece.split()) for piece in pieces]
    [10, 10, 3]
    >>> pieces[-1]
    'a short review'
    """
    # Imported here: zoo.models.bert imports this module.
    from zoo.models.bert.bert_preprocessor import strip_markup

    pieces = []
    for text in texts:
        words = strip_markup(str(text)).split()
        for start in range(0, len(words), max_words):
            piece = words[start : start + max_words]
            if len(piece) >= max(max_words // 5, 1) or start == 0:
                pieces.append(" ".join(piece))
    return pieces


def pack_texts(tokenizer, texts, sequence_length, batch_size=512):
    """`[CLS] text [SEP]` token ids, `(len(texts), sequence_length)` int32,
    padded with [PAD] and cut to length (a `keras_hub.models.BertTokenizer`
    or any tokenizer with cls/sep/pad ids).

    Args:
        tokenizer: gives each text's ids and the [CLS], [SEP], [PAD] ids.
        texts: strings.
        sequence_length: ids per row, [CLS] and [SEP] included (at least 3;
            a longer text is cut to `sequence_length - 2` ids).
        batch_size: texts tokenised per call.

    Returns:
        `(len(texts), sequence_length)` int32.

    Example:

    >>> from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer
    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "good", "film"])
    >>> pack_texts(tokenizer, ["a good film", "a good good good film"], 5)
    array([[2, 5, 6, 7, 3],
           [2, 5, 6, 6, 3]], dtype=int32)
    """
    if sequence_length < 3:
        raise ValueError(
            f"sequence_length={sequence_length} leaves no room "
            "for a token between [CLS] and [SEP]."
        )
    out = np.full(
        (len(texts), sequence_length), tokenizer.pad_token_id, "int32"
    )
    cls, sep = int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)
    for start in range(0, len(texts), batch_size):
        batch = [str(t) for t in texts[start : start + batch_size]]
        for row, ids in enumerate(tokenizer(batch)):
            ids = np.asarray(ids).reshape(-1)[: sequence_length - 2]
            out[start + row, 0] = cls
            out[start + row, 1 : len(ids) + 1] = ids
            out[start + row, len(ids) + 1] = sep
    return out


def mask_tokens(
    token_ids,
    rng,
    *,
    vocabulary_size,
    mask_token_id,
    special_token_ids,
    mask_rate=0.15,
    mask_selection_length=None,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    pad_token_id=0,
):
    """BERT's masking of a batch of packed ids, with NumPy.

    Args:
        token_ids: `(batch, seq)` int ids.
        rng: a `numpy.random.Generator`.
        vocabulary_size: random replacements are drawn from the ordinary ids
            below it.
        mask_token_id: the [MASK] id.
        special_token_ids: ids never chosen (and never drawn as random
            replacements): [CLS], [SEP], [PAD], [MASK], [UNK].
        mask_rate: chance that an ordinary token is chosen.
        mask_selection_length: most choices per row (default `seq`).
        mask_token_rate, random_token_rate: what a chosen token becomes.
        pad_token_id: the [PAD] id, what the padding mask leaves out.

    Returns:
        `(inputs, mask_ids, mask_weights)`: `inputs` holds the masked
        `"token_ids"`, `"segment_ids"` (zeros), `"padding_mask"` and
        `"mask_positions"` `(batch, mask_selection_length)` (ascending, 0
        after the real ones); `mask_ids` the original ids there; weights 1
        for real choices.
    """
    token_ids = np.asarray(token_ids)
    batch, length = token_ids.shape
    most = length if mask_selection_length is None else mask_selection_length
    special = np.asarray(sorted(special_token_ids))
    ordinary = np.setdiff1d(np.arange(vocabulary_size), special)
    selectable = ~np.isin(token_ids, special)
    chosen = selectable & (rng.random(token_ids.shape) < mask_rate)
    # Too many in a row: keep a random `most` of them.
    order = np.where(chosen, rng.random(token_ids.shape), np.inf)
    keep = np.argsort(order, axis=1)[:, :most]
    kept = np.take_along_axis(chosen, keep, axis=1)
    positions = np.where(kept, keep, length)  # `length` sorts last
    positions = np.sort(positions, axis=1)
    weights = (positions < length).astype("float32")
    positions = np.where(weights > 0, positions, 0).astype("int32")
    pad = most - positions.shape[1]
    if pad > 0:
        positions = np.pad(positions, ((0, 0), (0, pad)))
        weights = np.pad(weights, ((0, 0), (0, pad)))
    rows = np.arange(batch)[:, None]
    mask_ids = np.where(weights > 0, token_ids[rows, positions], 0)
    masked = token_ids.copy()
    draw = rng.random(positions.shape)
    replace = np.where(draw < mask_token_rate, mask_token_id, -1)
    random_ids = ordinary[rng.integers(0, len(ordinary), positions.shape)]
    replace = np.where(
        (draw >= mask_token_rate)
        & (draw < mask_token_rate + random_token_rate),
        random_ids,
        replace,
    )
    change = (weights > 0) & (replace >= 0)
    masked[rows.repeat(positions.shape[1], 1)[change], positions[change]] = (
        replace[change]
    )
    inputs = {
        "token_ids": masked.astype("int32"),
        "segment_ids": np.zeros_like(masked, dtype="int32"),
        "padding_mask": token_ids != pad_token_id,
        "mask_positions": positions,
    }
    return inputs, mask_ids.astype("int32"), weights


class MaskedLMBatches(keras.utils.PyDataset):
    """Masked batches of a packed corpus, reproducible from (seed, epoch,
    batch index); reshuffled and remasked each epoch.

    Pass `zoo.callbacks.ReproducibleEpochs(seed, [batches])` to `fit` (or
    set `.epoch`) so the batches know which epoch `fit` is in, a resumed one
    included.

    Args:
        token_ids: `(n, seq)` packed ids (`pack_texts`).
        batch_size: rows per batch; the last, smaller batch is dropped.
        tokenizer: gives the vocabulary size, [MASK] and the special ids.
        seed: the run's seed.
        shuffle: a new order every pass over the corpus (False: corpus
            order, for validation).
        steps_per_epoch: batches per epoch (default: one pass). Epochs then
            read the corpus as one stream of passes, so an epoch can be
            shorter than a pass (a checkpoint every few minutes) or longer.
        **mask_options: `mask_rate`, `mask_selection_length`,
            `mask_token_rate`, `random_token_rate` (see `mask_tokens`).

    Example:

    >>> from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer
    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "good", "film"])
    >>> ids = pack_texts(tokenizer, ["a good film", "good film"] * 4, 8)
    >>> batches = MaskedLMBatches(
    ...     ids, 4, tokenizer, seed=1, mask_selection_length=2
    ... )
    >>> inputs, mask_ids, mask_weights = batches[0]
    >>> inputs["token_ids"].shape, inputs["mask_positions"].shape
    ((4, 8), (4, 2))
    >>> mlm.fit(  # doctest: +SKIP
    ...     batches, epochs=3, callbacks=[ReproducibleEpochs(1, [batches])]
    ... )
    """

    def __init__(
        self,
        token_ids,
        batch_size,
        tokenizer,
        seed=0,
        shuffle=True,
        steps_per_epoch=None,
        **mask_options,
    ):
        super().__init__(workers=1, use_multiprocessing=False)
        self.token_ids = np.asarray(token_ids, "int32")
        self.batch_size = int(batch_size)
        if len(self.token_ids) < self.batch_size:
            raise ValueError(
                f"{len(self.token_ids)} rows are fewer than one batch of "
                f"{self.batch_size}."
            )
        self.mask_options = dict(
            vocabulary_size=int(tokenizer.vocabulary_size()),
            mask_token_id=int(tokenizer.mask_token_id),
            special_token_ids=unselectable_token_ids(tokenizer),
            pad_token_id=int(tokenizer.pad_token_id),
            **mask_options,
        )
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.epoch = 0
        self.steps_per_epoch = steps_per_epoch
        self._order = (None, None)  # (pass, permutation)

    @property
    def batches_per_pass(self):
        return len(self.token_ids) // self.batch_size

    def __len__(self):
        return self.steps_per_epoch or self.batches_per_pass

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        step = self.epoch * len(self) + int(index)  # in the whole run
        corpus_pass, within = divmod(step, self.batches_per_pass)
        if self._order[0] != corpus_pass:
            order = np.arange(len(self.token_ids))
            if self.shuffle:
                order = np.random.default_rng(
                    [self.seed, corpus_pass]
                ).permutation(len(order))
            self._order = (corpus_pass, order)
        order = self._order[1]
        rows = order[within * self.batch_size : (within + 1) * self.batch_size]
        rng = np.random.default_rng([self.seed, step])
        return mask_tokens(self.token_ids[rows], rng, **self.mask_options)


# --- a pretraining corpus, built once and kept on disk ------------------------


def load_or_train_bert_tokenizer(path, texts, vocabulary_size, reuse=False):
    """A pretraining run's WordPiece tokenizer, kept in `path` (one piece a
    line, written atomically): read back from there when `reuse` and the
    file exists (a resumed run keeps its ids), else learned on `texts` with
    `zoo.data.tokenizers.train_bert_tokenizer` and written there.

    Args:
        path: the vocabulary file.
        texts: the pretraining text (never evaluation text).
        vocabulary_size: pieces wanted, special tokens included.
        reuse: read `path` when it exists instead of learning anew.

    Returns:
        A `keras_hub.models.BertTokenizer` (`zoo.data.tokenizers.
        bert_tokenizer` of the vocabulary).

    Example:

    >>> texts = ["a good film", "a bad film", "good acting"] * 10
    >>> tokenizer = load_or_train_bert_tokenizer("vocabulary.txt", texts, 40)
    >>> again = load_or_train_bert_tokenizer(
    ...     "vocabulary.txt", ["other text"], 40, reuse=True
    ... )
    >>> again.get_vocabulary() == tokenizer.get_vocabulary()
    True
    """
    if reuse and os.path.exists(path):
        vocabulary = read_utf8(path).split("\n")[:-1]
    else:
        vocabulary = train_bert_tokenizer(
            texts, vocabulary_size
        ).get_vocabulary()
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(vocabulary) + "\n")
    return bert_tokenizer(vocabulary)


def compact_ids(ids, vocabulary_size):
    """Token ids as uint16 where every id of the vocabulary fits (half the
    file), else int32.

    Args:
        ids: an int array.
        vocabulary_size: ids are below it.

    Returns:
        `ids` as uint16 (`vocabulary_size < 2**16`) or int32, same shape.

    Example:

    >>> compact_ids(np.array([[2, 7, 3]]), 8000).dtype
    dtype('uint16')
    """
    return ids.astype("uint16" if vocabulary_size < 2**16 else "int32")


def _tokenizer_settings(tokenizer):
    """What besides the vocabulary decides a tokenizer's ids (its config
    without name, dtype and files), as JSON."""
    config = getattr(tokenizer, "get_config", dict)()
    for key in ("name", "trainable", "dtype", "config_file", "vocabulary"):
        config.pop(key, None)
    return json.dumps(config, sort_keys=True, default=str)


def corpus_key(tokenizer, texts, validation_texts, sequence_length, reviews):
    """A SHA-256 hex digest of everything `packed_corpus`'s arrays depend
    on: the tokenizer's vocabulary and settings, every text and held-out
    text (in order), `sequence_length` and `reviews`. Any change gives
    another key.

    Example:

    >>> from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer
    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "film"])
    >>> key = corpus_key(tokenizer, ["a film"], ["film"], 8, 2)
    >>> key == corpus_key(tokenizer, ["a film"], ["film"], 16, 2)
    False
    """
    digest = hashlib.sha256()
    sections = (
        ["zoo packed corpus", str(int(sequence_length)), str(int(reviews))],
        [_tokenizer_settings(tokenizer)],
        tokenizer.get_vocabulary(),
        texts,
        validation_texts,
    )
    for section in sections:
        digest.update(f"{len(section)};".encode())
        for item in section:
            data = str(item).encode("utf-8")
            digest.update(f"{len(data)}:".encode())
            digest.update(data)
    return digest.hexdigest()


PackedCorpus = collections.namedtuple(
    "PackedCorpus", ["vocabulary", "train", "validation", "reviews"]
)


def packed_corpus(
    path, tokenizer, texts, validation_texts, sequence_length, reviews=0
):
    """`texts` and `validation_texts` packed into ids (`pack_texts`) once:
    the arrays are kept in `path` with the vocabulary, `reviews` and their
    `corpus_key`, and a later call whose inputs give the same key reads them
    back instead of tokenising again (200,000 pieces take minutes on 2 CPU
    cores). Inputs that differ in anything (a setting, a text, the
    vocabulary) are packed anew and replace the file. The file is written
    atomically (`zoo.saving.atomic_path`): an interrupted write leaves the
    earlier file or none, never half of one; a file that cannot be read is
    packed anew. `load_packed_corpus` reads it without the text or a
    tokenizer.

    Args:
        path: the `.npz` file (`train` and `validation` stored as
            `compact_ids`; `vocabulary`, `reviews`, `key`).
        tokenizer: a `keras_hub.models.BertTokenizer` (any tokenizer
            `pack_texts` takes that has `get_vocabulary()`).
        texts: the pretraining pieces.
        validation_texts: the held-out pieces.
        sequence_length: ids per row, [CLS] and [SEP] included.
        reviews: how many documents the pieces came from (kept for
            `load_packed_corpus`).

    Returns:
        `(train, validation)`: int32 ids, `(len(texts), sequence_length)`
        and `(len(validation_texts), sequence_length)`.

    Example:

    >>> from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer
    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "good", "film"])
    >>> train, validation = packed_corpus(
    ...     "packed_6.npz", tokenizer, ["a good film", "film"], ["good"], 6
    ... )
    >>> train
    array([[2, 5, 6, 7, 3, 0],
           [2, 7, 3, 0, 0, 0]], dtype=int32)
    >>> validation.shape
    (1, 6)
    """
    key = corpus_key(
        tokenizer, texts, validation_texts, sequence_length, reviews
    )
    if os.path.exists(path):
        try:
            with np.load(path) as cached:
                if str(cached["key"]) == key:
                    return (
                        cached["train"].astype("int32"),
                        cached["validation"].astype("int32"),
                    )
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # not a corpus this function wrote: packed anew below
    vocabulary = tokenizer.get_vocabulary()
    train = pack_texts(tokenizer, texts, sequence_length)
    validation = pack_texts(tokenizer, validation_texts, sequence_length)
    with atomic_path(path) as tmp:
        np.savez_compressed(
            tmp,
            train=compact_ids(train, len(vocabulary)),
            validation=compact_ids(validation, len(vocabulary)),
            vocabulary=np.array(vocabulary),
            key=np.array(key),
            reviews=np.array(reviews),
        )
    return train, validation


def load_packed_corpus(path):
    """A corpus `packed_corpus` wrote, without the text or a tokenizer.

    Args:
        path: the `.npz` file.

    Returns:
        `PackedCorpus(vocabulary, train, validation, reviews)`: the
        vocabulary as a list of strings (`zoo.data.tokenizers.
        bert_tokenizer` makes the tokenizer), `train` and `validation` as
        int32 `(pieces, sequence_length)`, `reviews` an int.

    Raises:
        FileNotFoundError: no file at `path`.
        OSError, ValueError, KeyError: the file is not such a corpus.

    Example:

    >>> from zoo.data.tokenizers import BERT_SPECIAL_TOKENS, bert_tokenizer
    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "film"])
    >>> _ = packed_corpus("c.npz", tokenizer, ["a film"], ["film"], 8, 2)
    >>> corpus = load_packed_corpus("c.npz")
    >>> corpus.train.shape, corpus.reviews, corpus.vocabulary[-1]
    ((1, 8), 2, 'film')
    """
    with np.load(path) as packed:
        corpus = {
            k: packed[k]
            for k in ("train", "validation", "vocabulary", "reviews")
        }
    return PackedCorpus(
        vocabulary=corpus["vocabulary"].tolist(),
        train=corpus["train"].astype("int32"),
        validation=corpus["validation"].astype("int32"),
        reviews=int(corpus["reviews"]),
    )
