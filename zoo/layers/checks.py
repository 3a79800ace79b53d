"""Input checks shared by the layers: token ids inside the vocabulary and
sequences no longer than the positions a layer has.

Ids and start indices are only visible in eager calls (and in every call on
PyTorch outside `torch.compile`); inside compiled functions there is nothing
to read, and the checks pass silently there.
"""

from keras import ops

from zoo.accelerator import compiling


def _concrete(x):
    """NumPy value of `x`, or None inside a traced/compiled function."""
    if compiling():  # torch.compile: reading a value would split the graph
        return None
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


def check_token_ids(
    token_ids,
    vocabulary_size,
    layer_name,
    what="token id",
    limit="vocabulary_size",
):
    """Raises when a visible token id is outside `[0, vocabulary_size)`.

    Ids are only visible in eager calls; inside compiled functions there is
    nothing to check (and an out-of-range gather would give garbage or NaN).
    `what` and `limit` name the ids and their bound in the message (e.g.
    "segment id", "num_segments").
    """
    ids = _concrete(token_ids)
    if ids is not None and ids.size:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocabulary_size:
            bad = high if high >= vocabulary_size else low
            raise ValueError(
                f"{layer_name}: {what} {bad} is outside "
                f"[0, {limit}={vocabulary_size})."
            )


def check_token_id_rank(shape, layer_name):
    """Raises unless `shape` is that of `(batch, seq)` token ids."""
    if len(shape) != 2:
        raise ValueError(
            f"{layer_name} expects token ids of shape (batch, seq); got "
            f"shape {tuple(shape)}."
        )
