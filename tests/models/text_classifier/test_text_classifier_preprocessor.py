"""TextClassifierPreprocessor: standardisation, vocabulary, truncation,
bigrams, presets and `.keras` round trips (with the vocabulary)."""

import keras
import numpy as np
import pytest

from zoo.models import (
    AttentionPoolingBackbone,
    MeanPoolingBackbone,
    TextClassifier,
    TextClassifierPreprocessor,
)


def test_preprocessor_lowercases_strips_br_and_punctuation():
    pre = TextClassifierPreprocessor(max_tokens=20, sequence_length=6)
    pre.adapt(["Great film!<br />Great acting.", "bad, BAD film"])
    vocabulary = pre.get_vocabulary()
    assert vocabulary[:2] == ["", "[UNK]"]
    assert (
        "br" not in vocabulary
        and "great" in vocabulary
        and "film!" not in vocabulary
    )
    ids = np.asarray(pre(["GREAT film<br />unknownword"]))
    expected = [vocabulary.index("great"), vocabulary.index("film"), 1, 0, 0, 0]
    assert ids.tolist() == [expected]


def test_vocabulary_survives_a_keras_round_trip_with_line_break_characters(
    tmp_path,
):
    """IMDB writes "..." as \x85; a token holding it would be split in two by
    the vocabulary file that .keras saves one token per line."""
    texts = [
        "Great film\x85 loved it\u2028really",
        "bad\x1cfilm\rawful\x0bmess",
    ]
    pre = TextClassifierPreprocessor(max_tokens=50, sequence_length=8)
    pre.adapt(texts)
    assert all(len(token.splitlines()) <= 1 for token in pre.get_vocabulary())
    model = TextClassifier(MeanPoolingBackbone(pre.vocabulary_size, 4), pre)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.preprocessor.get_vocabulary() == pre.get_vocabulary()


def test_preprocessor_truncates_to_sequence_length():
    pre = TextClassifierPreprocessor(max_tokens=20, sequence_length=3)
    pre.adapt(["one two three four five"])
    assert np.asarray(pre(["one two three four five"])).shape == (1, 3)


def test_bigrams_follow_the_kept_words_and_survive_a_round_trip(tmp_path):
    pre = TextClassifierPreprocessor(max_tokens=50, sequence_length=3, ngrams=2)
    assert pre.output_length == 5  # 3 words + 2 bigrams
    pre.adapt(["Not good at all!", "very good film"])
    vocabulary = pre.get_vocabulary()
    assert "not good" in vocabulary and "good film" in vocabulary
    # Truncation keeps the first 3 words and only their bigrams: never
    # "at all", which spans the cut.
    assert "at all" not in vocabulary and "all" not in vocabulary
    ids = np.asarray(pre(["not good at all", "good"]))
    words = [[vocabulary[i] for i in row] for row in ids]
    assert words[0] == ["not", "good", "at", "not good", "good at"]
    assert words[1] == ["good", "", "", "", ""]
    model = TextClassifier(
        AttentionPoolingBackbone(pre.vocabulary_size, 4), pre
    )
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.preprocessor.ngrams == 2
    np.testing.assert_array_equal(
        np.asarray(loaded.preprocessor(["not good at all"])), ids[:1]
    )
    np.testing.assert_allclose(
        loaded.predict(["not good at all"], verbose=0),
        model.predict(["not good at all"], verbose=0),
        atol=1e-6,
    )


def test_preprocessor_rejects_bad_ngrams_and_lengths():
    with pytest.raises(ValueError, match="ngrams"):
        TextClassifierPreprocessor(ngrams=0)
    with pytest.raises(ValueError, match="sequence_length"):
        TextClassifierPreprocessor(sequence_length=0)


def test_from_preset_gives_the_presets_sizes_and_overrides_win():
    pre = TextClassifierPreprocessor.from_preset("imdb_query_bigrams")
    assert (pre.max_tokens, pre.sequence_length, pre.ngrams) == (100000, 512, 2)
    pre = TextClassifierPreprocessor.from_preset(
        "imdb_transformer", max_tokens=50
    )
    assert (pre.max_tokens, pre.sequence_length, pre.ngrams) == (50, 256, 1)
    with pytest.raises(ValueError, match="Unknown text classifier preset"):
        TextClassifierPreprocessor.from_preset("imdb_nope")


def test_a_given_vocabulary_is_saved_in_the_model_file(tmp_path):
    """A vocabulary passed to the constructor (not adapted) survives saving:
    it used to live only in TextVectorization's own config and was lost."""
    adapted = TextClassifierPreprocessor(max_tokens=20, sequence_length=6)
    adapted.adapt(["a good film", "a bad film"])
    pre = TextClassifierPreprocessor(
        max_tokens=20,
        sequence_length=6,
        vocabulary=adapted.get_vocabulary()[2:],
    )
    assert pre.get_vocabulary() == adapted.get_vocabulary()
    model = TextClassifier(MeanPoolingBackbone(pre.vocabulary_size, 4), pre)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.preprocessor.get_vocabulary() == pre.get_vocabulary()
    np.testing.assert_allclose(
        loaded.predict(["a good film"], verbose=0),
        model.predict(["a good film"], verbose=0),
    )
