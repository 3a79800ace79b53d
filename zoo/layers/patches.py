"""Vision Transformer inputs: images cut into patches and projected, and a
learned class token in front of them.

`PatchEmbedding` is ViT's `x_p W + b` for each flattened `P x P x C` patch,
done as a convolution whose kernel and stride are the patch size (the same
arithmetic, one kernel). `ClassToken` prepends the learned [class] vector
whose final state the classifier reads.
"""

import keras
from keras import ops


def check_image_grid(name, shape, stride, described):
    """One `ValueError` line unless `shape` is a 4-D image batch whose
    height and width (where known) `stride` divides; `described` names the
    stride in the message (e.g. "the patch size 4")."""
    if len(shape) != 4:
        raise ValueError(
            f"{name} expects images of shape (batch, height, width, "
            f"channels); got shape {tuple(shape)}."
        )
    for side, size in (("height", shape[1]), ("width", shape[2])):
        if size is not None and size % stride:
            raise ValueError(
                f"{name}: image {side} {size} is not divisible by "
                f"{described}. Resize or crop the images to a multiple of "
                f"{stride}."
            )


def grid_output_shape(input_shape, stride, dim):
    """`(batch, tokens, dim)` of a layer that turns `(batch, H, W, C)`
    images into one token per `stride x stride` cell, row-major."""
    rows, columns = input_shape[1], input_shape[2]
    count = (
        None
        if rows is None or columns is None
        else (rows // stride) * (columns // stride)
    )
    return (input_shape[0], count, dim)


def flatten_grid(x):
    """`(batch, rows, columns, dim)` -> `(batch, rows * columns, dim)`,
    row-major."""
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0], shape[1] * shape[2], shape[3]))


@keras.saving.register_keras_serializable(package="zoo")
class PatchEmbedding(keras.layers.Layer):
    """Non-overlapping `patch_size x patch_size` patches -> `hidden_dim`
    vectors, in row-major patch order.

    Patch `(i, j)` of an image is the block of rows `i*P .. i*P+P-1` and
    columns `j*P .. j*P+P-1`; its output is `flatten(patch) @ W + b`, with
    the patch flattened in (row, column, channel) order and `W` of shape
    `(P * P * C, hidden_dim)` (the kernel of a `P x P` convolution with
    stride `P`, reshaped).

    Args:
        patch_size: side of a square patch, in pixels.
        hidden_dim: output width.
        kernel_initializer, bias_initializer: of the projection.

    Call arguments:
        images: `(batch, height, width, channels)`, float; height and width
            divisible by `patch_size`.

    Returns:
        `(batch, (height / P) * (width / P), hidden_dim)`.

    Raises:
        ValueError: an input that is not a 4-D image batch, or a height or
            width that `patch_size` does not divide.

    Example:

    >>> layer = PatchEmbedding(patch_size=4, hidden_dim=64)
    >>> layer(np.zeros((2, 28, 28, 1), "float32")).shape
    (2, 49, 64)
    """

    def __init__(
        self,
        patch_size,
        hidden_dim,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(patch_size) < 1 or int(hidden_dim) < 1:
            raise ValueError(
                f"patch_size and hidden_dim must be positive; "
                f"got {patch_size} and {hidden_dim}."
            )
        self.patch_size = int(patch_size)
        self.hidden_dim = int(hidden_dim)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.projection = keras.layers.Conv2D(
            self.hidden_dim,
            self.patch_size,
            strides=self.patch_size,
            padding="valid",
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )

    def _check(self, shape):
        check_image_grid(
            self.name,
            shape,
            self.patch_size,
            f"the patch size {self.patch_size}",
        )

    def build(self, input_shape):
        self._check(input_shape)
        self.projection.build(input_shape)
        self.built = True

    def call(self, images):
        self._check(images.shape)
        return flatten_grid(self.projection(images))

    def compute_output_shape(self, input_shape):
        self._check(input_shape)
        return grid_output_shape(input_shape, self.patch_size, self.hidden_dim)

    def get_config(self):
        return super().get_config() | {
            "patch_size": self.patch_size,
            "hidden_dim": self.hidden_dim,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "bias_initializer": keras.initializers.serialize(
                self.bias_initializer
            ),
        }


@keras.saving.register_keras_serializable(package="zoo")
class ClassToken(keras.layers.Layer):
    """Prepends a learned vector (ViT's and BERT's [class] token) to a
    sequence.

    Args:
        initializer: initializer of the `(dim,)` token (ViT: zeros).

    Call arguments:
        inputs: `(batch, seq, dim)`.

    Returns:
        `(batch, 1 + seq, dim)`, the token first.

    Example:

    >>> ClassToken()(np.ones((2, 49, 64), "float32")).shape
    (2, 50, 64)
    """

    def __init__(self, initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                f"{self.name} expects (batch, seq, dim); got shape "
                f"{tuple(input_shape)}."
            )
        self.token = self.add_weight(
            name="token",
            shape=(input_shape[-1],),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def call(self, inputs):
        token = ops.cast(self.token, inputs.dtype)
        batch = ops.shape(inputs)[0]
        token = ops.broadcast_to(
            token[None, None, :], (batch, 1, ops.shape(inputs)[-1])
        )
        return ops.concatenate([token, inputs], axis=1)

    def compute_output_shape(self, input_shape):
        length = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], length, input_shape[2])

    def get_config(self):
        return super().get_config() | {
            "initializer": keras.initializers.serialize(self.initializer)
        }


def resize_position_grid(
    table,
    grid_size,
    new_grid_size,
    num_prefix_tokens=1,
    interpolation="bilinear",
):
    """Learned patch positions for another image size (ViT's fine-tuning at
    a new resolution).

    The first `num_prefix_tokens` rows (the class token's) are kept; the
    rest are a `grid_size` grid of patch positions (row-major), resized as
    an image to `new_grid_size` (half-pixel centres, as
    `keras.ops.image.resize`).

    Args:
        table: `(num_prefix_tokens + rows * columns, dim)` position vectors.
        grid_size: `(rows, columns)` of patches the table was learned for.
        new_grid_size: `(rows, columns)` wanted.
        num_prefix_tokens: rows before the grid (1 for a class token).
        interpolation: "bilinear" or "bicubic".

    Returns:
        `(num_prefix_tokens + new_rows * new_columns, dim)`.

    Raises:
        ValueError: a table whose length does not match the grid.

    Example:

    >>> table = np.zeros((1 + 7 * 7, 64), "float32")
    >>> resize_position_grid(table, (7, 7), (8, 8)).shape
    (65, 64)
    """
    rows, columns = (int(n) for n in grid_size)
    new_rows, new_columns = (int(n) for n in new_grid_size)
    table = ops.convert_to_tensor(table)
    if table.shape[0] != num_prefix_tokens + rows * columns:
        raise ValueError(
            f"a position table of {table.shape[0]} rows is not "
            f"{num_prefix_tokens} + {rows} x {columns}."
        )
    prefix, grid = table[:num_prefix_tokens], table[num_prefix_tokens:]
    if (rows, columns) == (new_rows, new_columns):
        return table
    dim = table.shape[-1]
    grid = ops.reshape(grid, (1, rows, columns, dim))
    grid = ops.image.resize(
        grid,
        (new_rows, new_columns),
        interpolation=interpolation,
        antialias=False,
        data_format="channels_last",
    )
    grid = ops.reshape(
        ops.cast(grid, table.dtype), (new_rows * new_columns, dim)
    )
    return ops.concatenate([prefix, grid], axis=0)
