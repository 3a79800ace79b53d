"""zoo.accelerator under the current backend: where XLA compiles what a
call computes (`compiling_with_xla`, `xla_calls`); slice updates in place
inside a decoding loop (`slice_update`, `in_place_updates`). The allocator
statistics and peak throughputs are tested with `zoo.callbacks.Throughput`
(tests/test_callbacks.py), the compiled decoding step with the tasks
(tests/models/test_torch_compile.py); `compile_function`'s guards
here."""

import contextlib
import threading

import keras
import numpy as np
import pytest

from zoo.accelerator import (
    compile_function,
    compiling_with_xla,
    in_place_updates,
    slice_update,
    xla_calls,
)


def test_compiling_with_xla_is_true_inside_xla_calls_under_tensorflow():
    backend = keras.backend.backend()
    assert compiling_with_xla() == (backend == "jax")
    with xla_calls():
        with xla_calls():
            assert compiling_with_xla() == (backend != "torch")
        assert compiling_with_xla() == (backend != "torch")
    assert compiling_with_xla() == (backend == "jax")


def test_xla_calls_ends_on_an_error():
    try:
        with xla_calls():
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    assert compiling_with_xla() == (keras.backend.backend() == "jax")


def test_xla_calls_marks_its_own_thread_only():
    seen = []
    with xla_calls():
        other = threading.Thread(
            target=lambda: seen.append(compiling_with_xla())
        )
        other.start()
        other.join()
    assert seen == [keras.backend.backend() == "jax"]


def _reference(inputs, start, updates):
    out = np.array(inputs)
    out[tuple(slice(s, s + n) for s, n in zip(start, updates.shape))] = updates
    return out


# (cache shape, start, update shape): one position of a decoding cache; a
# prompt's positions; the whole tensor; two narrower axes (always a copy).
CASES = [
    ((2, 2, 6, 3, 4), (0, 0, 3, 0, 0), (2, 2, 1, 3, 4)),
    ((2, 2, 6, 3, 4), (0, 0, 1, 0, 0), (2, 2, 4, 3, 4)),
    ((2, 5), (0, 0), (2, 5)),
    ((4, 5), (1, 2), (2, 2)),
]


@pytest.mark.parametrize("shape, start, update_shape", CASES)
@pytest.mark.parametrize("tensor_start", [False, True])
def test_slice_update_equals_numpy_inside_and_outside_the_block(
    shape, start, update_shape, tensor_start
):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=shape).astype("float32")
    updates = rng.normal(size=update_shape).astype("float32")
    expected = _reference(inputs, start, updates)
    if tensor_start:  # a decoding loop's position: a scalar int32 tensor
        start = [keras.ops.convert_to_tensor(s, "int32") for s in start]
    for block in (False, True):
        tensor = keras.ops.convert_to_tensor(inputs)
        with in_place_updates() if block else contextlib.nullcontext():
            out = slice_update(
                tensor, start, keras.ops.convert_to_tensor(updates)
            )
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(out), expected)
        in_place = (
            block
            and keras.backend.backend() == "torch"
            and len([a for a, b in zip(shape, update_shape) if a != b]) <= 1
        )
        assert (out is tensor) == in_place
        # the tensor given is unchanged unless written in place
        given = keras.ops.convert_to_numpy(tensor)
        np.testing.assert_array_equal(given, expected if in_place else inputs)


def test_slice_update_casts_the_update_to_the_inputs_dtype():
    cache = keras.ops.zeros((1, 4), "bfloat16")
    with in_place_updates():
        out = slice_update(cache, [0, 1], keras.ops.ones((1, 2), "float32"))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(out, "float32")),
        [[0, 1, 1, 0]],
    )


@pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="PyTorch's autograd"
)
def test_slice_update_copies_where_a_gradient_is_recorded():
    import torch

    weight = torch.ones((1, 2), requires_grad=True)
    cache = torch.zeros((1, 4))
    with in_place_updates():
        out = slice_update(cache, [0, 1], weight * 3)
        assert out is not cache and float(cache.sum()) == 0.0
        out.sum().backward()
        with torch.no_grad():  # nothing recorded: in place
            assert slice_update(cache, [0, 1], weight * 3) is cache
    np.testing.assert_array_equal(weight.grad.numpy(), [[3.0, 3.0]])


def test_in_place_updates_is_per_thread_and_ends_on_an_error():
    cache = keras.ops.zeros((1, 4))
    update = keras.ops.ones((1, 1))
    torch = keras.backend.backend() == "torch"
    seen = []
    with pytest.raises(RuntimeError), in_place_updates():
        assert (slice_update(cache, [0, 0], update) is cache) == torch
        other = threading.Thread(
            target=lambda: seen.append(slice_update(cache, [0, 1], update))
        )
        other.start()
        other.join()
        raise RuntimeError("inside")
    assert seen[0] is not cache
    assert slice_update(cache, [0, 2], update) is not cache


def test_a_broadcast_tensor_is_never_written_into():
    # Its rows share memory: writing one row would write them all.
    # (A one-axis update, which a contiguous tensor would take in place.)
    rows = keras.ops.broadcast_to(keras.ops.zeros((1, 4)), (3, 4))
    with in_place_updates():
        out = slice_update(rows, [0, 2], keras.ops.ones((3, 1)))
    assert out is not rows
    expected = np.zeros((3, 4), "float32")
    expected[:, 2] = 1
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out), expected)
    assert not np.any(keras.ops.convert_to_numpy(rows))


torch_only = pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="torch.compile: PyTorch only"
)


@torch_only
def test_compile_function_tells_calls_apart_by_their_arguments():
    import torch

    torch._dynamo.reset()

    def scale(x, factor):
        return x * factor

    step = compile_function(scale)
    three, four = keras.ops.ones((3,)), keras.ops.ones((4,))
    for x, factor in [(three, 2), (three, 3), (four, 2), (three, 2), (four, 3)]:
        out = keras.ops.convert_to_numpy(step(x, factor))
        np.testing.assert_array_equal(out, np.full(x.shape, float(factor)))


@torch_only
def test_compile_function_compiles_one_graph_for_every_int_position():
    # An eagerly run decoding loop hands its step the position as an int:
    # with static shapes each value would otherwise compile a graph.
    import torch

    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()

    def write(cache, update, index):
        return slice_update(cache, [0, index], update)

    step = compile_function(write)
    assert step.__name__ == "write"
    cache, one = keras.ops.zeros((1, 8)), keras.ops.ones((1, 1))
    for index in range(6):
        cache = step(cache, one, index)
    cache = step(cache, one, np.int64(6))  # NumPy ints too
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cache)[0, :7], 1)
    assert counters["stats"]["unique_graphs"] == 1
    # Keyword arguments: one more graph (another call), for every value.
    for index in (7, 0):
        cache = step(cache, update=2 * one, index=index)
    assert keras.ops.convert_to_numpy(cache)[0].tolist() == [2] + [1] * 6 + [2]
    assert counters["stats"]["unique_graphs"] == 2


@torch_only
def test_compile_function_keeps_in_place_updates_apart():
    # The block changes what the graph does (writes into the cache or
    # not) without changing any tensor: module state, still guarded.
    import torch

    torch._dynamo.reset()

    def write(cache, update):
        return slice_update(cache, [0, 1], update)

    step = compile_function(write)
    one = keras.ops.ones((1, 1))
    for _ in range(2):
        cache = keras.ops.zeros((1, 3))
        with in_place_updates():
            assert keras.ops.convert_to_numpy(step(cache, one))[0, 1] == 1
        assert keras.ops.convert_to_numpy(cache)[0, 1] == 1  # written into
        cache = keras.ops.zeros((1, 3))
        assert keras.ops.convert_to_numpy(step(cache, one))[0, 1] == 1
        assert not keras.ops.convert_to_numpy(cache).any()  # a new tensor
