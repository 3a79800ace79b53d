"""Data loaders and tokenisation (these may use tf.data, as Keras does).

Importing this package registers its Keras-serializable pieces (the
character tokenizer), which `.keras` files of the models refer to.
"""

from zoo.data.tokenizers import CharacterTokenizer
