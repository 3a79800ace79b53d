"""zoo.models.raw_text.preprocess_texts: texts preprocessed eagerly a chunk
at a time give the preprocessor's features for the whole batch, for a
batch of strings and for a pair of segments."""

import keras
import numpy as np

from tests.models.bert.test_bert import tokenizer
from zoo.models.bert import BertClassifierPreprocessor
from zoo.models.raw_text import preprocess_texts

TEXTS = ["a fine film", "dull", "truly and too long", "the end", "so so"]


def _numpy(output):
    features, _, _ = keras.utils.unpack_x_y_sample_weight(output)
    return keras.tree.map_structure(np.asarray, features)


def test_chunks_give_the_features_of_the_whole_batch():
    preprocessor = BertClassifierPreprocessor(tokenizer(), 12)
    whole = _numpy(preprocessor(TEXTS))
    chunked = preprocess_texts(preprocessor, TEXTS, chunk=2)
    assert sorted(chunked) == sorted(whole)
    for name in whole:
        np.testing.assert_array_equal(chunked[name], whole[name])


def test_pairs_of_segments_are_chunked_together():
    preprocessor = BertClassifierPreprocessor(tokenizer(), 12)
    pair = (np.array(TEXTS), np.array(TEXTS[::-1]))
    whole = _numpy(preprocessor(x=pair))
    chunked = preprocess_texts(preprocessor, pair, chunk=3)
    for name in whole:
        np.testing.assert_array_equal(chunked[name], whole[name])
    assert (chunked["segment_ids"] == 1).any()  # the second segment


def test_labels_the_preprocessor_returns_are_dropped():
    preprocessor = BertClassifierPreprocessor(tokenizer(), 12)
    features = preprocess_texts(preprocessor, TEXTS[:2])
    assert isinstance(features, dict) and "token_ids" in features
    assert features["token_ids"].shape == (2, 12)


def test_a_classifier_reads_both_segments_of_a_pair():
    from tests.models.bert.test_bert import SIZE
    from zoo.models.bert import BertBackbone, BertClassifier

    classifier = BertClassifier(
        BertBackbone(tokenizer().vocabulary_size(), **SIZE),
        BertClassifierPreprocessor(tokenizer(), 24),
        num_classes=1,
    )
    first, second = TEXTS[:2], TEXTS[2:4]
    pair = classifier.predict((first, second), verbose=0)
    features = _numpy(classifier.preprocessor(x=(first, second)))
    assert (features["segment_ids"] == 1).any()
    np.testing.assert_allclose(
        pair, keras.ops.convert_to_numpy(classifier(features)), atol=1e-6
    )
