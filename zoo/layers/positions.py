"""Position information: sinusoidal encodings, learned positions, and token +
position embeddings.

Sinusoidal (Vaswani et al.): PE(p, 2i) = sin(p / 10000^(2i/d)),
PE(p, 2i+1) = cos(p / 10000^(2i/d)).
"""

import keras
from keras import ops


def _concrete(x):
    """NumPy value of `x`, or None inside a traced/compiled function."""
    try:
        return ops.convert_to_numpy(x)
    except Exception:  # a tracer or a symbolic tensor: no value to check
        return None


def check_sequence_length(length, start_index, sequence_length, layer_name):
    """Raises when positions `start_index .. start_index+length-1` do not exist."""
    if not isinstance(length, int):
        return  # unknown until run time; slicing fails there instead
    if isinstance(start_index, int):
        start = start_index
    else:  # a tensor: check it when its value is visible (eager calls)
        value = _concrete(start_index)
        start = 0 if value is None else int(value)
    if start + length > sequence_length:
        raise ValueError(
            f"{layer_name}: the sequence has {length} positions"
            + (f" starting at {start}" if start else "")
            + f", longer than sequence_length={sequence_length}. Truncate "
            "the input or build the layer with a larger sequence_length."
        )


def check_token_ids(token_ids, vocabulary_size, layer_name):
    """Raises when a visible token id is outside `[0, vocabulary_size)`.

    Ids are only visible in eager calls; inside compiled functions there is
    nothing to check (and an out-of-range gather would give garbage or NaN).
    """
    ids = _concrete(token_ids)
    if ids is not None and ids.size:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocabulary_size:
            bad = high if high >= vocabulary_size else low
            raise ValueError(
                f"{layer_name}: token id {bad} is outside "
                f"[0, vocabulary_size={vocabulary_size})."
            )


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

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length, dim = shape[-2], inputs.shape[-1]
        positions = ops.arange(length, dtype="float32") + ops.cast(
            start_index, "float32"
        )
        # Pair index i of each feature: features 2i and 2i+1 share a frequency.
        pair = ops.cast(ops.arange(dim) // 2, "float32")
        inverse_frequency = ops.power(
            float(self.max_wavelength), -2.0 * pair / float(dim)
        )
        angles = positions[:, None] * inverse_frequency[None, :]
        is_even = ops.arange(dim) % 2 == 0
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

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        length = shape[-2]
        check_sequence_length(
            length, start_index, self.sequence_length, self.name
        )
        table = ops.convert_to_tensor(self.position_embeddings)
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


@keras.saving.register_keras_serializable(package="zoo")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding plus position embedding, with the padding mask.

    `x_t = E[token_t] + P[t]`, with `P` learned or sinusoidal. Token id 0 is
    padding when `mask_zero=True`: the output then carries a Keras mask
    (`token != 0`) that downstream Keras layers and `zoo` blocks use.

    Token ids are checked whenever their values are visible (eager calls,
    `predict` on torch): an id outside `[0, vocabulary_size)` raises an error
    instead of reading garbage. Inside compiled functions only the length is
    checked.

    Args:
        vocabulary_size: number of token ids (ids are in `[0, vocab)`).
        sequence_length: maximum number of positions.
        embedding_dim: output feature size.
        positions: `"learned"` or `"sinusoidal"`.
        mask_zero: treat id 0 as padding and produce a mask.
        embeddings_initializer: initializer of the token table.
        max_wavelength: wavelength base of the sinusoidal positions.

    Call arguments:
        inputs: integer `(batch, seq)`, `seq <= sequence_length`; `seq` may
            vary between calls (`keras.Input((None,), dtype="int32")`).
        start_index: position of the first token (for cached decoding).

    Returns:
        `(batch, seq, embedding_dim)`, with a Keras mask when `mask_zero`.

    Example:

    >>> embed = PositionalEmbedding(1000, 128, 32, positions="sinusoidal")
    >>> x = embed(np.array([[5, 8, 2, 0, 0]]))
    >>> x.shape
    (1, 5, 32)
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        positions="learned",
        mask_zero=True,
        embeddings_initializer="uniform",
        max_wavelength=10000,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if positions not in ("learned", "sinusoidal"):
            raise ValueError(
                "positions must be 'learned' or 'sinusoidal'; "
                f"got {positions!r}."
            )
        self.vocabulary_size = int(vocabulary_size)
        self.sequence_length = int(sequence_length)
        self.embedding_dim = int(embedding_dim)
        self.positions = positions
        self.mask_zero = mask_zero
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )
        self.max_wavelength = max_wavelength
        self.supports_masking = mask_zero
        self.token_embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.embedding_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        if positions == "learned":
            self.position_embedding = LearnedPositionEmbedding(
                self.sequence_length,
                dtype=self.dtype_policy,
                name="position_embedding",
            )
        else:
            self.position_embedding = SinusoidalPositionEncoding(
                max_wavelength, dtype=self.dtype_policy, name="position_encoding"
            )

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(
                "PositionalEmbedding expects token ids of shape (batch, seq); "
                f"got shape {tuple(input_shape)}."
            )
        self.token_embedding.build(input_shape)
        self.position_embedding.build(tuple(input_shape) + (self.embedding_dim,))
        self.built = True

    def _check_ids(self, inputs, start_index):
        check_sequence_length(
            inputs.shape[1], start_index, self.sequence_length, self.name
        )
        check_token_ids(inputs, self.vocabulary_size, self.name)

    def call(self, inputs, start_index=0):
        if len(inputs.shape) != 2:
            raise ValueError(
                "PositionalEmbedding expects token ids of shape (batch, seq); "
                f"got shape {tuple(inputs.shape)}."
            )
        self._check_ids(inputs, start_index)
        tokens = self.token_embedding(inputs)
        return tokens + self.position_embedding(tokens, start_index=start_index)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        # Functional models are built from shapes: catch a fixed input length
        # longer than the positions when the model is built, not at predict.
        check_sequence_length(
            input_shape[1], 0, self.sequence_length, self.name
        )
        return tuple(input_shape) + (self.embedding_dim,)

    def get_config(self):
        return super().get_config() | {
            "vocabulary_size": self.vocabulary_size,
            "sequence_length": self.sequence_length,
            "embedding_dim": self.embedding_dim,
            "positions": self.positions,
            "mask_zero": self.mask_zero,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
            "max_wavelength": self.max_wavelength,
        }
