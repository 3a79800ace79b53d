"""GloVe word vectors (Pennington et al., 2014) as embedding initialisers.

The text format is one word per line followed by its vector:
`the 0.418 0.24968 -0.41242 ...`. Full files are at
https://nlp.stanford.edu/projects/glove/ (e.g. glove.6B.zip).
"""

import os

import numpy as np


def load_glove(path, words=None):
    """Reads a GloVe text file.

    Args:
        path: the `.txt` file.
        words: optional set of words to keep (saves memory on big files).

    Returns:
        `(vectors, dim)`: a dict word -> float32 vector, and the vector size.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line does not have the same size as the first one.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"GloVe file {path!r} not found. Download glove.6B.zip from "
            "https://nlp.stanford.edu/projects/glove/ and pass one of its "
            ".txt files."
        )
    vectors, dim = {}, None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            parts = line.rstrip().split(" ")
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise ValueError(
                    f"{path}:{number}: expected {dim} numbers after the word, "
                    f"found {len(parts) - 1}; is this a GloVe text file?"
                )
            if words is None or parts[0] in words:
                vectors[parts[0]] = np.asarray(parts[1:], dtype="float32")
    if dim is None:
        raise ValueError(f"{path} holds no vectors.")
    return vectors, dim


def glove_embedding_matrix(vocabulary, path, seed=0):
    """Embedding matrix for `vocabulary` (index = word id) from a GloVe file.

    Words without a vector get random normal rows with the same scale as the
    GloVe vectors; id 0 (padding) gets zeros.

    Args:
        vocabulary: list of words by id; entry 0 is padding.
        path: GloVe text file.
        seed: seed of the rows for words without a vector.

    Returns:
        `(matrix, found)`: float32 `(len(vocabulary), dim)` and the number of
        words that had a GloVe vector.
    """
    vectors, dim = load_glove(path, words=set(vocabulary))
    scale = np.std(np.stack(list(vectors.values()))) if vectors else 0.1
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, scale, size=(len(vocabulary), dim))
    matrix = matrix.astype("float32")
    matrix[0] = 0.0
    found = 0
    for index, word in enumerate(vocabulary):
        if index and word in vectors:
            matrix[index] = vectors[word]
            found += 1
    return matrix, found
