"""Calling sublayers without Keras' per-call cost where it changes nothing.

Under PyTorch every op runs eagerly, and each `Layer.__call__` (binding the
arguments, converting their dtypes, looking for Keras masks, name scopes,
the training flag, the output's mask) costs from tens of microseconds for a
`Dense` to hundreds for a layer called with a key/value cache. Generating
one token with a 6-block GPT makes about 66 such calls, which for a small
model can cost more than its arithmetic. `call_sublayer` calls a layer's
`call` directly where that gives what calling the layer would:

* the backend is PyTorch (JAX and TensorFlow trace these calls once into a
  compiled graph, so there they cost nothing per step);
* the layer is built and of a class known to need nothing from
  `__call__` beyond what is checked here: `keras.layers.Dense`,
  `EinsumDense`, `LayerNormalization`, `Embedding`, `Dropout`, `GRUCell`,
  and the zoo layers that say so
  (`_same_when_called_directly = True` in their class body; a subclass
  must say so again); not quantized, not rematerialised, no PyTorch hooks
  on it, no activity regulariser (whose loss `__call__` adds), no
  `mask_zero` (the mask `__call__` would make from token ids);
* its dtype policy is the calling layer's, or it is called where no
  layer's `call` is running (`parent=None`); either way the direct call
  runs in the autocast scope `__call__` would give it (for a mixed policy
  such as `mixed_bfloat16` at the top level, the compute dtype's; for a
  layer that does not autocast, such as `LayerNormalization`, under a
  scope, none), opened as `__call__` opens it;
* every tensor argument is a concrete backend tensor (not symbolic, not a
  NumPy array, at most one container deep) and carries no Keras mask (so
  `__call__` would have filled no mask argument), an explicit `mask=` is
  only given to a layer that supports masking and whose `compute_mask` of
  it is None (so `__call__` would attach no mask to the output, nor warn),
  and floating ones are in the layer's compute dtype (so `__call__` would
  have cast or converted nothing);
* the caller passes `training` explicitly where the layer takes it (the
  zoo's blocks do; without it the direct call sees `None`, which the zoo's
  layers read as inference).

Anywhere else it is `layer(*args, **kwargs)`; inside
`with through_layer_calls():` it always is (to compare, or to rule the
shortcut out when something looks wrong).

`reused_casts()` serves decoding too: under a mixed dtype policy every
direct call reads each float32 variable cast anew to the compute dtype
(one cast op per weight per generated token); inside the block the scopes
`call_sublayer` opens keep each cast and give it again while the variable
is unchanged.

`concrete_index` serves the same decoding steps: it reads the loop's
position, a scalar tensor, once per step as a Python int under PyTorch,
where every op given the tensor would pay for it; `without_keras_mask`
gives a decoding cache tensors that carry no Keras mask.
"""

import contextlib

import keras

from zoo.accelerator import compiling

_KERAS_CLASSES = (
    keras.layers.Dense,
    keras.layers.EinsumDense,
    keras.layers.LayerNormalization,
    keras.layers.Embedding,
    keras.layers.Dropout,
    keras.layers.GRUCell,
)


_STATE = {"direct": True, "casts": None}
# `_direct_call_is_same`'s answer for "call directly, no scope to open".
_NO_SCOPE = contextlib.nullcontext()
_DTYPE_NAMES = {}


@contextlib.contextmanager
def through_layer_calls():
    """Within this block `call_sublayer` always calls the layer itself.

    Example (a GPT's decoding step, `gpt.call_with_cache`, would run
    inside it the same way):

    >>> dense = keras.layers.Dense(4)
    >>> with through_layer_calls():  # dense(x), on every backend
    ...     y = call_sublayer(None, dense, keras.ops.ones((2, 3)))
    >>> tuple(y.shape)
    (2, 4)
    """
    saved = _STATE["direct"]
    _STATE["direct"] = False
    try:
        yield
    finally:
        _STATE["direct"] = saved


@contextlib.contextmanager
def reused_casts():
    """Within this block, under PyTorch, a variable cast to a compute dtype
    by the autocast scopes `call_sublayer` opens is cast once and reused.

    A mixed dtype policy (`mixed_bfloat16`) keeps variables in float32 and
    casts each one whenever a layer reads it: a cast op per weight per
    call, which in token-by-token generation costs as much as a small
    model's arithmetic. Here a cast is kept while the variable's tensor is
    the same object, unchanged in place (PyTorch's version counter), and
    only when no gradient is being recorded through it (a cast that
    requires grad is made each time, as outside the block). Casts Keras'
    own `Layer.__call__` makes are not affected, nor are calls being
    traced by `torch.compile`, nor other backends
    (JAX and TensorFlow compile the decoding loop, where a cast costs
    nothing per step). The kept casts are freed when the block ends.

    Example (`generate` runs its decoding loop so):

    >>> dense = keras.layers.Dense(4, dtype="mixed_bfloat16")
    >>> dense.build((None, 3))
    >>> x = keras.ops.ones((2, 3), "bfloat16")
    >>> with reused_casts():  # PyTorch: the kernel is cast to bfloat16 once
    ...     for step in range(3):
    ...         x = call_sublayer(None, dense, x[:, :3])
    >>> tuple(x.shape), keras.backend.standardize_dtype(x.dtype)
    ((2, 4), 'bfloat16')
    """
    saved = _STATE["casts"]
    _STATE["casts"] = {} if saved is None else saved
    try:
        yield
    finally:
        _STATE["casts"] = saved


def _new_autocast_scope(scopes, dtype):
    """`AutocastScope(dtype)`, one that reuses casts inside
    `reused_casts()`."""
    if _STATE["casts"] is None or dtype is None or compiling():
        # (A compiled graph casts at no per-call cost.)
        return scopes.AutocastScope(dtype)
    cls = _STATE.get("reusing_scope")
    if cls is None:
        cls = _STATE["reusing_scope"] = _reusing_scope_class(scopes)
    return cls(dtype, _STATE["casts"])


def _reusing_scope_class(scopes):
    class ReusingAutocastScope(scopes.AutocastScope):
        """An `AutocastScope` that keeps its casts in `casts`."""

        def __init__(self, dtype, casts):
            super().__init__(dtype)
            self.casts = casts

        def maybe_cast(self, value):
            key = (id(value), self.dtype)
            kept = self.casts.get(key)
            version = getattr(value, "_version", None)
            if kept is not None and kept[0] is value and kept[1] == version:
                return kept[2]
            cast = super().maybe_cast(value)
            if (
                version is not None
                and cast is not value
                and not getattr(cast, "requires_grad", False)
            ):
                # The variable is held too, so its id is not reused.
                self.casts[key] = (value, version, cast)
            return cast

    return ReusingAutocastScope


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = keras.backend.standardize_dtype(dtype)
    return name


def _plain_argument(value, compute_dtype, nested=False):
    """Whether `__call__` would leave `value` as it is: a backend tensor
    with no Keras mask whose dtype needs no cast, or a non-array value
    (numbers, strings, None); tuples, lists and dicts one level deep."""
    if isinstance(value, (tuple, list, dict)):
        if nested:
            return False
        items = value.values() if isinstance(value, dict) else value
        return all(_plain_argument(v, compute_dtype, True) for v in items)
    if isinstance(value, keras.KerasTensor):
        return False
    if not keras.ops.is_tensor(value):
        return not hasattr(value, "__array__")  # __call__ converts arrays
    # PyTorch tensors keep their Keras mask as an attribute.
    if getattr(value, "_keras_mask", None) is not None:
        return False
    dtype = _dtype_name(value.dtype)
    return not keras.backend.is_float_dtype(dtype) or dtype == compute_dtype


def _direct_call_is_same(parent, layer, arguments):
    """False where `layer(...)` must run; else the autocast scope to run
    `layer.call(...)` in (`_NO_SCOPE`: the current one)."""
    if not _STATE["direct"] or keras.backend.backend() != "torch":
        return False
    if not layer.built:
        return False
    cls = type(layer)
    if cls not in _KERAS_CLASSES and not cls.__dict__.get(
        "_same_when_called_directly", False
    ):
        return False
    if layer.quantization_mode is not None:
        return False
    if getattr(layer, "_remat_mode", None) is not None:
        return False
    if layer._forward_hooks or layer._forward_pre_hooks:
        return False
    if getattr(layer, "activity_regularizer", None) is not None:
        return False  # __call__ adds its loss
    if getattr(layer, "mask_zero", False):
        return False  # __call__ attaches the mask it makes from the ids
    if parent is not None and (
        layer.dtype_policy.name != parent.dtype_policy.name
    ):
        return False
    compute_dtype = layer.compute_dtype
    if not all(_plain_argument(value, compute_dtype) for value in arguments):
        return False
    scope = _autocast_scope(layer)
    return False if scope is None else scope


def _autocast_scope(layer):
    """The autocast scope `__call__` would run `layer.call` in, decided as
    `__call__` decides it: `_NO_SCOPE` where it keeps the current one, a new
    `AutocastScope` where it opens one (its compute dtype's for a mixed
    policy at the top level or under a scope of another dtype; none for a
    layer that does not autocast, such as `LayerNormalization`, under a
    scope), None if Keras' scope functions are not found."""
    scopes = _autocast_scopes()
    if scopes is None:
        return None
    current = scopes.get_autocast_scope()
    compute_dtype = layer.compute_dtype
    if current is not None:
        if not layer.autocast or not keras.backend.is_float_dtype(
            compute_dtype
        ):
            return scopes.AutocastScope(None)
        if current.dtype != compute_dtype:
            return _new_autocast_scope(scopes, compute_dtype)
        return _NO_SCOPE
    if compute_dtype != layer.variable_dtype:
        return _new_autocast_scope(scopes, compute_dtype)
    return _NO_SCOPE


def _autocast_scopes():
    """Keras' autocast scope functions (`AutocastScope`,
    `get_autocast_scope`), or None if this Keras keeps them elsewhere (the
    direct calls that need them are then not made)."""
    if "scopes" not in _STATE:
        try:
            from keras.src import backend as scopes

            scopes.AutocastScope, scopes.get_autocast_scope  # noqa: B018
        except (ImportError, AttributeError):
            scopes = None
        _STATE["scopes"] = scopes
    return _STATE["scopes"]


def _attaches_a_mask(layer, args, kwargs):
    """Whether `__call__` would do something with an explicit `mask=`
    beyond passing it on: it takes it as the first input's mask and
    attaches the layer's `compute_mask` of it to the output (or, for a
    layer that does not support masking, warns that the mask is lost)."""
    if not args or not getattr(layer, "supports_masking", False):
        return True
    return layer.compute_mask(args[0], kwargs["mask"]) is not None


def call_sublayer(parent, layer, *args, **kwargs):
    """`layer(*args, **kwargs)`, run as `layer.call(...)` where that is the
    same (see the module's docstring for when).

    Args:
        parent: the layer whose `call` is running (a direct call then
            also needs `layer` to share its dtype policy), or None when
            called from outside any layer (a decoding step). Either way the
            direct call runs in the autocast scope `__call__` would use.
        layer: the layer to call.
        *args, **kwargs: its call arguments.

    Returns:
        What `layer(*args, **kwargs)` returns (with no Keras mask attached:
        a direct call is only made when there would have been none).

    Example (inside a layer's `call`):

    >>> class Block(keras.layers.Layer):
    ...     def __init__(self, **kwargs):
    ...         super().__init__(**kwargs)
    ...         self.dense = keras.layers.Dense(4)
    ...     def call(self, x):
    ...         return call_sublayer(self, self.dense, x)
    >>> tuple(Block()(keras.ops.ones((2, 3))).shape)
    (2, 4)
    """
    # The backend test comes first and alone: under TensorFlow this runs
    # inside autograph, which must not convert the checks.
    if keras.backend.backend() != "torch":
        return layer(*args, **kwargs)
    if kwargs.get("mask") is not None and _attaches_a_mask(layer, args, kwargs):
        return layer(*args, **kwargs)
    scope = _direct_call_is_same(parent, layer, (*args, *kwargs.values()))
    if scope is _NO_SCOPE:
        return layer.call(*args, **kwargs)
    if scope:
        with scope:
            return layer.call(*args, **kwargs)
    return layer(*args, **kwargs)


def concrete_index(index):
    """A scalar position as a Python int where PyTorch runs eagerly.

    A decoding loop carries its position as a scalar tensor. Under PyTorch
    each op given that tensor pays for it: `ops.slice_update` of a cache
    builds index tensors and scatters instead of assigning a slice, and
    the length checks read the value back. Reading it once per step (what
    the sampler's loop condition already does) spares that. Elsewhere
    (JAX, TensorFlow: a traced value inside a compiled loop; a Python int
    already; while `torch.compile` traces, where reading it would split
    the graph and a moving int would be traced again per step) `index` is
    returned as it is.

    Example (the top of a decoding step):

    >>> index = concrete_index(keras.ops.convert_to_tensor(5))
    >>> int(index)  # a Python int under PyTorch, the tensor elsewhere
    5
    """
    if (
        keras.backend.backend() != "torch"
        or isinstance(index, int)
        or not keras.ops.is_tensor(index)
        or len(index.shape) != 0
        or compiling()
    ):
        return index
    return int(index)


def without_keras_mask(x):
    """`x` with no Keras mask attached, for a decoding cache.

    Under PyTorch a layer called on padded inputs attaches a Keras mask to
    its output tensor, and any later layer given that tensor goes through
    `Layer.__call__` (which would read the mask). A cache that carries the
    padding mask itself can hold a copy without it (made once per
    sequence); the tensor given is left as it was. Elsewhere `x` is
    returned as it is.

    Example (building a decoder's cache; under PyTorch `cached` is a copy
    without the mask `encoder_output` carries):

    >>> embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    >>> encoder_output = embedding(np.array([[1, 2, 0]]))
    >>> cached = without_keras_mask(encoder_output)
    >>> tuple(cached.shape), bool(keras.ops.all(cached == encoder_output))
    ((1, 3, 4), True)
    """
    if (
        keras.backend.backend() != "torch"
        or getattr(x, "_keras_mask", None) is None
    ):
        return x
    return keras.ops.copy(x)
