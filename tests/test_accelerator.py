"""zoo.accelerator under the current backend: where XLA compiles what a
call computes (`compiling_with_xla`, `xla_calls`); slice updates in place
inside a decoding loop (`slice_update`, `in_place_updates`). The allocator
statistics and peak throughputs are tested with `zoo.callbacks.Throughput`
(tests/test_callbacks.py), the compiled decoding step with the tasks
(tests/models/test_torch_compile.py); `compile_function`'s guard checks
here."""

import contextlib
import functools
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


@contextlib.contextmanager
def _counted_stances():
    """Counts the calls `compile_function` makes under the stance that
    skips TorchDynamo's full guard check: a list, one entry per call."""
    import torch

    skipped = []
    real = torch.compiler.set_stance

    @functools.wraps(real)
    def spy(*args, **kwargs):
        if kwargs.get("skip_guard_eval_unsafe"):
            skipped.append(1)
        return real(*args, **kwargs)

    torch.compiler.set_stance = spy
    try:
        yield skipped
    finally:
        torch.compiler.set_stance = real


@torch_only
def test_compile_function_checks_every_guard_on_a_kinds_first_call_only():
    import torch

    torch._dynamo.reset()

    def scale(x, factor):
        return x * factor

    with _counted_stances() as skipped:
        step = compile_function(scale)
        three, four = keras.ops.ones((3,)), keras.ops.ones((4,))
        calls = [(three, 2), (three, 2), (three, 3), (four, 2), (three, 2)]
        calls += [(three, 3), (four, 2), (four, 3)]
        got = [keras.ops.convert_to_numpy(step(*call)) for call in calls]
    for (x, factor), out in zip(calls, got):
        np.testing.assert_array_equal(out, np.full(x.shape, float(factor)))
    # First calls of (3, 2), (3, 3), (4, 2) and (4, 3) check every guard;
    # the repeats of the first three skip the full check, and still find
    # the graph of their own factor and shape.
    assert len(skipped) == 4


@torch_only
def test_compile_function_runs_every_guard_where_the_skipped_check_fails(
    monkeypatch,
):
    # A call whose kind was seen but which none of the compiled graphs
    # takes (here: every call is made one kind, so a new shape looks seen)
    # is run again with every guard, and compiles, instead of raising.
    import torch

    from zoo import accelerator

    torch._dynamo.reset()
    monkeypatch.setattr(accelerator, "_call_kind", lambda value: "one kind")
    with _counted_stances() as skipped:
        step = compile_function(lambda x: x + 1)
        for size in (3, 4, 3, 4):
            out = keras.ops.convert_to_numpy(step(keras.ops.ones((size,))))
            np.testing.assert_array_equal(out, np.full((size,), 2.0))
    assert len(skipped) == 3


@torch_only
def test_compile_function_keeps_in_place_updates_apart():
    # The block changes what the graph does (writes into the cache or
    # not) without changing any tensor: its calls are a kind of their own.
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


@torch_only
def test_compile_function_leaves_a_users_stance_alone():
    import torch

    calls = []

    def count(x):
        calls.append(torch.compiler.is_compiling())
        return x + 1

    torch._dynamo.reset()
    step = compile_function(count)
    x = keras.ops.ones((2,))
    step(x)
    step(x)
    with torch.compiler.set_stance("force_eager"):
        with _counted_stances() as skipped:
            step(x)
    assert calls[-1] is False and not skipped  # eager, as the user asked
