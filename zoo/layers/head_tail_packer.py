"""Head + tail truncation: pack a long text as its opening and its ending.

A classifier that reads a fixed number of tokens loses the end of a long
text when the packer keeps only its first tokens; for reviews the verdict
is often in the last sentences. Sun et al. (2019, "How to Fine-Tune BERT
for Text Classification") found that keeping the first and the last tokens
of a long text ("head + tail") classifies IMDB best among head-only,
tail-only and head + tail truncation.
"""

import keras
import keras_hub

from zoo._tensorflow import tf


@keras.saving.register_keras_serializable(package="zoo")
class HeadTailPacker(keras_hub.layers.MultiSegmentPacker):
    """keras-hub's `MultiSegmentPacker` for one segment, cutting a long
    segment in the middle: it keeps the first `head_length` tokens and the
    last `sequence_length - 2 - head_length` (room for the start and end
    tokens), joined; a segment that fits is packed whole.

    Runs inside `tf.data` (ragged tensors) and on Python lists alike, as
    the keras-hub packer does.

    Args:
        sequence_length: packed length, start and end tokens included.
        start_value, end_value, pad_value: the special token ids (or
            strings), as for `MultiSegmentPacker`.
        head_length: how many of the opening tokens a long segment keeps
            (default: a quarter of the room, as Sun et al.'s 128 of 510);
            the rest of the room goes to its ending. 0 keeps only the tail.
        padding_side: "right" (default) or "left".

    Call arguments:
        inputs: one segment: a batch of token id sequences (ragged tensor
            or list of lists) or one sequence.

    Returns:
        `(token_ids, segment_ids)`, each `(batch, sequence_length)` (or
        `(sequence_length,)` for one sequence).

    Example:

    >>> packer = HeadTailPacker(8, start_value=1, end_value=2, head_length=2)
    >>> token_ids, _ = packer([[10, 11, 12, 13, 14, 15, 16, 17, 18]])
    >>> [int(t) for t in keras.ops.convert_to_numpy(token_ids)[0]]
    [1, 10, 11, 15, 16, 17, 18, 2]
    """

    def __init__(
        self,
        sequence_length,
        start_value,
        end_value,
        pad_value=None,
        head_length=None,
        padding_side="right",
        **kwargs,
    ):
        kwargs.pop("truncate", None)  # always head + tail (a saved config)
        kwargs.pop("sep_value", None)
        super().__init__(
            sequence_length=sequence_length,
            start_value=start_value,
            end_value=end_value,
            pad_value=pad_value,
            truncate="waterfall",
            padding_side=padding_side,
            **kwargs,
        )
        room = self.room()
        if head_length is None:
            head_length = room // 4
        if not 0 <= int(head_length) <= room:
            raise ValueError(
                f"head_length must be in [0, {room}] (sequence_length "
                f"{sequence_length} less the start and end tokens); got "
                f"{head_length}."
            )
        self.head_length = int(head_length)

    def room(
        self, sequence_length=None, add_start_value=True, add_end_value=True
    ):
        """Tokens of text a packed sequence holds."""
        return (
            (sequence_length or self.sequence_length)
            - (len(self.start_value) if add_start_value else 0)
            - (len(self.end_value) if add_end_value else 0)
        )

    def _split(self, inputs, **kwargs):
        """`(tokens, room, head, tail)` for one segment's trimming."""
        if len(inputs) != 1:
            raise ValueError(
                f"HeadTailPacker packs one segment; got {len(inputs)}. "
                "Pack pairs with keras_hub.layers.MultiSegmentPacker."
            )
        room = self.room(**kwargs)
        head = min(self.head_length, room)
        return inputs[0], room, head, room - head

    def _trim_inputs_tf(self, inputs, **kwargs):
        tokens, _, head, tail = self._split(inputs, **kwargs)
        lengths = tokens.row_lengths()
        positions = tf.ragged.range(lengths)
        # A row that fits keeps every position: each is either among the
        # first `head` or the last `tail`.
        keep = (positions < head) | (
            positions >= tf.expand_dims(lengths, 1) - tail
        )
        return [tf.ragged.boolean_mask(tokens, keep)]

    def _trim_inputs_python(self, inputs, **kwargs):
        tokens, room, head, tail = self._split(inputs, **kwargs)
        return [
            [
                list(row)
                if len(row) <= room
                else list(row[:head]) + list(row[len(row) - tail :])
                for row in tokens
            ]
        ]

    def get_config(self):
        config = super().get_config()
        config.update({"head_length": self.head_length})
        return config
