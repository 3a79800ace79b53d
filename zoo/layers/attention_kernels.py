"""How the zoo runs attention on each backend: the explicit softmax path,
the fused kernel (`keras.ops.dot_product_attention`) and the choice between
them, with each backend's workarounds.

`zoo.layers.attention` states the formula; its `scaled_dot_product_attention`
and `MultiHeadAttention` call `_attend` here. Two guarantees hold on every
backend and on both paths:

* a query row whose mask allows no key gives zeros (and zero weights), never
  NaN and never the mean of V;
* causal attention is aligned to the *end* of the key sequence, so a block of
  new queries appended to a key/value cache sees every cached key and itself.

The explicit path is taken where the weights are needed (returned, or
dropped out) or the value heads are not as wide as the key heads; the
fused one everywhere else. On the fused path:

* causal attention alone, with as many queries as keys, stays the kernel's
  `is_causal` flag; otherwise the causal mask is built explicitly;
* PyTorch's CPU kernels give a query whose keys are all masked zeros (a
  one-off probe checks the installed version), so there an additive -inf
  bias replaces the zoo's check for such rows;
* Keras' TensorFlow attention gives such a row the mean of the values, so
  it is only zeroed after; other kernels may give NaN, so the row is
  opened to every key first and zeroed after;
* JAX gets a mask broadcast to its full shape (cuDNN's kernel takes no
  broadcast query axis).
"""

import math

import keras
from keras import ops

from zoo.accelerator import compiling, exporting_onnx
from zoo.layers import attention  # the module: it imports this one
from zoo.layers.softmax import masked_softmax


def _static_dim(shape, axis):
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def _check_attention_inputs(query, key, value):
    rank = len(query.shape)
    if rank not in (3, 4):
        raise ValueError(
            "scaled_dot_product_attention expects query of rank 3 "
            "(batch, seq, dim) or rank 4 (batch, seq, heads, dim); "
            f"got shape {tuple(query.shape)}."
        )
    for name, tensor in (("key", key), ("value", value)):
        if len(tensor.shape) != rank:
            raise ValueError(
                f"{name} must have the same rank as query ({rank}); "
                f"got {name} shape {tuple(tensor.shape)} and query shape "
                f"{tuple(query.shape)}."
            )
    q_dim, k_dim = _static_dim(query.shape, -1), _static_dim(key.shape, -1)
    if q_dim is not None and k_dim is not None and q_dim != k_dim:
        raise ValueError(
            "query and key must have the same last dimension; got "
            f"{q_dim} and {k_dim}."
        )
    k_len, v_len = _static_dim(key.shape, 1), _static_dim(value.shape, 1)
    if k_len is not None and v_len is not None and k_len != v_len:
        raise ValueError(
            "key and value must have the same sequence length; got "
            f"{k_len} and {v_len}."
        )
    return rank


def _mask_to_4d(mask, rank):
    """Brings a mask to a shape broadcastable to (batch, heads, q_len, k_len)."""
    mask = ops.cast(mask, "bool")
    mask_rank = len(mask.shape)
    # `expand_dims`, not `mask[:, None]`: TFLite's own strided slice takes
    # no new axis on unknown sizes (a LiteRT export would need TensorFlow's).
    if mask_rank == 2:  # (batch, k_len): a key padding mask
        return ops.expand_dims(mask, (1, 2))
    if mask_rank == 3:  # (batch, q_len, k_len)
        return ops.expand_dims(mask, 1)
    if mask_rank == 4 and rank == 4:  # (batch, heads, q_len, k_len)
        return mask
    raise ValueError(
        "mask must have shape (batch, k_len), (batch, q_len, k_len)"
        + (" or (batch, heads, q_len, k_len)" if rank == 4 else "")
        + f"; got shape {tuple(mask.shape)}."
    )


def _check_mask_fits(mask, q_len, k_len):
    """A mask (`(..., q_len, k_len)`, or 1 on either axis to broadcast) whose
    query or key axis has the wrong length is an error that says so, where
    the lengths are known, instead of a broadcasting failure later."""
    for axis, length, name in ((-2, q_len, "q_len"), (-1, k_len, "k_len")):
        size = mask.shape[axis]
        if None not in (size, length) and size not in (1, length):
            raise ValueError(
                f"the mask (shape {tuple(mask.shape)}) has {size} entries on "
                f"its {name} axis but the attention has {name}={length} "
                f"(query length {q_len}, key length {k_len})."
            )


def _rows_with_a_key(mask):
    """(mask with empty rows opened up, float-able row validity)."""
    row_valid = ops.any(mask, axis=-1, keepdims=True)
    # An empty row is opened to every key so no kernel sees an all-masked row
    # (fused kernels give NaN or mean(V) there); its output is zeroed after.
    return ops.logical_or(mask, ops.logical_not(row_valid)), row_valid


def _explicit_attention(
    query,
    key,
    value,
    mask,
    scale,
    weights_dropout=None,
    return_weights=False,
    rows_have_keys=False,
):
    """Softmax path on (batch, seq, heads, dim) tensors; returns (outputs,
    weights), weights None unless `return_weights`.

    Where ops run one at a time (PyTorch eager), every elementwise pass over
    the (batch, heads, q, k) logits is a round trip through memory, so the
    scale goes on the query and the zeroing of key-less rows on the outputs,
    both (batch, seq, heads, dim): `masked_softmax` sees the mask with such
    rows opened up, and need not zero them itself."""
    logits = ops.einsum("btnh,bsnh->bnts", query * scale, key)
    check_rows = mask is not None and not rows_have_keys
    if check_rows:
        mask, row_valid = _rows_with_a_key(mask)
    weights = masked_softmax(logits, mask, rows_nonempty=True)
    weights = ops.cast(weights, value.dtype)
    attended = weights if weights_dropout is None else weights_dropout(weights)
    outputs = ops.einsum("bnts,bsnh->btnh", attended, value)
    if check_rows:
        outputs = _zero_rows_without_a_key(outputs, row_valid)
        if return_weights:
            weights = weights * ops.cast(row_valid, weights.dtype)
    return outputs, (weights if return_weights else None)


def _zero_rows_without_a_key(outputs, row_valid):
    """outputs (b, q, h, d) times row_valid (b, h, q, 1), transposed to match."""
    row_valid = ops.transpose(row_valid, (0, 2, 1, 3))
    return outputs * ops.cast(row_valid, outputs.dtype)


_ZEROES_EMPTY_ROWS = {}  # device type -> what the probe found


def _sdpa_zeroes_empty_rows(query):
    """Whether the backend's fused kernel gives zeros for an all -inf row:
    PyTorch's CPU kernels do (since PyTorch 2.5; a one-off probe asks the
    installed version). On CUDA, PyTorch 2.11's cuDNN kernel gives such a
    bfloat16 row non-zero values under a boolean mask (its other kernels
    give zeros; `benchmarks/sdpa_empty_rows.py` asks each), and the other
    backends give NaN or the mean of the values, so they keep zoo's row
    check."""
    if keras.backend.backend() != "torch" or exporting_onnx():
        # An ONNX graph's softmax gives such a row NaN: an export keeps the
        # row check.
        return False
    device = getattr(getattr(query, "device", None), "type", None)
    if device != "cpu":
        return False
    if device not in _ZEROES_EMPTY_ROWS:
        if compiling():
            # The probe reads a value back, which would split the graph
            # torch.compile is tracing (and trace it again once answered):
            # keep the row check in this graph.
            return False
        # Query 0 sees no key, query 1 sees both.
        probe = ops.ones((1, 2, 1, 4))
        bias = ops.convert_to_tensor(
            [[[[float("-inf"), float("-inf")], [0.0, 0.0]]]]
        )
        out = ops.convert_to_numpy(
            ops.dot_product_attention(probe, probe, probe, bias=bias)
        )
        _ZEROES_EMPTY_ROWS[device] = bool((out[:, 0] == 0).all())
    return _ZEROES_EMPTY_ROWS[device]


def _fused_attention(
    query, key, value, mask, scale, is_causal, rows_have_keys=False
):
    """`keras.ops.dot_product_attention` on (batch, seq, heads, dim) tensors.
    `rows_have_keys`: every query row of `mask` allows a key (a causal
    mask), so no row needs opening up or zeroing."""
    flash = {}
    if (mask is not None and keras.backend.backend() == "torch") or (
        compiling()
    ):
        # Unless told, Keras' PyTorch attention asks PyTorch on every call
        # whether its flash kernel could run (a pybind object per call, and
        # a graph break under torch.compile); unasked, PyTorch's own
        # dispatch still picks its best kernel. With a mask the answer is
        # always no (that kernel takes none). Without one, eager calls keep
        # asking: a yes spares Keras' contiguous copies of q, k and v.
        flash = {"flash_attention": False}
    row_valid = None
    if mask is not None and _sdpa_zeroes_empty_rows(query):
        # PyTorch's CPU kernels give a query whose keys are all -inf zeros
        # (and zero gradients), so an additive -inf bias replaces the
        # row check, a pass over the mask, and Keras' own bool-to-float
        # conversion of it.
        bias = ops.where(mask, 0.0, float("-inf"))
        return ops.dot_product_attention(
            query,
            key,
            value,
            bias=ops.cast(bias, query.dtype),
            scale=scale,
            **flash,
        )
    if mask is not None and not rows_have_keys:
        if keras.backend.backend() == "tensorflow":
            # Keras' TensorFlow attention fills masked logits with a finite
            # large negative (it has no fused kernel): an empty row comes
            # out as the mean of the values, never NaN, so zeroing it after
            # is enough and the mask need not be opened up.
            row_valid = ops.any(mask, axis=-1, keepdims=True)
        else:
            mask, row_valid = _rows_with_a_key(mask)
    if mask is not None and keras.backend.backend() == "jax":
        # A full (batch, heads or 1, queries, keys) mask: cuDNN's fused
        # kernel (JAX on a GPU in bfloat16/float16) takes no broadcast
        # query axis, and Keras would log an error and fall back. (XLA
        # fuses the broadcast; PyTorch and TensorFlow would materialise
        # it, a (batch, 1, q, k) tensor per call, so they keep the
        # broadcastable mask.)
        mask = ops.broadcast_to(
            mask,
            (
                ops.shape(query)[0],
                ops.shape(mask)[1],
                ops.shape(query)[1],
                ops.shape(key)[1],
            ),
        )
    outputs = ops.dot_product_attention(
        query,
        key,
        value,
        mask=mask,
        scale=scale,
        is_causal=is_causal,
        **flash,
    )
    if row_valid is not None:
        outputs = _zero_rows_without_a_key(outputs, row_valid)
    return outputs


def _attend(
    query,
    key,
    value,
    mask=None,
    is_causal=False,
    scale=None,
    return_weights=False,
    weights_dropout=None,
    rows_have_keys=False,
):
    """Shared core of `scaled_dot_product_attention` and the layers.

    `rows_have_keys`: the caller knows every query row of `mask` allows at
    least one key (a causal mask and nothing else), so the check for rows
    without one, and their zeroing, are skipped."""
    rank = _check_attention_inputs(query, key, value)
    if rank == 3:
        query, key, value = (ops.expand_dims(t, 2) for t in (query, key, value))
    if scale is None:
        head_dim = _static_dim(query.shape, -1)
        if head_dim is None:
            raise ValueError("The last dimension of query must be known.")
        scale = 1.0 / math.sqrt(head_dim)
    scale = float(scale)

    full_mask = None if mask is None else _mask_to_4d(mask, rank)
    q_len, k_len = _static_dim(query.shape, 1), _static_dim(key.shape, 1)
    if full_mask is not None:
        _check_mask_fits(full_mask, q_len, k_len)
    native_causal = (
        is_causal
        and full_mask is None
        and not return_weights
        and weights_dropout is None
        and _static_dim(value.shape, -1) == _static_dim(key.shape, -1)
        and q_len is not None
        and q_len == k_len
    )
    if is_causal and not native_causal:
        causal = attention.causal_mask(ops.shape(query)[1], ops.shape(key)[1])
        causal = causal[None, None, :, :]
        # Causal alone, the last query aligned with the last key: with at
        # least as many keys as queries, every query sees key 0.
        rows_have_keys = rows_have_keys or (
            full_mask is None and None not in (q_len, k_len) and k_len >= q_len
        )
        full_mask = causal if full_mask is None else full_mask & causal

    # Fused kernels (jax.nn.dot_product_attention) need value heads as wide
    # as key heads; other widths take the explicit path.
    fused_ok = _static_dim(value.shape, -1) == _static_dim(key.shape, -1)
    if return_weights or weights_dropout is not None or not fused_ok:
        outputs, weights = _explicit_attention(
            query,
            key,
            value,
            full_mask,
            scale,
            weights_dropout,
            return_weights,
            rows_have_keys,
        )
    else:
        outputs = _fused_attention(
            query,
            key,
            value,
            full_mask,
            scale,
            native_causal,
            rows_have_keys,
        )
        weights = None
    if rank == 3:
        outputs = ops.squeeze(outputs, 2)
        weights = None if weights is None else ops.squeeze(weights, 1)
    return outputs, weights
