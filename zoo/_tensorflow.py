"""TensorFlow for the input pipelines, imported on first use.

zoo's layers and models compute with `keras.ops` only. TensorFlow is what
its input side uses: `tf.data` pipelines, keras-hub's WordPiece vocabulary
learning, string ops in the text preprocessors. A JAX- or PyTorch-only
install (an accelerator machine with no TensorFlow wheel, say) can still
`import zoo`, build, train on arrays, save and load every model; only the
pieces that need TensorFlow raise, with a message that says so.
"""

import sys

INSTALL_HINT = (
    "pip install tensorflow-cpu (the input pipelines run on the "
    "CPU under every backend)"
)


def _import():
    try:
        import tensorflow
    except ImportError as error:
        raise ImportError(
            "This part of zoo (tf.data input pipelines, string "
            f"preprocessing, vocabulary learning) needs TensorFlow: "
            f"{INSTALL_HINT}."
        ) from error
    return tensorflow


def is_tf_tensor(x):
    """Whether `x` is a TensorFlow (ragged) tensor, as inside `tf.data`;
    False without importing TensorFlow when nothing imported it yet."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, (tf.Tensor, tf.RaggedTensor))


def is_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (False when TensorFlow was never
    imported)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


class _LazyTensorFlow:
    """`tf.<name>` imports TensorFlow on first use."""

    def __getattr__(self, name):
        return getattr(_import(), name)


tf = _LazyTensorFlow()
