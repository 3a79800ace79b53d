"""zoo.data.masked_lm: BERT's masking in NumPy, and batches that are a pure
function of (seed, epoch, batch)."""

import keras_hub
import numpy as np
import pytest

from zoo.data.masked_lm import MaskedLMBatches, mask_tokens, pack_texts

SPECIAL = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]


def corpus(rows=400, length=40, vocabulary=300, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocabulary, (rows, length)).astype("int32")
    lengths = rng.integers(5, length, rows)
    for row, n in enumerate(lengths):
        ids[row, 0], ids[row, n - 1], ids[row, n:] = 2, 3, 0
    ids[::7, 5] = 1  # some [UNK]
    return ids


def test_masking_never_picks_special_tokens_and_reaches_its_rates():
    ids = corpus()
    inputs, mask_ids, weights = mask_tokens(
        ids,
        np.random.default_rng(1),
        vocabulary_size=300,
        mask_token_id=4,
        special_token_ids=SPECIAL,
        mask_selection_length=20,
    )
    positions = inputs["mask_positions"]
    chosen = weights > 0
    rows = np.nonzero(chosen)[0]
    picked = positions[chosen]
    assert not np.isin(ids[rows, picked], SPECIAL).any()
    np.testing.assert_array_equal(mask_ids[chosen], ids[rows, picked])
    ordinary = (~np.isin(ids, SPECIAL)).sum()
    assert 0.13 < chosen.sum() / ordinary < 0.17
    now = inputs["token_ids"][rows, picked]
    assert 0.75 < (now == 4).mean() < 0.85
    assert 0.06 < (now == ids[rows, picked]).mean() < 0.15  # kept (+ rare
    # random draws of the same id)
    others = ~np.isin(now, [4]) & (now != ids[rows, picked])
    assert 0.06 < others.mean() < 0.14
    assert not np.isin(now[others], SPECIAL).any()
    # Positions ascend, then pad with 0 (weight 0); untouched elsewhere.
    for row in range(len(ids)):
        real = positions[row][chosen[row]]
        assert np.all(np.diff(real) > 0)
        assert np.all(positions[row][~chosen[row]] == 0)
        untouched = np.setdiff1d(np.arange(ids.shape[1]), real)
        np.testing.assert_array_equal(
            inputs["token_ids"][row, untouched], ids[row, untouched]
        )
    np.testing.assert_array_equal(inputs["padding_mask"], ids != 0)


def test_the_selection_length_caps_the_choices():
    ids = corpus(rows=50)
    inputs, _, weights = mask_tokens(
        ids,
        np.random.default_rng(2),
        vocabulary_size=300,
        mask_token_id=4,
        special_token_ids=SPECIAL,
        mask_rate=0.9,
        mask_selection_length=3,
    )
    assert inputs["mask_positions"].shape == (50, 3)
    assert weights.sum(1).max() == 3


class _Tokenizer:
    special_token_ids = [0, 2, 3, 4]
    oov_token = "[UNK]"
    mask_token_id = 4
    pad_token_id = 0

    def token_to_id(self, token):
        return 1

    def vocabulary_size(self):
        return 300


def test_batches_are_a_function_of_seed_epoch_and_index():
    ids = corpus()
    a = MaskedLMBatches(ids, 32, _Tokenizer(), seed=3, steps_per_epoch=5)
    b = MaskedLMBatches(ids, 32, _Tokenizer(), seed=3, steps_per_epoch=5)
    b.epoch = 2
    first = b[4]
    a.epoch = 2
    for key in first[0]:
        np.testing.assert_array_equal(a[4][0][key], first[0][key])
    a.epoch = 3
    assert not np.array_equal(a[4][0]["token_ids"], first[0]["token_ids"])
    # Epochs of 5 batches read one stream: epoch 2 batch 2 is step 12 of
    # passes of 12 batches, i.e. the first batch of the second pass.
    assert a.batches_per_pass == 12 and len(a) == 5
    with pytest.raises(IndexError):
        a[5]


def test_pack_texts_writes_cls_text_sep_and_cuts():
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=[
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "a",
            "good",
            "film",
        ],
        lowercase=True,
    )
    ids = pack_texts(
        tokenizer,
        ["a good film", "film film film film film"],
        sequence_length=6,
    )
    np.testing.assert_array_equal(ids, [[2, 5, 6, 7, 3, 0], [2, 7, 7, 7, 7, 3]])
    with pytest.raises(ValueError):
        pack_texts(tokenizer, ["a"], sequence_length=2)


def test_the_padding_mask_follows_the_tokenizers_pad_id():
    # [PAD] is id 4 here, [UNK] id 0: packed rows pad with 4.
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=[
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "[PAD]",
            "a",
            "good",
            "film",
        ],
        lowercase=True,
    )
    ids = pack_texts(tokenizer, ["a zebra film", "good"], sequence_length=8)
    np.testing.assert_array_equal(
        ids, [[1, 5, 0, 7, 2, 4, 4, 4], [1, 6, 2, 4, 4, 4, 4, 4]]
    )
    inputs, _, _ = MaskedLMBatches(ids, 2, tokenizer, shuffle=False)[0]
    np.testing.assert_array_equal(inputs["padding_mask"], ids != 4)
