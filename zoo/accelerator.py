"""Which accelerator this backend runs on, its peak memory, and its
data-sheet peak throughput (for model FLOPs utilisation).

Reads each backend's own allocator statistics (imported lazily, here and
nowhere in the layers or models): JAX's `Device.memory_stats()`, PyTorch's
`torch.cuda.max_memory_allocated`, TensorFlow's
`tf.config.experimental.get_memory_info`.
"""

import contextlib
import functools
import numbers
import threading

import keras


def accelerator():
    """`(name, peak_memory_bytes)` of the backend's first GPU, or
    `("cpu", None)` without one.

    The peak is the largest amount the backend's allocator has held on that
    GPU since the process started (JAX, TensorFlow) or since its last
    `torch.cuda.reset_peak_memory_stats` (PyTorch). Statistics are a bonus:
    where they cannot be read, the answer is `("unknown", None)`, never an
    error.

    Example:

    >>> name, peak = accelerator()   # e.g. ("NVIDIA H100 80GB HBM3", 2.1e9)
    """
    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform != "gpu":
                return "cpu", None
            stats = device.memory_stats() or {}
            return device.device_kind, stats.get("peak_bytes_in_use")
        if backend == "torch":
            import torch

            if not torch.cuda.is_available():
                return "cpu", None
            return (
                torch.cuda.get_device_name(0),
                int(torch.cuda.max_memory_allocated(0)),
            )
        if backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_logical_devices("GPU")
            if not gpus:
                return "cpu", None
            info = tf.config.experimental.get_memory_info("GPU:0")
            return gpus[0].name, int(info["peak"])
    except Exception:  # statistics are a bonus, never a failure
        return "unknown", None
    return "cpu", None


# Dense (no sparsity) tensor-core peaks, TFLOP/s, by device name and
# compute dtype: NVIDIA's H100 SXM / H200 and A100 data sheets.
PEAK_TFLOPS = {
    "h100": {"bfloat16": 989.4, "float16": 989.4, "float32": 494.7},
    "h200": {"bfloat16": 989.4, "float16": 989.4, "float32": 494.7},
    "a100": {"bfloat16": 312.0, "float16": 312.0, "float32": 156.0},
}


def compiling():
    """Whether this call is being traced by `torch.compile` (TorchDynamo).

    Tensors have no values to read there: reading one back (the check of
    the token ids against the vocabulary, say) would split the compiled
    graph at that point. The layers skip such reads while compiling, as they do
    inside a JAX or TensorFlow function. Always False on JAX and
    TensorFlow.

    Example:

    >>> compiling()   # in an eager call
    False
    """
    if keras.backend.backend() != "torch":
        return False
    import torch

    return bool(torch.compiler.is_compiling())


@contextlib.contextmanager
def _entered(state):
    """Counts a block entered in this thread on `state` (a
    `threading.local`): `state.depth` > 0 inside it, nesting included."""
    state.depth = getattr(state, "depth", 0) + 1
    try:
        yield
    finally:
        state.depth -= 1


_XLA_CALLS = threading.local()  # .depth: xla_calls() entered, this thread


@contextlib.contextmanager
def xla_calls():
    """Marks the calls inside (in this thread) as calls of functions that
    TensorFlow compiles with XLA (`tf.function(jit_compile=True)`), for
    `compiling_with_xla`.

    A layer traced by TensorFlow cannot tell from its inputs whether XLA
    will compile the graph; the code that made the function can. zoo's
    generation enters this around its XLA-compiled generate functions
    (Keras' own `fit` and `predict` do not).

    Example:

    >>> with xla_calls():
    ...     inside = compiling_with_xla()
    >>> inside == (keras.backend.backend() in ("jax", "tensorflow"))
    True
    """
    with _entered(_XLA_CALLS):
        yield


def compiling_with_xla():
    """Whether the layers may count on XLA compiling what this call
    computes: always under JAX; under TensorFlow only inside `xla_calls()`
    (zoo's generate functions; not Keras' `fit` or `predict`, even with
    `jit_compile=True`); never under PyTorch.

    Some operations have XLA code that is much slower than another way of
    computing the same thing (depthwise convolutions on a CPU); their
    layers take the other way when this is True.

    Example:

    >>> compiling_with_xla() == (keras.backend.backend() == "jax")
    True
    """
    backend = keras.backend.backend()
    inside = getattr(_XLA_CALLS, "depth", 0) > 0
    return backend == "jax" or (backend == "tensorflow" and inside)


_IN_PLACE = threading.local()  # .depth: in_place_updates() entered


@contextlib.contextmanager
def in_place_updates():
    """Within this block (in this thread; blocks may nest), under PyTorch,
    `slice_update` writes into the tensor it is given where it can (see
    `slice_update` for when) instead of returning an updated copy.

    For code that owns the tensors it updates and never reads their old
    values again: zoo's generation enters it around its decoding loop, whose
    key/value caches nothing else holds. Outside it a layer called with a
    cache never changes the cache it was given. No effect under JAX and
    TensorFlow.

    Example:

    >>> cache = keras.ops.zeros((1, 4))
    >>> with in_place_updates():
    ...     new = slice_update(cache, [0, 2], keras.ops.ones((1, 1)))
    >>> keras.ops.convert_to_numpy(new)
    array([[0., 0., 1., 0.]], dtype=float32)
    >>> (new is cache) == (keras.backend.backend() == "torch")
    True
    """
    with _entered(_IN_PLACE):
        yield


def slice_update(inputs, start_indices, updates):
    """`keras.ops.slice_update(inputs, start_indices, updates)`, written
    into `inputs` itself where that is safe and saves a copy.

    Under PyTorch, inside `in_place_updates()`, with no gradient being
    recorded through either tensor, `inputs` contiguous (a broadcast
    tensor's rows may share memory) and `updates` narrower than `inputs`
    along at most one axis, `updates` is copied into that axis' positions
    `start ...` of `inputs` (`index_copy_`, which `torch.compile` keeps as
    one in-place write; `start` may be a Python int or a scalar tensor)
    and `inputs` is returned. Otherwise, and always under JAX and
    TensorFlow, Keras' `ops.slice_update` (a new tensor).

    Args:
        inputs: the tensor to update, e.g. a cache `(batch, 2, length,
            heads, head_dim)`.
        start_indices: one start per axis of `inputs` (0 on the axes
            where `updates` is as long as `inputs`). The updated positions
            must lie inside `inputs`: past its end the backends differ
            (JAX moves the start back, Keras' PyTorch op writes nothing,
            the in-place write raises an IndexError).
        updates: a tensor of `inputs`' rank, e.g. `(batch, 2, n, heads,
            head_dim)` for `n` new positions.

    Returns:
        The updated tensor, of `inputs`' shape and dtype (`updates` is
        cast to it).

    Example (one new position of a cache):

    >>> cache = keras.ops.zeros((1, 2, 5, 1, 3))
    >>> position = keras.ops.ones((1, 2, 1, 1, 3))
    >>> new = slice_update(cache, [0, 0, 3, 0, 0], position)
    >>> keras.ops.convert_to_numpy(keras.ops.sum(new, axis=(0, 1, 3, 4)))
    array([0., 0., 0., 6., 0.], dtype=float32)
    """
    updates = keras.ops.cast(
        updates, keras.backend.standardize_dtype(inputs.dtype)
    )
    if (
        keras.backend.backend() != "torch"
        or getattr(_IN_PLACE, "depth", 0) == 0
    ):
        return keras.ops.slice_update(inputs, start_indices, updates)
    import torch

    if (
        not isinstance(inputs, torch.Tensor)
        or not isinstance(updates, torch.Tensor)
        or (
            torch.is_grad_enabled()
            and (inputs.requires_grad or updates.requires_grad)
        )
        # A broadcast tensor (rows that share memory) takes no writes.
        or not inputs.is_contiguous()
        or inputs.ndim != updates.ndim
        or len(start_indices) != inputs.ndim
    ):
        return keras.ops.slice_update(inputs, start_indices, updates)
    axes = [
        axis
        for axis in range(inputs.ndim)
        if updates.shape[axis] != inputs.shape[axis]
    ]
    if len(axes) > 1:
        return keras.ops.slice_update(inputs, start_indices, updates)
    if not axes:
        return inputs.copy_(updates)
    axis = axes[0]
    positions = (
        torch.arange(updates.shape[axis], device=inputs.device)
        + start_indices[axis]
    )
    return inputs.index_copy_(axis, positions, updates)


def exporting_onnx():
    """Whether this call is being traced by `torch.onnx.export` (what
    Keras' `model.export(path, format="onnx")` runs under PyTorch).

    The graph then runs in another runtime (onnxruntime), so the layers
    take no shortcut that rests on what a PyTorch kernel does (the fused
    attention's zeros for a query that sees no key, say). Always False on
    JAX and TensorFlow.

    Example:

    >>> exporting_onnx()   # in an eager call
    False
    """
    if keras.backend.backend() != "torch":
        return False
    import torch

    return bool(torch.onnx.is_in_onnx_export())


def compile_function(function, **options):
    """`function` compiled with `torch.compile` under PyTorch; `function`
    itself under JAX and TensorFlow, whose compiled loops already hold it.

    Shapes are static (`dynamic=False`): each new shape compiles once more
    (PyTorch recompiles up to `torch._dynamo.config.recompile_limit` shapes,
    then runs the function eagerly). Used by `generate` for a task's
    one-token decoding step when the task was compiled with
    `jit_compile=True`.

    Before running a compiled graph, TorchDynamo checks its guards: that
    nothing the graph was traced from has changed. For a small model's
    one-token step, checking every attribute of every Keras layer (each an
    `nn.Module` under PyTorch) costs as much as a fifth of the step. So
    the guards on the layers are left out
    (`torch.compiler.skip_guard_on_all_nn_modules_unsafe`); the guards on
    the arguments (every tensor's shape, dtype and strides, other values),
    on module globals and on PyTorch's global state (gradient mode,
    autocast) stay. Graphs are kept for this one function: another
    model's step, even one of the same class, compiles its own. A model
    changed after its step was compiled in a way that is not a tensor's
    value (a layer swapped, a setting flipped) needs a new function:
    compile the task again. Where PyTorch has no such guard filter (older
    versions), or with `mode` given, every guard stays. Every integer
    argument (a Python or NumPy int, not a bool: a decoding position, say)
    is passed as a 0-d int32 tensor, so one graph serves every value; a
    function that uses one as a Python int (a slice's bound) runs that
    part eagerly.

    Args:
        function: a Python callable of tensors (a bound method is fine).
        **options: passed on to `torch.compile` (`backend`, `mode`,
            `options`); ignored under JAX and TensorFlow.

    Returns:
        A callable with `function`'s signature.

    Example (a GPT's decoding step would be `gpt.call_with_cache`):

    >>> def double(x):
    ...     return 2 * x
    >>> step = compile_function(double)  # torch.compile'd under PyTorch
    >>> keras.ops.convert_to_numpy(step(keras.ops.ones((3,))))
    array([2., 2., 2.], dtype=float32)
    """
    if keras.backend.backend() != "torch":
        return function
    import torch

    skip_layers = getattr(
        torch.compiler, "skip_guard_on_all_nn_modules_unsafe", None
    )
    # torch.compile takes a mode or options, not both.
    if skip_layers is not None and options.get("mode") is None:
        options["options"] = {
            "guard_filter_fn": skip_layers,
            **(options.get("options") or {}),
        }
    compiled = torch.compile(_own_code(function), dynamic=False, **options)

    @functools.wraps(function)
    def call(*args, **kwargs):
        return compiled(
            *(_int_as_tensor(a) for a in args),
            **{k: _int_as_tensor(v) for k, v in kwargs.items()},
        )

    return call


def _int_as_tensor(value):
    """An integer (a Python or NumPy int, not a bool) as a 0-d int32
    tensor: with static shapes TorchDynamo compiles a graph per value of
    an int argument, and a decoding loop run eagerly carries its position
    as one."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return keras.ops.convert_to_tensor(int(value), "int32")
    return value


def _own_code(function):
    """A function that calls `function`, with a code object of its own.

    TorchDynamo keeps compiled graphs on the code object it traced, and
    every model of a class shares its methods' code: without the layers'
    guards, a second model's step could run the first one's graph."""

    def call(*args, **kwargs):
        return function(*args, **kwargs)

    call.__code__ = call.__code__.replace()  # a new object, its own graphs
    call.__name__ = getattr(function, "__name__", call.__name__)
    return call


def peak_tflops(device_name, dtype):
    """The device's data-sheet peak for `dtype` in TFLOP/s (float32 counts
    as TF32 tensor cores), or None for a device not in `PEAK_TFLOPS`.

    Example:

    >>> peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16")
    989.4
    """
    name = str(device_name).lower()
    for key, peaks in PEAK_TFLOPS.items():
        if key in name:
            return peaks.get(dtype)
    return None
