"""Random token windows: train on a random slice of each sequence.

A data augmentation for sequence models, as `keras.layers.RandomCrop` is for
images: while training, each row keeps a random `window`-token slice of its
real tokens (a new slice at every step), so a model sees different parts of
a long document from epoch to epoch and each step costs `window` tokens
instead of the full length; at inference the layer passes the ids through
and the model reads the whole sequence.
"""

import keras
from keras import ops

from zoo.layers.checks import check_token_id_rank


@keras.saving.register_keras_serializable(package="zoo")
class RandomTokenWindow(keras.layers.Layer):
    """While training, a random `window`-token slice of each row's real
    tokens; the identity at inference.

    Real tokens are the ids different from `padding_id`, padding at the end
    of each row (as `TextVectorization` and keras-hub's packers produce).
    The start of each row's slice is uniform over the positions that keep
    the slice inside its real tokens, so every slice is full unless the row
    is shorter than `window`; then it is the whole row, padded. Inputs whose
    static length is at most `window` pass through unchanged.

    Args:
        window: length of the slices, a positive int.
        padding_id: the id that marks padding (default 0).
        seed: optional integer seed of the slice starts.

    Call arguments:
        token_ids: integer `(batch, seq)`.
        training: slice only when True.

    Returns:
        `(batch, window)` ids while training (when `seq > window`), else
        the `(batch, seq)` input.

    Example:

    >>> layer = RandomTokenWindow(2, seed=1)
    >>> window = layer(np.array([[5, 6, 7, 0], [8, 0, 0, 0]]), training=True)
    >>> window.shape  # random: e.g. [[6, 7], [8, 0]]
    (2, 2)
    """

    def __init__(self, window, padding_id=0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if int(window) < 1:
            raise ValueError(f"window must be a positive int; got {window}.")
        self.window = int(window)
        self.padding_id = int(padding_id)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, token_ids, training=None):
        check_token_id_rank(token_ids.shape, "RandomTokenWindow")
        length = token_ids.shape[1]
        if not training or (length is not None and length <= self.window):
            return token_ids
        real = ops.cast(ops.not_equal(token_ids, self.padding_id), "int32")
        lengths = ops.sum(real, axis=1)
        last_start = ops.maximum(lengths - self.window, 0)
        draws = keras.random.uniform(
            ops.shape(lengths), seed=self.seed_generator
        )
        starts = ops.cast(
            ops.floor(draws * ops.cast(last_start + 1, "float32")), "int32"
        )
        starts = ops.minimum(starts, last_start)
        # Padded on the right, so a row shorter than the window (or a batch
        # shorter than it when the length is only known at run time) reads
        # padding past its end.
        padded = ops.pad(
            token_ids,
            [[0, 0], [0, self.window]],
            constant_values=self.padding_id,
        )
        index = starts[:, None] + ops.arange(self.window, dtype="int32")[None]
        return ops.take_along_axis(padded, index, axis=1)

    def compute_output_shape(self, input_shape):
        return input_shape  # the inference shape; training gives `window`

    def get_config(self):
        return {
            **super().get_config(),
            "window": self.window,
            "padding_id": self.padding_id,
            "seed": self.seed,
        }
