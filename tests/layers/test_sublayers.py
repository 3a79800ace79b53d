"""call_sublayer: a layer's `call` run directly only where calling the layer
would give the same, under the current backend."""

import contextlib

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import random_array, to_numpy
from zoo.layers import (
    BahdanauAttention,
    LearnedPositionEmbedding,
    LuongAttention,
    MultiHeadAttention,
    PositionalEmbedding,
    SinusoidalPositionEncoding,
    TokenEmbedding,
    TransformerDecoder,
    TransformerEncoder,
    sublayers,
)
from zoo.layers.sublayers import call_sublayer
from zoo.models.gpt import GPT, GPTBackbone
from zoo.models.seq2seq import RNNSeq2SeqBackbone, TransformerSeq2SeqBackbone

TORCH = keras.backend.backend() == "torch"


class _Parent(keras.layers.Layer):
    """Calls `inner` from its own `call`, directly or through `__call__`:
    `inner(*tensors[:positional], **{names: the other tensors}, **static)`."""

    def __init__(self, inner, direct, positional, names, static, **kwargs):
        super().__init__(**kwargs)
        self.inner, self.direct = inner, direct
        self.positional, self.names, self.static = positional, names, static
        self.built = True  # `inner` builds itself on its first call

    def call(self, *tensors):
        args = tensors[: self.positional]
        kwargs = dict(
            zip(self.names, tensors[self.positional :]), **self.static
        )
        if self.direct:
            return call_sublayer(self, self.inner, *args, **kwargs)
        return self.inner(*args, **kwargs)


def _built(layer, input_shape):
    layer.build(input_shape)
    return layer


def _cast_floats(value, dtype):
    value = ops.convert_to_tensor(value)
    if keras.backend.is_float_dtype(value.dtype):
        return ops.cast(value, dtype)
    return value


def _layers():
    """(name, fresh built layer, arguments)"""
    x = random_array((2, 5, 8), 0)
    ids = np.random.default_rng(0).integers(0, 11, (2, 5)).astype("int32")
    cache = np.zeros((2, 2, 5, 2, 4), "float32")
    source_mask = np.arange(5)[None] < np.array([[5], [3]])
    return [
        (
            "dense",
            lambda dtype: keras.layers.Dense(6, activation="gelu", dtype=dtype),
            (x,),
            {},
        ),
        (
            "einsum_dense",
            lambda dtype: keras.layers.EinsumDense(
                "abc,cde->abde", (None, 2, 4), bias_axes="de", dtype=dtype
            ),
            (x,),
            {},
        ),
        (
            "layer_norm",
            lambda dtype: keras.layers.LayerNormalization(dtype=dtype),
            (x,),
            {},
        ),
        (
            "mha",
            lambda dtype: MultiHeadAttention(2, 4, dtype=dtype),
            (x, x),
            {"use_causal_mask": True, "training": False},
        ),
        (
            "encoder",
            lambda dtype: TransformerEncoder(
                2, 16, norm_first=True, dtype=dtype
            ),
            (x,),
            {"training": False},
        ),
        (
            "token_embedding",
            lambda dtype: TokenEmbedding(11, 8, dtype=dtype),
            (ids,),
            {},
        ),
        (
            "token_embedding_reverse",
            lambda dtype: _built(TokenEmbedding(11, 8, dtype=dtype), (2, 5)),
            (x,),
            {"reverse": True},
        ),
        (
            "positional_embedding",
            lambda dtype: PositionalEmbedding(
                11, 9, 8, mask_zero=False, dtype=dtype
            ),
            (ids,),
            {"start_index": 3},
        ),
        (
            "sinusoidal_embedding",
            lambda dtype: PositionalEmbedding(
                11, 9, 8, positions="sinusoidal", mask_zero=False, dtype=dtype
            ),
            (ids,),
            {"start_index": 2},
        ),
        (
            "keras_embedding",
            lambda dtype: keras.layers.Embedding(11, 8, dtype=dtype),
            (ids,),
            {},
        ),
        (
            "dropout",
            lambda dtype: keras.layers.Dropout(0.5, dtype=dtype),
            (x,),
            {"training": False},
        ),
        (
            "gru_cell",
            lambda dtype: keras.layers.GRUCell(6, dtype=dtype),
            (x[:, 0], random_array((2, 6), 4)),
            {"training": False},
        ),
        # An explicit mask= whose compute_mask is None: a direct call.
        (
            "bahdanau",
            lambda dtype: BahdanauAttention(6, dtype=dtype),
            (x[:, :2], x),
            {"mask": source_mask, "return_attention_scores": True},
        ),
        (
            "luong_general",
            lambda dtype: LuongAttention(dtype=dtype),
            (x[:, 0], x),
            {"mask": source_mask},
        ),
        (
            "decoder_cached",
            lambda dtype: TransformerDecoder(
                2, 16, norm_first=True, dtype=dtype
            ),
            (x[:, :1],),
            {
                "self_attention_cache": cache,
                "self_attention_cache_update_index": 2,
            },
        ),
    ]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("case", _layers(), ids=lambda case: case[0])
def test_a_sublayer_gives_what_calling_it_gives(case, policy):
    _, make, args, kwargs = case
    inner = make(policy)
    names = [k for k, v in kwargs.items() if hasattr(v, "shape")]
    static = {k: v for k, v in kwargs.items() if k not in names}
    outputs = {}
    for direct in (False, True):
        parent = _Parent(inner, direct, len(args), names, static, dtype=policy)
        tensors = [
            _cast_floats(t, parent.compute_dtype)
            for t in (*args, *(kwargs[k] for k in names))
        ]
        outputs[direct] = keras.tree.flatten(parent(*tensors))
    assert len(outputs[True]) == len(outputs[False])
    for a, b in zip(outputs[False], outputs[True]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(
            to_numpy(ops.cast(a, "float32")), to_numpy(ops.cast(b, "float32"))
        )


@pytest.mark.parametrize("case", _layers(), ids=lambda case: case[0])
def test_a_mixed_precision_layer_called_at_the_top_level(case):
    # parent=None: call_sublayer opens the autocast scope __call__ would.
    _, make, args, kwargs = case
    layer = make("mixed_bfloat16")
    cast = {
        k: _cast_floats(v, "bfloat16") if hasattr(v, "shape") else v
        for k, v in kwargs.items()
    }
    args = [_cast_floats(a, "bfloat16") for a in args]
    called = keras.tree.flatten(layer(*args, **cast))
    if TORCH:  # the direct call is made, in a bfloat16 scope
        assert _same(None, layer, *args, **cast).dtype == "bfloat16"
    direct = keras.tree.flatten(call_sublayer(None, layer, *args, **cast))
    for a, b in zip(called, direct):
        assert keras.backend.standardize_dtype(a.dtype) == "bfloat16"
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(
            to_numpy(ops.cast(a, "float32")), to_numpy(ops.cast(b, "float32"))
        )


def _same(parent, layer, *args, **kwargs):
    return sublayers._direct_call_is_same(
        parent, layer, (*args, *kwargs.values())
    )


def test_direct_calls_only_where_they_change_nothing():
    x = ops.convert_to_tensor(random_array((2, 5, 8), 1))
    parent = keras.layers.Dense(8)
    dense = keras.layers.Dense(8)
    dense.build((None, 8))
    if not TORCH:
        # JAX and TensorFlow trace the calls once: nothing to gain.
        assert not _same(parent, dense, x)
        return
    assert _same(parent, dense, x)
    assert _same(None, dense, x)
    with sublayers.through_layer_calls():
        assert not _same(parent, dense, x)

    unbuilt = keras.layers.Dense(8)
    assert not _same(parent, unbuilt, x)

    class MyDense(keras.layers.Dense):
        pass

    subclass = MyDense(8)
    subclass.build((None, 8))
    assert not _same(parent, subclass, x)  # its call may differ

    assert not _same(keras.layers.Dense(8, dtype="mixed_bfloat16"), dense, x)
    mixed = keras.layers.Dense(8, dtype="mixed_bfloat16")
    mixed.build((None, 8))
    # At the top level a mixed layer's call runs in the autocast scope that
    # __call__ would open.
    scope = _same(None, mixed, ops.cast(x, "bfloat16"))
    assert isinstance(scope, keras.src.backend.AutocastScope)
    assert scope.dtype == "bfloat16"
    assert _same(None, dense, x) is sublayers._NO_SCOPE  # none to open
    no_autocast = keras.layers.Dense(8, autocast=False)
    no_autocast.build((None, 8))
    with keras.src.backend.AutocastScope("bfloat16"):
        # Where __call__ would replace the active scope, so does the direct
        # call: float32 for a float32 layer, none for one that does not
        # autocast.
        assert _same(None, dense, x).dtype == "float32"
        assert _same(None, no_autocast, x).dtype is None
        assert _same(None, mixed, ops.cast(x, "bfloat16")) is (
            sublayers._NO_SCOPE
        )
    assert not _same(parent, dense, ops.cast(x, "float16"))  # needs a cast
    assert not _same(parent, dense, keras.KerasTensor((2, 5, 8)))

    assert not _same(parent, dense, to_numpy(x))  # __call__ converts it
    assert _same(parent, dense, x, cache_update_index=3)
    assert not _same(parent, dense, x, cache_update_index=np.int32(3))
    assert _same(parent, dense, {"a": x, "b": [x]}) is False  # too deep
    assert _same(parent, dense, {"a": x, "b": x})

    masked = keras.layers.Masking()(x)  # carries a Keras mask
    assert not _same(parent, dense, masked)
    assert not _same(parent, dense, [x, masked])
    assert not _same(parent, dense, {"x": masked})

    hooked = keras.layers.Dense(8)
    hooked.build((None, 8))
    hooked.register_forward_hook(lambda *a: None)
    assert not _same(parent, hooked, x)

    regularised = keras.layers.Dense(8, activity_regularizer="l2")
    regularised.build((None, 8))
    assert not _same(parent, regularised, x)

    ids = ops.convert_to_tensor(np.array([[1, 2, 0]], "int32"))
    for cls in (TokenEmbedding, PositionalEmbedding):
        args = (11, 4, 8) if cls is PositionalEmbedding else (11, 8)
        plain, masking = cls(*args, mask_zero=False), cls(*args, mask_zero=True)
        plain(ids), masking(ids)
        assert _same(parent, plain, ids)
        # __call__ would attach the mask it makes from the ids.
        assert not _same(parent, masking, ids)

    quantized = keras.layers.Dense(8)
    quantized.build((None, 8))
    quantized.quantize("int8")
    assert not _same(parent, quantized, x)


def test_an_explicit_mask_argument_goes_through_layer_call():
    # __call__ takes `mask=` as the input's mask and attaches the layer's
    # compute_mask of it to the output; a direct call would not.
    class Doubling(keras.layers.Layer):
        _same_when_called_directly = True  # opted in, as a zoo layer would

        def __init__(self):
            super().__init__()
            self.supports_masking = True
            self.built = True

        def call(self, x, mask=None):
            return x * 2

    x = ops.convert_to_tensor(random_array((2, 4, 5), 3))
    mask = ops.convert_to_tensor(np.array([[1, 1, 0, 0], [1, 1, 1, 0]], bool))
    out = call_sublayer(None, Doubling(), x, mask=mask)
    np.testing.assert_array_equal(
        to_numpy(keras.src.backend.get_keras_mask(out)), to_numpy(mask)
    )
    assert sublayers._attaches_a_mask(Doubling(), (x,), {"mask": mask})

    class NotMasking(Doubling):
        def __init__(self):
            super().__init__()
            self.supports_masking = False  # __call__ warns the mask is lost

    assert sublayers._attaches_a_mask(NotMasking(), (x,), {"mask": mask})
    # The alignment layers' compute_mask is None: nothing to attach.
    attention = BahdanauAttention(4)
    assert not sublayers._attaches_a_mask(attention, (x, x), {"mask": mask})


def test_zoo_layers_opt_in_and_subclasses_do_not_inherit_it():
    assert MultiHeadAttention.__dict__["_same_when_called_directly"]
    assert TransformerEncoder.__dict__["_same_when_called_directly"]
    assert TransformerDecoder.__dict__["_same_when_called_directly"]
    for cls in (
        TokenEmbedding,
        PositionalEmbedding,
        LearnedPositionEmbedding,
        SinusoidalPositionEncoding,
    ):
        assert cls.__dict__["_same_when_called_directly"]

    class MyAttention(MultiHeadAttention):
        pass

    layer = MyAttention(2, 4)
    x = ops.convert_to_tensor(random_array((1, 3, 8), 2))
    layer(x, x)
    assert not _same(None, layer, x, x)


def _tiny_gpt(policy="float32"):
    """A 2-block GPT on 11 tokens and a (2, 8) batch of ids."""
    keras.utils.set_random_seed(0)
    backbone = GPTBackbone(
        11,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        sequence_length=8,
        dtype=policy,
    )
    ids = ops.convert_to_tensor(
        np.random.default_rng(0).integers(0, 11, (2, 8)).astype("int32")
    )
    return GPT(backbone), ids


def _cached_steps(gpt, ids, position=lambda index: index):
    """Logits and hidden states of cached steps 3-5 and the final cache,
    as float32 NumPy arrays; `position(index)` is what the step is given."""
    _, cache = gpt._build_cache(ids)
    out = []
    for index in range(3, 6):
        logits, hidden, cache = gpt.call_with_cache(
            ids[:, index : index + 1], cache, position(index)
        )
        out += [logits, hidden]
    return [to_numpy(ops.cast(t, "float32")) for t in out + list(cache)]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_cached_gpt_step_is_the_same_with_and_without_direct_calls(policy):
    gpt, ids = _tiny_gpt(policy)
    direct = _cached_steps(gpt, ids)
    with sublayers.through_layer_calls():
        through_call = _cached_steps(gpt, ids)
    assert sublayers._STATE["direct"]  # restored
    for a, b in zip(direct, through_call):
        np.testing.assert_array_equal(a, b)


def _seq2seq_backbone(kind, policy):
    if kind == "rnn":
        return RNNSeq2SeqBackbone(
            13,
            embedding_dim=8,
            encoder_units=6,
            decoder_units=10,
            attention_units=5,
            dropout=0.5,
            encoder_sequence_length=6,
            decoder_sequence_length=6,
            dtype=policy,
        )
    return TransformerSeq2SeqBackbone(
        13,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        encoder_sequence_length=6,
        decoder_sequence_length=6,
        tie_weights=kind == "tied",
        dtype=policy,
    )


@pytest.mark.parametrize("kind", ["tied", "untied", "rnn"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_translation_decode_steps_are_the_same_with_and_without_direct_calls(
    policy, kind
):
    keras.utils.set_random_seed(0)
    backbone = _seq2seq_backbone(kind, policy)
    rng = np.random.default_rng(1)
    source = ops.convert_to_tensor(rng.integers(1, 13, (2, 6)).astype("int32"))
    source_mask = ops.convert_to_tensor(np.arange(6)[None] < [[6], [4]])
    target = ops.convert_to_tensor(rng.integers(1, 13, (2, 6)).astype("int32"))

    def steps():
        encoded = backbone.encode(source, source_mask)
        cache = backbone.decoder_cache(encoded, source_mask, 6)
        out = []
        for index in range(4):
            hidden, cache, scores = backbone.decode_step(
                target[:, index : index + 1],
                cache,
                index,
                return_attention_scores=True,
            )
            out += [hidden, backbone.token_logits(hidden), scores]
        out += keras.tree.flatten(cache)
        return [to_numpy(ops.cast(t, "float32")) for t in out]

    direct = steps()
    with sublayers.through_layer_calls():
        through_call = steps()
    for a, b in zip(direct, through_call):
        np.testing.assert_array_equal(a, b)


def test_without_keras_mask_gives_a_cache_tensor_with_no_mask():
    x = ops.convert_to_tensor(random_array((2, 4, 3), 5))
    mask = ops.convert_to_tensor(np.array([[1, 1, 0, 0], [1, 1, 1, 0]], bool))
    masked = keras.layers.Masking()(x * ops.cast(mask, "float32")[..., None])
    plain = sublayers.without_keras_mask(masked)
    np.testing.assert_array_equal(to_numpy(plain), to_numpy(masked))
    get_mask = keras.src.backend.get_keras_mask
    if TORCH:
        assert get_mask(plain) is None
        assert get_mask(masked) is not None  # the caller's tensor keeps it
        attention = BahdanauAttention(4)
        attention(x, x)
        assert _same(None, attention, x, plain, mask=mask)
        assert not _same(None, attention, x, masked, mask=mask)
    assert sublayers.without_keras_mask(x) is x


def test_concrete_index_reads_a_scalar_position_under_pytorch_only():
    index = ops.convert_to_tensor(np.int32(5))
    out = sublayers.concrete_index(index)
    if TORCH:
        assert type(out) is int and out == 5
    else:  # a traced value in a compiled loop has nothing to read
        assert out is index
    assert sublayers.concrete_index(3) == 3
    positions = ops.convert_to_tensor(np.array([1, 2], "int32"))
    assert sublayers.concrete_index(positions) is positions


def test_decoding_with_a_tensor_position_gives_what_an_int_gives(monkeypatch):
    from zoo.models.gpt import gpt_causal_lm

    gpt, ids = _tiny_gpt()

    def position(index):
        return ops.convert_to_tensor(np.int32(index))

    read = _cached_steps(gpt, ids, position)
    # Without the read: the tensor goes to every op (slice_update's
    # scatter path under PyTorch).
    monkeypatch.setattr(gpt_causal_lm, "concrete_index", lambda index: index)
    for a, b in zip(read, _cached_steps(gpt, ids, position)):
        np.testing.assert_array_equal(a, b)


class _ReadsItsWeight(keras.layers.Layer):
    """Returns its weight as read in `call` (the autocast scope's cast)."""

    _same_when_called_directly = True

    def build(self, input_shape):
        self.w = self.add_weight(shape=(3,), initializer="ones")

    def call(self, x):
        return self.w.value


def _no_grad():
    if TORCH:  # as generation runs
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def test_reused_casts_cast_each_variable_once_under_pytorch():
    layer = _ReadsItsWeight(dtype="mixed_bfloat16")
    x = ops.ones((2, 3), "bfloat16")
    layer.build(x.shape)
    outside = [call_sublayer(None, layer, x) for _ in range(2)]
    assert outside[0] is not outside[1]  # a cast per call
    with sublayers.reused_casts(), _no_grad():
        inside = [call_sublayer(None, layer, x) for _ in range(2)]
        assert keras.backend.standardize_dtype(inside[0].dtype) == "bfloat16"
        if TORCH:  # the one backend whose direct calls open the scope
            assert inside[0] is inside[1]
        # A changed variable is cast again.
        layer.w.assign(np.full(3, 2.0, "float32"))
        changed = call_sublayer(None, layer, x)
        np.testing.assert_array_equal(
            to_numpy(ops.cast(changed, "float32")), [2.0, 2.0, 2.0]
        )
    assert sublayers._STATE["casts"] is None  # freed
    assert call_sublayer(None, layer, x) is not changed


@pytest.mark.skipif(not TORCH, reason="PyTorch's autograd")
def test_reused_casts_keep_no_cast_that_records_a_gradient():
    import torch

    layer = _ReadsItsWeight(dtype="mixed_bfloat16")
    x = ops.ones((2, 3), "bfloat16")
    layer.build(x.shape)
    with sublayers.reused_casts():
        first = call_sublayer(None, layer, x)
        second = call_sublayer(None, layer, x)
        assert first.requires_grad and first is not second
        (first.float().sum() + second.float().sum()).backward()
        np.testing.assert_array_equal(layer.w.value.grad.numpy(), [2, 2, 2])
        with torch.no_grad():
            kept = call_sublayer(None, layer, x)
            assert call_sublayer(None, layer, x) is kept


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_generation_is_the_same_with_and_without_reused_casts(
    policy, monkeypatch
):
    from zoo.models import generation

    gpt, ids = _tiny_gpt(policy)
    prompt = {
        "token_ids": np.concatenate(
            [to_numpy(ids)[:, :3], np.zeros((len(ids), 5), "int32")], axis=1
        )
    }
    prompt["padding_mask"] = np.arange(8)[None, :].repeat(len(ids), 0) < 3
    reused = gpt.generate(dict(prompt), stop_token_ids=None)
    monkeypatch.setattr(generation, "reused_casts", contextlib.nullcontext)
    plain = gpt.generate(dict(prompt), stop_token_ids=None)
    np.testing.assert_array_equal(reused["token_ids"], plain["token_ids"])
