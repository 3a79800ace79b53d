"""HeadTailPacker under the current backend: a long row keeps its first
`head_length` and last tokens around the start and end ids, a short row is
packed whole, the tf.data (ragged) path equals the Python one, the packed
rows match a NumPy reference, the config round-trips, bad settings are
clear errors."""

import keras
import numpy as np
import pytest

from tests.helpers import config_round_trip
from zoo._tensorflow import tf
from zoo.layers import HeadTailPacker

ROWS = [list(range(10, 30)), list(range(40, 45)), [], list(range(50, 58))]


def _reference(rows, length, head, start=1, end=2, pad=0):
    """NumPy head + tail packing: [start] opening ... ending [end] pad."""
    room = length - 2
    out = np.full((len(rows), length), pad, "int32")
    for i, row in enumerate(rows):
        kept = (
            row
            if len(row) <= room
            else row[:head] + row[len(row) - (room - head) :]
        )
        packed = [start] + kept + [end]
        out[i, : len(packed)] = packed
    return out


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


@pytest.mark.parametrize("head", [0, 2, 3, 8])
def test_python_lists_match_the_numpy_reference(head):
    packer = HeadTailPacker(
        10, start_value=1, end_value=2, pad_value=0, head_length=head
    )
    token_ids, segment_ids = packer(ROWS)
    np.testing.assert_array_equal(_numpy(token_ids), _reference(ROWS, 10, head))
    np.testing.assert_array_equal(_numpy(segment_ids), 0)


def test_the_tf_data_path_equals_the_python_path():
    packer = HeadTailPacker(
        10, start_value=1, end_value=2, pad_value=0, head_length=3
    )
    dataset = (
        tf.data.Dataset.from_tensor_slices(
            tf.ragged.constant(ROWS, dtype="int32")
        )
        .ragged_batch(len(ROWS))
        .map(packer)
    )
    token_ids, _ = next(iter(dataset))
    np.testing.assert_array_equal(token_ids.numpy(), _reference(ROWS, 10, 3))


def test_a_single_sequence_and_the_default_head():
    packer = HeadTailPacker(10, start_value=1, end_value=2)
    assert packer.head_length == 2  # a quarter of the 8 tokens of room
    token_ids, _ = packer(ROWS[0])
    np.testing.assert_array_equal(
        _numpy(token_ids), _reference(ROWS[:1], 10, 2)[0]
    )


def test_config_round_trip_keeps_the_head():
    packer = HeadTailPacker(
        10, start_value=1, end_value=2, pad_value=0, head_length=5
    )
    restored = config_round_trip(packer)
    assert isinstance(restored, HeadTailPacker) and restored.head_length == 5
    np.testing.assert_array_equal(
        _numpy(restored(ROWS)[0]), _numpy(packer(ROWS)[0])
    )


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match=r"head_length must be in \[0, 8\]"):
        HeadTailPacker(10, start_value=1, end_value=2, head_length=9)
    with pytest.raises(ValueError, match="packs one segment; got 2"):
        HeadTailPacker(10, start_value=1, end_value=2)((ROWS, ROWS))
