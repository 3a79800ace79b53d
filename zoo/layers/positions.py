"""Position information: sinusoidal encodings and learned positions.

Token + position embeddings are `zoo.layers.PositionalEmbedding`
(`zoo/layers/embedding.py`).

Sinusoidal (Vaswani et al.): PE(p, 2i) = sin(p / 10000^(2i/d)),
PE(p, 2i+1) = cos(p / 10000^(2i/d)).
"""

import keras
from keras import ops

from zoo.layers.checks import check_sequence_length


@keras.saving.register_keras_serializable(package="zoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Fixed sinusoidal position encoding, the same shape as its input.

    `PE(p, 2i) = sin(p / w^(2i/d))`, `PE(p, 2i+1) = cos(p / w^(2i/d))` with
    `w = max_wavelength`. The layer returns only the encoding; add it to the
    input yourself (`x + SinusoidalPositionEncoding()(x)`).

    Args:
        max_wavelength: `w` above, 10000 in the original Transformer.

    Call arguments:
        inputs: `(batch, seq, dim)`, or `(seq, dim)`; only its shape is used.
        start_index: position of the first element (for cached decoding).

    Returns:
        A tensor shaped like `inputs` holding the encoding of each position.

    Example:

    >>> x = keras.random.normal((2, 10, 16))
    >>> (x + SinusoidalPositionEncoding()(x)).shape
    (2, 10, 16)
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength
        self.supports_masking = True

    # call_sublayer may run `call` directly (PyTorch); see sublayers.py.
    _same_when_called_directly = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length, dim = shape[-2], inputs.shape[-1]
        # `arange(0, n)` in this file: under jax2onnx (ONNX export on JAX),
        # Keras' `arange(n)` reads as a start with no stop.
        positions = ops.arange(0, length, dtype="float32") + ops.cast(
            start_index, "float32"
        )
        # Pair index i of each feature: features 2i and 2i+1 share a frequency.
        pair = ops.cast(ops.arange(0, dim) // 2, "float32")
        inverse_frequency = ops.power(
            float(self.max_wavelength), -2.0 * pair / float(dim)
        )
        angles = positions[:, None] * inverse_frequency[None, :]
        is_even = ops.arange(0, dim) % 2 == 0
        encoding = ops.where(is_even, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return super().get_config() | {"max_wavelength": self.max_wavelength}


@keras.saving.register_keras_serializable(package="zoo")
class LearnedPositionEmbedding(keras.layers.Layer):
    """A learned vector for each position, the same shape as its input.

    Used for token sequences and for ViT patch sequences alike. Asking for
    more than `sequence_length` positions is an error.

    Args:
        sequence_length: number of positions that have a vector.
        initializer: initializer of the `(sequence_length, dim)` table.

    Call arguments:
        inputs: `(batch, seq, dim)`; only its shape is used.
        start_index: position of the first element (for cached decoding).

    Returns:
        A tensor shaped like `inputs`: the vectors of positions
        `start_index .. start_index + seq - 1`.

    Example:

    >>> x = keras.random.normal((2, 10, 16))
    >>> LearnedPositionEmbedding(sequence_length=64)(x).shape
    (2, 10, 16)
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if int(sequence_length) < 1:
            raise ValueError(
                f"sequence_length must be positive; got {sequence_length}."
            )
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    # call_sublayer may run `call` directly (PyTorch); see sublayers.py.
    _same_when_called_directly = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length = shape[-2]
        check_sequence_length(
            length, start_index, self.sequence_length, self.name
        )
        table = ops.convert_to_tensor(self.position_embeddings)
        if keras.backend.backend() == "torch" and ops.is_tensor(start_index):
            # A gather, not a slice at a tensor offset: PyTorch's `narrow`
            # reads the offset back, which splits a torch.compile'd graph.
            positions = ops.take(
                table,
                start_index + ops.arange(0, length, dtype="int32"),
                axis=0,
            )
        else:
            positions = ops.slice(
                table, (start_index, 0), (length, ops.shape(table)[-1])
            )
        return ops.broadcast_to(ops.cast(positions, self.compute_dtype), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return super().get_config() | {
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }
