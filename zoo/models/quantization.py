"""Keras int8 quantisation of a model's weight matrices, for smaller files.

`quantize_matrices(model)` quantises every `Dense`, `EinsumDense` and
`Embedding` layer of `model` (the zoo's `TokenEmbedding` included) with
`keras.Model.quantize`, leaving the layers Keras cannot quantise (recurrent
cells, convolutions, normalisation) as they are. On a keras-hub backbone
the saved config records the quantised layers (keras-hub's
`DTypePolicyMap`), so a `.keras` file loads quantised under every backend.
"""

import keras

MATRIX_LAYERS = (
    keras.layers.Dense,
    keras.layers.EinsumDense,
    keras.layers.Embedding,
)


def quantize_matrices(
    model, mode="int8", config=None, exclude=None, kinds=MATRIX_LAYERS
):
    """Quantises `model`'s Dense, EinsumDense and Embedding layers.

    Args:
        model: a built `keras.Model`: a task (whose backbone records the
            quantised layers, see the module docstring; quantising the task
            itself makes Keras trace its compiled functions afresh), or any
            model.
        mode: "int8" (default: int8 weights with a scale per output
            channel; Dense layers also quantise their inputs per token as
            they run), or another `keras.Model.quantize` mode.
        config: a `keras.quantizers.QuantizationConfig`, or None for the
            mode's default.
        exclude: a layer (with everything inside it) to leave as it is,
            e.g. an image encoder quantised its own way.
        kinds: the layer classes to quantise, a subset of the default
            (e.g. `(keras.layers.Embedding,)` for the token tables alone:
            a text classifier's table is most of its file, and int8 rows
            with a scale each change its outputs far less than int8
            inputs to its Dense layers would).

    Returns:
        The number of layers quantised.

    Example:

    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    >>> quantize_matrices(model)
    1
    >>> model.layers[0].quantization_mode
    'int8'
    """
    skipped = set()
    if exclude is not None:
        skipped = {id(layer) for layer in exclude._flatten_layers()}
    # A task's file records the quantised layers its backbone lists; one it
    # does not list (under PyTorch, a layer a functional backbone holds
    # outside its graph) stays float, so that the file reloads as it was.
    listed = getattr(model, "backbone", None) or model
    chosen = [
        layer
        for layer in listed._flatten_layers()
        if isinstance(layer, tuple(kinds))
        and id(layer) not in skipped
        and layer.quantization_mode is None
    ]
    ids = {id(layer) for layer in chosen}
    # type_check=False: Keras refuses subclasses (the zoo's TokenEmbedding
    # is a ReversibleEmbedding) unless told otherwise.
    model.quantize(
        mode,
        config=config,
        type_check=False,
        filters=lambda layer: id(layer) in ids,
    )
    return len(chosen)
