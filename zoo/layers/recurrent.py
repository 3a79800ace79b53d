"""A bidirectional RNN that reads padded batches without a per-step mask.

A masked Keras RNN (`GRU`/`LSTM` given a mask) skips the masked steps by
carrying its state across them. JAX and TensorFlow compile that loop. On a
PyTorch CPU, Keras runs RNN steps in Python: given a mask, its generic loop
with masking ops at every step; given none, a leaner GRU/LSTM loop with the
input projections computed up front, which is faster to train and to
predict (`benchmarks/packed_rnn.py` measures by how much).

Skipping masked steps is the same as running the RNN over the real tokens
moved to the front, the idea behind PyTorch's `pack_padded_sequence`. So
under PyTorch this layer gathers each row's real tokens to the front (in
reading order for the forward RNN, in reverse order for the backward one),
runs both RNNs with no mask, and gathers the outputs back to their
positions. The real tokens see exactly what a masked
`keras.layers.Bidirectional` would show them; padding, wherever it sits
(trailing, or holes left by `WordDropout`), gets zero outputs as in Keras.
Under JAX and TensorFlow, where the gathers cost more than the mask saves,
it runs the masked RNNs instead, on the same weights.

Under PyTorch the packed RNNs also run in chunks of `STEPS_PER_CALL` steps,
each starting from the state the previous one ended in (the same
computation). Keras' PyTorch loop indexes its precomputed input projections
one step at a time, and the backward pass of each index writes zeros as
large as all the steps, so one call costs training time quadratic in its
length; shorter calls avoid most of that cost.
"""

import copy

import keras
from keras import ops

from zoo.accelerator import exporting_onnx

MERGE_MODES = ("concat", "sum", "mul", "ave")
# Steps per RNN call when the packed RNNs run in chunks (PyTorch only).
STEPS_PER_CALL = 32
STRATEGIES = ("auto", "packed", "masked")


@keras.saving.register_keras_serializable(package="zoo")
class PackedBidirectional(keras.layers.Layer):
    """`keras.layers.Bidirectional` for masked batches, mask handled by
    packing the real tokens instead of masking every step.

    Same outputs as `keras.layers.Bidirectional(layer)` called with the same
    mask (the test copies the weights and compares), faster where masked
    RNN steps are slow (PyTorch).

    Args:
        layer: a `keras.layers.GRU` or `keras.layers.LSTM` (any Keras `RNN`
            with `go_backwards=False` and `return_state=False`). It is
            copied twice from its config: a forward and a backward RNN.
        merge_mode: how the two directions combine: "concat" (default),
            "sum", "mul" or "ave".
        strategy: "packed" (gather the real tokens, unmasked RNNs),
            "masked" (masked RNNs, as `keras.layers.Bidirectional`), or
            "auto" (default): "packed" under PyTorch, "masked" under JAX
            and TensorFlow, whichever is faster there. Inside a
            `torch.onnx` export the masked RNNs run whatever the strategy
            (the packing's stable sort has no ONNX conversion). The
            weights and outputs are the same either way, so a model saved
            under one backend runs the best way under another.

    Call arguments:
        inputs: float `(batch, seq, features)`.
        mask: optional boolean `(batch, seq)`, True for real tokens (comes
            from `Embedding(mask_zero=True)` automatically). Masked steps
            may sit anywhere in a row.
        training: passed to both RNNs (dropout).

    Returns:
        With `return_sequences=True`: `(batch, seq, units * 2)` for
        "concat", else `(batch, seq, units)`; zeros at masked steps, and the
        mask is passed on. Otherwise `(batch, units * 2)` (or `units`): the
        forward RNN's state after the last real token and the backward
        RNN's after the first, zeros for a row with no real token.

    Example:

    >>> rnn = PackedBidirectional(keras.layers.GRU(8, return_sequences=True))
    >>> x = keras.layers.Embedding(100, 4, mask_zero=True)(
    ...     np.array([[5, 9, 0, 0]]))
    >>> rnn(x).shape
    (1, 4, 16)
    """

    def __init__(self, layer, merge_mode="concat", strategy="auto", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(layer, keras.layers.RNN):
            raise ValueError(
                "PackedBidirectional wraps a keras.layers.RNN (GRU, LSTM, "
                f"SimpleRNN); got {type(layer).__name__}."
            )
        if layer.go_backwards or layer.return_state:
            raise ValueError(
                "PackedBidirectional needs an RNN with go_backwards=False and "
                "return_state=False; it reverses the sequence itself."
            )
        if merge_mode not in MERGE_MODES:
            raise ValueError(
                f"merge_mode must be one of {MERGE_MODES}; got {merge_mode!r}."
            )
        if strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {STRATEGIES}; got {strategy!r}."
            )
        self.merge_mode = merge_mode
        self.strategy = strategy
        self.return_sequences = layer.return_sequences
        # Both RNNs return every step (the last real step is gathered here)
        # and their final states (to carry across chunks).
        config = layer.get_config()
        config["return_sequences"] = True
        config["return_state"] = True
        self.forward_layer = layer.__class__.from_config(
            {**config, "name": f"forward_{layer.name}"}
        )
        self.backward_layer = layer.__class__.from_config(
            {**config, "name": f"backward_{layer.name}"}
        )
        # A config, not the layer: an unbuilt sublayer would make Keras
        # rebuild the model symbolically before every `train_on_batch`.
        self.layer_config = keras.saving.serialize_keras_object(layer)
        self.supports_masking = True

    def build(self, input_shape):
        _check_rank(input_shape)
        self.forward_layer.build(input_shape)
        self.backward_layer.build(input_shape)

    def call(self, inputs, mask=None, training=None):
        _check_rank(inputs.shape)  # build ran once; later calls check too
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], dtype="bool")
        mask = ops.cast(mask, "bool")
        if self._packs():
            forward, backward = self._run_packed(inputs, mask, training)
        else:
            forward, backward = self._run_masked(inputs, mask, training)
        if self.return_sequences:
            keep = ops.expand_dims(mask, -1)  # zeros at padding, as Keras
        else:
            keep = ops.any(mask, axis=1, keepdims=True)  # rows with a token
        keep = ops.cast(keep, forward.dtype)
        return self._merge(forward * keep, backward * keep)

    def _packs(self):
        if exporting_onnx():
            # The packing's argsort is a stable sort, which torch.onnx
            # cannot convert; the masked RNNs give the same outputs.
            return False
        if self.strategy == "auto":
            # Only PyTorch runs masked RNN steps one by one in Python; JAX
            # and TensorFlow compile them, and there the gathers cost more
            # than the mask (benchmarks/packed_rnn.py).
            return keras.backend.backend() == "torch"
        return self.strategy == "packed"

    def _run_masked(self, inputs, mask, training):
        # What keras.layers.Bidirectional does: a masked RNN each way.
        forward = self.forward_layer(inputs, mask=mask, training=training)[0]
        backward = self.backward_layer(
            ops.flip(inputs, axis=1),
            mask=ops.flip(mask, axis=1),
            training=training,
        )[0]
        if self.return_sequences:
            return forward, ops.flip(backward, axis=1)
        # Masked steps carry the state, so the last step holds the state
        # after the last real token.
        return forward[:, -1], backward[:, -1]

    def _run_packed(self, inputs, mask, training):
        real = ops.cast(mask, "int32")
        num_real = ops.sum(real, axis=1, keepdims=True)
        # Where each step goes in the packed row: real tokens first (their
        # rank among the real ones; reversed for the backward RNN), padding
        # after them.
        real_rank = ops.cumsum(real, axis=1) - 1
        pad_rank = num_real + ops.cumsum(1 - real, axis=1) - 1
        forward_slot = ops.where(mask, real_rank, pad_rank)
        backward_slot = ops.where(mask, num_real - 1 - real_rank, pad_rank)
        last = ops.maximum(num_real - 1, 0)  # each row's last real step
        outputs = []
        for rnn, slot in (
            (self.forward_layer, forward_slot),
            (self.backward_layer, backward_slot),
        ):
            # `slot` is a permutation of each row; its inverse lists, for
            # each packed position, the step that goes there.
            packed = _gather_steps(inputs, ops.argsort(slot, axis=1))
            states = self._run_unmasked(rnn, packed, training)
            if self.return_sequences:
                outputs.append(_gather_steps(states, slot))
            else:
                outputs.append(_gather_steps(states, last)[:, 0])
        return outputs

    def _run_unmasked(self, rnn, sequences, training):
        steps = sequences.shape[1]
        if not self._chunks(rnn) or steps is None or steps <= STEPS_PER_CALL:
            return rnn(sequences, training=training)[0]
        outputs, state = [], None
        for start in range(0, steps, STEPS_PER_CALL):
            chunk, *state = rnn(
                sequences[:, start : start + STEPS_PER_CALL],
                initial_state=state,
                training=training,
            )
            outputs.append(chunk)
        return ops.concatenate(outputs, axis=1)

    def _chunks(self, rnn):
        # Only Keras' PyTorch loop pays for long calls (module docstring);
        # JAX and TensorFlow compile one loop. Dropout masks are drawn per
        # call, so with dropout a chunked run would differ from one call.
        cell = rnn.cell
        return (
            keras.backend.backend() == "torch"
            and not getattr(cell, "dropout", 0)
            and not getattr(cell, "recurrent_dropout", 0)
        )

    def _merge(self, forward, backward):
        if self.merge_mode == "concat":
            return ops.concatenate([forward, backward], axis=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) / 2

    def compute_mask(self, inputs, mask=None):
        return mask if self.return_sequences else None

    def compute_output_shape(self, input_shape):
        units = self.forward_layer.cell.units
        if self.merge_mode == "concat":
            units *= 2
        if self.return_sequences:
            return (input_shape[0], input_shape[1], units)
        return (input_shape[0], units)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "layer": copy.deepcopy(self.layer_config),
                "merge_mode": self.merge_mode,
                "strategy": self.strategy,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = copy.deepcopy(config)
        config["layer"] = keras.saving.deserialize_keras_object(
            config["layer"], custom_objects=custom_objects
        )
        return cls(**config)


def _check_rank(shape):
    if len(shape) != 3:
        raise ValueError(
            "PackedBidirectional expects inputs of shape (batch, seq, "
            f"features); got {tuple(shape)}."
        )


def _gather_steps(sequences, steps):
    """`sequences[b, steps[b, j], :]` for `(batch, seq, d)` sequences and
    integer `(batch, n)` steps."""
    steps = ops.expand_dims(ops.cast(steps, "int32"), -1)
    steps = ops.broadcast_to(
        steps,
        (ops.shape(steps)[0], ops.shape(steps)[1], ops.shape(sequences)[2]),
    )
    return ops.take_along_axis(sequences, steps, axis=1)
