"""zoo.data.tokenizers: the character tokenizer and the wordpiece option."""

import keras
import numpy as np
import pytest

from zoo.data.tokenizers import (
    CharacterTokenizer,
    encode_corpus,
    train_tokenizer,
)

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n"


def test_vocabulary_is_specials_then_sorted_characters():
    tokenizer = CharacterTokenizer.from_text(TEXT)
    vocabulary = tokenizer.get_vocabulary()
    assert vocabulary[:2] == ["<pad>", "<unk>"]
    assert vocabulary[2:] == sorted(set(TEXT))
    assert tokenizer.pad_token_id == 0 and tokenizer.unknown_token_id == 1
    assert tokenizer.end_token_id is None and tokenizer.start_token_id is None


def test_round_trip_batched_and_single():
    tokenizer = CharacterTokenizer.from_text(TEXT)
    ids = tokenizer(["hear me", "speak."])
    assert [len(x) for x in ids] == [7, 6]
    assert tokenizer.detokenize(ids) == ["hear me", "speak."]
    assert tokenizer.detokenize(tokenizer("Citizen")) == "Citizen"
    # A 2-D array of ids; 'b' is not in the vocabulary.
    assert tokenizer.detokenize(np.array(tokenizer(["ab", "cd"]))) == [
        "a\ufffd",
        "cd",
    ]


def test_unknown_characters_map_to_unk():
    tokenizer = CharacterTokenizer.from_text("abc")
    assert tokenizer("abzé") == [2, 3, 1, 1]
    assert tokenizer.detokenize([2, 3, 1]) == "ab\ufffd"


def test_encode_text_matches_tokenize():
    tokenizer = CharacterTokenizer.from_text(TEXT)
    text = TEXT + "zé\U0001f600"
    np.testing.assert_array_equal(
        tokenizer.encode_text(text), np.asarray(tokenizer(text), "int32")
    )


def test_tf_data_path_gives_the_python_ids():
    """Inside tf.data (what fit / evaluate on strings run) the tokenizer
    uses TensorFlow ops; the ids are the Python path's, unknown and
    non-BMP characters included."""
    import tensorflow as tf

    tokenizer = CharacterTokenizer.from_text(TEXT)
    texts = ["hear me", "zé \U0001f600 speak", "", "First\nCitizen"]
    batch = next(
        iter(tf.data.Dataset.from_tensor_slices(texts).batch(4).map(tokenizer))
    )
    assert batch.to_list() == tokenizer(texts)
    single = next(iter(tf.data.Dataset.from_tensors(texts[1]).map(tokenizer)))
    assert single.numpy().tolist() == tokenizer(texts[1])
    with pytest.raises(ValueError, match="rank 2"):
        tf.data.Dataset.from_tensors([texts]).map(tokenizer)


def test_detokenize_in_a_tf_function_gives_the_python_text():
    """Inside `tf.function` (an exported `generate` signature) detokenize
    uses TensorFlow ops: the Python path's text, padding and end tokens
    dropped, the unknown token as U+FFFD."""
    import tensorflow as tf

    tokenizer = CharacterTokenizer.from_text(TEXT, end_token="<eos>")
    rows = [
        tokenizer("hear me") + [tokenizer.end_token_id, 0, 0],
        tokenizer("zé speak"),
        [],
    ]
    graph = tf.function(tokenizer.detokenize)
    ragged = graph(tf.ragged.constant(rows, dtype=tf.int32))
    assert [t.decode() for t in ragged.numpy()] == tokenizer.detokenize(rows)
    assert tokenizer.detokenize(rows)[1].endswith("\ufffd speak")  # é
    dense = graph(tf.constant([rows[0], rows[0]]))
    assert [t.decode() for t in dense.numpy()] == ["hear me"] * 2


def test_bad_ids_and_vocabularies_are_errors():
    tokenizer = CharacterTokenizer.from_text("abc")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.detokenize([2, 99])
    with pytest.raises(ValueError, match="single characters"):
        CharacterTokenizer(["<pad>", "<unk>", "ab"])
    with pytest.raises(ValueError, match="repeated"):
        CharacterTokenizer(["<pad>", "<unk>", "a", "a"])
    with pytest.raises(ValueError, match="Cannot find special token"):
        CharacterTokenizer(["a", "b"])
    with pytest.raises(ValueError, match="No vocabulary"):
        CharacterTokenizer().tokenize("a")


def test_config_round_trip_and_end_token():
    tokenizer = CharacterTokenizer.from_text(TEXT, end_token="<eos>")
    clone = CharacterTokenizer.from_config(tokenizer.get_config())
    assert clone.get_vocabulary() == tokenizer.get_vocabulary()
    assert clone.end_token_id == 2
    assert clone.detokenize([5, 2, 6]) == tokenizer.detokenize([5, 2, 6])
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(tokenizer)
    )
    assert revived("hear") == tokenizer("hear")


def test_wordpiece_option_is_a_keras_hub_tokenizer():
    text = (
        "to be or not to be that is the question\n" * 20
        + "whether tis nobler in the mind to suffer\n" * 20
    )
    tokenizer = train_tokenizer(text, "wordpiece", vocabulary_size=60)
    assert tokenizer.vocabulary_size() <= 60
    ids = encode_corpus(tokenizer, text)
    assert ids.dtype == np.int32 and ids.ndim == 1 and ids.max() < 60
    assert "question" in tokenizer.detokenize(tokenizer("the question"))
    with pytest.raises(ValueError, match="kind must be one of"):
        train_tokenizer(text, "bytes")


# ---- SubwordTokenizer (SentencePiece) -------------------------------------


def test_subword_tokenizer_round_trips_german_and_keeps_unknown_characters():
    from zoo.data.tokenizers import train_subword_tokenizer

    texts = [
        "Zwei Hunde spielen im Schnee.",
        "Ein Mädchen läuft über die Straße.",
        "Two dogs play in the snow.",
        "Größere Männer.",
    ] * 20
    tokenizer = train_subword_tokenizer(texts, 90)
    assert (
        tokenizer.pad_token_id,
        tokenizer.unknown_token_id,
        tokenizer.start_token_id,
        tokenizer.end_token_id,
    ) == (0, 1, 2, 3)
    for text in texts[:4]:
        ids = tokenizer.tokenize(text)
        assert tokenizer.detokenize(ids) == text
    # A character never seen becomes the unknown token, not nothing.
    ids = list(tokenizer.tokenize("Zwei Ω Hunde"))
    assert tokenizer.unknown_token_id in ids
    with pytest.raises(ValueError, match="needs some text"):
        train_subword_tokenizer(["", "  "], 50)
