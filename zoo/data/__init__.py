"""Data loaders and tokenisation (these may use tf.data, as Keras does)."""
