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
"""

import keras
import numpy as np


def unselectable_token_ids(tokenizer):
    """Ids masking never picks: the tokenizer's special tokens ([CLS],
    [SEP], [PAD], [MASK]) and its unknown token ([UNK], whose target would
    teach nothing), sorted."""
    ids = {int(i) for i in tokenizer.special_token_ids}
    unknown = getattr(tokenizer, "oov_token", None)
    if unknown is not None:
        ids.add(int(tokenizer.token_to_id(unknown)))
    return sorted(ids)


def pack_texts(tokenizer, texts, sequence_length, batch_size=512):
    """`[CLS] text [SEP]` token ids, `(len(texts), sequence_length)` int32,
    padded with [PAD] and cut to length (a `keras_hub.models.BertTokenizer`
    or any tokenizer with cls/sep/pad ids)."""
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

    >>> ids = pack_texts(tokenizer, texts, sequence_length=128)
    >>> batches = MaskedLMBatches(ids, 64, tokenizer, seed=1)
    >>> mlm.fit(batches, epochs=3,
    ...         callbacks=[ReproducibleEpochs(1, [batches])])
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
